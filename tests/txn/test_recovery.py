"""Replay of ``__transaction_state`` and recovery: a durable Prepare* is rolled forward, an
Ongoing transaction waits for its timeout, later records replace earlier, tombstones remove."""

from __future__ import annotations

from oncelog.txn.records import decode_value

from .harness import E, P0, P1, P2, T, TIMEOUT, TXN, Harness, meta


def test_load_then_recover_a_prepare_commit_writes_commit_markers_and_completes():
    h = Harness()
    h.coord.load(TXN, meta(pid=7, epoch=3, state=T.PREPARE_COMMIT, partitions=(P0, P2)))
    assert h.txn().producer_id == 7 and h.coord.open == {TXN: h.txn()}
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
    assert h.verify(TXN, 7, 3, *P0) is None
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
    assert h.txn().producer_id == 8
    h.coord.load(TXN, None)
    assert h.coord.txns == {} and h.coord.open == {}
    h.coord.load("never-seen", None)  # a tombstone for an unknown id is harmless
