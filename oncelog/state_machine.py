"""The one state-machine idiom of oncelog's coordinators (groups and transactions).

A state is a member of an enum with a ``kafka_name`` (:class:`KafkaState` derives it from the
member's name, as Kafka spells its states: ``PREPARING_REBALANCE`` -> ``PreparingRebalance``).
Beside the enum, under an ASCII diagram of the same graph, a table says what may follow each
state, in one of two shapes:

* keyed by the event that causes the move (h11's ``EVENT_TRIGGERED_TRANSITIONS``):
  ``{state: {event: next state}}``, read by :func:`next_state` — the table then documents the
  protocol (a classic group's JoinGroup, SyncGroup, leave, timeouts);
* ``{state: frozenset(next states)}``, checked by :func:`check_transition` — for a state that is
  prepared before it is installed (a transaction's) or derived from other fields (a consumer
  group's), where the caller knows the next state rather than an event.

Either raises :class:`IllegalStateTransition` naming the entity, the state and the event (or
both states). An illegal move is a bug in the coordinator, never a client's error: it is not
mapped to a wire error code.
"""

from __future__ import annotations

from typing import Hashable, Mapping, Protocol, TypeVar


class IllegalStateTransition(RuntimeError):
    pass


class KafkaState:
    """Mixin for a state enum whose Kafka name is its member's name in CamelCase."""

    __slots__ = ()

    @property
    def kafka_name(self) -> str:
        return "".join(w.capitalize() for w in self.name.split("_"))  # type: ignore[attr-defined]


class _State(Protocol):
    @property
    def kafka_name(self) -> str: ...


S = TypeVar("S", bound=_State)


def check_transition(table: Mapping[S, frozenset[S]], entity: str, old: S, new: S) -> None:
    if new not in table[old]:
        raise IllegalStateTransition(f"{entity}: {old.kafka_name} -> {new.kafka_name} is not allowed")


def event_name(event: Hashable) -> str:
    return str(getattr(event, "value", event))


def next_state(table: Mapping[S, Mapping[Hashable, S]], entity: str, state: S, event: Hashable) -> S:
    """The state ``event`` moves ``state`` to, as ``table`` says; raises
    :class:`IllegalStateTransition` if the table has no such move."""
    new = table[state].get(event)
    if new is None:
        raise IllegalStateTransition(
            f"{entity}: can't handle event {event_name(event)!r} in state {state.kafka_name}")
    return new


def reachable(table: Mapping[S, Mapping[Hashable, S]]) -> dict[S, frozenset[S]]:
    """An event-keyed table read as ``{state: frozenset(next states)}`` (the graph it draws)."""
    return {state: frozenset(events.values()) for state, events in table.items()}
