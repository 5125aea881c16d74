"""The transaction state table: exactly Kafka's TransactionState graph, with its on-disk bytes
and names."""

from __future__ import annotations

import itertools

import pytest

from oncelog.txn.state import TRANSITIONS, IllegalTxnTransition, TransactionState, check_transition

from .harness import T


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
def test_check_transition_accepts_exactly_the_table(old, new):
    if new in TRANSITIONS[old]:
        check_transition("x", old, new)
    else:
        with pytest.raises(IllegalTxnTransition, match=f"{old.kafka_name} -> {new.kafka_name}"):
            check_transition("x", old, new)


def test_transition_table_covers_every_state_and_is_kafkas():
    assert set(TRANSITIONS) == set(TransactionState)
    forward = {old: {new for new, prev in KAFKA_VALID_PREVIOUS.items() if old in prev} for old in TransactionState}
    assert {s: set(v) for s, v in TRANSITIONS.items()} == forward
    assert TRANSITIONS[T.DEAD] == frozenset()


def test_state_bytes_and_names_are_kafkas():
    assert [(s.value, s.kafka_name) for s in TransactionState] == [
        (0, "Empty"), (1, "Ongoing"), (2, "PrepareCommit"), (3, "PrepareAbort"), (4, "CompleteCommit"),
        (5, "CompleteAbort"), (6, "Dead"), (7, "PrepareEpochFence")]
