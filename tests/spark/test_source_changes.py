"""``format("oncelog")`` as a source while the log and the query change under it: partitions and
topics added to a running query, records and topics deleted (``failOnDataLoss``), restarts that
replay a micro-batch, ``Trigger.AvailableNow`` while data keeps arriving. Real broker processes,
real local Spark, real clients, as in tests/spark/test_source.py (whose rules hold here too).
"""

from __future__ import annotations

import json
import threading
import time

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient
from pyspark.errors import StreamingQueryException

from tests.helpers import create_topic

from .source_helpers import (
    TIMEOUT,
    Collector,
    add_partitions,
    by_offset,
    checkpoint_offsets,
    forget_commit,
    produce,
    run_available_now,
    stream,
    topics,
    wait_for,
)


# ---------------------------------------------------------------------------------------------
# New partitions and topics


def test_running_query_picks_up_new_partitions_and_topics_from_earliest(spark, broker, uniq, tmp_path):
    prefix = f"grow-{uniq}"
    topic = f"{prefix}-a"
    create_topic(broker.bootstrap, topic, 1)
    old = produce(broker.bootstrap, topic, 20, prefix="old-")  # before the start: not read (latest)
    collector = Collector()
    q = (stream(spark, broker, subscribePattern=f"{prefix}-.*")
         .writeStream.option("checkpointLocation", str(tmp_path / "ckpt")).foreachBatch(collector)
         .trigger(processingTime="300 milliseconds").start())
    try:
        wait_for(lambda: 0 in collector.batches, what="the first (empty) batch", query=q)
        produced = produce(broker.bootstrap, topic, 10, prefix="p0-")
        wait_for(lambda: collector.count() >= 10, what="rows of the existing partition", query=q)
        add_partitions(broker.bootstrap, topic, 12)
        produce(broker.bootstrap, topic, 110, partitions=list(range(1, 12)), produced=produced, prefix="new-")
        other = f"{prefix}-b"
        create_topic(broker.bootstrap, other, 2)
        produce(broker.bootstrap, other, 30, partitions=[0, 1], produced=produced, prefix="b-")
        create_topic(broker.bootstrap, f"nomatch-{uniq}", 1)
        produce(broker.bootstrap, f"nomatch-{uniq}", 5)
        wait_for(lambda: collector.count() >= 150, what="rows of the new partitions and topic", query=q)
        time.sleep(1)  # nothing else may arrive (no duplicates, nothing from other topics)
        got = by_offset(collector.rows())
        assert got == produced.rows()
        assert min(r[2] for r in got if r[0] == other) == 0
        assert all(min(r[2] for r in got if r[0] == topic and r[1] == p) == 0 for p in range(1, 12))
        assert not set(r[2] for r in got if r[1] == 0 and r[0] == topic) & set(r[2] for r in old.rows())
    finally:
        q.stop()
    offsets = checkpoint_offsets(tmp_path / "ckpt")
    last = offsets[max(offsets)]
    assert list(json.loads(last)) == [topic, other]
    assert list(json.loads(last)[topic]) == [str(p) for p in range(12)]  # "10" after "9"


def test_available_now_restart_picks_up_newly_matching_topic(spark, broker, uniq, tmp_path):
    prefix = f"pat-{uniq}"
    create_topic(broker.bootstrap, f"{prefix}-1", 1)
    produced = produce(broker.bootstrap, f"{prefix}-1", 20)
    checkpoint = tmp_path / "ckpt"
    first, _ = run_available_now(spark, broker, checkpoint, subscribePattern=f"{prefix}-.*", startingOffsets="earliest")
    assert by_offset(first.rows()) == produced.rows()
    more = produce(broker.bootstrap, f"{prefix}-1", 5, prefix="more-")
    create_topic(broker.bootstrap, f"{prefix}-2", 3)
    produce(broker.bootstrap, f"{prefix}-2", 30, partitions=[0, 1, 2], produced=more)
    create_topic(broker.bootstrap, f"x{prefix}-3", 1)
    produce(broker.bootstrap, f"x{prefix}-3", 5)
    second, _ = run_available_now(spark, broker, checkpoint, subscribePattern=f"{prefix}-.*", startingOffsets="earliest")
    assert by_offset(second.rows()) == more.rows()


# ---------------------------------------------------------------------------------------------
# Data loss


def _delete_records(bootstrap: str, topic: str, partition: int, before: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = ck.TopicPartition(topic, partition, before)
    admin.delete_records([tp])[tp].result(60)


def _failed_run(spark, broker, checkpoint, **options) -> str:
    df = stream(spark, broker, **options)
    q = df.writeStream.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).format("noop").start()
    try:
        with pytest.raises(StreamingQueryException) as e:
            q.awaitTermination(TIMEOUT)
        return str(e.value)
    finally:
        q.stop()


def test_fail_on_data_loss_after_delete_records(spark, broker, uniq, tmp_path):
    topic = f"deleted-records-{uniq}"
    create_topic(broker.bootstrap, topic, 1)
    produced = produce(broker.bootstrap, topic, 100)
    checkpoint = tmp_path / "ckpt"
    first, _ = run_available_now(spark, broker, checkpoint, subscribe=topic, startingOffsets="earliest")
    assert len(first.rows()) == 100
    produce(broker.bootstrap, topic, 100, produced=produced, prefix="second-")
    _delete_records(broker.bootstrap, topic, 0, 150)
    # failOnDataLoss=true (the default): the query fails, naming the partition and what is gone
    message = _failed_run(spark, broker, checkpoint, subscribe=topic)
    assert f"{topic}-0" in message and "offsets 100 to 149" in message and "150" in message
    # the same checkpoint with failOnDataLoss=false: the batch runs again, skips what is gone
    again, _ = run_available_now(spark, broker, checkpoint, subscribe=topic, failOnDataLoss="false")
    assert by_offset(again.rows()) == produced.rows(start=150)


def test_fail_on_data_loss_after_a_topic_is_deleted(spark, broker, uniq, tmp_path):
    keep, gone = f"keep-{uniq}", f"gone-{uniq}"
    create_topic(broker.bootstrap, keep, 1)
    create_topic(broker.bootstrap, gone, 1)
    produced = produce(broker.bootstrap, keep, 10)
    produce(broker.bootstrap, gone, 10)
    checkpoint = tmp_path / "ckpt"
    first, _ = run_available_now(spark, broker, checkpoint, subscribe=f"{keep},{gone}", startingOffsets="earliest")
    assert len(first.rows()) == 20
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.delete_topics([gone])[gone].result(60)
    wait_for(lambda: gone not in topics(broker), what="the topic deletion")
    more = produce(broker.bootstrap, keep, 10, prefix="more-")
    message = _failed_run(spark, broker, checkpoint, subscribe=f"{keep},{gone}")
    assert f"{gone}-0" in message and "offsets from 10" in message
    again, _ = run_available_now(spark, broker, checkpoint, subscribe=f"{keep},{gone}", failOnDataLoss="false")
    assert by_offset(again.rows()) == more.rows()


# ---------------------------------------------------------------------------------------------
# Replay and Trigger.AvailableNow


def test_restart_replays_the_last_batch_with_the_same_rows(spark, broker, uniq, tmp_path):
    topic = f"replay-{uniq}"
    create_topic(broker.bootstrap, topic, 2)
    produced = produce(broker.bootstrap, topic, 300, partitions=[0, 1])
    checkpoint = tmp_path / "ckpt"
    options = dict(subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger=100)
    first, _ = run_available_now(spark, broker, checkpoint, **options)
    assert by_offset(first.rows()) == produced.rows()
    last = max(first.batches)
    assert last >= 2
    offsets_before = checkpoint_offsets(checkpoint)
    # forget that the last batch was committed: the restart must run it again, same (start, end)
    forget_commit(checkpoint, last)
    produce(broker.bootstrap, topic, 50, partitions=[0, 1], prefix="later-")  # not part of the replay
    replay, _ = run_available_now(spark, broker, checkpoint, **options)
    assert min(replay.batches) == last
    # identical rows, read by the same tasks (partitions() is deterministic), in the same order
    assert replay.batches[last] == first.batches[last]
    assert checkpoint_offsets(checkpoint)[last] == offsets_before[last]
    assert len(replay.rows()) == len(first.batches[last]) + 50


def test_available_now_terminates_while_data_keeps_arriving(spark, broker, uniq, tmp_path):
    topic = f"endless-{uniq}"
    create_topic(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, topic, 400, partitions=[0, 1])
    stop = threading.Event()

    def keep_producing():
        p = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
        i = 0
        while not stop.is_set():
            p.produce(topic, value=f"late-{i}".encode(), partition=i % 2)
            p.poll(0)
            i += 1
            time.sleep(0.005)
        p.flush(60)

    thread = threading.Thread(target=keep_producing, daemon=True)
    thread.start()
    try:
        collector, progress = run_available_now(spark, broker, tmp_path / "ckpt", subscribe=topic,
                                                startingOffsets="earliest", maxOffsetsPerTrigger=100)
    finally:
        stop.set()
        thread.join(60)
    rows = by_offset(collector.rows())
    assert len(rows) >= 400
    for p in (0, 1):  # every offset from 0 up to where the run stopped, once
        offsets = [r[2] for r in rows if r[1] == p]
        assert offsets == list(range(len(offsets)))
    assert len(collector.batches) >= 4


def test_replay_after_the_topic_was_recreated_smaller(spark, broker, uniq, tmp_path):
    # A restart re-executes the last batch with its planned (start, end); if the topic was
    # deleted and recreated with fewer records meanwhile, the end is past the new log's end.
    # failOnDataLoss decides: fail naming what is gone, or skip it; never wait for it.
    topic = f"recreated-{uniq}"
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, 50)
    checkpoint = tmp_path / "ckpt"
    first, _ = run_available_now(spark, broker, checkpoint, subscribe=topic, startingOffsets="earliest")
    assert len(first.rows()) == 50 and list(first.batches) == [0]
    forget_commit(checkpoint, 0)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.delete_topics([topic])[topic].result(60)
    wait_for(lambda: topic not in topics(broker), what="the topic deletion")
    create_topic(broker.bootstrap, topic, 1)
    produced = produce(broker.bootstrap, topic, 10, prefix="new-")
    started = time.monotonic()
    message = _failed_run(spark, broker, checkpoint, subscribe=topic, startingOffsets="earliest")
    assert f"{topic}-0" in message and "offsets 10 to 49" in message
    again, _ = run_available_now(spark, broker, checkpoint, subscribe=topic, startingOffsets="earliest",
                                 failOnDataLoss="false")
    # the replayed batch reads what the range now holds, and the query goes on
    assert by_offset(again.rows()) == produced.rows()
    assert time.monotonic() - started < 100  # no wait for the poll timeout (120 s)
