"""The transaction coordinator (KIP-98, KIP-360, KIP-447, KIP-890), without sockets.

Read it top-down from the requests: :meth:`~TransactionCoordinator.init_producer_id`,
:meth:`~TransactionCoordinator.add_partitions` / :meth:`~TransactionCoordinator.add_offsets`,
:meth:`~TransactionCoordinator.end_txn`; then the timers (:meth:`~TransactionCoordinator.tick`)
and the write-ahead path every change takes (:meth:`~TransactionCoordinator._commit`). States
and their transitions: :mod:`oncelog.txn.state`.

* Each transactional id has a :class:`~oncelog.txn.state.TransactionMetadata` whose every
  change is first made durable in ``__transaction_state`` (injected ``persist``), then applied.
* While a change (or its markers) is being written the transaction is *pending*, and further
  requests for it wait in a queue and run, in order, once it is installed. (Kafka answers them
  CONCURRENT_TRANSACTIONS and the client retries after its backoff — 100 ms in librdkafka —
  which for a coordinator that writes its markers in-process costs far more than the wait.)
  CONCURRENT_TRANSACTIONS remains the answer while a transaction sits in Prepare* without a write
  in flight (markers being retried), and for the InitProducerId that finds an Ongoing transaction
  and starts its abort (requests after it queue behind the abort's writes).
* Markers are written through the injected ``write_markers`` (:mod:`oncelog.txn.markers`).
* Errors are domain errors (:mod:`oncelog.errors`): raised by the synchronous checks, passed to
  ``respond`` by the requests that wait for a write. Handlers turn them into wire codes at the
  edge (:func:`oncelog.apis._txn.error_code`), which is also where PRODUCER_FENCED becomes
  INVALID_PRODUCER_EPOCH for old request versions; the coordinator knows no request versions.
* ``allocate_producer_id`` may raise a domain error (no block of ids could be made durable: a
  full disk); the request is answered with it and nothing changes.
* Time comes from the injected ``clock()`` (milliseconds); :meth:`tick` aborts timed-out
  transactions, retries stuck writes and, every
  ``transaction.remove.expired.transaction.cleanup.interval.ms``, expires idle transactional ids
  (``transactional.id.expiration.ms``).

What clients can make it remember. Clients choose how many transactional ids they
use; each id stays until it is idle for ``transactional.id.expiration.ms`` (Kafka's 7 days), so
the coordinator holds the ids used in the last 7 days, however many that is, as Kafka does.
What it spends on them is kept proportional to the ids and small: one slotted
:class:`~oncelog.txn.state.TransactionMetadata` per id (~0.3 KB with its dict entry), no other
index of all ids; the 100 ms :meth:`tick` visits only the ids with a transaction open
(:attr:`TransactionCoordinator.open`), never all of them; the hourly expiry sweep visits all
(~0.25 s for a million) and removes the expired ones :data:`EXPIRY_CHUNK` per tick, their
tombstones written in a few batches per partition (``persist_expired``), as Kafka's
``removeExpiredTransactionalIds``; ListTransactions copies nothing. The tombstones make the
expiry survive a restart (the replay applies an id's last record only); the cleaner of the
compacted ``__transaction_state`` drops the records they supersede, and the tombstones
themselves once ``delete.retention.ms`` has passed, so the log (and the replay at start-up)
holds the live ids, not their history (:mod:`oncelog.txn.store`).

EndTxn is answered once the Prepare* record is durable; the markers and the Complete* record
follow. After a restart a durable Prepare* is rolled forward, an Ongoing transaction aborts when
its timeout passes. Transaction version 2 (EndTxn v5+) bumps the epoch on every EndTxn, so a
late request of an earlier transaction is fenced instead of touching a later one (KAFKA-17754).
"""

from __future__ import annotations

import collections
import logging
from dataclasses import dataclass
from typing import Callable, NamedTuple

from .. import errors
from ..config.settings import TxnConfig
from ..errors import KafkaError
from ..state_machine import check_transition
from .state import MAX_EPOCH, NO_PARTITIONS, TRANSITIONS, TransactionMetadata, TransactionState

T = TransactionState

log = logging.getLogger("oncelog.txn")

Done = Callable[[KafkaError | None], None]
# persist(transactional_id, metadata, on_done): write the id's next __transaction_state record
# (:mod:`oncelog.txn.store`; a tombstone for Dead); on_done(None) once durable, else on_done(error).
Persist = Callable[[str, TransactionMetadata, Done], None]
# persist_expired(transactional_ids, on_done): write the ids' tombstones (the store batches them per
# partition); on_done(ids, None) for each group of them once durable, else on_done(ids, error).
ExpiredDone = Callable[[list[str], KafkaError | None], None]
PersistExpired = Callable[[list[str], ExpiredDone], None]
# write_markers(producer_id, producer_epoch, commit, partitions, on_done) (:mod:`oncelog.txn.markers`);
# it may also raise a domain error (a marker the log refused): handled as on_done(error).
WriteMarkers = Callable[[int, int, bool, set[tuple[str, int]], Done], None]
# offsets_partition(group_id): the group's __consumer_offsets partition (the groups side knows it)
OffsetsPartition = Callable[[str], tuple[str, int]]


@dataclass(frozen=True)
class ProducerIdAndEpoch:
    """The answer to InitProducerId and EndTxn: the id and epoch the producer continues with."""

    producer_id: int
    producer_epoch: int


Answer = Callable[[ProducerIdAndEpoch | KafkaError], None]


class ListedTransaction(NamedTuple):
    """One transaction of ListTransactions' answer."""

    transactional_id: str
    producer_id: int
    state: TransactionState


@dataclass(frozen=True)
class TransactionListing:
    """ListTransactions' answer: the transactions that pass the filters, and the state filters
    that name no state (Kafka returns those to the client)."""

    transactions: list[ListedTransaction]
    unknown_state_filters: tuple[str, ...]


STATE_NAMES = frozenset(s.kafka_name for s in TransactionState)
# Ids an expiry sweep removes per tick (100 ms): a few tens of milliseconds of work, so requests
# wait little while a million ids expire (in ~200 ticks).
EXPIRY_CHUNK = 5_000
PREPARING = (T.PREPARE_COMMIT, T.PREPARE_ABORT, T.PREPARE_EPOCH_FENCE)
COMPLETED = (T.EMPTY, T.COMPLETE_COMMIT, T.COMPLETE_ABORT)  # no transaction open


class TransactionCoordinator:
    def __init__(self, clock: Callable[[], int], allocate_producer_id: Callable[[], int], persist: Persist,
                 write_markers: WriteMarkers, offsets_partition: OffsetsPartition, *,
                 persist_expired: PersistExpired, config: TxnConfig = TxnConfig()) -> None:
        self.clock = clock
        self.allocate_producer_id = allocate_producer_id
        self.persist = persist
        self.persist_expired = persist_expired
        self.write_markers = write_markers
        self.offsets_partition = offsets_partition
        self.config = config
        self.txns: dict[str, TransactionMetadata] = {}
        # The ids with a transaction open or completing (not Empty/CompleteCommit/CompleteAbort):
        # what the 100 ms tick visits. Kept with txns by _install/_remove.
        self.open: dict[str, TransactionMetadata] = {}
        # The first expiry sweep comes one interval after the start, as Kafka schedules it.
        self._next_expiry_sweep = clock() + config.remove_expired_interval_ms
        self._expiring: collections.deque[TransactionMetadata] = collections.deque()  # a sweep's ids to go
        self._sweep: dict | None = None  # a sweep's counts, for its one log line
        self.timed_out = 0  # transactions aborted for exceeding their timeout (read by oncelog.metrics)

    def __len__(self) -> int:
        """How many transactional ids are known."""
        return len(self.txns)

    # ------------------------------------------------------------------ InitProducerId

    def init_producer_id(self, txn_id: str, timeout_ms: int, producer_id: int, producer_epoch: int,
                         respond: Answer) -> None:
        """InitProducerId with a transactional id: the producer id and epoch for a (new) producer
        instance, fencing every earlier instance. ``producer_id``/``producer_epoch`` are -1, or
        (KIP-360, v3+) the ones the producer has.

        1. Check the request: a transactional id, a timeout within ``max_timeout_ms``.
        2. Queue behind a change of this id in flight; re-run once it is installed.
        3. An unknown id: a new producer id at epoch 0, answered once its Empty record is durable.
        4. A transaction in Prepare* with nothing in flight (markers being retried): CONCURRENT_TRANSACTIONS.
        5. KIP-360: a producer naming its id/epoch must name the current ones (a bump follows) or
           the previous ones with nothing since (a retry: answered again); otherwise it is fenced.
        6. An Ongoing transaction: fence its producer (epoch + 1) and abort it; answer
           CONCURRENT_TRANSACTIONS, the client retries until the abort is complete.
        7. Bump the epoch (a new producer id at the last epoch), Empty, no partitions; answer
           once that record is durable.
        """
        # step 1
        if not txn_id:
            return respond(errors.InvalidRequest("InitProducerId: an empty transactional id"))
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return respond(errors.InvalidTransactionTimeout(
                f"transaction timeout {timeout_ms} ms is not in 1..{self.config.max_timeout_ms}"))
        # step 2
        m = self.txns.get(txn_id)
        if self._queue_if_pending(m, lambda: self.init_producer_id(txn_id, timeout_ms, producer_id, producer_epoch,
                                                                   respond)):
            return None
        # step 3
        if m is None:
            return self._create(txn_id, timeout_ms, respond)
        # step 4
        if m.state in PREPARING:
            return respond(self._concurrent(m))
        # step 5
        if producer_id >= 0:
            current = (producer_id, producer_epoch) == (m.producer_id, m.producer_epoch)
            retried = (producer_id, producer_epoch) == (m.last_producer_id, m.last_producer_epoch)
            if retried and m.state in COMPLETED and not m.partitions:
                return respond(ProducerIdAndEpoch(m.producer_id, m.producer_epoch))
            if not current:
                return respond(errors.ProducerFenced(
                    f"transactional id {txn_id!r}: producer {producer_id} epoch {producer_epoch} is not the "
                    f"current producer {m.producer_id} epoch {m.producer_epoch}"))
        # step 6
        if m.state is T.ONGOING:
            self._abort(m, bump_epoch=True)
            return respond(self._concurrent(m))
        # step 7
        new = m.prepare_transition(T.EMPTY)
        new.timeout_ms = timeout_ms
        # Kafka's prepareIncrementProducerEpoch: the previous epoch is remembered only for a
        # producer that named its id/epoch (so its retry is recognised); a new instance that did
        # not gets -1, so the instance it replaced cannot pass as a retry and is fenced.
        new.last_producer_id = m.producer_id
        new.last_producer_epoch = m.producer_epoch if producer_id >= 0 else -1
        if m.producer_epoch >= MAX_EPOCH:
            try:
                new.producer_id, new.producer_epoch = self.allocate_producer_id(), 0
            except KafkaError as exc:  # no id block could be reserved (a full disk): retriable
                return respond(exc)
        else:
            new.producer_epoch = m.producer_epoch + 1
        new.partitions, new.start_ms = NO_PARTITIONS, -1
        self._commit(m, new, lambda error: respond(
            error if error is not None else ProducerIdAndEpoch(new.producer_id, new.producer_epoch)))
        return None

    def _create(self, txn_id: str, timeout_ms: int, respond: Answer) -> None:
        """Step 3 of InitProducerId. The new metadata is visible at once, pending, so a concurrent
        first InitProducerId queues behind it; its producer id is mapped only once durable."""
        try:
            new = TransactionMetadata(txn_id, self.allocate_producer_id(), 0, timeout_ms)
        except KafkaError as exc:  # no id block could be reserved (a full disk): retriable
            return respond(exc)
        new.pending = True
        new.last_update_ms = self.clock()
        self.txns[txn_id] = new

        def created(error: KafkaError | None) -> None:
            new.pending = False
            if error is not None:
                self.txns.pop(txn_id, None)
                respond(error)
            else:
                respond(ProducerIdAndEpoch(new.producer_id, new.producer_epoch))
            self._run_waiting(new)

        self.persist(txn_id, new, created)

    # ------------------------------------------------------------------ AddPartitionsToTxn / AddOffsetsToTxn

    def add_partitions(self, txn_id: str, producer_id: int, producer_epoch: int,
                       partitions: set[tuple[str, int]], respond: Done, tv2: bool = False) -> None:
        """AddPartitionsToTxn (and Produce v12's implicit add): the partitions join the producer's
        transaction, which starts (Ongoing) if none is open; answered once durable."""
        m = self.txns.get(txn_id)
        if self._queue_if_pending(m, lambda: self.add_partitions(txn_id, producer_id, producer_epoch, partitions,
                                                                 respond, tv2)):
            return None
        error = self._check_producer(txn_id, m, producer_id, producer_epoch)
        if error is not None:
            return respond(error)
        if m.state is T.ONGOING and partitions <= m.partitions:
            return respond(None)
        new = m.prepare_transition(T.ONGOING)
        if m.state is not T.ONGOING:
            new.start_ms = self.clock()
            new.partitions = NO_PARTITIONS
            new.tv2 = tv2
        new.partitions = frozenset(new.partitions | partitions)  # a new set: copies share the old one
        self._commit(m, new, respond)
        return None

    def add_offsets(self, txn_id: str, producer_id: int, producer_epoch: int, group_id: str, respond: Done) -> None:
        """AddOffsetsToTxn: the group's ``__consumer_offsets`` partition joins the transaction, so
        TxnOffsetCommit may write there and the markers reach it."""
        self.add_partitions(txn_id, producer_id, producer_epoch, {self.offsets_partition(group_id)}, respond)

    def _check_producer(self, txn_id: str, m: TransactionMetadata | None, producer_id: int,
                        producer_epoch: int) -> KafkaError | None:
        if m is None or m.producer_id != producer_id:
            return self._unknown_producer(txn_id, producer_id)
        if producer_epoch != m.producer_epoch:
            return self._fenced(m, producer_epoch)
        if m.pending or m.state in PREPARING:
            return self._concurrent(m)
        return None

    # ------------------------------------------------------------------ checks other APIs make

    def verify_partition(self, txn_id: str | None, producer_id: int, producer_epoch: int, topic: str,
                         partition: int) -> None:
        """KIP-890 part 1: may this transactional batch be appended? Raises when it may not, as
        Kafka's TransactionCoordinator.handleVerifyPartitionsInTransaction answers:
        InvalidProducerIdMapping (unknown id or another producer), ProducerFenced (any other
        epoch), ConcurrentTransactions (markers being written), TransactionAbortable (the
        partition is not in the transaction). Callers translate for their clients (Produce:
        INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE below v11). Without a transactional id
        (Produce refuses that earlier) the producer is unknown."""
        m = self.txns.get(txn_id) if txn_id else None
        if m is None or m.producer_id != producer_id:
            raise self._unknown_producer(txn_id, producer_id)
        if producer_epoch != m.producer_epoch:
            raise self._fenced(m, producer_epoch)
        if m.state in PREPARING:
            raise self._concurrent(m)
        if m.state is not T.ONGOING or (topic, partition) not in m.partitions:
            raise errors.TransactionAbortable(f"{topic}-{partition} is not in an Ongoing transaction of producer "
                                              f"{producer_id} epoch {producer_epoch}")

    def needs_partition_added(self, txn_id: str, producer_id: int, topic: str, partition: int) -> bool:
        """Produce v12 (transaction version 2): must this partition be added to the producer's
        transaction before its batch is appended? Not when it is in the Ongoing transaction
        already, nor when ``txn_id`` is not this producer's (verification refuses the batch)."""
        m = self.txns.get(txn_id)
        if m is None or m.producer_id != producer_id:
            return False
        return not (m.state is T.ONGOING and (topic, partition) in m.partitions)

    def check_txn_offset_commit(self, txn_id: str, producer_id: int, producer_epoch: int, group_id: str) -> None:
        """TxnOffsetCommit: the producer's id and epoch are current, its transaction is Ongoing and
        holds the group's offsets partition (AddOffsetsToTxn). Raises otherwise."""
        m = self.txns.get(txn_id)
        if m is None or m.producer_id != producer_id:
            raise self._unknown_producer(txn_id, producer_id)
        if producer_epoch != m.producer_epoch:
            raise self._fenced(m, producer_epoch)
        if m.state is not T.ONGOING or self.offsets_partition(group_id) not in m.partitions:
            raise errors.InvalidTxnState(f"transactional id {txn_id!r}: the offsets of group {group_id!r} are not "
                                         f"in an Ongoing transaction (AddOffsetsToTxn first)")

    # ------------------------------------------------------------------ EndTxn

    def end_txn(self, txn_id: str, producer_id: int, producer_epoch: int, commit: bool, tv2: bool,
                respond: Answer) -> None:
        """EndTxn: commit or abort the producer's transaction. ``tv2``: transaction version 2
        (EndTxn v5+), where every EndTxn bumps the epoch.

        1. Queue behind a change of this id in flight; re-run once it is installed.
        2. Check the producer id: the current one, or (TV2) the one it had before a rotation at
           epoch exhaustion, for a retry.
        3. TV2: a retry of the EndTxn that bumped the epoch is answered again (once complete) and
           changes nothing; the opposite outcome is INVALID_TXN_STATE.
        4. Check the epoch (else fenced) and the state: Prepare* with nothing in flight is
           CONCURRENT_TRANSACTIONS; TV1's retry of a completed EndTxn is answered again; anything
           but Ongoing is INVALID_TXN_STATE (TV2 may abort with no transaction open).
        5. Prepare PrepareCommit/PrepareAbort; TV2 bumps the epoch (and at the last epoch
           allocates the producer id the client continues with).
        6. Make it durable in ``__transaction_state``, install it, answer the client.
        7. Write the COMMIT/ABORT markers to every partition of the transaction.
        8. Make CompleteCommit/CompleteAbort durable.

        Steps 7 and 8 are :meth:`_write_markers_then_complete`, shared with the abort of a
        timed-out or fenced transaction and with recovery; a failure there leaves the
        transaction in Prepare* and :meth:`tick` retries.
        """
        # step 1
        m = self.txns.get(txn_id)
        if self._queue_if_pending(m, lambda: self.end_txn(txn_id, producer_id, producer_epoch, commit, tv2, respond)):
            return None
        # step 2
        if m is None or m.producer_id != producer_id:
            if not (tv2 and m is not None and m.last_producer_id == producer_id and m.producer_id != producer_id
                    and m.last_producer_epoch == producer_epoch):
                return respond(self._unknown_producer(txn_id, producer_id))
            # TV2 retry after the producer id rotated at epoch exhaustion: answered in step 3
        rotated = m.producer_id != producer_id
        completed = T.COMPLETE_COMMIT if commit else T.COMPLETE_ABORT
        preparing = T.PREPARE_COMMIT if commit else T.PREPARE_ABORT
        opposite = (T.COMPLETE_ABORT, T.PREPARE_ABORT) if commit else (T.COMPLETE_COMMIT, T.PREPARE_COMMIT)
        # step 3
        if tv2 and m.last_producer_epoch == producer_epoch and (rotated or producer_epoch == m.producer_epoch - 1):
            # anything else from the old epoch falls through and is fenced in step 4
            if m.state is completed:
                return respond(ProducerIdAndEpoch(m.producer_id, m.producer_epoch))
            if m.state is preparing:
                return respond(self._concurrent(m))
            if m.state in opposite:
                return respond(self._mismatched_retry(m, commit))
        # step 4
        if rotated:
            return respond(self._unknown_producer(txn_id, producer_id))
        if producer_epoch != m.producer_epoch:
            return respond(self._fenced(m, producer_epoch))
        if m.state in PREPARING:
            return respond(self._concurrent(m))
        if m.state is completed and not tv2:
            return respond(ProducerIdAndEpoch(m.producer_id, m.producer_epoch))  # TV1 retry
        if m.state is not T.ONGOING and not (tv2 and not commit and m.state in COMPLETED):
            return respond(self._mismatched_retry(m, commit) if m.state in opposite else errors.InvalidTxnState(
                f"transactional id {txn_id!r}: EndTxn({'commit' if commit else 'abort'}) with no transaction open "
                f"({m.state.kafka_name})"))
        # step 5
        new = m.prepare_transition(preparing)
        if tv2:
            new.tv2 = True
            new.last_producer_id, new.last_producer_epoch = m.producer_id, m.producer_epoch
            new.producer_epoch = m.producer_epoch + 1
            if new.producer_epoch >= MAX_EPOCH:
                # Epoch exhausted (KAFKA-18660): markers use the old id at this last epoch; the
                # client continues with a fresh producer id at epoch 0.
                try:
                    new.next_producer_id = self.allocate_producer_id()
                except KafkaError as exc:  # no id block could be reserved (a full disk): retriable
                    return respond(exc)

        def prepared(error: KafkaError | None) -> None:
            if error is not None:
                return respond(error)
            installed = self.txns[txn_id]
            if installed.next_producer_id >= 0:
                respond(ProducerIdAndEpoch(installed.next_producer_id, 0))
            else:
                respond(ProducerIdAndEpoch(installed.producer_id, installed.producer_epoch))
            self._write_markers_then_complete(installed)  # steps 7 and 8

        self._commit(m, new, prepared)  # step 6
        return None

    def _write_markers_then_complete(self, m: TransactionMetadata) -> None:
        """Steps 7 and 8 of EndTxn, for a durable PrepareCommit/PrepareAbort ``m``. The
        transaction stays pending throughout, so requests for it queue behind the markers."""
        commit = m.state is T.PREPARE_COMMIT
        m.pending = True

        def written(error: KafkaError | None) -> None:
            m.pending = False
            if error is not None:
                # Stays Prepare* and is retried by tick(); what queued behind it is answered now
                # (CONCURRENT_TRANSACTIONS while nothing is in flight) rather than left waiting.
                self._run_waiting(m)
                return
            # step 8
            new = m.prepare_transition(T.COMPLETE_COMMIT if commit else T.COMPLETE_ABORT)
            new.partitions = NO_PARTITIONS
            if m.next_producer_id >= 0:
                # last_producer_epoch stays the epoch the client sent, so its retried EndTxn is
                # recognised and answered with the new id.
                new.last_producer_id = m.producer_id
                new.producer_id, new.producer_epoch, new.next_producer_id = m.next_producer_id, 0, -1
            self._commit(m, new, lambda _error: None)

        # step 7 (a marker the log refuses, a full disk, may be raised here rather than reported)
        try:
            self.write_markers(m.producer_id, m.producer_epoch, commit, set(m.partitions), written)
        except KafkaError as exc:
            written(exc)

    def _abort(self, m: TransactionMetadata, *, bump_epoch: bool) -> None:
        """Abort an open transaction (timeout, or a new instance's InitProducerId). With
        ``bump_epoch`` a PrepareEpochFence record raises the epoch first, so the old producer
        instance is fenced before anything is aborted; then PrepareAbort, markers, CompleteAbort."""
        txn_id = m.transactional_id
        if bump_epoch and m.state is T.ONGOING:
            fence = m.prepare_transition(T.PREPARE_EPOCH_FENCE)
            # TV1: -1, the fenced instance must not pass as a KIP-360 retry afterwards. TV2 (as
            # Kafka 4.4): the abort's epoch bump is the one EndTxn would have made, so the client's
            # epoch stays the last one: its EndTxn(abort) is answered as a retry of this abort
            # (the producer goes on at the new epoch), its EndTxn(commit) INVALID_TXN_STATE, its
            # InitProducerId(id, epoch) the KIP-360 retry.
            fence.last_producer_id = m.producer_id
            fence.last_producer_epoch = m.producer_epoch if m.tv2 else -1
            fence.producer_epoch = m.producer_epoch + 1
            self._commit(m, fence, lambda error: self._abort(self.txns[txn_id], bump_epoch=False)
                         if error is None else None)
            return
        new = m.prepare_transition(T.PREPARE_ABORT)

        def prepared(error: KafkaError | None) -> None:
            if error is None:
                self._write_markers_then_complete(self.txns[txn_id])

        self._commit(m, new, prepared)

    # ------------------------------------------------------------------ timers

    def tick(self) -> list[str]:
        """Abort transactions open longer than their timeout; retry stuck marker writes; every
        ``transaction.remove.expired.transaction.cleanup.interval.ms``, expire idle transactional
        ids (:meth:`expire_idle`). Visits the open transactions only. Returns the ids aborted."""
        now = self.clock()
        aborted = []
        for m in list(self.open.values()):
            if m.pending:
                continue
            if m.state is T.ONGOING and m.start_ms >= 0 and now - m.start_ms > m.timeout_ms:
                self._abort(m, bump_epoch=True)
                aborted.append(m.transactional_id)
                self.timed_out += 1
            elif m.state in (T.PREPARE_COMMIT, T.PREPARE_ABORT):
                self._write_markers_then_complete(m)
            elif m.state is T.PREPARE_EPOCH_FENCE:
                self._abort(m, bump_epoch=False)  # the fence is durable, its abort record was not
        interval = self.config.remove_expired_interval_ms
        if self._expiring:
            self._expire_chunk()  # a sweep's next ids
        # (a clock set back by more than the interval: sweep now, and count from here)
        elif now >= self._next_expiry_sweep or self._next_expiry_sweep - now > interval:
            self._next_expiry_sweep = now + interval
            self.expire_idle()
        return aborted

    def expire_idle(self) -> int:
        """Kafka's ``transactional.id.expiration.ms`` (``removeExpiredTransactionalIds``): every
        id with no transaction open (Empty, CompleteCommit, CompleteAbort), nothing in flight and
        no change for that long is removed — Dead, written as a tombstone to
        ``__transaction_state`` (the store writes a chunk's tombstones in a few batches per
        partition), then forgotten. Its next InitProducerId starts afresh with a new producer id
        at epoch 0. Requests for an id arriving while its tombstone is written wait, and then
        find no id.

        The ids found go :data:`EXPIRY_CHUNK` per tick (each checked again then), so a million
        expiring at once do not stop the event loop for seconds: ~100 ticks of a few tens of
        milliseconds each. Returns how many ids were found expired."""
        horizon = self.clock() - self.config.transactional_id_expiration_ms
        found = [m for m in self.txns.values()
                 if m.last_update_ms <= horizon and not m.pending and m.state in COMPLETED]
        self._expiring = collections.deque(found)
        self._sweep = {"found": len(found), "removed": 0, "kept": 0, "chunks": 0}
        self._expire_chunk()
        return len(found)

    def _expire_chunk(self) -> None:
        """Expire the next :data:`EXPIRY_CHUNK` ids of the sweep (those still expired now)."""
        horizon = self.clock() - self.config.transactional_id_expiration_ms
        expiring, sweep = self._expiring, self._sweep
        by_id = {}
        while expiring and len(by_id) < EXPIRY_CHUNK:
            m = expiring.popleft()
            # still this id's metadata, idle, and not changed since the sweep found it
            if (self.txns.get(m.transactional_id) is m and not m.pending and m.state in COMPLETED
                    and m.last_update_ms <= horizon):
                check_transition(TRANSITIONS, f"transaction {m.transactional_id!r}", m.state, T.DEAD)
                m.pending = True  # requests for it queue behind the tombstone
                by_id[m.transactional_id] = m
        if not by_id:
            self._log_sweep()
            return
        sweep["chunks"] += 1

        def done(txn_ids: list[str], error: KafkaError | None) -> None:
            """A group of the tombstones is durable (or not: those ids stay, for the next sweep)."""
            settled = [by_id.pop(txn_id) for txn_id in txn_ids]
            for m in settled:
                m.pending = False
                if error is None and self.txns.get(m.transactional_id) is m:
                    self._remove(m.transactional_id)
            sweep["removed" if error is None else "kept"] += len(settled)
            for m in settled:  # what queued behind the tombstones now finds no id (or the id)
                self._run_waiting(m)
            if not by_id:
                sweep["chunks"] -= 1
                self._log_sweep()

        self.persist_expired(list(by_id), done)

    def _log_sweep(self) -> None:
        sweep = self._sweep
        if self._expiring or sweep is None or sweep["chunks"] or not sweep["found"]:
            return
        self._sweep = None
        log.info("expired %d transactional id(s) idle for transactional.id.expiration.ms=%d%s",
                 sweep["removed"], self.config.transactional_id_expiration_ms,
                 f"; {sweep['kept']} kept, their tombstones not durable (the next sweep tries again)"
                 if sweep["kept"] else "")

    # ------------------------------------------------------------------ DescribeTransactions / ListTransactions

    def describe(self, txn_id: str) -> TransactionMetadata:
        """A copy of the id's metadata; raises TransactionalIdNotFound."""
        m = self.txns.get(txn_id)
        if m is None:
            raise errors.TransactionalIdNotFound(f"transactional id {txn_id!r} is not known")
        return m.copy()

    def list_transactions(self, state_filters: set[str] | None = None, producer_id_filters: set[int] | None = None,
                          min_duration_ms: int = -1) -> TransactionListing:
        """KIP-664/994: transactions in one of the named states (Kafka names), of one of the
        producer ids, open for strictly longer than ``min_duration_ms`` (-1: any). Dead (an id
        being expired) is never listed. One small tuple per id listed, nothing copied: a broker
        may hold a million ids, and the answer lists them all (as Kafka's)."""
        held, select, unknown = self.select_transactions(state_filters, producer_id_filters, min_duration_ms)
        return TransactionListing([t for t in map(select, held) if t is not None], unknown)

    def select_transactions(self, state_filters: set[str] | None = None, producer_id_filters: set[int] | None = None,
                            min_duration_ms: int = -1
                            ) -> tuple[list[TransactionMetadata], Callable[[TransactionMetadata], ListedTransaction | None],
                                       tuple[str, ...]]:
        """:meth:`list_transactions` in parts: the ids held now (a snapshot of the table, so a
        caller may go through it a chunk at a time, serving other requests in between), the
        filter that lists one (None: left out; an id whose state changed meanwhile is judged by
        its state then), and the unknown state filters."""
        now = self.clock()
        states = [s for s in TransactionState if s is not T.DEAD
                  and (not state_filters or s.kafka_name in state_filters)]
        if len(states) == len(TransactionState) - 1:
            states = None  # every state: no check per id

        def select(m: TransactionMetadata) -> ListedTransaction | None:
            if (states is not None and m.state not in states) or m.state is T.DEAD:
                return None
            if producer_id_filters and m.producer_id not in producer_id_filters:
                return None
            # KIP-994: strictly longer than the filter (Kafka counts from start -1 for Empty).
            if min_duration_ms >= 0 and now - m.start_ms <= min_duration_ms:
                return None
            return ListedTransaction(m.transactional_id, m.producer_id, m.state)

        return list(self.txns.values()), select, tuple(sorted(set(state_filters or ()) - STATE_NAMES))

    # ------------------------------------------------------------------ replay

    def load(self, txn_id: str, m: TransactionMetadata | None) -> None:
        """Replay of ``__transaction_state``: ``m`` is a record's value, None a tombstone."""
        if m is None:
            self._remove(txn_id)
        else:
            self._install(m)

    def recover(self) -> None:
        """After replay: roll a durable Prepare* forward; a fence in progress becomes an abort."""
        for m in list(self.open.values()):
            if m.state in (T.PREPARE_COMMIT, T.PREPARE_ABORT):
                self._write_markers_then_complete(m)
            elif m.state is T.PREPARE_EPOCH_FENCE:
                self._abort(m, bump_epoch=False)

    # ------------------------------------------------------------------ the write-ahead path

    def _commit(self, current: TransactionMetadata, new: TransactionMetadata, on_done: Done) -> None:
        """Persist ``new`` (prepared by ``current.prepare_transition``) then install it (or, for
        Dead, forget the id); then answer ``on_done`` and run what queued behind ``current``
        meanwhile (it is pending)."""
        current.pending = True
        new.last_update_ms = self.clock()

        def done(error: KafkaError | None) -> None:
            current.pending = False
            if error is None and new.state is T.DEAD:
                self._remove(new.transactional_id)
            elif error is None:
                self._install(new)
            on_done(error)
            self._run_waiting(current)

        self.persist(new.transactional_id, new, done)

    def _install(self, m: TransactionMetadata) -> None:
        txn_id = m.transactional_id
        self.txns[txn_id] = m
        if m.state in COMPLETED:
            self.open.pop(txn_id, None)
        else:
            self.open[txn_id] = m

    def _remove(self, txn_id: str) -> None:
        self.txns.pop(txn_id, None)
        self.open.pop(txn_id, None)

    def _queue_if_pending(self, m: TransactionMetadata | None, request: Callable[[], None]) -> bool:
        if m is not None and m.pending:
            if m.waiting is None:
                m.waiting = []
            m.waiting.append(request)
            return True
        return False

    def _run_waiting(self, old: TransactionMetadata) -> None:
        """Re-run requests queued behind a change, against the metadata now installed."""
        waiting, old.waiting = old.waiting, None
        for request in waiting or ():
            request()

    # ------------------------------------------------------------------ domain errors

    @staticmethod
    def _unknown_producer(txn_id: str | None, producer_id: int) -> KafkaError:
        return errors.InvalidProducerIdMapping(f"producer {producer_id} is not the producer of transactional id "
                                               f"{txn_id!r}")

    @staticmethod
    def _fenced(m: TransactionMetadata, producer_epoch: int) -> KafkaError:
        return errors.ProducerFenced(f"transactional id {m.transactional_id!r}: epoch {producer_epoch} of producer "
                                     f"{m.producer_id} is not the current epoch {m.producer_epoch}")

    @staticmethod
    def _concurrent(m: TransactionMetadata) -> KafkaError:
        return errors.ConcurrentTransactions(f"transactional id {m.transactional_id!r}: the transaction is "
                                             f"completing ({m.state.kafka_name}); retry")

    @staticmethod
    def _mismatched_retry(m: TransactionMetadata, commit: bool) -> KafkaError:
        return errors.InvalidTxnState(f"transactional id {m.transactional_id!r}: EndTxn("
                                      f"{'commit' if commit else 'abort'}) after the transaction was "
                                      f"{'aborted' if commit else 'committed'} ({m.state.kafka_name})")
