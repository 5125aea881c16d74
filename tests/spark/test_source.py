"""``format("oncelog")`` as a source: real broker processes, real local Spark, real clients.

Every expectation is computed from what the test produced (offsets from confluent-kafka's
delivery reports, timestamps it set, transactions it committed or aborted), never typed in.
Streaming tests prefer ``trigger(availableNow=True)``; the few that need a running query use a
processing-time trigger and poll for the condition they wait for. Queries are always stopped.
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
from confluent_kafka.admin import AdminClient, NewPartitions
from pyspark.errors import StreamingQueryException
from pyspark.sql.datasource import CaseInsensitiveDict
from pyspark.sql.streaming.datasource import ReadMaxRows
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from oncelog.client.kafka import LATEST, READ_COMMITTED, KafkaClient
from oncelog.spark import offsets as off
from oncelog.spark.source import OncelogStreamReader
from oncelog.spark.options import source_options
from tests.helpers import create_topic

TIMEOUT = 240  # seconds for one query on a loaded 2-core machine; tests normally take a few

KAFKA_SCHEMA = StructType([
    StructField("key", BinaryType()), StructField("value", BinaryType()), StructField("topic", StringType()),
    StructField("partition", IntegerType()), StructField("offset", LongType()),
    StructField("timestamp", TimestampType()), StructField("timestampType", IntegerType()),
])
KAFKA_SCHEMA_WITH_HEADERS = StructType(KAFKA_SCHEMA.fields + [
    StructField("headers", ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())])))])

# The columns a test compares: timestamps as epoch milliseconds (the unit Kafka stores).
COLUMNS = ["topic", "partition", "offset", "key", "value", "unix_millis(timestamp) as ts", "timestampType"]


# ---------------------------------------------------------------------------------------------
# Producing


class Produced:
    """Records acknowledged by the broker, as (topic, partition, offset, key, value, ts, headers)."""

    def __init__(self) -> None:
        self.records: list[tuple] = []
        self.lock = threading.Lock()

    def callback(self, headers):
        def on_delivery(err, msg):
            if err is not None:
                raise AssertionError(f"delivery failed: {err}")
            with self.lock:
                self.records.append((msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value(),
                                     msg.timestamp()[1], headers or []))
        return on_delivery

    def rows(self, *, topic=None, partition=None, start=0, end=None, with_headers=False):
        out = []
        for t, p, o, k, v, ts, h in sorted(self.records, key=lambda r: (r[0], r[1], r[2])):
            if (topic is None or t == topic) and (partition is None or p == partition) and o >= start \
                    and (end is None or o < end):
                out.append((t, p, o, k, v, ts, 0) + ((h,) if with_headers else ()))
        return out


def produce(bootstrap: str, topic: str, n: int, *, partitions: list[int] = (0,), produced: Produced | None = None,
            prefix: str = "v", keyed: bool = True, headers: bool = False, timestamp=None, compression: str = "none",
            producer: ck.Producer | None = None, batch_per_record: bool = False) -> Produced:
    """``n`` records round-robin over ``partitions`` with confluent-kafka; returns what was
    acknowledged. With ``producer`` (e.g. a transactional one) nothing is flushed here; with
    ``batch_per_record`` each record is flushed alone (a record batch of its own)."""
    produced = produced or Produced()
    p = producer or ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "compression.type": compression,
                                 "enable.idempotence": True})
    for i in range(n):
        key = f"k{i}".encode() if keyed and i % 5 else None
        value = None if i % 17 == 16 else f"{prefix}{i}-".encode() * (1 + i % 7)
        hs = None
        if headers and i % 3:
            hs = [("h1", f"{i}".encode()), ("nullable", None if i % 2 else b""), ("h1", b"dup")]
        kwargs = {"timestamp": timestamp(i)} if timestamp else {}
        p.produce(topic, value=value, key=key, partition=partitions[i % len(partitions)], headers=hs,
                  on_delivery=produced.callback(hs), **kwargs)
        p.poll(0)
        if batch_per_record:
            assert p.flush(60) == 0
    if producer is None:
        assert p.flush(60) == 0
    return produced


def transactional_producer(bootstrap: str, txn_id: str) -> ck.Producer:
    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5})
    p.init_transactions(60)
    return p


def add_partitions(bootstrap: str, topic: str, total: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the future is done
    admin.create_partitions([NewPartitions(topic, total)])[topic].result(60)


# ---------------------------------------------------------------------------------------------
# Reading through Spark


def source_options_for(broker, **options) -> dict[str, str]:
    out = {"kafka.bootstrap.servers": broker.bootstrap}
    out.update({k: str(v) for k, v in options.items()})
    return out


def batch_read(spark, broker, *, with_headers: bool = False, **options) -> list[tuple]:
    df = spark.read.format("oncelog").options(**source_options_for(broker, **options)).load()
    cols = COLUMNS + (["headers"] if with_headers else [])
    rows = df.selectExpr(*cols).collect()
    return [_row(r, with_headers) for r in rows]


def _row(r, with_headers: bool) -> tuple:
    t = (r.topic, r.partition, r.offset, None if r.key is None else bytes(r.key),
         None if r.value is None else bytes(r.value), r.ts, r.timestampType)
    if with_headers:
        t += ([(h.key, None if h.value is None else bytes(h.value)) for h in r.headers],)
    return t


def by_offset(rows):
    return sorted(rows, key=lambda r: (r[0], r[1], r[2]))


class Collector:
    """A foreachBatch sink (it runs in this driver process): the rows of every batch, with the
    Spark task (input partition) each row was read in."""

    def __init__(self) -> None:
        self.batches: dict[int, list[tuple]] = {}
        self.lock = threading.Lock()

    def __call__(self, df, batch_id: int) -> None:
        rows = df.selectExpr(*COLUMNS, "spark_partition_id() as task").collect()
        with self.lock:
            self.batches[batch_id] = [_row(r, False) + (r.task,) for r in rows]

    def rows(self):
        with self.lock:
            return [r[:7] for b in sorted(self.batches) for r in self.batches[b]]

    def count(self) -> int:
        with self.lock:
            return sum(len(b) for b in self.batches.values())


def stream(spark, broker, **options):
    return spark.readStream.format("oncelog").options(**source_options_for(broker, **options)).load()


def run_available_now(spark, broker, checkpoint, *, sink=None, **options):
    """One availableNow run to completion; returns (collector, progress list)."""
    collector = Collector()
    df = stream(spark, broker, **options)
    writer = df.writeStream.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True)
    writer = writer.format(sink) if sink else writer.foreachBatch(collector)
    q = writer.start()
    try:
        assert q.awaitTermination(TIMEOUT), "availableNow query did not terminate"
        assert q.exception() is None, q.exception()
        return collector, list(q.recentProgress)
    finally:
        q.stop()


def wait_for(condition, timeout: float = TIMEOUT, what: str = "condition", query=None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        if query is not None and query.exception() is not None:
            raise AssertionError(f"query failed while waiting for {what}: {query.exception()}")
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def checkpoint_offsets(checkpoint) -> dict[int, str]:
    """batch id -> the source offset JSON line of ``offsets/<id>``, exactly as stored."""
    out = {}
    d = os.path.join(str(checkpoint), "offsets")
    for name in os.listdir(d):
        if name.isdigit():
            with open(os.path.join(d, name)) as f:
                out[int(name)] = f.read().splitlines()[2]
    return out


def forget_commit(checkpoint, batch_id: int) -> None:
    """Remove ``commits/<batch_id>`` (and its checksum): a restart runs that batch again."""
    for name in (str(batch_id), f".{batch_id}.crc"):
        path = os.path.join(str(checkpoint), "commits", name)
        if os.path.exists(path):
            os.remove(path)


def topics(broker) -> set[str]:
    client = KafkaClient(broker.bootstrap)
    try:
        return set(client.metadata(None))
    finally:
        client.close()


def list_offsets(broker, tps, spec: int, isolation: int = READ_COMMITTED) -> dict:
    client = KafkaClient(broker.bootstrap)
    try:
        return {tp: o for tp, (o, _ts) in client.list_offsets({tp: spec for tp in tps}, isolation).items()}
    finally:
        client.close()


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
    assert by_offset([_row(r, False) for r in rows]) == produced.rows()
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
