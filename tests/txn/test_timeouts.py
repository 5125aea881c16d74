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


@pytest.mark.parametrize("commit,tv2", [(True, False), (False, False)])
def test_late_producer_after_timeout_is_fenced(commit, tv2):
    h = Harness()
    pid, e = h.ongoing(tv2=tv2)
    assert h.tick(TIMEOUT + 1) == [TXN]
    assert h.end(pid, e, commit=commit, tv2=tv2).result == (E.producer_fenced, -1, -1)
    assert h.add(pid, e, P2, tv2=tv2).result == E.producer_fenced
    assert h.verify(TXN, pid, e, *P0) == E.producer_fenced  # Produce answers it INVALID_PRODUCER_EPOCH
    assert h.txn().state is T.COMPLETE_ABORT and h.txn().producer_epoch == e + 1


def test_tv2_producer_after_timeout_is_answered_as_the_aborts_retry():
    """Kafka 4.4 (checked on the wire; tests/kafka/test_java_clients.py sees it with the Java
    client): a TV2 transaction's timeout abort bumps the epoch as the client's EndTxn would have,
    and the client's epoch is the last one. Its EndTxn(abort) is a retry of that abort, answered
    with the new epoch; EndTxn(commit) INVALID_TXN_STATE; InitProducerId(id, epoch) the KIP-360
    retry, the new epoch again. Adding partitions or producing at the old epoch stays fenced."""
    h = Harness()
    pid, e = h.ongoing(tv2=True)
    assert h.tick(TIMEOUT + 1) == [TXN]
    n = len(h.persisted)
    assert h.end(pid, e, commit=False, tv2=True).result == (E.none, pid, e + 1)
    assert h.end(pid, e, commit=True, tv2=True).result == (E.invalid_txn_state, -1, -1)
    assert h.add(pid, e, P2, tv2=True).result == E.producer_fenced
    assert h.verify(TXN, pid, e, *P0) == E.producer_fenced
    assert h.init(pid=pid, epoch=e).result == (E.none, pid, e + 1)
    assert len(h.persisted) == n  # retries answered: nothing written
    assert h.txn().state is T.COMPLETE_ABORT and h.txn().producer_epoch == e + 1
    # the producer goes on at the new epoch
    assert h.add(pid, e + 1, P2, tv2=True).result == E.none


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
