"""The share-session cache (:mod:`oncelog.groups.share_sessions`): Kafka's ShareFetch and
ShareAcknowledge epoch rules (``SharePartitionManager.newContext`` / ``acknowledgeSessionUpdate``
/ ``releaseSession``), the session limit without eviction, the connection binding, and the
invariant that every index holds exactly the live sessions (a hypothesis run of random
operations)."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from oncelog.groups.share_sessions import (
    FINAL_EPOCH,
    MAX_EPOCH,
    AckContext,
    FetchContext,
    ShareSessionError,
    ShareSessions,
    next_epoch,
)

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
P0, P1, Q0 = (T1, 0), (T1, 1), (T2, 0)


def refused(code: ErrorCode, call, *args, **kwargs) -> ShareSessionError:
    with pytest.raises(ShareSessionError) as caught:
        call(*args, **kwargs)
    assert caught.value.code == code
    return caught.value


def check_indexes(cache: ShareSessions) -> None:
    """Every index entry names a live session, every live session is indexed, no empty entry."""
    sessions = cache._sessions
    by_conn = {(c, k) for c, keys in cache._by_connection.items() for k in keys}
    assert by_conn == {(s.connection, k) for k, s in sessions.items()}
    by_group = {(g, m) for g, ms in cache._by_group.items() for m in ms}
    assert by_group == set(sessions)
    assert all(cache._by_connection.values()) and all(cache._by_group.values())
    assert len(cache) == len(sessions) <= cache.max_sessions


# ---- ShareFetch ---------------------------------------------------------------------------------


def test_initial_fetch_opens_a_session_expecting_epoch_1():
    cache = ShareSessions()
    ctx = cache.fetch("g", "m", 0, "c1", [P0, P1])
    assert ctx == FetchContext("g", "m", frozenset({P0, P1}), 1, initial=True)
    assert len(cache) == 1 and cache.sessions_of_group("g") == ["m"]
    assert cache.get("g", "m").connection == "c1"


def test_subsequent_fetches_advance_the_epoch_and_update_the_partitions():
    cache = ShareSessions()
    cache.fetch("g", "m", 0, "c1", [P0])
    ctx = cache.fetch("g", "m", 1, "c1", partitions_added=[P1, Q0], has_acks=True)
    assert ctx.partitions == {P0, P1, Q0} and ctx.epoch == 2 and not ctx.initial and not ctx.final
    ctx = cache.fetch("g", "m", 2, "c1", partitions_forgotten=[P0, (T2, 9)])
    assert ctx.partitions == {P1, Q0} and ctx.epoch == 3
    ctx = cache.fetch("g", "m", 3, "c1")  # nothing changes: the session's partitions are fetched
    assert ctx.partitions == {P1, Q0} and ctx.epoch == 4


def test_initial_fetch_with_acknowledgements_is_an_invalid_request():
    cache = ShareSessions()
    error = refused(ErrorCode.invalid_request, cache.fetch, "g", "m", 0, "c1", [P0], has_acks=True)
    assert error.message == "Acknowledge data present in Initial Fetch Request"
    assert len(cache) == 0


def test_initial_fetch_with_acks_does_not_remove_the_existing_session():
    cache = ShareSessions()
    cache.fetch("g", "m", 0, "c1", [P0])
    refused(ErrorCode.invalid_request, cache.fetch, "g", "m", 0, "c1", has_acks=True)
    assert cache.get("g", "m").epoch == 1


def test_initial_fetch_replaces_the_session_of_the_key():
    cache = ShareSessions()
    cache.fetch("g", "m", 0, "c1", [P0])
    cache.fetch("g", "m", 1, "c1")
    ctx = cache.fetch("g", "m", 0, "c2", [Q0])
    assert ctx.partitions == {Q0} and ctx.epoch == 1 and ctx.initial
    assert len(cache) == 1 and cache.get("g", "m").connection == "c2"
    assert cache.connection_closed("c1") == []  # the old binding went with the old session
    assert cache.get("g", "m") is not None
    check_indexes(cache)


def test_session_limit_reached_without_eviction():
    cache = ShareSessions(max_sessions=2)
    cache.fetch("g", "a", 0, "c1")
    cache.fetch("g", "b", 0, "c2")
    refused(ErrorCode.share_session_limit_reached, cache.fetch, "g", "c", 0, "c3", [P0])
    assert sorted(cache.sessions_of_group("g")) == ["a", "b"] and len(cache) == 2
    # replacing an existing key fits (Kafka removes the old session first)
    assert cache.fetch("g", "a", 0, "c1", [P1]).partitions == {P1}
    # once one ends, a new one fits
    assert cache.release("g", "b") == set()
    assert cache.fetch("g", "c", 0, "c3").epoch == 1
    check_indexes(cache)


def test_max_sessions_at_least_one():
    with pytest.raises(ValueError):
        ShareSessions(max_sessions=0)


def test_final_fetch_needs_a_session_and_leaves_the_release_to_the_caller():
    cache = ShareSessions()
    refused(ErrorCode.share_session_not_found, cache.fetch, "g", "m", FINAL_EPOCH, "c1")
    cache.fetch("g", "m", 0, "c1", [P0, P1])
    ctx = cache.fetch("g", "m", FINAL_EPOCH, "c1", [Q0], has_acks=True)
    assert ctx == FetchContext("g", "m", frozenset(), FINAL_EPOCH, final=True)
    session = cache.get("g", "m")
    assert session.partitions == {P0, P1} and session.epoch == 1  # unchanged until released
    assert cache.release("g", "m") == {P0, P1}
    assert cache.release("g", "m") is None
    assert len(cache) == 0
    check_indexes(cache)


@pytest.mark.parametrize("epoch", [1, 5, -2])
def test_subsequent_fetch_without_a_session_is_not_found(epoch):
    refused(ErrorCode.share_session_not_found, ShareSessions().fetch, "g", "m", epoch, "c1")


@pytest.mark.parametrize("epoch", [2, 7, -2, MAX_EPOCH])
def test_wrong_epoch_is_refused_and_changes_nothing(epoch):
    cache = ShareSessions()
    cache.fetch("g", "m", 0, "c1", [P0])
    error = refused(ErrorCode.invalid_share_session_epoch, cache.fetch, "g", "m", epoch, "c1", [Q0])
    assert "expected epoch 1" in error.message
    session = cache.get("g", "m")
    assert session.epoch == 1 and session.partitions == {P0}


def test_sessions_are_per_group_and_member():
    cache = ShareSessions()
    cache.fetch("g", "m", 0, "c1", [P0])
    cache.fetch("h", "m", 0, "c1", [Q0])
    cache.fetch("g", "n", 0, "c2")
    assert cache.fetch("h", "m", 1, "c1").partitions == {Q0}
    assert cache.fetch("g", "m", 1, "c1").partitions == {P0}
    assert cache.sessions_of_group("g") == ["m", "n"] and cache.sessions_of_group("h") == ["m"]
    assert cache.sessions_of_group("nope") == []


# ---- epochs -------------------------------------------------------------------------------------


def test_next_epoch_wraps_to_1_never_0():
    assert next_epoch(0) == 1 and next_epoch(41) == 42
    assert next_epoch(MAX_EPOCH) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_session_epoch_wraps_after_max_int():
    cache = ShareSessions()
    cache.fetch("g", "m", 0, "c1")
    cache.get("g", "m").epoch = MAX_EPOCH
    assert cache.fetch("g", "m", MAX_EPOCH, "c1").epoch == 1
    assert cache.acknowledge("g", "m", 1, "c1").epoch == 2


# ---- ShareAcknowledge ---------------------------------------------------------------------------


def test_acknowledge_epoch_0_is_invalid_even_without_a_session():
    cache = ShareSessions()
    error = refused(ErrorCode.invalid_share_session_epoch, cache.acknowledge, "g", "m", 0, "c1")
    assert error.message == "ShareAcknowledge Request cannot have epoch as INITIAL_EPOCH"
    cache.fetch("g", "m", 0, "c1")
    refused(ErrorCode.invalid_share_session_epoch, cache.acknowledge, "g", "m", 0, "c1")
    assert cache.get("g", "m").epoch == 1


@pytest.mark.parametrize("epoch", [1, FINAL_EPOCH])
def test_acknowledge_without_a_session_is_not_found(epoch):
    refused(ErrorCode.share_session_not_found, ShareSessions().acknowledge, "g", "m", epoch, "c1")


def test_fetch_and_acknowledge_share_one_epoch_counter():
    cache = ShareSessions()
    cache.fetch("g", "m", 0, "c1", [P0])
    assert cache.acknowledge("g", "m", 1, "c1") == AckContext("g", "m", 2)
    refused(ErrorCode.invalid_share_session_epoch, cache.fetch, "g", "m", 1, "c1")
    assert cache.fetch("g", "m", 2, "c1").epoch == 3
    refused(ErrorCode.invalid_share_session_epoch, cache.acknowledge, "g", "m", 2, "c1")
    assert cache.acknowledge("g", "m", 3, "c1").epoch == 4


def test_final_acknowledge_keeps_the_session_until_released():
    cache = ShareSessions()
    cache.fetch("g", "m", 0, "c1", [P0])
    assert cache.acknowledge("g", "m", FINAL_EPOCH, "c1") == AckContext("g", "m", FINAL_EPOCH, final=True)
    assert cache.get("g", "m").epoch == 1
    assert cache.release("g", "m") == {P0}
    check_indexes(cache)


# ---- connections --------------------------------------------------------------------------------


def test_a_session_may_be_used_from_another_connection():
    cache = ShareSessions()
    cache.fetch("g", "m", 0, "c1", [P0])
    assert cache.fetch("g", "m", 1, "c2").epoch == 2
    assert cache.acknowledge("g", "m", 2, "c3").epoch == 3
    assert cache.connection_closed("c2") == [] and cache.connection_closed("c3") == []
    # the creating connection still owns it: closing it ends the session
    assert cache.connection_closed("c1") == [(("g", "m"), {P0})]
    assert len(cache) == 0
    check_indexes(cache)


def test_connection_closed_ends_every_session_it_created_and_no_other():
    cache = ShareSessions()
    cache.fetch("g", "a", 0, "c1", [P0])
    cache.fetch("h", "b", 0, "c1", [Q0])
    cache.fetch("g", "c", 0, "c2", [P1])
    ended = cache.connection_closed("c1")
    assert ended == [(("g", "a"), {P0}), (("h", "b"), {Q0})]
    assert cache.sessions_of_group("g") == ["c"] and cache.sessions_of_group("h") == []
    assert cache.connection_closed("c1") == []
    assert cache.index_sizes() == (1, 1, 1)
    check_indexes(cache)


def test_closing_or_releasing_removes_every_index_entry():
    cache = ShareSessions(max_sessions=50)
    for i in range(50):
        cache.fetch(f"g{i % 5}", f"m{i}", 0, f"c{i % 7}", [(T1, i)])
    assert cache.index_sizes() == (50, 7, 5)
    for i in range(0, 50, 2):
        assert cache.release(f"g{i % 5}", f"m{i}") == {(T1, i)}
    for c in range(7):
        cache.connection_closed(f"c{c}")
    assert cache.index_sizes() == (0, 0, 0)
    assert cache._by_connection == {} and cache._by_group == {}


# ---- the invariants under any sequence of operations ---------------------------------------------

GROUPS, MEMBERS, CONNS = ["g", "h"], ["a", "b", "c"], ["c1", "c2", "c3"]
PARTS = [P0, P1, Q0]

operation = st.one_of(
    st.tuples(st.just("fetch"), st.sampled_from(GROUPS), st.sampled_from(MEMBERS),
              st.sampled_from([0, 0, -1, 1, 2, 3, 4]), st.sampled_from(CONNS),
              st.lists(st.sampled_from(PARTS), max_size=3), st.lists(st.sampled_from(PARTS), max_size=2),
              st.booleans()),
    st.tuples(st.just("ack"), st.sampled_from(GROUPS), st.sampled_from(MEMBERS),
              st.sampled_from([0, -1, 1, 2, 3, 4]), st.sampled_from(CONNS)),
    st.tuples(st.just("release"), st.sampled_from(GROUPS), st.sampled_from(MEMBERS)),
    st.tuples(st.just("close"), st.sampled_from(CONNS)),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(operation, max_size=40), st.integers(min_value=1, max_value=4))
def test_indexes_hold_exactly_the_live_sessions(ops, limit):
    cache = ShareSessions(max_sessions=limit)
    for op in ops:
        before = {k: (s.epoch, set(s.partitions), s.connection) for k, s in cache._sessions.items()}
        try:
            if op[0] == "fetch":
                _, g, m, epoch, conn, added, forgotten, acks = op
                ctx = cache.fetch(g, m, epoch, conn, added, forgotten, acks)
                if not ctx.final:
                    session = cache.get(g, m)
                    assert ctx.partitions == session.partitions and ctx.epoch == session.epoch
            elif op[0] == "ack":
                _, g, m, epoch, conn = op
                cache.acknowledge(g, m, epoch, conn)
            elif op[0] == "release":
                cache.release(op[1], op[2])
            else:
                for key, _ in cache.connection_closed(op[1]):
                    assert key not in cache._sessions
        except ShareSessionError:
            after = {k: (s.epoch, set(s.partitions), s.connection) for k, s in cache._sessions.items()}
            assert after == before  # a refused request changes nothing
        check_indexes(cache)
        assert all(s.epoch >= 1 for s in cache._sessions.values())
