"""EndTxn, transaction version 1: Prepare* durable, then markers, then Complete*; retries,
failures and requests queued behind the markers."""

from __future__ import annotations

import pytest

from .harness import E, P0, P1, P2, T, TIMEOUT, Harness


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
    assert h.end(pid, e).result == (E.not_coordinator, -1, -1)
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
    assert h.txn().state is T.PREPARE_COMMIT and not h.txn().pending and not h.txn().waiting
    h.tick(1)
    assert h.txn().state is T.COMPLETE_COMMIT


def test_end_txn_unknown_and_fenced():
    h = Harness()
    pid, e = h.ongoing()
    assert h.end(pid, e, txn_id="nope").result == (E.invalid_producer_id_mapping, -1, -1)
    assert h.end(pid + 1, e).result == (E.invalid_producer_id_mapping, -1, -1)
    assert h.end(pid, e + 1).result == (E.producer_fenced, -1, -1)
    assert h.end(pid, e + 1, version=1).result == (E.invalid_producer_epoch, -1, -1)
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


def test_a_marker_write_that_raises_leaves_prepare_not_pending_and_tick_retries():
    """A full disk: the marker writer raises instead of reporting. The transaction must not be
    left pending (every later request for it would queue forever): it stays PrepareCommit, the
    requests behind it are answered, tick writes the markers again once the disk takes them."""
    h = Harness()
    pid, e = h.ongoing(P0, P1)
    h.marker_mode = "raise"
    assert h.end(pid, e).result == (E.none, pid, e)
    assert h.txn().state is T.PREPARE_COMMIT and not h.txn().pending
    assert h.end(pid, e).result == (E.concurrent_transactions, -1, -1)
    assert h.tick(1) == [] and h.txn().state is T.PREPARE_COMMIT and not h.txn().pending
    h.marker_mode = "ok"
    assert h.tick(1) == []
    assert h.txn().state is T.COMPLETE_COMMIT and len(h.markers) == 3


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
    assert not h.txn().waiting


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
    assert h.txn().state is T.COMPLETE_COMMIT and not h.txn().waiting


def test_abort_uses_abort_markers_and_the_next_transaction_starts_clean():
    h = Harness()
    pid, e = h.ongoing(P0)
    assert h.end(pid, e, commit=False).result == (E.none, pid, e)
    assert h.markers == [(pid, e, False, frozenset({P0}))]
    assert h.add(pid, e, P1).result == E.none
    assert h.end(pid, e).result == (E.none, pid, e)
    assert h.markers[-1] == (pid, e, True, frozenset({P1}))
