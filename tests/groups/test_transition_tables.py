"""The groups' state tables are read, and say what the coordinators do (h11's rule: a move the
table does not have raises, naming the state and the event).

* the classic table (:data:`oncelog.groups.state.EVENT_TRIGGERED_TRANSITIONS`): every
  (state, event) in it is taken by the coordinator in some scenario below, so the table is not
  wider than the protocol;
* a consumer group member's (:data:`oncelog.groups.consumer_state.MEMBER_TRANSITIONS`): read by
  ``ConsumerMember.transition``, the one way its state changes;
* a consumer group's derived state (:data:`oncelog.groups.consumer_state.GROUP_TRANSITIONS`):
  Dead only from Empty;
* the states' Kafka names (:class:`oncelog.state_machine.KafkaState`, shared with transactions).
"""

from __future__ import annotations

import re

import pytest

from oncelog import errors
from oncelog.groups.consumer_state import (
    GROUP_TRANSITIONS,
    MEMBER_TRANSITIONS,
    ConsumerGroup,
    ConsumerGroupState,
    ConsumerMember,
    MemberEvent,
    MemberState,
)
from oncelog.groups.state import EVENT_TRIGGERED_TRANSITIONS, Group, GroupEvent, GroupState, Member
from oncelog.state_machine import IllegalStateTransition
from oncelog.txn.state import TransactionState

from . import harness as ch
from . import test_consumer_coordinator as kip848

S, E = GroupState, GroupEvent


@pytest.fixture
def taken(monkeypatch):
    """Every (state, event) a classic group is moved by, in order."""
    seen: list[tuple[GroupState, GroupEvent]] = []
    original = Group.transition

    def spy(self, event, now_ms):
        old = self.state
        new = original(self, event, now_ms)
        seen.append((old, event))
        return new

    monkeypatch.setattr(Group, "transition", spy)
    return seen


def rejoin_both_with_new_metadata(h, a, b):
    """Stable -> PreparingRebalance (a's JoinGroup with new protocols) -> CompletingRebalance."""
    h.join("g", a, protocols=[("range", ch.subscription("t1", "t2"))])
    rb = h.join("g", b)
    assert h.group().state is S.COMPLETING_REBALANCE
    return rb.result.generation


def test_every_classic_event_is_taken_by_the_coordinator(taken):
    # Empty -JOIN-> PreparingRebalance -ALL_JOINED-> CompletingRebalance -LEADER_SYNC-> Stable
    h = ch.Harness()
    (a, b), gen = ch.stable_group(h, 2)
    # Stable -LEAVE-> PreparingRebalance; the other rejoins: ALL_JOINED
    assert h.coord.leave("g", [(b, None)]) == [ch.E.none]
    assert h.join("g", a).called
    # CompletingRebalance -LEAVE-> PreparingRebalance -ALL_LEFT-> Empty -DELETE-> Dead
    assert h.coord.leave("g", [(a, None)]) == [ch.E.none]
    assert h.group().state is S.EMPTY
    h.coord.delete_groups(["g"], ch.Once())

    # PreparingRebalance -REBALANCE_TIMEOUT-> CompletingRebalance (b never rejoined), then
    # CompletingRebalance -REBALANCE_TIMEOUT-> PreparingRebalance (a never sent SyncGroup)
    h = ch.Harness()
    (a, b), gen = ch.stable_group(h, 2, rebalance=2_000)
    h.join("g", a, protocols=[("range", ch.subscription("t1", "t2"))], rebalance=2_000)
    h.tick(2_001)
    assert h.group().state is S.COMPLETING_REBALANCE and set(h.group().members) == {a}
    h.tick(2_001)
    assert h.group().state is S.EMPTY

    # CompletingRebalance -JOIN-> PreparingRebalance (new protocols again)
    h = ch.Harness()
    (a, b), gen = ch.stable_group(h, 2)
    rejoin_both_with_new_metadata(h, a, b)
    h.join("g", a, protocols=[("range", ch.subscription("t3"))])
    assert h.group().state is S.PREPARING_REBALANCE

    # CompletingRebalance -SESSION_EXPIRY-> PreparingRebalance (no SyncGroup, no heartbeat)
    h = ch.Harness()
    (a, b), gen = ch.stable_group(h, 2)
    rejoin_both_with_new_metadata(h, a, b)
    h.tick(ch.SESSION + 1)

    # CompletingRebalance -SYNC_NOT_STORED-> PreparingRebalance (the leader's record not written)
    h = ch.Harness()
    (a, b), gen = ch.stable_group(h, 2)
    gen = rejoin_both_with_new_metadata(h, a, b)
    h.persist_mode = "fail"
    h.sync("g", gen, h.group().leader_id, {a: b"x", b: b"y"})
    assert h.group().state is S.PREPARING_REBALANCE

    # Stable -SESSION_EXPIRY-> PreparingRebalance
    h = ch.Harness()
    ch.stable_group(h, 2)
    h.tick(ch.SESSION + 1)

    # Stable -CONVERTED-> PreparingRebalance: the migration's downgrade (consumer -> classic)
    k = kip848.Harness()
    m = k.hb("a", 0)
    joined = kip848.classic_join(k.coord, "g")
    kip848.classic_join(k.coord, "g", joined.member_id)
    k.hb("a", -1)
    assert k.coord.groups["g"].state is S.PREPARING_REBALANCE and m.error is None

    table = {(state, event) for state, events in EVENT_TRIGGERED_TRANSITIONS.items() for event in events}
    assert set(taken) == table


@pytest.mark.parametrize("state", list(GroupState), ids=lambda s: s.value)
def test_restore_is_not_a_transition(state):
    """Replay and the downgrade restore a group as stored: Stable with members, else Empty,
    whatever its state (Group.restore_from)."""
    g = Group("g", state=state)
    g.restore_from([], generation=3, protocol_type=None, protocol_name=None, leader_id=None, state_timestamp_ms=7)
    assert (g.state, g.generation, g.state_timestamp_ms) == (S.EMPTY, 3, 7)
    g.restore_from([group_member("m1")], generation=4, protocol_type="consumer", protocol_name="range", leader_id="m1",
                   state_timestamp_ms=8)
    assert g.state is S.STABLE and set(g.members) == {"m1"}


def group_member(member_id):
    return Member(member_id, None, "c", "/h", ch.SESSION, ch.REBALANCE, "consumer", [("range", b"")])


# ---------------------------------------------------------------- consumer group members


@pytest.mark.parametrize("state,event", [(s, e) for s in MemberState for e in MemberEvent],
                         ids=lambda x: x.name)
def test_member_transition_reads_the_table(state, event):
    member = ConsumerMember("m", state=state)
    new = MEMBER_TRANSITIONS[state].get(event)
    if new is not None:
        assert member.transition(event) is new and member.state is new
    else:
        with pytest.raises(IllegalStateTransition, match=re.escape(
                f"member 'm': can't handle event {event.value!r} in state {state.kafka_name}")):
            member.transition(event)
        assert member.state is state


def test_a_rejoin_starts_over_from_any_state():
    for state in MemberState:
        member = ConsumerMember("m", state=state, member_epoch=7, previous_member_epoch=6,
                               assigned={kip848.T: frozenset({1})}, rebalance_deadline_ms=5)
        member.rejoin()
        assert (member.state, member.member_epoch, member.previous_member_epoch, member.assigned,
                member.rebalance_deadline_ms) == (MemberState.STABLE, 0, 0, {}, None)


@pytest.fixture
def member_events(monkeypatch):
    seen: list[tuple[MemberState, MemberEvent]] = []
    original = ConsumerMember.transition

    def spy(self, event):
        old = self.state
        new = original(self, event)
        seen.append((old, event))
        return new

    monkeypatch.setattr(ConsumerMember, "transition", spy)
    return seen


def test_the_coordinator_moves_members_by_event(member_events):
    """A handover (revoke, unreleased, reconciled) and a fenced member's rejoin, by event."""
    h = kip848.Harness()
    a = h.hb("a", 0)
    b = h.hb("b", 0)  # b's half is still a's: UNRELEASED
    r = h.hb("a", a.member_epoch, a.assignment)  # a must revoke: REVOKE
    r = h.hb("a", r.member_epoch, r.assignment)  # a revoked: RECONCILED
    h.hb("b", b.member_epoch, {})  # b gets its half: RECONCILED
    h.hb("a", 0)  # a rejoins with epoch 0 (its answer was lost): REJOIN
    events = {event for _, event in member_events}
    assert events == set(MemberEvent)
    assert (MemberState.UNREVOKED_PARTITIONS, MemberEvent.RECONCILED) in member_events


# ---------------------------------------------------------------- consumer groups (derived state)


def test_consumer_group_table_dead_only_from_empty():
    C = ConsumerGroupState
    assert {s for s, nxt in GROUP_TRANSITIONS.items() if C.DEAD in nxt} == {C.EMPTY}
    assert GROUP_TRANSITIONS[C.DEAD] == frozenset()
    live = set(C) - {C.DEAD}
    assert all(GROUP_TRANSITIONS[s] - {C.DEAD} == live - {s} for s in live)
    group = ConsumerGroup("g", members={"m": ConsumerMember("m")})
    group.update_state(1)
    assert group.state is C.STABLE
    with pytest.raises(IllegalStateTransition, match="consumer group 'g': Stable -> Dead is not allowed"):
        group.mark_dead(2)


def test_the_coordinator_deletes_only_empty_consumer_groups():
    h = kip848.Harness()
    h.hb("a", 0)
    done = []
    h.coord.delete_groups(["g"], done.append)
    assert isinstance(done[0]["g"], errors.NonEmptyGroup)
    h.hb("a", -1)
    h.coord.delete_groups(["g"], done.append)
    assert done[1] == {"g": None} and "g" not in h.coord.groups


# ---------------------------------------------------------------- Kafka's names


def test_state_names_are_kafkas():
    assert [s.kafka_name for s in GroupState] == ["Empty", "PreparingRebalance", "CompletingRebalance", "Stable",
                                                  "Dead"]
    assert all(s.kafka_name == s.value for s in GroupState)  # DescribeGroups answers the value
    assert [s.kafka_name for s in ConsumerGroupState] == ["Empty", "Assigning", "Reconciling", "Stable", "Dead"]
    assert all(s.kafka_name == s.value for s in ConsumerGroupState)
    assert [s.kafka_name for s in TransactionState] == [
        "Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead",
        "PrepareEpochFence"]
    assert [s.kafka_name for s in MemberState] == ["stable", "unrevoked_partitions", "unreleased_partitions",
                                                   "unknown"]
