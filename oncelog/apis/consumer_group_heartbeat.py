"""ConsumerGroupHeartbeat (key 68), v0-1: KIP-848's one group API — join (member epoch 0), heartbeat,
leave (-1, or -2 for a static member that will be back). The answer waits until the group's
records are durable (:class:`oncelog.groups.consumer_coordinator.ConsumerGroupCoordinator`).
v1 (KIP-1082): the member id comes from the client, also when joining.

Topics are named by id on the wire; the coordinator works by id too (a re-created topic is another
topic).

ACLs (Kafka's KafkaApis.handleConsumerGroupHeartbeatRequest): READ on the group, else
GROUP_AUTHORIZATION_FAILED and the group is not touched; subscribing by name to a topic the
principal may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED naming the topics. A regex
(``subscribed_topic_regex``) is not refused for what it matches: when this heartbeat resolves the
group's regexes, they resolve only to topics this member's principal may DESCRIBE (Kafka's
TopicRegexResolver.filterTopicDescribeAuthorizedTopics; see
:meth:`~oncelog.groups.consumer_assignment.ConsumerAssignment.resolve_regexes`). In a cluster of nodes
(:mod:`oncelog.cluster`), a group another node coordinates is then NOT_COORDINATOR, and the
group is not touched.

Version notes:

ConsumerGroupHeartbeat: v0-1

- v0: the oldest served (KIP-848), flexible versions (compact strings and arrays, tagged fields).
- v1: ``subscribed_topic_regex`` in the request; INVALID_REGULAR_EXPRESSION may be answered.
"""

from __future__ import annotations

import datetime

from .. import errors
from . import _authz
from ._base import NO_THROTTLE, build, response_module, reply_later
from ._groups import error_code, error_message

API_KEY = 68
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)

    def response(result):
        if result.error is not None:
            return refuse(error_code(result.error), error_message(result.error))
        assignment = None
        if result.assignment is not None:
            assignment = m.Assignment(topic_partitions=tuple(
                m.TopicPartitions(topic_id=tid, partitions=tuple(sorted(ps)))
                for tid, ps in sorted(result.assignment.items(), key=lambda kv: str(kv[0]))))
        return build(m.ConsumerGroupHeartbeatResponse, throttle_time=NO_THROTTLE, error_code=error_code(result.error),
                     error_message=error_message(result.error), member_id=result.member_id or None,
                     member_epoch=result.member_epoch, heartbeat_interval=datetime.timedelta(milliseconds=result.heartbeat_interval_ms),
                     assignment=assignment)

    def refuse(code, message):
        # As Kafka answers any error: no member id, epoch 0, no heartbeat interval.
        return build(m.ConsumerGroupHeartbeatResponse, throttle_time=NO_THROTTLE, error_code=code,
                     error_message=message, member_id=None, member_epoch=0,
                     heartbeat_interval=datetime.timedelta(0), assignment=None)

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
    owned = None
    if request.topic_partitions is not None:
        owned = {}
        for tp in request.topic_partitions:
            if tp.topic_id is not None and tp.partitions:
                owned[tp.topic_id] = owned.get(tp.topic_id, frozenset()) | frozenset(tp.partitions)
    rebalance = request.rebalance_timeout
    fut, respond = reply_later(response)
    try:
        ctx.broker.groups.consumer.heartbeat(
            group_id=request.group_id, member_id=request.member_id, member_epoch=request.member_epoch,
            instance_id=request.instance_id, rack_id=request.rack_id,
            rebalance_timeout_ms=int(rebalance.total_seconds() * 1000) if rebalance is not None else -1,
            client_id=ctx.client_id or "", client_host="/" + ctx.peer.rsplit(":", 1)[0],
            subscribed_topic_names=tuple(names) if names is not None else None,
            subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),
            server_assignor=request.server_assignor, owned=owned, api_version=ctx.api_version, respond=respond,
            describable=_authz.describable_topics(ctx))
    except errors.KafkaError as exc:  # not expected: the coordinator answers through respond
        return refuse(error_code(exc), error_message(exc))
    return fut
