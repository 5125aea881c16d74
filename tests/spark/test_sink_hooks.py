"""The sink's seam for tests (:mod:`oncelog.spark.faults`): the commit protocol tells a hooks object
each named point and goes on; what a test does there (stop, wait, commit part of a batch) is the
hooks', never the protocol's. Here in-process, without Spark: the hooks of the crash test
``between-commits`` (tests/spark/test_sink_crash.py kills a real driver there) stop a commit after
its first EndTxn, and the next run's recovery rolls the decided batch forward, every row visible.
"""

from __future__ import annotations

import pytest

from oncelog.client.kafka import KafkaClient
from oncelog.spark import faults
from oncelog.spark.batch_commit import PENDING, CommitProtocol, Txn

from ..helpers import consume_all, create_topic
from .test_sink import open_txn


class DriverDied(Exception):
    """Stands for the SIGKILL of the driver at a point."""


class StopBetweenCommits(faults.SinkHooks):
    """What EnvHooks does for ``ONCELOG_SPARK_CRASH_POINT=between-commits``, in-process."""

    def __init__(self) -> None:
        self.points: list[tuple[str, int | None]] = []

    def at(self, point, batch_id=None, protocol=None, decision=None) -> None:
        self.points.append((point, batch_id))
        if point == "after-decision":
            first = decision.txns[0]
            protocol.client.end_txn(first.transactional_id, first.producer_id, first.producer_epoch, commit=True)
            raise DriverDied(point)


def test_hooks_stop_a_commit_between_its_endtxns_and_the_next_run_rolls_the_batch_forward(broker, uniq):
    topic = f"out-{uniq}"
    create_topic(broker.bootstrap, topic, 1)
    client = KafkaClient(broker.bootstrap)
    prefix = f"q-{uniq}"
    try:
        txns = [open_txn(client, f"{prefix}-g0-{t}-0", topic, [b"t%d" % t]) for t in range(2)]
        hooks = StopBetweenCommits()
        proto = CommitProtocol(client, broker.bootstrap, f"commits-{uniq}", prefix, 60_000, hooks=hooks)
        with pytest.raises(DriverDied):
            proto.commit(3, [Txn(p.transactional_id, p.producer_id, p.producer_epoch) for p in txns], "run0")
        assert hooks.points == [("after-decision", 3)]
        states = {tid: s for tid, _pid, s in client.list_transactions()}
        assert states[txns[1].transactional_id] == "Ongoing"  # the second never got its EndTxn
        assert proto.log.latest(prefix).state == PENDING

        # the next run (the process's own hooks: none asked for) finishes the decided batch
        after = CommitProtocol(client, broker.bootstrap, f"commits-{uniq}", prefix, 60_000)
        assert after.recover() == "rolled forward batch 3"
        rows = consume_all(broker.bootstrap, topic, 1, expected=2, timeout=10, isolation="read_committed")[0]
        assert sorted(v for _o, _k, v, _h in rows) == [b"t0", b"t1"]
        assert after.log.latest(prefix).state == "done"
    finally:
        client.close()


def test_the_environment_is_read_once_by_envhooks_and_install_replaces_the_process_hooks(tmp_path):
    env = {"ONCELOG_SPARK_CRASH_POINT": "after-decision,between-commits", "ONCELOG_SPARK_CRASH_AFTER_BATCH": "2",
           "ONCELOG_SPARK_COMMIT_PAUSE": str(tmp_path), "ONCELOG_SPARK_COMMIT_PAUSE_BATCHES": "1,2"}
    h = faults.EnvHooks(env)
    assert h.crash_wanted("between-commits") and not h.crash_wanted("task-write")
    assert h.crash_after == 2 and h.pause_batches == ["1", "2"]
    assert faults.EnvHooks.wanted(env) and not faults.EnvHooks.wanted({})

    mine = faults.SinkHooks()
    old = faults.install(mine)
    try:
        assert faults.hooks() is mine
        faults.crash_point("after-decision", 9)  # the sink's point reaches the installed hooks: nothing
    finally:
        faults.install(old)
