"""What the source's tests share: producing records with confluent-kafka (:class:`Produced` keeps
what the broker acknowledged), reading them back through Spark in batch and streaming queries,
and looking at a query's checkpoint and the broker's offsets."""

from __future__ import annotations

import os
import threading
import time

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewPartitions
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

from oncelog.client.kafka import READ_COMMITTED, KafkaClient

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
    return [row(r, with_headers) for r in rows]


def row(r, with_headers: bool) -> tuple:
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
            self.batches[batch_id] = [row(r, False) + (r.task,) for r in rows]

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
