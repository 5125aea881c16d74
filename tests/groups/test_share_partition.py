"""The share partition's core (KIP-932, Kafka's SharePartition / InFlightState): acquiring,
acknowledging, releasing and expiring in-flight records, the SPSO and its bounded memory, the
persisted form — unit tests, then properties over random sequences of several members' calls."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from oncelog.groups.share_partition import (
    MSG_FIRST_PAST, MSG_LAST_PAST, MSG_NOT_ACQUIRED, MSG_NOT_FOUND, MSG_NOT_OWNER, AckType,
    AcquiredRange, LogBatch, RecordState, SharePartition, ShareStateError, StateBatch, StateChange,
)

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = (RecordState.AVAILABLE, RecordState.ACQUIRED,
                                               RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
ACCEPT, RELEASE, REJECT, GAP, RENEW = (AckType.ACCEPT, AckType.RELEASE, AckType.REJECT, AckType.GAP,
                                       AckType.RENEW)
LOCK = 30_000
LIMIT = 3


def log(*sizes: int, start: int = 0) -> list[LogBatch]:
    """Contiguous log batches of these sizes from ``start``."""
    out, base = [], start
    for n in sizes:
        out.append(LogBatch(base, base + n - 1))
        base += n
    return out


def from_offset(batches: list[LogBatch], offset: int) -> list[LogBatch]:
    """What a fetch from ``offset`` reads: the batches from the one holding it."""
    return [b for b in batches if b.last_offset >= offset]


def acquire(p: SharePartition, member: str, batches, *, max_records: int = 500, batch_size: int = 500,
            now: int = 0, record_limit: bool = False, aborted=()) -> list[AcquiredRange]:
    return p.acquire(member, batches, max_records=max_records, batch_size=batch_size, now_ms=now,
                     lock_ms=LOCK, delivery_limit=LIMIT, aborted=aborted, record_limit=record_limit)


def ack(p: SharePartition, member: str, *acks, now: int = 0) -> StateChange:
    return p.acknowledge(member, list(acks), now_ms=now, lock_ms=LOCK, delivery_limit=LIMIT)


def states(p: SharePartition, first: int, last: int) -> list[tuple[int, int]]:
    """(state, count) of each offset of [first, last]."""
    return [(int(s[0]), s[1]) if (s := p.state_of(o)) else None for o in range(first, last + 1)]


def full(p: SharePartition) -> tuple:
    """Everything observable, owners and deadlines included."""
    return (p.start_offset, p.end_offset, p.in_flight_count, p.delivery_complete_count,
            p.next_fetch_offset(), tuple(p.state_of(o) for o in range(p.start_offset, p.end_offset + 1)))


def refused(p: SharePartition, member: str, acks, code: ErrorCode, message: str | None = None) -> None:
    before = full(p)
    with pytest.raises(ShareStateError) as e:
        p.acknowledge(member, acks, now_ms=0, lock_ms=LOCK, delivery_limit=LIMIT)
    assert e.value.code == code
    if message is not None:
        assert e.value.message == message
    assert full(p) == before


# -- acquiring ------------------------------------------------------------------------------------


def test_a_fetch_acquires_new_records_with_count_one():
    p = SharePartition(0)
    got = acquire(p, "a", log(5, 5))
    assert got == [AcquiredRange(0, 9, 1)]
    assert (p.start_offset, p.end_offset, p.in_flight_count) == (0, 9, 10)
    assert p.next_fetch_offset() == 10
    assert p.state_of(3) == (ACQUIRED, 1, "a", LOCK)
    assert p.next_deadline_ms() == LOCK


def test_an_empty_partition_starts_at_the_first_offset_read_and_its_end_is_its_start():
    p = SharePartition(7)
    assert (p.end_offset, p.in_flight_count, p.next_fetch_offset()) == (7, 0, 7)
    assert p.can_acquire()
    assert acquire(p, "a", log(3, start=5)) == [AcquiredRange(7, 7, 1)]   # the batch holding 7
    q = SharePartition(0)
    assert acquire(q, "a", log(3, start=20)) == [AcquiredRange(20, 22, 1)]
    assert q.start_offset == 20                                             # 0..19 never to be read


def test_batch_size_splits_acquired_ranges_at_log_batch_boundaries():
    p = SharePartition(0)
    got = acquire(p, "a", log(3, 3, 3, 3, 1), batch_size=5)
    assert got == [AcquiredRange(0, 5, 1), AcquiredRange(6, 11, 1), AcquiredRange(12, 12, 1)]
    q = SharePartition(0)
    assert acquire(q, "a", log(4, 4), batch_size=2) == [AcquiredRange(0, 3, 1), AcquiredRange(4, 7, 1)]


def test_max_records_is_soft_whole_log_batches():
    p = SharePartition(0)
    assert acquire(p, "a", log(4, 4, 4), max_records=5) == [AcquiredRange(0, 7, 1)]
    assert p.end_offset == 7 and p.next_fetch_offset() == 8
    assert acquire(p, "b", from_offset(log(4, 4, 4), 8), max_records=1) == [AcquiredRange(8, 11, 1)]


def test_record_limit_is_strict_and_the_rest_of_the_log_batch_stays_available():
    p = SharePartition(0)
    batches = log(4, 4)
    assert acquire(p, "a", batches, max_records=5, record_limit=True) == [AcquiredRange(0, 4, 1)]
    assert p.end_offset == 7 and p.in_flight_count == 8
    assert states(p, 5, 7) == [(0, 0)] * 3
    assert p.next_fetch_offset() == 5
    assert acquire(p, "b", from_offset(batches, 5), max_records=2, record_limit=True) == [AcquiredRange(5, 6, 1)]
    assert acquire(p, "b", from_offset(batches, 7), max_records=2, record_limit=True) == [AcquiredRange(7, 7, 1)]
    assert p.next_fetch_offset() == 8


def test_nothing_to_acquire():
    p = SharePartition(0)
    assert acquire(p, "a", []) == []
    assert acquire(p, "a", log(3), max_records=0) == []
    assert p.in_flight_count == 0


def test_max_in_flight_is_honoured_with_one_log_batch_of_overshoot():
    p = SharePartition(0, max_in_flight=100)
    batches = log(*[30] * 10)
    got = acquire(p, "a", batches, max_records=1000)
    assert got == [AcquiredRange(0, 119, 1)]          # the limit falls inside the 4th log batch
    assert p.in_flight_count == 120 and not p.can_acquire()
    assert acquire(p, "b", from_offset(batches, 120)) == []
    # At the limit, records already in flight are still redelivered (Kafka caps at the SPEO).
    ack(p, "a", (10, 19, [RELEASE]))
    assert p.can_acquire() and p.next_fetch_offset() == 10
    assert acquire(p, "b", from_offset(batches, 10)) == [AcquiredRange(10, 19, 2)]
    assert p.end_offset == 119


def test_records_before_the_first_batch_read_are_archived_as_compacted():
    p = SharePartition(0)
    acquire(p, "a", log(10))
    ack(p, "a", (0, 9, [RELEASE]))
    # The log was compacted: the fetch from 0 now finds its first batch at 4.
    assert acquire(p, "a", [LogBatch(4, 9)]) == [AcquiredRange(4, 9, 2)]
    assert p.start_offset == 4


def test_offsets_missing_between_batches_are_acquired_for_the_client_to_ack_as_gaps():
    p = SharePartition(0)
    got = acquire(p, "a", [LogBatch(0, 2), LogBatch(6, 8)])
    assert got == [AcquiredRange(0, 8, 1)]
    ack(p, "a", (0, 8, [ACCEPT, ACCEPT, ACCEPT, GAP, GAP, GAP, ACCEPT, ACCEPT, ACCEPT]))
    assert p.start_offset == 9 and p.in_flight_count == 0


# -- redelivery and the delivery limit --------------------------------------------------------------


def test_released_records_are_redelivered_with_their_count():
    p = SharePartition(0)
    acquire(p, "a", log(5))
    change = ack(p, "a", (0, 4, [RELEASE]))
    assert change == StateChange(0, (StateBatch(0, 4, 0, 1),), 0)
    assert acquire(p, "b", log(5)) == [AcquiredRange(0, 4, 2)]
    assert p.state_of(0)[2] == "b"


def test_expired_locks_make_records_available_with_their_count():
    p = SharePartition(0)
    acquire(p, "a", log(3), now=1000)
    assert p.expire(1000 + LOCK - 1, delivery_limit=LIMIT) is None
    change = p.expire(1000 + LOCK, delivery_limit=LIMIT)
    assert change == StateChange(0, (StateBatch(0, 2, 0, 1),), 0)
    assert p.next_deadline_ms() is None
    assert acquire(p, "b", log(3), now=2000) == [AcquiredRange(0, 2, 2)]


def test_release_at_the_limit_archives():
    p = SharePartition(0)
    for count in range(1, LIMIT):
        assert acquire(p, "a", log(2)) == [AcquiredRange(0, 1, count)]
        ack(p, "a", (0, 1, [RELEASE]))
    assert acquire(p, "a", log(2)) == [AcquiredRange(0, 1, LIMIT)]
    change = ack(p, "a", (0, 1, [RELEASE]))
    assert change == StateChange(2, (), 0)             # archived, and the SPSO moved past them
    assert p.in_flight_count == 0 and p.start_offset == p.end_offset == 2


def test_expiry_at_the_limit_archives():
    p = SharePartition(0)
    now = 0
    for count in range(1, LIMIT + 1):
        assert acquire(p, "a", log(3), now=now) == [AcquiredRange(0, 2, count)]
        now += LOCK
        change = p.expire(now, delivery_limit=LIMIT)
    assert change == StateChange(3, (), 0)
    assert p.start_offset == 3 and p.in_flight_count == 0


def test_an_available_record_at_the_limit_is_archived_when_a_fetch_reaches_it():
    p = SharePartition(0, batches=[StateBatch(0, 1, 0, LIMIT)])
    assert acquire(p, "a", log(2, 2)) == [AcquiredRange(2, 3, 1)]
    assert p.start_offset == 2


def test_release_member_gives_back_its_records_counting_the_delivery():
    # Kafka 4.4 redelivers a closed session's records at the next count (conformance scenarios
    # sa_final_epoch_releases, sf_final_epoch_with_acks), and archives them at the limit.
    p = SharePartition(0)
    acquire(p, "a", log(3))
    acquire(p, "b", log(3, 2, start=0)[1:])
    ack(p, "a", (0, 0, [RELEASE]))
    acquire(p, "a", log(3))                              # offset 0 again, count 2
    change = p.release_member("a", delivery_limit=LIMIT)
    assert change == StateChange(0, (StateBatch(0, 0, 0, 2), StateBatch(1, 2, 0, 1)), 0)
    assert states(p, 0, 4) == [(0, 2), (0, 1), (0, 1), (1, 1), (1, 1)]
    assert p.release_member("a", delivery_limit=LIMIT) is None
    assert acquire(p, "c", log(3)) == [AcquiredRange(0, 0, 3), AcquiredRange(1, 2, 2)]
    # count 3 == LIMIT: released, it is archived (the SPSO moves past it)
    assert p.release_member("c", delivery_limit=LIMIT) is not None
    assert p.start_offset == 1 and states(p, 1, 2) == [(0, 2), (0, 2)]


def test_acknowledgement_batches_out_of_order_are_invalid_request_and_change_nothing():
    p = SharePartition(0)
    acquire(p, "a", log(3))
    refused(p, "a", [(1, 1, [ACCEPT]), (0, 0, [ACCEPT])], ErrorCode.invalid_request)
    assert states(p, 0, 2) == [(1, 1)] * 3


def test_renew_restarts_the_lock_and_writes_nothing():
    p = SharePartition(0)
    acquire(p, "a", log(3), now=0)
    change = ack(p, "a", (0, 1, [RENEW]), now=20_000)
    assert change == StateChange(0, (), 0)
    assert p.state_of(0)[3] == 20_000 + LOCK and p.state_of(2)[3] == LOCK
    p.expire(LOCK, delivery_limit=LIMIT)
    assert states(p, 0, 2) == [(1, 1), (1, 1), (0, 1)]
    assert p.next_deadline_ms() == 20_000 + LOCK


# -- acknowledging --------------------------------------------------------------------------------


def test_one_type_for_a_range_and_one_per_offset():
    p = SharePartition(0)
    acquire(p, "a", log(10))
    change = ack(p, "a", (2, 4, [REJECT]), (5, 9, [ACCEPT, RELEASE, GAP, ACCEPT, RELEASE]))
    assert states(p, 0, 9) == [(1, 1), (1, 1), (4, 1), (4, 1), (4, 1), (2, 1), (0, 1), (4, 1),
                               (2, 1), (0, 1)]
    assert change == StateChange(0, (StateBatch(2, 4, 4, 1), StateBatch(5, 5, 2, 1),
                                     StateBatch(6, 6, 0, 1), StateBatch(7, 7, 4, 1),
                                     StateBatch(8, 8, 2, 1), StateBatch(9, 9, 0, 1)), 6)
    assert p.delivery_complete_count == 6
    change = ack(p, "a", (0, 1, [ACCEPT]))
    assert change == StateChange(6, (), 2)              # 0..5 done and forgotten
    assert p.in_flight_count == 4 and p.delivery_complete_count == 2


def test_extra_per_offset_types_are_ignored():
    p = SharePartition(0)
    acquire(p, "a", log(2))
    ack(p, "a", (0, 1, [ACCEPT, REJECT, RELEASE]))
    assert p.start_offset == 2


def test_a_refused_acknowledgement_changes_nothing():
    p = SharePartition(0)
    acquire(p, "a", log(5))
    acquire(p, "b", log(5, 5)[1:])
    # The first range alone would pass: all or nothing.
    refused(p, "a", [(0, 4, [ACCEPT]), (5, 5, [ACCEPT])], ErrorCode.invalid_record_state, MSG_NOT_OWNER)
    refused(p, "a", [(0, 2, [ACCEPT]), (2, 3, [ACCEPT])], ErrorCode.invalid_record_state, MSG_NOT_ACQUIRED)
    refused(p, "a", [(0, 1, [ACCEPT]), (3, 3, [9])], ErrorCode.invalid_request, "Invalid acknowledge type: 9")
    assert states(p, 0, 4) == [(1, 1)] * 5


def test_acknowledgement_errors_have_kafkas_codes_and_messages():
    p = SharePartition(0)
    refused(p, "a", [(0, 0, [ACCEPT])], ErrorCode.invalid_record_state, MSG_NOT_FOUND)
    acquire(p, "a", log(5, 5))
    ack(p, "a", (5, 9, [RELEASE]))
    refused(p, "b", [(0, 0, [ACCEPT])], ErrorCode.invalid_record_state, MSG_NOT_OWNER)
    refused(p, "a", [(5, 5, [ACCEPT])], ErrorCode.invalid_record_state, MSG_NOT_ACQUIRED)
    refused(p, "a", [(10, 12, [ACCEPT])], ErrorCode.invalid_request, MSG_FIRST_PAST)
    refused(p, "a", [(3, 10, [ACCEPT])], ErrorCode.invalid_request, MSG_LAST_PAST)
    refused(p, "a", [(3, 2, [ACCEPT])], ErrorCode.invalid_request)
    refused(p, "a", [(0, 3, [ACCEPT, ACCEPT])], ErrorCode.invalid_request)
    refused(p, "a", [(0, 3, [])], ErrorCode.invalid_request)
    e = ShareStateError(ErrorCode.invalid_request, "x")
    assert str(e) == "invalid_request: x" and e.code == ErrorCode.invalid_request


def test_acknowledgements_below_the_spso_are_ignored():
    p = SharePartition(0)
    acquire(p, "a", log(5, 5))
    ack(p, "a", (0, 4, [ACCEPT]))
    assert p.start_offset == 5
    assert ack(p, "a", (0, 4, [REJECT])) == StateChange(5, (), 0)
    ack(p, "a", (2, 6, [ACCEPT]))                       # cut at the SPSO
    assert p.start_offset == 7
    assert states(p, 7, 9) == [(1, 1)] * 3


# -- the SPSO, memory, the log start ------------------------------------------------------------------


def test_the_spso_advances_and_memory_stays_bounded():
    p = SharePartition(0, max_in_flight=100)
    batches = log(*[7] * 3000)
    for _ in range(400):
        got = acquire(p, "a", from_offset(batches, p.next_fetch_offset()), max_records=40)
        ack(p, "a", *((r.first_offset, r.last_offset, [ACCEPT]) for r in got))
        assert p.in_flight_count == 0 and len(p._records) == 0
    assert p.start_offset == p.end_offset == 400 * 42
    # With one record left behind, the rest stays in flight but never beyond the limit.
    q = SharePartition(0, max_in_flight=100)
    acquire(q, "a", log(1))
    for _ in range(100):
        got = acquire(q, "b", from_offset(batches, q.next_fetch_offset()), max_records=40)
        ack(q, "b", *((r.first_offset, r.last_offset, [ACCEPT]) for r in got))
        assert len(q._records) == q.in_flight_count <= 100 + 6
    assert q.delivery_complete_count == q.in_flight_count - 1
    ack(q, "a", (0, 0, [ACCEPT]))
    assert q.in_flight_count == 0 and len(q._records) == 0


def test_move_start_archives_what_the_log_no_longer_has():
    p = SharePartition(0)
    acquire(p, "a", log(10))
    ack(p, "a", (0, 3, [RELEASE]), (4, 4, [ACCEPT]))
    p.move_start(0)                                       # not past the SPSO: nothing
    assert p.start_offset == 0
    p.move_start(6)
    assert (p.start_offset, p.end_offset, p.in_flight_count) == (6, 9, 4)
    assert p.state_of(5) is None and p.delivery_complete_count == 0
    assert ack(p, "a", (5, 5, [ACCEPT])) == StateChange(6, (), 0)    # below: ignored
    p.move_start(20)
    assert (p.start_offset, p.end_offset, p.in_flight_count, p.next_fetch_offset()) == (20, 20, 0, 20)
    q = SharePartition(0)
    q.move_start(5)
    assert (q.start_offset, q.end_offset) == (5, 5)


def test_move_start_onto_done_records_moves_past_them():
    p = SharePartition(0)
    acquire(p, "a", log(6))
    ack(p, "a", (3, 4, [ACCEPT]))
    p.move_start(3)
    assert p.start_offset == 5 and p.in_flight_count == 1


# -- transactions ---------------------------------------------------------------------------------


def test_aborted_transactions_are_archived_and_cut_out():
    batches = [LogBatch(0, 1),
               LogBatch(2, 4, producer_id=7, is_transactional=True),
               LogBatch(5, 5, producer_id=8, is_transactional=True),
               LogBatch(6, 6, producer_id=7, is_transactional=True, is_control=True),  # abort marker
               LogBatch(7, 8, producer_id=7, is_transactional=True),                   # a later txn
               LogBatch(9, 9, producer_id=7, is_transactional=True, is_control=True),  # its commit
               LogBatch(10, 10, producer_id=8, is_transactional=True, is_control=True)]
    p = SharePartition(0)
    got = acquire(p, "a", batches, aborted=[(7, 2)])
    assert got == [AcquiredRange(0, 1, 1), AcquiredRange(5, 10, 1)]
    assert states(p, 2, 4) == [(4, 1)] * 3
    assert p.delivery_complete_count == 3
    ack(p, "a", (0, 1, [ACCEPT]))
    assert p.start_offset == 5


def test_an_aborted_transaction_at_the_head_moves_the_spso_past_its_marker():
    """The ABORT marker would be acquired alone: archived instead (by design, not Kafka's)."""
    p = SharePartition(0)
    got = acquire(p, "a", [LogBatch(0, 2, producer_id=1, is_transactional=True),
                           LogBatch(3, 3, producer_id=1, is_transactional=True, is_control=True)],
                  aborted=[(1, 0)])
    assert got == []
    assert p.start_offset == 4 and p.in_flight_count == 0


def test_a_lone_commit_marker_is_archived_and_one_with_data_is_acquired():
    p = SharePartition(0)
    assert acquire(p, "a", [LogBatch(0, 0, producer_id=1, is_transactional=True)]) == [AcquiredRange(0, 0, 1)]
    # the data was fetched while its transaction was open; its COMMIT marker comes alone
    assert acquire(p, "a", [LogBatch(1, 1, producer_id=1, is_transactional=True, is_control=True)]) == []
    assert p.state_of(1) == (ARCHIVED, 0, None, 0) and p.state_of(0)[0] is ACQUIRED
    assert p.next_fetch_offset() == 2
    ack(p, "a", (0, 0, [ACCEPT]))
    assert p.start_offset == 2 and p.in_flight_count == 0
    # a marker fetched with data: acquired with it, as Kafka does (the client acknowledges it as a GAP)
    got = acquire(p, "a", [LogBatch(2, 2, producer_id=1, is_transactional=True, is_control=True), LogBatch(3, 4)])
    assert got == [AcquiredRange(2, 4, 1)]


# -- the persisted form ---------------------------------------------------------------------------


def test_state_changes_hold_only_the_changed_ranges_merged():
    p = SharePartition(0)
    acquire(p, "a", log(20))
    change = ack(p, "a", (5, 7, [ACCEPT]), (8, 9, [ACCEPT]), (12, 12, [RELEASE]), (13, 13, [RELEASE]))
    assert change == StateChange(0, (StateBatch(5, 9, 2, 1), StateBatch(12, 13, 0, 1)), 5)


def test_snapshot_and_restore():
    p = SharePartition(0)
    acquire(p, "a", log(10))
    ack(p, "a", (1, 2, [ACCEPT]), (3, 3, [RELEASE]), (4, 4, [REJECT]))
    acquire(p, "b", log(10))                              # 3 again, count 2
    snap = p.snapshot()
    assert snap == StateChange(0, (
        StateBatch(0, 0, 0, 0), StateBatch(1, 2, 2, 1), StateBatch(3, 3, 0, 1), StateBatch(4, 4, 4, 1),
        StateBatch(5, 9, 0, 0)), 3)
    q = SharePartition(snap.start_offset, batches=snap.batches)
    assert q.snapshot() == snap
    assert (q.start_offset, q.end_offset, q.in_flight_count, q.delivery_complete_count) == (0, 9, 10, 3)
    # The restored partition holds the acquired record at its last durable count (3: AVAILABLE,
    # count 1), and the live one, once its sessions closed, at the delivery counted (count 2).
    p.release_member("a", delivery_limit=LIMIT)
    p.release_member("b", delivery_limit=LIMIT)
    assert q.state_of(3)[:2] == (RecordState.AVAILABLE, 1) and p.state_of(3)[:2] == (RecordState.AVAILABLE, 2)
    assert acquire(q, "c", log(10)) == [AcquiredRange(0, 0, 1), AcquiredRange(3, 3, 2), AcquiredRange(5, 9, 1)]


def test_restore_fills_gaps_and_refuses_batches_before_the_start():
    q = SharePartition(10, batches=[StateBatch(14, 15, 2, 1), StateBatch(8, 11, 0, 2)])
    assert (q.start_offset, q.end_offset, q.in_flight_count) == (10, 15, 6)
    assert states(q, 10, 15) == [(0, 2), (0, 2), (0, 0), (0, 0), (2, 1), (2, 1)]
    assert q.delivery_complete_count == 2
    assert acquire(q, "a", log(10, start=10)) == [AcquiredRange(10, 11, 3), AcquiredRange(12, 13, 1),
                                                  AcquiredRange(16, 19, 1)]
    with pytest.raises(ValueError):
        SharePartition(10, batches=[StateBatch(0, 9, 2, 1)])
    with pytest.raises(ValueError):
        SharePartition(0, batches=[StateBatch(0, 3, 1, 1)])
    with pytest.raises(ValueError):
        SharePartition(0, batches=[StateBatch(0, 3, 0, 1), StateBatch(3, 4, 0, 1)])
    done = SharePartition(0, batches=[StateBatch(0, 4, 2, 1)])
    assert (done.start_offset, done.end_offset, done.in_flight_count) == (5, 5, 0)


# -- properties -----------------------------------------------------------------------------------

LOG = log(*([3, 1, 4, 2, 5] * 40))
MAX_BATCH = 5
MEMBERS = ("m1", "m2", "m3")

ACQUIRE = st.tuples(st.just("acquire"), st.sampled_from(MEMBERS), st.integers(1, 12), st.integers(1, 8),
                    st.booleans())
ACK = st.tuples(st.just("ack"), st.sampled_from(MEMBERS), st.integers(0, 50), st.integers(1, 6),
                st.lists(st.sampled_from([0, 1, 2, 2, 2, 3, 4]), min_size=1, max_size=6))
op = st.one_of(
    ACQUIRE, ACK, ACQUIRE, ACK,
    st.tuples(st.just("wild_ack"), st.sampled_from(MEMBERS), st.integers(0, 60), st.integers(0, 4),
              st.sampled_from([0, 1, 2, 3, 4])),
    st.tuples(st.just("release"), st.sampled_from(MEMBERS)),
    st.tuples(st.just("tick"), st.integers(0, 2 * LOCK)),
    st.tuples(st.just("move_start"), st.integers(0, 6)),
)


def persisted_view(p: SharePartition) -> dict[int, tuple[int, int]]:
    """What the snapshot says of each in-flight offset."""
    out = {}
    for b in p.snapshot().batches:
        for o in range(b.first_offset, b.last_offset + 1):
            out[o] = (b.state, b.delivery_count)
    return out


def check(p: SharePartition, max_in_flight: int, limit: int, seen_done: dict[int, int]) -> None:
    recs = {o: p.state_of(o) for o in range(p.start_offset, p.end_offset + 1)} if p.in_flight_count else {}
    assert len(p._records) == p.in_flight_count == len(recs)
    assert all(s is not None for s in recs.values())
    assert p.in_flight_count <= max_in_flight + MAX_BATCH - 1
    if recs:
        assert recs[p.start_offset][0] not in (ACKNOWLEDGED, ARCHIVED)
    else:
        assert p.end_offset == p.start_offset
    done = 0
    for o, (state, count, member, _deadline) in recs.items():
        assert 0 <= count <= limit
        assert (member is not None) == (state is ACQUIRED)
        if state is AVAILABLE:
            assert count < limit
        if state in (ACKNOWLEDGED, ARCHIVED):
            done += 1
            assert seen_done.setdefault(o, state) == state      # done records never change
        else:
            assert o not in seen_done
    assert done == p.delivery_complete_count
    # Snapshot and restore: the same partition, an ACQUIRED record as its last durable value.
    snap = p.snapshot()
    q = SharePartition(snap.start_offset, max_in_flight=max_in_flight, batches=snap.batches)
    assert (q.start_offset, q.in_flight_count, q.delivery_complete_count) == (
        p.start_offset, p.in_flight_count, p.delivery_complete_count)
    for o, (state, count, _m, _d) in recs.items():
        expect = (AVAILABLE, count - 1) if state is ACQUIRED else (state, count)
        assert q.state_of(o)[:2] == expect


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op, min_size=15, max_size=60), max_in_flight=st.sampled_from([8, 20, 1000]),
       limit=st.sampled_from([2, 3]))
def test_random_members_keep_the_invariants(ops, max_in_flight, limit):
    p = SharePartition(0, max_in_flight=max_in_flight)
    now = 0
    seen_done: dict[int, int] = {}
    persisted: dict[int, tuple[int, int]] = {}            # the StateChanges folded, as a coordinator
    spso = p.start_offset

    def fold(change: StateChange | None) -> None:
        if change is None:
            return
        for b in change.batches:
            assert b.state in (0, 2, 4) and b.first_offset >= change.start_offset
            for o in range(b.first_offset, b.last_offset + 1):
                persisted[o] = (b.state, b.delivery_count)
        assert change.start_offset == p.start_offset
        assert change.delivery_complete_count == p.delivery_complete_count

    for o in ops:
        kind = o[0]
        if kind == "acquire":
            _, member, max_records, batch_size, record_limit = o
            before = {x: p.state_of(x) for x in range(p.start_offset, p.end_offset + 1)}
            got = p.acquire(member, from_offset(LOG, p.next_fetch_offset()), max_records=max_records,
                            batch_size=batch_size, now_ms=now, lock_ms=LOCK, delivery_limit=limit,
                            record_limit=record_limit)
            n = 0
            for r in got:
                for x in range(r.first_offset, r.last_offset + 1):
                    n += 1
                    assert before.get(x) is None or before[x][0] is AVAILABLE   # never taken twice
                    assert p.state_of(x)[:3] == (ACQUIRED, r.delivery_count, member)
            if record_limit:
                assert n <= max_records
        elif kind in ("ack", "wild_ack"):
            if kind == "ack":
                _, member, pick, length, types = o
                held = [x for x in range(p.start_offset, p.end_offset + 1)
                        if p.in_flight_count and p.state_of(x)[2] == member]
                if not held:
                    continue
                first = held[pick % len(held)]
                last = first
                while last + 1 in held and last - first + 1 < length:
                    last += 1
                types = types[:1] if len(types) == 1 else (types * 6)[:last - first + 1]
            else:
                _, member, first, width, t = o
                last, types = first + width, [t]
            before = full(p)
            try:
                fold(p.acknowledge(member, [(first, last, types)], now_ms=now, lock_ms=LOCK,
                                   delivery_limit=limit))
            except ShareStateError:
                assert kind == "wild_ack" and full(p) == before
        elif kind == "release":
            fold(p.release_member(o[1], delivery_limit=limit))
        elif kind == "tick":
            now += o[1]
            fold(p.expire(now, delivery_limit=limit))
            assert p.next_deadline_ms() is None or p.next_deadline_ms() > now
        else:
            p.move_start(p.start_offset + o[1])
        assert p.start_offset >= spso
        spso = p.start_offset
        check(p, max_in_flight, limit, seen_done)
        # The StateChanges written so far are the persisted state (absent: never written).
        view = persisted_view(p)
        for x in range(p.start_offset, p.end_offset + 1) if p.in_flight_count else ():
            assert persisted.get(x, (0, 0)) == view[x], x



def test_lock_deadlines_come_from_a_heap_that_stays_bounded_and_skips_stale_entries():
    """next_deadline_ms and expire see only live locks: renewed and acknowledged records leave
    stale heap entries that are skipped, the heap is rebuilt before it outgrows the records, and a
    lock pushed twice (acquired again in the same millisecond) expires once."""
    def take(p, member, batches, now):
        return p.acquire(member, batches, max_records=500, batch_size=500, now_ms=now, lock_ms=1000,
                         delivery_limit=5)

    def acks(p, member, now, *ranges):
        return p.acknowledge(member, list(ranges), now_ms=now, lock_ms=1000, delivery_limit=5)

    p = SharePartition(0, max_in_flight=10_000)
    assert take(p, "a", log(100), 0) == [AcquiredRange(0, 99, 1)] and p.next_deadline_ms() == 1000
    for now in range(1, 51):  # renew everything again and again: stale entries pile up, then a rebuild
        acks(p, "a", now, (0, 99, [4]))
        assert len(p._locks) <= 2 * p.in_flight_count + 64
    assert p.next_deadline_ms() == 1050
    acks(p, "a", 60, (0, 49, [ACCEPT]))
    assert p.expire(1049, delivery_limit=5) is None
    assert p.expire(1050, delivery_limit=5).batches == (StateBatch(50, 99, 0, 1),)
    assert p.next_deadline_ms() is None
    q = SharePartition(0)
    take(q, "a", log(1), 0)
    assert q.expire(1000, delivery_limit=5) is not None
    take(q, "b", log(1), 0)  # the same deadline again: (1000, 0) is in the heap twice
    assert q.expire(1000, delivery_limit=5).batches == (StateBatch(0, 0, 0, 2),)
