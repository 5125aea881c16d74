"""The driver's side of the exactly-once sink: a two-phase commit over Kafka transactions.

Phase one happens in the write tasks: each task writes its rows into a transaction of its own
and leaves it open, returning (transactional id, producer id, epoch) in its commit message.
Phase two is :meth:`CommitProtocol.commit`, run by Spark on the driver (in a commit-runner
process that shares nothing with the tasks but those messages) once every task succeeded::

    1. fence: InitProducerId of the query's decider id (``<prefix>.commits``) fences any other
       run of the same query that is committing at the same time (a stale driver);
    2. read the query's latest decision from the commit log (a compacted Kafka topic keyed by
       the transactional-id prefix: durable where the commit process can reach it, on any
       cluster, unlike the checkpoint directory);
    3. if a decision for this batch exists, the batch was decided by an earlier run: roll its
       transactions forward if it is still pending, abort this run's re-executed duplicates,
       and stop;  if a later batch is decided, this run is stale: abort ours and fail;
    4. write the decision ``{batchId, pending, transactions}`` in a transaction of the decider
       (committing it is the commit point of the batch);
    5. EndTxn(commit) every task transaction, pipelined per coordinator. Any answer but NONE
       means the coordinator no longer holds that transaction open (it timed out and was
       aborted): the batch's output is incomplete, so fail loudly, never report success;
    6. wait until every task transaction is CompleteCommit (DescribeTransactions, see
       :meth:`CommitProtocol._await_complete`), write the decision ``{batchId, done}``, then abort
       the batch's visibility barrier (opened by ``prepare()`` before the tasks, see
       :mod:`oncelog.spark.barrier`): only now does any partition's last stable offset move past
       the batch's rows, all of them at once. Why wait: Apache Kafka answers EndTxn once the
       commit is *prepared* (PrepareCommit in ``__transaction_state``) and writes the COMMIT
       markers afterwards, asynchronously, and after a coordinator or partition leader dies only
       once a new one has taken over (seconds). Were the barrier aborted before a task's markers
       landed, a partition whose barrier abort marker came first would show the transactions
       whose commit markers had landed and not the others: part of a batch
       (tests/spark/test_apache_kafka.py caught it when the barrier once came right after step 5).
       No cheaper guarantee of Kafka's says the markers are written: EndTxn's answer does not,
       the last stable offset of the partitions does not (the barrier holds it back on purpose),
       and a repeated EndTxn answers NONE from PrepareCommit too. A transaction described
       CompleteCommit has had its markers written (Kafka moves to CompleteCommit only when every
       marker of it is acknowledged). DONE therefore means complete, which makes the ordering
       safe for every later reader of the decision as well;
    7. sweep: abort every still-open transaction whose id carries the query's prefix (failed
       attempts, crashed runs, zombies). An open transaction holds back the last stable offset
       of its partitions and so stalls every read_committed reader.

A restart re-executes the last batch without a Spark commit-log entry and calls ``commit``
again with new messages; step 3 makes that idempotent. ``abort`` may follow a ``commit`` that
took effect; it checks the decision first and never undoes a decided batch.

Transactional ids come from a bounded pool (:mod:`.txn_pool`: ``<prefix>-g<generation>-<task>-<attempt>``,
reused by every batch and every run); each decision records the runs that decided the latest
batches and the generation each used, from which the next run's tasks choose theirs. The
module docstring of :mod:`.txn_pool` says why no task can abort a decided transaction.

All I/O goes through :class:`oncelog.client.kafka.KafkaClient` (public Kafka protocol only).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from ..client.kafka import READ_COMMITTED, KafkaClient, KafkaProtocolError, TransactionalProducer
from ..client.recordcodec import decode_batches
from .barrier import barrier_id, close_barrier
from .faults import SinkHooks, hooks as process_hooks
from .txn_pool import RunHistory, sweep_pattern

log = logging.getLogger("oncelog.spark")

PENDING = "pending"
DONE = "done"


class BatchLostError(RuntimeError):
    """A decided batch could not be committed: its transactions were aborted (timed out)."""


class StaleRunError(RuntimeError):
    """Another run of the same query has moved past this batch: this run must stop."""


def init_transactional(producer: TransactionalProducer) -> None:
    """InitProducerId, with a timeout above the broker's maximum told as the option it is."""
    try:
        producer.init()
    except KafkaProtocolError as exc:
        if exc.code == ErrorCode.invalid_transaction_timeout:
            raise ValueError(f"transaction.timeout.ms={producer.transaction_timeout_ms} is larger than the "
                             "broker allows (transaction.max.timeout.ms, 15 minutes by default)") from None
        raise


@dataclass(frozen=True)
class Txn:
    transactional_id: str
    producer_id: int
    producer_epoch: int

    def as_list(self) -> list:
        return [self.transactional_id, self.producer_id, self.producer_epoch]


@dataclass
class Decision:
    batch_id: int
    state: str
    txns: list[Txn]
    run_id: str = ""
    records: int = 0
    # The runs that decided the latest batches, this one's first (oncelog.spark.txn_pool).
    runs: RunHistory = field(default_factory=RunHistory)

    def encode(self) -> bytes:
        return json.dumps({"batchId": self.batch_id, "state": self.state, "runId": self.run_id,
                           "records": self.records, "txns": [t.as_list() for t in self.txns],
                           "runs": self.runs.to_json()},
                          sort_keys=True).encode()

    @classmethod
    def decode(cls, raw: bytes) -> "Decision":
        d = json.loads(raw)
        return cls(d["batchId"], d["state"], [Txn(*t) for t in d["txns"]], d.get("runId", ""), d.get("records", 0),
                   RunHistory.from_json(d.get("runs")))


@dataclass
class _LogCursor:
    position: int = 0
    latest: dict[str, Decision] = field(default_factory=dict)
    topic_exists: bool = False  # ensure_topic() saw it; forgotten when a commit fails
    cluster_id: str | None = None  # the cluster whose log ``position`` is an offset of


# Cursors over the commit log survive between commit() calls in a reused commit runner; a new
# process re-reads the (compacted) log from its start. One per address and topic, and valid only
# for the cluster it read: another cluster at the same address (a broker re-created with a new
# data directory, as a notebook's local Kafka is, or a test's next broker on a reused port) has
# its own log, whose first ``position`` offsets a stale cursor would skip.
_CURSORS: dict[tuple[str, str], _LogCursor] = {}


class CommitLog:
    """The decisions of every query using ``topic``: one partition, keyed by prefix."""

    def __init__(self, client: KafkaClient, bootstrap: str, topic: str) -> None:
        self.client = client
        self.topic = topic
        self.cursor = _CURSORS.setdefault((bootstrap, topic), _LogCursor())
        if client.cluster_id is None:  # a fresh client: one Metadata round trip tells the cluster
            client.metadata([topic])
        if self.cursor.cluster_id != client.cluster_id:
            self.cursor = _CURSORS[(bootstrap, topic)] = _LogCursor(cluster_id=client.cluster_id)

    def ensure_topic(self) -> None:
        if self.cursor.topic_exists:  # once per process: a round trip less per commit
            return
        meta = self.client.metadata([self.topic]).get(self.topic)
        if meta is not None and meta.error == ErrorCode.none:
            self.cursor.topic_exists = True
            return
        from confluent_kafka.admin import AdminClient, NewTopic

        from ..client.security import librdkafka_config

        admin = AdminClient(librdkafka_config(self.client.config, ",".join(f"{h}:{p}" for h, p in self.client.bootstrap)))
        # Compacted, and in small segments: a query writes two decisions per micro-batch under
        # one key, and a broker compacts only segments that rolled (Kafka's default segment is
        # 1 GiB, ~20 days of a 1 s trigger); 1 MiB or an hour keeps the topic a few MiB for good.
        # Each decision is a transaction, whose COMMIT marker a cleaner keeps delete.retention.ms
        # after its record was compacted away (Kafka's LogCleaner, and ours): at the default 24 h
        # that is a day of markers (~90 bytes each, ~30 MiB at a 1 s trigger). An hour is plenty:
        # the log's only readers are the sink's drivers, and a marker goes only once its
        # transaction has no record left, so no reader can miss an outcome.
        config = {"cleanup.policy": "compact", "segment.bytes": str(1 << 20), "segment.ms": "3600000",
                  "delete.retention.ms": "3600000"}
        fut = admin.create_topics([NewTopic(self.topic, 1, -1, config=config)])[self.topic]
        try:
            fut.result(timeout=30)
        except Exception as exc:  # created concurrently by another query: fine
            if "TOPIC_ALREADY_EXISTS" not in str(exc).upper().replace(" ", "_"):
                raise
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            meta = self.client.metadata([self.topic]).get(self.topic)
            if meta is not None and meta.error == ErrorCode.none and meta.partitions:
                self.cursor.topic_exists = True
                return
            time.sleep(0.1)
        raise RuntimeError(f"commit log topic {self.topic!r} did not appear")

    def latest(self, prefix: str) -> Decision | None:
        """The last committed decision for ``prefix`` (reads the log up to its last stable offset)."""
        tp = (self.topic, 0)
        end = self.client.list_offsets({tp: -1}, READ_COMMITTED)[tp][0]
        cur = self.cursor
        if cur.position > end:  # the topic was recreated
            cur.position, cur.latest = 0, {}
        while cur.position < end:
            pf = self.client.fetch({tp: cur.position}, isolation_level=READ_COMMITTED, max_wait_ms=100)[tp]
            if pf.error.value == 1:  # compacted/deleted below us
                cur.position = self.client.list_offsets({tp: -2}, READ_COMMITTED)[tp][0]
                continue
            if pf.error != ErrorCode.none:
                raise KafkaProtocolError(pf.error, f"reading commit log {self.topic}")
            decoded = decode_batches(pf.records, start_offset=cur.position, end_offset=end, aborted=pf.aborted or [])
            for key, value in zip(decoded.keys.to_pylist(), decoded.values.to_pylist()):
                if key is not None and value is not None:
                    cur.latest[key.decode()] = Decision.decode(value)
            if decoded.next_offset > cur.position:
                cur.position = decoded.next_offset
        return cur.latest.get(prefix)


class CommitProtocol:
    """Steps 1-7 above for one query (identified by its transactional-id prefix)."""

    def __init__(self, client: KafkaClient, bootstrap: str, commit_log_topic: str, prefix: str,
                 transaction_timeout_ms: int, *, commit_stagger_ms: int = 0, await_complete: bool = True,
                 hooks: SinkHooks | None = None) -> None:
        self.client = client
        self.prefix = prefix
        self.log = CommitLog(client, bootstrap, commit_log_topic)
        self.decider = TransactionalProducer(client, f"{prefix}.commits", transaction_timeout_ms)
        self.commit_stagger_ms = commit_stagger_ms  # a test's: time between the EndTxns of a batch
        # False only in a test's control run: the barrier ends right after the EndTxns, before the
        # commit is complete and before done (what step 6 once did; tests/spark/test_apache_kafka.py)
        self.await_complete = await_complete
        self.latest: Decision | None = None  # the latest decision :meth:`recover` read
        # A test's seam (oncelog.spark.faults): told each named point of the protocol; by default
        # this process's hooks, which do nothing unless a test's environment asks for something.
        self.hooks = hooks if hooks is not None else process_hooks()

    def close(self) -> None:
        self.decider.close()

    def _write(self, decision: Decision) -> None:
        d = self.decider
        topic = self.log.topic
        d.add_partitions([(topic, 0)])
        d.send_record(topic, 0, self.prefix.encode(), decision.encode())
        d.flush()
        code = self.client.end_txn(d.transactional_id, d.producer_id, d.producer_epoch, commit=True)
        d.partitions.clear()
        if code != ErrorCode.none:
            raise StaleRunError(f"writing the decision for batch {decision.batch_id} of {self.prefix!r} failed with "
                                f"{code.name.upper()}: another run of this query fenced this one")
        self.log.cursor.latest[self.prefix] = decision

    def _roll_forward(self, decision: Decision, barrier: tuple[str, int, int] | None = None) -> None:
        """Steps 5 and 6: commit the decided transactions, wait until they are complete, record
        done, then release ``barrier``."""
        if decision.txns:
            self.hooks.at("before-endtxns", decision.batch_id, self, decision)
        if decision.txns and self.commit_stagger_ms:
            for t in decision.txns[:-1]:  # one at a time; the last one with the rest below
                self.client.end_txn(t.transactional_id, t.producer_id, t.producer_epoch, commit=True)
                time.sleep(self.commit_stagger_ms / 1000)
        if decision.txns:
            codes = self.client.end_txns([(t.transactional_id, t.producer_id, t.producer_epoch) for t in decision.txns],
                                         commit=True)
            failed = {tid: c for tid, c in codes.items() if c != ErrorCode.none}
            if failed:
                raise self._lost(decision, failed)
            self.hooks.at("after-endtxns", decision.batch_id, self, decision)
            if self.await_complete:
                self._await_complete(decision)
            else:  # a test's control: the order that let a reader see part of a batch (EndTxns, barrier)
                close_barrier(self.client, barrier)
        decision.state = DONE
        self._write(decision)
        close_barrier(self.client, barrier)  # the batch is complete: readers see it now

    @staticmethod
    def _lost(decision: Decision, failed: dict[str, object]) -> "BatchLostError":
        detail = ", ".join(f"{tid}: {getattr(c, 'name', str(c)).upper()}" for tid, c in sorted(failed.items()))
        return BatchLostError(
            f"batch {decision.batch_id} lost: {len(failed)} of its {len(decision.txns)} transactions could "
            f"not be committed ({detail}); the broker aborted them, most likely because the restart took "
            "longer than transaction.timeout.ms")

    def _await_complete(self, decision: Decision) -> None:
        """Step 6's wait: until every decided transaction is CompleteCommit at its coordinator,
        i.e. its COMMIT markers are written on every partition it touched.

        A transaction counts as complete when its coordinator describes it CompleteCommit with
        the decided (producer id, epoch); or with another producer id or epoch (a newer
        InitProducerId of the id, which Kafka lets through only once the commit completed: it
        answers CONCURRENT_TRANSACTIONS while markers are pending); or not at all (the id expired,
        which Kafka does only to completed transactions). Described aborted with the decided
        epoch (it cannot be, once EndTxn(commit) was answered NONE), it is lost. Polls every few
        milliseconds; past ``request.timeout.ms`` it raises TimeoutError, which the driver's
        retry (:func:`oncelog.spark.modes._driver_retrying`) answers by running the step again
        from its decision: the barrier stays up meanwhile."""
        pending = {t.transactional_id: t for t in decision.txns}
        deadline = time.monotonic() + self.client.timeout
        delay = 0.002
        while True:
            described = self.client.describe_transactions(list(pending))
            for tid, t in list(pending.items()):
                d = described.get(tid)
                if d is None or (d.producer_id, d.producer_epoch) != (t.producer_id, t.producer_epoch):
                    del pending[tid]
                elif d.state == "CompleteCommit":
                    del pending[tid]
                elif d.state in ("PrepareAbort", "CompleteAbort"):
                    raise self._lost(decision, {tid: d.state})
            if not pending:
                return
            if time.monotonic() > deadline:
                states = ", ".join(f"{tid}: {described[tid].state}" for tid in sorted(pending) if tid in described)
                raise TimeoutError(f"batch {decision.batch_id}: {len(pending)} committed transaction(s) not yet "
                                   f"complete after {self.client.timeout:.0f} s ({states}); the barrier stays up")
            time.sleep(delay)
            delay = min(delay * 2, 0.05)

    def _abort(self, txns: list[Txn]) -> None:
        if txns:
            # NONE, or an error because it is already over / fenced: either way not committed.
            self.client.end_txns([(t.transactional_id, t.producer_id, t.producer_epoch) for t in txns], commit=False)

    def sweep(self, keep: set[str]) -> int:
        """Abort open transactions of this query's write tasks that no decision holds (step 7):
        ids of the pool (:mod:`.txn_pool`) and of the earlier per-run naming, never the decider
        or the barrier. Lists only Ongoing transactions (a broker holds every id it has seen for
        a week: listing them all would cost more with every query the cluster ever ran)."""
        swept = 0
        try:
            listed = self.client.list_transactions(states=("Ongoing",), pattern=sweep_pattern(self.prefix))
        except KafkaProtocolError as exc:
            log.warning("could not list transactions to abort orphans: %s", exc)
            return 0
        for txn_id, _pid, state in listed:
            if txn_id not in keep and state == "Ongoing":
                try:
                    self.client.init_producer_id(txn_id, self.decider.transaction_timeout_ms)
                    swept += 1
                except KafkaProtocolError as exc:
                    log.warning("could not abort orphaned transaction %s: %s", txn_id, exc)
        if swept:
            log.info("aborted %d orphaned transaction(s) of %s", swept, self.prefix)
        return swept

    def commit(self, batch_id: int, txns: list[Txn], run_id: str = "", records: int = 0,
               barrier: tuple[str, int, int] | None = None, generation: int = 0) -> str:
        """Make the batch's transactions visible exactly once. Returns what happened:
        ``committed`` | ``already-committed`` | ``empty``. ``barrier`` (see
        :mod:`oncelog.spark.barrier`) is aborted once every transaction of the decided batch
        is complete, so each partition shows the whole batch at once. ``run_id`` and
        ``generation`` (of the pool, :mod:`.txn_pool`) are the tasks': the decision records them."""
        try:
            return self._commit(batch_id, txns, run_id, records, barrier, generation)
        except BaseException:
            self.log.cursor.topic_exists = False  # the next attempt looks again (e.g. a deleted commit log)
            raise

    def _commit(self, batch_id: int, txns: list[Txn], run_id: str, records: int,
                barrier: tuple[str, int, int] | None, generation: int) -> str:
        self.log.ensure_topic()
        # Step 1.
        self.decider.init()
        # Step 2.
        latest = self.log.latest(self.prefix)
        # Step 3.
        if latest is not None and latest.batch_id > batch_id:
            self._abort(txns)
            close_barrier(self.client, barrier)
            raise StaleRunError(f"batch {batch_id} of {self.prefix!r}: batch {latest.batch_id} is already decided "
                                "by another run; this run is stale and its output was aborted")
        if latest is not None and latest.batch_id == batch_id:
            decided = {t.transactional_id for t in latest.txns}
            self._abort([t for t in txns if t.transactional_id not in decided])
            if latest.state == PENDING:
                self._roll_forward(latest, barrier)
            else:
                close_barrier(self.client, barrier)
            self.sweep(decided)
            return "already-committed"
        if latest is not None and latest.state == PENDING:
            self._roll_forward(latest)
        if not txns:
            close_barrier(self.client, barrier)
            self.sweep(set())
            return "empty"
        # Step 4.
        history = latest.runs if latest is not None else RunHistory()
        decision = Decision(batch_id, PENDING, txns, run_id, records, history.after(run_id, generation))
        self._write(decision)
        self.hooks.at("after-decision", batch_id, self, decision)
        # Steps 5 and 6: every transaction of the batch committed, the rows released on every partition.
        self._roll_forward(decision, barrier)
        self.hooks.at("after-commits", batch_id, self, decision)
        # Step 7.
        self.sweep({t.transactional_id for t in txns})
        return "committed"

    def recover(self) -> str | None:
        """Run on the driver before a batch's tasks (from ``prepare()``): fence stale deciders,
        check ``transaction.timeout.ms`` against the broker's maximum, and roll a pending
        decision forward so its transactions stop holding back the last stable offset (and
        are complete before the batch's barrier fences the previous one). Leaves the latest
        decision in :attr:`latest` (its run history chooses the tasks' generation). Returns the
        outcome, or None when the query has decided nothing yet.

        No orphan sweep here: Spark also calls ``streamWriter()`` in the commit runner, after
        the tasks wrote and before ``commit()``, when the batch's own transactions are open
        and undecided; a sweep then would abort them. Orphans are swept by ``commit()`` and
        ``abort()``, after the decision."""
        init_transactional(self.decider)
        if not self._log_exists():
            return None
        latest = self.latest = self.log.latest(self.prefix)
        if latest is None:
            return None
        if latest.state == PENDING:
            self._roll_forward(latest)
            return f"rolled forward batch {latest.batch_id}"
        return f"batch {latest.batch_id} done"

    def abort(self, batch_id: int, txns: list[Txn], barrier: tuple[str, int, int] | None = None,
              fence_barrier: bool = False) -> str:
        """Spark gave up on the batch. Never undo a decided batch: roll it forward instead.
        Then end the batch's barrier (``fence_barrier``: no task reported it, so fence the
        barrier id, aborting whatever barrier is open)."""
        try:
            return self._abort_batch(batch_id, txns)
        finally:
            if barrier is not None:
                close_barrier(self.client, barrier)
            elif fence_barrier:
                try:
                    self.client.init_producer_id(barrier_id(self.prefix), self.decider.transaction_timeout_ms)
                except KafkaProtocolError as exc:
                    log.warning("could not end the barrier of %s: %s", self.prefix, exc)

    def _abort_batch(self, batch_id: int, txns: list[Txn]) -> str:
        latest = self.log.latest(self.prefix) if self._log_exists() else None
        if latest is not None and latest.state == PENDING:
            # Decided (this batch, or an earlier one a crashed run left): finish it before the
            # sweep below, which would otherwise abort its still-open transactions.
            self.decider.init()
            self._roll_forward(latest)
        if latest is not None and latest.batch_id == batch_id:
            decided = {t.transactional_id for t in latest.txns}
            self._abort([t for t in txns if t.transactional_id not in decided])
            self.sweep(decided)
            return "already-committed"
        self._abort(txns)
        self.sweep(set())
        return "aborted"

    def _log_exists(self) -> bool:
        meta = self.client.metadata([self.log.topic]).get(self.log.topic)
        return meta is not None and meta.error == ErrorCode.none
