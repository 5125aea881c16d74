"""Per-partition idempotent-producer state and its append rules, sans-IO.

Owned by :class:`oncelog.partition.Partition`, which calls :meth:`ProducerStateManager.prepare`
before a write and :meth:`~ProducerStateManager.commit` / :meth:`~ProducerStateManager.complete_txn`
after it, and rebuilds the state at start-up with :meth:`~ProducerStateManager.replay`.

For each producer id that wrote to a partition we keep its ``producer_epoch`` and the metadata
of its last :data:`MAX_CACHED_BATCHES` batches (first/last sequence, first/last offset, append
time). A client batch from producer ``pid`` at epoch ``e`` with sequences ``s..t`` is, in order
(as Kafka's ``ProducerStateManager``/``ProducerAppendInfo``):

1. a **duplicate** if the entry has epoch ``e`` and a cached batch with the same ``s`` and ``t``:
   it is acknowledged with the cached offsets and not written again;
2. **fenced** (:class:`~oncelog.errors.InvalidProducerEpoch`) if ``e`` is below the entry's epoch;
3. for a **new epoch** (``e`` above the entry's): accepted only with ``s == 0``;
4. for an **unknown producer** (no entry): accepted at any ``s`` (Kafka since KIP-360: its
   state may have gone with retention or DeleteRecords, and the client's sequence goes on);
5. otherwise accepted only if ``s == last + 1`` (with int32 wrap-around: 0 follows 2^31-1);
   else OUT_OF_ORDER_SEQUENCE_NUMBER.

:meth:`ProducerStateManager.prepare` validates all batches of one append together (each against
the state the previous one would leave) without changing anything; :meth:`~ProducerStateManager.commit`
applies them after the log write. The broker's own writes (``check_sequences=False``: transactional
offset commits in ``__consumer_offsets``) carry no sequence numbers and are not checked; a
transactional one opens its producer's transaction on the partition, as a client's does. A
COMMIT/ABORT marker closes it (:meth:`~ProducerStateManager.complete_txn`). The first offsets of
open transactions (:meth:`~ProducerStateManager.first_unstable_offset`) bound the partition's last
stable offset.

Durability: the state is derived from the log. Snapshots (``<offset:020d>.snapshot``, JSON,
written atomically) record the state as of a log offset; at start-up the newest snapshot not
beyond the log end is loaded and the batches after it are replayed from their headers
(:meth:`ProducerStateManager.replay`). The partition takes snapshots at segment roll, at clean
shutdown, and when the log start passes the last batch of a producer it still keeps (see
:meth:`~ProducerStateManager.on_log_start_advanced`), so the replay is bounded by one segment.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from ..errors import InvalidProducerEpoch, InvalidTxnState, OutOfOrderSequence, UnknownProducerId

MAX_CACHED_BATCHES = 5
INT32_MAX = 0x7FFFFFFF
SNAPSHOT_VERSION = 1


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp_ms: int


@dataclass(slots=True)
class ProducerEntry:
    """One producer id's state on this partition. A partition may hold as many of these as
    producers wrote to it within ``producer.id.expiration.ms`` (clients choose how many producer
    ids they use), so it is kept small: slots, and the last batches as a tuple (shared empty
    one for a producer that only has markers here) rather than a deque (~0.6 KB each)."""

    producer_id: int
    producer_epoch: int
    # The metadata of its last MAX_CACHED_BATCHES batches, oldest first (replaced, never changed).
    batches: tuple[BatchMetadata, ...] = ()
    last_timestamp_ms: int = -1
    # First offset of this producer's open transaction on this partition, or -1.
    current_txn_first_offset: int = -1
    # The transaction coordinator's epoch in this producer's last marker here, or -1
    # (Kafka's ProducerStateEntry.coordinatorEpoch, shown by DescribeProducers).
    coordinator_epoch: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def add_batch(self, batch: BatchMetadata) -> None:
        self.batches = (*self.batches[1 - MAX_CACHED_BATCHES:], batch)

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


@dataclass(frozen=True, slots=True)
class PendingBatch:
    """A validated batch waiting for its offsets: (producer id, epoch, first/last sequence)."""

    producer_id: int
    producer_epoch: int
    first_seq: int
    last_seq: int
    record_count: int
    is_transactional: bool = False


class ProducerStateManager:
    def __init__(self, directory: str | None = None) -> None:
        self.directory = directory
        self.producers: dict[int, ProducerEntry] = {}
        # producer id -> first offset of its open transaction (what bounds the LSO)
        self.ongoing: dict[int, int] = {}
        # Kafka's unreplicatedTxns: first offset -> marker offset of a transaction whose marker is
        # written but not yet below the high watermark. It still bounds the LSO, so a
        # read_committed reader never reads past a transaction whose outcome it cannot yet read
        # (the marker waits for its fsync under flush.messages=1, or for the replicas).
        # Pruned as the HW passes the markers (:meth:`on_high_watermark`): it holds only
        # transactions ended above the HW, so it is bounded by the writes not yet durable.
        self.unreplicated: dict[int, int] = {}

    # ------------------------------------------------------------------ append rules

    def prepare(self, batches, *,
                check_sequences: bool = True) -> tuple[list[PendingBatch | None], BatchMetadata | None]:
        """Check a request's batches (headers with producer_id/producer_epoch/base_sequence/
        last_sequence/record_count). Returns the pending updates (None for batches without a
        producer id, and for control batches) and, when the request is a retried duplicate, the
        original metadata. Raises a :class:`KafkaError` subclass naming the rule broken; nothing
        changes. ``check_sequences=False``: the broker's own batches, taken as they are."""
        if not check_sequences:
            return [None if h.producer_id < 0 or h.is_control else
                    PendingBatch(h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence, h.record_count,
                                 h.is_transactional)
                    for h in batches], None
        pending: list[PendingBatch | None] = []
        # Per producer: (epoch, last_seq) as the earlier batches of this request leave them.
        staged: dict[int, tuple[int, int]] = {}
        for i, h in enumerate(batches):
            pid = h.producer_id
            if pid < 0:
                pending.append(None)
                continue
            epoch, first, last = h.producer_epoch, h.base_sequence, h.last_sequence
            entry = self.producers.get(pid)
            if pid not in staged and entry is not None:
                dup = entry.find_duplicate(epoch, first, last)
                if dup is not None:
                    if len(batches) != 1:
                        raise OutOfOrderSequence(
                            f"producer {pid}: batch {first}..{last} is a duplicate inside a multi-batch request")
                    return [], dup
            if pid in staged:
                cur_epoch, cur_last = staged[pid]
            elif entry is not None:
                cur_epoch, cur_last = entry.producer_epoch, entry.last_seq
            else:
                cur_epoch, cur_last = None, None
            if cur_epoch is not None and epoch < cur_epoch:
                raise InvalidProducerEpoch(f"producer {pid}: epoch {epoch} is older than the current epoch {cur_epoch}")
            if cur_epoch is None or epoch > cur_epoch:
                # A producer without state on this partition may start at any sequence (Kafka since
                # KIP-360: ProducerAppendInfo.checkSequence; its state may have been removed by
                # retention or DeleteRecords); a new epoch of a known producer starts at 0.
                if first != 0 and cur_epoch is not None:
                    raise OutOfOrderSequence(f"producer {pid}: new epoch {epoch} must start at sequence 0, not {first}")
            elif cur_last == -1:
                # Same epoch but no batches left (expired or removed): only a fresh start is safe.
                if first != 0:
                    raise UnknownProducerId(f"producer {pid}: no batches retained; sequence {first} cannot be checked")
            elif not in_sequence(cur_last, first):
                raise OutOfOrderSequence(f"producer {pid} epoch {epoch}: expected sequence {(cur_last + 1) & INT32_MAX}, got {first}")
            if not h.is_transactional and entry is not None and entry.current_txn_first_offset >= 0:
                # Kafka's ProducerAppendInfo: inside its open transaction a producer writes
                # transactional batches only (a plain one would bypass the markers).
                raise InvalidTxnState(f"Expected transactional write from producer {pid}: its transaction on this "
                                      f"partition is open since offset {entry.current_txn_first_offset}")
            staged[pid] = (epoch, last)
            pending.append(PendingBatch(pid, epoch, first, last, h.record_count, h.is_transactional))
        return pending, None

    def commit(self, pending: list[PendingBatch | None], first_offsets: list[int], now_ms: int) -> None:
        """Apply validated batches once their offsets are known."""
        for p, first_offset in zip(pending, first_offsets):
            if p is None:
                continue
            self._record(p.producer_id, p.producer_epoch, p.first_seq, p.last_seq, first_offset,
                         first_offset + p.record_count - 1, now_ms, p.is_transactional)

    def first_unstable_offset(self) -> int | None:
        """Kafka's firstUnstableOffset: the first offset of the oldest transaction on this
        partition that is open, or ended by a marker not yet below the high watermark (call
        :meth:`on_high_watermark` first with the current one); None if there is none."""
        first = self.first_ongoing_offset()
        if self.unreplicated:
            oldest = min(self.unreplicated)
            first = oldest if first is None else min(first, oldest)
        return first

    def first_ongoing_offset(self) -> int | None:
        """The first offset of the oldest open transaction on this partition, if any."""
        return min(self.ongoing.values()) if self.ongoing else None

    def on_high_watermark(self, high_watermark: int) -> None:
        """Kafka's onHighWatermarkUpdated: a transaction whose marker is now below the high
        watermark no longer holds the LSO back."""
        if self.unreplicated:
            for first in [f for f, marker in self.unreplicated.items() if marker < high_watermark]:
                del self.unreplicated[first]

    def complete_txn(self, pid: int, epoch: int, marker_offset: int, ts: int,
                     coordinator_epoch: int = -1) -> int | None:
        """A COMMIT/ABORT marker was written at ``marker_offset``: close the producer's open
        transaction. Returns its first offset (None if it had no data here)."""
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerEntry(pid, epoch)
        entry.coordinator_epoch = coordinator_epoch
        if epoch > entry.producer_epoch:
            # Markers carry the coordinator's epoch, bumped on fencing or with TV2; the old
            # epoch's sequence numbers mean nothing any more.
            entry.producer_epoch = epoch
            entry.batches = ()
        entry.last_timestamp_ms = ts
        first = entry.current_txn_first_offset
        entry.current_txn_first_offset = -1
        self.ongoing.pop(pid, None)
        if first >= 0:
            self.unreplicated[first] = marker_offset
            return first
        return None

    def begin_txn(self, pid: int, epoch: int, first_offset: int, ts: int) -> None:
        """A transactional write without sequence numbers (the broker's own, e.g. transactional
        offset commits) opens the producer's transaction on this partition."""
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerEntry(pid, epoch)
        entry.last_timestamp_ms = ts
        if entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = first_offset
            self.ongoing[pid] = first_offset

    def _record(self, pid, epoch, first_seq, last_seq, first_offset, last_offset, ts, transactional) -> None:
        """What a written data batch does to the state: the same after an append and in a replay."""
        if first_seq < 0:
            # The broker's own write (a transactional offset commit): nothing to sequence.
            if transactional:
                self.begin_txn(pid, epoch, first_offset, ts)
            return
        self._apply(pid, epoch, first_seq, last_seq, first_offset, last_offset, ts, transactional)

    def _apply(self, pid, epoch, first_seq, last_seq, first_offset, last_offset, ts, transactional=False) -> None:
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerEntry(pid, epoch)
        if epoch != entry.producer_epoch:
            entry.producer_epoch = epoch
            entry.batches = ()
        entry.add_batch(BatchMetadata(first_seq, last_seq, first_offset, last_offset, ts))
        entry.last_timestamp_ms = ts
        if transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = first_offset
            self.ongoing[pid] = first_offset

    def replay(self, header) -> None:
        """Rebuild state from a data batch already in the log (start-up, after a snapshot).
        Control batches are replayed by the caller through :meth:`complete_txn`."""
        if header.producer_id < 0 or header.is_control:
            return
        self._record(header.producer_id, header.producer_epoch, header.base_sequence, header.last_sequence,
                     header.base_offset, header.last_offset, header.max_timestamp, header.is_transactional)

    # ------------------------------------------------------------------ housekeeping

    def expire(self, now_ms: int, expiration_ms: int) -> int:
        """Kafka's ``removeExpiredProducers``: drop every producer with no transaction open here
        whose last write (batch or marker) is at least ``producer.id.expiration.ms`` old. Its
        next batch is then taken at any sequence, as an unknown producer's (KIP-360). Returns
        how many were dropped."""
        horizon = now_ms - expiration_ms
        gone = [pid for pid, e in self.producers.items()
                if e.last_timestamp_ms <= horizon and e.current_txn_first_offset < 0]
        for pid in gone:
            del self.producers[pid]
        return len(gone)

    def on_log_start_advanced(self, log_start_offset: int) -> bool:
        """DeleteRecords/retention moved the log start. As in current Kafka (since KIP-360), a
        producer whose every batch is now below it keeps its entry — epoch, sequence and the
        cached batch metadata — so its next batch continues the sequence instead of being
        answered UNKNOWN_PRODUCER_ID; entries go only by ``producer.id.expiration.ms``
        (:meth:`expire`). Returns True when some entry is held only here (no batch of its is
        left in the log), so the caller snapshots the state to keep it across a restart."""
        return any(0 <= e.last_offset < log_start_offset for e in self.producers.values())

    # ------------------------------------------------------------------ snapshots

    def to_json(self, offset: int) -> str:
        return json.dumps({
            "version": SNAPSHOT_VERSION, "offset": offset,
            "producers": [
                {"producer_id": e.producer_id, "producer_epoch": e.producer_epoch,
                 "last_timestamp_ms": e.last_timestamp_ms, "current_txn_first_offset": e.current_txn_first_offset,
                 "coordinator_epoch": e.coordinator_epoch,
                 "batches": [[b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp_ms] for b in e.batches]}
                for e in self.producers.values()
            ],
        })

    def load_json(self, text: str) -> int:
        doc = json.loads(text)
        if doc.get("version") != SNAPSHOT_VERSION:
            raise ValueError(f"unknown producer snapshot version {doc.get('version')}")
        self.producers.clear()
        self.ongoing.clear()
        self.unreplicated.clear()
        for p in doc["producers"]:
            entry = ProducerEntry(p["producer_id"], p["producer_epoch"], last_timestamp_ms=p["last_timestamp_ms"],
                                  current_txn_first_offset=p.get("current_txn_first_offset", -1),
                                  coordinator_epoch=p.get("coordinator_epoch", -1))
            for b in p["batches"]:
                entry.add_batch(BatchMetadata(*b))
            self.producers[entry.producer_id] = entry
            if entry.current_txn_first_offset >= 0:
                self.ongoing[entry.producer_id] = entry.current_txn_first_offset
        return doc["offset"]

    def snapshot_paths(self) -> list[tuple[int, str]]:
        if not self.directory:
            return []
        out = []
        for name in os.listdir(self.directory):
            if name.endswith(".snapshot") and name[:-9].isdigit():
                out.append((int(name[:-9]), os.path.join(self.directory, name)))
        return sorted(out)

    def write_snapshot(self, offset: int, keep: int = 2) -> None:
        from ..storage.files import atomic_write

        path = os.path.join(self.directory, f"{offset:020d}.snapshot")
        atomic_write(path, self.to_json(offset))
        for _, old in self.snapshot_paths()[:-keep]:
            os.unlink(old)

    def load_latest_snapshot(self, log_end_offset: int) -> int | None:
        """Load the newest readable snapshot at or below ``log_end_offset``; delete newer ones
        (they describe data that recovery truncated). Returns its offset, or None."""
        for offset, path in reversed(self.snapshot_paths()):
            if offset > log_end_offset:
                os.unlink(path)
                continue
            try:
                with open(path) as f:
                    return self.load_json(f.read())
            except (ValueError, KeyError, OSError):
                os.unlink(path)  # a torn snapshot: fall back to an older one
        self.producers.clear()
        self.ongoing.clear()
        self.unreplicated.clear()
        return None
