"""``atomicity=partition``: each write task commits its rows with a progress marker in one
transaction of its own; a retried or replayed task whose marker shows its batch done writes
nothing. Checked by an independent read_committed reader (the auditor, on confluent-kafka) and
by reading the markers as ordinary consumer-group offsets (kafka-python ``committed()``).

The protocol test needs no Spark; the streaming test runs in the session's SparkSession; the
failure test runs the job in a subprocess (a task failure, then a SIGKILL of its process group)
and restarts it in the session.
"""

from __future__ import annotations

import contextlib
import json
import os

import confluent_kafka as ck
import pyarrow as pa
import pytest

from oncelog.client.kafka import KafkaClient
from oncelog.client.recordcodec import encode_batch, encode_records
from oncelog.spark.batch_commit import CommitLog
from oncelog.spark.options import DEFAULT_COMMIT_LOG_TOPIC
from oncelog.spark.partition_commit import PartitionCommitError, PartitionTransaction, marker_group

from ..helpers import consume_all, create_topic
from .jobs import check_exactly_once, fill_input, run_job, tail

N = 900  # input records over 3 partitions


def fill_plain(bootstrap: str, topic: str, n: int, partitions: int = 3) -> int:
    """Non-transactional input (no control records), so every non-empty offset range has rows."""
    create_topic(bootstrap, topic, partitions)
    create_topic(bootstrap, topic.replace("in-", "out-", 1), partitions)
    p = ck.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, key=b"k%d" % i, value=b"order-%d" % i, partition=i % partitions)
    assert p.flush(30) == 0
    return n


def markers(bootstrap: str, prefix: str, partitions: int, topic: str = DEFAULT_COMMIT_LOG_TOPIC) -> dict[int, tuple]:
    """{write partition: (committed offset, metadata as JSON)}, read by an independent client
    (kafka-python; confluent-kafka's ``committed()`` returns the metadata with stray bytes past
    its end, as librdkafka hands it over unterminated, cf. librdkafka#4649)."""
    from kafka import KafkaConsumer, TopicPartition

    out = {}
    for p in range(partitions):
        c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=marker_group(prefix, p), enable_auto_commit=False)
        try:
            got = c.committed(TopicPartition(topic, 0), metadata=True)
            out[p] = (-1, None) if got is None else (got.offset, json.loads(got.metadata) if got.metadata else None)
        finally:
            c.close()
    return out


def query_prefix(ckpt: str) -> str:
    with open(os.path.join(ckpt, "metadata")) as f:
        return "oncelog-" + json.loads(f.readline())["id"]


def expected_markers(ckpt: str, starts: dict[str, dict[str, int]]) -> dict[int, int]:
    """From the checkpoint's offset log: the last batch in which each write partition (the
    index of a non-empty offset range, in the source's order) had rows, plus one."""
    batches = sorted(int(f) for f in os.listdir(os.path.join(ckpt, "offsets")) if f.isdigit())
    prev = {(t, int(p)): o for t, ps in starts.items() for p, o in ps.items()}
    out: dict[int, int] = {}
    for b in batches:
        with open(os.path.join(ckpt, "offsets", str(b))) as f:
            end = json.loads(f.read().splitlines()[2])
        cur = {(t, int(p)): o for t, ps in end.items() for p, o in ps.items()}
        nonempty = [tp for tp in sorted(cur) if cur[tp] > prev.get(tp, 0)]
        for task in range(len(nonempty)):
            out[task] = b + 1
        prev = cur
    return out


def source_tagged(spark, bootstrap: str, topic: str, per_trigger: int = 300):
    """The crash job's plan (tests/spark/eos_job.py): no shuffle, so write partition p of a
    batch is the source's p-th offset range, the same on replay."""
    return (spark.readStream.format("oncelog").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
            .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", per_trigger).load()
            .selectExpr("key", "upper(cast(value as string)) as value",
                        "array(named_struct('key', 'oncelog.source', 'value', cast(concat(topic, ':', "
                        "cast(partition as string), ':', cast(offset as string)) as binary))) as headers"))


def run_partition_query(spark, bootstrap: str, inp: str, out: str, ckpt: str, per_trigger: int = 300):
    q = (source_tagged(spark, bootstrap, inp, per_trigger).writeStream.format("oncelog").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", out).option("atomicity", "partition").option("checkpointLocation", ckpt)
         .trigger(availableNow=True).start())
    try:
        assert q.awaitTermination(120), "query did not finish"
        assert q.exception() is None, q.exception()
    finally:
        q.stop()
    return q


# ---------------------------------------------------------------------------------------------
# The task's protocol against a real broker (no Spark)


def _write(txn: PartitionTransaction, topic: str, values: list[bytes]) -> None:
    p = txn.producer
    p.add_partitions([(topic, 0)])
    recs = encode_records(None, pa.array(values, pa.binary()), None)
    p.send(topic, 0, encode_batch(recs, len(values), timestamp_ms=0, producer_id=p.producer_id,
                                  producer_epoch=p.producer_epoch, base_sequence=p.next_sequence(topic, 0, len(values)),
                                  transactional=True), len(values))


def test_marker_commits_with_the_rows_and_fences_older_attempts(broker, uniq):
    out, marks, prefix = f"out-{uniq}", f"commits-{uniq}", f"q-{uniq}"
    create_topic(broker.bootstrap, out, 1)
    client = KafkaClient(broker.bootstrap)
    CommitLog(client, broker.bootstrap, marks).ensure_topic()

    def task(batch_id):
        return PartitionTransaction(client, prefix, 0, batch_id, marks, 60_000)

    first = task(3)
    assert first.begin()  # no marker yet
    _write(first, out, [b"a", b"b"])
    first.commit(2)
    # A retry of batch 3 (or a replay of an earlier batch) finds the marker: nothing to write.
    assert not task(3).begin()
    assert not task(2).begin()
    # Batch 4: an attempt that writes and is then superseded by a newer attempt (a zombie): the
    # newer attempt's InitProducerId aborts its transaction and fences it.
    zombie = task(4)
    assert zombie.begin()
    _write(zombie, out, [b"zombie"])
    retry = task(4)
    assert retry.begin()  # the zombie's marker was never committed
    with pytest.raises(PartitionCommitError, match="PRODUCER_FENCED|INVALID_PRODUCER_EPOCH"):
        zombie.commit(1)
    _write(retry, out, [b"c"])
    retry.commit(1)
    rows = consume_all(broker.bootstrap, out, 1, expected=3, timeout=5, isolation="read_committed")[0]
    assert [v for _o, _k, v, _h in rows] == [b"a", b"b", b"c"]
    (offset, meta), = markers(broker.bootstrap, prefix, 1, marks).values()
    assert offset == 5 and meta == {"batchId": 4, "partition": 0, "records": 1}
    client.close()


# ---------------------------------------------------------------------------------------------
# Streaming, in the session's SparkSession


def test_stream_writes_exactly_once_and_a_replayed_batch_writes_nothing(spark, broker, tmp_path, uniq):
    inp, out = f"in-{uniq}", f"out-{uniq}"
    committed = fill_plain(broker.bootstrap, inp, N)
    ckpt = str(tmp_path / "ck")
    q = run_partition_query(spark, broker.bootstrap, inp, out, ckpt)
    batches = [p["batchId"] for p in q.recentProgress if p["numInputRows"] > 0]
    assert len(batches) == 3, q.recentProgress  # 900 records at 300 per trigger
    check_exactly_once(broker.bootstrap, inp, out, committed)
    prefix = query_prefix(ckpt)
    want = expected_markers(ckpt, {inp: {"0": 0, "1": 0, "2": 0}})
    got = markers(broker.bootstrap, prefix, 3)
    assert {p: off for p, (off, _m) in got.items()} == want == {0: 3, 1: 3, 2: 3}
    assert got[1][1] == {"batchId": 2, "partition": 1, "records": 100}

    # A replay of the last batch, as after a driver crash once the tasks committed but before
    # Spark's commit log: its entry is removed and the query restarted on the checkpoint.
    last = max(batches)
    for name in (str(last), f".{last}.crc"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(ckpt, "commits", name))
    q2 = run_partition_query(spark, broker.bootstrap, inp, out, ckpt)
    replayed = [p for p in q2.recentProgress if p["numInputRows"] > 0]
    assert [p["batchId"] for p in replayed] == [last] and replayed[0]["numInputRows"] == 300, q2.recentProgress
    check_exactly_once(broker.bootstrap, inp, out, committed)
    assert {p: off for p, (off, _m) in markers(broker.bootstrap, prefix, 3).items()} == want


# ---------------------------------------------------------------------------------------------
# Real failures: the job (tests/spark/eos_job.py, the same plan as above) runs in a subprocess;
# its first write task fails right after committing (batch 0), and its driver's process group is
# SIGKILLed inside a write task of batch 1 right after that task committed, while the batch's
# other tasks are running or not yet started. The restart is the same query on the same
# checkpoint in this session's SparkSession (another JVM: what a restart is; and one Spark
# start-up less for the CI budget).


def test_task_retry_and_driver_sigkill_after_a_task_committed_write_nothing_twice(spark, broker, tmp_path, uniq):
    inp, out = f"in-{uniq}", f"out-{uniq}"
    committed = fill_input(broker.bootstrap, inp, N)  # transactional input, 1/4 aborted
    ckpt, log = str(tmp_path / "ckpt"), str(tmp_path / "job.log")
    env = {"ONCELOG_SPARK_TASK_FAULT": "raise", "ONCELOG_SPARK_TASK_FAULT_ONCE": str(tmp_path / "task-failed"),
           "ONCELOG_SPARK_CRASH_POINT": "task-committed", "ONCELOG_SPARK_CRASH_ONCE": str(tmp_path / "crashed"),
           "ONCELOG_SPARK_CRASH_AFTER_BATCH": "0"}
    # 450 offsets per trigger: two batches (the crash needs a second one), few batches to pay for.
    rc = run_job(broker.bootstrap, inp, out, ckpt, env=env, log_path=log, atomicity="partition", master="local[2,3]",
                 max_per_trigger=450)
    assert rc == -9, f"expected the crash point to SIGKILL the driver, exit code {rc}\n{tail(log)}"
    assert (tmp_path / "crashed.task-committed").exists()
    # The first task attempt of batch 0 committed, then failed; Spark retried it (batch 0 is
    # in Spark's commit log, so the retry succeeded: it found the marker and wrote nothing).
    assert (tmp_path / "task-failed").exists() and os.path.exists(os.path.join(ckpt, "commits", "0"))
    assert "injected task failure" in tail(log, 2000)
    # Batch 1 has a committed partition and no Spark commit-log entry: the restart replays it.
    assert not os.path.exists(os.path.join(ckpt, "commits", "1")) and os.path.exists(os.path.join(ckpt, "offsets", "1"))
    done_in_1 = [p for p, (off, _m) in markers(broker.bootstrap, query_prefix(ckpt), 3).items() if off == 2]
    assert done_in_1, "no partition of batch 1 was committed before the kill"
    q = run_partition_query(spark, broker.bootstrap, inp, out, ckpt, per_trigger=450)
    assert [p["batchId"] for p in q.recentProgress if p["numInputRows"] > 0][0] == 1, q.recentProgress
    d = check_exactly_once(broker.bootstrap, inp, out, committed)
    assert not d.get("open_transactions"), d
