"""Group coordinator: two-member rebalance (state-machine tests, no sockets; see harness.py)."""

from __future__ import annotations

import pytest

from .harness import *  # noqa: F403 (the shared harness and record helpers)


def test_two_member_rebalance():
    h = Harness()
    meta_a, meta_b = subscription("t1"), subscription("t1", "t2")
    a = member_id_for(h, "g")
    b = member_id_for(h, "g")
    ra = h.join("g", a, protocols=[("range", meta_a)], require_known=True)
    assert not ra.called and h.group().state is S.PREPARING_REBALANCE
    rb = h.join("g", b, protocols=[("range", meta_b)], require_known=True)

    # both joins answered together, same generation
    la, lb = ra.result, rb.result
    assert la.error == lb.error == E.none
    assert la.generation == lb.generation == 1
    assert la.leader == lb.leader == a
    assert la.protocol_name == lb.protocol_name == "range"
    assert la.protocol_type == lb.protocol_type == "consumer"
    assert dict((m, meta) for m, _, meta in la.members) == {a: meta_a, b: meta_b}
    assert lb.members == ()
    assert h.group().state is S.COMPLETING_REBALANCE

    # the follower's SyncGroup waits for the leader's
    sb = h.sync("g", 1, b)
    assert not sb.called
    before = len(h.persisted)
    sa = h.sync("g", 1, a, {a: b"A", b: b"B"})
    assert sa.result == SyncResult(E.none, "consumer", "range", b"A")
    assert sb.result == SyncResult(E.none, "consumer", "range", b"B")
    assert h.group().state is S.STABLE

    # the group metadata was persisted, with the assignments
    assert len(h.persisted) == before + 1
    ((key, value),) = h.records("g")[-1:]
    assert key == GroupKey("g")
    assert value.generation == 1 and value.protocol == "range" and value.leader == a
    assert value.protocol_type == "consumer"
    by_id = {m.member_id: m for m in value.members}
    assert by_id[a].assignment == b"A" and by_id[b].assignment == b"B"
    assert by_id[a].subscription == meta_a and by_id[b].subscription == meta_b
    assert by_id[a].session_timeout_ms == SESSION and by_id[a].rebalance_timeout_ms == REBALANCE

    # a SyncGroup in Stable returns the stored assignment
    assert h.sync("g", 1, b).result.assignment == b"B"


def test_leader_sync_fills_missing_assignments_with_empty():
    h = Harness()
    (a, b), gen = stable_group(h, 2)
    h.join("g", a)  # leader rejoin in Stable forces a rebalance
    rb = h.join("g", b)
    gen2 = rb.result.generation
    sb = h.sync("g", gen2, b)
    h.sync("g", gen2, a, {a: b"only-a"})
    assert sb.result.error == E.none and sb.result.assignment == b""


def test_sync_error_cases():
    h = Harness()
    (a, b), gen = stable_group(h, 2)
    assert h.sync("g", gen + 1, b).result.error == E.illegal_generation
    assert h.sync("g", gen, "ghost").result.error == E.unknown_member_id
    assert h.sync("nope", gen, b).result.error == E.unknown_member_id
    assert h.sync("g", gen, b, protocol_type="connect").result.error == E.inconsistent_group_protocol
    assert h.sync("g", gen, b, protocol_name="roundrobin").result.error == E.inconsistent_group_protocol
    h.join("g", a)  # -> PreparingRebalance
    assert h.sync("g", gen, b).result.error == E.rebalance_in_progress


def test_follower_rejoin_without_changes_in_stable_gets_current_generation():
    h = Harness()
    (a, b), gen = stable_group(h, 2)
    r = h.join("g", b)
    assert r.result.error == E.none and r.result.generation == gen and r.result.members == ()
    assert h.group().state is S.STABLE


def test_leader_rejoin_in_stable_forces_rebalance():
    h = Harness()
    (a, b), gen = stable_group(h, 2)
    ra = h.join("g", a)
    assert not ra.called and h.group().state is S.PREPARING_REBALANCE


def test_changed_metadata_in_stable_forces_rebalance():
    h = Harness()
    (a, b), gen = stable_group(h, 2)
    rb = h.join("g", b, protocols=[("range", subscription("t1", "t9"))])
    assert not rb.called and h.group().state is S.PREPARING_REBALANCE
    ra = h.join("g", a)
    assert ra.result.generation == gen + 1
    assert dict((m, meta) for m, _, meta in ra.result.members)[b] == subscription("t1", "t9")


def test_rejoin_in_completing_rebalance_with_same_metadata_gets_current_generation():
    h = Harness()
    a = member_id_for(h, "g")
    b = member_id_for(h, "g")
    h.join("g", a, require_known=True)
    first_b = h.join("g", b, require_known=True)
    again = h.join("g", b)  # the first answer was lost
    assert again.result == first_b.result
    again_leader = h.join("g", a)
    assert {m for m, _, _ in again_leader.result.members} == {a, b}
    assert h.group().state is S.COMPLETING_REBALANCE


def test_sync_failure_to_persist_does_not_complete_the_rebalance():
    h = Harness()
    a = member_id_for(h, "g")
    b = member_id_for(h, "g")
    h.join("g", a, require_known=True)
    h.join("g", b, require_known=True)
    sb = h.sync("g", 1, b)
    h.persist_mode = "fail"
    sa = h.sync("g", 1, a, {a: b"A", b: b"B"})
    # Kafka answers the waiting SyncGroups with the (mapped) storage error and rebalances; here
    # they get REBALANCE_IN_PROGRESS — either way nobody gets an assignment and the group rebalances.
    for r in (sa, sb):
        assert r.result.error != E.none and r.result.assignment == b""
    assert h.group().state is S.PREPARING_REBALANCE
    assert all(m.assignment == b"" for m in h.group().members.values())


def test_sync_answers_wait_for_durability():
    h = Harness(persist_mode="defer")
    a = member_id_for(h, "g")
    b = member_id_for(h, "g")
    h.join("g", a, require_known=True)
    h.join("g", b, require_known=True)
    sb = h.sync("g", 1, b)
    sa = h.sync("g", 1, a, {a: b"A", b: b"B"})
    assert not sa.called and not sb.called and h.group().state is S.COMPLETING_REBALANCE
    h.release()
    assert sa.result.assignment == b"A" and sb.result.assignment == b"B"
    assert h.group().state is S.STABLE


def test_rebalance_during_inflight_sync_store_ignores_the_late_completion():
    h = Harness(persist_mode="defer")
    a = member_id_for(h, "g")
    b = member_id_for(h, "g")
    h.join("g", a, require_known=True)
    h.join("g", b, require_known=True)
    sa = h.sync("g", 1, a, {a: b"A", b: b"B"})
    assert h.coord.leave("g", [(b, None)]) == [E.none]
    assert sa.result.error == E.rebalance_in_progress
    state = h.group().state
    h.release()  # the store for generation 1 completes after the group moved on
    assert h.group().state is state is not S.STABLE
