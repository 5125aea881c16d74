"""State-machine tests of the transaction coordinator: no sockets, no asyncio.

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

import itertools

import pytest
from kio.schema.errors import ErrorCode

from oncelog.txn.coordinator import (
    MAX_EPOCH,
    TRANSITIONS,
    IllegalTxnTransition,
    TransactionCoordinator,
    TxnConfig,
    TxnMetadata,
    TxnState,
    check_transition,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

E = ErrorCode
T = TxnState

TIMEOUT = 60_000
TXN = "txn-1"
P0, P1, P2 = ("t", 0), ("t", 1), ("u", 0)


# ---------------------------------------------------------------------------------------- harness


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
    """``persist_mode`` / ``marker_mode``: "ok" (answer NONE at once), "fail" (answer
    KAFKA_STORAGE_ERROR at once) or "hold" (keep on_done until :meth:`release_persist` /
    :meth:`release_markers`). ``persist_script`` is consumed first, one mode per persist call."""

    def __init__(self, config: TxnConfig | None = None):
        self.now = 1_000_000
        self.next_pid = 1000
        self.persist_mode = "ok"
        self.persist_script: list[str] = []
        self.marker_mode = "ok"
        self.persisted: list[tuple[str, bytes | None]] = []
        self.held_persists: list = []
        self.markers: list[tuple[int, int, bool, frozenset]] = []
        self.held_markers: list = []
        self.answered: list[Once] = []  # every request's Once, in the order they were answered
        self.coord = TransactionCoordinator(lambda: self.now, self._allocate, self._persist, self._write_markers,
                                            config or TxnConfig())

    # -- injected I/O
    def _allocate(self) -> int:
        pid, self.next_pid = self.next_pid, self.next_pid + 1
        return pid

    def _persist(self, txn_id, value, on_done):
        self.persisted.append((txn_id, value))
        mode = self.persist_script.pop(0) if self.persist_script else self.persist_mode
        if mode == "ok":
            on_done(E.none)
        elif mode == "fail":
            on_done(E.kafka_storage_error)
        else:
            self.held_persists.append(on_done)

    def _write_markers(self, pid, epoch, commit, partitions, on_done):
        self.markers.append((pid, epoch, commit, frozenset(partitions)))
        if self.marker_mode == "ok":
            on_done(E.none)
        elif self.marker_mode == "fail":
            on_done(E.kafka_storage_error)
        else:
            self.held_markers.append(on_done)

    def release_persist(self, error=E.none, mode: str = "ok") -> None:
        """Answer, in order, every persist held now; later persists (including those made while
        releasing, e.g. by queued requests) use ``mode``."""
        self.persist_mode = mode
        held, self.held_persists = self.held_persists, []
        for on_done in held:
            on_done(error)

    def release_markers(self, error=E.none, mode: str = "ok") -> None:
        self.marker_mode = mode
        held, self.held_markers = self.held_markers, []
        for on_done in held:
            on_done(error)

    # -- views
    def records(self, txn_id: str = TXN) -> list[TxnMetadata]:
        return [decode_value(t, v) for t, v in self.persisted if t == txn_id and v is not None]

    def states(self, txn_id: str = TXN) -> list[TxnState]:
        return [m.state for m in self.records(txn_id)]

    def txn(self, txn_id: str = TXN) -> TxnMetadata:
        return self.coord.txns[txn_id]

    def tick(self, ms: int = 0) -> list[str]:
        self.now += ms
        return self.coord.tick()

    # -- requests
    def init(self, txn_id=TXN, timeout=TIMEOUT, pid=-1, epoch=-1) -> Once:
        r = Once(f"init({txn_id})", self.answered)
        self.coord.init_producer_id(txn_id, timeout, pid, epoch, r)
        return r

    def add(self, pid, epoch, *parts, txn_id=TXN, tv2=False, fenced=E.producer_fenced) -> Once:
        r = Once(f"add({parts})", self.answered)
        self.coord.add_partitions(txn_id, pid, epoch, set(parts or {P0}), r, fenced=fenced, tv2=tv2)
        return r

    def end(self, pid, epoch, commit=True, tv2=False, txn_id=TXN) -> Once:
        r = Once(f"end({'commit' if commit else 'abort'})", self.answered)
        self.coord.end_txn(txn_id, pid, epoch, commit, tv2, r)
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
         last_pid=-1, last_epoch=-1, tv2=False) -> TxnMetadata:
    return TxnMetadata(txn_id, pid, epoch, timeout, state, last_pid, last_epoch, set(partitions), start, start,
                       False, tv2)


# ------------------------------------------------------------------------------ state table

# Kafka's TransactionState.VALID_PREVIOUS_STATES (transaction-coordinator module, TV2 included).
KAFKA_VALID_PREVIOUS = {
    T.EMPTY: {T.EMPTY, T.COMPLETE_COMMIT, T.COMPLETE_ABORT},
    T.ONGOING: {T.ONGOING, T.EMPTY, T.COMPLETE_COMMIT, T.COMPLETE_ABORT},
    T.PREPARE_COMMIT: {T.ONGOING},
    T.PREPARE_ABORT: {T.ONGOING, T.PREPARE_EPOCH_FENCE, T.EMPTY, T.COMPLETE_COMMIT, T.COMPLETE_ABORT},
    T.COMPLETE_COMMIT: {T.PREPARE_COMMIT},
    T.COMPLETE_ABORT: {T.PREPARE_ABORT},
    T.DEAD: {T.EMPTY, T.COMPLETE_ABORT, T.COMPLETE_COMMIT},
    T.PREPARE_EPOCH_FENCE: {T.ONGOING},
}


@pytest.mark.parametrize("old,new", list(itertools.product(TxnState, TxnState)),
                         ids=lambda s: s.kafka_name)
def test_check_transition_accepts_exactly_the_table(old, new):
    if new in TRANSITIONS[old]:
        check_transition("x", old, new)
    else:
        with pytest.raises(IllegalTxnTransition, match=f"{old.kafka_name} -> {new.kafka_name}"):
            check_transition("x", old, new)


def test_transition_table_covers_every_state_and_is_kafkas():
    assert set(TRANSITIONS) == set(TxnState)
    forward = {old: {new for new, prev in KAFKA_VALID_PREVIOUS.items() if old in prev} for old in TxnState}
    assert {s: set(v) for s, v in TRANSITIONS.items()} == forward
    assert TRANSITIONS[T.DEAD] == frozenset()


def test_state_bytes_and_names_are_kafkas():
    assert [(s.value, s.kafka_name) for s in TxnState] == [
        (0, "Empty"), (1, "Ongoing"), (2, "PrepareCommit"), (3, "PrepareAbort"), (4, "CompleteCommit"),
        (5, "CompleteAbort"), (6, "Dead"), (7, "PrepareEpochFence")]


# ------------------------------------------------------------------------------ InitProducerId


def test_init_new_id_gets_epoch_zero_and_a_persisted_empty_record():
    h = Harness()
    assert h.init(timeout=12_345).result == (E.none, 1000, 0)
    (rec,) = h.records()
    assert (rec.producer_id, rec.producer_epoch, rec.state, rec.timeout_ms) == (1000, 0, T.EMPTY, 12_345)
    assert rec.partitions == set() and rec.start_ms == -1
    assert h.txn().state is T.EMPTY and not h.txn().pending
    assert h.coord.txn_for_producer(1000) is h.txn()


def test_init_is_answered_only_after_the_record_is_durable():
    h = Harness()
    h.persist_mode = "hold"
    r = h.init()
    # a pending placeholder is visible at once (so concurrent requests queue behind it), but the
    # producer id is not mapped and nothing is answered until the record is durable
    assert not r.called
    assert h.txn().pending and (h.txn().producer_id, h.txn().state) == (1000, T.EMPTY)
    assert h.coord.txn_for_producer(1000) is None
    h.release_persist()
    assert r.result == (E.none, 1000, 0)
    assert not h.txn().pending and h.coord.txn_for_producer(1000) is h.txn()


def test_init_persist_failure_installs_nothing():
    h = Harness()
    h.persist_mode = "fail"
    assert h.init().result == (E.kafka_storage_error, -1, -1)
    assert TXN not in h.coord.txns and h.coord.by_producer_id == {}


def test_reinit_bumps_the_epoch_and_fences_the_previous_instance():
    h = Harness()
    pid, e0 = h.producer()
    assert h.init().result == (E.none, pid, e0 + 1)
    rec = h.records()[-1]
    assert rec.producer_epoch == e0 + 1 and rec.state is T.EMPTY
    # Kafka prepareIncrementProducerEpoch: no expected epoch given -> lastProducerEpoch -1
    assert (rec.last_producer_id, rec.last_producer_epoch) == (pid, -1)
    # the old instance is fenced everywhere
    assert h.add(pid, e0).result == E.producer_fenced
    assert h.add(pid, e0, fenced=E.invalid_producer_epoch).result == E.invalid_producer_epoch
    assert h.end(pid, e0).result == (E.producer_fenced, -1, -1)


def test_reinit_after_a_completed_transaction_starts_clean():
    h = Harness()
    pid, e = h.ongoing()
    assert h.end(pid, e).result[0] == E.none
    h.now += 10
    assert h.init(timeout=5_000).result == (E.none, pid, e + 1)
    m = h.txn()
    assert (m.state, m.partitions, m.start_ms, m.timeout_ms) == (T.EMPTY, set(), -1, 5_000)


def test_epoch_exhaustion_allocates_a_new_producer_id():
    h = Harness()
    h.coord.load(TXN, meta(pid=7, epoch=MAX_EPOCH, state=T.COMPLETE_COMMIT, partitions=()))
    assert h.init().result == (E.none, 1000, 0)
    m = h.txn()
    assert (m.producer_id, m.producer_epoch) == (1000, 0)
    assert h.coord.txn_for_producer(1000) is m and h.coord.txn_for_producer(7) is None


def test_epoch_exhaustion_with_kip360_id_rotates_and_a_retry_gets_the_new_id():
    h = Harness()
    h.coord.load(TXN, meta(pid=7, epoch=MAX_EPOCH, state=T.EMPTY, partitions=()))
    assert h.init(pid=7, epoch=MAX_EPOCH).result == (E.none, 1000, 0)
    # the response was lost: the producer retries with the id/epoch it still has
    assert h.init(pid=7, epoch=MAX_EPOCH).result == (E.none, 1000, 0)
    assert h.next_pid == 1001  # no further id allocated


@pytest.mark.parametrize("timeout", [0, -1, TxnConfig().max_timeout_ms + 1])
def test_invalid_transaction_timeout(timeout):
    h = Harness()
    assert h.init(timeout=timeout).result == (E.invalid_transaction_timeout, -1, -1)
    assert h.persisted == []


def test_max_timeout_is_accepted_and_configurable():
    h = Harness(TxnConfig(max_timeout_ms=1_000))
    assert h.init(timeout=1_000).result[0] == E.none
    assert h.init(timeout=1_001).result == (E.invalid_transaction_timeout, -1, -1)


def test_empty_transactional_id_is_invalid_request():
    assert Harness().init(txn_id="").result == (E.invalid_request, -1, -1)


def test_init_while_a_change_is_pending_waits_then_runs_in_order():
    h = Harness()
    pid, e = h.producer()
    h.persist_mode = "hold"
    add = h.add(pid, e)
    new_instance = h.init()
    old_instance = h.init(pid=pid, epoch=e)
    assert not (add.called or new_instance.called or old_instance.called)
    assert len(h.held_persists) == 1  # the queued requests wrote nothing yet
    h.release_persist()
    assert h.answered[-3:] == [add, new_instance, old_instance]
    assert add.result == E.none
    # against the now Ongoing transaction the first InitProducerId fences and aborts it ...
    assert new_instance.result == (E.concurrent_transactions, -1, -1)
    assert h.states()[-3:] == [T.PREPARE_EPOCH_FENCE, T.PREPARE_ABORT, T.COMPLETE_ABORT]
    # ... so the second, run after it, names an epoch that is no longer current
    assert old_instance.result == (E.producer_fenced, -1, -1)
    assert (h.txn().state, h.txn().producer_epoch) == (T.COMPLETE_ABORT, e + 1)


def test_concurrent_init_of_a_new_transactional_id_waits_then_bumps():
    # Kafka puts the new metadata in its cache before the append (putTransactionStateIfNotExists) and
    # answers the second request CONCURRENT_TRANSACTIONS; here it waits for the first record and then
    # is an ordinary re-initialisation of the id the first created.
    h = Harness()
    h.persist_mode = "hold"
    first = h.init()
    second = h.init()
    assert not first.called and not second.called
    assert len(h.held_persists) == 1
    h.release_persist()
    assert h.answered == [first, second]
    assert first.result == (E.none, 1000, 0)
    assert second.result == (E.none, 1000, 1)
    assert h.next_pid == 1001  # one producer id only
    assert [(r.producer_id, r.producer_epoch, r.state) for r in h.records()] == [(1000, 0, T.EMPTY), (1000, 1, T.EMPTY)]
    assert h.coord.txn_for_producer(1000) is h.txn()


def test_concurrent_init_of_a_new_transactional_id_whose_first_record_fails():
    h = Harness()
    h.persist_mode = "hold"
    first = h.init()
    second = h.init()
    add = h.add(1000, 0)  # a request naming the producer id the placeholder would get
    h.release_persist(error=E.kafka_storage_error)
    assert h.answered == [first, second, add]
    assert first.result == (E.kafka_storage_error, -1, -1)
    # re-run against no metadata at all: the second creates the id afresh with a new producer id
    assert second.result == (E.none, 1001, 0)
    assert add.result == E.invalid_producer_id_mapping
    assert h.coord.txn_for_producer(1000) is None and h.coord.txn_for_producer(1001) is h.txn()
    assert not h.txn().pending and h.txn().waiting == []


def test_init_while_markers_are_written_waits_for_the_transaction_to_complete():
    h = Harness()
    pid, e = h.ongoing()
    h.marker_mode = "hold"
    assert h.end(pid, e).result[0] == E.none
    assert h.txn().state is T.PREPARE_COMMIT and h.txn().pending
    r = h.init()
    assert not r.called
    h.release_markers()
    assert h.states()[-2:] == [T.COMPLETE_COMMIT, T.EMPTY]
    assert r.result == (E.none, pid, e + 1)
    assert (h.txn().state, h.txn().producer_epoch) == (T.EMPTY, e + 1)


def test_init_during_a_stuck_prepare_is_concurrent_transactions():
    # markers failed: PrepareCommit with nothing in flight until tick() retries
    h = Harness()
    pid, e = h.ongoing()
    h.marker_mode = "fail"
    assert h.end(pid, e).result[0] == E.none
    assert h.txn().state is T.PREPARE_COMMIT and not h.txn().pending
    assert h.init().result == (E.concurrent_transactions, -1, -1)
    assert h.init(pid=pid, epoch=e).result == (E.concurrent_transactions, -1, -1)
    h.marker_mode = "ok"
    h.tick(1)
    assert h.init().result == (E.none, pid, e + 1)


def test_kip360_reinit_with_current_id_bumps_and_a_retry_gets_the_current_epoch():
    h = Harness()
    pid, e = h.producer()
    assert h.init(pid=pid, epoch=e).result == (E.none, pid, e + 1)
    n = len(h.persisted)
    # response lost; the producer retries with the id/epoch it had
    assert h.init(pid=pid, epoch=e).result == (E.none, pid, e + 1)
    assert len(h.persisted) == n  # nothing new written, no second bump
    # with the epoch it now has, it bumps again
    assert h.init(pid=pid, epoch=e + 1).result == (E.none, pid, e + 2)


@pytest.mark.parametrize("given", [(999, 0), ("pid", 5), ("pid", -1)])
def test_kip360_reinit_with_a_wrong_id_or_epoch_is_fenced(given):
    h = Harness()
    pid, e = h.producer()
    assert h.init(pid=pid, epoch=e).result == (E.none, pid, e + 1)
    gpid, gepoch = given
    assert h.init(pid=pid if gpid == "pid" else gpid, epoch=gepoch).result == (E.producer_fenced, -1, -1)
    assert h.txn().producer_epoch == e + 1


def test_kip360_reinit_of_an_unknown_transactional_id_gets_a_fresh_id():
    # Kafka: a producer recovering from UNKNOWN_PRODUCER_ID after its id expired gets new metadata.
    h = Harness()
    assert h.init(pid=55, epoch=4).result == (E.none, 1000, 0)


def test_zombie_cannot_reinit_after_a_new_instance_took_over():
    # Kafka prepareIncrementProducerEpoch: with no expected epoch, lastProducerEpoch = -1 ("a new producer
    # calling InitProducerId would have caused the last epoch to be set to -1"), so the old instance's
    # InitProducerId(pid, old epoch) gets PRODUCER_FENCED instead of the new instance's epoch.
    h = Harness()
    pid, e = h.producer()               # instance A
    assert h.init().result == (E.none, pid, e + 1)   # instance B (no id): fences A
    assert h.init(pid=pid, epoch=e).result == (E.producer_fenced, -1, -1)   # A tries KIP-360 re-init


# ------------------------------------------------------------------------------ InitProducerId on Ongoing


def test_init_on_ongoing_fences_aborts_with_the_new_epoch_and_answers_concurrent():
    h = Harness()
    pid, e = h.ongoing(P0, P1)
    n = len(h.persisted)
    assert h.init().result == (E.concurrent_transactions, -1, -1)
    new = h.records()[n:]
    assert [m.state for m in new] == [T.PREPARE_EPOCH_FENCE, T.PREPARE_ABORT, T.COMPLETE_ABORT]
    assert all(m.producer_epoch == e + 1 for m in new)
    # Kafka prepareFenceProducerEpoch: lastProducerEpoch -1, so the fenced instance is no "retry"
    assert all((m.last_producer_id, m.last_producer_epoch) == (pid, -1) for m in new)
    assert new[0].partitions == new[1].partitions == {P0, P1}
    assert h.markers == [(pid, e + 1, False, frozenset({P0, P1}))]
    m = h.txn()
    assert (m.state, m.producer_epoch, m.partitions) == (T.COMPLETE_ABORT, e + 1, set())
    # the old instance is fenced
    assert h.end(pid, e).result == (E.producer_fenced, -1, -1)
    assert h.add(pid, e).result == E.producer_fenced
    # the new instance retries and gets a further bumped epoch
    assert h.init().result == (E.none, pid, e + 2)


def test_init_on_ongoing_while_the_abort_is_in_progress():
    # The abort stays pending from the fence to CompleteAbort (each step starts the next write
    # before the previous one's completion returns), so the client's retry waits for all of it.
    h = Harness()
    pid, e = h.ongoing()
    h.marker_mode = "hold"
    assert h.init().result == (E.concurrent_transactions, -1, -1)  # the InitProducerId that fences
    assert h.txn().state is T.PREPARE_ABORT and h.txn().pending
    retry = h.init()
    assert not retry.called  # still aborting: waits
    h.release_markers()
    assert h.states()[-2:] == [T.COMPLETE_ABORT, T.EMPTY]
    assert retry.result == (E.none, pid, e + 2)
    assert (h.txn().state, h.txn().producer_epoch) == (T.EMPTY, e + 2)


def test_init_on_ongoing_fence_held_queues_other_requests():
    h = Harness()
    pid, e = h.ongoing()
    h.persist_mode = "hold"
    trigger = h.init()
    assert trigger.result == (E.concurrent_transactions, -1, -1)  # answered at once, fence still held
    assert h.txn().pending and h.txn().state is T.ONGOING
    old_end = h.end(pid, e)
    retry = h.init()
    assert h.tick(TIMEOUT * 2) == []  # pending: the timeout path leaves it alone
    assert not old_end.called and not retry.called and h.markers == []
    h.release_persist()
    assert h.states()[-4:] == [T.PREPARE_EPOCH_FENCE, T.PREPARE_ABORT, T.COMPLETE_ABORT, T.EMPTY]
    assert h.answered[-3:] == [trigger, old_end, retry]
    assert old_end.result == (E.producer_fenced, -1, -1)  # the old instance's commit lost the race
    assert retry.result == (E.none, pid, e + 2)
    assert h.markers == [(pid, e + 1, False, frozenset({P0, P1}))]


def test_init_on_ongoing_at_the_last_epoch_rotates_on_retry():
    h = Harness()
    h.coord.load(TXN, meta(pid=7, epoch=MAX_EPOCH, state=T.ONGOING))
    assert h.init().result == (E.concurrent_transactions, -1, -1)
    assert h.markers == [(7, MAX_EPOCH + 1, False, frozenset({P0, P1}))]
    assert h.init().result == (E.none, 1000, 0)


def test_init_on_ongoing_fence_write_failure_keeps_the_transaction_and_a_retry_fences():
    h = Harness()
    pid, e = h.ongoing()
    h.persist_mode = "fail"
    assert h.init().result == (E.concurrent_transactions, -1, -1)
    assert h.txn().state is T.ONGOING and h.txn().producer_epoch == e and not h.txn().pending
    h.persist_mode = "ok"
    assert h.init().result == (E.concurrent_transactions, -1, -1)
    assert h.txn().state is T.COMPLETE_ABORT and h.txn().producer_epoch == e + 1


def test_fence_followed_by_a_failed_prepare_abort_is_finished_by_tick():
    # Kafka keeps no durable PrepareEpochFence: a failed PrepareAbort append leaves the transaction
    # Ongoing (hasFailedEpochFence), so the timeout or the client's retry aborts it again. Here the
    # fence is durable and tick() writes its PrepareAbort again.
    h = Harness()
    pid, e = h.ongoing()
    h.persist_script = ["ok", "fail"]  # the fence is durable, the PrepareAbort write fails
    assert h.init().result == (E.concurrent_transactions, -1, -1)
    assert h.txn().state is T.PREPARE_EPOCH_FENCE and not h.txn().pending
    # nothing in flight: answered at once
    assert h.init().result == (E.concurrent_transactions, -1, -1)
    assert h.end(pid, e).result == (E.producer_fenced, -1, -1)
    assert h.end(pid, e + 1).result == (E.concurrent_transactions, -1, -1)
    assert h.tick(1) == []  # not an Ongoing timeout: a retry of the abort
    assert h.states()[-2:] == [T.PREPARE_ABORT, T.COMPLETE_ABORT]
    assert h.txn().state is T.COMPLETE_ABORT
    assert h.init().result == (E.none, pid, e + 2)


def test_zombie_cannot_reinit_after_its_transaction_was_fenced():
    # Kafka: the PrepareEpochFence path sets lastProducerEpoch = NO_PRODUCER_EPOCH, so after the abort an
    # InitProducerId(pid, fenced epoch) fails prepareIncrementProducerEpoch with PRODUCER_FENCED.
    h = Harness()
    pid, e = h.ongoing()
    assert h.init().result == (E.concurrent_transactions, -1, -1)   # new instance B fences A
    assert h.txn().state is T.COMPLETE_ABORT
    assert h.init(pid=pid, epoch=e).result == (E.producer_fenced, -1, -1)   # zombie A


# ------------------------------------------------------------------------------ AddPartitions


def test_add_partitions_starts_the_transaction_after_it_is_durable():
    h = Harness()
    pid, e = h.producer()
    h.now += 250
    start = h.now
    h.persist_mode = "hold"
    r = h.add(pid, e, P0, P1)
    assert not r.called and h.txn().state is T.EMPTY and h.txn().pending
    h.release_persist()
    assert r.result == E.none
    m = h.txn()
    assert (m.state, m.partitions, m.start_ms) == (T.ONGOING, {P0, P1}, start)
    rec = h.records()[-1]
    assert (rec.state, rec.partitions, rec.start_ms) == (T.ONGOING, {P0, P1}, start)


def test_add_more_partitions_keeps_the_start_time():
    h = Harness()
    pid, e = h.ongoing(P0)
    start = h.txn().start_ms
    h.now += 1_000
    n = len(h.persisted)
    assert h.add(pid, e, P0).result == E.none
    assert len(h.persisted) == n  # already in the transaction: nothing written
    assert h.add(pid, e, P1, P2).result == E.none
    assert h.txn().partitions == {P0, P1, P2} and h.txn().start_ms == start
    assert h.records()[-1].partitions == {P0, P1, P2}


def test_add_partitions_after_completion_starts_a_new_transaction():
    h = Harness()
    pid, e = h.ongoing(P0, P1)
    assert h.end(pid, e).result[0] == E.none
    h.now += 5_000
    assert h.add(pid, e, P2).result == E.none
    m = h.txn()
    assert (m.state, m.partitions, m.start_ms) == (T.ONGOING, {P2}, h.now)


def test_add_partitions_persist_failure_changes_nothing():
    h = Harness()
    pid, e = h.producer()
    h.persist_mode = "fail"
    assert h.add(pid, e).result == E.kafka_storage_error
    m = h.txn()
    assert (m.state, m.partitions, m.pending) == (T.EMPTY, set(), False)


def test_add_partitions_fenced_epoch():
    h = Harness()
    pid, e = h.producer()
    assert h.add(pid, e + 1).result == E.producer_fenced
    assert h.add(pid, e - 1 if e else 5).result == E.producer_fenced
    assert h.txn().state is T.EMPTY


def test_add_partitions_unknown_producer_or_transactional_id():
    h = Harness()
    pid, e = h.producer()
    assert h.add(pid + 1, e).result == E.invalid_producer_id_mapping
    assert h.add(pid, e, txn_id="nope").result == E.invalid_producer_id_mapping


@pytest.mark.parametrize("commit", [True, False])
def test_add_partitions_while_markers_are_written_waits_then_starts_the_next_transaction(commit):
    h = Harness()
    pid, e = h.ongoing(P0)
    h.marker_mode = "hold"
    assert h.end(pid, e, commit=commit).result[0] == E.none
    assert h.txn().state is (T.PREPARE_COMMIT if commit else T.PREPARE_ABORT)
    h.now += 100
    r = h.add(pid, e, P1)
    assert not r.called
    h.release_markers()
    assert r.result == E.none
    assert h.states()[-2:] == [T.COMPLETE_COMMIT if commit else T.COMPLETE_ABORT, T.ONGOING]
    m = h.txn()
    assert (m.state, m.partitions, m.start_ms) == (T.ONGOING, {P1}, h.now)


@pytest.mark.parametrize("commit", [True, False])
def test_add_partitions_during_a_stuck_prepare_is_concurrent_transactions(commit):
    h = Harness()
    pid, e = h.ongoing(P0)
    h.marker_mode = "fail"
    assert h.end(pid, e, commit=commit).result[0] == E.none
    assert h.txn().state is (T.PREPARE_COMMIT if commit else T.PREPARE_ABORT) and not h.txn().pending
    assert h.add(pid, e, P1).result == E.concurrent_transactions
    h.marker_mode = "ok"
    h.tick(1)
    assert h.add(pid, e, P1).result == E.none


def test_add_partitions_during_a_pending_write_waits_then_extends_the_transaction():
    h = Harness()
    pid, e = h.producer()
    h.persist_mode = "hold"
    first = h.add(pid, e, P0)
    start = h.now
    h.now += 50
    second = h.add(pid, e, P1)
    assert not first.called and not second.called and len(h.held_persists) == 1
    h.release_persist(mode="hold")
    assert first.result == E.none and h.txn().partitions == {P0}
    # the queued request ran against Ongoing{P0} and is itself waiting for its write
    assert not second.called and len(h.held_persists) == 1 and h.txn().pending
    h.release_persist()
    assert second.result == E.none
    m = h.txn()
    assert (m.state, m.partitions, m.start_ms) == (T.ONGOING, {P0, P1}, start)
    assert [(r.state, r.partitions) for r in h.records()[-2:]] == [(T.ONGOING, {P0}), (T.ONGOING, {P0, P1})]


def test_add_partitions_queued_behind_a_failed_write_runs_against_the_unchanged_state():
    h = Harness()
    pid, e = h.producer()
    h.persist_mode = "hold"
    first = h.add(pid, e, P0)
    second = h.add(pid, e, P1)
    h.release_persist(error=E.kafka_storage_error)
    assert h.answered[-2:] == [first, second]
    assert first.result == E.kafka_storage_error
    assert second.result == E.none  # started the transaction from Empty itself
    assert (h.txn().state, h.txn().partitions) == (T.ONGOING, {P1})


def test_add_partitions_queued_behind_a_fence_is_fenced():
    h = Harness()
    pid, e = h.ongoing(P0)
    h.persist_mode = "hold"
    assert h.init().result == (E.concurrent_transactions, -1, -1)
    late = h.add(pid, e, P1, fenced=E.invalid_producer_epoch)
    assert not late.called
    h.release_persist()
    assert late.result == E.invalid_producer_epoch
    assert h.txn().state is T.COMPLETE_ABORT and h.markers == [(pid, e + 1, False, frozenset({P0}))]


def test_verify_partition():
    h = Harness()
    pid, e = h.ongoing(P0)
    v = h.coord.verify_partition
    assert v(TXN, pid, e, *P0) is None
    assert v(None, pid, e, *P0) is None  # looked up by producer id
    assert v(TXN, pid, e, *P1) == E.invalid_txn_state
    assert v(TXN, pid + 1, e, *P0) == E.invalid_producer_id_mapping
    assert v("other", pid, e, *P0) == E.invalid_producer_id_mapping
    assert h.init().result[0] == E.concurrent_transactions  # new instance fences: epoch e+1
    assert v(TXN, pid, e, *P0) == E.invalid_producer_epoch
    assert v(TXN, pid, e + 1, *P0) == E.invalid_txn_state  # aborted: not in a transaction


def test_verify_partition_before_any_transaction_and_after_completion():
    h = Harness()
    pid, e = h.producer()
    assert h.coord.verify_partition(TXN, pid, e, *P0) == E.invalid_txn_state
    assert h.add(pid, e, P0).result == E.none
    assert h.end(pid, e).result[0] == E.none
    assert h.coord.verify_partition(TXN, pid, e, *P0) == E.invalid_txn_state


# ------------------------------------------------------------------------------ EndTxn (TV1)


@pytest.mark.parametrize("commit", [True, False])
def test_end_txn_is_answered_after_prepare_is_durable_then_markers_then_complete(commit):
    h = Harness()
    pid, e = h.ongoing(P0, P2)
    h.persist_mode = "hold"
    r = h.end(pid, e, commit=commit)
    assert not r.called and h.markers == []
    assert h.records()[-1].state is (T.PREPARE_COMMIT if commit else T.PREPARE_ABORT)
    assert h.txn().state is T.ONGOING and h.txn().pending  # not installed before it is durable
    h.marker_mode = "hold"
    h.release_persist(mode="hold")
    assert r.result == (E.none, pid, e)
    assert h.txn().state is (T.PREPARE_COMMIT if commit else T.PREPARE_ABORT)
    assert h.markers == [(pid, e, commit, frozenset({P0, P2}))]
    n = len(h.persisted)
    h.release_markers()
    assert len(h.persisted) == n + 1
    rec = h.records()[-1]
    assert rec.state is (T.COMPLETE_COMMIT if commit else T.COMPLETE_ABORT) and rec.partitions == set()
    assert h.txn().state is T.PREPARE_COMMIT if commit else T.PREPARE_ABORT  # Complete* not durable yet
    h.release_persist()
    m = h.txn()
    assert m.state is (T.COMPLETE_COMMIT if commit else T.COMPLETE_ABORT)
    assert m.partitions == set() and m.producer_epoch == e and not m.pending


def test_end_txn_prepare_write_failure_leaves_the_transaction_ongoing():
    h = Harness()
    pid, e = h.ongoing()
    h.persist_mode = "fail"
    assert h.end(pid, e).result == (E.kafka_storage_error, -1, -1)
    assert h.txn().state is T.ONGOING and not h.txn().pending and h.markers == []
    h.persist_mode = "ok"
    assert h.end(pid, e).result == (E.none, pid, e)
    assert h.txn().state is T.COMPLETE_COMMIT


@pytest.mark.parametrize("commit", [True, False])
def test_end_txn_retry_after_completion_is_none(commit):
    h = Harness()
    pid, e = h.ongoing()
    assert h.end(pid, e, commit=commit).result == (E.none, pid, e)
    n = len(h.persisted)
    assert h.end(pid, e, commit=commit).result[0] == E.none
    assert len(h.persisted) == n and len(h.markers) == 1


@pytest.mark.parametrize("commit", [True, False])
def test_end_txn_mismatched_retry_is_invalid_txn_state(commit):
    h = Harness()
    pid, e = h.ongoing()
    assert h.end(pid, e, commit=commit).result[0] == E.none
    assert h.end(pid, e, commit=not commit).result == (E.invalid_txn_state, -1, -1)


@pytest.mark.parametrize("commit", [True, False])
def test_end_txn_on_empty_is_invalid_txn_state(commit):
    h = Harness()
    pid, e = h.producer()
    assert h.end(pid, e, commit=commit).result == (E.invalid_txn_state, -1, -1)
    assert h.txn().state is T.EMPTY


@pytest.mark.parametrize("commit", [True, False])
def test_end_txn_retry_while_markers_are_written_waits_then_is_none(commit):
    h = Harness()
    pid, e = h.ongoing()
    h.marker_mode = "hold"
    assert h.end(pid, e, commit=commit).result[0] == E.none
    retry = h.end(pid, e, commit=commit)
    mismatched = h.end(pid, e, commit=not commit)
    assert not retry.called and not mismatched.called
    h.release_markers()
    assert h.answered[-2:] == [retry, mismatched]
    assert retry.result == (E.none, pid, e)  # TV1 retry against Complete*
    assert mismatched.result == (E.invalid_txn_state, -1, -1)
    assert len(h.markers) == 1 and h.states()[-1] is (T.COMPLETE_COMMIT if commit else T.COMPLETE_ABORT)
    assert h.end(pid, e, commit=commit).result == (E.none, pid, e)


def test_end_txn_retry_while_prepare_is_written_waits_then_is_none():
    h = Harness()
    pid, e = h.ongoing()
    h.persist_mode = "hold"
    first = h.end(pid, e)
    retry = h.end(pid, e)
    assert not first.called and not retry.called and len(h.held_persists) == 1
    h.release_persist()
    assert h.answered[-2:] == [first, retry]
    assert first.result == retry.result == (E.none, pid, e)
    assert len(h.markers) == 1 and h.states()[-2:] == [T.PREPARE_COMMIT, T.COMPLETE_COMMIT]


def test_end_txn_retry_during_a_stuck_prepare_is_concurrent_transactions():
    h = Harness()
    pid, e = h.ongoing()
    h.marker_mode = "fail"
    assert h.end(pid, e).result[0] == E.none
    assert h.txn().state is T.PREPARE_COMMIT and not h.txn().pending
    assert h.end(pid, e).result == (E.concurrent_transactions, -1, -1)
    assert h.end(pid, e, commit=False).result == (E.concurrent_transactions, -1, -1)
    h.marker_mode = "ok"
    h.tick(1)
    assert h.end(pid, e).result == (E.none, pid, e)


def test_requests_queued_behind_a_failed_complete_record_get_concurrent_transactions():
    # markers written, the Complete* write fails: back to PrepareCommit with nothing in flight
    h = Harness()
    pid, e = h.ongoing()
    h.persist_script = ["ok", "hold"]  # PrepareCommit durable, CompleteCommit held
    assert h.end(pid, e).result == (E.none, pid, e)
    assert h.txn().state is T.PREPARE_COMMIT and h.txn().pending and len(h.markers) == 1
    retry, init, add = h.end(pid, e), h.init(), h.add(pid, e, P2)
    assert not (retry.called or init.called or add.called)
    h.release_persist(error=E.kafka_storage_error)
    assert h.answered[-3:] == [retry, init, add]
    assert retry.result == init.result == (E.concurrent_transactions, -1, -1)
    assert add.result == E.concurrent_transactions
    assert h.txn().state is T.PREPARE_COMMIT and not h.txn().pending and h.txn().waiting == []
    h.tick(1)
    assert h.txn().state is T.COMPLETE_COMMIT


def test_end_txn_unknown_and_fenced():
    h = Harness()
    pid, e = h.ongoing()
    assert h.end(pid, e, txn_id="nope").result == (E.invalid_producer_id_mapping, -1, -1)
    assert h.end(pid + 1, e).result == (E.invalid_producer_id_mapping, -1, -1)
    assert h.end(pid, e + 1).result == (E.producer_fenced, -1, -1)
    r = Once()
    h.coord.end_txn(TXN, pid, e + 1, True, False, r, fenced=E.invalid_producer_epoch)
    assert r.result == (E.invalid_producer_epoch, -1, -1)
    assert h.txn().state is T.ONGOING


def test_marker_failure_leaves_prepare_and_tick_retries():
    h = Harness()
    pid, e = h.ongoing(P0, P1)
    h.marker_mode = "fail"
    assert h.end(pid, e).result == (E.none, pid, e)
    assert h.txn().state is T.PREPARE_COMMIT and not h.txn().pending
    assert h.states()[-1] is T.PREPARE_COMMIT
    assert h.tick(1) == []
    assert h.txn().state is T.PREPARE_COMMIT and len(h.markers) == 2
    h.marker_mode = "ok"
    assert h.tick(1) == []
    assert len(h.markers) == 3 and all(mk == (pid, e, True, frozenset({P0, P1})) for mk in h.markers)
    assert h.txn().state is T.COMPLETE_COMMIT and h.states()[-1] is T.COMPLETE_COMMIT


def test_tick_does_not_resend_markers_that_are_in_flight():
    h = Harness()
    pid, e = h.ongoing()
    h.marker_mode = "hold"
    assert h.end(pid, e).result[0] == E.none
    h.tick(TIMEOUT * 2)
    assert len(h.markers) == 1
    h.release_markers()
    assert h.txn().state is T.COMPLETE_COMMIT


def test_complete_record_failure_is_retried_by_tick():
    h = Harness()
    pid, e = h.ongoing()
    h.persist_script = ["ok", "fail"]  # PrepareCommit durable, CompleteCommit write fails
    assert h.end(pid, e).result == (E.none, pid, e)
    assert h.txn().state is T.PREPARE_COMMIT and not h.txn().pending
    h.tick(1)
    assert h.txn().state is T.COMPLETE_COMMIT and len(h.markers) == 2


def test_requests_queued_behind_failed_markers_are_answered_in_order():
    h = Harness()
    pid, e = h.ongoing()
    h.marker_mode = "hold"
    assert h.end(pid, e).result == (E.none, pid, e)
    retry, add = h.end(pid, e), h.add(pid, e, P2)
    h.release_markers(error=E.kafka_storage_error)
    assert h.txn().state is T.PREPARE_COMMIT and not h.txn().pending
    assert retry.called and add.called, "queued requests left waiting with nothing in flight"
    # nothing is in flight any more: they got what a request arriving now gets, before it
    later = h.end(pid, e)
    assert later.result == (E.concurrent_transactions, -1, -1)
    assert h.answered[-3:] == [retry, add, later]
    assert retry.result == (E.concurrent_transactions, -1, -1)
    assert add.result == E.concurrent_transactions
    assert h.txn().waiting == []


def test_queued_requests_run_in_arrival_order_against_the_state_then_installed():
    h = Harness()
    pid, e = h.ongoing(P0)
    h.persist_mode = "hold"
    add_p1 = h.add(pid, e, P1)   # pending: Ongoing{P0} -> Ongoing{P0,P1}
    commit = h.end(pid, e)
    add_p2 = h.add(pid, e, P2)   # after the commit: starts the next transaction
    retry = h.end(pid, e)        # a TV1 retry of the commit, now against Ongoing{P2}: commits that one
    assert not any(r.called for r in (add_p1, commit, add_p2, retry))
    assert len(h.held_persists) == 1
    h.release_persist()
    assert h.answered[-4:] == [add_p1, commit, add_p2, retry]
    assert add_p1.result == E.none and add_p2.result == E.none
    assert commit.result == retry.result == (E.none, pid, e)
    assert h.markers == [(pid, e, True, frozenset({P0, P1})), (pid, e, True, frozenset({P2}))]
    assert h.txn().state is T.COMPLETE_COMMIT and h.txn().waiting == []


def test_abort_uses_abort_markers_and_the_next_transaction_starts_clean():
    h = Harness()
    pid, e = h.ongoing(P0)
    assert h.end(pid, e, commit=False).result == (E.none, pid, e)
    assert h.markers == [(pid, e, False, frozenset({P0}))]
    assert h.add(pid, e, P1).result == E.none
    assert h.end(pid, e).result == (E.none, pid, e)
    assert h.markers[-1] == (pid, e, True, frozenset({P1}))


# ------------------------------------------------------------------------------ EndTxn (TV2)


def test_tv2_every_end_txn_bumps_the_epoch_and_returns_it():
    h = Harness()
    pid, e = h.ongoing(P0, P1, tv2=True)
    assert h.end(pid, e, tv2=True).result == (E.none, pid, e + 1)
    recs = h.records()
    assert [r.state for r in recs[-2:]] == [T.PREPARE_COMMIT, T.COMPLETE_COMMIT]
    assert all(r.producer_epoch == e + 1 and r.tv2 for r in recs[-2:])
    assert h.markers == [(pid, e + 1, True, frozenset({P0, P1}))]
    # the next transaction uses the new epoch; the old one is fenced
    assert h.add(pid, e, P0, tv2=True).result == E.producer_fenced
    assert h.add(pid, e + 1, P0, tv2=True).result == E.none
    assert h.end(pid, e + 1, commit=False, tv2=True).result == (E.none, pid, e + 2)
    assert h.markers[-1] == (pid, e + 2, False, frozenset({P0}))


@pytest.mark.parametrize("commit", [True, False])
def test_tv2_retry_with_the_previous_epoch_after_completion_is_none_without_bump(commit):
    h = Harness()
    pid, e = h.ongoing(tv2=True)
    assert h.end(pid, e, commit=commit, tv2=True).result == (E.none, pid, e + 1)
    n, k = len(h.persisted), len(h.markers)
    assert h.end(pid, e, commit=commit, tv2=True).result == (E.none, pid, e + 1)
    assert (len(h.persisted), len(h.markers)) == (n, k)
    assert h.txn().producer_epoch == e + 1


def test_tv2_late_end_txn_with_an_older_epoch_is_fenced():
    h = Harness()
    pid, e = h.ongoing(tv2=True)
    assert h.end(pid, e, tv2=True).result == (E.none, pid, e + 1)
    assert h.add(pid, e + 1, tv2=True).result == E.none
    assert h.end(pid, e + 1, tv2=True).result == (E.none, pid, e + 2)
    # a late EndTxn of the first transaction cannot touch the second (KAFKA-17754)
    assert h.end(pid, e, tv2=True).result == (E.producer_fenced, -1, -1)
    assert h.end(pid, e, commit=False, tv2=True).result == (E.producer_fenced, -1, -1)
    assert h.txn().producer_epoch == e + 2 and h.txn().state is T.COMPLETE_COMMIT


def test_tv2_same_epoch_commit_on_complete_commit_is_invalid_txn_state():
    # Kafka's TV2 table: CompleteCommit + Commit at the current epoch -> INVALID_TXN_STATE
    h = Harness()
    pid, e = h.ongoing(tv2=True)
    assert h.end(pid, e, tv2=True).result == (E.none, pid, e + 1)
    assert h.end(pid, e + 1, tv2=True).result == (E.invalid_txn_state, -1, -1)


@pytest.mark.parametrize("state", [T.EMPTY, T.COMPLETE_COMMIT, T.COMPLETE_ABORT])
def test_tv2_abort_without_a_transaction_is_allowed_and_bumps(state):
    h = Harness()
    pid, e = h.producer()
    if state is not T.EMPTY:
        assert h.add(pid, e, tv2=True).result == E.none
        assert h.end(pid, e, commit=state is T.COMPLETE_COMMIT, tv2=True).result[0] == E.none
        e += 1
    assert h.txn().state is state
    k = len(h.markers)
    assert h.end(pid, e, commit=False, tv2=True).result == (E.none, pid, e + 1)
    m = h.txn()
    assert (m.state, m.producer_epoch, m.partitions) == (T.COMPLETE_ABORT, e + 1, set())
    assert h.states()[-2:] == [T.PREPARE_ABORT, T.COMPLETE_ABORT]
    assert all(not mk[3] for mk in h.markers[k:])  # no partition gets a marker
    assert h.end(pid, e, commit=False, tv2=True).result == (E.none, pid, e + 1)  # its retry


def test_tv2_commit_on_empty_is_invalid_txn_state_but_tv1_abort_on_empty_too():
    h = Harness()
    pid, e = h.producer()
    assert h.end(pid, e, commit=True, tv2=True).result == (E.invalid_txn_state, -1, -1)
    assert h.end(pid, e, commit=False, tv2=False).result == (E.invalid_txn_state, -1, -1)
    assert h.txn().producer_epoch == e


def test_tv2_abort_right_after_a_commit_waits_for_the_markers():
    # KAFKA-18464: the producer gets the bumped epoch as soon as PrepareCommit is durable and may
    # send an (empty) abort with it while markers are still written. Kafka answers it
    # CONCURRENT_TRANSACTIONS (not fenced); here it waits for CompleteCommit and then runs.
    h = Harness()
    pid, e = h.ongoing(tv2=True)
    h.marker_mode = "hold"
    assert h.end(pid, e, tv2=True).result == (E.none, pid, e + 1)
    abort = h.end(pid, e + 1, commit=False, tv2=True)
    add = h.add(pid, e + 1, P2, tv2=True)
    assert not abort.called and not add.called
    h.release_markers()
    assert h.answered[-2:] == [abort, add]
    assert abort.result == (E.none, pid, e + 2)  # the empty abort bumped the epoch ...
    assert add.result == E.producer_fenced        # ... so the add queued after it is fenced
    assert h.states()[-3:] == [T.COMPLETE_COMMIT, T.PREPARE_ABORT, T.COMPLETE_ABORT]
    assert (h.txn().state, h.txn().producer_epoch) == (T.COMPLETE_ABORT, e + 2)
    assert h.end(pid, e + 1, commit=False, tv2=True).result == (E.none, pid, e + 2)  # its retry


def test_tv2_add_right_after_a_commit_waits_for_the_markers():
    h = Harness()
    pid, e = h.ongoing(P0, tv2=True)
    h.marker_mode = "hold"
    assert h.end(pid, e, tv2=True).result == (E.none, pid, e + 1)
    add = h.add(pid, e + 1, P2, tv2=True)
    assert not add.called
    h.release_markers()
    assert add.result == E.none
    m = h.txn()
    assert (m.state, m.partitions, m.producer_epoch) == (T.ONGOING, {P2}, e + 1)


@pytest.mark.parametrize("commit", [True, False])
def test_tv2_retry_while_markers_are_written_waits_then_is_none(commit):
    # Kafka endTransaction (TV2): in PrepareCommit/PrepareAbort the epoch is valid when it is a retry of
    # the bumping EndTxn (stored epoch == request epoch + 1); Kafka answers CONCURRENT_TRANSACTIONS so the
    # client retries until the transaction is complete, then gets NONE. Here the retry waits for that.
    h = Harness()
    pid, e = h.ongoing(tv2=True)
    h.marker_mode = "hold"
    assert h.end(pid, e, commit=commit, tv2=True).result == (E.none, pid, e + 1)   # response lost
    retry = h.end(pid, e, commit=commit, tv2=True)
    zombie = h.end(pid, e - 1, commit=commit, tv2=True)
    assert not retry.called and not zombie.called
    h.release_markers()
    assert h.answered[-2:] == [retry, zombie]
    assert retry.result == (E.none, pid, e + 1)
    assert zombie.result == (E.producer_fenced, -1, -1)
    assert len(h.markers) == 1 and h.txn().producer_epoch == e + 1
    assert h.end(pid, e, commit=commit, tv2=True).result == (E.none, pid, e + 1)


@pytest.mark.parametrize("commit", [True, False])
def test_tv2_retry_during_a_stuck_prepare_is_concurrent_transactions(commit):
    h = Harness()
    pid, e = h.ongoing(tv2=True)
    h.marker_mode = "fail"
    assert h.end(pid, e, commit=commit, tv2=True).result == (E.none, pid, e + 1)
    assert not h.txn().pending
    assert h.end(pid, e, commit=commit, tv2=True).result == (E.concurrent_transactions, -1, -1)
    assert h.end(pid, e, commit=not commit, tv2=True).result == (E.invalid_txn_state, -1, -1)
    assert h.end(pid, e - 1, commit=commit, tv2=True).result == (E.producer_fenced, -1, -1)
    h.marker_mode = "ok"
    h.tick(1)
    assert h.end(pid, e, commit=commit, tv2=True).result == (E.none, pid, e + 1)


@pytest.mark.parametrize("commit", [True, False])
def test_tv2_mismatched_retry_is_invalid_txn_state(commit):
    h = Harness()
    pid, e = h.ongoing(tv2=True)
    assert h.end(pid, e, commit=commit, tv2=True).result == (E.none, pid, e + 1)
    n = len(h.persisted)
    assert h.end(pid, e, commit=not commit, tv2=True).result == (E.invalid_txn_state, -1, -1)
    assert len(h.persisted) == n and h.txn().producer_epoch == e + 1


def test_tv2_epoch_exhaustion_rotates_the_producer_id():
    # Kafka (KIP-890, KAFKA-18660): when the epoch is exhausted a new producer id is allocated with the
    # Prepare* record; the transaction's markers use the old id, and the producer continues with the new
    # id at epoch 0.
    h = Harness()
    h.coord.load(TXN, meta(pid=7, epoch=MAX_EPOCH, state=T.ONGOING, tv2=True))
    assert h.end(7, MAX_EPOCH, tv2=True).result == (E.none, 1000, 0)
    assert h.markers == [(7, MAX_EPOCH + 1, True, frozenset({P0, P1}))]
    prepare, complete = h.records()
    assert (prepare.producer_id, prepare.producer_epoch, prepare.next_producer_id) == (7, MAX_EPOCH + 1, 1000)
    assert (complete.producer_id, complete.producer_epoch, complete.next_producer_id) == (1000, 0, -1)
    m = h.txn()
    assert (m.producer_id, m.producer_epoch, m.state) == (1000, 0, T.COMPLETE_COMMIT)
    assert h.coord.txn_for_producer(1000) is m and h.coord.txn_for_producer(7) is None
    assert h.add(7, MAX_EPOCH + 1, tv2=True).result == E.invalid_producer_id_mapping
    assert h.add(1000, 0, tv2=True).result == E.none
    assert h.end(1000, 0, tv2=True).result == (E.none, 1000, 1)


def test_tv2_epoch_exhaustion_next_transaction_waits_for_the_rotation():
    # the producer has the new id as soon as the Prepare* is durable; its next AddPartitions waits
    # until the markers (old id) are written and the id has rotated
    h = Harness()
    h.coord.load(TXN, meta(pid=7, epoch=MAX_EPOCH, state=T.ONGOING, tv2=True))
    h.marker_mode = "hold"
    assert h.end(7, MAX_EPOCH, tv2=True).result == (E.none, 1000, 0)
    assert h.txn().producer_id == 7 and h.txn().pending
    add = h.add(1000, 0, P2, tv2=True)
    assert not add.called
    h.release_markers()
    assert add.result == E.none
    m = h.txn()
    assert (m.producer_id, m.producer_epoch, m.state, m.partitions) == (1000, 0, T.ONGOING, {P2})


@pytest.mark.parametrize("commit", [True, False])
def test_tv2_retry_after_epoch_exhaustion_gets_the_new_producer_id(commit):
    # Kafka TransactionCoordinator.handleEndTransaction: retryOnOverflow (prevProducerId == producerId,
    # producerEpoch == Short.MaxValue - 1, current epoch 0) is a retry: NONE with the rotated id, epoch 0.
    h = Harness()
    h.coord.load(TXN, meta(pid=7, epoch=MAX_EPOCH, state=T.ONGOING, tv2=True))
    assert h.end(7, MAX_EPOCH, commit=commit, tv2=True).result == (E.none, 1000, 0)   # response lost
    n = len(h.persisted)
    assert h.end(7, MAX_EPOCH, commit=commit, tv2=True).result == (E.none, 1000, 0)
    assert h.end(7, MAX_EPOCH, commit=not commit, tv2=True).result == (E.invalid_txn_state, -1, -1)
    assert len(h.persisted) == n and len(h.markers) == 1 and h.next_pid == 1001


# ------------------------------------------------------------------------------ timeout


def test_timeout_aborts_with_an_epoch_bump():
    h = Harness()
    pid, e = h.ongoing(P0, P1)
    start = h.txn().start_ms
    h.now = start + TIMEOUT
    assert h.tick() == []  # not older than its timeout yet
    assert h.txn().state is T.ONGOING
    n = len(h.persisted)
    assert h.tick(1) == [TXN]
    assert [m.state for m in h.records()[n:]] == [T.PREPARE_EPOCH_FENCE, T.PREPARE_ABORT, T.COMPLETE_ABORT]
    assert h.markers == [(pid, e + 1, False, frozenset({P0, P1}))]
    m = h.txn()
    assert (m.state, m.producer_epoch, m.partitions) == (T.COMPLETE_ABORT, e + 1, set())
    assert h.tick(TIMEOUT * 10) == []  # nothing left to abort


def test_timeout_uses_each_transactions_own_timeout():
    h = Harness()
    h.init("short", timeout=1_000)
    h.init("long", timeout=100_000)
    for t in ("short", "long"):
        m = h.txn(t)
        assert h.add(m.producer_id, m.producer_epoch, txn_id=t).result == E.none
    assert h.tick(1_001) == ["short"]
    assert h.txn("long").state is T.ONGOING
    assert h.tick(100_000) == ["long"]


def test_empty_and_complete_transactions_never_time_out():
    h = Harness()
    h.producer("a")
    pid, e = h.ongoing(txn_id="b")
    assert h.end(pid, e, txn_id="b").result[0] == E.none
    assert h.tick(TIMEOUT * 100) == []


@pytest.mark.parametrize("commit,tv2", [(True, False), (False, False), (True, True)])
def test_late_producer_after_timeout_is_fenced(commit, tv2):
    h = Harness()
    pid, e = h.ongoing(tv2=tv2)
    assert h.tick(TIMEOUT + 1) == [TXN]
    assert h.end(pid, e, commit=commit, tv2=tv2).result == (E.producer_fenced, -1, -1)
    assert h.add(pid, e, P2, tv2=tv2).result == E.producer_fenced
    assert h.coord.verify_partition(TXN, pid, e, *P0) == E.invalid_producer_epoch
    assert h.txn().state is T.COMPLETE_ABORT and h.txn().producer_epoch == e + 1


def test_timed_out_producer_reinit_with_its_old_epoch_is_fenced():
    h = Harness()
    pid, e = h.ongoing()
    assert h.tick(TIMEOUT + 1) == [TXN]
    assert h.init(pid=pid, epoch=e).result == (E.producer_fenced, -1, -1)


def test_timeout_abort_whose_markers_fail_is_completed_by_tick():
    h = Harness()
    pid, e = h.ongoing()
    h.marker_mode = "fail"
    assert h.tick(TIMEOUT + 1) == [TXN]
    assert h.txn().state is T.PREPARE_ABORT
    h.marker_mode = "ok"
    assert h.tick(1) == []
    assert h.txn().state is T.COMPLETE_ABORT and h.markers[-1] == (pid, e + 1, False, frozenset({P0, P1}))


# ------------------------------------------------------------------------------ records, replay, recover


def test_record_key_round_trip():
    assert decode_key(encode_key("tx-é")) == "tx-é"
    assert encode_key("ab") == b"\x00\x00\x00\x02ab"
    with pytest.raises(ValueError):
        decode_key(b"\x00\x01\x00\x02ab")


@pytest.mark.parametrize("m", [
    meta(),
    meta(pid=2**40, epoch=MAX_EPOCH, state=T.PREPARE_COMMIT, partitions=(P0, P1, P2, ("long-topic-name", 99)),
         last_pid=3, last_epoch=MAX_EPOCH - 1, tv2=True, timeout=900_000),
    meta(state=T.EMPTY, partitions=(), start=-1),
    meta(state=T.PREPARE_EPOCH_FENCE),
])
def test_record_value_round_trip(m):
    got = decode_value(m.transactional_id, encode_value(m))
    assert got == m
    assert not got.pending


def test_record_value_layout_and_version():
    m = meta(state=T.ONGOING, partitions=(P0,))
    data = encode_value(m)
    assert data[:2] == b"\x00\x01"  # value version 1
    assert data[16] == T.ONGOING.value
    with pytest.raises(ValueError):
        decode_value(TXN, b"\x00\x07" + data[2:])


def test_load_then_recover_a_prepare_commit_writes_commit_markers_and_completes():
    h = Harness()
    h.coord.load(TXN, meta(pid=7, epoch=3, state=T.PREPARE_COMMIT, partitions=(P0, P2)))
    assert h.coord.txn_for_producer(7) is h.txn()
    h.coord.recover()
    assert h.markers == [(7, 3, True, frozenset({P0, P2}))]
    assert h.states() == [T.COMPLETE_COMMIT]
    m = h.txn()
    assert (m.state, m.partitions, m.producer_epoch) == (T.COMPLETE_COMMIT, set(), 3)


def test_recover_a_prepare_abort():
    h = Harness()
    h.coord.load(TXN, meta(pid=7, epoch=3, state=T.PREPARE_ABORT, partitions=(P1,)))
    h.coord.recover()
    assert h.markers == [(7, 3, False, frozenset({P1}))]
    assert h.txn().state is T.COMPLETE_ABORT


def test_recover_a_prepare_epoch_fence_aborts_with_the_fenced_epoch():
    h = Harness()
    h.coord.load(TXN, meta(pid=7, epoch=4, state=T.PREPARE_EPOCH_FENCE, last_pid=7, last_epoch=3))
    h.coord.recover()
    assert h.states() == [T.PREPARE_ABORT, T.COMPLETE_ABORT]
    assert h.markers == [(7, 4, False, frozenset({P0, P1}))]
    assert h.txn().producer_epoch == 4 and h.txn().state is T.COMPLETE_ABORT
    assert h.end(7, 3).result == (E.producer_fenced, -1, -1)


def test_recover_leaves_an_ongoing_transaction_until_its_timeout():
    h = Harness()
    h.coord.load(TXN, meta(pid=7, epoch=3, state=T.ONGOING, start=h.now - 1_000))
    h.coord.recover()
    assert h.persisted == [] and h.markers == []
    assert h.tick() == [] and h.txn().state is T.ONGOING
    # its producer may still finish it
    assert h.coord.verify_partition(TXN, 7, 3, *P0) is None
    assert h.tick(TIMEOUT) == [TXN]
    assert h.txn().state is T.COMPLETE_ABORT and h.txn().producer_epoch == 4


def test_recover_with_failing_markers_is_retried_by_tick():
    h = Harness()
    h.coord.load(TXN, meta(pid=7, epoch=3, state=T.PREPARE_COMMIT))
    h.marker_mode = "fail"
    h.coord.recover()
    assert h.txn().state is T.PREPARE_COMMIT
    h.marker_mode = "ok"
    h.tick()
    assert h.txn().state is T.COMPLETE_COMMIT


def test_replay_of_every_persisted_record_reproduces_the_state():
    h = Harness()
    pid, e = h.ongoing(P0, tv2=True)
    assert h.end(pid, e, tv2=True).result[0] == E.none
    assert h.add(pid, e + 1, P1, tv2=True).result == E.none
    h2 = Harness()
    for txn_id, value in h.persisted:
        h2.coord.load(txn_id, decode_value(txn_id, value) if value is not None else None)
    h2.coord.recover()
    got, want = h2.txn(), h.txn()
    assert (got.producer_id, got.producer_epoch, got.state, got.partitions, got.start_ms, got.tv2) == \
        (want.producer_id, want.producer_epoch, want.state, want.partitions, want.start_ms, want.tv2)
    assert h2.markers == []


def test_load_later_records_replace_earlier_and_tombstones_remove():
    h = Harness()
    h.coord.load(TXN, meta(pid=7, epoch=3, state=T.EMPTY, partitions=()))
    h.coord.load(TXN, meta(pid=8, epoch=0, state=T.EMPTY, partitions=()))
    assert h.coord.txn_for_producer(7) is None and h.coord.txn_for_producer(8) is h.txn()
    h.coord.load(TXN, None)
    assert TXN not in h.coord.txns and h.coord.by_producer_id == {}
    h.coord.load("never-seen", None)  # a tombstone for an unknown id is harmless


# ------------------------------------------------------------------------------ list


def _listing(h):
    h.coord.load("empty", meta("empty", pid=1, state=T.EMPTY, partitions=(), start=-1))
    h.coord.load("old", meta("old", pid=2, state=T.ONGOING, start=h.now - 10_000))
    h.coord.load("new", meta("new", pid=3, state=T.ONGOING, start=h.now - 100))
    h.coord.load("prep", meta("prep", pid=4, state=T.PREPARE_COMMIT, start=h.now - 5_000))
    h.coord.load("done", meta("done", pid=5, state=T.COMPLETE_ABORT, partitions=(), start=h.now - 20_000))
    h.coord.load("dead", meta("dead", pid=6, state=T.DEAD, partitions=(), start=h.now - 30_000))


def ids(txns):
    return sorted(m.transactional_id for m in txns)


def test_list_filters():
    h = Harness()
    _listing(h)
    assert ids(h.coord.list()) == ["done", "empty", "new", "old", "prep"]
    assert ids(h.coord.list(states={"Ongoing"})) == ["new", "old"]
    assert ids(h.coord.list(states={"Ongoing", "PrepareCommit"})) == ["new", "old", "prep"]
    assert ids(h.coord.list(states={"CompleteAbort", "Empty"})) == ["done", "empty"]
    assert ids(h.coord.list(producer_ids={2, 4, 99})) == ["old", "prep"]
    # Kafka counts Empty from start -1, so it passes every duration filter
    assert ids(h.coord.list(min_duration_ms=1_000)) == ["done", "empty", "old", "prep"]
    assert ids(h.coord.list(states={"Ongoing"}, min_duration_ms=1_000)) == ["old"]
    assert ids(h.coord.list(states={"Ongoing"}, producer_ids={3})) == ["new"]
    assert h.coord.list(states={"Ongoing"}, producer_ids={4}) == []
    # Dead (an id being expired) is never listed, whatever the filters (Kafka listTransactionStates)
    assert h.coord.list(states={"Dead"}) == [] and h.coord.list(producer_ids={6}) == []
    assert "dead" in h.coord.txns


def test_list_sees_live_transitions():
    h = Harness()
    pid, e = h.ongoing()
    assert ids(h.coord.list(states={"Ongoing"})) == [TXN]
    h.marker_mode = "hold"
    assert h.end(pid, e).result[0] == E.none
    assert ids(h.coord.list(states={"PrepareCommit"})) == [TXN]
    h.release_markers()
    assert ids(h.coord.list(states={"CompleteCommit"})) == [TXN]


def test_list_duration_filter_is_strictly_longer():
    # Kafka TransactionStateManager.listTransactionStates: excluded when now - start <= durationFilter.
    h = Harness()
    h.coord.load("x", meta("x", pid=2, state=T.ONGOING, start=h.now - 1_000))
    assert ids(h.coord.list(min_duration_ms=999)) == ["x"]
    assert h.coord.list(min_duration_ms=1_000) == []
    assert ids(h.coord.list(min_duration_ms=0)) == ["x"]
    assert ids(h.coord.list(min_duration_ms=-1)) == ["x"]  # -1: no filter


def test_list_duration_filter_includes_empty_transactions():
    h = Harness()
    h.coord.load("e", meta("e", pid=1, state=T.EMPTY, partitions=(), start=-1))
    assert ids(h.coord.list(min_duration_ms=h.now)) == ["e"]  # now - (-1) > now
    assert ids(h.coord.list(states={"Empty"}, min_duration_ms=10**9)) == []
