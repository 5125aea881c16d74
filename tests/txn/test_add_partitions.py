"""AddPartitionsToTxn: starting and extending a transaction, queueing behind pending changes,
and KIP-890's verification of a transactional batch's partition."""

from __future__ import annotations

import pytest

from .harness import E, P0, P1, P2, T, TXN, Harness


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
    assert h.add(pid, e).result == E.not_coordinator
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
    assert first.result == E.not_coordinator
    assert second.result == E.none  # started the transaction from Empty itself
    assert (h.txn().state, h.txn().partitions) == (T.ONGOING, {P1})


def test_add_partitions_queued_behind_a_fence_is_fenced():
    h = Harness()
    pid, e = h.ongoing(P0)
    h.persist_mode = "hold"
    assert h.init().result == (E.concurrent_transactions, -1, -1)
    late = h.add(pid, e, P1, version=1)
    assert not late.called
    h.release_persist()
    assert late.result == E.invalid_producer_epoch
    assert h.txn().state is T.COMPLETE_ABORT and h.markers == [(pid, e + 1, False, frozenset({P0}))]


def test_verify_partition():
    h = Harness()
    pid, e = h.ongoing(P0)
    v = h.verify
    assert v(TXN, pid, e, *P0) is None
    # No transactional id: no lookup by producer id (the coordinator keeps no such index of every
    # id; Produce refuses a transactional batch without one before it asks, as Kafka)
    assert v(None, pid, e, *P0) == E.invalid_producer_id_mapping
    # Kafka's handleVerifyPartitionsInTransaction: Produce translates these for its clients
    assert v(TXN, pid, e, *P1) == E.transaction_abortable
    assert v(TXN, pid, e + 1, *P0) == E.producer_fenced  # any other epoch
    assert v(TXN, pid + 1, e, *P0) == E.invalid_producer_id_mapping
    assert v("other", pid, e, *P0) == E.invalid_producer_id_mapping
    assert h.init().result[0] == E.concurrent_transactions  # new instance fences: epoch e+1
    assert v(TXN, pid, e, *P0) == E.producer_fenced
    assert v(TXN, pid, e + 1, *P0) == E.transaction_abortable  # aborted: not in a transaction


def test_verify_partition_before_any_transaction_and_after_completion():
    h = Harness()
    pid, e = h.producer()
    assert h.verify(TXN, pid, e, *P0) == E.transaction_abortable
    assert h.add(pid, e, P0).result == E.none
    assert h.end(pid, e).result[0] == E.none
    assert h.verify(TXN, pid, e, *P0) == E.transaction_abortable
