"""Fetch (key 1), v4-18.

Reads whole batches as stored (never re-encoded): per partition up to ``partition_max_bytes``,
for the response up to ``max_bytes``, except that the first batch of the first partition with
data is returned even when larger (KIP-74), so a consumer always makes progress; a later
partition whose next batch does not fit in what is left gets no data (as Kafka's
``minOneMessage`` = false), so a response never exceeds ``fetch.max.bytes`` by more than that
one batch. Reads stop at
the high watermark (read_uncommitted) or the last stable offset (read_committed; equal to the
HW until transactions exist). Long poll: when fewer than ``min_bytes`` are ready the request
waits on the partitions it names until data arrives or ``max_wait`` passes; a request that names
no partition (a Java consumer's close of its fetch session: epoch -1, nothing to read) is
answered at once, as Kafka's ReplicaManager.fetchMessages does.

Fetch sessions (KIP-227): not kept. Every response carries session id 0, which tells the client
no session was created, so it keeps sending full fetch requests; a request naming a session id
gets FETCH_SESSION_ID_NOT_FOUND, after which clients fall back the same way.
v13+ names topics by id; an unknown id gets UNKNOWN_TOPIC_ID. Leader epochs (the one leader's
is 0): a ``current_leader_epoch`` other than 0 is FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH;
``last_fetched_epoch`` (v12+) is checked as Kafka's Partition.readRecords does (KIP-320). v18 adds a follower's high
watermark (KIP-1166), a tagged field consumers leave at its default: nothing to do here.

ACLs (Kafka's KafkaApis.handleFetchRequest): READ on each topic, else its partitions are
TOPIC_AUTHORIZATION_FAILED with no data (the request still answers at once, as for any error).

Version notes:

Fetch: v4-18 (v0-3, deprecated by KIP-896, are not served)

- v4: the oldest served: ``isolation_level`` and aborted transactions (magic-v2 batches, KIP-98).
- v5: ``log_start_offset`` in the request and the answer.
- v6: the schema of v5; KAFKA_STORAGE_ERROR may be answered.
- v7: fetch sessions (KIP-227): ``session_id``, ``session_epoch``, ``forgotten_topics_data``.
- v8: the schema of v7; the throttle is applied after the answer (KIP-219).
- v9: ``current_leader_epoch`` (KIP-320).
- v10: the schema of v9; zstd batches may be returned (KIP-110).
- v11: ``rack_id`` (KIP-392) and ``preferred_read_replica`` in the answer.
- v12: flexible versions (compact strings and arrays, tagged fields); ``last_fetched_epoch``, the
  diverging epoch and the current leader in the answer.
- v13: topics by id, not name (KIP-516); UNKNOWN_TOPIC_ID may be answered.
- v14: the schema of v13; OFFSET_MOVED_TO_TIERED_STORAGE may be answered (KIP-405).
- v15: ``replica_state`` replaces ``replica_id`` (KIP-903).
- v16: ``node_endpoints`` in the answer (KIP-951).
- v17: a follower's directory id (KIP-853).
- v18: a follower's high watermark (KIP-1166).
"""

from __future__ import annotations

import asyncio
import time

from kio.schema.errors import ErrorCode

from .. import errors
from . import _authz
from ._base import (LEADER_EPOCH, NO_LEADER_EPOCH, NO_THROTTLE, OK, build, check_leader_epoch, last_wins,
                    response_module)

API_KEY = 1
MIN_VERSION = 4
MAX_VERSION = 18

READ_COMMITTED = 1


def handle(ctx, request):
    v = ctx.api_version
    # a partition named twice: the last one counts (FetchRequest.fetchData is a LinkedHashMap)
    request = last_wins(request, "topics", "partitions", lambda t: t.topic_id if v >= 13 else t.topic,
                        lambda p: p.partition)
    if v >= 7 and request.session_id not in (0, None):
        return _error_response(ctx, ErrorCode.fetch_session_id_not_found)
    result, total, has_error = _collect(ctx, request)
    max_wait_s = request.max_wait.total_seconds()
    # A request naming no partition is answered at once, as Kafka does (fetchInfos.isEmpty): a
    # Java consumer's close sends one to end its fetch session and waits for the answer.
    named = any(t.partitions for t in request.topics)
    if total >= request.min_bytes or max_wait_s <= 0 or has_error or not named:
        return _response(ctx, result)
    return _long_poll(ctx, request, time.monotonic() + max_wait_s)


async def _long_poll(ctx, request, deadline):
    loop = asyncio.get_running_loop()
    logs = _logs_named(ctx, request)
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not await wait_for_data(logs, loop.create_future(), remaining):
            break
        result, total, has_error = _collect(ctx, request)
        if total >= request.min_bytes or has_error:
            return _response(ctx, result)
    result, _, _ = _collect(ctx, request)
    return _response(ctx, result)


async def wait_for_data(logs, fut, timeout: float) -> bool:
    """Wait until an append to one of ``logs`` (or whoever else holds ``fut``) wakes ``fut``, at
    most ``timeout`` seconds; whether it was woken. Only an append empties a log's waiters, so a
    wait that ends otherwise takes its future back: a consumer polling an idle partition for
    weeks would grow the list forever."""
    for plog in logs:
        plog.waiters.append(fut)
    try:
        await asyncio.wait_for(fut, timeout)
        return True
    except asyncio.TimeoutError:
        return False
    finally:
        if not (fut.done() and not fut.cancelled()):  # not woken: the logs still hold it
            for plog in logs:
                try:
                    plog.waiters.remove(fut)
                except ValueError:
                    pass


def _topic_key(ctx, t):
    """(name, topic_id) of a request topic; the name is None for an unknown id."""
    if ctx.api_version >= 13:
        topic = ctx.broker.metadata.topics.by_id.get(t.topic_id)
        return (topic.name if topic else None), t.topic_id
    return t.topic, None


def _logs_named(ctx, request):
    logs = []
    for t in request.topics:
        name, _ = _topic_key(ctx, t)
        for p in t.partitions:
            try:
                logs.append(ctx.broker.partitions.get(name, p.partition).log)
            except errors.KafkaError:
                pass
    return logs


def _collect(ctx, request):
    broker = ctx.broker
    read_committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
    budget = request.max_bytes if ctx.api_version >= 3 else 1 << 31
    total = 0
    has_error = False
    result = []
    readable = _authz.filter_topics(ctx, _authz.Op.READ, (_topic_key(ctx, t)[0] for t in request.topics))
    for t in request.topics:
        name, topic_id = _topic_key(ctx, t)
        parts = []
        for p in t.partitions:
            entry = [p.partition, OK, -1, -1, -1, None, b""]
            if name is not None and name not in readable:
                entry[1] = _authz.TOPIC_DENIED
                entry[5] = ()  # refused before the read: FetchResponse.partitionResponse's empty list
                has_error = True
                parts.append(entry)
                continue
            try:
                if name is None:
                    raise errors.UnknownTopicId(f"no topic with id {topic_id}")
                partition = broker.partitions.get(name, p.partition)
                # Fetch reads any negative epoch as none (FetchRequest.optionalEpoch); ListOffsets only -1
                check_leader_epoch(name, p.partition, max(getattr(p, "current_leader_epoch", NO_LEADER_EPOCH),
                                                          NO_LEADER_EPOCH))
                plog = partition.log
                hw = plog.high_watermark
                lso = partition.last_stable_offset()
                entry[2:5] = hw, lso, plog.log_start_offset
                diverging = _diverging_epoch(plog, p)
                if diverging is not None:  # answered at once, as Kafka does, without records
                    entry.append(diverging)
                    if read_committed:
                        entry[5] = ()
                    has_error = True
                    parts.append(entry)
                    continue
                upper = lso if read_committed else hw
                limit = min(p.partition_max_bytes, budget - total)
                if limit > 0 or total == 0:
                    # KIP-74: only the first partition with data may exceed the limits (with
                    # its first batch); later ones stop before a batch that does not fit.
                    data = plog.read(p.fetch_offset, max(limit, 1), upper, min_one=total == 0)
                    if read_committed:  # a list even when empty (Kafka's emptyFetchDataInfo)
                        entry[5] = partition.aborted_between(p.fetch_offset, upper) if data else ()
                    entry[6] = data
                    total += len(data)
                elif read_committed:
                    entry[5] = ()
            except errors.KafkaError as exc:  # OFFSET_OUT_OF_RANGE among them
                # Kafka answers an error partition with -1 offsets; one refused before the read
                # (unknown topic, partition or id: KafkaApis' metadata check) carries an empty
                # aborted list, one refused by the read (OFFSET_OUT_OF_RANGE) a null one.
                entry[1] = errors.error_code_for(exc)
                entry[2:5] = -1, -1, -1
                entry[5] = () if isinstance(exc, (errors.UnknownTopicOrPartition, errors.UnknownTopicId)) else None
                entry[6] = b""
                has_error = True
            parts.append(entry)
        result.append((t, name, topic_id, parts))
    return result, total, has_error


def _diverging_epoch(plog, p):
    """KIP-320's check of ``last_fetched_epoch`` (v12+), as Kafka's Partition.readRecords: the
    log has one epoch, 0, ending at the log end. A later epoch has no end offset here
    (OFFSET_OUT_OF_RANGE); with epoch 0, a fetch offset past the log end gets the diverging
    epoch (0, log end) and no records. None: read as usual."""
    last = getattr(p, "last_fetched_epoch", NO_LEADER_EPOCH)
    if last < 0:
        return None
    if last > LEADER_EPOCH:
        raise errors.OffsetOutOfRangeError(f"could not determine the end offset of the last fetched epoch {last}")
    if p.fetch_offset < plog.log_start_offset:
        raise errors.OffsetOutOfRangeError(f"offset {p.fetch_offset} is below the log start {plog.log_start_offset}")
    if plog.log_end_offset < p.fetch_offset:
        return (LEADER_EPOCH, plog.log_end_offset)
    return None


def _response(ctx, result):
    m = response_module(API_KEY, ctx.api_version)
    metrics = ctx.broker.metrics
    if metrics is not None:
        for _, name, _, parts in result:
            metrics.fetched(name or "", sum(len(entry[6]) for entry in parts))
    topics = tuple(
        build(m.FetchableTopicResponse, topic=name or "", topic_id=topic_id,
              partitions=tuple(
                  build(m.PartitionData, partition_index=index, error_code=code, high_watermark=hw,
                        last_stable_offset=lso, log_start_offset=start,
                        aborted_transactions=(None if aborted is None else tuple(
                            m.AbortedTransaction(producer_id=pid, first_offset=first) for pid, first in aborted)),
                        preferred_read_replica=-1, records=data,
                        **({"diverging_epoch": m.EpochEndOffset(epoch=rest[0][0], end_offset=rest[0][1])}
                           if rest else {}))
                  for index, code, hw, lso, start, aborted, data, *rest in parts))
        for _, name, topic_id, parts in result
    )
    return build(m.FetchResponse, throttle_time=NO_THROTTLE, error_code=OK, session_id=0, responses=topics,
                 node_endpoints=())


def _error_response(ctx, code):
    m = response_module(API_KEY, ctx.api_version)
    return build(m.FetchResponse, throttle_time=NO_THROTTLE, error_code=code, session_id=0, responses=(),
                 node_endpoints=())
