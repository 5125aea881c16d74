"""The sink's modes as objects, chosen once from the options: :func:`sink_mode` is the only
reader of ``deliveryGuarantee`` and ``atomicity``.

A mode answers the four questions of a write, each in one method::

                     prepare()                write(task, batches)       commit(messages, batch_id)
                     driver, before tasks     a write task               driver, after every task
    AtLeastOnce      nothing                  plain acks=all produce     nothing
    BatchAtomic      roll a crashed run's     rows into one open         the two-phase commit of
                     decision forward; open   transaction, reported in   :mod:`.batch_commit`: every
                     the visibility barrier   the commit message         task transaction or none
    PartitionAtomic  the commit-log topic     rows and a progress        nothing: each task committed
                     exists                   marker in a transaction    (:mod:`.partition_commit`)
                                              the task commits

* ``deliveryGuarantee=at-least-once``: :class:`AtLeastOnce`, what Spark's own Kafka sink does
  (a re-executed batch is written again).
* ``exactly-once`` (default) with ``atomicity=batch`` (default): :class:`BatchAtomic`. Each task
  writes into one transaction that it leaves open and reports in its commit message; the
  driver commits all of them or none, and a visibility barrier (:mod:`.barrier`) makes each
  partition show the whole batch at once.
* ``atomicity=partition``: :class:`PartitionAtomic`. Each task commits its own transaction
  together with a progress marker, and a replayed task whose marker shows its batch done
  writes nothing (exactly-once only with deterministic replay).

Process model: a mode is built and prepared on the driver (``streamWriter()``/``writer()``),
then pickled with its writer into every write task and, for a stream, into Spark's commit
runner (which calls ``streamWriter()`` again, then ``commit()``/``abort()``). It holds only the
options and plain values; clients are made where they are used.

Broker failures (a broker SIGKILLed on a multi-broker cluster moves its partition leaderships
and transaction coordinators to the other brokers within seconds): the driver's steps (commit,
abort, recovery, barrier, the commit-log topic) are retried on a fresh client for up to
``kafka.delivery.timeout.ms`` (every step is safe to repeat); a write task's client is handled
by :func:`.writer.task_client`.
"""

from __future__ import annotations

import logging
import time

from ..client.kafka import KafkaClient, cached_client, evict_client
from .barrier import in_commit_runner, open_barrier
from .batch_commit import CommitLog, CommitProtocol, Txn
from .faults import await_complete_off, barrier_off, commit_stagger_ms, crash_point, task_fault
from .options import SinkOptions
from .partition_commit import PartitionTransaction
from .release import forget_open_write, record_open_write
from .txn_pool import RunHistory, task_transactional_id
from .writer import SinkCommitMessage, TaskWriter, WriteTask, retriable, task_client

log = logging.getLogger("oncelog.spark")


def sink_mode(opts: SinkOptions) -> "SinkMode":
    """The mode the options ask for."""
    if not opts.exactly_once:
        return AtLeastOnce(opts)
    if opts.atomicity == "partition":
        return PartitionAtomic(opts)
    return BatchAtomic(opts)


class SinkMode:
    """What the sink does before, in and after the write tasks of one batch."""

    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts

    def prepare(self, *, streaming: bool, query_id: str | None = None) -> None:
        """On the driver, before the tasks (``streaming``: a micro-batch, else a ``df.write``;
        ``query_id``: the streaming query's, when the driver knows it)."""

    def write(self, task: WriteTask, batches) -> SinkCommitMessage:
        """In a write task: send ``batches`` (Arrow); the message goes to :meth:`commit`."""
        raise NotImplementedError

    def commit(self, messages, batch_id: int) -> str:
        """On the driver once every task succeeded; returns what happened."""
        raise NotImplementedError

    def abort(self, messages, batch_id: int) -> str:
        """On the driver when Spark gave the batch up; returns what happened."""
        raise NotImplementedError


def _write_rows(opts: SinkOptions, task: WriteTask, batches, transactional_id: str | None,
                barrier: tuple[str, int, int] | None = None, generation: int = 0) -> SinkCommitMessage:
    """Every row of the task through one producer: in an open transaction, or plain."""
    with task_client(opts) as client:
        writer = TaskWriter(client, opts, transactional_id)
        writer.write_all(batches)
        crash_point("task-write", task.batch_id)
        task_fault(opts)  # leaves the transaction open, as a task that dies after writing would
        p = writer.producer
        txn = None
        if p is not None and transactional_id is not None:
            txn = (transactional_id, p.producer_id, p.producer_epoch)
        parts = tuple(sorted(p.partitions)) if p is not None else ()
        return task.message(txn, writer.records, partitions=parts, barrier=barrier, generation=generation)


class AtLeastOnce(SinkMode):
    """Plain acks=all produce, nothing to commit."""

    def write(self, task: WriteTask, batches) -> SinkCommitMessage:
        return _write_rows(self.opts, task, batches, None)

    def commit(self, messages, batch_id: int) -> str:
        return "at-least-once"

    def abort(self, messages, batch_id: int) -> str:
        return "at-least-once"


class BatchAtomic(SinkMode):
    """The whole batch or nothing, decided by the driver (:mod:`.batch_commit`); the tasks'
    transactional ids come from the query's pool (:mod:`.txn_pool`)."""

    def __init__(self, opts: SinkOptions) -> None:
        super().__init__(opts)
        # The batch's visibility barrier, opened by prepare() before the tasks and carried
        # through their messages to commit(), which runs in another process.
        self.barrier: tuple[str, int, int] | None = None
        # The runs that decided the query's latest batches, read by prepare() on the driver and
        # pickled into the tasks, which choose their generation of the pool from it; None: the
        # driver could not read it (a stream whose query id only the tasks know), a task reads it.
        self.history: RunHistory | None = None

    def prepare(self, *, streaming: bool, query_id: str | None = None) -> None:
        opts = self.opts
        if streaming and in_commit_runner():
            # Spark's commit runner calls streamWriter() again, after the tasks and right before
            # commit()/abort(), which recover by themselves: nothing to prepare there.
            return
        prefix = opts.transactional_id_prefix
        if prefix is None:
            return  # the query id is known only to the tasks: they read the history themselves
        # Finish what a crashed run decided (so that its transactions stop holding back the
        # last stable offset, and are complete before our barrier fences its barrier), and
        # learn the run history the tasks' generation comes from.
        latest: list = []

        def recover(p: CommitProtocol):
            outcome = p.recover()
            latest.append(p.latest)
            return outcome

        outcome = self._protocol(prefix, recover)
        if outcome and outcome.startswith("rolled"):
            log.warning("%s: %s", prefix, outcome)
        decision = latest[-1] if latest else None
        self.history = decision.runs if decision is not None else RunHistory()
        if opts.topic is not None and not barrier_off(opts):
            # After the roll-forward (which a previous run's barrier still protects); before the
            # tasks (Spark calls writer()/streamWriter() on the driver before them).
            self.barrier = self._open_barrier()
        # What a stop in the middle of this batch would leave open (oncelog.spark.release).
        record_open_write(opts, "batch", self.barrier, query_id if streaming else None)

    def write(self, task: WriteTask, batches) -> SinkCommitMessage:
        # A pooled id (oncelog.spark.txn_pool): the run's generation, the task, the attempt.
        generation = self._history(task).generation_for(task.run_id)
        txn_id = task_transactional_id(task.prefix, generation, task.partition_id, task.attempt)
        return _write_rows(self.opts, task, batches, txn_id, self.barrier, generation=generation)

    def _history(self, task: WriteTask) -> RunHistory:
        """The driver's history, or (when the driver could not read it) this task's own read of
        the commit log: the same latest decision, so the same generation in every task."""
        if self.history is not None:
            return self.history
        opts = self.opts
        with task_client(opts) as client:
            meta = client.metadata([opts.commit_log_topic]).get(opts.commit_log_topic)
            if meta is None or meta.error.value != 0:
                return RunHistory()
            decision = CommitLog(client, opts.bootstrap, opts.commit_log_topic).latest(task.prefix)
        return decision.runs if decision is not None else RunHistory()

    def commit(self, messages, batch_id: int) -> str:
        prefix = self._prefix(messages)
        if prefix is None:
            return "empty"
        done = [m for m in messages if m is not None]
        records = sum(m.records for m in done)
        run_id = next((m.run_id for m in done), "")
        generation = next((m.generation for m in done if m.txn is not None), 0)
        started = time.monotonic()
        outcome = self._protocol(prefix, lambda p: p.commit(batch_id, _txns(messages), run_id, records,
                                                            barrier=_barrier(messages), generation=generation))
        log.info("batch %d of %s: %s (%d records, %.0f ms)", batch_id, prefix, outcome, records,
                 (time.monotonic() - started) * 1000)
        forget_open_write(prefix, _barrier(messages))  # complete: nothing of it is open
        return outcome

    def abort(self, messages, batch_id: int) -> str:
        prefix = self._prefix(messages)
        if prefix is None:
            return "unknown-query"
        barrier = _barrier(messages)
        return self._protocol(prefix, lambda p: p.abort(batch_id, _txns(messages), barrier=barrier,
                                                        fence_barrier=barrier is None and self.opts.topic is not None))

    def _prefix(self, messages) -> str | None:
        if self.opts.transactional_id_prefix is not None:
            return self.opts.transactional_id_prefix
        return next((m.prefix for m in messages if m is not None), None)

    def _protocol(self, prefix: str, step):
        """``step(protocol)`` with a CommitProtocol for ``prefix``, its connections closed after."""
        opts = self.opts

        def run(client: KafkaClient):
            protocol = CommitProtocol(client, opts.bootstrap, opts.commit_log_topic, prefix,
                                      opts.transaction_timeout_ms, commit_stagger_ms=commit_stagger_ms(opts),
                                      await_complete=not await_complete_off(opts))
            try:
                return step(protocol)
            finally:
                protocol.close()

        return _driver_retrying(opts, f"{prefix}: the sink's commit step", run)

    def _open_barrier(self) -> tuple[str, int, int] | None:
        """On the ``topic`` option's partitions; None if the topic does not exist yet."""
        opts = self.opts
        return _driver_retrying(opts, "opening the visibility barrier",
                                lambda client: open_barrier(client, opts.transactional_id_prefix, opts.topic,
                                                            opts.transaction_timeout_ms))


def _txns(messages) -> list[Txn]:
    return [Txn(*m.txn) for m in messages if m is not None and m.txn is not None]


def _barrier(messages) -> tuple[str, int, int] | None:
    return next((m.barrier for m in messages if m is not None and m.barrier is not None), None)


class PartitionAtomic(SinkMode):
    """Each write task commits its rows with a progress marker (:mod:`.partition_commit`)."""

    def prepare(self, *, streaming: bool, query_id: str | None = None) -> None:
        # The tasks' progress markers live on the commit-log topic: it must exist before they
        # commit. Nothing to recover: each task finishes (or fences) its own partition.
        opts = self.opts
        if in_commit_runner():
            return
        _driver_retrying(opts, "creating the commit log topic",
                         lambda client: CommitLog(client, opts.bootstrap, opts.commit_log_topic).ensure_topic())
        record_open_write(opts, "partition", None, query_id)  # tasks a stop cancels may leave theirs open

    def write(self, task: WriteTask, batches) -> SinkCommitMessage:
        """This task's rows and its progress marker in one transaction that the task commits
        itself (steps 1-5 of :mod:`.partition_commit`)."""
        opts = self.opts
        with task_client(opts) as client:
            if task.batch_id is None:
                raise ValueError("atomicity=partition needs a streaming micro-batch id (streaming.sql.batchId); "
                                 "it is for writeStream only")
            txn = PartitionTransaction(client, task.prefix, task.partition_id, task.batch_id, opts.commit_log_topic,
                                       opts.transaction_timeout_ms)
            batches = iter(batches)
            first = next((b for b in batches if b.num_rows), None)
            # Step 1 even for an empty task: it fences earlier attempts of this partition and
            # ends whatever transaction they left open.
            if not txn.begin():
                seen = 0 if first is None else first.num_rows + sum(b.num_rows for b in batches)
                txn.check_replay(seen)
                txn.producer.close()
                log.info("%s: batch %d partition %d already committed (%d rows); writing nothing",
                         task.prefix, task.batch_id, task.partition_id, txn.done.records)
                return task.message(None, 0, committed_by_task=True, skipped=True)
            if first is None:
                txn.producer.close()
                return task.message(None, 0, committed_by_task=True)
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
            crash_point("task-committed", task.batch_id)
            task_fault()  # after the commit: the retry must find the marker and write nothing
            return task.message(None, writer.records, partitions=parts, committed_by_task=True)

    def commit(self, messages, batch_id: int) -> str:
        # Every task committed its own transaction (or found it committed): nothing to decide.
        done = [m for m in messages if m is not None]
        skipped = sum(1 for m in done if m.skipped)
        log.info("batch %d: %d partition(s) committed by their tasks (%d records), %d already committed before",
                 batch_id, len(done) - skipped, sum(m.records for m in done), skipped)
        return "committed-by-tasks"

    def abort(self, messages, batch_id: int) -> str:
        # Committed partitions stay committed (their markers make a replay skip them); an
        # attempt that failed mid-transaction is aborted by the next InitProducerId of its id.
        return "nothing-to-abort"


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
            if not retriable(exc) or time.monotonic() > deadline:
                raise
            log.warning("%s failed (attempt %d), retrying on a fresh client: %s", what, attempt, exc)
            evict_client(opts.bootstrap, opts.kafka)
            attempt += 1
            time.sleep(min(0.1 * attempt, 1.0))
