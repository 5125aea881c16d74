"""Transaction timeouts: tick() aborts an Ongoing transaction older than its own timeout,
fencing its producer with an epoch bump."""

from __future__ import annotations

import pytest

from .harness import E, P0, P1, P2, T, TIMEOUT, TXN, Harness


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
    assert h.verify(TXN, pid, e, *P0) == E.producer_fenced  # Produce answers it INVALID_PRODUCER_EPOCH
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
