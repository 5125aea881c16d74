"""The transaction coordinator (KIP-98, KIP-360, KIP-447, KIP-890), without sockets.

Each transactional id has a :class:`TransactionMetadata` whose every change is first made durable in
``__transaction_state`` (injected ``persist``), then applied. While a change (or its markers)
is being written the transaction is *pending*, and further requests for it wait in a queue and
run, in order, once it is installed. (Kafka answers them CONCURRENT_TRANSACTIONS and the client
retries after its backoff — 100 ms in librdkafka — which for a coordinator that writes its
markers in-process costs far more than the wait.) CONCURRENT_TRANSACTIONS remains the answer
while a transaction sits in Prepare* without a write in flight (markers being retried), and for
the InitProducerId that finds an Ongoing transaction and starts its abort (requests after it
queue behind the abort's writes). Markers are written through the injected ``write_markers``. Time comes from ``clock()``; :meth:`tick` aborts timed-out
transactions.

States and their transitions: :mod:`oncelog.txn.state`.

EndTxn is answered once the Prepare* record is durable; the markers and the Complete* record
follow. After a restart a durable Prepare* is rolled forward, an Ongoing transaction aborts when
its timeout passes. Transaction version 2 (EndTxn v5+) bumps the epoch on every EndTxn, so a
late request of an earlier transaction is fenced instead of touching a later one (KAFKA-17754).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from kio.schema.errors import ErrorCode

from .records import encode_value
from .state import MAX_EPOCH, TransactionMetadata, TransactionState

T = TransactionState

Persist = Callable[[str, bytes | None, Callable[[ErrorCode], None]], None]
WriteMarkers = Callable[[int, int, bool, set, Callable[[ErrorCode], None]], None]


@dataclass(frozen=True)
class TxnConfig:
    max_timeout_ms: int = 15 * 60 * 1000
    transactional_id_expiration_ms: int = 7 * 24 * 3600 * 1000


class TransactionCoordinator:
    def __init__(self, clock: Callable[[], int], allocate_producer_id: Callable[[], int], persist: Persist,
                 write_markers: WriteMarkers, config: TxnConfig = TxnConfig()) -> None:
        self.clock = clock
        self.allocate_producer_id = allocate_producer_id
        self.persist = persist
        self.write_markers = write_markers
        self.config = config
        self.txns: dict[str, TransactionMetadata] = {}
        self.by_producer_id: dict[int, str] = {}

    # ------------------------------------------------------------------ durable transitions

    def _commit(self, current: TransactionMetadata | None, new: TransactionMetadata, on_done: Callable[[ErrorCode], None]) -> None:
        """Persist ``new`` (prepared by ``current.prepare_transition``) then install it.
        ``current`` is marked pending meanwhile."""
        if current is not None:
            current.pending = True
        new.last_update_ms = self.clock()

        def done(err: ErrorCode) -> None:
            if current is not None:
                current.pending = False
            if err == ErrorCode.none:
                self._install(new)
            elif current is None and self.txns.get(new.transactional_id) is new:
                self.txns.pop(new.transactional_id)  # a new id whose first record failed
            on_done(err)
            if current is not None:
                self._run_waiting(current)
            elif err == ErrorCode.none:
                self._run_waiting(new)

        self.persist(new.transactional_id, encode_value(new), done)

    def _run_waiting(self, old: TransactionMetadata) -> None:
        """Re-run requests queued behind a change, against the metadata now installed."""
        waiting, old.waiting = old.waiting, []
        for request in waiting:
            request()

    def _queue_if_pending(self, m: TransactionMetadata | None, request: Callable[[], None]) -> bool:
        if m is not None and m.pending:
            m.waiting.append(request)
            return True
        return False

    def _install(self, m: TransactionMetadata) -> None:
        old = self.txns.get(m.transactional_id)
        if old is not None and self.by_producer_id.get(old.producer_id) == m.transactional_id:
            del self.by_producer_id[old.producer_id]
        self.txns[m.transactional_id] = m
        self.by_producer_id[m.producer_id] = m.transactional_id

    def load(self, txn_id: str, m: TransactionMetadata | None) -> None:
        """Replay of ``__transaction_state``."""
        if m is None:
            old = self.txns.pop(txn_id, None)
            if old is not None:
                self.by_producer_id.pop(old.producer_id, None)
            return
        self._install(m)

    def recover(self) -> None:
        """After replay: roll a durable Prepare* forward; a fence in progress becomes an abort."""
        for m in list(self.txns.values()):
            if m.state in (T.PREPARE_COMMIT, T.PREPARE_ABORT):
                self._write_markers_and_complete(m)
            elif m.state is T.PREPARE_EPOCH_FENCE:
                self._abort(m, bump_epoch=False)

    # ------------------------------------------------------------------ InitProducerId

    def init_producer_id(self, txn_id: str, timeout_ms: int, producer_id: int, producer_epoch: int,
                         respond: Callable[[ErrorCode, int, int], None]) -> None:
        if not txn_id:
            return respond(ErrorCode.invalid_request, -1, -1)
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return respond(ErrorCode.invalid_transaction_timeout, -1, -1)
        m = self.txns.get(txn_id)
        if self._queue_if_pending(m, lambda: self.init_producer_id(txn_id, timeout_ms, producer_id, producer_epoch, respond)):
            return None
        if m is None:
            new = TransactionMetadata(txn_id, self.allocate_producer_id(), 0, timeout_ms)
            new.pending = True  # visible at once, so a concurrent first InitProducerId queues behind it
            self.txns[txn_id] = new

            def created(err: ErrorCode) -> None:
                new.pending = False
                if err != ErrorCode.none:
                    self.txns.pop(txn_id, None)
                    respond(err, -1, -1)
                else:
                    self.by_producer_id[new.producer_id] = txn_id
                    respond(err, new.producer_id, new.producer_epoch)
                self._run_waiting(new)

            new.last_update_ms = self.clock()
            self.persist(txn_id, encode_value(new), created)
            return None
        if m.state in (T.PREPARE_COMMIT, T.PREPARE_ABORT, T.PREPARE_EPOCH_FENCE):
            return respond(ErrorCode.concurrent_transactions, -1, -1)
        if producer_id >= 0:
            # KIP-360: a producer re-initialising must name the id/epoch it has (or had, on a retry).
            current = (producer_id, producer_epoch) == (m.producer_id, m.producer_epoch)
            retried = (producer_id, producer_epoch) == (m.last_producer_id, m.last_producer_epoch)
            if retried and m.state in (T.EMPTY, T.COMPLETE_COMMIT, T.COMPLETE_ABORT) and not m.partitions:
                return respond(ErrorCode.none, m.producer_id, m.producer_epoch)
            if not current:
                return respond(ErrorCode.producer_fenced, -1, -1)
        if m.state is T.ONGOING:
            # The previous instance left a transaction open: abort it with a bumped epoch (which
            # fences that instance); the client retries until it is complete.
            self._abort(m, bump_epoch=True)
            return respond(ErrorCode.concurrent_transactions, -1, -1)
        new = m.prepare_transition(T.EMPTY)
        new.timeout_ms = timeout_ms
        # Kafka's prepareIncrementProducerEpoch: the previous epoch is remembered only for a
        # producer that named its id/epoch (so its retry is recognised); a new instance that did
        # not gets -1, so the instance it replaced cannot pass as a retry and is fenced.
        new.last_producer_id = m.producer_id
        new.last_producer_epoch = m.producer_epoch if producer_id >= 0 else -1
        if m.producer_epoch >= MAX_EPOCH:
            new.producer_id, new.producer_epoch = self.allocate_producer_id(), 0
        else:
            new.producer_epoch = m.producer_epoch + 1
        new.partitions, new.start_ms = set(), -1
        self._commit(m, new, lambda err: respond(err, new.producer_id, new.producer_epoch)
                     if err == ErrorCode.none else respond(err, -1, -1))
        return None

    # ------------------------------------------------------------------ partitions

    def _check_producer(self, m: TransactionMetadata | None, producer_id: int, producer_epoch: int,
                        fenced: ErrorCode = ErrorCode.producer_fenced) -> ErrorCode | None:
        if m is None or m.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if producer_epoch != m.producer_epoch:
            return fenced
        if m.pending or m.state in (T.PREPARE_COMMIT, T.PREPARE_ABORT, T.PREPARE_EPOCH_FENCE):
            return ErrorCode.concurrent_transactions
        return None

    def add_partitions(self, txn_id: str, producer_id: int, producer_epoch: int,
                       partitions: set[tuple[str, int]], respond: Callable[[ErrorCode], None],
                       fenced: ErrorCode = ErrorCode.producer_fenced, tv2: bool = False) -> None:
        m = self.txns.get(txn_id)
        if self._queue_if_pending(m, lambda: self.add_partitions(txn_id, producer_id, producer_epoch, partitions,
                                                                 respond, fenced, tv2)):
            return None
        error = self._check_producer(m, producer_id, producer_epoch, fenced)
        if error is not None:
            return respond(error)
        if m.state is T.ONGOING and partitions <= m.partitions:
            return respond(ErrorCode.none)
        new = m.prepare_transition(T.ONGOING)
        if m.state is not T.ONGOING:
            new.start_ms = self.clock()
            new.partitions = set()
            new.tv2 = tv2
        new.partitions |= partitions
        self._commit(m, new, respond)
        return None

    def verify_partition(self, txn_id: str | None, producer_id: int, producer_epoch: int, topic: str,
                         partition: int) -> ErrorCode | None:
        """KIP-890 part 1: may this transactional batch be appended? None when it may."""
        m = self.txns.get(txn_id) if txn_id else self.txns.get(self.by_producer_id.get(producer_id, ""))
        if m is None or m.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if producer_epoch < m.producer_epoch:
            return ErrorCode.invalid_producer_epoch
        if m.state is not T.ONGOING or (topic, partition) not in m.partitions or producer_epoch != m.producer_epoch:
            return ErrorCode.invalid_txn_state
        return None

    def txn_for_producer(self, producer_id: int) -> TransactionMetadata | None:
        txn_id = self.by_producer_id.get(producer_id)
        return self.txns.get(txn_id) if txn_id else None

    # ------------------------------------------------------------------ EndTxn

    def end_txn(self, txn_id: str, producer_id: int, producer_epoch: int, commit: bool, tv2: bool,
                respond: Callable[[ErrorCode, int, int], None], fenced: ErrorCode = ErrorCode.producer_fenced) -> None:
        m = self.txns.get(txn_id)
        if self._queue_if_pending(m, lambda: self.end_txn(txn_id, producer_id, producer_epoch, commit, tv2, respond,
                                                          fenced)):
            return None
        if m is None or m.producer_id != producer_id:
            if not (tv2 and m is not None and m.last_producer_id == producer_id and m.producer_id != producer_id
                    and m.last_producer_epoch == producer_epoch):
                return respond(ErrorCode.invalid_producer_id_mapping, -1, -1)
            # TV2 retry after the producer id rotated at epoch exhaustion: answered below
        wanted = T.COMPLETE_COMMIT if commit else T.COMPLETE_ABORT
        other = {T.COMPLETE_COMMIT: T.COMPLETE_ABORT, T.COMPLETE_ABORT: T.COMPLETE_COMMIT}[wanted]
        rotated = m.producer_id != producer_id
        preparing = T.PREPARE_COMMIT if commit else T.PREPARE_ABORT
        if tv2 and m.last_producer_epoch == producer_epoch and (rotated or producer_epoch == m.producer_epoch - 1):
            # TV2: a retry of the EndTxn that bumped the epoch is answered again (once complete)
            # and changes nothing; the opposite outcome is INVALID_TXN_STATE; anything else from
            # the old epoch is fenced.
            if m.state is wanted:
                return respond(ErrorCode.none, m.producer_id, m.producer_epoch)
            if m.state is preparing:
                return respond(ErrorCode.concurrent_transactions, -1, -1)
            if m.state in (other, T.PREPARE_ABORT if commit else T.PREPARE_COMMIT):
                return respond(ErrorCode.invalid_txn_state, -1, -1)
        if rotated:
            return respond(ErrorCode.invalid_producer_id_mapping, -1, -1)
        if producer_epoch != m.producer_epoch:
            return respond(fenced, -1, -1)
        if m.state in (T.PREPARE_COMMIT, T.PREPARE_ABORT, T.PREPARE_EPOCH_FENCE):
            return respond(ErrorCode.concurrent_transactions, -1, -1)
        if m.state is wanted and not tv2:
            return respond(ErrorCode.none, m.producer_id, m.producer_epoch)  # TV1 retry
        if m.state is not T.ONGOING:
            if tv2 and not commit and m.state in (T.EMPTY, T.COMPLETE_COMMIT, T.COMPLETE_ABORT):
                pass  # TV2 allows aborting an empty transaction (it still bumps the epoch)
            else:
                return respond(ErrorCode.invalid_txn_state, -1, -1)
        new = m.prepare_transition(preparing)
        if tv2:
            new.tv2 = True
            new.last_producer_id, new.last_producer_epoch = m.producer_id, m.producer_epoch
            new.producer_epoch = m.producer_epoch + 1
            if new.producer_epoch >= MAX_EPOCH:
                # Epoch exhausted (KAFKA-18660): markers use the old id at this last epoch; the
                # client continues with a fresh producer id at epoch 0.
                new.next_producer_id = self.allocate_producer_id()

        def prepared(err: ErrorCode) -> None:
            if err != ErrorCode.none:
                return respond(err, -1, -1)
            installed = self.txns[txn_id]
            if installed.next_producer_id >= 0:
                respond(ErrorCode.none, installed.next_producer_id, 0)
            else:
                respond(ErrorCode.none, installed.producer_id, installed.producer_epoch)
            self._write_markers_and_complete(installed)

        self._commit(m, new, prepared)
        return None

    def _abort(self, m: TransactionMetadata, *, bump_epoch: bool) -> None:
        """Abort an open transaction (timeout, or a new instance's InitProducerId). With
        ``bump_epoch`` a PrepareEpochFence record raises the epoch first, so the old producer
        instance is fenced before anything is aborted; then PrepareAbort, markers, CompleteAbort."""
        txn_id = m.transactional_id
        if bump_epoch and m.state is T.ONGOING:
            fence = m.prepare_transition(T.PREPARE_EPOCH_FENCE)
            # -1: the fenced instance must not pass as a KIP-360 retry afterwards
            fence.last_producer_id, fence.last_producer_epoch = m.producer_id, -1
            fence.producer_epoch = m.producer_epoch + 1
            self._commit(m, fence, lambda err: self._abort(self.txns[txn_id], bump_epoch=False)
                         if err == ErrorCode.none else None)
            return
        new = m.prepare_transition(T.PREPARE_ABORT)

        def prepared(err: ErrorCode) -> None:
            if err == ErrorCode.none:
                self._write_markers_and_complete(self.txns[txn_id])

        self._commit(m, new, prepared)

    def _write_markers_and_complete(self, m: TransactionMetadata) -> None:
        commit = m.state is T.PREPARE_COMMIT
        m.pending = True

        def written(err: ErrorCode) -> None:
            m.pending = False
            if err != ErrorCode.none:
                # Stays Prepare* and is retried by tick(); what queued behind it is answered now
                # (CONCURRENT_TRANSACTIONS while nothing is in flight) rather than left waiting.
                self._run_waiting(m)
                return
            new = m.prepare_transition(T.COMPLETE_COMMIT if commit else T.COMPLETE_ABORT)
            new.partitions = set()
            if m.next_producer_id >= 0:
                # last_producer_epoch stays the epoch the client sent, so its retried EndTxn is
                # recognised and answered with the new id.
                new.last_producer_id = m.producer_id
                new.producer_id, new.producer_epoch, new.next_producer_id = m.next_producer_id, 0, -1
            self._commit(m, new, lambda _err: None)

        self.write_markers(m.producer_id, m.producer_epoch, commit, set(m.partitions), written)

    # ------------------------------------------------------------------ timers / listing

    def tick(self) -> list[str]:
        """Abort transactions open longer than their timeout; retry stuck marker writes.
        Returns the ids aborted."""
        now = self.clock()
        aborted = []
        for m in list(self.txns.values()):
            if m.pending:
                continue
            if m.state is T.ONGOING and m.start_ms >= 0 and now - m.start_ms > m.timeout_ms:
                self._abort(m, bump_epoch=True)
                aborted.append(m.transactional_id)
            elif m.state in (T.PREPARE_COMMIT, T.PREPARE_ABORT):
                self._write_markers_and_complete(m)
            elif m.state is T.PREPARE_EPOCH_FENCE:
                self._abort(m, bump_epoch=False)  # the fence is durable, its abort record was not
        return aborted

    def list(self, states: set[str] | None = None, producer_ids: set[int] | None = None,
             min_duration_ms: int = -1) -> list[TransactionMetadata]:
        now = self.clock()
        out = []
        for m in self.txns.values():
            if m.state is T.DEAD or (states and m.state.kafka_name not in states):
                continue
            if producer_ids and m.producer_id not in producer_ids:
                continue
            # KIP-994: strictly longer than the filter (Kafka counts from start -1 for Empty).
            if min_duration_ms >= 0 and now - m.start_ms <= min_duration_ms:
                continue
            out.append(m)
        return out
