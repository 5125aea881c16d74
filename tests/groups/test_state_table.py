"""Group coordinator: state table (state-machine tests, no sockets; see harness.py)."""

from __future__ import annotations

import re

import pytest

from oncelog.groups.state import EVENT_TRIGGERED_TRANSITIONS, GroupEvent

from .harness import *  # noqa: F403 (the shared harness and record helpers)


def test_transition_table_is_kafkas_but_unload():
    # Kafka's GroupState.validPreviousStates, inverted. Kafka also allows Dead -> Dead, and every
    # state -> Dead when a coordinator unloads its partition; oncelog (one broker) never unloads
    # and deletes a Dead group at once, so its table has neither.
    kafka = {
        S.EMPTY: {S.PREPARING_REBALANCE, S.DEAD},
        S.PREPARING_REBALANCE: {S.COMPLETING_REBALANCE, S.EMPTY, S.DEAD},
        S.COMPLETING_REBALANCE: {S.STABLE, S.PREPARING_REBALANCE, S.DEAD},
        S.STABLE: {S.PREPARING_REBALANCE, S.DEAD},
        S.DEAD: set(),
    }
    unload = {(s, S.DEAD) for s in (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.STABLE)}
    kafka_moves = {(old, new) for old, news in kafka.items() for new in news}
    moves = {(old, new) for old, news in TRANSITIONS.items() for new in news}
    assert moves == kafka_moves - unload
    assert set(TRANSITIONS) == set(EVENT_TRIGGERED_TRANSITIONS) == set(GroupState)


@pytest.mark.parametrize("old,event", list(itertools.product(GroupState, GroupEvent)),
                         ids=lambda x: x.value)
def test_group_transition_follows_table(old, event):
    g = Group("g", state=old, state_timestamp_ms=5)
    new = EVENT_TRIGGERED_TRANSITIONS[old].get(event)
    if new is not None:
        assert g.transition(event, 42) is new
        assert g.state is new and g.state_timestamp_ms == 42
    else:
        # h11's error: the event and the state it can't be handled in.
        with pytest.raises(IllegalStateTransition, match=re.escape(
                f"group 'g': can't handle event {event.value!r} in state {old.kafka_name}")):
            g.transition(event, 42)
        assert g.state is old and g.state_timestamp_ms == 5


@pytest.fixture
def transitions(monkeypatch):
    """Every (group, old, new, event) the coordinator asks for, in order."""
    seen: list[tuple[str, GroupState, GroupState, GroupEvent]] = []
    original = Group.transition

    def spy(self, event, now_ms):
        old = self.state
        new = original(self, event, now_ms)
        seen.append((self.group_id, old, new, event))
        return new

    monkeypatch.setattr(Group, "transition", spy)
    return seen


def test_coordinator_walks_every_legal_transition(transitions):
    h = Harness()
    # Empty -> PreparingRebalance -> CompletingRebalance -> Stable
    (a, b), gen = stable_group(h, 2)
    # Stable -> PreparingRebalance (a new member), PreparingRebalance -> CompletingRebalance
    c = member_id_for(h, "g")
    rc = h.join("g", c, require_known=True)
    assert h.group().state is S.PREPARING_REBALANCE and not rc.called
    ra, rb = h.join("g", a), h.join("g", b)
    assert h.group().state is S.COMPLETING_REBALANCE
    gen2 = ra.result.generation
    assert gen2 == gen + 1 and rb.result.generation == gen2 and rc.result.generation == gen2
    # CompletingRebalance -> PreparingRebalance (a member leaves before the leader's sync)
    sb = h.sync("g", gen2, b)
    assert h.coord.leave("g", [(c, None)]) == [E.none]
    assert h.group().state is S.PREPARING_REBALANCE
    assert sb.result.error == E.rebalance_in_progress
    # PreparingRebalance -> Empty (everyone leaves)
    assert h.coord.leave("g", [(a, None), (b, None)]) == [E.none, E.none]
    assert h.group().state is S.EMPTY
    # Empty -> Dead (DeleteGroups)
    done = Once()
    h.coord.delete_groups(["g"], done)
    assert done.result == {"g": E.none}
    assert "g" not in h.coord.groups

    moves = [(old, new) for _, old, new, _ in transitions]
    assert moves == [
        (S.EMPTY, S.PREPARING_REBALANCE),
        (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE),
        (S.COMPLETING_REBALANCE, S.STABLE),
        (S.STABLE, S.PREPARING_REBALANCE),
        (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE),
        (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE),
        (S.PREPARING_REBALANCE, S.EMPTY),
        (S.EMPTY, S.DEAD),
    ]
    assert [event for *_, event in transitions] == [
        GroupEvent.JOIN, GroupEvent.ALL_JOINED, GroupEvent.LEADER_SYNC, GroupEvent.JOIN, GroupEvent.ALL_JOINED,
        GroupEvent.LEAVE, GroupEvent.ALL_LEFT, GroupEvent.DELETE]
    # Every move of the graph (test_transition_tables.py: every event of the table).
    legal = {(old, new) for old, news in TRANSITIONS.items() for new in news}
    assert set(moves) == legal


def test_state_timestamp_tracks_transitions():
    h = Harness()
    stable_group(h, 1)
    t_stable = h.now
    assert h.group().state_timestamp_ms == t_stable
    h.advance(500)
    (mid,) = h.group().members
    h.coord.leave("g", [(mid, None)])
    assert h.group().state is S.EMPTY and h.group().state_timestamp_ms == t_stable + 500
