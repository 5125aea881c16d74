"""``format("oncelog")`` as a source: real broker processes, real local Spark, real clients.

Every expectation is computed from what the test produced (offsets from confluent-kafka's
delivery reports, timestamps it set, transactions it committed or aborted), never typed in.
Streaming tests prefer ``trigger(availableNow=True)``; the few that need a running query use a
processing-time trigger and poll for the condition they wait for. Queries are always stopped.
The log and the query changing under the source (new partitions and topics, data loss, replays):
tests/spark/test_source_changes.py; what both modules share: tests/spark/source_helpers.py.
"""

from __future__ import annotations

import functools
import json
import os
import threading
import time

import confluent_kafka as ck
import pyarrow as pa
import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql.datasource import CaseInsensitiveDict
from pyspark.sql.streaming.datasource import ReadMaxRows

from oncelog.client.kafka import LATEST
from oncelog.spark import offsets as off
from oncelog.spark.options import source_options
from oncelog.spark.source import OncelogStreamReader
from tests.helpers import create_topic

from .source_helpers import (
    COLUMNS,
    KAFKA_SCHEMA,
    KAFKA_SCHEMA_WITH_HEADERS,
    TIMEOUT,
    Collector,
    Produced,
    batch_read,
    by_offset,
    checkpoint_offsets,
    list_offsets,
    produce,
    row,
    run_available_now,
    source_options_for,
    stream,
    transactional_producer,
    wait_for,
)


# ---------------------------------------------------------------------------------------------
# Schema and values


def test_schema_and_values_match_what_was_produced(spark, broker, uniq):
    topic = f"values-{uniq}"
    create_topic(broker.bootstrap, topic, 4)
    produced = Produced()
    base = int(time.time() * 1000) - 3_600_000
    # one producer per compression codec, each into its own partition
    for p, codec in enumerate(["gzip", "snappy", "lz4", "zstd"]):
        produce(broker.bootstrap, topic, 150, partitions=[p], produced=produced, headers=True, compression=codec,
                timestamp=lambda i, p=p: base + 1000 * p + i, prefix=f"{codec}-")
    df = spark.read.format("oncelog").options(**source_options_for(broker, subscribe=topic)).load()
    assert df.schema == KAFKA_SCHEMA
    dfh = spark.read.format("oncelog").options(**source_options_for(broker, subscribe=topic, includeHeaders="true")).load()
    assert dfh.schema == KAFKA_SCHEMA_WITH_HEADERS
    assert stream(spark, broker, subscribe=topic).schema == KAFKA_SCHEMA
    assert stream(spark, broker, subscribe=topic, includeHeaders="true").schema == KAFKA_SCHEMA_WITH_HEADERS

    got = batch_read(spark, broker, subscribe=topic, includeHeaders="true", with_headers=True)
    want = produced.rows(with_headers=True)
    assert len(want) == 600
    assert by_offset(got) == want
    assert any(r[3] is None for r in got) and any(r[4] is None for r in got)
    assert any(h[1] is None for r in got for h in r[7]) and any(h[1] == b"" for r in got for h in r[7])
    assert by_offset(batch_read(spark, broker, subscribe=topic)) == produced.rows()


def test_log_append_time_topic(spark, broker, uniq):
    topic = f"logappend-{uniq}"
    create_topic(broker.bootstrap, topic, 1, config={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    produced = produce(broker.bootstrap, topic, 20, timestamp=lambda i: 1000 + i)
    after = int(time.time() * 1000)
    got = by_offset(batch_read(spark, broker, subscribe=topic))
    assert [r[2:5] for r in got] == [r[2:5] for r in produced.rows()]
    assert {r[6] for r in got} == {1}  # LogAppendTime
    assert all(before - 1000 <= r[5] <= after + 1000 for r in got)  # the broker's clock, not 1000 + i


def test_option_errors_reach_the_user(spark, broker, tmp_path):
    with pytest.raises(Exception, match="subscribePattern"):
        spark.read.format("oncelog").option("kafka.bootstrap.servers", broker.bootstrap).load().collect()
    q = None
    with pytest.raises(Exception, match="maxOffsetsPerTrigger"):
        q = (stream(spark, broker, subscribe="x", maxOffsetsPerTrigger="many").writeStream.format("noop")
             .option("checkpointLocation", str(tmp_path / "ckpt")).start())
        q.awaitTermination(TIMEOUT)
    if q is not None:
        q.stop()


def test_readers_pickle_without_clients_and_read_yields_arrow_batches(broker, uniq):
    # Spark cloudpickles the reader built in a planner worker and calls read() on a fresh copy
    # in every task: nothing unpicklable may exist before read(), and read() yields Arrow
    # batches in exactly the schema Spark checks (timestamp[us, tz=UTC], int32, nullable).
    from pyspark import cloudpickle
    from pyspark.sql.pandas.types import to_arrow_schema

    import oncelog.client.kafka as client_module
    from oncelog.spark.datasource import OncelogDataSource
    from oncelog.spark.source import OncelogBatchReader

    topic = f"pickle-{uniq}"
    create_topic(broker.bootstrap, topic, 2)
    produced = produce(broker.bootstrap, topic, 40, partitions=[0, 1], headers=True)
    for with_headers in (False, True):
        options = source_options_for(broker, subscribe=topic, startingOffsets="earliest",
                                     includeHeaders=str(with_headers).lower())
        ds = OncelogDataSource(CaseInsensitiveDict(options))  # as Spark builds it
        schema = KAFKA_SCHEMA_WITH_HEADERS if with_headers else KAFKA_SCHEMA
        client_module._CLIENTS.clear()
        stream_reader = cloudpickle.loads(cloudpickle.dumps(ds.streamReader(schema)))
        batch_reader = cloudpickle.loads(cloudpickle.dumps(ds.reader(schema)))
        assert isinstance(batch_reader, OncelogBatchReader)
        assert client_module._CLIENTS == {}  # no client was made by building or pickling
        start = stream_reader.initialOffset()
        end = stream_reader.latestOffset(start, ReadMaxRows(1000))
        parts = stream_reader.partitions(start, end)
        assert parts == stream_reader.partitions(start, end)
        stream_reader.stop()
        task_copy = cloudpickle.loads(cloudpickle.dumps(stream_reader))  # as shipped to a task
        rows = []
        for part in cloudpickle.loads(cloudpickle.dumps(parts)):
            for batch in task_copy.read(part):
                assert isinstance(batch, pa.RecordBatch)
                assert batch.schema.equals(to_arrow_schema(schema, timezone="UTC"))
                rows += batch.to_pylist()
        got = [(r["topic"], r["partition"], r["offset"], r["key"], r["value"],
                round(r["timestamp"].timestamp() * 1000), r["timestampType"])
               + (([(h["key"], h["value"]) for h in r["headers"]],) if with_headers else ()) for r in rows]
        assert by_offset(got) == produced.rows(with_headers=with_headers)
        assert [p for p in parts] == [p for p in batch_reader.partitions()]


# ---------------------------------------------------------------------------------------------
# Transactions and isolation


def test_read_committed_hides_aborted_records_and_read_uncommitted_shows_them(spark, broker, uniq, tmp_path):
    topic = f"iso-{uniq}"
    create_topic(broker.bootstrap, topic, 2)
    committed = produce(broker.bootstrap, topic, 30, partitions=[0, 1], prefix="plain-")
    txp = transactional_producer(broker.bootstrap, f"txn-{uniq}")
    aborted = Produced()
    for round_ in range(3):
        txp.begin_transaction()
        produce(broker.bootstrap, topic, 20, partitions=[0, 1], produced=committed, prefix=f"commit{round_}-",
                producer=txp)
        assert txp.flush(60) == 0
        txp.commit_transaction(60)
        txp.begin_transaction()
        produce(broker.bootstrap, topic, 15, partitions=[0, 1], produced=aborted, prefix=f"abort{round_}-",
                producer=txp)
        txp.flush(60)
        txp.abort_transaction(60)
    produce(broker.bootstrap, topic, 10, partitions=[0, 1], produced=committed, prefix="tail-")
    assert len(aborted.records) == 45

    got = by_offset(batch_read(spark, broker, subscribe=topic))
    assert got == committed.rows()
    every = by_offset(batch_read(spark, broker, subscribe=topic, **{"kafka.isolation.level": "read_uncommitted"}))
    both = Produced()
    both.records = committed.records + aborted.records
    assert every == both.rows()

    collector, _ = run_available_now(spark, broker, tmp_path / "ckpt", subscribe=topic, startingOffsets="earliest")
    assert by_offset(collector.rows()) == committed.rows()


def test_stops_at_the_open_transaction_then_continues_after_its_commit(spark, broker, uniq, tmp_path):
    topic = f"lso-{uniq}"
    create_topic(broker.bootstrap, topic, 1)
    produced = produce(broker.bootstrap, topic, 10, prefix="before-")
    txp = transactional_producer(broker.bootstrap, f"open-{uniq}")
    txp.begin_transaction()
    produce(broker.bootstrap, topic, 5, produced=produced, prefix="txn-", producer=txp)
    assert txp.flush(60) == 0  # in the log, not committed: the last stable offset stays at its start
    produce(broker.bootstrap, topic, 10, produced=produced, prefix="after-")  # past the LSO
    txn_start = min(o for t, p, o, k, v, ts, h in produced.records if v and v.startswith(b"txn-"))
    lso = list_offsets(broker, [(topic, 0)], LATEST)[(topic, 0)]
    assert lso == txn_start == 10
    checkpoint = tmp_path / "ckpt"
    try:
        first, _ = run_available_now(spark, broker, checkpoint, subscribe=topic, startingOffsets="earliest")
        assert by_offset(first.rows()) == produced.rows(end=lso)
        last = checkpoint_offsets(checkpoint)
        assert json.loads(last[max(last)]) == {topic: {"0": lso}}
    finally:
        txp.commit_transaction(60)
    second, _ = run_available_now(spark, broker, checkpoint, subscribe=topic, startingOffsets="earliest")
    assert by_offset(second.rows()) == produced.rows(start=lso)
    assert len(first.rows()) + len(second.rows()) == 25


def test_a_partition_of_only_aborted_records_does_not_hang(spark, broker, uniq, tmp_path):
    topic = f"onlyaborted-{uniq}"
    create_topic(broker.bootstrap, topic, 2)
    txp = transactional_producer(broker.bootstrap, f"aborter-{uniq}")
    for _ in range(2):
        txp.begin_transaction()
        produce(broker.bootstrap, topic, 40, partitions=[0], prefix="aborted-", producer=txp)
        txp.flush(60)
        txp.abort_transaction(60)
    plain = produce(broker.bootstrap, topic, 10, partitions=[1])
    ends = list_offsets(broker, [(topic, 0), (topic, 1)], LATEST)
    assert ends[(topic, 0)] == 2 * (40 + 1)  # two transactions of 40 records and their abort markers
    assert by_offset(batch_read(spark, broker, subscribe=topic)) == plain.rows()
    collector, progress = run_available_now(spark, broker, tmp_path / "ckpt", subscribe=topic,
                                            startingOffsets="earliest", maxOffsetsPerTrigger=30)
    assert by_offset(collector.rows()) == plain.rows()
    last = checkpoint_offsets(tmp_path / "ckpt")
    assert off.from_json(last[max(last)]) == ends
    assert len(collector.batches) >= 3  # partition 0's 82 offsets over several batches of at most 30


# ---------------------------------------------------------------------------------------------
# Rate limits


def test_max_offsets_per_trigger_per_batch(spark, broker, uniq, tmp_path):
    topic = f"ratelimit-{uniq}"
    create_topic(broker.bootstrap, topic, 3)
    produced = Produced()
    for p, n in enumerate([300, 100, 20]):
        produce(broker.bootstrap, topic, n, partitions=[p], produced=produced)
    tps = [(topic, p) for p in range(3)]
    latest = list_offsets(broker, tps, LATEST)
    limit = 50
    checkpoint = tmp_path / "ckpt"
    _, progress = run_available_now(spark, broker, checkpoint, sink="noop", subscribe=topic,
                                    startingOffsets="earliest", maxOffsetsPerTrigger=limit)
    offsets = checkpoint_offsets(checkpoint)
    ids = sorted(offsets)
    assert ids == list(range(len(ids)))
    # each batch's end is Spark's rate limit of its start (the previous end) against what was there
    prev = {tp: 0 for tp in tps}
    spans = []
    for i in ids:
        end = off.from_json(offsets[i])
        assert offsets[i] == json.dumps(off.canonical(end))  # canonical JSON as stored
        assert end == off.rate_limit(prev, latest, limit)
        spans.append(off.total_lag(prev, end))
        prev = end
    assert prev == latest
    assert sum(spans) == 420
    # and the rows Spark counted per batch are exactly those spans (no transactions here)
    rows_by_batch = {p["batchId"]: p["numInputRows"] for p in progress}
    assert [rows_by_batch[i] for i in ids] == spans
    assert max(spans) <= limit + 3  # shares below one are rounded up, as in Spark
    assert len(ids) >= 420 // (limit + 3)


def test_min_offsets_per_trigger_waits_for_max_trigger_delay(spark, broker, uniq, tmp_path):
    topic = f"minrows-{uniq}"
    create_topic(broker.bootstrap, topic, 1)
    produced = produce(broker.bootstrap, topic, 30)
    delay_s = 4
    collector = Collector()
    started = time.monotonic()
    q = (stream(spark, broker, subscribe=topic, startingOffsets="earliest", minOffsetsPerTrigger=100,
                maxTriggerDelay=f"{delay_s}s")
         .writeStream.option("checkpointLocation", str(tmp_path / "ckpt")).foreachBatch(collector)
         .trigger(processingTime="200 milliseconds").start())
    try:
        wait_for(lambda: collector.count() >= 30, what="the first 30 rows", query=q)
        assert time.monotonic() - started >= delay_s  # fewer than 100 waited for the delay
        assert [len(b) for b in collector.batches.values() if b] == [30]  # then all in one batch
        produce(broker.bootstrap, topic, 150, produced=produced, prefix="more-")
        wait_for(lambda: collector.count() >= 180, what="the next 150 rows", query=q)
        assert by_offset(collector.rows()) == produced.rows()
    finally:
        q.stop()


def test_min_offsets_per_trigger_counts_available_offsets_not_the_rate_limited_batch(broker, uniq):
    # Spark's delayBatch decides on what is available (here 300 >= 10): the batch runs, rate
    # limited to 3 x floor(10/3) = 9 offsets. Comparing the 9 with the minimum instead would
    # hold the query back until maxTriggerDelay (15 min by default).
    topic = f"minmax-{uniq}"
    create_topic(broker.bootstrap, topic, 3)
    produce(broker.bootstrap, topic, 300, partitions=[0, 1, 2])
    reader = OncelogStreamReader(source_options(CaseInsensitiveDict(source_options_for(
        broker, subscribe=topic, startingOffsets="earliest", minOffsetsPerTrigger=10, maxOffsetsPerTrigger=10,
        maxTriggerDelay="1h"))))
    try:
        start = reader.initialOffset()
        assert off.from_json(start) == {(topic, p): 0 for p in range(3)}
        end = reader.latestOffset(start, ReadMaxRows(10))
        assert off.total_lag(off.from_json(start), off.from_json(end)) == 9
    finally:
        reader.stop()


# ---------------------------------------------------------------------------------------------
# Starting offsets


def test_initial_offset_latest_is_deterministic_across_restarts(broker, uniq):
    # Spark calls initialOffset() twice at a query's start, and again when a restart replays
    # batch 0; it does not checkpoint a source's start. With startingOffsets=latest every call
    # must give the same answer, so the start is the LATEST sentinel: the first latestOffset()
    # fixes the positions (checkpointed as batch 0's end) and batch 0 reads nothing.
    topic = f"initial-{uniq}"
    create_topic(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, topic, 10, partitions=[0, 1])
    reader = OncelogStreamReader(source_options(CaseInsensitiveDict(source_options_for(broker, subscribe=topic))))
    try:
        first = reader.initialOffset()
        assert off.from_json(first) == {(topic, 0): off.LATEST, (topic, 1): off.LATEST}
        end = reader.latestOffset(first, ReadMaxRows(1000))
        assert off.from_json(end) == list_offsets(broker, [(topic, 0), (topic, 1)], LATEST)
        assert reader.partitions(first, end) == []  # batch 0 is empty
        produce(broker.bootstrap, topic, 10, partitions=[0, 1])
        assert reader.initialOffset() == first  # a restart replaying batch 0 plans the same batch
        nxt = reader.latestOffset(end, ReadMaxRows(1000))
        assert off.total_lag(off.from_json(end), off.from_json(nxt)) == 10
    finally:
        reader.stop()


def test_batch_read_with_json_offsets_is_repeatable(spark, broker, uniq):
    topic = f"json-{uniq}"
    create_topic(broker.bootstrap, topic, 3)
    produced = produce(broker.bootstrap, topic, 300, partitions=[0, 1, 2])
    start = {topic: {"0": 10, "1": -2, "2": 40}}
    end = {topic: {"0": 50, "1": -1, "2": 41}}
    options = dict(subscribe=topic, startingOffsets=json.dumps(start), endingOffsets=json.dumps(end))
    first = batch_read(spark, broker, **options)
    want = produced.rows(partition=0, start=10, end=50) + produced.rows(partition=1) + produced.rows(partition=2, start=40, end=41)
    assert by_offset(first) == want
    # the same range read again gives the same rows in the same order (deterministic partitions)
    assert batch_read(spark, broker, **options) == first
    # assign picks partitions; endingOffsets default to the latest
    got = batch_read(spark, broker, assign=json.dumps({topic: [2]}), startingOffsets=json.dumps({topic: {"2": 90}}))
    assert by_offset(got) == produced.rows(partition=2, start=90)
    with pytest.raises(Exception, match="endingOffsets"):
        batch_read(spark, broker, subscribe=topic, startingOffsets=json.dumps({topic: {"0": 20}}),
                   endingOffsets=json.dumps({topic: {"0": 5}}))


def _from_timestamp(produced: Produced, partition: int, ts: int) -> list[tuple]:
    """Kafka's rule: from the first record whose timestamp is at least ``ts``, everything."""
    rows = produced.rows(partition=partition)
    first = next((r[2] for r in rows if r[5] >= ts), None)
    return [] if first is None else [r for r in rows if r[2] >= first]


def test_starting_timestamp(spark, broker, uniq, tmp_path):
    topic = f"ts-{uniq}"
    create_topic(broker.bootstrap, topic, 2)
    base = int(time.time() * 1000) - 600_000
    # one record per batch: oncelog's ListOffsets answers at batch granularity (see the xfail below)
    produced = produce(broker.bootstrap, topic, 80, partitions=[0, 1], timestamp=lambda i: base + 10 * i,
                       batch_per_record=True)
    from_ts = functools.partial(_from_timestamp, produced)
    cut = base + 10 * 37 + 5  # between two records
    got = by_offset(batch_read(spark, broker, subscribe=topic, startingTimestamp=cut))
    assert got == from_ts(0, cut) + from_ts(1, cut)
    assert 0 < len(got) < 80
    per = {topic: {"0": base + 10 * 20, "1": base + 10 * 61}}
    got = by_offset(batch_read(spark, broker, subscribe=topic, startingOffsetsByTimestamp=json.dumps(per)))
    assert got == from_ts(0, per[topic]["0"]) + from_ts(1, per[topic]["1"])
    collector, _ = run_available_now(spark, broker, tmp_path / "ckpt", subscribe=topic, startingTimestamp=cut)
    assert by_offset(collector.rows()) == from_ts(0, cut) + from_ts(1, cut)


def test_starting_timestamp_inside_a_batch(spark, broker, uniq):
    topic = f"tsbatch-{uniq}"
    create_topic(broker.bootstrap, topic, 1)
    base = int(time.time() * 1000) - 600_000
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 1000, "batch.num.messages": 100})
    produced = produce(broker.bootstrap, topic, 50, timestamp=lambda i: base + 10 * i, producer=p)
    assert p.flush(60) == 0
    cut = base + 10 * 20 + 5
    got = by_offset(batch_read(spark, broker, subscribe=topic, startingTimestamp=cut))
    assert got == _from_timestamp(produced, 0, cut)


# ---------------------------------------------------------------------------------------------
# What a new Spark user tried: empty ranges, the options Spark's Kafka source has,
# errors at load(), retried offset look-ups, and format("oncelog") with no register call


def test_batch_reads_of_empty_ranges_return_no_rows(spark, broker, uniq):
    # PySpark hands a batch read that planned no partition one bare InputPartition(None)
    empty, full = f"empty-{uniq}", f"full-{uniq}"
    create_topic(broker.bootstrap, empty, 2)
    create_topic(broker.bootstrap, full, 1)
    base = int(time.time() * 1000) - 600_000
    produce(broker.bootstrap, full, 10, timestamp=lambda i: base + i, batch_per_record=True)
    assert batch_read(spark, broker, subscribe=empty) == []
    same = json.dumps({full: {"0": 4}})
    assert batch_read(spark, broker, subscribe=full, startingOffsets=same, endingOffsets=same) == []
    # a starting timestamp after the last record: with strategy latest, the end (no rows) ...
    assert batch_read(spark, broker, subscribe=full, startingTimestamp=base + 60_000,
                      startingOffsetsByTimestampStrategy="latest") == []
    # ... with Spark's default strategy (error), the reason
    with pytest.raises(Exception, match=rf"No offset matched from request of topic-partition {full}-0 and "
                                        rf"timestamp {base + 60_000}") as err:
        batch_read(spark, broker, subscribe=full, startingTimestamp=base + 60_000)
    assert "as_range" not in str(err.value)
    # a starting timestamp inside the data still reads
    assert [r[2] for r in by_offset(batch_read(spark, broker, subscribe=full, startingTimestamp=base + 7))] == [7, 8, 9]


def test_ending_timestamp_and_ending_offsets_by_timestamp(spark, broker, uniq):
    topic = f"endts-{uniq}"
    create_topic(broker.bootstrap, topic, 2)
    base = int(time.time() * 1000) - 600_000
    produced = produce(broker.bootstrap, topic, 80, partitions=[0, 1], timestamp=lambda i: base + 10 * i,
                       batch_per_record=True)

    def until(partition: int, ts: int, start_ts: int | None = None) -> list[tuple]:
        """Kafka's rule: the end is the first record whose timestamp is at least ``ts``."""
        rows = produced.rows(partition=partition)
        end = next((r[2] for r in rows if r[5] >= ts), None)
        first = 0 if start_ts is None else next((r[2] for r in rows if r[5] >= start_ts), None)
        return [r for r in rows if r[2] >= first and (end is None or r[2] < end)]

    cut = base + 10 * 41 + 5
    got = by_offset(batch_read(spark, broker, subscribe=topic, endingTimestamp=cut))
    assert got == until(0, cut) + until(1, cut)
    assert 0 < len(got) < 80
    # after the last record: everything (the end of the log, as Spark)
    assert len(batch_read(spark, broker, subscribe=topic, endingTimestamp=base + 60_000)) == 80
    start_ts, end_ts = {"0": base + 10 * 10, "1": base + 10 * 21}, {"0": base + 10 * 30, "1": base + 10 * 21}
    got = by_offset(batch_read(spark, broker, subscribe=topic, startingOffsetsByTimestamp=json.dumps({topic: start_ts}),
                               endingOffsetsByTimestamp=json.dumps({topic: end_ts})))
    assert got == until(0, end_ts["0"], start_ts["0"]) + until(1, end_ts["1"], start_ts["1"])
    assert got and not until(1, end_ts["1"], start_ts["1"])  # an empty partition range next to a full one


def _tasks_per_batch(collector: Collector) -> dict[int, int]:
    with collector.lock:
        return {b: len({r[7] for r in rows}) for b, rows in collector.batches.items() if rows}


def test_min_partitions_and_max_records_per_partition_split_read_tasks(spark, broker, uniq, tmp_path):
    topic = f"split-{uniq}"
    create_topic(broker.bootstrap, topic, 2)
    produced = produce(broker.bootstrap, topic, 100, partitions=[0, 0, 0, 1])  # 75 and 25 records
    opts = source_options_for(broker, subscribe=topic, minPartitions=5)
    df = spark.read.format("oncelog").options(**opts).load()
    # total 100 < 5 ranges: 1-0 gets round(25/100*5) = 1 part, 0-0 the other 4
    assert df.rdd.getNumPartitions() == 5
    rows = df.selectExpr(*COLUMNS, "spark_partition_id() as task").collect()
    assert by_offset([row(r, False) for r in rows]) == produced.rows()
    assert len({r.task for r in rows if r.partition == 0}) == 4
    df = spark.read.format("oncelog").options(**source_options_for(broker, subscribe=topic, maxRecordsPerPartition=10)).load()
    assert df.rdd.getNumPartitions() == 8 + 3  # ceil(75/10) + ceil(25/10)
    assert by_offset(batch_read(spark, broker, subscribe=topic, maxRecordsPerPartition=10)) == produced.rows()
    # streaming: every micro-batch is split the same way
    collector, _ = run_available_now(spark, broker, tmp_path / "ckpt", subscribe=topic, startingOffsets="earliest",
                                     maxRecordsPerPartition=20, maxOffsetsPerTrigger=60)
    assert by_offset(collector.rows()) == produced.rows()
    with collector.lock:
        sizes = {b: len(rows) for b, rows in collector.batches.items()}
    assert sizes[0] == 60
    assert _tasks_per_batch(collector)[0] == 3 + 1  # 45 of 0-0 in ceil(45/20) tasks, 15 of 1-0 in one


def test_option_errors_surface_at_load_with_a_clean_message(spark, broker, tmp_path):
    for reader in (spark.read, spark.readStream):
        with pytest.raises(Exception) as err:
            (reader.format("oncelog").option("kafka.bootstrap.servers", broker.bootstrap).option("subscribe", "t")
             .option("startingOffsets", "first").load())
        text = str(err.value)
        assert "option startingOffsets='first' must be earliest, latest or JSON" in text
        assert "UnboundLocalError" not in text
        with pytest.raises(Exception, match="unknown source option endingtimestmap"):
            (reader.format("oncelog").option("kafka.bootstrap.servers", broker.bootstrap).option("subscribe", "t")
             .option("endingTimestmap", "5").load())
    # kafka.* checked as the Java client checks its configuration (tests/spark/test_kafka_options.py)
    for fresh in (lambda: spark.read, lambda: spark.readStream):  # a reader keeps its options: a new one each
        with pytest.raises(Exception, match=r"kafka\.isolaton\.level is not a Kafka client configuration .*"
                                            r"did you mean kafka\.isolation\.level"):
            (fresh().format("oncelog").option("kafka.bootstrap.servers", broker.bootstrap).option("subscribe", "t")
             .option("kafka.isolaton.level", "read_committed").load())
        with pytest.raises(Exception, match=r"Invalid value abc for configuration fetch\.max\.wait\.ms: Not a number"):
            (fresh().format("oncelog").option("kafka.bootstrap.servers", broker.bootstrap).option("subscribe", "t")
             .option("kafka.fetch.max.wait.ms", "abc").load())
    # a rule of one mode waits for the query of that mode: no PySpark UnboundLocalError after it
    df = stream(spark, broker, subscribe="t", endingOffsets="latest")
    q = df.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ck")).start()
    try:
        with pytest.raises(StreamingQueryException) as err:
            q.awaitTermination(TIMEOUT)
        text = str(err.value)
    finally:
        q.stop()
    assert "option endingOffsets is for batch queries (spark.read) only" in text
    assert "UnboundLocalError" not in text
    with pytest.raises(Exception, match="startingOffsets=latest is not allowed for a batch query"):
        batch_read(spark, broker, subscribe="t", startingOffsets="latest")


def test_driver_offset_lookups_retry_across_a_broker_restart(broker, uniq):
    from oncelog.spark.source import OffsetPlanner

    topic = f"restart-{uniq}"
    create_topic(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, topic, 30, partitions=[0, 1])
    tps = [(topic, 0), (topic, 1)]
    want = list_offsets(broker, tps, LATEST)
    patient = OffsetPlanner(source_options(CaseInsensitiveDict(source_options_for(
        broker, subscribe=topic, **{"fetchOffset.numRetries": 600, "fetchOffset.retryIntervalMs": 100}))))
    once = OffsetPlanner(source_options(CaseInsensitiveDict(source_options_for(
        broker, subscribe=topic, **{"fetchOffset.numRetries": 1}))))
    assert patient.available(patient.partitions()) == want  # connected before the restart
    broker.kill()
    with pytest.raises(OSError):  # one attempt: a refused connection ends the look-up
        once.available(tps)
    result: dict = {}

    def plan():
        try:
            result["offsets"] = patient.available(patient.partitions())
        except BaseException as exc:  # reported below
            result["error"] = exc

    t = threading.Thread(target=plan)
    t.start()
    broker.restart()  # same port
    t.join(TIMEOUT)
    assert not t.is_alive()
    assert result == {"offsets": want}
    patient.close()
    once.close()


def test_pyspark_finds_the_data_source_without_a_register_call():
    # PySpark's own lookup (lookup_data_sources._main, run in a Python worker once per
    # application): importable pyspark_* modules exposing a DataSource named DefaultSource
    import io
    import tomllib

    from pyspark import cloudpickle
    from pyspark.serializers import read_int
    from pyspark.sql.worker.lookup_data_sources import _main
    from setuptools import find_packages

    from oncelog.spark.datasource import OncelogDataSource
    from tests.spark.conftest import ROOT

    out = io.BytesIO()
    _main(io.BytesIO(), out)
    out.seek(0)
    found = {}
    for _ in range(read_int(out)):
        name = out.read(read_int(out)).decode()
        found[name] = cloudpickle.loads(out.read(read_int(out)))
    assert found["oncelog"] is OncelogDataSource
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        include = tomllib.load(f)["tool"]["setuptools"]["packages"]["find"]["include"]
    assert "pyspark_oncelog" in find_packages(ROOT, include=include)  # shipped in the wheel


def test_format_oncelog_works_in_a_fresh_application_without_register(broker, uniq, tmp_path):
    import subprocess
    import sys

    from tests.spark.conftest import driver_java_options, spark_env

    topic = f"auto-{uniq}"
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, 12)
    script = tmp_path / "job.py"
    script.write_text(f"""
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.driver.extraJavaOptions", {driver_java_options()!r}).getOrCreate())
n = (spark.read.format("oncelog").option("kafka.bootstrap.servers", {broker.bootstrap!r})
     .option("subscribe", {topic!r}).load().count())
print("ROWS", n)
spark.stop()
""")
    # cwd elsewhere: the package is found on the workers' sys.path (PYTHONPATH here, site-packages
    # for an installed oncelog), not because the job runs from the checkout
    done = subprocess.run([sys.executable, str(script)], cwd=str(tmp_path), env=spark_env(), capture_output=True,
                          text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ROWS 12" in done.stdout


def test_a_worker_python_without_oncelog_is_refused_at_register_saying_what_to_do(spark, tmp_path):
    import stat
    import sys

    from oncelog.spark import OncelogDataSource
    from oncelog.spark.workerpython import WorkerPythonError, worker_python_problem

    # a real interpreter that cannot import oncelog nor pyarrow: isolated, without site-packages
    bare = tmp_path / "bare-python"
    bare.write_text(f'#!/bin/sh\nexec {sys.executable} -I -S "$@"\n')
    bare.chmod(bare.stat().st_mode | stat.S_IEXEC)
    assert worker_python_problem(sys.executable) is None
    problem = worker_python_problem(str(bare))
    assert "cannot import oncelog and pyarrow" in problem and "PYSPARK_PYTHON" in problem
    assert "No module named" not in problem
    sc = spark.sparkContext
    before = sc.pythonExec
    sc.pythonExec = str(bare)  # what SparkContext takes from PYSPARK_PYTHON
    try:
        with pytest.raises(WorkerPythonError, match=f"set PYSPARK_PYTHON .* e.g. PYSPARK_PYTHON={sys.executable}"):
            spark.dataSource.register(OncelogDataSource)
    finally:
        sc.pythonExec = before
    spark.dataSource.register(OncelogDataSource)
