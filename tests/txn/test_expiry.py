"""Transactional-id expiry (Kafka's ``transactional.id.expiration.ms``): an id with no
transaction open (Empty, CompleteCommit, CompleteAbort) and no change for that long is written
as a tombstone to ``__transaction_state`` and forgotten; an open or completing transaction never
expires."""

from __future__ import annotations

import pytest

from oncelog import errors
from oncelog.config.settings import TxnConfig
from oncelog.txn.records import decode_value

from oncelog.txn.coordinator import EXPIRY_CHUNK

from .harness import E, P0, T, TXN, Harness, meta

EXPIRY = 100_000
LONG = 5 * EXPIRY  # a transaction timeout that does not fire in these tests


def harness() -> Harness:
    return Harness(TxnConfig(transactional_id_expiration_ms=EXPIRY, remove_expired_interval_ms=1))


def test_an_idle_empty_id_expires_with_a_tombstone_and_is_forgotten():
    h = harness()
    pid, e = h.producer()
    h.tick(EXPIRY - 1)
    assert h.txn().state is T.EMPTY  # not yet
    n = len(h.persisted)
    assert h.tick(1) == []  # expiry is not an abort
    assert h.persisted[n:] == [(TXN, None)]  # a tombstone
    assert h.coord.txns == {} and h.coord.open == {}
    # the id starts afresh: a new producer id at epoch 0; the old producer is unknown
    assert h.init().result == (E.none, 1001, 0)
    assert h.add(pid, e).result == E.invalid_producer_id_mapping


@pytest.mark.parametrize("commit", [True, False])
def test_a_completed_transactions_id_expires_counting_from_its_last_change(commit):
    h = harness()
    pid, e = h.ongoing(P0)
    h.now += EXPIRY // 2
    assert h.end(pid, e, commit=commit).result[0] == E.none
    h.tick(EXPIRY - 1)
    assert h.txn().state is (T.COMPLETE_COMMIT if commit else T.COMPLETE_ABORT)
    h.tick(1)
    assert TXN not in h.coord.txns


def test_every_change_restarts_the_count():
    h = harness()
    h.producer()
    h.now += EXPIRY - 1
    assert h.init().result[0] == E.none  # an epoch bump is a change
    h.tick(EXPIRY - 1)
    assert TXN in h.coord.txns
    h.tick(1)
    assert TXN not in h.coord.txns


def test_open_and_completing_transactions_never_expire():
    h = harness()
    h.init("ongoing", timeout=LONG)
    m = h.txn("ongoing")
    assert h.add(m.producer_id, m.producer_epoch, txn_id="ongoing").result == E.none
    pid, e = h.ongoing(txn_id="stuck")
    h.marker_mode = "fail"
    assert h.end(pid, e, txn_id="stuck").result[0] == E.none  # PrepareCommit, its markers failing
    h.tick(EXPIRY * 3)
    assert h.txn("ongoing").state is T.ONGOING and h.txn("stuck").state is T.PREPARE_COMMIT
    assert all(value is not None for _, value in h.persisted)


def test_a_request_queued_behind_the_tombstone_runs_against_no_id():
    h = harness()
    pid, e = h.producer()
    h.persist_mode = "hold"
    h.tick(EXPIRY)
    assert h.txn().state is T.EMPTY and h.txn().pending  # the tombstone is being written
    add, init = h.add(pid, e), h.init()
    assert not add.called and not init.called
    h.release_persist()
    assert h.answered[-2:] == [add, init]
    assert add.result == E.invalid_producer_id_mapping
    assert init.result == (E.none, 1001, 0)


def test_a_failed_tombstone_keeps_the_id_and_the_next_sweep_expires_it():
    h = harness()
    h.producer()
    h.persist_mode = "fail"
    h.tick(EXPIRY)
    assert h.txn().state is T.EMPTY and not h.txn().pending
    h.persist_mode = "ok"
    h.tick(1)  # the sweep interval is 1 ms here
    assert TXN not in h.coord.txns


def test_replaying_the_tombstone_forgets_the_id():
    h = harness()
    h.producer()
    h.tick(EXPIRY)
    h2 = harness()
    for txn_id, value in h.persisted:
        h2.coord.load(txn_id, decode_value(txn_id, value) if value is not None else None)
    assert h2.coord.txns == {} and h2.coord.open == {}


def test_the_default_is_kafkas_seven_days():
    assert TxnConfig().transactional_id_expiration_ms == 7 * 24 * 3600 * 1000


# ---------------------------------------------------------------------- the sweep

def test_ids_expire_at_the_sweeps_every_cleanup_interval_counted_from_the_start():
    # Kafka's transaction.remove.expired.transaction.cleanup.interval.ms: the first sweep one
    # interval after the start, then one per interval; an id past its expiration waits for it.
    h = Harness(TxnConfig(transactional_id_expiration_ms=EXPIRY, remove_expired_interval_ms=30_000))
    h.producer()
    for _ in range(119):  # a tick every second up to 119 s: sweeps at 30, 60, 90 s found it young
        h.tick(1000)
    assert TXN in h.coord.txns and h.expired_calls == []
    h.tick(1000)  # 120 s: the fourth sweep
    assert h.coord.txns == {} and h.expired_calls == [[TXN]]


def test_the_default_sweep_interval_is_kafkas_hour():
    assert TxnConfig().remove_expired_interval_ms == 3600 * 1000


def test_a_clock_set_back_does_not_postpone_the_sweep_by_the_jump():
    h = Harness(TxnConfig(transactional_id_expiration_ms=EXPIRY, remove_expired_interval_ms=30_000))
    h.producer()
    h.now -= 10 * 3600 * 1000  # the clock jumps back 10 h: the next sweep is now + interval, not 10 h away
    h.tick()
    h.now += 10 * 3600 * 1000 + EXPIRY
    h.tick()
    assert h.coord.txns == {}


def test_one_sweep_writes_every_expired_ids_tombstone_in_one_call_and_keeps_the_others():
    h = harness()
    ids = [f"t{i}" for i in range(5)]
    for txn_id in ids[:3]:
        h.producer(txn_id)
    h.now += EXPIRY // 2
    for txn_id in ids[3:]:
        h.producer(txn_id)
    pid, e = h.ongoing(P0, txn_id="open")
    h.tick(EXPIRY // 2)
    assert h.expired_calls == [ids[:3]]  # one batch; the younger ids and the open transaction stay
    assert sorted(h.coord.txns) == ["open", "t3", "t4"]
    h.tick(EXPIRY // 2)
    assert h.expired_calls[1:] == [ids[3:]] and sorted(h.coord.txns) == ["open"]


def test_a_group_of_tombstones_that_fails_keeps_its_ids_for_the_next_sweep():
    h = harness()
    for txn_id in ("a", "b", "c"):
        h.producer(txn_id)
    calls = []
    h.coord.persist_expired = lambda txn_ids, on_done: calls.append((list(txn_ids), on_done))
    h.tick(EXPIRY)
    [(ids, on_done)] = calls
    assert all(h.txn(t).pending for t in ids)
    init = h.init("b")  # queues behind its tombstone
    on_done(["a", "c"], None)  # one partition's batch is durable ...
    on_done(["b"], errors.KafkaStorageError("test: full disk"))  # ... another's is not
    assert sorted(h.coord.txns) == ["b"] and not h.txn("b").pending
    assert init.result[0] == E.none and h.txn("b").producer_epoch == 1  # ran against the id kept


def test_the_open_transactions_the_tick_visits_are_kept_apart():
    # The 100 ms tick must not cost a pass over every id a client ever made: it looks at the
    # ids with a transaction open or completing, which the coordinator keeps apart.
    h = harness()
    for i in range(50):
        h.producer(f"idle-{i}")
    pid, e = h.ongoing(P0)
    assert h.coord.open == {TXN: h.txn()}
    assert h.end(pid, e).result[0] == E.none
    assert h.coord.open == {}  # CompleteCommit
    h.ongoing(P0, txn_id="x")
    h.coord.load("y", meta("y", state=T.PREPARE_ABORT))
    assert sorted(h.coord.open) == ["x", "y"]
    h.coord.load("y", None)
    assert sorted(h.coord.open) == ["x"]


def test_twenty_thousand_expired_ids_leave_nothing_in_memory_nor_after_a_replay():
    # The bound, small: after expiry the coordinator holds none of the ids, and replaying what it
    # wrote (values, then tombstones) brings none back.
    h = harness()
    n = 20_000
    for i in range(n):
        h.producer(f"id-{i:05d}")
    live = h.producer("live")
    assert len(h.coord) == n + 1
    h.now += EXPIRY - 1
    assert h.init("live", pid=live[0], epoch=live[1]).result[0] == E.none  # touched: stays
    h.tick(1)  # the sweep finds them; they go EXPIRY_CHUNK per tick
    assert len(h.coord) == n + 1 - EXPIRY_CHUNK
    for _ in range(n // EXPIRY_CHUNK):
        h.tick(100)
    assert h.coord.txns.keys() == {"live"} and h.coord.open == {}
    assert [len(ids) for ids in h.expired_calls] == [EXPIRY_CHUNK] * (n // EXPIRY_CHUNK)
    replayed = harness()
    for txn_id, value in h.persisted:
        replayed.coord.load(txn_id, decode_value(txn_id, value) if value is not None else None)
    assert replayed.coord.txns.keys() == {"live"}


def test_list_transactions_lists_without_copying():
    h = harness()
    pid, e = h.producer()
    [listed] = h.list()
    assert (listed.transactional_id, listed.producer_id, listed.state) == (TXN, pid, T.EMPTY)
    assert not isinstance(listed, type(h.txn()))


def test_an_id_changed_while_its_sweep_is_under_way_is_not_expired():
    h = harness()
    ids = [f"id-{i:05d}" for i in range(EXPIRY_CHUNK + 2)]
    for txn_id in ids:
        h.producer(txn_id)
    h.tick(EXPIRY)  # found: the first chunk goes now, the last two ids at the next tick
    last = ids[-1]
    pid, epoch = h.txn(last).producer_id, h.txn(last).producer_epoch
    assert h.init(last, pid=pid, epoch=epoch).result[0] == E.none  # a change: its count restarts
    h.tick(1)
    assert h.coord.txns.keys() == {last} and h.txn(last).producer_epoch == epoch + 1
