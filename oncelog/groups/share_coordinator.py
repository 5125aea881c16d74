"""Share groups on one broker (KIP-932): the front the handlers talk to. It holds the share
groups' membership (:mod:`.share_group`), the share sessions (:mod:`.share_sessions`), the share
partitions this node leads (:mod:`.share_partition`) and their persisted state
(:mod:`.share_state`), and does the share fetch's reading: from a share partition's next fetch
offset, whole log batches up to the high watermark (``read_uncommitted``) or the last stable
offset (``read_committed``, aborted transactions archived), acquired for the fetching member.

A share partition (group id, topic id, partition) is made on its first fetch, from its persisted
state if it has one, else at ``share.auto.offset.reset`` (``latest``: the high watermark;
``earliest``: the log start; ``by_duration:D``: the first offset at or after now - D, else the
high watermark). Every acknowledgement, release and lock expiry writes the share partition's
whole state (:mod:`.share_state`); an acknowledgement is answered once that write is durable
(``on_done``). A write that fails is answered as an error (UNKNOWN_SERVER_ERROR, as Kafka maps a
persister failure it cannot name) while the state in memory keeps the change: after a crash the
durable state is the older one, so records are delivered again (never lost).

Timers: :meth:`tick` (the broker's 100 ms tick) expires locks and members. Waiting fetches are
woken (:meth:`wake`) when records become available again (release, expiry, RELEASE); new data
wakes them through the partition logs' own waiters.

Bounds: one share partition per (group, partition) fetched, each holding at most
``share.partition.max.record.locks`` records in flight (plus one log batch); sessions at most
``group.share.max.share.sessions``; members per group ``group.share.max.size``.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from dataclasses import dataclass, field
from typing import Callable, Mapping

from .. import errors
from ..cluster import Placement
from ..errors import KafkaError
from ..partition.manager import PartitionManager
from ..protocol import records as rb
from .share_group import MAX_SIZE, ShareGroups
from .share_partition import AcquiredRange, LogBatch, SharePartition, ShareStateError, StateChange
from .share_sessions import DEFAULT_MAX_SHARE_SESSIONS, ShareSessions
from .share_state import Key, ShareStateTopic, storage_error

log = logging.getLogger("oncelog.groups")

PRUNE_INTERVAL_MS = 10_000  # how often share partitions of deleted topics are looked for
STATE_PARTITIONS = 16  # __share_group_state: at least one partition per node of a cluster (<= 16)


@dataclass
class PartitionFetch:
    """One partition of a ShareFetch answer."""

    error: KafkaError | None = None
    records: bytes | None = None
    acquired: list[AcquiredRange] = field(default_factory=list)


class ShareCoordinator:
    def __init__(self, partitions: PartitionManager, clock: Callable[[], int], placement: Placement,
                 topics: Callable[[], Mapping[str, tuple]], settings: Callable[[str], Mapping[str, object]],
                 other_type: Callable[[str], str | None],
                 topic_ids: Callable[[], set] | None = None, *, max_size: int = MAX_SIZE,
                 max_sessions: int = DEFAULT_MAX_SHARE_SESSIONS) -> None:
        """``topics()``: the topics a share group may subscribe to, name -> (topic id, partition
        count); ``topic_ids()``: the ids of every topic now, internal ones included;
        ``max_size``, ``max_sessions``: the broker's group.share.max.size and
        group.share.max.share.sessions."""
        self.partitions = partitions
        self.clock = clock
        self.settings = settings
        self.topic_ids = topic_ids or (lambda: {tid for tid, _n in topics().values()})
        self._pruned_at = 0
        self.groups = ShareGroups(clock, topics, settings, other_type, max_size=max_size)
        self.sessions = ShareSessions(max_sessions)
        self.state = ShareStateTopic(partitions, STATE_PARTITIONS, placement)
        self._persisted: dict[Key, object] = self.state.replay()  # read once, used at first fetch
        self.shares: dict[Key, SharePartition] = {}
        self._waiters: list[asyncio.Future] = []

    # ------------------------------------------------------------------ share partitions

    def share_partition(self, group_id: str, name: str, topic_id: uuid.UUID, index: int) -> SharePartition:
        """The share partition, made on first use (module docstring); the data partition must
        be led here (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION otherwise)."""
        key = (group_id, topic_id, index)
        sp = self.shares.get(key)
        partition = self.partitions.get(name, index)
        settings = self.settings(group_id)
        if sp is None:
            plog = partition.log
            state = self._persisted.pop(key, None)
            limit = int(settings["share.partition.max.record.locks"])
            if state is not None and state.start_offset >= 0:
                sp = SharePartition(max(state.start_offset, plog.log_start_offset), max_in_flight=limit,
                                    batches=[b for b in state.batches if b.last_offset >= plog.log_start_offset])
            else:
                sp = SharePartition(self._initial_offset(plog, str(settings["share.auto.offset.reset"])),
                                    max_in_flight=limit)
            self.shares[key] = sp
        sp.max_in_flight = int(settings["share.partition.max.record.locks"])
        sp.move_start(partition.log.log_start_offset)
        return sp

    def _initial_offset(self, plog, reset: str) -> int:
        if reset == "earliest":
            return plog.log_start_offset
        if reset.startswith("by_duration:"):
            found = plog.offset_for_timestamp(self.clock() - _duration_ms(reset[len("by_duration:"):]))
            return found[0] if found is not None else plog.high_watermark
        return plog.high_watermark

    # ------------------------------------------------------------------ fetch

    def fetch(self, group_id: str, member_id: str, name: str, topic_id: uuid.UUID, index: int, *,
              max_records: int, batch_size: int, max_bytes: int, record_limit: bool = False) -> PartitionFetch:
        """Read and acquire for one partition of a ShareFetch (the handler keeps the request's
        ``max_records`` and ``max_bytes`` budgets across partitions)."""
        try:
            sp = self.share_partition(group_id, name, topic_id, index)
        except KafkaError as exc:
            return PartitionFetch(exc)
        settings = self.settings(group_id)
        if max_records <= 0 or not sp.can_acquire():
            return PartitionFetch()
        partition = self.partitions.get(name, index)
        plog = partition.log
        read_committed = settings["share.isolation.level"] == "read_committed"
        upper = partition.last_stable_offset() if read_committed else plog.high_watermark
        offset = sp.next_fetch_offset()
        if offset >= upper:
            return PartitionFetch()
        try:
            data = plog.read(offset, max(max_bytes, 1), upper, min_one=True)
        except errors.OffsetOutOfRangeError:
            sp.move_start(plog.log_start_offset)  # Kafka absorbs it: no error, no records
            return PartitionFetch()
        if not data:
            return PartitionFetch()
        headers = rb.scan_batches(data, verify_crc=False)
        batches = [LogBatch(h.base_offset, h.last_offset, h.producer_id, h.is_transactional, h.is_control)
                   for h in headers]
        aborted = partition.aborted_between(offset, upper) if read_committed else ()
        acquired = sp.acquire(member_id, batches, max_records=max_records, batch_size=max(batch_size, 1),
                              now_ms=self.clock(), lock_ms=int(settings["share.record.lock.duration.ms"]),
                              delivery_limit=int(settings["share.delivery.count.limit"]), aborted=aborted,
                              record_limit=record_limit)
        if not acquired:
            return PartitionFetch()
        first, last = acquired[0].first_offset, acquired[-1].last_offset
        kept = [h for h in headers if h.last_offset >= first and h.base_offset <= last]
        records = data[kept[0].position: kept[-1].position + kept[-1].size]
        return PartitionFetch(None, bytes(records), acquired)

    # ------------------------------------------------------------------ acknowledge, release

    def acknowledge(self, group_id: str, member_id: str, name: str, topic_id: uuid.UUID, index: int,
                    acks, on_done: Callable[[KafkaError | None], None]) -> None:
        """Apply one partition's acknowledgements (all or none) and answer ``on_done`` once the
        new state is durable (an error at once for a refused one)."""
        key = (group_id, topic_id, index)
        try:
            sp = self.share_partition(group_id, name, topic_id, index)
        except KafkaError as exc:
            return on_done(exc)
        settings = self.settings(group_id)
        self._expire_one(key, sp)  # a lock past its deadline is no longer the member's
        start = sp.start_offset
        try:
            change = sp.acknowledge(member_id, acks, now_ms=self.clock(),
                                    lock_ms=int(settings["share.record.lock.duration.ms"]),
                                    delivery_limit=int(settings["share.delivery.count.limit"]))
        except ShareStateError as exc:
            return on_done(_ack_error(exc))
        if not change.batches and sp.start_offset == start:
            return on_done(None)  # RENEW only, or offsets below the SPSO: nothing to write
        # (no batches but a new SPSO: the leading records are done and dropped — that is a change)
        self.wake()
        self._persist(key, sp, on_done)

    def release(self, group_id: str, member_id: str, parts) -> None:
        """A share session ended: its member's acquired records in ``parts`` ((topic id,
        partition)) are available again; the delivery counted (as Kafka 4.4 answers: a record at the
        delivery-count limit is archived)."""
        for topic_id, index in parts:
            key = (group_id, topic_id, index)
            sp = self.shares.get(key)
            if sp is None:
                continue
            limit = int(self.settings(group_id)["share.delivery.count.limit"])
            if sp.release_member(member_id, delivery_limit=limit) is not None:
                self._persist(key, sp, _log_failure(key))
        self.wake()

    def connection_closed(self, connection) -> None:
        for (group_id, member_id), parts in self.sessions.connection_closed(connection):
            self.release(group_id, member_id, parts)

    def _persist(self, key: Key, sp: SharePartition, on_done: Callable[[KafkaError | None], None]) -> None:
        def done(error: KafkaError | None) -> None:
            on_done(None if error is None else storage_error(key))
        self.state.persist(key, sp.snapshot(), done)

    # ------------------------------------------------------------------ admin

    def group_ids(self) -> set[str]:
        """The share groups this node knows: those with members here, and those whose share
        partitions it keeps state for (a group outlives its members, as in Kafka)."""
        return {g for g, group in self.groups.groups.items() if not group.dead} | \
            {key[0] for key in self.shares} | {key[0] for key in self._persisted}

    def state_partitions(self, group_id: str) -> dict[uuid.UUID, set[int]]:
        """The group's share partitions kept here, {topic id: partitions}: those with state (in
        memory or persisted) and those its live assignment covers (Kafka's "initialized" share
        partitions, which its coordinator records when it assigns them)."""
        out: dict[uuid.UUID, set[int]] = {}
        for g, topic_id, index in [*self.shares, *self._persisted]:
            if g == group_id:
                out.setdefault(topic_id, set()).add(index)
        group = self.groups.get(group_id)
        for _name, topic_id, partitions in (group.topology if group is not None else ()):
            out.setdefault(topic_id, set()).update(range(partitions))
        return out

    def summary(self, group_id: str, topic_id: uuid.UUID, index: int) -> tuple[int, int] | None:
        """A share partition's (start offset, delivery-complete count) as its state says (Kafka's
        ReadShareGroupStateSummary), or None when it has none."""
        key = (group_id, topic_id, index)
        sp = self.shares.get(key)
        if sp is not None:
            return sp.start_offset, sp.delivery_complete_count
        state = self._persisted.get(key)
        if state is not None:
            return state.start_offset, state.delivery_complete_count
        return None

    def alter_start(self, group_id: str, starts: Mapping[tuple[uuid.UUID, int], int],
                    on_done: Callable[[dict], None]) -> None:
        """AlterShareGroupOffsets here (Kafka's InitializeShareGroupState): each share partition
        ``starts`` names ((topic id, partition) -> start offset) gets a new state, that start offset
        and nothing in flight; its next fetch begins there. ``on_done({part: error or None})`` once
        every new state is durable (the group must be empty: the handler checks). A start offset of
        -1 (InitializeShareGroupState's "not being initialized") makes the next fetch begin at
        ``share.auto.offset.reset``. The share partition held in memory is dropped: its next fetch
        reads the new state (Kafka's leader fences its cached share partition instead)."""
        if not starts:
            return on_done({})
        results: dict = {}

        def one(part):
            def done(error: KafkaError | None) -> None:
                results[part] = None if error is None else storage_error((group_id, *part))
                if len(results) == len(starts):
                    on_done(results)
            return done
        for (topic_id, index), start in starts.items():
            key = (group_id, topic_id, index)
            state = StateChange(start, (), 0)
            self.shares.pop(key, None)
            self._persisted[key] = state
            self.state.persist(key, state, one((topic_id, index)))

    def delete_group(self, group_id: str, on_done: Callable[[KafkaError | None], None]) -> None:
        """DeleteGroups of a share group here: only without members (NON_EMPTY_GROUP); its
        membership is forgotten and the state of its share partitions led here gets tombstones
        (``on_done`` once durable). On a cluster the other leaders' state is deleted by
        DeleteShareGroupState, sent by the handler."""
        group = self.groups.get(group_id)
        if group is not None and group.members:
            return on_done(errors.NonEmptyGroup(f"Group {group_id} is not empty."))
        if group is not None:
            self.groups.delete(group_id)
        self.delete_state(group_id, None, on_done)

    def delete_state(self, group_id: str, parts, on_done: Callable[[KafkaError | None], None]) -> None:
        """Forget the state of the group's share partitions ``parts`` ((topic id, partition);
        None: every one) kept here: tombstones, ``on_done`` once durable."""
        keys = [k for k in dict.fromkeys(list(self.shares) + list(self._persisted))
                if k[0] == group_id and (parts is None or (k[1], k[2]) in parts)]
        for key in keys:
            self.shares.pop(key, None)
            self._persisted.pop(key, None)
        if not keys:
            return on_done(None)
        pending = [len(keys)]
        failed: list[KafkaError] = []

        def done(error: KafkaError | None) -> None:
            if error is not None:
                failed.append(error)
            pending[0] -= 1
            if pending[0] == 0:
                on_done(failed[0] if failed else None)
        for key in keys:
            self.state.persist(key, None, done)

    # ------------------------------------------------------------------ timers and waiters

    def tick(self) -> None:
        """Expire locks past their deadline and members past their session; every 10 s forget
        the share partitions of deleted topics (their state gets tombstones), so nothing stays
        for a topic id that no longer exists."""
        self.groups.tick()
        for key, sp in list(self.shares.items()):
            self._expire_one(key, sp)
        if self.clock() - self._pruned_at >= PRUNE_INTERVAL_MS:
            self._pruned_at = self.clock()
            live = self.topic_ids()
            for key in [k for k in dict.fromkeys([*self.shares, *self._persisted]) if k[1] not in live]:
                self.shares.pop(key, None)
                self._persisted.pop(key, None)
                self.state.persist(key, None, _log_failure(key))

    def _expire_one(self, key: Key, sp: SharePartition) -> None:
        deadline = sp.next_deadline_ms()
        if deadline is None or deadline > self.clock():
            return
        limit = int(self.settings(key[0])["share.delivery.count.limit"])
        if sp.expire(self.clock(), delivery_limit=limit) is not None:
            self._persist(key, sp, _log_failure(key))
            self.wake()

    def waiter(self) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        return fut

    def forget(self, fut: asyncio.Future) -> None:
        """A wait that ended without being woken takes its future back (the list stays bounded)."""
        try:
            self._waiters.remove(fut)
        except ValueError:
            pass

    def wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)


def _ack_error(exc: ShareStateError) -> KafkaError:
    if exc.code == errors.ERROR_CODES[errors.InvalidRequest]:
        return errors.InvalidRequest(exc.message)
    return errors.InvalidRecordState(exc.message)


def _log_failure(key: Key) -> Callable[[KafkaError | None], None]:
    def done(error: KafkaError | None) -> None:
        if error is not None:
            log.error("share partition %s: its state after a release or expiry is not durable: %s", key, error)
    return done


_ISO = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$", re.IGNORECASE)


def _duration_ms(text: str) -> int:
    """An ISO-8601 duration (``PnDTnHnMn.nS``, as share.auto.offset.reset's by_duration) in ms."""
    m = _ISO.match(text.strip())
    if m is None:
        return 0
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in m.groups())
    return int(((days * 24 + hours) * 60 + minutes) * 60_000 + seconds * 1000)
