"""Log compaction for ``cleanup.policy=compact`` topics (``__consumer_offsets`` and clients' topics).

Keeps, for every key, only its latest record (a tombstone is kept until ``delete.retention.ms``
after it was written, so replays see the delete); applies to the cleanable closed segments of a
partition (``min.compaction.lag.ms``), which are rewritten into one, when enough of them is new
(``min.cleanable.dirty.ratio``) or new data waited too long (``max.compaction.lag.ms``).
Compressed batches are decompressed, filtered and recompressed with their codec. Transactional
and control batches are kept whole (conservative: never drops what it cannot reason about). Surviving
records keep their offsets, so a compacted batch may have gaps — as Kafka's do.

Crash safety (as Kafka's cleaner): the result is written to ``<base>.log.cleaned`` and fsynced,
renamed to ``<base>.log.swap``, the replaced segments are deleted, and the swap is renamed to
``<base>.log``. At start-up (:func:`finish_interrupted_swaps`) a ``.cleaned`` file is deleted
(the old segments are intact) and a ``.swap`` file is completed. A pass that cannot write its
``.cleaned`` file (a full disk) deletes it and raises, the segments as they were; the caller
tries again on its next run.
"""

from __future__ import annotations

import logging
import os

from ..protocol import records as rb
from .files import atomic_write
from .segment import MAX_RELATIVE_OFFSET, Segment, segment_name

COMPACTED_MARKER = "compacted"  # also partition_log.COMPACTED_MARKER

log = logging.getLogger("oncelog.storage")


def finish_interrupted_swaps(directory: str) -> None:
    names = os.listdir(directory)
    for name in names:
        if name.endswith(".cleaned"):
            os.unlink(os.path.join(directory, name))
    for name in names:
        if not name.endswith(".log.swap"):
            continue
        base = int(name.split(".")[0])
        path = os.path.join(directory, name)
        next_offset = _next_offset_of(path, base)
        for other in os.listdir(directory):
            stem, _, suffix = other.partition(".")
            if stem.isdigit() and base <= int(stem) < next_offset and suffix in ("log", "index", "timeindex"):
                os.unlink(os.path.join(directory, other))
        os.replace(path, os.path.join(directory, segment_name(base, ".log")))
        log.info("completed an interrupted compaction swap in %s", directory)


def _next_offset_of(path: str, base: int) -> int:
    nxt = base
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos + rb.HEADER_SIZE <= len(data):
        h = rb.parse_header(data, pos)
        nxt = h.last_offset + 1
        pos += h.size
    return nxt


def _keyed_records(batch: bytes, limit: int) -> list | None:
    """(offset, timestamp, key, value, attributes, rest) of each record: see rb.iter_records_raw;
    None for a batch that cannot be read within the decompression ``limit`` (or whose records are
    malformed, stored before validation): the cleaner keeps such a batch whole."""
    try:
        return list(rb.iter_records_raw(batch, limit))
    except (ValueError, IndexError) as exc:
        log.warning("compaction keeps an unreadable batch whole: %s", exc)
        return None


def _compactable(h: rb.BatchHeader) -> bool:
    return not (h.is_transactional or h.is_control)


def cleanable_segments(plog, now_ms: int) -> list:
    """The closed segments the cleaner may rewrite: all flushed closed segments, or with
    min.compaction.lag.ms the leading ones whose newest record is at least that old (Kafka's
    first uncleanable offset)."""
    closed = [s for s in plog.segments[:-1] if s not in plog.pending_closed]
    # They are merged into one segment based at the first one's base offset: every offset must
    # fit its int32 relative indexes (Kafka's groupSegmentsBySize bounds a group the same way).
    for n, seg in enumerate(closed):
        if seg.next_offset - 1 - closed[0].base_offset > MAX_RELATIVE_OFFSET:
            closed = closed[:n]
            break
    lag = plog.config.min_compaction_lag_ms
    if lag <= 0:
        return closed
    out = []
    for seg in closed:
        seg._ensure_index()
        if seg.max_timestamp > now_ms - lag:
            break
        out.append(seg)
    return out


def needs_compaction(plog, now_ms: int) -> bool:
    """Kafka's LogCleanerManager choice: the dirty part (written since the last compaction) of
    the cleanable segments is at least min.cleanable.dirty.ratio of them, or its oldest record
    is older than max.compaction.lag.ms."""
    cfg = plog.config
    segments = cleanable_segments(plog, now_ms)
    dirty = [s for s in segments if s.next_offset > plog.cleaned_offset and s.size > 0]
    if not dirty:
        return False
    total = sum(s.size for s in segments)
    if sum(s.size for s in dirty) / total >= cfg.min_cleanable_dirty_ratio:
        return True
    if cfg.max_compaction_lag_ms < (1 << 63) - 1:
        first = dirty[0].read(0, rb.HEADER_SIZE)
        if len(first) == rb.HEADER_SIZE and now_ms - rb.parse_header(first).base_timestamp > cfg.max_compaction_lag_ms:
            return True
    return False


def compact(plog, now_ms: int, delete_retention_ms: int | None = None) -> int:
    """Compact the cleanable closed segments of ``plog`` (:func:`cleanable_segments`) into one;
    returns the bytes saved. Tombstones are kept for delete.retention.ms after their timestamp
    (Kafka counts from when the cleaner first saw them: KIP-534; the record's timestamp is the
    same or earlier). With min.compaction.lag.ms, records of segments too young to clean do not
    supersede older ones yet; without it the whole log (active segment included) does."""
    if delete_retention_ms is None:
        delete_retention_ms = plog.config.delete_retention_ms
    closed = cleanable_segments(plog, now_ms)
    if len(closed) < 2 and not (closed and closed[0].size > 0):
        return 0
    limit = rb.decompressed_limit(plog.config.max_message_bytes)
    # Pass 1: the latest offset of every key (later data supersedes).
    latest: dict[bytes, int] = {}
    for seg in (plog.segments if plog.config.min_compaction_lag_ms <= 0 else closed):
        for pos, h in seg.iter_headers(0):
            if _compactable(h):
                for offset, _, key, *_ in _keyed_records(seg.read(pos, h.size), limit) or ():
                    if key is not None:
                        latest[key] = offset
    # Pass 2: rewrite the closed segments. First make it durable that this log may now have
    # offset gaps, whatever its cleanup.policy becomes later (recovery reads the marker).
    base = closed[0].base_offset
    directory = plog.directory
    marker = os.path.join(directory, COMPACTED_MARKER)
    if not os.path.exists(marker):
        atomic_write(marker, "")
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)  # the marker's name is durable before any rewritten segment's
        finally:
            os.close(fd)
    cleaned = os.path.join(directory, segment_name(base, ".log.cleaned"))
    before = sum(s.size for s in closed)
    try:
        _write_cleaned(cleaned, closed, latest, limit, now_ms, delete_retention_ms)
    except BaseException:
        # A full disk: the old segments are intact; the partial result must not hold the space.
        try:
            os.unlink(cleaned)
        except OSError:
            pass
        raise
    swap = os.path.join(directory, segment_name(base, ".log.swap"))
    os.replace(cleaned, swap)
    for seg in closed:
        seg.delete()
    final = os.path.join(directory, segment_name(base, ".log"))
    os.replace(swap, final)
    # Opening it writes only its index files, and those may fail (the segment then serves from
    # its in-memory index: see oncelog.storage.segment), so the swap is never left half done.
    replacement = Segment(directory, base, index_interval=plog.config.index_interval_bytes)
    from .segment import recover_segment

    recover_segment(replacement, 0, base, allow_gaps=True)
    replacement.next_offset = plog.segments[len(closed)].base_offset
    plog.segments[: len(closed)] = [replacement]
    plog.bases = [s.base_offset for s in plog.segments]
    plog.cleaned_offset = replacement.next_offset
    return before - replacement.size


def _write_cleaned(cleaned: str, closed: list, latest: dict[bytes, int], limit: int, now_ms: int,
                   delete_retention_ms: int) -> None:
    """Pass 2's output: the kept batches of ``closed``, written to ``cleaned`` and fsynced."""
    with open(cleaned, "wb") as out:
        for seg in closed:
            for pos, h in seg.iter_headers(0):
                batch = seg.read(pos, h.size)
                if not _compactable(h):
                    out.write(batch)
                    continue
                records = _keyed_records(batch, limit)
                if records is None:
                    out.write(batch)
                    continue
                kept = [r for r in records
                        if r[2] is None or (latest.get(r[2]) == r[0]
                                            and (r[3] is not None or now_ms - r[1] < delete_retention_ms))]
                if len(kept) == h.record_count:
                    out.write(batch)
                elif kept:
                    out.write(_rebuild(h, kept))
        out.flush()
        os.fsync(out.fileno())


def _rebuild(h: rb.BatchHeader, kept) -> bytes:
    """A batch of the kept records with their original offsets, timestamps, keys, values and
    headers (each record's bytes are copied; only its deltas are re-encoded against the new
    first record), compressed with the original batch's codec."""
    import struct

    import crc32c

    first, first_ts = kept[0][0], kept[0][1]
    body = b"".join(rb.encode_raw_record(o - first, ts - first_ts, attrs, rest) for o, ts, _, _, attrs, rest in kept)
    if h.compression:
        body = rb.compress_records(h.compression, body)
    log_append = h.attributes & rb.ATTR_TIMESTAMP_TYPE  # every record has the batch's append time
    max_ts = h.max_timestamp if log_append else max(r[1] for r in kept)
    tail = struct.pack(">hiqqqhii", h.attributes, kept[-1][0] - first, first_ts, max_ts,
                       h.producer_id, h.producer_epoch, h.base_sequence, len(kept)) + body
    return struct.pack(">qiibI", first, len(tail) + 9, 0, rb.MAGIC_V2, crc32c.crc32c(tail)) + tail
