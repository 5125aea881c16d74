"""One log segment: a file of raw record batches plus its sparse offset and time indexes.

On-disk format (all integers big-endian), in the partition directory ``<topic>-<partition>/``:

``<base_offset:020d>.log``
    Record batches exactly as producers sent them (compressed batches included), each with the
    broker-assigned ``baseOffset`` patched into its first 8 bytes. Batches are contiguous:
    batch *n+1* starts at offset ``last_offset(n) + 1``. Nothing else is in the file.

``<base_offset:020d>.index``
    8-byte entries ``(int32 relative_offset, int32 position)``: the batch whose base offset is
    ``base_offset + relative_offset`` starts at byte ``position`` of the .log file. An entry is
    written for the first batch and then whenever ``index.interval.bytes`` of log have been
    appended since the last entry. Entries are strictly increasing in both fields.

``<base_offset:020d>.timeindex``
    12-byte entries ``(int64 timestamp, int32 relative_offset)``, written beside index entries
    when the segment's largest timestamp grew: every batch up to and including the one at
    ``relative_offset`` has timestamps <= ``timestamp``. A search for the first record with
    ts >= T starts at the last entry whose timestamp < T.

Offsets relative to ``base_offset`` are int32 in both indexes, so every offset in a segment is at
most ``base_offset + MAX_RELATIVE_OFFSET`` (Kafka's ``LogSegment.canConvertToRelativeOffset``):
the log rolls before an append would pass it, and recovery splits a segment that holds batches
beyond it (Kafka's ``splitOverflowedSegment``; such segments were left by brokers before this
check, when one batch could claim 2^31 offsets).

The index files are not fsynced on every append: they are derived data. Recovery truncates
index entries that point beyond the validated end of the .log and rebuilds the ones for the
tail it re-scanned (see :mod:`oncelog.storage.partition_log`).

Nor are they written on every append: the entries live in memory (every lookup uses those) and
go to the files in batches (:meth:`Segment.write_index`), not one ``pwrite`` per appended batch.
They are written

* by the flusher's side (``PartitionLog.take_flush_work``) before every flush round, on the
  event loop: every recovery point ever recorded is thus preceded by the index entries of the
  batches before it, which is what recovery relies on when it trusts the files up to there;
* when the segment rolls, is closed, truncated or reloaded, and at the end of a recovery scan;
* at once whenever an entry would make a file grow into a page it has not reached yet (an
  entry per 4 KiB page of index: the entries pending until then lie in pages the file already
  holds, so that the write that needs new space from the filesystem is the single entry's, as
  it was when every entry was written at once; a full disk thus shows at the same entry).

After a crash of the process the files hold every entry up to the last flush round at least,
and the scan from the recovery point rebuilds the rest; the files are always a prefix of the
in-memory index (entries go out in order, at their fixed positions).

A full disk (ENOSPC), or any failed write:

* of the .log: :meth:`Segment.append` cuts the file back to where the append began (a short
  write leaves no partial batch behind) and raises; the segment is as before the append, so
  the caller refuses the append and the next one is written at the same position;
* of an index file: the append goes on. The in-memory index keeps the entry; the file stops
  being written for this segment (``index_files_behind``), so it stays a valid prefix of the
  in-memory index: no entry is ever written after a missing one. A prefix is enough for every
  use of the file (fewer entries only mean longer scans) and it is re-read, hence whole again,
  whenever the segment is truncated or reopened.
"""

from __future__ import annotations

import bisect
import errno
import os
import struct
from array import array

from ..protocol import records as rb

INDEX_ENTRY = struct.Struct(">ii")
MAX_RELATIVE_OFFSET = 0x7FFFFFFF  # offsets are stored as int32 relative to the segment's base
TIME_ENTRY = struct.Struct(">qi")


def segment_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


class Segment:
    """Invariants: ``size`` is the length of valid bytes in the .log file and always a batch
    boundary; ``next_offset`` is the offset after the last batch in it (== base_offset when
    empty); the in-memory index (when loaded) mirrors the .index file, or, once a write to
    the index files failed (``index_files_behind``), has the file's entries as a prefix."""

    def __init__(self, directory: str, base_offset: int, *, index_interval: int) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.log_path = os.path.join(directory, segment_name(base_offset, ".log"))
        self.index_path = os.path.join(directory, segment_name(base_offset, ".index"))
        self.time_path = os.path.join(directory, segment_name(base_offset, ".timeindex"))
        self.index_interval = index_interval
        self.fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        self.size = os.fstat(self.fd).st_size
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.first_append_ms: int | None = None
        self._index_rel: array | None = None
        self._index_pos: array | None = None
        self._time_ts: array | None = None
        self._time_rel: array | None = None
        self._index_fd: int | None = None
        self._time_fd: int | None = None
        self._bytes_since_index = 0
        # Entries of the in-memory index already written to the files (the rest are pending).
        self._index_written = 0
        self._time_written = 0
        self.index_files_behind = False  # an index write failed: the files hold a prefix (see above)
        self.roll_jitter_ms = 0  # segment.jitter.ms drawn for this segment (the active one rolls earlier)

    def can_hold(self, offset: int) -> bool:
        """Kafka's canConvertToRelativeOffset: ``offset`` fits the int32 relative indexes."""
        return 0 <= offset - self.base_offset <= MAX_RELATIVE_OFFSET

    # ------------------------------------------------------------------ indexes

    def index_full(self, max_index_bytes: int) -> bool:
        """Kafka's offsetIndex.isFull() || timeIndex.isFull() for segment.index.bytes (entries
        of 8 and 12 bytes): the segment must roll before another entry is written."""
        if self._index_rel is None:
            return False
        return (len(self._index_rel) >= max_index_bytes // INDEX_ENTRY.size
                or len(self._time_ts) >= max_index_bytes // TIME_ENTRY.size)

    def load_indexes(self, valid_size: int | None = None) -> None:
        """Read the index files into memory, dropping torn or out-of-range entries (those at or
        beyond ``valid_size`` when given) and truncating the files to match."""
        self.write_index()  # the files are re-read: they must hold what memory holds
        limit = self.size if valid_size is None else valid_size
        rel, pos = array("i"), array("i")
        raw = _read_file(self.index_path)
        usable = len(raw) - len(raw) % INDEX_ENTRY.size
        for r, p in INDEX_ENTRY.iter_unpack(raw[:usable]):
            if p >= limit or (pos and (p <= pos[-1] or r <= rel[-1])) or r < 0:
                break
            rel.append(r)
            pos.append(p)
        ts, trel = array("q"), array("i")
        raw_t = _read_file(self.time_path)
        usable_t = len(raw_t) - len(raw_t) % TIME_ENTRY.size
        last_rel = rel[-1] if rel else -1
        for t, r in TIME_ENTRY.iter_unpack(raw_t[:usable_t]):
            if r > last_rel or (trel and (r < trel[-1] or t < ts[-1])):
                break
            ts.append(t)
            trel.append(r)
        self._index_rel, self._index_pos, self._time_ts, self._time_rel = rel, pos, ts, trel
        self._index_written, self._time_written = len(rel), len(ts)
        self._open_index_files(len(rel) * INDEX_ENTRY.size, len(ts) * TIME_ENTRY.size)
        if ts:
            self.max_timestamp = max(self.max_timestamp, ts[-1])

    def _open_index_files(self, index_len: int, time_len: int) -> None:
        self.close_indexes()
        self.index_files_behind = False
        try:
            self._index_fd = os.open(self.index_path, os.O_RDWR | os.O_CREAT, 0o644)
            os.ftruncate(self._index_fd, index_len)
            self._time_fd = os.open(self.time_path, os.O_RDWR | os.O_CREAT, 0o644)
            os.ftruncate(self._time_fd, time_len)
        except OSError:
            # Cannot create or cut an index file (a full disk): the in-memory index serves; the
            # files are not written for this segment (a stale longer file is cut on its next load).
            self.index_files_behind = True

    def write_index(self) -> None:
        """Write the in-memory index entries not yet in the files (see the module docstring).
        Event-loop side only: the flusher's worker thread never calls it. A failed or short
        write stops the files for this segment (``index_files_behind``): they stay a prefix."""
        rel = self._index_rel
        if rel is None:
            return
        if self.index_files_behind or self._index_fd is None or self._time_fd is None:
            self._index_written, self._time_written = len(rel), len(self._time_ts)
            return
        n = len(rel)
        if self._index_written < n:
            w = self._index_written
            entries = array("i", [0]) * (2 * (n - w))
            entries[0::2] = rel[w:n]
            entries[1::2] = self._index_pos[w:n]
            if _LITTLE:
                entries.byteswap()  # to big-endian int32 pairs, as INDEX_ENTRY packs them
            if not self._pwrite(self._index_fd, entries, w * INDEX_ENTRY.size):
                return
            self._index_written = n
        m = len(self._time_ts)
        if self._time_written < m:
            w = self._time_written
            data = b"".join(map(TIME_ENTRY.pack, self._time_ts[w:m], self._time_rel[w:m]))
            if not self._pwrite(self._time_fd, data, w * TIME_ENTRY.size):
                return
            self._time_written = m

    def _pwrite(self, fd: int, data, position: int) -> bool:
        try:
            n = os.pwrite(fd, data, position)
        except OSError:
            n = -1
        if n != memoryview(data).nbytes:
            self.index_files_behind = True
            return False
        return True

    def close_indexes(self) -> None:
        for fd in (self._index_fd, self._time_fd):
            if fd is not None:
                os.close(fd)
        self._index_fd = self._time_fd = None

    def _ensure_index(self) -> None:
        if self._index_rel is None:
            self.load_indexes()

    def _maybe_index(self, base_offset: int, position: int, max_timestamp: int) -> None:
        """Record index entries for a batch about to be written at ``position``."""
        if self._bytes_since_index < self.index_interval and self._index_rel:
            if max_timestamp > self.max_timestamp:
                self.max_timestamp = max_timestamp
            return
        rel = base_offset - self.base_offset
        # An entry reaching a page the file has not reached yet is written at once, after the
        # pending ones (see the module docstring); the others wait for write_index.
        n = len(self._index_rel)
        grows = _new_page(self._index_written, n, INDEX_ENTRY.size)
        if grows:
            self.write_index()
        self._index_rel.append(rel)
        self._index_pos.append(position)
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
        if self.max_timestamp >= 0 and (not self._time_ts or self.max_timestamp > self._time_ts[-1]):
            m = len(self._time_ts)
            if _new_page(self._time_written, m, TIME_ENTRY.size):
                if not grows:
                    self.write_index()
                grows = True
            self._time_ts.append(self.max_timestamp)
            self._time_rel.append(rel)
        if grows:
            self.write_index()
        self._bytes_since_index = 0

    def floor_position(self, offset: int) -> int:
        """Byte position of an indexed batch whose base offset is <= ``offset`` (0 if none)."""
        self._ensure_index()
        i = bisect.bisect_right(self._index_rel, offset - self.base_offset) - 1
        return self._index_pos[i] if i >= 0 else 0

    def floor_position_for_timestamp(self, timestamp: int) -> int:
        """Byte position from which a scan for the first record with ts >= timestamp starts."""
        self._ensure_index()
        i = bisect.bisect_left(self._time_ts, timestamp) - 1
        if i < 0:
            return 0
        return self.floor_position(self.base_offset + self._time_rel[i])

    # ------------------------------------------------------------------ data

    def append(self, buffers: list, batches: list[rb.BatchHeader], firsts: list[int]) -> None:
        """Append batches given as write buffers (contiguous, in order); ``batches[i].position``
        are their positions relative to the first, ``firsts[i]`` their assigned base offsets.

        All or nothing: if the .log write fails or is short (ENOSPC part-way), the file is cut
        back to where this append began and OSError is raised; nothing of the segment changed.
        The index entries are made only once the bytes are written."""
        self._ensure_index()
        start = self.size
        total = sum(map(len, buffers))
        written = 0
        try:
            if len(buffers) <= 512:  # IOV_MAX is 1024 on Linux: one call (the usual case)
                n = os.pwritev(self.fd, buffers, start)
                if n != total:  # a regular file writes short only when it cannot go on (ENOSPC)
                    raise OSError(errno.ENOSPC, f"short write to {self.log_path}: {n} of {total} bytes")
            else:
                for i in range(0, len(buffers), 512):
                    chunk = buffers[i : i + 512]
                    n = os.pwritev(self.fd, chunk, start + written)
                    expected = sum(map(len, chunk))
                    if n != expected:
                        raise OSError(errno.ENOSPC, f"short write to {self.log_path}: {written + n} of {total} bytes")
                    written += n
        except OSError:
            self._cut_back(start)
            raise
        for header, first in zip(batches, firsts):
            self._maybe_index(first, start + header.position - batches[0].position, header.max_timestamp)
            self._bytes_since_index += header.size
        self.size = start + total
        last = batches[-1]
        self.next_offset = firsts[-1] + last.last_offset_delta + 1

    def _cut_back(self, size: int) -> None:
        """Remove what a failed append wrote past ``size``. If even that fails, the bytes past
        ``size`` are not part of the segment (reads stop at ``size``, the next append overwrites
        them, and recovery after a crash validates them like any unflushed tail)."""
        try:
            os.ftruncate(self.fd, size)
        except OSError:
            pass

    def read(self, position: int, length: int) -> bytes:
        return os.pread(self.fd, length, position)

    def find_batch(self, offset: int) -> int | None:
        """Position of the first batch whose last offset is >= ``offset``, or None."""
        pos = self.floor_position(offset)
        while pos < self.size:
            head = os.pread(self.fd, 27, pos)
            if len(head) < 27:
                return None
            if rb.read_last_offset(head, 0) >= offset:
                return pos
            pos += rb.read_offset_and_size(head, 0)[1]
        return None

    def iter_headers(self, position: int, end: int | None = None):
        """Yield batch headers from ``position`` to ``end`` (reads in chunks)."""
        end = self.size if end is None else end
        chunk_size = 1 << 20
        while position < end:
            chunk = os.pread(self.fd, min(chunk_size, end - position), position)
            p = 0
            while p + rb.HEADER_SIZE <= len(chunk):
                header = rb.parse_header(chunk, p)
                yield position + p, header
                p += header.size
            if p == 0:
                # a header straddles the chunk boundary; read it alone
                chunk = os.pread(self.fd, rb.HEADER_SIZE, position)
                if len(chunk) < rb.HEADER_SIZE:
                    return
                header = rb.parse_header(chunk, 0)
                yield position, header
                p = header.size
            position += p

    def iter_batches(self, position: int = 0, end: int | None = None):
        """Yield (position, header, bytes) of each batch from ``position`` to ``end``, reading
        in chunks (replays of internal topics: one pread per MiB, not one per batch)."""
        end = self.size if end is None else end
        chunk_size = 1 << 20
        while position < end:
            chunk = os.pread(self.fd, min(chunk_size, end - position), position)
            view = memoryview(chunk)
            p = 0
            while p + rb.HEADER_SIZE <= len(chunk):
                header = rb.parse_header(chunk, p)
                if p + header.size > len(chunk):
                    break
                yield position + p, header, view[p : p + header.size]
                p += header.size
            if p == 0:
                # a batch larger than what was read: read it alone
                head = os.pread(self.fd, rb.HEADER_SIZE, position)
                if len(head) < rb.HEADER_SIZE:
                    return
                header = rb.parse_header(head, 0)
                data = os.pread(self.fd, header.size, position)
                if len(data) < header.size:
                    return
                yield position, header, memoryview(data)
                p = header.size
            position += p

    def split_at(self, position: int, base_offset: int) -> "Segment":
        """Move the batches from ``position`` (a batch boundary whose batch starts at
        ``base_offset``) to a new segment based there; this one ends at ``position``. The new
        file is written and fsynced before this one is cut, so a crash in between leaves the
        batches in both files, and the next recovery splits again (the new file is replaced)."""
        new_path = os.path.join(self.directory, segment_name(base_offset, ".log"))
        tmp = new_path + ".split"
        end = os.fstat(self.fd).st_size
        with open(tmp, "wb") as out:
            pos = position
            while pos < end:
                chunk = os.pread(self.fd, min(1 << 20, end - pos), pos)
                if not chunk:
                    break
                out.write(chunk)
                pos += len(chunk)
            out.flush()
            os.fsync(out.fileno())
        for suffix in (".index", ".timeindex"):  # stale ones from an interrupted split
            try:
                os.unlink(os.path.join(self.directory, segment_name(base_offset, suffix)))
            except FileNotFoundError:
                pass
        os.replace(tmp, new_path)
        dir_fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        self.truncate_to(position, base_offset)
        os.fsync(self.fd)
        return Segment(self.directory, base_offset, index_interval=self.index_interval)

    def truncate_to(self, size: int, next_offset: int) -> None:
        """Drop bytes at and after ``size`` (a batch boundary) and the index entries for them."""
        os.ftruncate(self.fd, size)
        self.size = size
        self.next_offset = next_offset
        self.load_indexes(valid_size=size)
        self._bytes_since_index = self.index_interval  # next batch gets an index entry

    def flush(self) -> None:
        os.fsync(self.fd)
        for fd in (self._index_fd, self._time_fd):
            if fd is not None:
                os.fsync(fd)

    def close(self, *, write_index: bool = True) -> None:
        if write_index and self.fd >= 0:
            self.write_index()
        self.close_indexes()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def delete(self) -> None:
        self.close(write_index=False)
        for path in (self.log_path, self.index_path, self.time_path):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def last_index_entry(self) -> tuple[int, int]:
        """(offset, position) of the last index entry, or (base_offset, 0)."""
        self._ensure_index()
        if not self._index_rel:
            return self.base_offset, 0
        return self.base_offset + self._index_rel[-1], self._index_pos[-1]


_LITTLE = struct.pack("=i", 1) == struct.pack("<i", 1)
_PAGE = 4096


def _new_page(written: int, index: int, entry_size: int) -> bool:
    """Whether entry ``index`` (0-based) ends beyond the pages that the ``written`` entries
    already reach in their file (entries before ``index`` never do)."""
    reached = -(-written * entry_size // _PAGE) * _PAGE
    return (index + 1) * entry_size > reached


def _read_file(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return b""


class OffsetOverflow(str):
    """A recovery ``problem`` that is not damage: the batch is valid but its offsets do not fit
    this segment's int32 relative range. The caller splits the segment there (nothing lost)."""


def recover_segment(segment: Segment, position: int, expected_offset: int, *,
                    allow_gaps: bool = False) -> tuple[int, int, str | None]:
    """Validate batches from ``position`` to the end of the file, re-indexing them.

    ``allow_gaps``: compacted logs have gaps between batches; elsewhere a gap is corruption.
    Returns ``(valid_size, next_offset, problem)``: the byte length of the valid prefix, the
    offset after its last batch, and a description of the first invalid batch (None if the
    whole tail was valid). The caller truncates to ``valid_size`` and logs ``problem``, or, for
    an :class:`OffsetOverflow`, moves the bytes from ``valid_size`` on to a new segment.
    """
    import crc32c

    segment.load_indexes(valid_size=position)
    segment._bytes_since_index = segment.index_interval
    file_size = os.fstat(segment.fd).st_size
    pos, next_offset = position, expected_offset
    problem = None
    while pos < file_size:
        head = os.pread(segment.fd, rb.HEADER_SIZE, pos)
        if len(head) < rb.HEADER_SIZE:
            problem = f"torn batch header at byte {pos} ({len(head)} of {rb.HEADER_SIZE} bytes)"
            break
        header = rb.parse_header(head, 0)
        if header.magic != rb.MAGIC_V2 or header.size < rb.HEADER_SIZE:
            problem = f"bad magic {header.magic} or length {header.size} at byte {pos}"
            break
        if pos + header.size > file_size:
            problem = f"torn batch at byte {pos}: {header.size} bytes declared, {file_size - pos} present"
            break
        if header.base_offset < next_offset or (header.base_offset > next_offset and not allow_gaps):
            problem = f"batch at byte {pos} has base offset {header.base_offset}, expected {next_offset}"
            break
        body = os.pread(segment.fd, header.size - 21, pos + 21)
        if crc32c.crc32c(body) != header.crc:
            problem = f"CRC mismatch in batch at byte {pos} (offsets {header.base_offset}..{header.last_offset})"
            break
        if header.last_offset_delta < 0:
            problem = f"negative last offset delta at byte {pos}"
            break
        if not segment.can_hold(header.last_offset) and pos > 0:
            problem = OffsetOverflow(
                f"batch at byte {pos} (offsets {header.base_offset}..{header.last_offset}) is beyond the int32 "
                f"relative range of segment {segment.base_offset}")
            break
        segment._maybe_index(header.base_offset, pos, header.max_timestamp)
        segment._bytes_since_index += header.size
        pos += header.size
        next_offset = header.last_offset + 1
    segment.write_index()  # the rebuilt entries reach the files now, not at the next flush
    segment.size = pos
    segment.next_offset = next_offset
    return pos, next_offset, problem
