"""Transactional-id expiry (Kafka's ``transactional.id.expiration.ms``): an id with no
transaction open (Empty, CompleteCommit, CompleteAbort) and no change for that long is written
as a tombstone to ``__transaction_state`` and forgotten; an open or completing transaction never
expires."""

from __future__ import annotations

import pytest

from oncelog.config.settings import TxnConfig
from oncelog.txn.records import decode_value

from .harness import E, P0, T, TXN, Harness

EXPIRY = 100_000
LONG = 5 * EXPIRY  # a transaction timeout that does not fire in these tests


def harness() -> Harness:
    return Harness(TxnConfig(transactional_id_expiration_ms=EXPIRY))


def test_an_idle_empty_id_expires_with_a_tombstone_and_is_forgotten():
    h = harness()
    pid, e = h.producer()
    h.tick(EXPIRY - 1)
    assert h.txn().state is T.EMPTY  # not yet
    n = len(h.persisted)
    assert h.tick(1) == []  # expiry is not an abort
    assert h.persisted[n:] == [(TXN, None)]  # a tombstone
    assert TXN not in h.coord.txns and h.coord.txn_for_producer(pid) is None
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


def test_a_failed_tombstone_keeps_the_id_and_the_next_tick_expires_it():
    h = harness()
    h.producer()
    h.persist_mode = "fail"
    h.tick(EXPIRY)
    assert h.txn().state is T.EMPTY and not h.txn().pending
    h.persist_mode = "ok"
    h.tick()
    assert TXN not in h.coord.txns


def test_replaying_the_tombstone_forgets_the_id():
    h = harness()
    h.producer()
    h.tick(EXPIRY)
    h2 = harness()
    for txn_id, value in h.persisted:
        h2.coord.load(txn_id, decode_value(txn_id, value) if value is not None else None)
    assert h2.coord.txns == {} and h2.coord.by_producer_id == {}


def test_the_default_is_kafkas_seven_days():
    assert TxnConfig().transactional_id_expiration_ms == 7 * 24 * 3600 * 1000
