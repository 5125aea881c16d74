"""OffsetDelete (key 47), v0: delete a group's committed offsets for partitions its members
are not subscribed to (GROUP_SUBSCRIBED_TO_TOPIC otherwise). Partitions of unknown topics, and
partitions a topic does not have, are UNKNOWN_TOPIC_OR_PARTITION before the group is asked
(Kafka's KafkaApis.handleOffsetDeleteRequest).

ACLs (Kafka's KafkaApis.handleOffsetDeleteRequest): DELETE on the group, else
GROUP_AUTHORIZATION_FAILED; READ on each topic, else its partitions are TOPIC_AUTHORIZATION_FAILED
and keep their offsets. In a cluster of nodes (:mod:`oncelog.cluster`), a group another node
coordinates is then NOT_COORDINATOR (no partitions answered), and the group is not asked.

Version notes:

OffsetDelete: v0

- v0: the only version (KIP-496).
"""

from __future__ import annotations


from kio.schema.errors import ErrorCode

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
    broker = ctx.broker
    readable = _authz.filter_topics(ctx, _authz.Op.READ, (t.name for t in request.topics))
    # As Kafka's OffsetDeleteResponse.Builder: partitions refused before the group is asked
    # first, then the group's answer merged in; a group error replaces them all.
    refused: dict[str, list[tuple[int, object]]] = {}
    partitions = []
    for t in request.topics:
        for p in t.partitions:
            if t.name not in readable:
                refused.setdefault(t.name, []).append((p.partition_index, _authz.TOPIC_DENIED))
            elif not broker.partition_exists(t.name, p.partition_index):
                refused.setdefault(t.name, []).append((p.partition_index, ErrorCode.unknown_topic_or_partition))
            else:
                partitions.append((t.name, p.partition_index))

    def response(error, results):
        if error is not None:
            return build(m.OffsetDeleteResponse, error_code=error_code(error), throttle_time=NO_THROTTLE, topics=())
        answer = {name: list(parts) for name, parts in refused.items()}
        for (name, partition) in partitions:
            answer.setdefault(name, []).append((partition, error_code(results.get((name, partition)))))
        return build(m.OffsetDeleteResponse, error_code=error_code(None), throttle_time=NO_THROTTLE, topics=tuple(
            m.OffsetDeleteResponseTopic(name=name, partitions=tuple(
                m.OffsetDeleteResponsePartition(partition_index=p, error_code=code) for p, code in parts))
            for name, parts in answer.items()))

    not_coordinator = broker.coordinator_error(0, request.group_id)
    if not_coordinator is not None:
        return response(not_coordinator, {})
    fut, respond = reply_later(response)

    broker.groups.delete_offsets(request.group_id, partitions, respond)
    return fut
