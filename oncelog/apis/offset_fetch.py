"""OffsetFetch (key 9), v1-10: one group (v1-7; null topics = all partitions, v2+) or several
groups in one request (v8+). A partition without a committed offset answers -1.

v10 (KIP-848) names topics by id, in the request and the answer (offsets are stored by name). As
Kafka: a requested id that is unknown answers its partitions with -1 and UNKNOWN_TOPIC_ID, after
the known topics; asked for all partitions, topics that no longer exist (no id to name them by)
are left out.
v9+ (KIP-848) carries the member id and epoch of a consumer-group member: a stale epoch is
STALE_MEMBER_EPOCH, an unknown member UNKNOWN_MEMBER_ID, for the whole group (an admin's fetch,
no member id and epoch -1, is not checked; nor is any fetch of a classic group).

ACLs (Kafka's KafkaApis.handleOffsetFetchRequest): DESCRIBE on the group, else
GROUP_AUTHORIZATION_FAILED (per group from v8); DESCRIBE on each topic named, else its partitions
are TOPIC_AUTHORIZATION_FAILED; with all topics asked, the others are left out.

In a cluster of nodes (:mod:`oncelog.cluster`), a group another node coordinates is then
NOT_COORDINATOR and not asked: per group from v8 (the other groups are answered as usual), else
the top-level error with no topics (v1, which has no top-level error, gets it on every partition
asked, as Kafka answered v0-1).

Version notes:

OffsetFetch: v1-10 (v0, offsets in ZooKeeper, is not served)

- v1: the oldest served: offsets from ``__consumer_offsets``.
- v2: null topics mean all partitions; a top-level error code.
- v3: the throttle time in the answer.
- v4: the schema of v3; the throttle is applied after the answer (KIP-219).
- v5: each offset's leader epoch (KIP-320).
- v6: flexible versions (compact strings and arrays, tagged fields).
- v7: ``require_stable``: UNSTABLE_OFFSET_COMMIT for a pending transactional commit (KIP-447).
- v8: several groups in one request (KIP-709).
- v9: the member id and epoch of a consumer-group member (KIP-848): STALE_MEMBER_EPOCH,
  UNKNOWN_MEMBER_ID.
- v10: topics by id, not name (KIP-848).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..errors import KafkaError
from . import _authz
from ._base import NO_THROTTLE, OK, build, response_module
from ._groups import error_code

API_KEY = 9
MIN_VERSION = 1
MAX_VERSION = 10


def _group_topics(ctx, group_id, topics, require_stable, part_cls, topic_cls):
    broker = ctx.broker
    by_id = ctx.api_version >= 10
    unknown_ids = []
    if topics is None:
        wanted = None
    elif by_id:
        wanted = []
        for t in topics:
            topic = broker.metadata.topics.by_id.get(t.topic_id)
            if topic is None:
                unknown_ids.append(t)
            else:
                wanted.extend((topic.name, p) for p in t.partition_indexes)
    else:
        wanted = [(t.name, p) for t in topics for p in t.partition_indexes]
    # ACLs: DESCRIBE on each topic; named ones without it are TOPIC_AUTHORIZATION_FAILED, and
    # with all topics asked, those are left out.
    denied = []
    if wanted is not None:
        described = _authz.filter_topics(ctx, _authz.Op.DESCRIBE, {t for t, _ in wanted})
        denied = [tp for tp in wanted if tp[0] not in described]
        wanted = [tp for tp in wanted if tp[0] in described]
    found = broker.groups.fetch_offsets(group_id, wanted)
    if topics is None:
        described = _authz.filter_topics(ctx, _authz.Op.DESCRIBE, {t for t, _ in found})
        found = {tp: v for tp, v in found.items() if tp[0] in described}
    by_topic: dict[str, list] = {}
    for (topic, partition), value in found.items():
        code = error_code(broker.offset_fetch_error(group_id, topic, partition)) if require_stable else OK
        by_topic.setdefault(topic, []).append(build(
            part_cls, partition_index=partition, committed_offset=value.offset if value and code == OK else -1,
            committed_leader_epoch=value.leader_epoch if value and code == OK else -1,
            metadata=(value.metadata if value and code == OK else ""), error_code=code))
    for topic, partition in denied:
        by_topic.setdefault(topic, []).append(build(
            part_cls, partition_index=partition, committed_offset=-1, committed_leader_epoch=-1, metadata="",
            error_code=_authz.TOPIC_DENIED))
    out = []
    for name, parts in by_topic.items():
        topic_id = None
        if by_id:
            topic = broker.metadata.topics.get(name)
            if topic is None:
                continue  # committed for a topic since deleted: no id to name it by
            topic_id = topic.topic_id
        out.append(build(topic_cls, name=name, topic_id=topic_id,
                         partitions=tuple(sorted(parts, key=lambda p: p.partition_index))))
    for t in unknown_ids:
        out.append(build(topic_cls, topic_id=t.topic_id, partitions=tuple(
            build(part_cls, partition_index=p, committed_offset=-1, committed_leader_epoch=-1, metadata="",
                  error_code=ErrorCode.unknown_topic_id)
            for p in t.partition_indexes)))
    return tuple(out)


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    require_stable = getattr(request, "require_stable", False)
    if ctx.api_version >= 8:
        groups = []
        for g in request.groups:
            if not _authz.group(ctx, _authz.Op.DESCRIBE, g.group_id):
                groups.append(build(m.OffsetFetchResponseGroup, group_id=g.group_id,
                                    error_code=_authz.GROUP_DENIED, topics=()))
                continue
            not_coordinator = ctx.broker.coordinator_error(0, g.group_id)
            if not_coordinator is not None:
                groups.append(build(m.OffsetFetchResponseGroup, group_id=g.group_id,
                                    error_code=error_code(not_coordinator), topics=()))
                continue
            try:  # v9+ (KIP-848): a consumer-group member's epoch must be current
                ctx.broker.groups.validate_offset_fetch(g.group_id, getattr(g, "member_id", None),
                                                        getattr(g, "member_epoch", -1))
            except KafkaError as exc:
                groups.append(build(m.OffsetFetchResponseGroup, group_id=g.group_id, error_code=error_code(exc),
                                    topics=()))
                continue
            groups.append(build(m.OffsetFetchResponseGroup, group_id=g.group_id, error_code=OK,
                                topics=_group_topics(ctx, g.group_id, g.topics, require_stable,
                                                     m.OffsetFetchResponsePartitions, m.OffsetFetchResponseTopics)))
        return build(m.OffsetFetchResponse, throttle_time=NO_THROTTLE, groups=tuple(groups))
    if not _authz.group(ctx, _authz.Op.DESCRIBE, request.group_id):
        return build(m.OffsetFetchResponse, throttle_time=NO_THROTTLE, topics=(), error_code=_authz.GROUP_DENIED)
    not_coordinator = ctx.broker.coordinator_error(0, request.group_id)
    if not_coordinator is not None:
        code = error_code(not_coordinator)
        topics = ()
        if ctx.api_version < 2:  # no top-level error code: on each partition asked
            topics = tuple(m.OffsetFetchResponseTopic(name=t.name, partitions=tuple(
                build(m.OffsetFetchResponsePartition, partition_index=p, committed_offset=-1,
                      committed_leader_epoch=-1, metadata="", error_code=code) for p in t.partition_indexes))
                for t in request.topics or ())
        return build(m.OffsetFetchResponse, throttle_time=NO_THROTTLE, topics=topics, error_code=code)
    topics = _group_topics(ctx, request.group_id, request.topics, require_stable,
                           m.OffsetFetchResponsePartition, m.OffsetFetchResponseTopic)
    return build(m.OffsetFetchResponse, throttle_time=NO_THROTTLE, topics=topics, error_code=OK)
