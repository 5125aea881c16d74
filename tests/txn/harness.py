"""The harness of the transaction coordinator's state-machine tests: no sockets, no asyncio.

Time is a mutable int behind the injected clock; producer ids come from a counter; durability is a
fake ``persist`` that records the ``__transaction_state`` values it is given and answers
``on_done`` (at once with NONE, with KAFKA_STORAGE_ERROR, or later, when the test says so); markers
go to a fake ``write_markers`` that records (pid, epoch, commit, partitions) and answers the same
ways. Expected behaviour is Kafka's TransactionCoordinator / TransactionMetadata / TransactionState
(KIP-98, KIP-360, KIP-664/994 listing, KIP-890 transaction version 2), with one deliberate
difference: a request for a transactional id whose change is *pending* (a ``__transaction_state``
write, or the markers of a Prepare*, in flight) is not answered CONCURRENT_TRANSACTIONS as in
Kafka but queued, and re-run in arrival order against the metadata installed once the change is
done. Such requests are asserted to get no answer while the write is held and then the answer
they would get against the new state. CONCURRENT_TRANSACTIONS remains the answer when nothing is
in flight: a transaction stuck in Prepare*/PrepareEpochFence after a failed write, and the
InitProducerId that starts an epoch-fencing abort. Bugs these tests found were fixed; their tests
stay as regression tests.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from oncelog import errors
from oncelog.apis._txn import error_code, producer_answer
from oncelog.config.settings import TxnConfig
from oncelog.txn.coordinator import TransactionCoordinator
from oncelog.txn.records import decode_value, value_of
from oncelog.txn.state import TransactionMetadata, TransactionState

E = ErrorCode
T = TransactionState

# Answers are turned into wire codes as the handlers do (oncelog.apis._txn), at these API keys
# and, unless a test says otherwise, each API's latest version.
INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, END_TXN = 22, 24, 26
LATEST = 5
OFFSETS_PARTITION = ("__consumer_offsets", 3)

TIMEOUT = 60_000
TXN = "txn-1"
P0, P1, P2 = ("t", 0), ("t", 1), ("u", 0)


class Once:
    """A respond callback that must be called at most once; keeps what it got."""

    def __init__(self, name: str = "respond", log: list | None = None):
        self.name = name
        self.calls: list = []
        self.log = log

    def __call__(self, *args):
        self.calls.append(args[0] if len(args) == 1 else args)
        if self.log is not None:
            self.log.append(self)
        assert len(self.calls) == 1, f"{self.name} called {len(self.calls)} times: {self.calls}"

    @property
    def called(self) -> bool:
        return bool(self.calls)

    @property
    def result(self):
        assert self.calls, f"{self.name} was not called"
        return self.calls[0]


class Harness:
    """``persist_mode`` / ``marker_mode``: "ok" (answer None at once), "fail" (answer
    KafkaStorageError at once) or "hold" (keep on_done until :meth:`release_persist` /
    :meth:`release_markers`); ``marker_mode`` also "raise" (raise KafkaStorageError, as a
    marker the log refuses may). ``allocate_fails``: producer id allocation raises
    CoordinatorLoadInProgress (no id block could be made durable). ``persist_script`` is consumed first, one mode per persist call.
    Every group's offsets live in :data:`OFFSETS_PARTITION`."""

    def __init__(self, config: TxnConfig | None = None):
        self.now = 1_000_000
        self.next_pid = 1000
        self.persist_mode = "ok"
        self.persist_script: list[str] = []
        self.marker_mode = "ok"
        self.allocate_fails = False
        self.persisted: list[tuple[str, bytes | None]] = []
        self.held_persists: list = []
        self.markers: list[tuple[int, int, bool, frozenset]] = []
        self.held_markers: list = []
        self.answered: list[Once] = []  # every request's Once, in the order they were answered
        self.expired_calls: list[list[str]] = []  # the ids of each persist_expired call
        self.coord = TransactionCoordinator(lambda: self.now, self._allocate, self._persist, self._write_markers,
                                            lambda group_id: OFFSETS_PARTITION, persist_expired=self._persist_expired,
                                            config=config or TxnConfig())

    # -- injected I/O
    def _allocate(self) -> int:
        if self.allocate_fails:  # no block of ids could be made durable (a full disk)
            raise errors.CoordinatorLoadInProgress("test: no producer id block")
        pid, self.next_pid = self.next_pid, self.next_pid + 1
        return pid

    def _persist(self, txn_id, m, on_done, record: bool = True):
        if record:
            self.persisted.append((txn_id, value_of(m)))
        mode = self.persist_script.pop(0) if self.persist_script else self.persist_mode
        if mode == "ok":
            on_done(None)
        elif mode == "fail":
            on_done(_domain(E.kafka_storage_error))
        else:
            self.held_persists.append(on_done)

    def _persist_expired(self, txn_ids, on_done):
        """The tombstones of one expiry sweep: recorded as persisted, answered together."""
        ids = list(txn_ids)
        self.expired_calls.append(ids)
        self.persisted.extend((txn_id, None) for txn_id in ids)
        self._persist(None, None, lambda error: on_done(ids, error), record=False)

    def _write_markers(self, pid, epoch, commit, partitions, on_done):
        self.markers.append((pid, epoch, commit, frozenset(partitions)))
        if self.marker_mode == "ok":
            on_done(None)
        elif self.marker_mode == "fail":
            on_done(_domain(E.kafka_storage_error))
        elif self.marker_mode == "raise":  # a marker the log refused, raised rather than reported
            raise _domain(E.kafka_storage_error)
        else:
            self.held_markers.append(on_done)

    def release_persist(self, error=E.none, mode: str = "ok") -> None:
        """Answer, in order, every persist held now; later persists (including those made while
        releasing, e.g. by queued requests) use ``mode``."""
        self.persist_mode = mode
        held, self.held_persists = self.held_persists, []
        for on_done in held:
            on_done(_domain(error))

    def release_markers(self, error=E.none, mode: str = "ok") -> None:
        self.marker_mode = mode
        held, self.held_markers = self.held_markers, []
        for on_done in held:
            on_done(_domain(error))

    # -- views
    def records(self, txn_id: str = TXN) -> list[TransactionMetadata]:
        return [decode_value(t, v) for t, v in self.persisted if t == txn_id and v is not None]

    def states(self, txn_id: str = TXN) -> list[TransactionState]:
        return [m.state for m in self.records(txn_id)]

    def txn(self, txn_id: str = TXN) -> TransactionMetadata:
        return self.coord.txns[txn_id]

    def tick(self, ms: int = 0) -> list[str]:
        self.now += ms
        return self.coord.tick()

    def verify(self, txn_id, pid, epoch, topic, partition) -> ErrorCode | None:
        """verify_partition as an error code, None when the batch may be appended."""
        try:
            self.coord.verify_partition(txn_id, pid, epoch, topic, partition)
            return None
        except errors.KafkaError as exc:
            return errors.error_code_for(exc)

    def list(self, states=None, producer_ids=None, min_duration_ms=-1) -> list[TransactionMetadata]:
        return self.coord.list_transactions(states, producer_ids, min_duration_ms).transactions

    # -- requests: each answer is recorded as the handler would send it (codes, not errors)
    def init(self, txn_id=TXN, timeout=TIMEOUT, pid=-1, epoch=-1, version=LATEST) -> Once:
        r = Once(f"init({txn_id})", self.answered)
        self.coord.init_producer_id(txn_id, timeout, pid, epoch,
                                    lambda outcome: r(*producer_answer(outcome, INIT_PRODUCER_ID, version)))
        return r

    def add(self, pid, epoch, *parts, txn_id=TXN, tv2=False, version=LATEST) -> Once:
        r = Once(f"add({parts})", self.answered)
        self.coord.add_partitions(txn_id, pid, epoch, set(parts or {P0}),
                                  lambda error: r(error_code(error, ADD_PARTITIONS_TO_TXN, version)), tv2=tv2)
        return r

    def end(self, pid, epoch, commit=True, tv2=False, txn_id=TXN, version=LATEST) -> Once:
        r = Once(f"end({'commit' if commit else 'abort'})", self.answered)
        self.coord.end_txn(txn_id, pid, epoch, commit, tv2,
                           lambda outcome: r(*producer_answer(outcome, END_TXN, version)))
        return r

    # -- compound steps
    def producer(self, txn_id=TXN, timeout=TIMEOUT) -> tuple[int, int]:
        err, pid, epoch = self.init(txn_id, timeout).result
        assert err == E.none
        return pid, epoch

    def ongoing(self, *parts, txn_id=TXN, tv2=False) -> tuple[int, int]:
        pid, epoch = self.producer(txn_id)
        assert self.add(pid, epoch, *(parts or (P0, P1)), txn_id=txn_id, tv2=tv2).result == E.none
        return pid, epoch


def meta(txn_id=TXN, pid=7, epoch=3, state=T.ONGOING, partitions=(P0, P1), start=500_000, timeout=TIMEOUT,
         last_pid=-1, last_epoch=-1, tv2=False) -> TransactionMetadata:
    return TransactionMetadata(txn_id, pid, epoch, timeout, state, last_pid, last_epoch, frozenset(partitions), start,
                               start, False, tv2)


def _domain(code: ErrorCode) -> errors.KafkaError | None:
    """What a fake write answers for a test's error code: None for NONE, else the domain error."""
    error = next((cls for cls, c in errors.ERROR_CODES.items() if c == code), errors.KafkaError)
    return None if code == E.none else error(f"test: {code.name}")
