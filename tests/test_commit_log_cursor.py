"""The exactly-once sink's commit-log cursor (oncelog/spark/batch_commit.py) outlives a commit:
a reused commit runner keeps it per address and topic. It must never carry a position read on one
cluster over to another cluster that took over the same address (a broker re-created with a new
data directory: a notebook's local Kafka, a test's next broker on a reused port), whose log it
would then read from the middle: the decisions before the stale position unseen, so a query's
latest decision reads as missing, or as an older one. Real brokers, no Spark (the cursor is the
driver's and the commit runner's, plain Python)."""

from __future__ import annotations

import pytest

from oncelog.client.kafka import KafkaClient
from oncelog.process import BrokerProcess, free_ports
from oncelog.spark.batch_commit import DONE, CommitLog, CommitProtocol, Decision

from .helpers import unique

pytestmark = pytest.mark.e2e

TOPIC = "commits"


def _decide(bootstrap: str, prefix: str, batches: range) -> None:
    """Decisions ``batches`` of ``prefix``, each a committed transaction on the commit log."""
    client = KafkaClient(bootstrap)
    try:
        proto = CommitProtocol(client, bootstrap, TOPIC, prefix, 60_000)
        proto.log.ensure_topic()
        proto.decider.init()
        for batch in batches:
            proto._write(Decision(batch, DONE, []))
        proto.close()
    finally:
        client.close()


def _latest(bootstrap: str, prefix: str) -> Decision | None:
    client = KafkaClient(bootstrap)
    try:
        return CommitLog(client, bootstrap, TOPIC).latest(prefix)
    finally:
        client.close()


def test_a_cursor_read_on_one_cluster_is_not_used_on_another_at_the_same_address(tmp_path):
    uniq = unique("")
    port = free_ports(1)
    first = BrokerProcess(str(tmp_path / "first"), port=port, fsync="never").start()
    try:
        _decide(first.bootstrap, f"old-{uniq}", range(20))
        assert _latest(first.bootstrap, f"old-{uniq}").batch_id == 19  # the cursor is ~40 offsets in
    finally:
        first.kill()
    second = BrokerProcess(str(tmp_path / "second"), port=port, fsync="never").start()
    try:
        assert second.bootstrap == first.bootstrap
        # This query's decisions first, then enough of another's that the log's end passes the
        # first cluster's position: a stale cursor would start reading after this query's last.
        _decide(second.bootstrap, f"q-{uniq}", range(5))
        _decide(second.bootstrap, f"filler-{uniq}", range(30))
        latest = _latest(second.bootstrap, f"q-{uniq}")
        assert latest is not None and latest.batch_id == 4, latest
        assert _latest(second.bootstrap, f"old-{uniq}") is None  # nothing of the first cluster's log
    finally:
        second.kill()
