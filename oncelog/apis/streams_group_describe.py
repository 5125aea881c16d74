"""StreamsGroupDescribe (key 89), v0-0: a streams group (KIP-1071) as its coordinator sees it —
state, group and assignment epochs, its topology (with the partition counts decided once ready,
else as the member sent it), and per member its epochs, process, endpoint, task offsets,
current and target assignment. A group that does not exist, or is not a streams group, is
GROUP_ID_NOT_FOUND with Kafka's message. Kafka 4.4 serves v0-1 (v1: KIP-1331's topology
description).

ACLs (Kafka's KafkaApis.handleStreamsGroupDescribe): DESCRIBE on each group, else that group is
GROUP_AUTHORIZATION_FAILED; a group whose topology names a topic the principal may not DESCRIBE is
TOPIC_AUTHORIZATION_FAILED ("The described group uses topics that the client is not authorized to
describe.") with no members and no topology; authorized operations when asked. In a cluster, a
group another node coordinates is NOT_COORDINATOR.

Version notes:

StreamsGroupDescribe: v0-0

- v0: the oldest served (KIP-1071), flexible versions (compact strings and arrays, tagged fields).
"""

from __future__ import annotations

from .. import errors
from ..groups.streams_group import StreamsGroup
from . import _authz
from ._acl import AUTHORIZED_OPERATIONS_OMITTED, authorized
from ._base import NO_THROTTLE, OK, build, response_module
from ._groups import error_code

API_KEY = 89
MIN_VERSION = 0
MAX_VERSION = 0

TOPICS_DENIED_MESSAGE = "The described group uses topics that the client is not authorized to describe."


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    want_ops = request.include_authorized_operations

    def failed(gid, code, message=None):
        return build(m.DescribedGroup, error_code=code, error_message=message, group_id=gid, group_state="",
                     group_epoch=0, assignment_epoch=0, topology=None, members=(),
                     authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)

    def task_ids(tasks):
        by: dict[str, list[int]] = {}
        for sid, p in tasks:
            by.setdefault(sid, []).append(p)
        return tuple(m.TaskIds(subtopology_id=sid, partitions=tuple(sorted(ps))) for sid, ps in sorted(by.items()))

    def assignment(active):
        return m.Assignment(active_tasks=task_ids(active), standby_tasks=(), warmup_tasks=())

    def offsets(d):
        return tuple(m.TaskOffset(subtopology_id=sid, partition=p, offset=o) for (sid, p), o in sorted(d.items()))

    def topic_info(t, counts):
        partitions = t.partitions or counts.get(t.name, 0)
        return m.TopicInfo(name=t.name, partitions=partitions, replication_factor=t.replication_factor,
                           topic_configs=tuple(m.KeyValue(key=k, value=v) for k, v in t.configs))

    def topology(group: StreamsGroup):
        if group.topology is None:
            return None
        cfg = group.configured
        counts = cfg.partition_counts if cfg is not None and cfg.ready else {}
        return m.Topology(epoch=group.topology.epoch, subtopologies=tuple(
            m.Subtopology(subtopology_id=s.subtopology_id, source_topics=tuple(s.source_topics),
                          repartition_sink_topics=tuple(s.repartition_sink_topics),
                          state_changelog_topics=tuple(topic_info(t, counts) for t in s.state_changelog_topics),
                          repartition_source_topics=tuple(topic_info(t, counts) for t in s.repartition_source_topics))
            for s in group.topology.subtopologies))

    out = []
    for gid in request.group_ids:
        if not _authz.group(ctx, _authz.Op.DESCRIBE, gid):
            out.append(failed(gid, _authz.GROUP_DENIED))
            continue
        not_coordinator = ctx.broker.coordinator_error(0, gid)
        if not_coordinator is not None:
            out.append(failed(gid, error_code(not_coordinator)))
            continue
        group = ctx.broker.groups.describe(gid)
        if group is None or group.is_dead() or not isinstance(group, StreamsGroup):
            missing = errors.GroupIdNotFound(f"Group {gid} not found." if group is None or group.is_dead()
                                             else f"Group {gid} is not a streams group.")
            out.append(failed(gid, error_code(missing), str(missing)))
            continue
        if group.topology is not None:
            names = group.topology.all_topics()
            if len(_authz.filter_topics(ctx, _authz.Op.DESCRIBE, names)) < len(names):
                out.append(failed(gid, _authz.TOPIC_DENIED, TOPICS_DENIED_MESSAGE))
                continue
        members = tuple(
            build(m.Member, member_id=mem.member_id, member_epoch=mem.member_epoch, instance_id=mem.instance_id,
                  rack_id=mem.rack_id, client_id=mem.client_id, client_host=mem.client_host,
                  topology_epoch=mem.topology_epoch, process_id=mem.process_id,
                  user_endpoint=m.Endpoint(host=mem.user_endpoint[0], port=mem.user_endpoint[1])
                  if mem.user_endpoint is not None else None,
                  client_tags=tuple(m.KeyValue(key=k, value=v) for k, v in mem.client_tags),
                  task_offsets=offsets(mem.task_offsets), task_end_offsets=offsets(mem.task_end_offsets),
                  # the current assignment includes what is being revoked
                  assignment=assignment(set(mem.active) | set(mem.pending_active)),
                  target_assignment=assignment(group.target.get(mem.member_id, frozenset())), is_classic=False)
            for mem in group.members.values())
        out.append(build(m.DescribedGroup, error_code=OK, error_message=None, group_id=gid,
                         group_state=group.state.value, group_epoch=group.group_epoch,
                         assignment_epoch=group.assignment_epoch, topology=topology(group), members=members,
                         authorized_operations=authorized(ctx, _authz.R.GROUP, gid, want_ops)))
    return build(m.StreamsGroupDescribeResponse, throttle_time=NO_THROTTLE, groups=tuple(out))
