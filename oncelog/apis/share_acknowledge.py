"""ShareAcknowledge (key 79), v1-2: a share group member's acknowledgements outside a fetch
(KIP-932): its share session's step (epoch 0 is INVALID_SHARE_SESSION_EPOCH; -1 closes the
session after the acknowledgements, releasing its member's remaining acquired records), then each
partition's acknowledgements applied all or none and answered once durable: the partition's
``error_code`` (INVALID_RECORD_STATE for a record not acquired by this member, INVALID_REQUEST for
offsets past the records in flight or an unknown acknowledge type).

ACLs (Kafka's KafkaApis.handleShareAcknowledgeRequest): READ on the group, else
GROUP_AUTHORIZATION_FAILED for the whole request; READ on each topic, else its partitions are
TOPIC_AUTHORIZATION_FAILED.

Version notes:

ShareAcknowledge: v1-2

- v1: the stable version (Kafka 4.1); v0 was Kafka 4.0's early access, removed.
- v2: ``is_renew_ack`` and the RENEW acknowledge type (4) (KIP-1222).
"""

from __future__ import annotations

import datetime

from kio.schema.errors import ErrorCode

from ..groups.share_sessions import ShareSessionError
from . import _authz, _share
from ._base import NO_THROTTLE, build, response_module

API_KEY = 79
MIN_VERSION = 1
MAX_VERSION = 2


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    group_id, member_id = request.group_id or "", request.member_id or ""

    def refuse(code, message=None):
        return build(m.ShareAcknowledgeResponse, throttle_time=NO_THROTTLE, error_code=code, error_message=message,
                     acquisition_lock_timeout=datetime.timedelta(0), responses=(), node_endpoints=())

    if (why := _share.refused(ctx, request)) is not None:
        return refuse(*why)
    try:
        context = ctx.broker.share.sessions.acknowledge(group_id, member_id, request.share_session_epoch,
                                                        _share.connection_of(ctx))
    except ShareSessionError as exc:
        return refuse(*_share.session_error(exc))
    return _serve(ctx, m, request, context)


async def _serve(ctx, m, request, context):
    names = [n for n in (_share.topic_name(ctx, t.topic_id) for t in request.topics) if n is not None]
    readable = _authz.filter_topics(ctx, _authz.Op.READ, names)
    acks = await _share.apply_acks(ctx, context.group_id, context.member_id, request.topics, readable)
    if context.final:
        _share.release_session(ctx, context.group_id, context.member_id)
    settings = ctx.broker.share.settings(context.group_id)
    by_topic: dict = {}
    for (topic_id, index), error in acks.items():
        leader_id, leader_epoch = _share.leader_of(ctx, error)
        by_topic.setdefault(topic_id, []).append(build(
            m.PartitionData, partition_index=index, error_code=_share.code_of(error),
            error_message=_share.message_of(error),
            current_leader=m.LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=leader_epoch)))
    return build(m.ShareAcknowledgeResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None,
                 acquisition_lock_timeout=datetime.timedelta(milliseconds=int(settings["share.record.lock.duration.ms"])),
                 responses=tuple(m.ShareAcknowledgeTopicResponse(topic_id=tid, partitions=tuple(parts))
                                 for tid, parts in by_topic.items()),
                 node_endpoints=())
