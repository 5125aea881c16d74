"""ListOffsets (key 2), v1-9.

Timestamps: -1 latest (the HW, or the last stable offset at read_committed), -2 earliest
(log start offset), -3 max timestamp (v7+), -4 earliest local (v8+; no tiered storage, so the
log start offset), -5 latest tiered (v9+; likewise the latest), >= 0 the first offset whose
timestamp is at least the given one (batch granularity for compressed batches), or -1/-1 when
there is none.
"""

from __future__ import annotations

from .. import errors
from ._base import NO_THROTTLE, OK, build, response_module

API_KEY = 2
MIN_VERSION = 1
MAX_VERSION = 9

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5


def lookup(broker, plog, timestamp: int, read_committed: bool) -> tuple[int, int]:
    """(offset, timestamp) answered for one partition."""
    if timestamp in (LATEST, LATEST_TIERED):
        return (broker.last_stable_offset(plog) if read_committed else plog.high_watermark), -1
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return plog.log_start_offset, -1
    if timestamp == MAX_TIMESTAMP:
        best = None
        for seg in plog.segments:
            for _, header in seg.iter_headers(0):
                if header.last_offset < plog.log_start_offset:
                    continue
                if best is None or header.max_timestamp > best[1]:
                    best = (max(header.base_offset, plog.log_start_offset), header.max_timestamp)
        return best if best else (-1, -1)
    if timestamp < 0:
        raise errors.InvalidRequest(f"unknown special timestamp {timestamp}")
    found = plog.offset_for_timestamp(timestamp)
    if found is None or found[0] >= plog.high_watermark:
        return -1, -1
    return found


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    read_committed = getattr(request, "isolation_level", 0) == 1
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            code, offset, ts = OK, -1, -1
            try:
                plog = ctx.broker.logs.get_log(t.name, p.partition_index)
                offset, ts = lookup(ctx.broker, plog, p.timestamp, read_committed)
            except errors.KafkaError as exc:
                code = errors.error_code_for(exc)
            parts.append(build(m.ListOffsetsPartitionResponse, partition_index=p.partition_index, error_code=code,
                               timestamp=ts, offset=offset, leader_epoch=0, old_style_offsets=()))
        topics.append(m.ListOffsetsTopicResponse(name=t.name, partitions=tuple(parts)))
    return build(m.ListOffsetsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))
