"""OffsetFetch (key 9), v1-9: one group (v1-7; null topics = all partitions, v2+) or several
groups in one request (v8+). A partition without a committed offset answers -1."""

from __future__ import annotations

from ._base import NO_THROTTLE, OK, build, response_module

API_KEY = 9
MIN_VERSION = 1
MAX_VERSION = 9


def _group_topics(ctx, m, group_id, topics, require_stable, part_cls, topic_cls):
    broker = ctx.broker
    wanted = None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
    found = broker.groups.fetch_offsets(group_id, wanted)
    by_topic: dict[str, list] = {}
    for (topic, partition), value in found.items():
        code = broker.offset_fetch_error(group_id, topic, partition) if require_stable else OK
        by_topic.setdefault(topic, []).append(build(
            part_cls, partition_index=partition, committed_offset=value.offset if value and code == OK else -1,
            committed_leader_epoch=value.leader_epoch if value and code == OK else -1,
            metadata=(value.metadata if value and code == OK else ""), error_code=code))
    return tuple(build(topic_cls, name=t, partitions=tuple(sorted(ps, key=lambda p: p.partition_index)))
                 for t, ps in by_topic.items())


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    require_stable = getattr(request, "require_stable", False)
    if ctx.api_version >= 8:
        groups = tuple(
            build(m.OffsetFetchResponseGroup, group_id=g.group_id, error_code=OK,
                  topics=_group_topics(ctx, m, g.group_id, g.topics, require_stable,
                                       m.OffsetFetchResponsePartitions, m.OffsetFetchResponseTopics))
            for g in request.groups)
        return build(m.OffsetFetchResponse, throttle_time=NO_THROTTLE, groups=groups)
    topics = _group_topics(ctx, m, request.group_id, request.topics, require_stable,
                           m.OffsetFetchResponsePartition, m.OffsetFetchResponseTopic)
    return build(m.OffsetFetchResponse, throttle_time=NO_THROTTLE, topics=topics, error_code=OK)
