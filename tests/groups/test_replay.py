"""Group coordinator: replay (state-machine tests, no sockets; see harness.py)."""

from __future__ import annotations

import pytest

from .harness import *  # noqa: F403 (the shared harness and record helpers)


def test_replay_restores_a_stable_group():
    h = Harness()
    h.coord.load_offset(OffsetKey("g", "t1", 0), ov(11, 5))
    h.coord.load_offset(OffsetKey("g", "t1", 1), ov(12, 5))
    h.coord.load_offset(OffsetKey("g", "t1", 1), None)  # tombstone
    h.coord.load_group("g", loaded_value(ts=123))
    g = h.group()
    assert g.state is S.STABLE and g.generation == 5 and g.leader_id == "m1"
    assert g.protocol_type == "consumer" and g.protocol_name == "range"
    assert g.static_members == {"i2": "m2"} and g.state_timestamp_ms == 123
    assert h.coord.fetch_offsets("g", None) == {("t1", 0): ov(11, 5)}
    assert h.sync("g", 5, "m1").result == SyncResult(E.none, "consumer", "range", b"A1")
    assert h.heartbeat("g", 5, "m2", "i2") == E.none
    assert h.coord.validate_offset_commit("g", 5, "m2", "i2") == E.none


def test_replayed_members_must_heartbeat_within_their_session():
    h = Harness()
    h.coord.load_group("g", loaded_value(ts=0))
    h.tick(SESSION - 1)
    assert h.heartbeat("g", 5, "m1") == E.none
    h.tick(1)  # m2's session is 2 * SESSION: still in, m1 just heartbeat
    assert h.group().state is S.STABLE
    h.tick(2 * SESSION - 1)  # now past m2's deadline (load + 2 * SESSION) and m1's
    assert h.group().state is S.EMPTY and not h.group().members
    assert h.group().generation == 6


def test_replayed_member_that_keeps_heartbeating_survives_the_other():
    h = Harness()
    h.coord.load_group("g", loaded_value(ts=0))
    for _ in range(5):
        h.tick(SESSION // 2)
        assert h.heartbeat("g", 5, "m1") in (E.none, E.rebalance_in_progress)
    g = h.group()
    assert set(g.members) == {"m1"} and g.state is S.PREPARING_REBALANCE
    r = h.join("g", "m1")
    assert r.result.error == E.none and r.result.generation == 6


def test_replay_of_empty_group_and_group_tombstone():
    h = Harness()
    h.coord.load_group("g", GroupValue("consumer", 3, None, None, 77, ()))
    assert h.group().state is S.EMPTY and h.group().generation == 3
    assert h.join("g").result.generation == 4
    h.coord.load_group("g", None)
    assert "g" not in h.coord.groups


def test_persisted_group_record_round_trips_through_replay():
    h = Harness()
    (a, b), gen = stable_group(h, 2, instances=[None, "i2"])
    commit(h, "g", {("t1", 0): ov(42, h.now)})
    fresh = Harness()
    fresh.now = h.now + 1000
    for key, value in h.records():
        if isinstance(key, GroupKey):
            fresh.coord.load_group(key.group, value)
        else:
            fresh.coord.load_offset(key, value)
    g = fresh.group()
    assert g.state is S.STABLE and g.generation == gen and g.leader_id == a
    assert set(g.members) == {a, b} and g.static_members == {"i2": b}
    assert fresh.sync("g", gen, b, instance="i2").result.assignment == b"assign-1"
    assert fresh.coord.fetch_offsets("g", None) == {("t1", 0): ov(42, h.now)}
