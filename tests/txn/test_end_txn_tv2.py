"""EndTxn, transaction version 2 (KIP-890 part 2): the epoch bumped by every EndTxn, retries
of the bumping EndTxn, empty aborts, and producer-id rotation at epoch exhaustion."""

from __future__ import annotations

import pytest

from oncelog.txn.state import MAX_EPOCH

from .harness import E, P0, P1, P2, T, TXN, Harness, meta


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
    assert h.coord.txns == {TXN: m}
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
