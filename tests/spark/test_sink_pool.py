"""Bounded transactional ids: the exactly-once sink's write tasks take their ids from
a pool (oncelog/spark/txn_pool.py) in every write path: the streaming sink and ``df.write``
from ``foreachBatch`` (txnAppId/txnVersion), micro-batch after micro-batch and run after run.
Read from the broker (ListTransactions: every id it holds, in every state), never from the sink.

The crash matrix with the pool, every point of the commit protocol, is tests/spark/test_sink_crash.py.
"""

from __future__ import annotations

import re

import confluent_kafka as ck
import pytest

from oncelog.audit import audit
from oncelog.client.kafka import KafkaClient
from oncelog.spark.batch_commit import CommitLog
from oncelog.spark.options import DEFAULT_COMMIT_LOG_TOPIC
from oncelog.spark.txn_pool import GENERATIONS, RunHistory

from ..helpers import create_topic
from .jobs import fill_input, root_causes
from .test_sink_partition import query_prefix, source_tagged

pytestmark = pytest.mark.e2e

PARTITIONS = 3
PER_TRIGGER = 60
WAVE = 330  # input records per run: 6 micro-batches of each query


def held_ids(bootstrap: str, prefix: str) -> dict[str, str]:
    """Every transactional id of ``prefix`` the broker holds, with its state."""
    client = KafkaClient(bootstrap)
    try:
        return {tid: state for tid, _pid, state in client.list_transactions()
                if tid == f"{prefix}.barrier" or tid == f"{prefix}.commits" or tid.startswith(prefix + "-")}
    finally:
        client.close()


def task_ids(ids) -> list[tuple[int, int, int]]:
    """(generation, task, attempt) of each pooled task id; fails on any other shape."""
    out = []
    for tid in ids:
        if tid.endswith((".barrier", ".commits")):
            continue
        m = re.fullmatch(r".*-g(\d+)-(\d+)-(\d+)", tid)
        assert m, f"{tid} is not a pooled id"
        out.append(tuple(int(x) for x in m.groups()))
    return out


def produce_more(bootstrap: str, topic: str, n: int) -> int:
    """``n`` more committed records, in transactions of 100."""
    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": f"more-{topic}", "linger.ms": 5})
    p.init_transactions(30)
    for start in range(0, n, 100):
        p.begin_transaction()
        for i in range(start, min(start + 100, n)):
            p.produce(topic, key=b"m%d" % i, value=b"more-%d" % i)
        p.commit_transaction(30)
    return n


def _run_both(spark, bootstrap: str, inp: str, out: str, totals: str, tmp_path, app: str) -> None:
    """One run of each path, Trigger.AvailableNow: the streaming sink and foreachBatch."""

    def write(batch_df, batch_id):
        (batch_df.write.format("oncelog").option("kafka.bootstrap.servers", bootstrap).option("topic", totals)
         .option("txnAppId", app).option("txnVersion", batch_id).mode("append").save())

    stream = (source_tagged(spark, bootstrap, inp, PER_TRIGGER).writeStream.format("oncelog")
              .option("kafka.bootstrap.servers", bootstrap).option("topic", out)
              .option("checkpointLocation", str(tmp_path / "stream")).trigger(availableNow=True).start())
    each = (source_tagged(spark, bootstrap, inp, PER_TRIGGER).writeStream.foreachBatch(write)
            .option("checkpointLocation", str(tmp_path / "each")).trigger(availableNow=True).start())
    for q in (stream, each):
        try:
            try:
                finished = q.awaitTermination(240)
            except Exception as exc:  # the query failed: its causes first, the whole text after
                raise AssertionError(f"{q.name or q.id} failed:\n{root_causes(exc)}") from exc
            assert finished, "the query did not finish"
            assert q.exception() is None, q.exception()
            assert len([p for p in q.recentProgress if p["numInputRows"]]) >= 5, q.recentProgress
        finally:
            q.stop()


def test_ids_are_pooled_across_micro_batches_and_runs(spark, broker, tmp_path, uniq):
    """Two runs of each path, six micro-batches each: the broker then holds, per query,
    at most ``GENERATIONS x write tasks`` task ids plus its decider and its barrier (the earlier
    naming held a new set per run, and per micro-batch for foreachBatch); the first run's ids are
    generation 0, the second run's the other generation, recorded in the decisions; and both
    outputs hold every committed input exactly once (the auditor, read_committed)."""
    inp, out, totals = f"in-{uniq}", f"out-{uniq}", f"totals-{uniq}"
    committed = fill_input(broker.bootstrap, inp, WAVE, abort_every=0)
    create_topic(broker.bootstrap, totals, PARTITIONS)
    app = f"totals-{uniq}"
    _run_both(spark, broker.bootstrap, inp, out, totals, tmp_path, app)
    stream_prefix, each_prefix = query_prefix(str(tmp_path / "stream")), f"oncelog-{app}"
    first = {p: held_ids(broker.bootstrap, p) for p in (stream_prefix, each_prefix)}
    for prefix, ids in first.items():
        assert {g for g, _t, _a in task_ids(ids)} == {0}, ids
        assert f"{prefix}.commits" in ids, ids
    committed += produce_more(broker.bootstrap, inp, WAVE)  # more input: a second run
    _run_both(spark, broker.bootstrap, inp, out, totals, tmp_path, app)
    client = KafkaClient(broker.bootstrap)
    try:
        log = CommitLog(client, broker.bootstrap, DEFAULT_COMMIT_LOG_TOPIC)
        histories = {p: log.latest(p).runs for p in (stream_prefix, each_prefix)}
    finally:
        client.close()
    for prefix in (stream_prefix, each_prefix):
        ids = held_ids(broker.bootstrap, prefix)
        tasks = task_ids(ids)
        assert len(tasks) <= GENERATIONS * PARTITIONS, ids  # no retries here: attempt 0 only
        assert {g for g, _t, _a in tasks} == {0, 1}, ids  # the second run took the other half
        assert len(ids) <= GENERATIONS * PARTITIONS + 2, ids
        assert not [tid for tid, state in ids.items() if state not in ("Empty", "CompleteCommit", "CompleteAbort")], ids
        history = histories[prefix]
        assert isinstance(history, RunHistory) and [g for _r, g in history.runs] == [1, 0], history
    for output in (out, totals):
        d = audit(broker.bootstrap, [inp], [output], timeout=60).to_dict()
        assert d["input_records"] == committed, d
        assert (d["lost"], d["duplicated"], d["aborted_reads"], d["phantom"]) == (0, 0, 0, 0), (output, d)
