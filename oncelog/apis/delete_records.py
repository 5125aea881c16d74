"""DeleteRecords (key 21), v0-2: advance a partition's log start offset. Offset -1 means the
high watermark. The new start is durable (a file in the partition directory) before the
response; whole segments below it are deleted."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from .. import errors
from ..storage.partition_log import OffsetOutOfRange
from ._base import NO_THROTTLE, OK, build, response_module

API_KEY = 21
MIN_VERSION = 0
MAX_VERSION = 2


async def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    logs = ctx.broker.logs
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            code, low = OK, -1
            try:
                plog = logs.get_log(t.name, p.partition_index)
                offset = plog.high_watermark if p.offset == -1 else p.offset
                async with logs.flusher.lock:
                    low = plog.delete_records(offset)
            except OffsetOutOfRange:
                code = ErrorCode.offset_out_of_range
            except errors.KafkaError as exc:
                code = errors.error_code_for(exc)
            parts.append(m.DeleteRecordsPartitionResult(partition_index=p.partition_index, low_watermark=low,
                                                        error_code=code))
        topics.append(m.DeleteRecordsTopicResult(name=t.name, partitions=tuple(parts)))
    return build(m.DeleteRecordsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))
