"""ListOffsets (key 2), v1-11.

Timestamps: -1 latest (the HW, or the last stable offset at read_committed), -2 earliest
(log start offset), -3 max timestamp (v7+: the first record with the largest timestamp),
-4 earliest local (v8+; no tiered storage, so the log start offset), >= 0 the first record in
offset order whose timestamp is at least the given one (exact to the record, compressed batches
too: the one batch holding it is decompressed), or -1/-1 when there is none. As in Kafka's
Partition.fetchOffsetForTimestamp, the timestamp lookups only answer fetchable offsets: below
the HW, or the last stable offset at read_committed.

Tiered storage specials, answered as Kafka's UnifiedLog does for a topic without remote
storage: -5 latest tiered (v9+, KIP-1005) and -6 earliest pending upload (v11+, KIP-1023) are
offset -1, timestamp -1, leader epoch -1. A special timestamp the request's version does not
know (or an unknown negative one) gets UNSUPPORTED_VERSION for that partition, as Kafka's
ReplicaManager answers. v10's timeout (KIP-1075) bounds remote-storage lookups: there are none,
every answer is immediate.

A partition named twice in one request is INVALID_REQUEST (answered once), as Kafka's KafkaApis.
A ``current_leader_epoch`` (v4+) other than the leader's 0 is FENCED_LEADER_EPOCH (older) or
UNKNOWN_LEADER_EPOCH (newer), as Kafka's Partition.checkCurrentLeaderEpoch answers.

ACLs (Kafka's KafkaApis.handleListOffsetRequest): DESCRIBE on each topic, else its partitions are
TOPIC_AUTHORIZATION_FAILED.

Version notes:

ListOffsets: v1-11 (v0, deprecated by KIP-896, is not served)

- v1: the oldest served: one offset per partition, with its timestamp.
- v2: ``isolation_level``; the throttle time in the answer.
- v3: the schema of v2; the throttle is applied after the answer (KIP-219).
- v4: ``current_leader_epoch``; the leader epoch in the answer (KIP-320).
- v5: the schema of v4; OFFSET_NOT_AVAILABLE may be answered.
- v6: flexible versions (compact strings and arrays, tagged fields).
- v7: timestamp -3, the max timestamp (KIP-734).
- v8: timestamp -4, the earliest local offset (KIP-405).
- v9: timestamp -5, the latest tiered offset (KIP-1005).
- v10: ``timeout_ms`` for remote lookups (KIP-1075).
- v11: timestamp -6, the earliest pending upload offset (KIP-1023).
"""

from __future__ import annotations

import collections

from kio.schema.errors import ErrorCode

from .. import errors
from . import _authz
from ._base import LEADER_EPOCH, NO_LEADER_EPOCH, NO_THROTTLE, OK, build, check_leader_epoch, response_module

API_KEY = 2
MIN_VERSION = 1
MAX_VERSION = 11

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -1, -2, -3, -4, -5, -6
# The first request version that knows each special timestamp (Kafka's ReplicaManager
# timestampMinSupportedVersion).
SPECIAL_TIMESTAMP_MIN_VERSION = {LATEST: 1, EARLIEST: 1, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9,
                                 EARLIEST_PENDING_UPLOAD: 11}


def lookup(partition, timestamp: int, read_committed: bool) -> tuple[int, int, int]:
    """(offset, timestamp, leader epoch) answered for one partition."""
    plog = partition.log
    if timestamp == LATEST:
        return (partition.last_stable_offset() if read_committed else plog.high_watermark), -1, LEADER_EPOCH
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return plog.log_start_offset, -1, LEADER_EPOCH
    if timestamp in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
        return -1, -1, NO_LEADER_EPOCH  # nothing is (or will be) in remote storage
    if timestamp == MAX_TIMESTAMP:
        found = plog.offset_of_max_timestamp()
    else:
        found = plog.offset_for_timestamp(timestamp)
    fetchable = partition.last_stable_offset() if read_committed else plog.high_watermark
    if found is None or found[0] >= fetchable:
        return -1, -1, NO_LEADER_EPOCH
    return found[0], found[1], LEADER_EPOCH


def unsupported(timestamp: int, version: int) -> bool:
    """Kafka's isListOffsetsTimestampUnsupported."""
    return timestamp < 0 and version < SPECIAL_TIMESTAMP_MIN_VERSION.get(timestamp, 1 << 15)


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    read_committed = getattr(request, "isolation_level", 0) == 1
    topics = []
    described = _authz.filter_topics(ctx, _authz.Op.DESCRIBE, (t.name for t in request.topics))
    named = collections.Counter((t.name, p.partition_index) for t in request.topics for p in t.partitions)
    answered = set()
    for t in request.topics:
        parts = []
        for p in t.partitions:
            code, offset, ts, epoch = OK, -1, -1, NO_LEADER_EPOCH
            if named[(t.name, p.partition_index)] > 1:
                # Kafka's KafkaApis: a partition named twice is INVALID_REQUEST, answered once
                if (t.name, p.partition_index) in answered:
                    continue
                answered.add((t.name, p.partition_index))
                parts.append(build(m.ListOffsetsPartitionResponse, partition_index=p.partition_index,
                                   error_code=ErrorCode.invalid_request, timestamp=-1, offset=-1,
                                   leader_epoch=NO_LEADER_EPOCH, old_style_offsets=()))
                continue
            try:
                if t.name not in described:
                    code = _authz.TOPIC_DENIED
                elif unsupported(p.timestamp, ctx.api_version):  # checked before the partition, as Kafka
                    code = ErrorCode.unsupported_version
                else:
                    partition = ctx.broker.partitions.get(t.name, p.partition_index)
                    check_leader_epoch(t.name, p.partition_index, getattr(p, "current_leader_epoch", -1))
                    offset, ts, epoch = lookup(partition, p.timestamp, read_committed)
            except errors.KafkaError as exc:
                code = errors.error_code_for(exc)
            parts.append(build(m.ListOffsetsPartitionResponse, partition_index=p.partition_index, error_code=code,
                               timestamp=ts, offset=offset, leader_epoch=epoch, old_style_offsets=()))
        topics.append(m.ListOffsetsTopicResponse(name=t.name, partitions=tuple(parts)))
    return build(m.ListOffsetsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))
