"""The sink: write tasks that encode Arrow batches into Kafka record batches in bulk, and the
driver-side commit (see :mod:`oncelog.spark.commit`).

Input columns are those of Spark's Kafka sink: ``value`` (string or binary, required), ``key``
(string or binary), ``topic`` (string; the ``topic`` option overrides it), ``partition`` (int)
and ``headers`` (array<struct<key string, value binary>>). Rows without a partition go where
Kafka's default partitioner puts them: murmur2 of the key, or a sticky partition per Arrow
batch for null keys.

``deliveryGuarantee=exactly-once`` (default) with ``atomicity=batch`` (default): each task
writes into one transaction that it leaves open and reports in its commit message; the driver
commits all of them or none (:mod:`oncelog.spark.commit`). With ``atomicity=partition`` each
task commits its own transaction together with a progress marker, and a replayed task whose
marker shows its batch done writes nothing (:mod:`oncelog.spark.partition`; exactly-once only
with deterministic replay).
``at-least-once``: plain acks=all produce, nothing to commit (what Spark's own Kafka sink does:
a re-executed batch is written again).

Broker failures (a broker SIGKILLed on a multi-broker cluster moves its partition leaderships
and transaction coordinators to the other brokers within seconds): the driver's steps (commit,
abort, recovery, barrier) are retried on a fresh client for up to ``kafka.delivery.timeout.ms``
(every step is safe to repeat); a write task asks for leaders and coordinators afresh, and a
task that fails on a network error drops its worker's cached client so that Spark's retry of
it (``spark.task.maxFailures``) starts from the bootstrap servers.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from kio.schema.errors import ErrorCode

from ..client.kafka import RETRIABLE, KafkaClient, KafkaProtocolError, TransactionalProducer
from ..client.partitioner import partitions_for_keys
from ..client.recordcodec import HEADER_TYPE, _Blobs, encode_batch, encode_records, record_sizes, split_rows
from ..protocol.records import compress_records
from .commit import CommitProtocol, Txn, crash_point, task_fault
from .barrier import open_barrier
from .options import SinkOptions
from .partition import PartitionTransaction
from .source import cached_client, evict_client

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


# ---------------------------------------------------------------------------------------------
# The task side


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
        col = lambda name: batch.column(names[name]) if name in names else None  # noqa: E731
        values = col("value")
        keys = col("key")
        headers = col("headers")
        if headers is not None and headers.type != HEADER_TYPE:
            headers = headers.cast(HEADER_TYPE)
        if self.opts.topic is not None:
            groups = [(self.opts.topic, None)]
        else:
            topics = col("topic")
            if topics.null_count:
                raise ValueError("null topic in a row written to oncelog (and no topic option)")
            uniq = pc.unique(topics).to_pylist()
            groups = [(t, None) if len(uniq) == 1 else (t, pc.equal(topics, t)) for t in uniq]
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
            taken = batch.take(pa.array(order))
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


def run_write_task(opts: SinkOptions, batches, *, prefix: str | None, run_id: str,
                   barrier: tuple[str, int, int] | None = None) -> SinkCommitMessage:
    """The body of ``write()``: all of this task's rows into one open transaction."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    partition_id = ctx.partitionId() if ctx else 0
    attempt = ctx.attemptNumber() if ctx else 0
    if prefix is None:
        query_id = ctx.getLocalProperty("sql.streaming.queryId") if ctx else None
        prefix = f"oncelog-{query_id}"
    if not run_id and ctx is not None:
        run_id = (ctx.getLocalProperty("spark.jobGroup.id") or "")[:8]
    run_id = run_id or uuid.uuid4().hex[:8]
    try:
        return _run_write_task(opts, batches, prefix, run_id, partition_id, attempt, ctx, barrier)
    except Exception as exc:
        if _retriable(exc):  # Spark's retry of this task starts from the bootstrap servers
            evict_client(opts.bootstrap, opts.kafka)
        raise


def _task_client(opts: SinkOptions) -> KafkaClient:
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


def _run_write_task(opts: SinkOptions, batches, prefix: str, run_id: str, partition_id: int, attempt: int, ctx,
                    barrier: tuple[str, int, int] | None) -> SinkCommitMessage:
    client = _task_client(opts)
    if opts.exactly_once and opts.atomicity == "partition":
        return _write_partition_txn(opts, client, batches, prefix, run_id, partition_id, attempt, ctx)
    txn_id = f"{prefix}-{run_id}-{partition_id}-{attempt}" if opts.exactly_once else None
    writer = TaskWriter(client, opts, txn_id)
    try:
        for batch in batches:
            writer.write(batch)
        writer.flush()
    except BaseException:
        writer.abort()
        raise
    batch_id = ctx.getLocalProperty("streaming.sql.batchId") if ctx else None
    crash_point("task-write", int(batch_id) if batch_id else None)
    task_fault()  # leaves the transaction open, as a task that dies after writing would
    txn = None
    if writer.producer is not None and txn_id is not None:
        p = writer.producer
        txn = (txn_id, p.producer_id, p.producer_epoch)
    parts = tuple(sorted(writer.producer.partitions)) if writer.producer is not None else ()
    return SinkCommitMessage(prefix, run_id, partition_id, attempt, txn, writer.records, parts, barrier)


def _write_partition_txn(opts: SinkOptions, client: KafkaClient, batches, prefix: str, run_id: str,
                         partition_id: int, attempt: int, ctx) -> SinkCommitMessage:
    """``atomicity=partition``: this task's rows and its progress marker in one transaction
    that the task commits itself (steps in :mod:`oncelog.spark.partition`)."""
    raw = ctx.getLocalProperty("streaming.sql.batchId") if ctx else None
    if raw is None:
        raise ValueError("atomicity=partition needs a streaming micro-batch id (streaming.sql.batchId); "
                         "it is for writeStream only")
    batch_id = int(raw)
    txn = PartitionTransaction(client, prefix, partition_id, batch_id, opts.commit_log_topic,
                               opts.transaction_timeout_ms)
    batches = iter(batches)
    first = next((b for b in batches if b.num_rows), None)
    # Step 1 even for an empty task: it fences earlier attempts of this partition and ends
    # whatever transaction they left open.
    if not txn.begin():
        seen = 0 if first is None else first.num_rows + sum(b.num_rows for b in batches)
        txn.check_replay(seen)
        txn.producer.close()
        log.info("%s: batch %d partition %d already committed (%d rows); writing nothing",
                 prefix, batch_id, partition_id, txn.done.records)
        return SinkCommitMessage(prefix, run_id, partition_id, attempt, None, 0, committed_by_task=True,
                                 skipped=True)
    if first is None:
        txn.producer.close()
        return SinkCommitMessage(prefix, run_id, partition_id, attempt, None, 0, committed_by_task=True)
    writer = TaskWriter(client, opts, txn.producer.transactional_id)
    writer.producer = txn.producer
    try:
        writer.write(first)
        for batch in batches:
            writer.write(batch)
        writer.flush()
        parts = tuple(sorted(txn.producer.partitions))
        txn.commit(writer.records)
    except BaseException:
        txn.abort()
        raise
    crash_point("task-committed", batch_id)
    task_fault()  # after the commit: the retry must find the marker and write nothing
    return SinkCommitMessage(prefix, run_id, partition_id, attempt, None, writer.records, parts,
                             committed_by_task=True)


# ---------------------------------------------------------------------------------------------
# The driver side


def _txns(messages) -> list[Txn]:
    return [Txn(*m.txn) for m in messages if m is not None and m.txn is not None]


def _barrier(messages) -> tuple[str, int, int] | None:
    return next((m.barrier for m in messages if m is not None and m.barrier is not None), None)


def _prefix(opts: SinkOptions, messages) -> str | None:
    if opts.transactional_id_prefix is not None:
        return opts.transactional_id_prefix
    for m in messages:
        if m is not None:
            return m.prefix
    return None


def _retriable(exc: BaseException) -> bool:
    """A network error, or an error code after which Kafka's clients retry (RETRIABLE): what a
    broker restart or, on a cluster, a leader or coordinator moving to another broker causes."""
    if isinstance(exc, KafkaProtocolError):
        # BROKER_NOT_AVAILABLE: the client's cached leader or coordinator is a broker that has
        # left the cluster's metadata (SIGKILLed); a fresh client asks again.
        return exc.code in RETRIABLE or exc.code == ErrorCode.broker_not_available
    return isinstance(exc, OSError)  # ConnectionError and TimeoutError included; security errors are not


def _driver_retrying(opts: SinkOptions, what: str, step):
    """Run a driver-side step (``step(client)``), retrying it on a fresh client after a network
    error or a retriable error code, for up to ``kafka.delivery.timeout.ms`` (Kafka's producer
    default: 120 s): a broker SIGKILLed on a cluster closes our connections and moves its
    leaderships and transaction coordinators to the other brokers within a few seconds, and the
    client's cached leaders, coordinators and connections then point at a dead broker. Every
    step is safe to run again: the commit protocol re-reads its decision and rolls it forward
    (EndTxn(commit) of a committed transaction answers NONE), the barrier is re-initialised."""
    deadline = time.monotonic() + int(opts.kafka.get("delivery.timeout.ms", 120_000)) / 1000
    attempt = 1
    while True:
        try:
            return step(cached_client(opts.bootstrap, opts.kafka))
        except Exception as exc:
            if not _retriable(exc) or time.monotonic() > deadline:
                raise
            log.warning("%s failed (attempt %d), retrying on a fresh client: %s", what, attempt, exc)
            evict_client(opts.bootstrap, opts.kafka)
            attempt += 1
            time.sleep(min(0.1 * attempt, 1.0))


def _run_protocol(opts: SinkOptions, prefix: str, step):
    """Run ``step(protocol)`` with a CommitProtocol for ``prefix``, closing its connections;
    retried across broker failures (:func:`_driver_retrying`)."""
    def run(client: KafkaClient):
        protocol = CommitProtocol(client, opts.bootstrap, opts.commit_log_topic, prefix, opts.transaction_timeout_ms)
        protocol.commit_stagger_ms = int(opts.hook("commitstaggerms", "0"))
        try:
            return step(protocol)
        finally:
            protocol.close()

    return _driver_retrying(opts, f"{prefix}: the sink's commit step", run)


def driver_commit(opts: SinkOptions, messages, batch_id: int) -> str:
    crash_point("before-commit", batch_id)
    if not opts.exactly_once:
        return "at-least-once"
    if opts.atomicity == "partition":
        # Every task committed its own transaction (or found it committed): nothing to decide.
        done = [m for m in messages if m is not None]
        skipped = sum(1 for m in done if m.skipped)
        log.info("batch %d: %d partition(s) committed by their tasks (%d records), %d already committed before",
                 batch_id, len(done) - skipped, sum(m.records for m in done), skipped)
        return "committed-by-tasks"
    prefix = _prefix(opts, messages)
    if prefix is None:
        return "empty"
    records = sum(m.records for m in messages if m is not None)
    run_id = next((m.run_id for m in messages if m is not None), "")
    outcome = _run_protocol(opts, prefix, lambda p: p.commit(batch_id, _txns(messages), run_id, records,
                                                             barrier=_barrier(messages)))
    log.info("batch %d of %s: %s (%d records)", batch_id, prefix, outcome, records)
    return outcome


def driver_abort(opts: SinkOptions, messages, batch_id: int) -> str:
    if not opts.exactly_once:
        return "at-least-once"
    if opts.atomicity == "partition":
        # Committed partitions stay committed (their markers make a replay skip them); an
        # attempt that failed mid-transaction is aborted by the next InitProducerId of its id.
        return "nothing-to-abort"
    prefix = _prefix(opts, messages)
    if prefix is None:
        return "unknown-query"
    barrier = _barrier(messages)
    return _run_protocol(opts, prefix, lambda p: p.abort(batch_id, _txns(messages), barrier=barrier,
                                                         fence_barrier=barrier is None and opts.topic is not None))


def driver_recover(opts: SinkOptions) -> str | None:
    return _run_protocol(opts, opts.transactional_id_prefix, lambda p: p.recover())


def driver_prepare_partition_markers(opts: SinkOptions) -> None:
    """``atomicity=partition``, on the driver before the tasks: the markers' topic must exist."""
    from .commit import CommitLog

    _driver_retrying(opts, "creating the commit log topic",
                     lambda client: CommitLog(client, opts.bootstrap, opts.commit_log_topic).ensure_topic())


def driver_open_barrier(opts: SinkOptions) -> tuple[str, int, int] | None:
    """Open the batch's visibility barrier on the ``topic`` option's partitions (driver side,
    before the tasks); None if the topic does not exist yet."""
    return _driver_retrying(opts, "opening the visibility barrier",
                            lambda client: open_barrier(client, opts.transactional_id_prefix, opts.topic,
                                                        opts.transaction_timeout_ms))
