"""Group coordinator: LeaveGroup (state-machine tests, no sockets; see harness.py)."""

from __future__ import annotations

import pytest

from .harness import *  # noqa: F403 (the shared harness and record helpers)


def test_leader_leaving_moves_leadership():
    h = Harness()
    (a, b, c), gen = stable_group(h, 3)
    assert h.coord.leave("g", [(a, None)]) == [E.none]
    g = h.group()
    assert g.state is S.PREPARING_REBALANCE and g.leader_id in (b, c)
    rb, rc = h.join("g", b), h.join("g", c)
    leader = rb.result.leader
    assert leader == rc.result.leader == g.leader_id
    leader_res, follower_res = (rb, rc) if leader == b else (rc, rb)
    assert {m for m, _, _ in leader_res.result.members} == {b, c}
    assert follower_res.result.members == ()
    assert rb.result.generation == gen + 1


def test_last_member_leaving_empties_the_group_after_the_rebalance():
    h = Harness()
    (a,), gen = stable_group(h, 1)
    assert h.coord.leave("g", [(a, None)]) == [E.none]
    g = h.group()
    assert g.state is S.EMPTY and not g.members and g.generation == gen + 1
    assert h.records("g")[-1] == (GroupKey("g"), GroupValue("consumer", gen + 1, None, None, h.now, ()))
    assert h.heartbeat("g", gen, a) == E.unknown_member_id
    # the group is reusable
    r = h.join("g")
    assert r.result.error == E.none and r.result.generation == gen + 2


def test_leave_while_others_parked_completes_the_join():
    h = Harness()
    (a, b), gen = stable_group(h, 2)
    ra = h.join("g", a)
    assert not ra.called
    h.coord.leave("g", [(b, None)])
    assert ra.result.error == E.none and [m for m, _, _ in ra.result.members] == [a]


def test_leave_of_parked_member_answers_its_join():
    h = Harness()
    (a, b), gen = stable_group(h, 2)
    ra = h.join("g", a)
    h.coord.leave("g", [(a, None)])
    assert ra.result.error == E.unknown_member_id
