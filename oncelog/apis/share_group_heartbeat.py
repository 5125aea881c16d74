"""ShareGroupHeartbeat (key 76), v1-1: a share group member's join (member epoch 0), heartbeat and
leave (-1) (KIP-932; :mod:`oncelog.groups.share_group`). The member id comes from the client.
The answer carries the member's epoch, the heartbeat interval and its whole assignment when it
changed (null when unchanged); topics are named by id.

ACLs (Kafka's KafkaApis.handleShareGroupHeartbeatRequest): READ on the group, else
GROUP_AUTHORIZATION_FAILED and the group is not touched; subscribing to a topic the principal may
not DESCRIBE is TOPIC_AUTHORIZATION_FAILED. In a cluster of nodes a group another node
coordinates is NOT_COORDINATOR. Any error is answered as Kafka does: no member id, epoch 0, no
heartbeat interval, no assignment.

Version notes:

ShareGroupHeartbeat: v1-1

- v1: the stable version (Kafka 4.1); v0 was Kafka 4.0's early access, removed.
"""

from __future__ import annotations

import datetime

from . import _authz
from ._base import NO_THROTTLE, build, response_module
from ._groups import error_code, error_message

API_KEY = 76
MIN_VERSION = 1
MAX_VERSION = 1


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)

    def refuse(code, message):
        return build(m.ShareGroupHeartbeatResponse, throttle_time=NO_THROTTLE, error_code=code, error_message=message,
                     member_id=None, member_epoch=0, heartbeat_interval=datetime.timedelta(0), assignment=None)

    if not _authz.group(ctx, _authz.Op.READ, request.group_id):
        return refuse(_authz.GROUP_DENIED, None)
    names = request.subscribed_topic_names
    if names:
        denied = sorted(set(names) - _authz.filter_topics(ctx, _authz.Op.DESCRIBE, names))
        if denied:
            return refuse(_authz.TOPIC_DENIED, f"The member is not authorized to describe topics: {denied}")
    not_coordinator = ctx.broker.coordinator_error(0, request.group_id)
    if not_coordinator is not None:
        return refuse(error_code(not_coordinator), error_message(not_coordinator))
    result = ctx.broker.share.groups.heartbeat(
        group_id=request.group_id, member_id=request.member_id, member_epoch=request.member_epoch,
        rack_id=request.rack_id, subscribed_topic_names=tuple(names) if names is not None else None,
        client_id=ctx.client_id or "", client_host="/" + ctx.peer.rsplit(":", 1)[0])
    if result.error is not None:
        return refuse(error_code(result.error), error_message(result.error))
    assignment = None
    if result.assignment is not None:
        assignment = m.Assignment(topic_partitions=tuple(
            m.TopicPartitions(topic_id=tid, partitions=tuple(ps))
            for tid, ps in sorted(result.assignment.items(), key=lambda kv: str(kv[0]))))
    return build(m.ShareGroupHeartbeatResponse, throttle_time=NO_THROTTLE, error_code=error_code(None),
                 error_message=None, member_id=result.member_id, member_epoch=result.member_epoch,
                 heartbeat_interval=datetime.timedelta(milliseconds=result.heartbeat_interval_ms),
                 assignment=assignment)
