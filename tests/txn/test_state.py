"""The transaction state table: exactly Kafka's TransactionState graph, with its on-disk bytes
and names."""

from __future__ import annotations

import itertools

import pytest

from oncelog.state_machine import IllegalStateTransition
from oncelog.txn.state import TRANSITIONS, TransactionState

from .harness import T, meta


# Kafka's TransactionState.VALID_PREVIOUS_STATES (transaction-coordinator module, TV2 included).
KAFKA_VALID_PREVIOUS = {
    T.EMPTY: {T.EMPTY, T.COMPLETE_COMMIT, T.COMPLETE_ABORT},
    T.ONGOING: {T.ONGOING, T.EMPTY, T.COMPLETE_COMMIT, T.COMPLETE_ABORT},
    T.PREPARE_COMMIT: {T.ONGOING},
    T.PREPARE_ABORT: {T.ONGOING, T.PREPARE_EPOCH_FENCE, T.EMPTY, T.COMPLETE_COMMIT, T.COMPLETE_ABORT},
    T.COMPLETE_COMMIT: {T.PREPARE_COMMIT},
    T.COMPLETE_ABORT: {T.PREPARE_ABORT},
    T.DEAD: {T.EMPTY, T.COMPLETE_ABORT, T.COMPLETE_COMMIT},
    T.PREPARE_EPOCH_FENCE: {T.ONGOING},
}


@pytest.mark.parametrize("old,new", list(itertools.product(TransactionState, TransactionState)),
                         ids=lambda s: s.kafka_name)
def test_prepare_transition_accepts_exactly_the_table(old, new):
    m = meta("x", state=old)
    if new in TRANSITIONS[old]:
        assert m.prepare_transition(new).state is new
    else:
        with pytest.raises(IllegalStateTransition, match=f"transaction 'x': {old.kafka_name} -> {new.kafka_name}"):
            m.prepare_transition(new)
    assert m.state is old  # prepared on a copy


def test_transition_table_covers_every_state_and_is_kafkas():
    assert set(TRANSITIONS) == set(TransactionState)
    forward = {old: {new for new, prev in KAFKA_VALID_PREVIOUS.items() if old in prev} for old in TransactionState}
    assert {s: set(v) for s, v in TRANSITIONS.items()} == forward
    assert TRANSITIONS[T.DEAD] == frozenset()


def test_state_bytes_and_names_are_kafkas():
    assert [(s.value, s.kafka_name) for s in TransactionState] == [
        (0, "Empty"), (1, "Ongoing"), (2, "PrepareCommit"), (3, "PrepareAbort"), (4, "CompleteCommit"),
        (5, "CompleteAbort"), (6, "Dead"), (7, "PrepareEpochFence")]
