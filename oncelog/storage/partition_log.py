"""The partition log: an ordered list of segments holding raw record-batch bytes.

Storage knows bytes and offsets only: no producer state, no transactions, no groups. What the
batches mean (idempotence, transactions, the last stable offset) is kept above it, by
:class:`oncelog.partition.Partition`, which is the only writer of a log.

Interface::

    open(...)                          recover the segments, validate the unflushed tail
    append(data, batches, now_ms)      -> base offset of each batch (offsets are assigned here)
    read(offset, max_bytes, upper)     -> bytes of whole batches
    batches_from(offset)               -> (segment, position, header) of each batch from there
    offset_for_timestamp(ts)           -> (offset, ts) | None   (first record with ts >= target)
    offset_of_max_timestamp()          -> (offset, ts) | None
    delete_records(offset)             -> the new log start offset (DeleteRecords)
    apply_retention(now_ms)            -> the new log start offset (retention.ms / retention.bytes)
    roll(), close(), delete_all()
    log_start_offset, log_end_offset, high_watermark, waiters (long-polling fetches), config
    take_flush_work() / flushed(offset) / recovery_point() / durable_point   (the flusher's side)
    on_roll                            called with the new segment's base offset after a roll,
                                       so the owner can snapshot what it derives from the log
    segments, bases                    for the cleaner (:mod:`.cleaner` rewrites closed segments)

Offsets: ``log_start_offset <= high_watermark <= log_end_offset``. ``log_end_offset`` (LEO)
is the next offset to assign. The high watermark (HW) is what consumers may read: with
``--fsync always`` it is the end of the data known to be on disk, otherwise the LEO. On a
single broker the HW plays the role the in-sync replicas play in Kafka: nothing below it can be
lost by a crash of this process or of the machine.

Recovery (see :meth:`PartitionLog.open`): segments wholly before the recovery checkpoint are
trusted as they are; from the checkpoint on, every batch is validated (length, magic, CRC,
contiguous offsets) and the first invalid one truncates the log there. Start-up time is thus
bounded by what was written since the last checkpoint, not by the size of the log.

A failed write (a full disk: ENOSPC; any OSError) makes :meth:`PartitionLog.append` raise
:class:`~oncelog.errors.KafkaStorageError` (Produce answers KAFKA_STORAGE_ERROR for the
partition) with the log exactly as before the append: no offset assigned, no byte left in a
segment, the high watermark unchanged. A roll whose new segment cannot be created is undone
the same way (its files removed). Nothing is marked offline: the next append simply tries
again, so writes resume by themselves once space returns. (Kafka instead marks the whole log
directory offline on the first IOException and, with its only directory gone, halts the broker:
``LogDirFailureChannel``, ``LogManager.handleLogDirFailure``. oncelog has one data directory;
refusing the write and staying up to serve reads, then taking writes again, is its choice.)
"""

from __future__ import annotations

import asyncio
import bisect
import errno
import logging
import os
import random
from dataclasses import dataclass
from typing import Callable, Iterator

from ..config.settings import LogConfig
from ..errors import KafkaStorageError, OffsetOutOfRangeError
from ..protocol import records as rb
from .cleaner import finish_interrupted_swaps
from .files import atomic_write
from .segment import OffsetOverflow, Segment, recover_segment, segment_name

log = logging.getLogger("oncelog.storage")


# The leader epoch stamped on every appended batch: this broker has been every partition's one
# leader since it was created (Metadata and ListOffsets answer 0 too).
PARTITION_LEADER_EPOCH = 0
COMPACTED_MARKER = "compacted"  # in a partition directory: the cleaner has rewritten segments here


@dataclass
class RecoveryPoint:
    """A prefix of the log known to be on disk: everything before ``position`` of segment
    ``segment_base``, ending at offset ``next_offset``."""

    segment_base: int
    position: int
    next_offset: int


class PartitionLog:
    def __init__(self, directory: str, topic: str, partition: int, config: LogConfig, *, sync_hw: bool) -> None:
        self.directory = directory
        self.topic = topic
        self.partition = partition
        self.config = config
        # sync_hw: the HW only advances once data is fsynced (--fsync always).
        self.sync_hw = sync_hw
        self.segments: list[Segment] = []
        self.bases: list[int] = []
        self.log_start_offset = 0
        self.high_watermark = 0
        self.flushed_offset = 0
        self.dirty = False
        self.waiters: list[asyncio.Future] = []
        self.deleted = False
        # Rolled segments not yet fsynced: the flusher owns their fds until it has synced them.
        self.pending_closed: list[Segment] = []
        # The last recovery point known to be on disk (what the checkpoint file records).
        self.durable_point: RecoveryPoint | None = None
        self.recovery_scanned_bytes = 0  # how much start-up validated: bounded by the unflushed tail
        # flush.messages / flush.ms: records appended since the last flush was taken, and when the
        # oldest of them was appended (None: nothing unflushed).
        self.unflushed_records = 0
        self.unflushed_since_ms: int | None = None
        # The log cleaner's progress (in memory; a restart counts everything as dirty): offsets
        # below it were compacted by the last pass.
        self.cleaned_offset = 0
        # Called with the new segment's base offset after a roll (see the module docstring).
        self.on_roll: Callable[[int], None] | None = None

    # ------------------------------------------------------------------ open / recover

    @classmethod
    def open(cls, directory: str, topic: str, partition: int, config: LogConfig, *, sync_hw: bool,
             recovery_point: RecoveryPoint | None, clean_shutdown: bool) -> "PartitionLog":
        plog = cls(directory, topic, partition, config, sync_hw=sync_hw)
        os.makedirs(directory, exist_ok=True)
        finish_interrupted_swaps(directory)
        bases = sorted(int(n[:-4]) for n in os.listdir(directory) if n.endswith(".log") and n[:-4].isdigit())
        interval = config.index_interval_bytes
        for base in bases:
            plog.segments.append(Segment(directory, base, index_interval=interval))
        if not plog.segments:
            plog.segments.append(Segment(directory, 0, index_interval=interval))
        plog.segments[-1].roll_jitter_ms = plog._roll_jitter()
        plog.bases = [s.base_offset for s in plog.segments]
        # Closed segments: their next offset is the next segment's base.
        for seg, nxt in zip(plog.segments, plog.segments[1:]):
            seg.next_offset = nxt.base_offset
        plog._recover(recovery_point, clean_shutdown)
        plog.log_start_offset = max(plog.bases[0], plog._read_log_start())
        plog.high_watermark = plog.flushed_offset = plog.log_end_offset
        # What survived a crash of the process may still be only in the page cache: make it
        # durable before it becomes readable.
        plog.active.flush()
        plog.durable_point = plog.recovery_point()
        active = plog.active
        if active.size:
            first = active.read(0, rb.HEADER_SIZE)
            if len(first) == rb.HEADER_SIZE:
                active.first_append_ms = rb.parse_header(first).max_timestamp
        return plog

    def _recover(self, point: RecoveryPoint | None, clean: bool) -> None:
        active = self.segments[-1]
        if clean:
            # Clean shutdown: sizes are as written, indexes were flushed. Load the active
            # segment's index to find where it ends.
            active.load_indexes()
            off, pos = active.last_index_entry()
            self._scan_from(len(self.segments) - 1, pos, off)
            return
        if point is None or point.segment_base not in self.bases:
            start_index, position, offset = 0, 0, self.segments[0].base_offset
        else:
            start_index = self.bases.index(point.segment_base)
            position, offset = point.position, point.next_offset
        self._scan_from(start_index, position, offset)

    def _scan_from(self, index: int, position: int, offset: int) -> None:
        i = index
        while i < len(self.segments):
            seg = self.segments[i]
            if i > index:
                position, offset = 0, seg.base_offset
            valid, next_offset, problem = recover_segment(seg, position, offset, allow_gaps=self.may_have_gaps)
            self.recovery_scanned_bytes += valid - position
            i += 1
            if problem is None:
                continue
            if isinstance(problem, OffsetOverflow) and self._split_overflowed(i - 1, valid):
                continue
            i -= 1
            file_size = os.fstat(seg.fd).st_size
            dropped = self.segments[i + 1 :]
            log.warning(
                "recovery truncated %s-%d: %s; dropping %d bytes of %s and %d later segment(s)",
                self.topic, self.partition, problem, file_size - valid, os.path.basename(seg.log_path), len(dropped),
            )
            seg.truncate_to(valid, next_offset)
            for later in dropped:
                later.delete()
            del self.segments[i + 1 :]
            self.bases = [s.base_offset for s in self.segments]
            return

    def _split_overflowed(self, i: int, position: int) -> bool:
        """Segment ``i`` holds valid batches from ``position`` on that are beyond its int32
        relative range (left by an older broker): move them to a new segment, as Kafka's
        splitOverflowedSegment does, so nothing is lost and appends work again. A split cut
        short by a crash (the new segment written, the old one not yet cut) is finished.
        False when a later segment overlaps them: the caller truncates (the log is damaged)."""
        seg = self.segments[i]
        split_base = rb.parse_header(seg.read(position, rb.HEADER_SIZE)).base_offset
        nxt = self.segments[i + 1] if i + 1 < len(self.segments) else None
        if nxt is not None and nxt.base_offset <= split_base:
            tail = os.fstat(seg.fd).st_size - position
            if nxt.base_offset < split_base or seg.read(position, tail) != nxt.read(0, tail):
                return False
            log.warning("recovery finished an interrupted split of %s-%d at offset %d", self.topic,
                        self.partition, split_base)
            seg.truncate_to(position, split_base)
            os.fsync(seg.fd)
            return True
        log.warning("recovery split %s-%d: batches from offset %d are beyond the int32 relative range of "
                    "segment %d; moved to a new segment, nothing lost", self.topic, self.partition, split_base,
                    seg.base_offset)
        self.segments.insert(i + 1, seg.split_at(position, split_base))
        self.bases = [s.base_offset for s in self.segments]
        return True

    def _read_log_start(self) -> int:
        try:
            with open(os.path.join(self.directory, "log-start-offset")) as f:
                return int(f.read().strip() or 0)
        except (FileNotFoundError, ValueError):
            return 0

    def _write_log_start(self) -> None:
        atomic_write(os.path.join(self.directory, "log-start-offset"), f"{self.log_start_offset}\n")

    # ------------------------------------------------------------------ state

    @property
    def compacted(self) -> bool:
        return self.config.compact

    @property
    def may_have_gaps(self) -> bool:
        """Offsets may jump between batches: the topic is compacted, or was once (the cleaner
        leaves :data:`COMPACTED_MARKER` before its first rewrite), so a cleanup.policy changed
        since does not make recovery take the gaps for corruption."""
        return self.config.compact or os.path.exists(os.path.join(self.directory, COMPACTED_MARKER))

    def update_config(self, config: LogConfig) -> None:
        """Apply a topic's new settings at once (AlterConfigs): the next append, roll,
        retention or compaction pass uses them; the active segment takes the new
        index.interval.bytes."""
        self.config = config
        self.active.index_interval = config.index_interval_bytes

    def _roll_jitter(self) -> int:
        """Kafka's randomSegmentJitter: up to segment.jitter.ms (and below segment.ms)."""
        jitter = self.config.segment_jitter_ms
        return random.randrange(min(jitter, self.config.segment_ms)) if jitter > 0 else 0

    @property
    def active(self) -> Segment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def recovery_point(self) -> RecoveryPoint:
        """The current end: valid as a recovery point only right after a flush."""
        a = self.active
        return RecoveryPoint(a.base_offset, a.size, a.next_offset)

    # ------------------------------------------------------------------ append

    def append(self, data: bytes | bytearray | memoryview, batches: list[rb.BatchHeader], now_ms: int) -> list[int]:
        """Assign offsets to already-validated batches and write them; returns each batch's base
        offset. The bytes are not copied: each batch goes out as its broker-assigned 8-byte base
        offset followed by a view of the rest of it (the CRC does not cover the base offset).
        Only ``message.timestamp.type=LogAppendTime`` rewrites a copy (timestamps are covered)."""
        next_offset = self.log_end_offset
        firsts = []
        size = 0
        for header in batches:
            firsts.append(next_offset)
            next_offset += header.last_offset_delta + 1
            size += header.size
        if self.config.message_timestamp_type == "LogAppendTime":
            data = bytearray(data)
            for header, first in zip(batches, firsts):
                rb.patch_base_offset(data, header.position, first)
                rb.set_log_append_time(data, header, now_ms)
            batches = rb.scan_batches(bytes(data), verify_crc=False)
        view = memoryview(data)
        buffers = []
        for header, first in zip(batches, firsts):
            # the client's partition leader epoch is replaced by the leader's (0), as Kafka does: a
            # consumer sends it back as its last fetched epoch (KIP-320)
            buffers.append(rb.pack_batch_start(first, header, PARTITION_LEADER_EPOCH))
            buffers.append(view[header.position + 16 : header.position + header.size])
        try:
            self._maybe_roll(size, now_ms, next_offset - 1)
            seg = self.active
            if not seg.can_hold(next_offset - 1):
                # One append spanning more than 2^31 offsets from a fresh segment: write it in parts,
                # each starting a segment of its own where it would overflow (real producers cannot
                # get here: a batch holds its records, so a request holds at most millions).
                return self._append_split(buffers, batches, firsts, now_ms)
            seg.append(buffers, batches, firsts)
        except OSError as exc:
            raise self._storage_error(exc) from exc
        if seg.first_append_ms is None:
            seg.first_append_ms = now_ms
        self.dirty = True
        if self.unflushed_since_ms is None:
            self.unflushed_since_ms = now_ms
        self.unflushed_records += next_offset - firsts[0]
        if not self.sync_hw:
            self.advance_high_watermark(seg.next_offset)
        return firsts

    def _append_split(self, buffers: list, batches: list[rb.BatchHeader], firsts: list[int], now_ms: int) -> list[int]:
        first_segment, first_size, first_next = len(self.segments) - 1, self.active.size, self.active.next_offset
        start = 0
        try:
            for j in range(1, len(batches) + 1):
                if j == len(batches) or not self.active.can_hold(firsts[j] + batches[j].last_offset_delta):
                    self.active.append(buffers[2 * start : 2 * j], batches[start:j], firsts[start:j])
                    if j < len(batches):
                        self.roll()
                    start = j
        except OSError:
            # All or nothing, as a plain append: the parts written and the segments rolled go.
            for seg in self.segments[first_segment + 1 :]:
                if seg in self.pending_closed:
                    self.pending_closed.remove(seg)
                seg.delete()
            del self.segments[first_segment + 1 :]
            self.bases = [s.base_offset for s in self.segments]
            if self.active in self.pending_closed:
                self.pending_closed.remove(self.active)
            self.active.truncate_to(first_size, first_next)
            raise
        self.dirty = True
        self.unflushed_since_ms = self.unflushed_since_ms or now_ms
        self.unflushed_records += self.log_end_offset - firsts[0]
        if not self.sync_hw:
            self.advance_high_watermark(self.log_end_offset)
        return firsts

    def _maybe_roll(self, incoming: int, now_ms: int, last_offset: int) -> None:
        """Kafka's LogSegment.shouldRoll: the batch would not fit in segment.bytes, the segment
        is older than segment.ms (max.compaction.lag.ms for compacted topics, if earlier) less
        its jitter, an index is full (segment.index.bytes), or ``last_offset`` would not fit the
        segment's int32 relative offsets."""
        seg = self.active
        if seg.size == 0:
            return
        cfg = self.config
        too_big = seg.size + incoming > cfg.segment_size
        too_old = (seg.first_append_ms is not None
                   and now_ms - seg.first_append_ms > cfg.max_segment_ms - seg.roll_jitter_ms - 1)
        if too_big or too_old or seg.index_full(cfg.segment_index_bytes) or not seg.can_hold(last_offset):
            self.roll()

    def roll(self) -> None:
        """Start a new segment at the LEO. The old one is fsynced by the next flush round
        (``segments_to_flush`` includes it until then). If the new segment's files cannot be
        created, nothing changes (what was created is removed) and OSError is raised."""
        old = self.active
        new = None
        try:
            new = Segment(self.directory, old.next_offset, index_interval=self.config.index_interval_bytes)
            new.load_indexes()
            if new.index_files_behind:
                raise OSError(errno.ENOSPC, f"cannot create the index files of {new.index_path}")
        except OSError:
            # Files at the LEO that no segment owns would be taken for one at the next start.
            if new is not None:
                new.delete()
            else:
                for suffix in (".log", ".index", ".timeindex"):
                    try:
                        os.unlink(os.path.join(self.directory, segment_name(old.next_offset, suffix)))
                    except OSError:
                        pass
            raise
        new.roll_jitter_ms = self._roll_jitter()
        old.write_index()  # its index is complete: to the files now, as the flusher fsyncs them
        self.segments.append(new)
        self.bases.append(new.base_offset)
        self.pending_closed.append(old)
        self.dirty = True
        if self.on_roll is not None:
            self.on_roll(new.base_offset)

    def take_flush_work(self) -> tuple[list[Segment], int]:
        """Segments to fsync and the offset that will be durable once they are. Their pending
        index entries are written here, on the event loop (the fsyncs run in a worker thread):
        the recovery point taken next is preceded by the entries of every batch before it."""
        work = [*self.pending_closed, self.active]
        for seg in work:
            seg.write_index()
        self.pending_closed = []
        self.dirty = False
        self.unflushed_records = 0
        self.unflushed_since_ms = None
        return work, self.log_end_offset

    def flush_due(self, now_ms: int) -> bool:
        """flush.messages / flush.ms ask for an fsync of this partition now."""
        cfg = self.config
        return self.unflushed_since_ms is not None and (
            self.unflushed_records >= cfg.flush_messages or now_ms - self.unflushed_since_ms >= cfg.flush_ms)

    def flushed(self, offset: int) -> None:
        if offset > self.flushed_offset:
            self.flushed_offset = offset
            if self.sync_hw:
                self.advance_high_watermark(offset)

    def advance_high_watermark(self, offset: int) -> None:
        if offset > self.high_watermark:
            self.high_watermark = offset
            self.wake()

    def wake(self) -> None:
        waiters, self.waiters = self.waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    # ------------------------------------------------------------------ read

    def check_fetch_offset(self, offset: int) -> None:
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRangeError(f"offset {offset} is outside [{self.log_start_offset}, {self.log_end_offset}]")

    def read(self, offset: int, max_bytes: int, upper: int, *, min_one: bool = True) -> bytes:
        """Whole batches holding offsets from ``offset`` up to (not including) ``upper``, at most
        ``max_bytes`` of them unless the first batch alone is larger: then that batch with
        ``min_one`` (KIP-74: the first non-empty partition of a fetch), else nothing.
        Data comes from a single segment; the caller fetches again for more."""
        self.check_fetch_offset(offset)
        if offset >= upper:
            return b""
        i = bisect.bisect_right(self.bases, offset) - 1
        while i < len(self.segments):
            seg = self.segments[i]
            pos = seg.find_batch(offset)
            if pos is not None:
                return self._read_range(seg, pos, max_bytes, upper, min_one)
            i += 1
        return b""

    def _read_range(self, seg: Segment, pos: int, max_bytes: int, upper: int, min_one: bool = True) -> bytes:
        first = seg.read(pos, 12)
        first_size = rb.read_offset_and_size(first, 0)[1]
        if first_size > max_bytes and not min_one:
            return b""
        want = min(max(first_size, max_bytes), seg.size - pos)
        data = seg.read(pos, want)
        # Cut at a batch boundary: not past max_bytes (after the first batch) nor past upper.
        p, end = 0, len(data)
        while p + 12 <= end:
            base, size = rb.read_offset_and_size(data, p)
            if base >= upper or p + size > end:
                break
            p += size
        return data[:p] if p < end else data

    def batches_from(self, offset: int) -> Iterator[tuple[Segment, int, rb.BatchHeader]]:
        """Every batch holding offsets at or after ``offset``, in order, as (segment, position,
        header): a header-only scan; ``segment.read(position, header.size)`` reads a batch."""
        i = max(bisect.bisect_right(self.bases, offset) - 1, 0)
        for seg in self.segments[i:]:
            pos = seg.floor_position(offset) if seg.base_offset <= offset else 0
            for position, header in seg.iter_headers(pos):
                if header.last_offset >= offset:
                    yield seg, position, header

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record, in offset order, whose timestamp is >=
        ``timestamp`` (Kafka's LogSegment.findOffsetByTimestamp): batch headers are scanned from
        the time index's floor, and only the batch that holds the answer is read (and
        decompressed) record by record. Records below the log start offset do not count."""
        start = self.log_start_offset
        for seg in self.segments:
            if seg.size == 0:
                continue
            pos = seg.floor_position_for_timestamp(timestamp)
            for position, header in seg.iter_headers(pos):
                if header.last_offset < start or header.max_timestamp < timestamp:
                    continue
                for offset, ts in self._offsets_and_timestamps(seg, position, header, start):
                    if offset >= start and ts >= timestamp:
                        return offset, ts
        return None

    def _offsets_and_timestamps(self, seg: Segment, position: int, header: rb.BatchHeader,
                                start: int) -> list[tuple[int, int]]:
        """(offset, timestamp) of every record of one batch, decompressed within the topic's
        limit (rb.decompressed_limit). A batch that cannot be read so (a decompression bomb or
        malformed records stored before validation) counts as one record, at its first offset
        at or above ``start``, with its max timestamp: what Kafka answered before KIP-734."""
        try:
            return list(rb.iter_offsets_and_timestamps(seg.read(position, header.size),
                                                       rb.decompressed_limit(self.config.max_message_bytes)))
        except (ValueError, IndexError) as exc:
            log.warning("%s-%d: batch at offset %d read as one record: %s", self.topic, self.partition,
                        header.base_offset, exc)
            return [(max(header.base_offset, start), header.max_timestamp)]

    def offset_of_max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with the largest timestamp (KIP-734, exact
        to the record as Kafka 3.8+ answers): the first batch with the largest max timestamp is
        read, and the first of its records carrying that timestamp is the answer."""
        start = self.log_start_offset
        best = None
        for seg in self.segments:
            for position, header in seg.iter_headers(0):
                if header.last_offset < start:
                    continue
                if best is None or header.max_timestamp > best[0]:
                    best = (header.max_timestamp, seg, position, header)
        if best is None:
            return None
        max_ts, seg, position, header = best
        for offset, ts in self._offsets_and_timestamps(seg, position, header, start):
            if offset >= start and ts == max_ts:
                return offset, max_ts
        return max(header.base_offset, start), max_ts

    # ------------------------------------------------------------------ deletion

    def delete_records(self, offset: int) -> int:
        """Advance the log start offset (DeleteRecords); whole segments below it go. Returns
        the new log start offset (the owner trims what it derived from the removed batches)."""
        if offset > self.high_watermark or offset < 0:
            raise OffsetOutOfRangeError(f"offset {offset} is outside [{self.log_start_offset}, {self.high_watermark}]")
        if offset > self.log_start_offset:
            try:  # durable first: a start that could not be written is not taken
                atomic_write(os.path.join(self.directory, "log-start-offset"), f"{offset}\n")
            except OSError as exc:
                raise self._storage_error(exc) from exc
            self.log_start_offset = offset
            self._drop_segments_below(offset)
        return self.log_start_offset

    def _drop_segments_below(self, offset: int) -> None:
        while len(self.segments) > 1 and self.segments[1].base_offset <= offset:
            seg = self.segments.pop(0)
            self.bases.pop(0)
            seg.delete()

    def apply_retention(self, now_ms: int) -> int:
        """Delete closed segments beyond retention.ms / retention.bytes; returns the new log
        start offset (as :meth:`delete_records`). Only under cleanup.policy with ``delete`` (a
        compact-only topic keeps its segments, as in Kafka)."""
        cfg = self.config
        if not cfg.delete:
            return self.log_start_offset
        total = self.size_bytes
        while len(self.segments) > 1:
            seg = self.segments[0]
            if seg in self.pending_closed:
                break  # not yet fsynced; the flusher still needs its fd
            by_size = cfg.retention_bytes >= 0 and total - seg.size >= cfg.retention_bytes
            by_time = False
            if cfg.retention_ms >= 0:
                seg._ensure_index()
                by_time = 0 <= seg.max_timestamp < now_ms - cfg.retention_ms
            if not (by_size or by_time):
                break
            total -= seg.size
            self.segments.pop(0)
            self.bases.pop(0)
            seg.delete()
            if self.bases[0] > self.log_start_offset:
                self.log_start_offset = self.bases[0]
                try:
                    self._write_log_start()
                except OSError as exc:
                    # Harmless: at the next start the log starts at its first segment anyway.
                    log.warning("%s-%d: cannot record the log start offset %d: %r", self.topic, self.partition,
                                self.log_start_offset, exc)
        return self.log_start_offset

    def _storage_error(self, exc: OSError) -> KafkaStorageError:
        return KafkaStorageError(f"{self.topic}-{self.partition}: cannot write to the log in {self.directory}: "
                                 f"{exc.strerror or exc}")

    def close(self) -> None:
        for seg in self.segments:
            seg.close()
        self.wake()

    def delete_all(self) -> None:
        self.deleted = True
        for seg in self.segments:
            seg.delete()
        for name in os.listdir(self.directory):
            os.unlink(os.path.join(self.directory, name))
        os.rmdir(self.directory)
        self.wake()
