"""docs/COMPATIBILITY.md lists every client version the matrix runs and every engine check (tests/kafka/compat_report.py)."""

from oncelog.tools.apache_kafka import JAVA_CLIENT_VERSIONS

from .compat_report import COMMITTED, engines_listed, versions_listed
from .pyclients import PY_CLIENTS


def test_committed_table_lists_every_client_version():
    with open(COMMITTED) as f:
        listed = versions_listed(f.read())
    wanted = {("kafka-clients (Java)", v) for v in JAVA_CLIENT_VERSIONS}
    wanted |= {(c.library, c.resolved_version) for c in PY_CLIENTS}
    assert listed == wanted, (
        f"{COMMITTED} is stale: missing {sorted(wanted - listed)}, extra {sorted(listed - wanted)}; run "
        "tests/kafka/test_client_versions.py and python -m tests.kafka.compat_report")


def test_committed_table_lists_every_engine_check():
    from . import test_flink, test_kafka_connect, test_kafka_streams

    with open(COMMITTED) as f:
        listed = engines_listed(f.read())
    wanted = {(test_flink.ENGINE, test_flink.setup_label(s), c) for s in test_flink.SETUPS for c in test_flink.CHECKS}
    wanted |= {(test_kafka_streams.ENGINE, v, test_kafka_streams.CHECK) for v in test_kafka_streams.VERSIONS}
    wanted.add((test_kafka_streams.STREAMS_PROTOCOL_ENGINE, test_kafka_streams.STREAMS_PROTOCOL_VERSION,
                test_kafka_streams.CHECK))
    wanted.add((test_kafka_connect.ENGINE, test_kafka_connect.VERSION, test_kafka_connect.CHECK))
    assert listed == wanted, (
        f"{COMMITTED} is stale: missing {sorted(wanted - listed)}, extra {sorted(listed - wanted)}; run the engine "
        "tests (tests/kafka/test_flink.py, test_kafka_streams.py, test_kafka_connect.py) and python -m "
        "tests.kafka.compat_report")
