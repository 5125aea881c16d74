"""docs/COMPATIBILITY.md lists every client version the matrix runs (tests/kafka/compat_report.py)."""

from oncelog.apache_kafka import JAVA_CLIENT_VERSIONS

from .compat_report import COMMITTED, versions_listed
from .pyclients import PY_CLIENTS


def test_committed_table_lists_every_client_version():
    with open(COMMITTED) as f:
        listed = versions_listed(f.read())
    wanted = {("kafka-clients (Java)", v) for v in JAVA_CLIENT_VERSIONS}
    wanted |= {(c.library, c.resolved_version) for c in PY_CLIENTS}
    assert listed == wanted, (
        f"{COMMITTED} is stale: missing {sorted(wanted - listed)}, extra {sorted(listed - wanted)}; run "
        "tests/kafka/test_client_versions.py and python -m tests.kafka.compat_report")
