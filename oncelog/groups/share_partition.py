"""A share partition (KIP-932): the in-flight records of one share group on one topic-partition,
as Kafka's ``SharePartition`` and ``InFlightState`` keep them on the partition's leader.
Sans-IO and clock-free: the fetch path hands in the log batches it read, the timer hands in
``now_ms``, and every change that must be durable before it is answered comes back as a
:class:`StateChange` (Kafka's WriteShareGroupState: SPSO, the changed ranges, the
delivery-complete count) for :mod:`oncelog.groups.share_state` to write.

Offsets: the **SPSO** (``start_offset``) — everything before it is done or never to be read; the
**SPEO** (``end_offset``) — the last offset handed out so far, or the SPSO itself when nothing is
in flight (Kafka's ``endOffset``); ``in_flight_count`` is ``SPEO - SPSO + 1`` or 0.

Record states and their one-way transitions (Kafka's RecordState and ``tryUpdateState``);
``count`` is the delivery count, ``limit`` the group's ``delivery.count.limit``::

    from       event                              to                           count
    ---------  ---------------------------------  ---------------------------  ------
    AVAILABLE  acquire (fetch)                    ACQUIRED (owner, deadline)    +1
    AVAILABLE  acquire, count >= limit [U]        ARCHIVED                      =
    AVAILABLE  before the fetched data / log start  ARCHIVED                    =
    ACQUIRED   ack ACCEPT (1)                     ACKNOWLEDGED                  =
    ACQUIRED   ack RELEASE (2)                    AVAILABLE, ARCHIVED at limit  =
    ACQUIRED   ack REJECT (3) or GAP (0)          ARCHIVED                      =
    ACQUIRED   ack RENEW (4)                      ACQUIRED, new deadline        =
    ACQUIRED   lock expired (``expire``)          AVAILABLE, ARCHIVED at limit  =
    ACQUIRED   session closed (``release_member``)  AVAILABLE                   -1
    ACQUIRED   read_committed, aborted txn        ARCHIVED (not handed out)     =
    ACQUIRED   only transaction markers acquired  ARCHIVED (not handed out)     =
    ACKNOWLEDGED, ARCHIVED: final (done)

Invariants (checked by the property tests): a record is ACQUIRED by at most one member; done
records never change; the SPSO only moves forward and always sits on a record that is not done
(leading done records are dropped at once, so memory is bounded by the records in flight);
while anything is in flight every offset of ``[SPSO, SPEO]`` has a record; the in-flight count
exceeds ``max_in_flight`` by less than one log batch (Kafka's ``max_records`` is soft: whole log
batches; offsets missing from the log just before a fetched batch also count); after ``expire`` or a RELEASE no record is AVAILABLE at or above the limit.

Representation and cost: one small object per in-flight offset in a dict (at most
``max_in_flight`` plus one log batch, Kafka's range 100..10000). ``acquire`` is O(records
fetched + in flight); ``acknowledge`` O(offsets acknowledged); ``next_deadline_ms`` (asked by
every 100 ms tick) and ``expire`` O(log n) per lock set or expired, from a heap of (deadline,
offset) entries checked against the record when they reach its top (an entry whose record was
acknowledged, renewed or dropped is stale and skipped; the heap is rebuilt from the records when
stale entries outnumber them, so it stays O(in flight)); ``release_member``,
``next_fetch_offset`` and ``snapshot`` O(in flight).

Choices where Kafka's behaviour was not verified ([U]), the simplest consistent one:

* ``acknowledge`` does not look at lock deadlines: the caller runs :meth:`expire` first (Kafka's
  timer fires on its own);
* an AVAILABLE record whose count already reached the limit (the limit was lowered) is ARCHIVED
  when a fetch reaches it instead of being delivered again;
* ``move_start`` drops ACQUIRED records below the new SPSO at once (Kafka leaves them to their
  timer, which only archives them; acknowledgements below the SPSO are ignored either way);
* the poison-record throttling of Kafka's trunk (fewer records per fetch near the limit) is not
  done: every acquirable record of the fetched batches is acquired;
* **by design, not Kafka's:** an acquisition that would hold only transaction markers (control
  records: a marker whose transaction's data was fetched earlier, or an ABORT marker after its
  archived data) archives them instead of handing them out. Kafka 4.4 acquires and sends such a
  lone marker (the conformance scenario sf_read_committed_abort_marker) and waits for the client's
  GAP acknowledgement, which librdkafka's share consumer (2.16) never sends for a fetch without a
  data record: the SPSO then stays on the marker through every lock timeout up to the delivery
  limit, and the partition stalls once its in-flight records reach the limit (found by the chaos
  run's share workload). Markers fetched with data are acquired as Kafka does;
* acknowledgement types: one for the range or at least one per offset (extra ones ignored, as
  Kafka's map keyed by offset does); fewer, or ``first > last``, is INVALID_REQUEST;
* nothing is written on ``acquire`` (as Kafka) — nor for the records archived by a fetch
  (aborted transactions, compacted-away offsets) or by ``move_start``: they are archived again
  after a restart, when the fetch reads them again;
* a persisted ACQUIRED record is its last durable value: AVAILABLE with the count before this
  acquisition (``snapshot``), so a restart redelivers it at the same count, as Kafka does.
"""

from __future__ import annotations

import enum
import heapq
from dataclasses import dataclass
from typing import Iterable, Sequence

from kio.schema.errors import ErrorCode


class RecordState(enum.IntEnum):
    """Kafka's RecordState; 0, 2 and 4 are persisted, ACQUIRED never is."""
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AckType(enum.IntEnum):
    """Kafka's AcknowledgeType (RENEW: v2, KIP-1222)."""
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


_DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
_ACK_STATE = {AckType.GAP: RecordState.ARCHIVED, AckType.ACCEPT: RecordState.ACKNOWLEDGED,
              AckType.RELEASE: RecordState.AVAILABLE, AckType.REJECT: RecordState.ARCHIVED}

MSG_NOT_FOUND = "Batch record not found. The request batch offsets are not found in the cache."
MSG_FIRST_PAST = "Batch record not found. The first offset in request is past acquired records."
MSG_LAST_PAST = "Batch record not found. The last offset in request is past acquired records."
MSG_INVALID_TYPE = "Invalid acknowledge type: {}"
MSG_NOT_ACQUIRED = "The offset cannot be acknowledged. The offset is not acquired."  # Kafka 4.4, per offset
MSG_NOT_OWNER = "Member is not the owner of offset"


@dataclass(frozen=True)
class LogBatch:
    """A record batch header the fetch read from the log."""
    base_offset: int
    last_offset: int
    producer_id: int = -1
    is_transactional: bool = False
    is_control: bool = False


@dataclass(frozen=True)
class AcquiredRange:
    """ShareFetch's AcquiredRecords."""
    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True)
class StateBatch:
    """A persisted range (ShareSnapshot/ShareUpdate StateBatches); ``state`` is 0, 2 or 4."""
    first_offset: int
    last_offset: int
    state: int
    delivery_count: int


@dataclass(frozen=True)
class StateChange:
    """What must be durable before an acknowledgement is answered: the SPSO after the change,
    the ranges that changed (merged), the done records at or after the SPSO."""
    start_offset: int
    batches: tuple[StateBatch, ...]
    delivery_complete_count: int


class ShareStateError(Exception):
    """An acknowledgement refused; ``code`` is the partition's error, ``message`` Kafka's."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message


class _Record:
    __slots__ = ("state", "count", "member", "deadline")

    def __init__(self, state: RecordState, count: int) -> None:
        self.state = state
        self.count = count
        self.member: str | None = None
        self.deadline = 0


def _merge(items: Iterable[tuple[int, int, int]]) -> tuple[StateBatch, ...]:
    """(offset, state, count) in offset order -> ranges of equal state and count."""
    out: list[StateBatch] = []
    for offset, state, count in items:
        last = out[-1] if out else None
        if last and last.last_offset + 1 == offset and (last.state, last.delivery_count) == (state, count):
            out[-1] = StateBatch(last.first_offset, offset, state, count)
        else:
            out.append(StateBatch(offset, offset, state, count))
    return tuple(out)


class SharePartition:
    """One share partition's in-flight records (see the module docstring)."""

    def __init__(self, start_offset: int, *, max_in_flight: int = 2000,
                 batches: Iterable[StateBatch] = ()) -> None:
        """A new partition at ``start_offset``, or one restored from its persisted state (Kafka's
        ``maybeInitialize``): each batch's records with their state and count, no owner and no
        deadline; offsets between batches (Kafka's gap window, fetched again) AVAILABLE with
        count 0; a batch wholly before the start is refused (Kafka's IllegalStateException),
        one across it cut at the start."""
        self.max_in_flight = max_in_flight
        self.start_offset = start_offset
        self.end_offset = start_offset
        self._records: dict[int, _Record] = {}
        self._done = 0
        self._locks: list[tuple[int, int]] = []              # heap of (deadline, offset), some stale
        for b in sorted(batches, key=lambda b: b.first_offset):
            if b.last_offset < start_offset:
                raise ValueError(f"state batch {b} is before the start offset {start_offset}")
            if b.state not in (0, 2, 4) or b.first_offset > b.last_offset or b.delivery_count < 0:
                raise ValueError(f"invalid state batch {b}")
            first = max(b.first_offset, start_offset)
            if self._records and first <= self.end_offset:
                raise ValueError(f"overlapping state batch {b}")
            gap_from = self.end_offset + 1 if self._records else start_offset
            for offset in range(gap_from, first):
                self._records[offset] = _Record(RecordState.AVAILABLE, 0)
            for offset in range(first, b.last_offset + 1):
                self._put(offset, _Record(RecordState(b.state), b.delivery_count))
            self.end_offset = b.last_offset
        self._advance()

    # -- offsets and counts ------------------------------------------------------------------

    @property
    def in_flight_count(self) -> int:
        return len(self._records)

    @property
    def delivery_complete_count(self) -> int:
        return self._done

    def next_fetch_offset(self) -> int:
        """The first AVAILABLE offset, else SPEO + 1; the SPEO itself when nothing is in flight."""
        if not self._records:
            return self.end_offset
        for offset in range(self.start_offset, self.end_offset + 1):
            if self._records[offset].state is RecordState.AVAILABLE:
                return offset
        return self.end_offset + 1

    def can_acquire(self) -> bool:
        """Kafka's ``canAcquireRecords``: something to redeliver, or room for more."""
        return (self.next_fetch_offset() != self.end_offset + 1
                or self.in_flight_count < self.max_in_flight)

    def next_deadline_ms(self) -> int | None:
        """The earliest lock deadline of an ACQUIRED record, None when none is acquired."""
        locks = self._locks
        while locks and not self._holds(*locks[0]):
            heapq.heappop(locks)
        return locks[0][0] if locks else None

    def _holds(self, deadline: int, offset: int) -> bool:
        r = self._records.get(offset)
        return r is not None and r.state is RecordState.ACQUIRED and r.deadline == deadline

    def _lock(self, offset: int, record: _Record, deadline: int) -> None:
        record.deadline = deadline
        heapq.heappush(self._locks, (deadline, offset))
        if len(self._locks) > 2 * len(self._records) + 64:  # mostly stale: rebuild from the records
            self._locks = [(r.deadline, o) for o, r in self._records.items() if r.state is RecordState.ACQUIRED]
            heapq.heapify(self._locks)

    def state_of(self, offset: int) -> tuple[RecordState, int, str | None, int] | None:
        """(state, delivery count, owner, lock deadline) of an in-flight offset, else None."""
        r = self._records.get(offset)
        return None if r is None else (r.state, r.count, r.member, r.deadline)

    # -- acquire -------------------------------------------------------------------------------

    def acquire(self, member_id: str, batches: Sequence[LogBatch], *, max_records: int,
                batch_size: int, now_ms: int, lock_ms: int, delivery_limit: int,
                aborted: Sequence[tuple[int, int]] = (), record_limit: bool = False,
                ) -> list[AcquiredRange]:
        """Acquire for ``member_id`` the acquirable records of ``batches`` (read from
        :meth:`next_fetch_offset` on): AVAILABLE ones in flight and new ones past the SPEO, up to
        ``max_records`` and the room left under ``max_in_flight`` — a soft limit, extended to the
        end of the log batch it falls in, unless ``record_limit`` (Kafka's RECORD_LIMIT mode:
        exactly that many; the rest of the log batch stays AVAILABLE in flight). At the in-flight
        limit only records already in flight are redelivered. The acquired ranges are split at
        log-batch boundaries once they hold ``batch_size`` records. ``aborted`` holds the
        (producer id, first offset) of aborted transactions (read_committed): their data records
        are ARCHIVED and left out of the result. Writes nothing (as Kafka)."""
        if not batches or max_records <= 0:
            return []
        fetch_offset = self.next_fetch_offset()
        limit = min(max_records, self.max_in_flight - self.in_flight_count)
        cap: int | None = None
        if limit <= 0:
            if not self._records or fetch_offset > self.end_offset:
                return []
            limit = min(max_records, self.end_offset - fetch_offset + 1)
            cap = self.end_offset
        first = batches[0].base_offset
        # Compacted away: AVAILABLE records between the fetch offset and the first batch read.
        for offset in range(max(fetch_offset, self.start_offset), min(first, self.end_offset + 1)):
            self._archive_if_available(offset)
        if not self._records and first > self.start_offset:
            self.start_offset = self.end_offset = first      # never to be read
        aborted_txns = sorted(aborted, key=lambda a: a[1])
        aborting: set[int] = set()
        deadline = now_ms + lock_ms
        taken = 0
        acquired: list[int] = []
        markers: set[int] = set()                            # acquired offsets of control batches
        boundaries: set[int] = set()                         # last offsets of log batches
        seg_first = first
        done = False
        for batch in batches:
            while aborted_txns and aborted_txns[0][1] <= batch.last_offset:
                aborting.add(aborted_txns.pop(0)[0])
            abort = False
            if batch.is_control:
                aborting.discard(batch.producer_id)
            elif batch.is_transactional and batch.producer_id in aborting:
                abort = True
            for offset in range(max(seg_first, self.start_offset), batch.last_offset + 1):
                if cap is not None and offset > cap:
                    done = True
                    break
                record = self._records.get(offset)
                if record is None:
                    if self._records and offset > self.end_offset + 1:
                        for hole in range(self.end_offset + 1, offset):   # not in the log
                            self._new(hole, RecordState.ARCHIVED, 0)
                    record = self._new(offset, RecordState.AVAILABLE, 0)
                if record_limit and taken >= limit or record.state is not RecordState.AVAILABLE:
                    continue                                 # RECORD_LIMIT: the rest stays AVAILABLE
                if record.count >= delivery_limit:
                    self._set(record, RecordState.ARCHIVED)
                    continue
                taken += 1
                record.count += 1
                if abort:
                    self._set(record, RecordState.ARCHIVED)
                    continue
                self._set(record, RecordState.ACQUIRED)
                record.member = member_id
                self._lock(offset, record, deadline)
                acquired.append(offset)
                if batch.is_control:
                    markers.add(offset)
            boundaries.add(batch.last_offset)
            seg_first = batch.last_offset + 1
            if done or taken >= limit:
                break
        if acquired and len(markers) == len(acquired):
            # Transaction markers alone: archived, not handed out (see the module docstring).
            for offset in acquired:
                record = self._records[offset]
                record.count -= 1
                self._set(record, RecordState.ARCHIVED)
            acquired = []
        self._advance()
        return self._ranges(acquired, boundaries, batch_size)

    def _ranges(self, offsets: list[int], boundaries: set[int], batch_size: int) -> list[AcquiredRange]:
        out: list[AcquiredRange] = []
        first = prev = None
        for offset in offsets + [None]:                      # type: ignore[list-item]
            if prev is not None and (offset is None or offset != prev + 1
                                     or self._records[offset].count != self._records[prev].count
                                     or prev in boundaries and prev - first + 1 >= batch_size):
                out.append(AcquiredRange(first, prev, self._records[prev].count))
                first = None
            if first is None:
                first = offset
            prev = offset
        return out

    # -- acknowledge ---------------------------------------------------------------------------

    def acknowledge(self, member_id: str, acks: Sequence[tuple[int, int, Sequence[int]]], *,
                    now_ms: int, lock_ms: int, delivery_limit: int) -> StateChange:
        """Apply ``member_id``'s acknowledgements (first, last inclusive, one type for the range
        or one per offset), all or none: the first refused one raises :class:`ShareStateError`
        and nothing has changed. Offsets before the SPSO are ignored. RENEW restarts the lock
        (``now_ms + lock_ms``) and writes nothing; the rest is returned to be made durable."""
        plan: dict[int, int] = {}                            # offset -> ack type, checked
        previous_last = -1
        for first, last, types in acks:
            if first > last or not types or 1 < len(types) < last - first + 1:
                raise ShareStateError(ErrorCode.invalid_request, "Invalid acknowledgement batch")
            if first < previous_last:  # Kafka 4.4: INVALID_REQUEST (no message), nothing applied
                raise ShareStateError(ErrorCode.invalid_request,
                                      "Acknowledgement batches must be in offset order")
            previous_last = last
            for t in types:
                if t not in AckType._value2member_map_:
                    raise ShareStateError(ErrorCode.invalid_request, MSG_INVALID_TYPE.format(t))
            if last < self.start_offset:
                continue
            if not self._records:
                raise ShareStateError(ErrorCode.invalid_record_state, MSG_NOT_FOUND)
            if first > self.end_offset:
                raise ShareStateError(ErrorCode.invalid_request, MSG_FIRST_PAST)
            if last > self.end_offset:
                raise ShareStateError(ErrorCode.invalid_request, MSG_LAST_PAST)
            for offset in range(max(first, self.start_offset), last + 1):
                record = self._records[offset]
                if offset in plan or record.state is not RecordState.ACQUIRED:
                    raise ShareStateError(ErrorCode.invalid_record_state, MSG_NOT_ACQUIRED)
                if record.member != member_id:
                    raise ShareStateError(ErrorCode.invalid_record_state, MSG_NOT_OWNER)
                plan[offset] = types[0] if len(types) == 1 else types[offset - first]
        changed: list[int] = []
        for offset, ack in plan.items():
            record = self._records[offset]
            if ack == AckType.RENEW:
                self._lock(offset, record, now_ms + lock_ms)
                continue
            state = _ACK_STATE[AckType(ack)]
            if state is RecordState.AVAILABLE and record.count >= delivery_limit:
                state = RecordState.ARCHIVED
            self._set(record, state)
            changed.append(offset)
        return self._change(changed)

    # -- release, expiry, log start ------------------------------------------------------------

    def release_member(self, member_id: str, *, delivery_limit: int) -> StateChange | None:
        """The member's share session closed: its ACQUIRED records become AVAILABLE, the delivery
        counted (Kafka 4.4 redelivers them at the next count: the conformance scenarios
        sa_final_epoch_releases and sf_final_epoch_with_acks), ARCHIVED once the count reached
        ``delivery_limit``, as an explicit RELEASE. None when it held nothing."""
        changed = [o for o, r in self._records.items()
                   if r.state is RecordState.ACQUIRED and r.member == member_id]
        for offset in changed:
            record = self._records[offset]
            self._set(record, RecordState.ARCHIVED if record.count >= delivery_limit else RecordState.AVAILABLE)
        return self._change(sorted(changed)) if changed else None

    def expire(self, now_ms: int, *, delivery_limit: int) -> StateChange | None:
        """Locks whose deadline is ``<= now_ms``: AVAILABLE, or ARCHIVED once the count reached
        the limit; the count is unchanged. None when no lock expired."""
        expired = set()  # a set: the same lock may have been pushed twice (acquired again in the same ms)
        locks = self._locks
        while locks and locks[0][0] <= now_ms:
            deadline, offset = heapq.heappop(locks)
            if self._holds(deadline, offset):
                expired.add(offset)
        changed = sorted(expired)
        for offset in changed:
            record = self._records[offset]
            self._set(record, RecordState.ARCHIVED if record.count >= delivery_limit
                      else RecordState.AVAILABLE)
        return self._change(sorted(changed)) if changed else None

    def move_start(self, log_start_offset: int) -> None:
        """The log start passed the SPSO (Kafka's ``updateCacheAndOffsets``): the records before
        it are gone (AVAILABLE ones archived, ACQUIRED ones dropped — see [U] above), the SPSO
        moves to it. Nothing is written now (Kafka writes it with the next change)."""
        if log_start_offset <= self.start_offset:
            return
        if not self._records:
            self.start_offset = self.end_offset = log_start_offset
            return
        for offset in range(self.start_offset, min(log_start_offset, self.end_offset + 1)):
            self._drop(offset)
        self.start_offset = log_start_offset
        self.end_offset = max(self.end_offset, log_start_offset)
        self._advance()

    # -- persisted form ------------------------------------------------------------------------

    def snapshot(self) -> StateChange:
        """The whole persisted state (a ShareSnapshot): every in-flight record, an ACQUIRED one
        as its last durable value (AVAILABLE, the count before this acquisition)."""
        items = []
        for offset in range(self.start_offset, self.end_offset + 1) if self._records else ():
            r = self._records[offset]
            if r.state is RecordState.ACQUIRED:
                items.append((offset, int(RecordState.AVAILABLE), r.count - 1))
            else:
                items.append((offset, int(r.state), r.count))
        return StateChange(self.start_offset, _merge(items), self._done)

    # -- internals -----------------------------------------------------------------------------

    def _put(self, offset: int, record: _Record) -> None:
        self._records[offset] = record
        self._done += record.state in _DONE

    def _new(self, offset: int, state: RecordState, count: int) -> _Record:
        record = _Record(state, count)
        self._put(offset, record)
        if offset > self.end_offset or len(self._records) == 1:
            self.end_offset = offset
        return record

    def _drop(self, offset: int) -> None:
        record = self._records.pop(offset)
        self._done -= record.state in _DONE

    def _set(self, record: _Record, state: RecordState) -> None:
        self._done += (state in _DONE) - (record.state in _DONE)
        record.state = state
        if state is not RecordState.ACQUIRED:
            record.member, record.deadline = None, 0

    def _archive_if_available(self, offset: int) -> None:
        record = self._records.get(offset)
        if record is not None and record.state is RecordState.AVAILABLE:
            self._set(record, RecordState.ARCHIVED)

    def _advance(self) -> None:
        """Move the SPSO past the leading done records and forget them; when everything in
        flight is done, SPSO = SPEO = the next offset and nothing is in flight."""
        if not self._records:
            return
        while self.start_offset <= self.end_offset:
            record = self._records.get(self.start_offset)
            if record is None or record.state not in _DONE:
                break
            self._drop(self.start_offset)
            self.start_offset += 1
        if not self._records:
            self.end_offset = self.start_offset

    def _change(self, changed: list[int]) -> StateChange:
        self._advance()
        items = ((o, int(self._records[o].state), self._records[o].count)
                 for o in changed if o in self._records)
        return StateChange(self.start_offset, _merge(items), self._done)
