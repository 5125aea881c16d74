"""DescribeShareGroupOffsets (key 90), v0-1: a share group's share-partition start offsets (the
SPSO its state holds) and, from v1, their lag (KIP-932, KIP-1226; :mod:`oncelog.groups.share_coordinator`).

As Kafka's KafkaApis.handleDescribeShareGroupOffsetsRequest and GroupCoordinatorService.describeShareGroupOffsets
/ describeShareGroupAllOffsets: per group, DESCRIBE on the group, else GROUP_AUTHORIZATION_FAILED in its
entry. Named topics: those the principal may not DESCRIBE come last, topic id zero, each partition
start offset -1 and TOPIC_AUTHORIZATION_FAILED; a topic that does not exist comes after the existing
ones, topic id zero, each partition start offset -1, no error ("absence of data"); a partition without
state answers start offset -1, leader epoch 0, lag -1. ``topics`` null: every topic the group has
share partitions of (state, or its assignment), those the principal may not DESCRIBE left out; an
empty list: no topics. The group is not looked up: an unknown group (or one of another type) has no
state, so its offsets are -1 (Kafka reads the persister without asking the group). The lag is
Kafka's ``high watermark - start offset - delivery-complete count``, -1 while the start offset is
unknown. In a cluster of nodes a group another node coordinates is NOT_COORDINATOR; a partition
another node leads (its state is there) is COORDINATOR_NOT_AVAILABLE, not yet read from it
(docs/share-groups.md).

Version notes:

DescribeShareGroupOffsets: v0-1

- v0: Kafka 4.1's (KIP-932).
- v1: adds each partition's ``lag`` (KIP-1226, Kafka 4.2).
"""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode

from . import _authz
from ._base import LEADER_EPOCH, NO_THROTTLE, build, response_module
from ._groups import error_code, error_message

API_KEY = 90
MIN_VERSION = 0
MAX_VERSION = 1

ZERO_ID = uuid.UUID(int=0)
UNINITIALIZED = -1  # Kafka's PartitionFactory.UNINITIALIZED_START_OFFSET and UNINITIALIZED_LAG
DEFAULT_LEADER_EPOCH = 0  # PartitionFactory.DEFAULT_LEADER_EPOCH


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    return build(m.DescribeShareGroupOffsetsResponse, throttle_time=NO_THROTTLE,
                 groups=tuple(_group(ctx, m, g) for g in request.groups))


def _group(ctx, m, req):
    broker = ctx.broker
    group_id = req.group_id

    def entry(code=ErrorCode.none, message=None, topics=()):
        return build(m.DescribeShareGroupOffsetsResponseGroup, group_id=group_id, topics=tuple(topics),
                     error_code=code, error_message=message)

    if not _authz.group(ctx, _authz.Op.DESCRIBE, group_id):
        return entry(_authz.GROUP_DENIED)
    if req.topics is not None and not req.topics:
        return entry()
    not_coordinator = broker.coordinator_error(0, group_id)
    if not_coordinator is not None:
        return entry(error_code(not_coordinator), error_message(not_coordinator))
    topics = broker.metadata.topics
    if req.topics is None:
        names = {t.topic_id: t.name for t in topics.values()}
        held = broker.share.state_partitions(group_id)
        wanted = [(names[tid], sorted(ps)) for tid, ps in held.items() if tid in names]
        allowed = _authz.filter_topics(ctx, _authz.Op.DESCRIBE, [n for n, _ in wanted])
        return entry(topics=[_topic(ctx, m, group_id, topics.get(n), n, ps) for n, ps in wanted if n in allowed])
    allowed = _authz.filter_topics(ctx, _authz.Op.DESCRIBE, [t.topic_name for t in req.topics])
    known, unknown, denied = [], [], []
    for t in req.topics:
        if t.topic_name not in allowed:
            denied.append(build(m.DescribeShareGroupOffsetsResponseTopic, topic_name=t.topic_name, topic_id=ZERO_ID,
                                partitions=tuple(_partition(m, p, UNINITIALIZED, DEFAULT_LEADER_EPOCH,
                                                            code=_authz.TOPIC_DENIED,
                                                            message="Topic authorization failed.")
                                                 for p in t.partitions)))
        elif topics.get(t.topic_name) is None:
            unknown.append(build(m.DescribeShareGroupOffsetsResponseTopic, topic_name=t.topic_name, topic_id=ZERO_ID,
                                 partitions=tuple(_partition(m, p, UNINITIALIZED, DEFAULT_LEADER_EPOCH)
                                                  for p in t.partitions)))
        else:
            known.append(_topic(ctx, m, group_id, topics.get(t.topic_name), t.topic_name, t.partitions))
    return entry(topics=known + unknown + denied)


def _topic(ctx, m, group_id, topic, name, partitions):
    return build(m.DescribeShareGroupOffsetsResponseTopic, topic_name=name, topic_id=topic.topic_id,
                 partitions=tuple(_offset(ctx, m, group_id, topic, p) for p in partitions))


def _offset(ctx, m, group_id, topic, index):
    broker = ctx.broker
    if not 0 <= index < topic.partitions:  # Kafka's share coordinator: an error, read as no state
        return _partition(m, index, UNINITIALIZED, DEFAULT_LEADER_EPOCH)
    if not broker.placement.leads(topic.name, index):
        return _partition(m, index, UNINITIALIZED, DEFAULT_LEADER_EPOCH, code=ErrorCode.coordinator_not_available,
                          message=f"The share state of {topic.name}-{index} is kept by node "
                                  f"{broker.placement.leader(topic.name, index)}; not yet read from this one.")
    found = broker.share.summary(group_id, topic.topic_id, index)
    if found is None:
        return _partition(m, index, UNINITIALIZED, DEFAULT_LEADER_EPOCH)
    start, complete = found
    lag = UNINITIALIZED
    if start != UNINITIALIZED and complete != UNINITIALIZED:
        lag = broker.partitions.get(topic.name, index).log.high_watermark - start - complete
    return _partition(m, index, start, LEADER_EPOCH, lag=lag)


def _partition(m, index, start, leader_epoch, *, lag=UNINITIALIZED, code=ErrorCode.none, message=None):
    return build(m.DescribeShareGroupOffsetsResponsePartition, partition_index=index, start_offset=start,
                 leader_epoch=leader_epoch, lag=lag, error_code=code, error_message=message)
