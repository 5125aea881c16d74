"""Log compaction for ``cleanup.policy=compact`` topics (``__consumer_offsets``).

Keeps, for every key, only its latest record (a tombstone is kept until ``delete_retention_ms``
after it was written, so replays see the delete); applies to the closed segments of a
partition, which are rewritten into one. Batches that are compressed, transactional or control
batches are kept whole (conservative: never drops what it cannot reason about). Surviving
records keep their offsets, so a compacted batch may have gaps — as Kafka's do.

Crash safety (as Kafka's cleaner): the result is written to ``<base>.log.cleaned`` and fsynced,
renamed to ``<base>.log.swap``, the replaced segments are deleted, and the swap is renamed to
``<base>.log``. At start-up (:func:`finish_interrupted_swaps`) a ``.cleaned`` file is deleted
(the old segments are intact) and a ``.swap`` file is completed.
"""

from __future__ import annotations

import logging
import os

from ..protocol import records as rb
from .segment import Segment, segment_name

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


def _keyed_records(batch: bytes):
    return [(offset, ts, key, value) for offset, ts, key, value in rb.iter_records(batch)]


def _compactable(h: rb.BatchHeader) -> bool:
    return not (h.compression or h.is_transactional or h.is_control)


def compact(plog, now_ms: int, delete_retention_ms: int = 24 * 3600 * 1000) -> int:
    """Compact the closed segments of ``plog`` into one; returns the bytes saved."""
    closed = [s for s in plog.segments[:-1] if s not in plog.pending_closed]
    if len(closed) < 2 and not (closed and closed[0].size > 0):
        return 0
    # Pass 1: the latest offset of every key, over the whole log (later data supersedes).
    latest: dict[bytes, int] = {}
    for seg in plog.segments:
        for pos, h in seg.iter_headers(0):
            if _compactable(h):
                for offset, _, key, _ in _keyed_records(seg.read(pos, h.size)):
                    if key is not None:
                        latest[key] = offset
    # Pass 2: rewrite the closed segments.
    base = closed[0].base_offset
    directory = plog.directory
    cleaned = os.path.join(directory, segment_name(base, ".log.cleaned"))
    before = sum(s.size for s in closed)
    with open(cleaned, "wb") as out:
        for seg in closed:
            for pos, h in seg.iter_headers(0):
                batch = seg.read(pos, h.size)
                if not _compactable(h):
                    out.write(batch)
                    continue
                kept = [(o, ts, k, v) for o, ts, k, v in _keyed_records(batch)
                        if k is None or (latest.get(k) == o and (v is not None or now_ms - ts < delete_retention_ms))]
                if len(kept) == h.record_count:
                    out.write(batch)
                elif kept:
                    out.write(_rebuild(h, kept))
        out.flush()
        os.fsync(out.fileno())
    swap = os.path.join(directory, segment_name(base, ".log.swap"))
    os.replace(cleaned, swap)
    for seg in closed:
        seg.delete()
    final = os.path.join(directory, segment_name(base, ".log"))
    os.replace(swap, final)
    replacement = Segment(directory, base, index_interval=plog.config.index_interval_bytes)
    from .segment import recover_segment

    recover_segment(replacement, 0, base, allow_gaps=True)
    replacement.next_offset = plog.segments[len(closed)].base_offset
    plog.segments[: len(closed)] = [replacement]
    plog.bases = [s.base_offset for s in plog.segments]
    return before - replacement.size


def _rebuild(h: rb.BatchHeader, kept) -> bytes:
    """A batch of the kept records with their original offsets and timestamps."""
    import struct

    import crc32c

    first = kept[0][0]
    body = b"".join(rb.encode_record(o - first, ts - kept[0][1], k, v) for o, ts, k, v in kept)
    tail = struct.pack(">hiqqqhii", h.attributes, kept[-1][0] - first, kept[0][1], max(ts for _, ts, _, _ in kept),
                       h.producer_id, h.producer_epoch, h.base_sequence, len(kept)) + body
    return struct.pack(">qiibI", first, len(tail) + 9, 0, rb.MAGIC_V2, crc32c.crc32c(tail)) + tail
