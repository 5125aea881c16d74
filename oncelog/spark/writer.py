"""The write task: rows in, record batches out, a commit message back to the driver.

:class:`TaskWriter` encodes the Arrow batches Spark hands a write task into Kafka record batches
in bulk and produces them (pipelined, one open transaction or none); :class:`SinkCommitMessage`
is what the task returns, pickled to the driver's ``commit()``; :class:`WriteTask` says which task
this is. What the task does with them (an open transaction for the driver to commit, its own
transaction with a progress marker, or plain produce) is the sink mode's: :mod:`.modes`.

Input columns are those of Spark's Kafka sink: ``value`` (string or binary, required), ``key``
(string or binary), ``topic`` (string; the ``topic`` option overrides it), ``partition`` (int)
and ``headers`` (array<struct<key string, value binary>>), checked on the driver at start
(:func:`check_schema`). Rows without a partition go where Kafka's default partitioner puts them:
murmur2 of the key, or a sticky partition per Arrow batch for null keys.

Broker failures: a task asks for leaders and coordinators afresh (:func:`task_client`), and a
task that fails on a network error drops its worker's cached client so that Spark's retry of it
(``spark.task.maxFailures``) starts from the bootstrap servers.
"""

from __future__ import annotations

import logging
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from kio.schema.errors import ErrorCode

from ..client.kafka import (RETRIABLE, KafkaClient, KafkaProtocolError, TransactionalProducer, cached_client,
                            evict_client)
from ..client.partitioner import partitions_for_keys
from ..client.recordcodec import HEADER_TYPE, _Blobs, column, encode_batch, encode_records, record_sizes, split_rows
from ..protocol.records import compress_records
from .options import SinkOptions

log = logging.getLogger("oncelog.spark")


class SinkSchemaError(ValueError):
    """The DataFrame written to the sink lacks a column or has one of the wrong type."""


def check_schema(schema, opts: SinkOptions) -> None:
    """Fail at start, naming the column, as Spark's Kafka sink does."""
    from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

    fields = {f.name.lower(): f.dataType for f in schema.fields}
    if "value" not in fields:
        raise SinkSchemaError("required attribute 'value' not found in the DataFrame written to oncelog "
                              f"(columns: {', '.join(schema.fieldNames())})")
    for name in ("value", "key"):
        if name in fields and not isinstance(fields[name], (StringType, BinaryType)):
            raise SinkSchemaError(f"{name} attribute type must be a string or binary, got {fields[name].simpleString()}")
    if opts.topic is None:
        if "topic" not in fields:
            raise SinkSchemaError("topic option required when no 'topic' attribute is present "
                                  "(set .option('topic', ...) or add a topic column)")
    if "topic" in fields and not isinstance(fields["topic"], StringType):
        raise SinkSchemaError(f"topic attribute type must be a string, got {fields['topic'].simpleString()}")
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise SinkSchemaError(f"partition attribute type must be an int, got {fields['partition'].simpleString()}")
    if "headers" in fields:
        h = fields["headers"]
        ok = (isinstance(h, ArrayType) and isinstance(h.elementType, StructType)
              and [f.name for f in h.elementType.fields] == ["key", "value"]
              and isinstance(h.elementType.fields[0].dataType, StringType)
              and isinstance(h.elementType.fields[1].dataType, BinaryType))
        if not ok:
            raise SinkSchemaError("headers attribute type must be array<struct<key:string,value:binary>>, "
                                  f"got {h.simpleString()}")


# ---------------------------------------------------------------------------------------------
# Commit messages (pickled from the tasks to the driver)

try:
    from pyspark.sql.datasource import WriterCommitMessage
except ImportError:  # pragma: no cover - the client layer works without pyspark
    WriterCommitMessage = object  # type: ignore[misc,assignment]


@dataclass(frozen=True)
class SinkCommitMessage(WriterCommitMessage):
    prefix: str
    run_id: str
    partition_id: int
    attempt: int
    txn: tuple[str, int, int] | None  # (transactional id, producer id, epoch); None: nothing written
    records: int
    partitions: tuple[tuple[str, int], ...] = ()
    # The batch's visibility barrier (oncelog.spark.barrier), opened by the driver before the
    # tasks and carried through them to commit(), which runs in another process.
    barrier: tuple[str, int, int] | None = None
    committed_by_task: bool = False  # atomicity=partition: the task committed its transaction itself
    skipped: bool = False  # atomicity=partition: the marker showed this batch done; nothing written
    batch_id: int | None = None  # the micro-batch the task wrote (None: a df.write outside a stream)
    generation: int = 0  # atomicity=batch: the half of the query's id pool the task's id is from


@dataclass(frozen=True)
class WriteTask:
    """Which write task this is, read once from Spark's TaskContext in the task's process."""

    prefix: str  # the query's transactional-id prefix
    run_id: str  # this run of the query (a df.write: of this write)
    partition_id: int
    attempt: int
    batch_id: int | None  # streaming.sql.batchId; None outside a streaming write

    @classmethod
    def current(cls, prefix: str | None, run_id: str) -> "WriteTask":
        """``prefix`` None: ``oncelog-<query id>``. The run: inside a streaming query (a
        micro-batch of the streaming sink, or a ``df.write`` from ``foreachBatch``, whose jobs
        carry the stream's local properties) the query's run, Spark's job group of its
        micro-batches (``runId``); outside one, ``run_id`` (a batch writer's, made once on the
        driver), else a new one."""
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if prefix is None:
            query_id = ctx.getLocalProperty("sql.streaming.queryId") if ctx else None
            prefix = f"oncelog-{query_id}"
        if ctx is not None and ctx.getLocalProperty("sql.streaming.queryId"):
            run_id = (ctx.getLocalProperty("spark.jobGroup.id") or "")[:8] or run_id
        batch_id = ctx.getLocalProperty("streaming.sql.batchId") if ctx else None
        return cls(prefix, run_id or uuid.uuid4().hex[:8], ctx.partitionId() if ctx else 0,
                   ctx.attemptNumber() if ctx else 0, int(batch_id) if batch_id else None)

    def message(self, txn: tuple[str, int, int] | None, records: int, **more) -> SinkCommitMessage:
        return SinkCommitMessage(self.prefix, self.run_id, self.partition_id, self.attempt, txn, records,
                                 batch_id=self.batch_id, **more)


# ---------------------------------------------------------------------------------------------
# Rows to record batches


class TaskWriter:
    """Encodes and sends the rows of one write task."""

    def __init__(self, client: KafkaClient, opts: SinkOptions, transactional_id: str | None) -> None:
        self.client = client
        self.opts = opts
        self.transactional_id = transactional_id
        self.producer: TransactionalProducer | None = None
        self.sticky: dict[str, int] = {}
        self.records = 0
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        self._pending_bytes = 0

    def _producer(self) -> TransactionalProducer:
        if self.producer is None:
            txn_id = self.transactional_id
            self.producer = TransactionalProducer(self.client, txn_id or "", self.opts.transaction_timeout_ms)
            if txn_id is not None:
                self.producer.init()
        return self.producer

    def _num_partitions(self, topic: str) -> int:
        meta = self.client.topics.get(topic)
        deadline = time.monotonic() + 10
        while meta is None:
            # As a Kafka producer does: a broker with auto.create.topics.enable creates it.
            found = self.client.metadata([topic], auto_create=True).get(topic)
            if found is not None and found.error.value == 0 and found.partitions:
                meta = found
            elif time.monotonic() > deadline:
                raise ValueError(f"topic {topic!r} does not exist and the broker did not create it "
                                 f"({found.error.name.upper() if found is not None else 'no metadata'}): create it first")
            else:
                time.sleep(0.1)
        return len(meta.partitions)

    # Spark hands the writer Arrow batches of at most spark.sql.execution.arrow.maxRecordsPerBatch
    # (10,000) rows; encoding and sending them in larger chunks halves the per-row cost of the
    # numpy/Arrow steps and sends fuller produce requests. Bounded: rows and bytes per chunk.
    CHUNK_ROWS = 100_000
    CHUNK_BYTES = 16 * 1024 * 1024

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        self._pending.append(batch)
        self._pending_rows += batch.num_rows
        self._pending_bytes += batch.nbytes
        if self._pending_rows >= self.CHUNK_ROWS or self._pending_bytes >= self.CHUNK_BYTES:
            self._drain()

    def _drain(self) -> None:
        if not self._pending:
            return
        batches, self._pending = self._pending, []
        self._pending_rows = self._pending_bytes = 0
        if len(batches) == 1:
            batch = batches[0]
        else:
            batch = pa.Table.from_batches(batches).combine_chunks().to_batches(max_chunksize=1 << 40)[0]
        self._write_chunk(batch)

    def _write_chunk(self, batch: pa.RecordBatch) -> None:
        names = {name.lower(): i for i, name in enumerate(batch.schema.names)}
        if self.opts.topic is not None:
            groups = [(self.opts.topic, None)]
        else:
            topics = batch.column(names["topic"])
            if topics.null_count:
                raise ValueError("null topic in a row written to oncelog (and no topic option)")
            uniq = pc.unique(topics)
            # Compared with the Arrow scalar uniq[i], not a Python str (pyarrow would import pandas to convert it).
            groups = [(uniq[0].as_py(), None)] if len(uniq) == 1 else [
                (uniq[i].as_py(), pc.equal(topics, uniq[i])) for i in range(len(uniq))]
        for topic, mask in groups:
            sub = batch if mask is None else batch.filter(mask)
            self._write_topic(topic, sub, names)

    def _write_topic(self, topic: str, batch: pa.RecordBatch, names: dict[str, int]) -> None:
        n = batch.num_rows
        col = lambda name: batch.column(names[name]) if name in names else None  # noqa: E731
        num = self._num_partitions(topic)
        part = np.full(n, -1, dtype=np.int64)
        pcol = col("partition")
        if pcol is not None:
            given = pcol.to_numpy(zero_copy_only=False)
            valid = ~pcol.is_null().to_numpy(zero_copy_only=False) if pcol.null_count else np.ones(n, bool)
            part = np.where(valid, np.nan_to_num(given, nan=-1).astype(np.int64), -1)
            bad = part[(part >= num) | ((part < 0) & valid)]
            if len(bad):
                raise ValueError(f"partition {int(bad[0])} does not exist in topic {topic!r} ({num} partitions)")
        todo = part < 0
        if todo.any():
            keys = col("key")
            kb = _Blobs.of(keys, n)
            keyed = todo & (kb.lengths >= 0)
            if keyed.any():
                rows = np.nonzero(keyed)[0]
                part[rows] = partitions_for_keys(kb.data, kb.starts[rows], kb.lengths[rows], num)
            unkeyed = todo & (kb.lengths < 0)
            if unkeyed.any():
                # Kafka's sticky partitioner: one partition per batch, moving on each batch.
                sticky = self.sticky.get(topic, -1) + 1
                self.sticky[topic] = sticky
                part[unkeyed] = sticky % num
        order = np.argsort(part, kind="stable")
        sorted_parts = part[order]
        bounds = np.flatnonzero(np.diff(sorted_parts)) + 1
        starts = np.concatenate([[0], bounds])
        ends = np.concatenate([bounds, [n]])
        if len(starts) == 1:
            groups = [(int(sorted_parts[0]), batch)]
        else:
            taken = batch.take(column(order))
            groups = [(int(sorted_parts[s]), taken.slice(s, e - s)) for s, e in zip(starts, ends)]
        producer = self._producer()
        if self.transactional_id is not None:
            producer.add_partitions([(topic, p) for p, _ in groups])
        now = int(time.time() * 1000)
        for p, rows in groups:
            rc = lambda name: rows.column(names[name]) if name in names else None  # noqa: E731
            keys, values, headers = rc("key"), rc("value"), rc("headers")
            if headers is not None and headers.type != HEADER_TYPE:
                headers = headers.cast(HEADER_TYPE)
            sizes = record_sizes(keys, values, headers)
            for s, e in split_rows(sizes, self.opts.max_batch_bytes):
                count = e - s
                sl = (lambda a: None if a is None else a.slice(s, count))
                records = encode_records(sl(keys), sl(values), sl(headers))
                codec = self.opts.compression
                if codec:  # kafka.compression.type: compressed as the Java client writes it
                    records = compress_records(codec, records, self.opts.compression_level)
                if self.transactional_id is not None:
                    batch_bytes = encode_batch(records, count, timestamp_ms=now, producer_id=producer.producer_id,
                                               producer_epoch=producer.producer_epoch,
                                               base_sequence=producer.next_sequence(topic, p, count), transactional=True,
                                               compression=codec)
                else:
                    batch_bytes = encode_batch(records, count, timestamp_ms=now, compression=codec)
                producer.send(topic, p, batch_bytes, count)
                self.records += count

    def write_all(self, batches) -> None:
        """Every batch, then flush; on any error the transaction (if any) is aborted."""
        try:
            for batch in batches:
                self.write(batch)
            self.flush()
        except BaseException:
            self.abort()
            raise

    def flush(self) -> None:
        self._drain()
        if self.producer is not None:
            self.producer.flush()
            self.producer.close()

    def abort(self) -> None:
        if self.producer is not None:
            self.producer.close()
        if self.producer is not None and self.transactional_id is not None:
            try:
                self.producer.abort()
            except Exception as exc:  # the driver's sweep or the timeout will end it
                log.warning("could not abort %s: %s", self.transactional_id, exc)


# ---------------------------------------------------------------------------------------------
# Clients and errors


def retriable(exc: BaseException) -> bool:
    """A network error, or an error code after which Kafka's clients retry (RETRIABLE): what a
    broker restart or, on a cluster, a leader or coordinator moving to another broker causes."""
    if isinstance(exc, KafkaProtocolError):
        # BROKER_NOT_AVAILABLE: the client's cached leader or coordinator is a broker that has
        # left the cluster's metadata (SIGKILLed); a fresh client asks again.
        return exc.code in RETRIABLE or exc.code == ErrorCode.broker_not_available
    return isinstance(exc, OSError)  # ConnectionError and TimeoutError included; security errors are not


@contextmanager
def task_client(opts: SinkOptions):
    """A write task's client (:func:`_fresh_client`); on a network error or a retriable error
    code in the task, the worker's cached client is dropped, so that Spark's retry of the task
    starts from the bootstrap servers."""
    try:
        yield _fresh_client(opts)
    except Exception as exc:
        if retriable(exc):
            evict_client(opts.bootstrap, opts.kafka)
        raise


def _fresh_client(opts: SinkOptions) -> KafkaClient:
    """This worker's cached client, with leaders and coordinators asked afresh: since its last
    task a broker may have died and its partitions and transaction coordinators moved (on a
    cluster), and a stale leader or coordinator, or a connection to a dead broker, would fail
    the task. Costs one Metadata and one FindCoordinator request per task."""
    client = cached_client(opts.bootstrap, opts.kafka)
    client.forget_leaders()
    client.coordinators.clear()  # a transaction coordinator moves with its broker, too
    try:
        client.metadata([opts.topic] if opts.topic else [])
    except OSError:
        evict_client(opts.bootstrap, opts.kafka)
        client = cached_client(opts.bootstrap, opts.kafka)
    return client
