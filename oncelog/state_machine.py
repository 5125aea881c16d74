"""The one state-machine idiom of oncelog's coordinators (groups and transactions).

A state is a member of an enum with a ``kafka_name``; what may follow each state is a table
``{state: frozenset(next states)}`` beside the enum, under an ASCII diagram of the same graph;
every change of state is checked against the table by :func:`check_transition`, which raises
:class:`IllegalStateTransition` naming the entity and both states. An illegal move is a bug in
the coordinator, never a client's error: it is not mapped to a wire error code.
"""

from __future__ import annotations

from typing import Mapping, Protocol, TypeVar


class IllegalStateTransition(RuntimeError):
    pass


class _State(Protocol):
    @property
    def kafka_name(self) -> str: ...


S = TypeVar("S", bound=_State)


def check_transition(table: Mapping[S, frozenset[S]], entity: str, old: S, new: S) -> None:
    if new not in table[old]:
        raise IllegalStateTransition(f"{entity}: {old.kafka_name} -> {new.kafka_name} is not allowed")
