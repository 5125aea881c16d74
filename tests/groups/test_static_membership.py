"""Group coordinator: static membership (state-machine tests, no sockets; see harness.py)."""

from __future__ import annotations

import pytest

from .harness import *  # noqa: F403 (the shared harness and record helpers)


def test_static_member_joins_without_member_id_required():
    h = Harness()
    r = h.join("g", instance="i1", require_known=True)
    assert r.result.error == E.none and r.result.member_id
    assert h.group().static_members == {"i1": r.result.member_id}
    assert r.result.members == ((r.result.member_id, "i1", subscription("t1")),)


def test_second_static_join_fences_old_member_id():
    h = Harness()
    (s1, s2), gen = stable_group(h, 2, instances=["i1", "i2"])
    replacement = h.join("g", instance="i2")
    new_id = h.group().static_members["i2"]
    assert new_id != s2 and s2 not in h.group().members and new_id in h.group().members
    assert not replacement.calls or replacement.result.member_id == new_id

    assert h.heartbeat("g", gen, s2, "i2") == E.fenced_instance_id
    assert h.sync("g", gen, s2, instance="i2").result.error == E.fenced_instance_id
    assert h.coord.validate_offset_commit("g", gen, s2, "i2") == E.fenced_instance_id
    assert h.coord.leave("g", [(s2, "i2")]) == [E.fenced_instance_id]
    assert new_id in h.group().members  # the fenced leave did not remove the new incarnation
    # without the instance id the old member is simply unknown
    assert h.heartbeat("g", gen, s2) == E.unknown_member_id


def test_static_replacement_fences_parked_join_and_inherits_leadership():
    h = Harness()
    (s1, s2), gen = stable_group(h, 2, instances=["i1", "i2"])
    parked = h.join("g", s1, instance="i1")  # leader rejoin: rebalance, join parked
    assert not parked.called and h.group().state is S.PREPARING_REBALANCE
    new1 = h.join("g", instance="i1")  # a new process with the same instance id
    assert parked.result.error == E.fenced_instance_id and parked.result.member_id == s1
    new_id = h.group().static_members["i1"]
    assert h.group().leader_id == new_id
    r2 = h.join("g", s2, instance="i2")
    assert new1.result.error == r2.result.error == E.none
    assert new1.result.leader == new_id and new1.result.member_id == new_id
    assert {(m, i) for m, i, _ in new1.result.members} == {(new_id, "i1"), (s2, "i2")}


def test_static_replacement_fences_parked_sync():
    h = Harness()
    (s1, s2), gen = stable_group(h, 2, instances=["i1", "i2"])
    h.join("g", s1, instance="i1")
    h.join("g", s2, instance="i2")
    parked = h.sync("g", gen + 1, s2, instance="i2")
    assert not parked.called
    h.join("g", instance="i2")
    assert parked.result.error == E.fenced_instance_id


def test_static_member_with_wrong_member_id_is_fenced_on_join():
    h = Harness()
    (s1,), gen = stable_group(h, 1, instances=["i1"])
    r = h.join("g", "some-other-id", instance="i1")
    assert r.result.error in (E.fenced_instance_id, E.unknown_member_id)


def test_replaced_static_member_rejoining_with_old_id_is_fenced():
    h = Harness()
    (s1, s2), gen = stable_group(h, 2, instances=["i1", "i2"])
    h.join("g", instance="i2")
    r = h.join("g", s2, instance="i2")
    assert r.result.error == E.fenced_instance_id


def test_static_member_restart_in_stable_does_not_rebalance():
    h = Harness()
    (s1, s2), gen = stable_group(h, 2, instances=["i1", "i2"])
    r = h.join("g", instance="i2")
    assert h.group().state is S.STABLE and h.group().generation == gen
    new_id = h.group().static_members["i2"]
    assert r.result.error == E.none and r.result.member_id == new_id and r.result.generation == gen
    s = h.sync("g", gen, new_id, instance="i2")
    assert s.result.error == E.none and s.result.assignment == b"assign-1"
    assert h.heartbeat("g", gen, s1, "i1") == E.none


def test_rebalance_timeout_keeps_static_members():
    h = Harness()
    (s1, s2), gen = stable_group(h, 2, instances=["i1", "i2"])
    r1 = h.join("g", s1, instance="i1")
    deadline = h.now + REBALANCE
    while h.now + SESSION // 2 < deadline:
        h.tick(SESSION // 2)
        h.heartbeat("g", gen, s2, "i2")
    h.now = deadline
    h.tick()
    assert r1.result.error == E.none
    assert s2 in h.group().members
    assert {m for m, _, _ in r1.result.members} == {s1, s2}


def test_leave_by_instance_id():
    h = Harness()
    (s1, s2), gen = stable_group(h, 2, instances=["i1", "i2"])
    assert h.coord.leave("g", [("", "i2")]) == [E.none]
    assert s2 not in h.group().members and "i2" not in h.group().static_members
    assert h.group().state is S.PREPARING_REBALANCE
    assert h.coord.leave("g", [("", "i-unknown")]) == [E.unknown_member_id]
    assert h.coord.leave("g", [(s1, "i1")]) == [E.none]
    assert h.group().state is S.EMPTY


def test_leave_errors():
    h = Harness()
    (a, b), gen = stable_group(h, 2)
    assert h.coord.leave("nope", [(a, None)]) == [E.unknown_member_id]
    assert h.coord.leave("g", [("ghost", None), (b, None)]) == [E.unknown_member_id, E.none]
