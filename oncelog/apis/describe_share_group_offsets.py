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
unknown. In a cluster of nodes a group another node coordinates is NOT_COORDINATOR; the state of a
partition another node leads is kept there (docs/share-groups.md) and read with
ReadShareGroupStateSummary (:mod:`.read_share_group_state_summary`), its high watermark for the lag
with ListOffsets, both over the nodes' control link (Kafka's persister and PartitionMetadataClient);
with ``topics`` null every other node is asked which of its partitions the group has state of. A
node that does not answer makes its partitions COORDINATOR_NOT_AVAILABLE (start offset -1).

Version notes:

DescribeShareGroupOffsets: v0-1

- v0: Kafka 4.1's (KIP-932).
- v1: adds each partition's ``lag`` (KIP-1226, Kafka 4.2).
"""

from __future__ import annotations

import asyncio
import uuid

from kio.schema.errors import ErrorCode

from .. import errors
from . import _authz, _share_state
from ._base import LEADER_EPOCH, NO_THROTTLE, build, reply_later, response_module
from ._groups import error_code, error_message

API_KEY = 90
MIN_VERSION = 0
MAX_VERSION = 1

ZERO_ID = uuid.UUID(int=0)
UNINITIALIZED = -1  # Kafka's PartitionFactory.UNINITIALIZED_START_OFFSET and UNINITIALIZED_LAG
DEFAULT_LEADER_EPOCH = 0  # PartitionFactory.DEFAULT_LEADER_EPOCH


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    if ctx.broker.cluster is None:
        return _response(ctx, m, request, {})
    needs = {g.group_id: _remote_parts(ctx, g) for g in request.groups}
    needs = {g: parts for g, parts in needs.items() if parts}
    if not needs:
        return _response(ctx, m, request, {})
    fut, respond = reply_later(lambda remote: _response(ctx, m, request, remote))

    async def read() -> None:
        remote = dict(zip(needs, await asyncio.gather(*(_read_remote(ctx, g, parts) for g, parts in needs.items()))))
        respond(remote)
    asyncio.ensure_future(read())
    return fut


def _response(ctx, m, request, remote):
    return build(m.DescribeShareGroupOffsetsResponse, throttle_time=NO_THROTTLE,
                 groups=tuple(_group(ctx, m, g, remote.get(g.group_id, {})) for g in request.groups))


def _remote_parts(ctx, req) -> dict:
    """The partitions of this group entry another node leads, {node: [(topic, partition)]}: those
    named, or (``topics`` null) every partition the other nodes lead."""
    broker = ctx.broker
    if (not _authz.group(ctx, _authz.Op.DESCRIBE, req.group_id) or (req.topics is not None and not req.topics)
            or broker.coordinator_error(0, req.group_id) is not None):
        return {}
    if req.topics is None:
        return _share_state.every_remote_partition(ctx)
    topics = broker.metadata.topics
    parts = []
    for t in req.topics:
        topic = topics.get(t.topic_name)
        if topic is not None:
            parts.extend((topic, p) for p in t.partitions
                         if 0 <= p < topic.partitions and not broker.placement.leads(topic.name, p))
    return _share_state.remote_leaders(ctx, parts) if parts else {}


async def _read_remote(ctx, group_id, by_node) -> dict:
    """{(topic id, partition): (start offset, delivery-complete count, high watermark) | None | KafkaError}."""
    summaries = await _share_state.read_summaries(ctx, group_id, by_node)
    with_state = {node: [(t, i) for t, i in parts if isinstance(summaries.get((t.topic_id, i)), tuple)]
                  for node, parts in by_node.items()}
    marks = await _share_state.high_watermarks(ctx, {n: ps for n, ps in with_state.items() if ps})
    out: dict = {}
    for parts in with_state.values():
        for t, i in parts:
            mark = marks.get((t.name, i))
            start, complete = summaries[(t.topic_id, i)]
            out[(t.topic_id, i)] = mark if isinstance(mark, errors.KafkaError) else (start, complete, mark)
    return {**summaries, **out}


def _group(ctx, m, req, remote):
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
        for (tid, index), found in remote.items():
            if found is not None and not isinstance(found, errors.KafkaError):
                held.setdefault(tid, set()).add(index)
        wanted = [(names[tid], sorted(ps)) for tid, ps in held.items() if tid in names]
        allowed = _authz.filter_topics(ctx, _authz.Op.DESCRIBE, [n for n, _ in wanted])
        return entry(topics=[_topic(ctx, m, group_id, topics.get(n), n, ps, remote) for n, ps in wanted
                             if n in allowed])
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
            known.append(_topic(ctx, m, group_id, topics.get(t.topic_name), t.topic_name, t.partitions, remote))
    return entry(topics=known + unknown + denied)


def _topic(ctx, m, group_id, topic, name, partitions, remote):
    return build(m.DescribeShareGroupOffsetsResponseTopic, topic_name=name, topic_id=topic.topic_id,
                 partitions=tuple(_offset(ctx, m, group_id, topic, p, remote) for p in partitions))


def _offset(ctx, m, group_id, topic, index, remote):
    broker = ctx.broker
    if not 0 <= index < topic.partitions:  # Kafka's share coordinator: an error, read as no state
        return _partition(m, index, UNINITIALIZED, DEFAULT_LEADER_EPOCH)
    if not broker.placement.leads(topic.name, index):  # read from its leader (handle)
        found = remote.get((topic.topic_id, index))
        if isinstance(found, errors.KafkaError):
            return _partition(m, index, UNINITIALIZED, DEFAULT_LEADER_EPOCH, code=errors.error_code_for(found),
                              message=str(found))
        mark = found[2] if found is not None else None
        found = found[:2] if found is not None else None
    else:
        found = broker.share.summary(group_id, topic.topic_id, index)
        mark = None
    if found is None:
        return _partition(m, index, UNINITIALIZED, DEFAULT_LEADER_EPOCH)
    start, complete = found
    lag = UNINITIALIZED
    if start != UNINITIALIZED and complete != UNINITIALIZED:
        if mark is None:
            mark = broker.partitions.get(topic.name, index).log.high_watermark
        lag = mark - start - complete
    return _partition(m, index, start, LEADER_EPOCH, lag=lag)


def _partition(m, index, start, leader_epoch, *, lag=UNINITIALIZED, code=ErrorCode.none, message=None):
    return build(m.DescribeShareGroupOffsetsResponsePartition, partition_index=index, start_offset=start,
                 leader_epoch=leader_epoch, lag=lag, error_code=code, error_message=message)
