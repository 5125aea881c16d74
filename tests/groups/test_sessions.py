"""Group coordinator: heartbeats, session / timeouts (state-machine tests, no sockets; see harness.py)."""

from __future__ import annotations

import pytest

from .harness import *  # noqa: F403 (the shared harness and record helpers)


def test_heartbeat_errors():
    h = Harness()
    (a, b), gen = stable_group(h, 2)
    assert h.heartbeat("g", gen, a) == E.none
    assert h.heartbeat("g", gen - 1, a) == E.illegal_generation
    assert h.heartbeat("g", gen + 1, a) == E.illegal_generation
    assert h.heartbeat("g", gen, "ghost") == E.unknown_member_id
    assert h.heartbeat("nope", gen, a) == E.unknown_member_id
    h.join("g", a)  # leader rejoin -> PreparingRebalance
    assert h.group().state is S.PREPARING_REBALANCE
    assert h.heartbeat("g", gen, b) == E.rebalance_in_progress
    h.join("g", b)
    assert h.group().state is S.COMPLETING_REBALANCE
    assert h.heartbeat("g", gen, b) == E.illegal_generation
    assert h.heartbeat("g", gen + 1, b) == E.none  # alive while waiting for the leader's sync


def test_heartbeat_extends_the_session():
    h = Harness()
    (a,), gen = stable_group(h, 1)
    for _ in range(5):
        h.tick(SESSION - 1)
        assert h.heartbeat("g", gen, a) == E.none
    h.tick(1)
    assert h.group().state is S.STABLE and a in h.group().members


def test_session_timeout_removes_silent_member_and_rebalances():
    h = Harness()
    (a, b), gen = stable_group(h, 2)
    h.tick(SESSION // 2)
    assert h.heartbeat("g", gen, a) == E.none
    h.tick(SESSION // 2)  # b's deadline
    assert b not in h.group().members and a in h.group().members
    assert h.group().state is S.PREPARING_REBALANCE
    assert h.heartbeat("g", gen, a) == E.rebalance_in_progress
    assert h.heartbeat("g", gen, b) == E.unknown_member_id
    ra = h.join("g", a)
    assert ra.result.error == E.none and ra.result.generation == gen + 1
    assert [m for m, _, _ in ra.result.members] == [a]


def test_session_timeout_of_leader_moves_leadership():
    h = Harness()
    (a, b), gen = stable_group(h, 2)
    h.tick(SESSION // 2)
    h.heartbeat("g", gen, b)
    h.tick(SESSION // 2)
    assert h.group().leader_id == b
    rb = h.join("g", b)
    assert rb.result.leader == b and [m for m, _, _ in rb.result.members] == [b]


def test_every_member_timing_out_empties_the_group():
    h = Harness()
    stable_group(h, 2)
    gen_before = h.group().generation
    h.tick(SESSION)
    g = h.group()
    assert g.state is S.EMPTY and not g.members and g.leader_id is None and g.protocol_name is None
    assert g.generation == gen_before + 1
    key, value = h.records("g")[-1]
    assert key == GroupKey("g") and value.members == () and value.generation == gen_before + 1


def test_rebalance_timeout_removes_members_that_do_not_rejoin():
    h = Harness()
    (a, b), gen = stable_group(h, 2)
    ra = h.join("g", a)
    deadline = h.now + REBALANCE
    # b stays alive by heartbeats but never rejoins
    while h.now + SESSION // 2 < deadline:
        h.tick(SESSION // 2)
        assert h.heartbeat("g", gen, b) == E.rebalance_in_progress
    assert not ra.called
    h.now = deadline - 1
    h.tick()
    assert not ra.called and h.group().state is S.PREPARING_REBALANCE
    h.tick(1)
    assert ra.result.error == E.none and ra.result.generation == gen + 1
    assert [m for m, _, _ in ra.result.members] == [a]
    assert set(h.group().members) == {a}
    assert h.heartbeat("g", gen + 1, b) == E.unknown_member_id


def test_rebalance_timeout_is_the_largest_of_the_members():
    h = Harness()
    (a, b), gen = stable_group(h, 2, rebalance=REBALANCE)
    h.join("g", a, rebalance=3 * REBALANCE)  # -> PreparingRebalance; a now asks for a longer timeout
    assert h.group().rebalance_deadline_ms == h.now + 3 * REBALANCE


def test_member_awaiting_join_is_not_expired_by_session_timeout():
    h = Harness()
    (a, b), gen = stable_group(h, 2)
    ra = h.join("g", a)
    h.tick(SESSION // 2)
    h.heartbeat("g", gen, b)
    h.tick(SESSION // 2 + 1)  # a's session deadline passed while its JoinGroup is parked
    assert a in h.group().members and not ra.called
