"""ShareGroupDescribe (key 77), v1-1: share groups' state, epochs, assignor and members with their
subscriptions and assignments (topics by id and name) (KIP-932; :mod:`oncelog.groups.share_group`).

Per group, as Kafka's KafkaApis.handleShareGroupDescribe and GroupCoordinatorService: DESCRIBE on
the group, else GROUP_AUTHORIZATION_FAILED in its entry; an unknown group, or one of another type,
is GROUP_ID_NOT_FOUND; in a cluster of nodes a group another node coordinates is NOT_COORDINATOR.
``include_authorized_operations`` asks for the group operations the principal may perform.

Version notes:

ShareGroupDescribe: v1-1

- v1: the stable version (Kafka 4.1); v0 was Kafka 4.0's early access, removed.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from . import _authz
from ._acl import AUTHORIZED_OPERATIONS_OMITTED, authorized
from ._base import NO_THROTTLE, build, response_module
from ._groups import error_code, error_message

API_KEY = 77
MIN_VERSION = 1
MAX_VERSION = 1


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    broker = ctx.broker
    names = {t.topic_id: t.name for t in broker.metadata.topics.values()}
    out = []
    for group_id in request.group_ids:
        def entry(code, message=None, group=None):
            return build(m.DescribedGroup, error_code=code, error_message=message, group_id=group_id,
                         # Kafka 4.4 leaves an error entry's state and epochs unset ("", 0, 0)
                         group_state="" if group is None else group.state.value,
                         group_epoch=0 if group is None else group.group_epoch,
                         assignment_epoch=0 if group is None else group.assignment_epoch,
                         assignor_name="" if group is None else "simple",
                         members=() if group is None else members(group),
                         authorized_operations=(authorized(ctx, _authz.R.GROUP, group_id,
                                                           request.include_authorized_operations)
                                                if group is not None else AUTHORIZED_OPERATIONS_OMITTED))

        def members(group):
            return tuple(build(
                m.Member, member_id=mem.member_id, rack_id=mem.rack_id, member_epoch=mem.member_epoch,
                client_id=mem.client_id, client_host=mem.client_host, subscribed_topic_names=tuple(mem.subscribed),
                assignment=m.Assignment(topic_partitions=tuple(
                    m.TopicPartitions(topic_id=tid, topic_name=names.get(tid, ""), partitions=tuple(sorted(ps)))
                    for tid, ps in sorted(mem.assignment.items(), key=lambda kv: str(kv[0])))))
                for mem in group.members.values())

        if not _authz.group(ctx, _authz.Op.DESCRIBE, group_id):
            out.append(entry(_authz.GROUP_DENIED))
            continue
        not_coordinator = broker.coordinator_error(0, group_id)
        if not_coordinator is not None:
            out.append(entry(error_code(not_coordinator), error_message(not_coordinator)))
            continue
        group = broker.share.groups.get(group_id)
        if group is None:
            kind = group_id in broker.groups.groups
            message = f"Group {group_id} is not a share group." if kind else f"Group {group_id} not found."
            out.append(entry(ErrorCode.group_id_not_found, message))
            continue
        out.append(entry(ErrorCode.none, None, group))
    return build(m.ShareGroupDescribeResponse, throttle_time=NO_THROTTLE, groups=tuple(out))
