"""Log compaction for ``cleanup.policy=compact`` topics (``__consumer_offsets`` and clients' topics).

Keeps, for every key, only its latest record (a tombstone is kept until ``delete.retention.ms``
after it was written, so replays see the delete); applies to the cleanable closed segments of a
partition (``min.compaction.lag.ms``), which are rewritten into one, when enough of them is new
(``min.cleanable.dirty.ratio``) or new data waited too long (``max.compaction.lag.ms``).
Compressed batches are decompressed, filtered and recompressed with their codec. Surviving
records keep their offsets, so a compacted batch may have gaps — as Kafka's do.

Transactions, as Kafka's LogCleaner (a compacted topic written in transactions, such
as a query's commit log of decisions, kept every transaction and its marker, and grew with
time). A transaction's batches are those of its producer id up to its COMMIT/ABORT marker; the
scan of the whole log (active segment included) finds each one's outcome first:

* committed: its records are compacted like any other (and supersede older ones);
* aborted: its batches are removed (no reader returns them);
* undecided (no marker yet): the cleaner stops before its first batch, as Kafka's stops at the
  last stable offset — segments from there on are not rewritten and their records supersede
  nothing (the transaction may still abort, and a read_committed reader sees nothing past it);
* a marker stays while any batch of its transaction does; after that, for
  ``delete.retention.ms`` after it was written (a reader part-way through the transaction still
  needs it), then it goes too.

Records that cannot be read (over the decompression limit, malformed: stored before validation)
keep their batch whole, and their transaction's marker.

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
import struct

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


class _Txn:
    """One transaction of a producer id in this log, as the cleaner's scan finds it."""

    __slots__ = ("outcome", "marker_ts", "records", "kept")

    def __init__(self) -> None:
        self.outcome: bool | None = None  # True committed, False aborted, None undecided
        self.marker_ts = -1
        self.records: list[tuple[bytes, int]] = []  # (key, offset) awaiting the outcome
        self.kept = False  # a batch of it survives the rewrite (so its marker does)


def _commit_of(batch) -> bool:
    """Whether a control batch is a COMMIT marker (else ABORT)."""
    try:
        return rb.control_type(batch) == rb.CONTROL_COMMIT
    except ValueError:  # no record, or no type: not a COMMIT
        return False


def _transactions(plog) -> tuple[dict[tuple[int, int], _Txn], int | None]:
    """Every transactional or control batch's transaction, by (segment base, position), from a
    scan of the headers of the whole log (and of the markers' records); and the first offset of
    the first transaction still undecided (the last stable offset), None when there is none."""
    open_txns: dict[int, tuple[_Txn, int]] = {}  # producer id -> (its transaction, first offset)
    txns: dict[tuple[int, int], _Txn] = {}
    for seg in list(plog.segments):
        for pos, h in seg.iter_headers(0):
            if h.is_control:
                txn = open_txns.pop(h.producer_id, (_Txn(), -1))[0]
                txn.outcome, txn.marker_ts = _commit_of(seg.read(pos, h.size)), h.max_timestamp
                txns[(seg.base_offset, pos)] = txn
            elif h.is_transactional:
                txn = open_txns.get(h.producer_id, (None,))[0]
                if txn is None:
                    txn = _Txn()
                    open_txns[h.producer_id] = (txn, h.base_offset)
                txns[(seg.base_offset, pos)] = txn
    return txns, min((first for _, first in open_txns.values()), default=None)


def _latest(scope: list, txns: dict[tuple[int, int], _Txn], limit: int) -> dict[bytes, int]:
    """The latest offset of every key (later data supersedes) in ``scope``: plain records and
    committed transactions' records, never aborted ones (the caller keeps ``scope`` below the
    last stable offset, so no record is of an undecided transaction)."""
    latest: dict[bytes, int] = {}
    for seg in scope:
        for pos, h in seg.iter_headers(0):
            if h.is_control:
                continue
            txn = txns.get((seg.base_offset, pos))
            if txn is not None and not txn.outcome:
                continue
            for offset, _, key, *_ in _keyed_records(seg.read(pos, h.size), limit) or ():
                if key is not None:
                    latest[key] = offset
    return latest


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
    # Pass 1: the transactions, and the latest offset of every key below the last stable offset
    # (as Kafka's cleaner, which stops there: a record of an undecided transaction, or one after
    # it, which a read_committed reader cannot see yet, supersedes nothing and is not cleaned).
    txns, stable = _transactions(plog)
    if stable is not None:
        closed = [seg for seg in closed if seg.next_offset <= stable]
        if not closed or (len(closed) == 1 and closed[0].size == 0):
            return 0
    scope = plog.segments if plog.config.min_compaction_lag_ms <= 0 else closed
    if stable is not None:
        scope = [seg for seg in scope if seg.next_offset <= stable]
    latest = _latest(scope, txns, limit)
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
        _write_cleaned(cleaned, closed, latest, txns, limit, now_ms, delete_retention_ms)
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


def _write_cleaned(cleaned: str, closed: list, latest: dict[bytes, int], txns: dict[tuple[int, int], _Txn],
                   limit: int, now_ms: int, delete_retention_ms: int) -> None:
    """Pass 2's output: the kept batches of ``closed``, written to ``cleaned`` and fsynced. A
    marker comes after its transaction's batches, so whether any of them was kept is known
    when it is reached."""
    with open(cleaned, "wb") as out:
        for seg in closed:
            for pos, h in seg.iter_headers(0):
                txn = txns.get((seg.base_offset, pos))
                if h.is_control:
                    if txn is None or txn.kept or now_ms - txn.marker_ts < delete_retention_ms:
                        out.write(seg.read(pos, h.size))
                    continue
                if txn is not None and txn.outcome is False:
                    continue  # an aborted transaction's batch
                batch = seg.read(pos, h.size)
                records = None if txn is not None and txn.outcome is None else _keyed_records(batch, limit)
                if records is None:  # unreadable (or undecided, which pass 1 keeps out): kept whole
                    out.write(batch)
                    if txn is not None:
                        txn.kept = True
                    continue
                kept = [r for r in records
                        if r[2] is None or (latest.get(r[2]) == r[0]
                                            and (r[3] is not None or now_ms - r[1] < delete_retention_ms))]
                if len(kept) == h.record_count:
                    out.write(batch)
                elif kept:
                    out.write(_rebuild(h, kept))
                if kept and txn is not None:
                    txn.kept = True
        out.flush()
        os.fsync(out.fileno())


def _rebuild(h: rb.BatchHeader, kept) -> bytes:
    """A batch of the kept records with their original offsets, timestamps, keys, values and
    headers (each record's bytes are copied; only its deltas are re-encoded against the new
    first record), compressed with the original batch's codec."""
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
