"""DescribeTopicPartitions (key 75), v0 (KIP-966): Metadata's topic and partition description,
paginated. As Kafka's DescribeTopicPartitionsRequestHandler and KRaftMetadataCache:

* An empty topic list means every topic (internal ones too); topics are answered in name order,
  from the cursor's topic on (names before it are skipped), the cursor's topic from the
  cursor's partition, every later one from partition 0.
* At most ``min(response_partition_limit, max.request.partition.size.limit = 2000)`` partitions
  (at least 1). When a topic is cut, ``next_cursor`` names it and its first partition left out;
  when the limit is used up exactly and a topic remains, ``next_cursor`` names that topic at
  partition 0; when nothing remains, no cursor.
* A named topic that does not exist: UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an
  illegal name), zero topic id, no partitions; it uses none of the limit. Unknown topics are
  never listed when all topics were asked.
* A cursor whose topic is not among the named topics, or whose partition is negative:
  INVALID_REQUEST for every named topic.

Partitions: this broker leads every one (epoch 0, as Metadata), is its only replica and its ISR;
eligible leader replicas (KIP-966) and the last known ELR are empty, nothing is offline.

ACLs (Kafka's DescribeTopicPartitionsRequestHandler): DESCRIBE on a topic; all topics asked,
those without it are left out; a named one is TOPIC_AUTHORIZATION_FAILED (exists or not).
Authorized operations are the principal's (every topic operation with no authorizer).

Version notes:

DescribeTopicPartitions: v0

- v0: the only version (KIP-966), flexible versions (compact strings and arrays, tagged fields).
"""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode

from .. import errors
from ..metadata.topics import validate_topic_name
from . import _authz
from ._acl import AUTHORIZED_OPERATIONS_OMITTED, operations
from ._base import NO_THROTTLE, OK, build, response_module
from .metadata import partition_state

API_KEY = 75
MIN_VERSION = 0
MAX_VERSION = 0

# Kafka's broker config max.request.partition.size.limit (default 2000).
MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000
ZERO_UUID = uuid.UUID(int=0)


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    md = ctx.broker.metadata
    cursor = request.cursor
    cursor_topic = cursor.topic_name if cursor is not None else ""
    fetch_all = not request.topics
    if fetch_all:
        names = _authz.filter_topics(ctx, _authz.Op.DESCRIBE, (name for name in md.topics if name >= cursor_topic))
    else:
        names = {t.name for t in request.topics if t.name >= cursor_topic}
        if cursor is not None and cursor.topic_name not in names:
            # Kafka: "DescribeTopicPartitionsRequest topic list should contain the cursor topic"
            return _invalid(m, request)
    if cursor is not None and cursor.partition_index < 0:
        # Kafka: "DescribeTopicPartitionsRequest cursor partition must be valid"
        return _invalid(m, request)

    remaining = max(min(MAX_REQUEST_PARTITION_SIZE_LIMIT, request.response_partition_limit), 1)
    topics = []
    next_cursor = None
    for name in sorted(names):
        if remaining == 0:
            # The limit is used up exactly: the next page starts at this topic's first partition.
            next_cursor = m.Cursor(topic_name=name, partition_index=0)
            break
        if not fetch_all and not _authz.topic(ctx, _authz.Op.DESCRIBE, name):
            topics.append(m.DescribeTopicPartitionsResponseTopic(
                error_code=ErrorCode.topic_authorization_failed, name=name, topic_id=ZERO_UUID, is_internal=False,
                partitions=(), topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED))
            continue
        topic = md.topics.get(name)
        if topic is None:
            if not fetch_all:
                topics.append(_unknown_topic(m, name, operations(ctx, _authz.R.TOPIC, name)))
            continue
        start = cursor.partition_index if name == cursor_topic else 0
        upper = min(topic.partitions, start + remaining)
        partitions = tuple(_partition(m, ctx, name, p) for p in range(start, upper))
        topics.append(m.DescribeTopicPartitionsResponseTopic(
            error_code=OK, name=name, topic_id=topic.topic_id, is_internal=topic.internal, partitions=partitions,
            topic_authorized_operations=operations(ctx, _authz.R.TOPIC, name)))
        if upper < topic.partitions:
            next_cursor = m.Cursor(topic_name=name, partition_index=upper)
            break
        remaining -= len(partitions)
    return m.DescribeTopicPartitionsResponse(throttle_time=NO_THROTTLE, topics=tuple(topics), next_cursor=next_cursor)


def _unknown_topic(m, name: str, ops: int):
    try:
        validate_topic_name(name)
        code = ErrorCode.unknown_topic_or_partition
    except errors.InvalidTopic:
        code = ErrorCode.invalid_topic_exception
    return m.DescribeTopicPartitionsResponseTopic(
        error_code=code, name=name, topic_id=ZERO_UUID, is_internal=name.startswith("__"), partitions=(),
        topic_authorized_operations=ops)


def _invalid(m, request):
    """Kafka's error response to an InvalidRequestException (the response has no field for its
    message): every named topic gets INVALID_REQUEST."""
    return m.DescribeTopicPartitionsResponse(throttle_time=NO_THROTTLE, next_cursor=None, topics=tuple(
        m.DescribeTopicPartitionsResponseTopic(error_code=ErrorCode.invalid_request, name=t.name, topic_id=ZERO_UUID,
                                               is_internal=False, partitions=(),
                                               topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
        for t in request.topics))


def _partition(m, ctx, topic: str, p: int):
    return build(m.DescribeTopicPartitionsResponsePartition, eligible_leader_replicas=(), last_known_elr=(),
                 **partition_state(ctx.broker, ctx.listener, topic, p))
