"""ConsumerGroupDescribe (key 69), v0-1: a KIP-848 group as its coordinator sees it — state, group
and assignment epochs, assignor, and per member its epoch, subscription, current assignment and
target assignment (topics by id and name). A group that does not exist, or is a classic group, is
GROUP_ID_NOT_FOUND with Kafka's message (classic groups are DescribeGroups' business). v1 adds
each member's type (0: a classic-protocol member, 1: a consumer-protocol one).

ACLs (Kafka's KafkaApis.handleConsumerGroupDescribe): DESCRIBE on each group, else that group is
GROUP_AUTHORIZATION_FAILED; authorized operations (asked for) are the principal's on the group. A
group whose members' current or target assignments hold a topic the principal may not DESCRIBE
is TOPIC_AUTHORIZATION_FAILED ("The group has described topic(s) that the client is not
authorized to describe.") with nothing else of it — no members, epochs, state or assignor — so no
topic name, id or partition count leaks through a group (Kafka 4.4, KAFKA-18813). In a cluster of
nodes (:mod:`oncelog.cluster`), a group another node coordinates is answered NOT_COORDINATOR
after its ACL check, with nothing of it (the other groups are described as usual).

Version notes:

ConsumerGroupDescribe: v0-1

- v0: the oldest served (KIP-848), flexible versions (compact strings and arrays, tagged fields).
- v1: each member's ``member_type`` in the answer (KIP-1099).
"""

from __future__ import annotations

from .. import errors
from ..groups.consumer_state import ConsumerGroup
from . import _authz
from ._acl import AUTHORIZED_OPERATIONS_OMITTED, authorized
from ._base import NO_THROTTLE, OK, build, response_module
from ._groups import error_code

API_KEY = 69
MIN_VERSION = 0
MAX_VERSION = 1

CONSUMER_MEMBER_TYPE, CLASSIC_MEMBER_TYPE = 1, 0  # Kafka's MemberType
TOPICS_DENIED_MESSAGE = "The group has described topic(s) that the client is not authorized to describe."  # Kafka's


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    want_ops = request.include_authorized_operations
    names_by_id = {tid: name for name, (tid, _) in ctx.broker.groups.consumer.topics().items()}

    def assignment(parts):
        return m.Assignment(topic_partitions=tuple(
            m.TopicPartitions(topic_id=tid, topic_name=names_by_id.get(tid, ""), partitions=tuple(sorted(ps)))
            for tid, ps in sorted(parts.items(), key=lambda kv: names_by_id.get(kv[0], str(kv[0])))))

    def failed(gid, code, message=None):
        return build(m.DescribedGroup, error_code=code, error_message=message, group_id=gid, group_state="",
                     group_epoch=0, assignment_epoch=0, assignor_name="", members=(),
                     authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)

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
        if group is None or group.is_dead() or not isinstance(group, ConsumerGroup):
            missing = errors.GroupIdNotFound(f"Group {gid} not found." if group is None or group.is_dead()
                                             else f"Group {gid} is not a consumer group.")
            out.append(failed(gid, error_code(missing), str(missing)))
            continue
        consumer = ctx.broker.groups.consumer
        members = tuple(
            build(m.Member, member_id=mem.member_id, instance_id=mem.instance_id, rack_id=mem.rack_id,
                  member_epoch=mem.member_epoch, client_id=mem.client_id, client_host=mem.client_host,
                  subscribed_topic_names=tuple(mem.subscribed_topic_names),
                  subscribed_topic_regex=mem.subscribed_topic_regex or "",
                  # The current assignment includes what is being revoked (Kafka 4.4 describes both).
                  assignment=assignment(_union(mem.assigned, mem.pending_revocation)),
                  target_assignment=assignment(group.target.get(mem.member_id, {})),
                  member_type=CONSUMER_MEMBER_TYPE if mem.classic is None else CLASSIC_MEMBER_TYPE)
            for mem in group.members.values())
        topics = {tp.topic_name for mem in members for a in (mem.assignment, mem.target_assignment)
                  for tp in a.topic_partitions if tp.topic_name}
        if topics - _authz.filter_topics(ctx, _authz.Op.DESCRIBE, topics):
            out.append(failed(gid, _authz.TOPIC_DENIED, TOPICS_DENIED_MESSAGE))
            continue
        out.append(build(m.DescribedGroup, error_code=OK, error_message=None, group_id=gid,
                         group_state=group.state.value, group_epoch=group.group_epoch,
                         assignment_epoch=group.assignment_epoch, assignor_name=consumer.assignor_name(group),
                         members=members, authorized_operations=authorized(ctx, _authz.R.GROUP, gid, want_ops)))
    return build(m.ConsumerGroupDescribeResponse, throttle_time=NO_THROTTLE, groups=tuple(out))


def _union(a, b):
    out = {t: set(ps) for t, ps in a.items()}
    for t, ps in b.items():
        out.setdefault(t, set()).update(ps)
    return out
