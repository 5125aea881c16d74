"""Offset arithmetic of the source, sans-IO.

A source offset is ``{"topic": {"partition": next_offset}}``. Spark compares offsets as JSON
strings, so :func:`canonical` always emits sorted keys and int values: two equal positions
must give equal strings, or Spark runs empty micro-batches forever.

Invariants kept by the functions here:
- an end offset never passes a partition's last stable offset (the caller passes the LSO as
  the available end) and never moves backwards from the start;
- :func:`rate_limit` splits ``maxOffsetsPerTrigger`` across partitions in proportion to their
  lag, exactly as Spark's ``KafkaMicroBatchStream.rateLimit`` (a share below 1 rounds up, a
  share above 1 rounds down);
- :func:`ranges` is deterministic for a given (start, end): same order, same ranges, so a
  replayed batch reads the same partitions in the same tasks.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

Offsets = dict[tuple[str, int], int]

# A start position not yet resolved: the end of the partition when the first batch is planned.
LATEST = -1


def to_json(offsets: Offsets) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def canonical(offsets: Offsets) -> dict[str, dict[str, int]]:
    """The dict Spark will ``json.dumps``: built in sorted order (dicts keep insertion order,
    and Spark's JSON serialisation keeps it), with partitions sorted numerically."""
    out: dict[str, dict[str, int]] = {}
    for topic in sorted({t for t, _ in offsets}):
        parts = sorted(p for t, p in offsets if t == topic)
        out[topic] = {str(p): int(offsets[(topic, p)]) for p in parts}
    return out


def from_json(value: dict | str | None) -> Offsets:
    if value is None:
        return {}
    if isinstance(value, str):
        value = json.loads(value)
    return {(topic, int(p)): int(off) for topic, parts in value.items() for p, off in parts.items()}


def rate_limit(start: Offsets, available: Offsets, limit: int | None, new_start: Offsets | None = None) -> Offsets:
    """End offsets for the next batch: ``available`` capped so that at most ``limit`` offsets
    are read in total, split by lag (Spark's rule). ``new_start`` gives start positions of
    partitions not in ``start`` (new partitions)."""
    new_start = new_start or {}

    def begin(tp):
        return start.get(tp, new_start.get(tp, 0))

    if limit is None:
        return dict(available)
    sizes = {tp: end - begin(tp) for tp, end in available.items() if end - begin(tp) > 0}
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(available)
    out = {}
    for tp, end in available.items():
        if tp in sizes:
            prorate = limit * (sizes[tp] / total)
            step = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
            out[tp] = min(end, begin(tp) + step)
        else:
            out[tp] = end
    return out


def total_lag(start: Offsets, end: Offsets, new_start: Offsets | None = None) -> int:
    new_start = new_start or {}
    return sum(max(0, e - start.get(tp, new_start.get(tp, 0))) for tp, e in end.items())


@dataclass(frozen=True)
class OffsetRange:
    """One Spark input partition: read ``topic``/``partition`` from ``start`` to ``end``
    (exclusive). ``start`` of a partition new in this batch is 0: if the log no longer starts
    at 0 the reader reports data loss, as Spark does for an added partition."""

    topic: str
    partition: int
    start: int
    end: int


def ranges(start: Offsets, end: Offsets) -> list[OffsetRange]:
    out = []
    for (topic, partition) in sorted(end):
        s = start.get((topic, partition), 0)
        e = end[(topic, partition)]
        if s == LATEST:
            s = e
        if e > s:
            out.append(OffsetRange(topic, partition, s, e))
    return out


def _divide(r: OffsetRange, parts: int) -> list[OffsetRange]:
    """``r`` cut into ``parts`` consecutive ranges of near-equal size, the last ones taking the
    rounding (Spark's getDividedPartition)."""
    out = []
    remaining = r.end - r.start
    start = r.start
    for part in range(parts):
        size = remaining // (parts - part)
        remaining -= size
        end = min(start + size, r.end)
        out.append(OffsetRange(r.topic, r.partition, start, end))
        start = end
    return out


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None = None,
                 max_records: int | None = None) -> list[OffsetRange]:
    """Spark's KafkaOffsetRangeCalculator.getRanges (4.x): drop empty ranges; with
    ``maxRecordsPerPartition`` cut every range into ceil(size / max) parts; then, when fewer
    ranges than ``minPartitions`` remain, cut the large ones further in proportion to their
    size (a range whose share rounds to one part stays whole). Deterministic: the same input
    gives the same ranges in the same order, so a replayed batch has the same read tasks."""
    ranges = [r for r in ranges if r.end > r.start]
    if (min_partitions is None or len(ranges) >= min_partitions) and max_records is None:
        return ranges
    if max_records is not None:
        ranges = [p for r in ranges for p in _divide(r, math.ceil((r.end - r.start) / max_records))
                  if p.end > p.start]
    if min_partitions is None or min_partitions <= len(ranges):
        return ranges

    def part_count(size: int, total: int, parts: int) -> int:
        # Scala's math.round: half up
        return max(math.floor(size / total * parts + 0.5), 1)

    total = sum(r.end - r.start for r in ranges)
    unsplit = [r for r in ranges if part_count(r.end - r.start, total, min_partitions) == 1]
    unsplit_tps = {(r.topic, r.partition) for r in unsplit}
    split_total = total - sum(r.end - r.start for r in unsplit)
    split_min = max(min_partitions - len(unsplit), 1)
    out = []
    for r in ranges:
        parts = 1 if (r.topic, r.partition) in unsplit_tps else part_count(r.end - r.start, split_total, split_min)
        out += [p for p in _divide(r, parts) if p.end > p.start]
    return out
