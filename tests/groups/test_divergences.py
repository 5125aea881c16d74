"""Group coordinator: former divergences (state-machine tests, no sockets; see harness.py)."""

from __future__ import annotations

import pytest

from .harness import *  # noqa: F403 (the shared harness and record helpers)


def test_member_awaiting_sync_is_not_expired_by_session_timeout():
    h = Harness()
    a = member_id_for(h, "g")
    b = member_id_for(h, "g")
    h.join("g", a, require_known=True)
    h.join("g", b, require_known=True)
    sb = h.sync("g", 1, b)  # b waits; the leader takes its time computing the assignment
    for _ in range(3):
        h.tick(SESSION // 2)
        assert b in h.group().members, "b was expired while parked in SyncGroup"
        assert h.heartbeat("g", 1, a) == E.none
    sa = h.sync("g", 1, a, {a: b"A", b: b"B"})
    assert sa.result.error == E.none and sb.result.assignment == b"B"


def test_leader_that_never_syncs_is_removed_after_rebalance_timeout():
    h = Harness()
    a = member_id_for(h, "g")
    b = member_id_for(h, "g")
    h.join("g", a, require_known=True)
    h.join("g", b, require_known=True)
    sb = h.sync("g", 1, b)
    for _ in range(2 * REBALANCE // (SESSION // 2)):
        h.tick(SESSION // 2)
        h.heartbeat("g", 1, a)
        h.heartbeat("g", 1, b)
    assert a not in h.group().members
    assert sb.result.error == E.rebalance_in_progress
    assert h.group().state is not S.COMPLETING_REBALANCE


def test_duplicate_parked_join_answers_both_requests():
    h = Harness()
    (a, b), gen = stable_group(h, 2)
    first = h.join("g", a)
    second = h.join("g", a)
    h.join("g", b)
    assert second.result.error == E.none
    assert first.called
