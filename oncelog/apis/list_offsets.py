"""ListOffsets (key 2), v1-9.

Timestamps: -1 latest (the HW, or the last stable offset at read_committed), -2 earliest
(log start offset), -3 max timestamp (v7+: the first record with the largest timestamp),
-4 earliest local (v8+; no tiered storage, so the log start offset), -5 latest tiered (v9+;
likewise the latest), >= 0 the first record in offset order whose timestamp is at least the given
one (exact to the record, compressed batches too: the one batch holding it is decompressed), or
-1/-1 when there is none. As in Kafka's Partition.fetchOffsetForTimestamp, the timestamp lookups
only answer fetchable offsets: below the HW, or the last stable offset at read_committed.
"""

from __future__ import annotations

from .. import errors
from ._base import NO_THROTTLE, OK, build, response_module

API_KEY = 2
MIN_VERSION = 1
MAX_VERSION = 9

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5


def lookup(partition, timestamp: int, read_committed: bool) -> tuple[int, int]:
    """(offset, timestamp) answered for one partition."""
    plog = partition.log
    if timestamp in (LATEST, LATEST_TIERED):
        return (partition.last_stable_offset() if read_committed else plog.high_watermark), -1
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return plog.log_start_offset, -1
    if timestamp == MAX_TIMESTAMP:
        found = plog.offset_of_max_timestamp()
    elif timestamp < 0:
        raise errors.InvalidRequest(f"unknown special timestamp {timestamp}")
    else:
        found = plog.offset_for_timestamp(timestamp)
    fetchable = partition.last_stable_offset() if read_committed else plog.high_watermark
    if found is None or found[0] >= fetchable:
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
                partition = ctx.broker.partitions.get(t.name, p.partition_index)
                offset, ts = lookup(partition, p.timestamp, read_committed)
            except errors.KafkaError as exc:
                code = errors.error_code_for(exc, API_KEY, ctx.api_version)
            parts.append(build(m.ListOffsetsPartitionResponse, partition_index=p.partition_index, error_code=code,
                               timestamp=ts, offset=offset, leader_epoch=0, old_style_offsets=()))
        topics.append(m.ListOffsetsTopicResponse(name=t.name, partitions=tuple(parts)))
    return build(m.ListOffsetsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))
