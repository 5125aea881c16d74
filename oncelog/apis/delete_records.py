"""DeleteRecords (key 21), v0-2: advance a partition's log start offset. Offset -1 means the
high watermark. The new start is durable (a file in the partition directory) before the
response; whole segments below it are deleted, and the partition trims the producer state and
aborted transactions it no longer needs (:meth:`oncelog.partition.Partition.delete_records`).

ACLs (Kafka's KafkaApis.handleDeleteRecordsRequest): DELETE on the topic, else its partitions are
TOPIC_AUTHORIZATION_FAILED and keep their records.

Version notes:

DeleteRecords: v0-2

- v0: the oldest served.
- v1: the schema of v0; the throttle is applied after the answer (KIP-219).
- v2: flexible versions (compact strings and arrays, tagged fields).
"""

from __future__ import annotations

from .. import errors
from . import _authz
from ._base import NO_THROTTLE, OK, build, response_module

API_KEY = 21
MIN_VERSION = 0
MAX_VERSION = 2


async def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    partitions = ctx.broker.partitions
    topics = []
    deletable = _authz.filter_topics(ctx, _authz.Op.DELETE, (t.name for t in request.topics))
    for t in request.topics:
        parts = []
        for p in t.partitions:
            code, low = OK, -1
            if t.name not in deletable:
                parts.append(m.DeleteRecordsPartitionResult(partition_index=p.partition_index, low_watermark=-1,
                                                            error_code=_authz.TOPIC_DENIED))
                continue
            try:
                partition = partitions.get(t.name, p.partition_index)
                offset = partition.log.high_watermark if p.offset == -1 else p.offset
                async with partitions.flusher.lock:
                    low = partition.delete_records(offset)
            except errors.KafkaError as exc:  # OFFSET_OUT_OF_RANGE among them
                code = errors.error_code_for(exc)
            parts.append(m.DeleteRecordsPartitionResult(partition_index=p.partition_index, low_watermark=low,
                                                        error_code=code))
        topics.append(m.DeleteRecordsTopicResult(name=t.name, partitions=tuple(parts)))
    return build(m.DeleteRecordsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))
