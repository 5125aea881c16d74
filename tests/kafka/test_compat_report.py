"""docs/COMPATIBILITY.md lists every client version the matrix runs (tests/kafka/compat_report.py)."""

from oncelog.apache_kafka import JAVA_CLIENT_VERSIONS

from .compat_report import COMMITTED, versions_listed


def test_committed_table_lists_every_client_version():
    with open(COMMITTED) as f:
        listed = versions_listed(f.read())
    assert listed == set(JAVA_CLIENT_VERSIONS), (
        f"{COMMITTED} is stale: it lists {sorted(listed)}, the matrix runs {list(JAVA_CLIENT_VERSIONS)}; run "
        "tests/kafka/test_client_versions.py and python -m tests.kafka.compat_report")
