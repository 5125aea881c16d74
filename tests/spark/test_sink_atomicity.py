"""Batch atomicity as a reader sees it: a read_committed consumer polling the sink's output
during the run never sees part of a micro-batch.

Each micro-batch is written by three write tasks (three input partitions), i.e. three Kafka
transactions, into one output partition. The commit's EndTxns are spaced 250 ms apart
(test hook) so that a reader has time to look between them. The reader records how many rows
it had consumed every time it reached the partition's end (librdkafka's partition EOF: its
position reached the last stable offset): with the visibility barrier each of those counts is a
sum of whole micro-batches. The control run without the barrier shows the check sees partial
batches when they happen."""

from __future__ import annotations

import itertools
import os
import threading

import confluent_kafka as ck
import pytest

from ..helpers import create_topic
from .test_sink import produce

ROWS, PER_TRIGGER = 450, 150


def _poll_eof_counts(bootstrap: str, topic: str, stop: threading.Event, seen: list[int]) -> None:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"atomicity-{topic}", "isolation.level": "read_committed",
                     "auto.offset.reset": "earliest", "enable.partition.eof": True, "enable.auto.commit": False,
                     "fetch.wait.max.ms": 10})
    c.assign([ck.TopicPartition(topic, 0, 0)])
    count = 0
    try:
        while not stop.is_set() or count < ROWS:
            msg = c.poll(0.05)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == ck.KafkaError._PARTITION_EOF:
                    seen.append(count)
                    if stop.is_set() and count >= ROWS:
                        break
                continue
            count += 1
    finally:
        c.close()


def _run(spark, broker, tmp_path, uniq, *, barrier: bool) -> tuple[list[int], set[int]]:
    src, out = f"src-{uniq}", f"out-{uniq}"
    create_topic(broker.bootstrap, src, 3)
    create_topic(broker.bootstrap, out, 1)
    produce(broker.bootstrap, src, ROWS, partitions=3)
    stop = threading.Event()
    seen: list[int] = []
    reader = threading.Thread(target=_poll_eof_counts, args=(broker.bootstrap, out, stop, seen), daemon=True)
    reader.start()
    df = (spark.readStream.format("oncelog").option("kafka.bootstrap.servers", broker.bootstrap)
          .option("subscribe", src).option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", PER_TRIGGER).load().selectExpr("key", "value"))
    q = (df.writeStream.format("oncelog").option("kafka.bootstrap.servers", broker.bootstrap)
         .option("topic", out).option("checkpointLocation", str(tmp_path / "ck"))
         .option("oncelog.test.commitStaggerMs", 250).option("oncelog.test.barrier", str(barrier).lower())
         .trigger(availableNow=True).start())
    try:
        assert q.awaitTermination(180), "query did not finish"
        assert q.exception() is None, q.exception()
        sizes = [p["numInputRows"] for p in q.recentProgress]
    finally:
        q.stop()
        stop.set()
    reader.join(60)
    assert not reader.is_alive(), "the reader did not reach the end of the output"
    assert sum(sizes) == ROWS
    whole = set(itertools.accumulate([0, *sizes]))
    return seen, whole


def test_a_polling_reader_never_sees_part_of_a_micro_batch(spark, broker, tmp_path, uniq):
    seen, whole = _run(spark, broker, tmp_path, uniq, barrier=True)
    assert len(whole) >= 4  # several batches, each of three task transactions
    partial = sorted(set(seen) - whole)
    assert not partial, f"a reader saw {partial} rows; whole micro-batches end at {sorted(whole)}"
    assert seen[-1] == ROWS


@pytest.mark.skipif(os.environ.get("ONCELOG_SOAK") != "full", reason="control run: ONCELOG_SOAK=full")
def test_control_without_the_barrier_a_reader_sees_partial_batches(spark, broker, tmp_path, uniq):
    """Shows the check above can fail: without the barrier the staggered EndTxns are visible."""
    seen, whole = _run(spark, broker, tmp_path, uniq, barrier=False)
    assert set(seen) - whole, f"expected partial batches without the barrier; saw {sorted(set(seen))}"
