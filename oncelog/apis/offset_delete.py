"""OffsetDelete (key 47), v0: delete a group's committed offsets for partitions its members
are not subscribed to (GROUP_SUBSCRIBED_TO_TOPIC otherwise).

ACLs (Kafka's KafkaApis.handleOffsetDeleteRequest): DELETE on the group, else
GROUP_AUTHORIZATION_FAILED; READ on each topic, else its partitions are TOPIC_AUTHORIZATION_FAILED
and keep their offsets.
"""

from __future__ import annotations


from . import _authz
from ._base import NO_THROTTLE, build, response_module, reply_later
from ._groups import error_code

API_KEY = 47
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    if not _authz.group(ctx, _authz.Op.DELETE, request.group_id):
        return build(m.OffsetDeleteResponse, error_code=_authz.GROUP_DENIED, throttle_time=NO_THROTTLE, topics=())
    readable = _authz.filter_topics(ctx, _authz.Op.READ, (t.name for t in request.topics))
    partitions = [(t.name, p.partition_index) for t in request.topics for p in t.partitions if t.name in readable]

    def response(error, results):
        topics = tuple(m.OffsetDeleteResponseTopic(name=t.name, partitions=tuple(
            m.OffsetDeleteResponsePartition(partition_index=p.partition_index,
                                            error_code=error_code(results.get((t.name, p.partition_index)))
                                            if t.name in readable else _authz.TOPIC_DENIED)
            for p in t.partitions)) for t in request.topics) if error is None else ()
        return build(m.OffsetDeleteResponse, error_code=error_code(error), throttle_time=NO_THROTTLE, topics=topics)

    fut, respond = reply_later(response)

    ctx.broker.groups.delete_offsets(request.group_id, partitions, respond)
    return fut
