"""Group coordinator: state table (state-machine tests, no sockets; see harness.py)."""

from __future__ import annotations

import pytest

from .harness import *  # noqa: F403 (the shared harness and record helpers)


def test_transition_table_matches_kafka():
    # Kafka's GroupState.validPreviousStates, inverted. Kafka also allows Dead -> Dead; oncelog
    # deletes a Dead group at once so never needs it: either is accepted.
    kafka = {
        S.EMPTY: {S.PREPARING_REBALANCE, S.DEAD},
        S.PREPARING_REBALANCE: {S.COMPLETING_REBALANCE, S.EMPTY, S.DEAD},
        S.COMPLETING_REBALANCE: {S.STABLE, S.PREPARING_REBALANCE, S.DEAD},
        S.STABLE: {S.PREPARING_REBALANCE, S.DEAD},
        S.DEAD: set(),
    }
    assert {s: set(t) - ({S.DEAD} if s is S.DEAD else set()) for s, t in TRANSITIONS.items()} == kafka
    assert set(TRANSITIONS) == set(GroupState)


@pytest.mark.parametrize("old,new", list(itertools.product(GroupState, GroupState)),
                         ids=lambda s: s.value)
def test_group_transition_follows_table(old, new):
    g = Group("g", state=old, state_timestamp_ms=5)
    if new in TRANSITIONS[old]:
        g.transition(new, 42)
        assert g.state is new and g.state_timestamp_ms == 42
    else:
        with pytest.raises(IllegalStateTransition):
            g.transition(new, 42)
        assert g.state is old and g.state_timestamp_ms == 5


@pytest.fixture
def transitions(monkeypatch):
    """Every (group, old, new) the coordinator asks for, in order."""
    seen: list[tuple[str, GroupState, GroupState]] = []
    original = Group.transition

    def spy(self, new, now_ms):
        old = self.state
        original(self, new, now_ms)
        seen.append((self.group_id, old, new))

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

    moves = [(old, new) for _, old, new in transitions]
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
    legal = {(old, new) for old, news in TRANSITIONS.items() for new in news}
    assert set(moves) == legal - {(s, S.DEAD) for s in (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.STABLE)}


def test_state_timestamp_tracks_transitions():
    h = Harness()
    stable_group(h, 1)
    t_stable = h.now
    assert h.group().state_timestamp_ms == t_stable
    h.advance(500)
    (mid,) = h.group().members
    h.coord.leave("g", [(mid, None)])
    assert h.group().state is S.EMPTY and h.group().state_timestamp_ms == t_stable + 500
