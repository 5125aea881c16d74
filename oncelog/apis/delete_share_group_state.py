"""DeleteShareGroupState (key 86), v0-0: an inter-broker API (KIP-932's persister): forget the
state of a share group's share partitions. In a cluster of nodes (:mod:`oncelog.cluster`) the node
coordinating a share group sends it to the other nodes when the group is deleted, since each
node keeps the state of the share partitions it leads (docs/share-groups.md); each named
partition this node leads gets a tombstone in ``__share_group_state`` and the answer waits until
it is durable. A partition another node leads is NOT_COORDINATOR (its state is not here).

ACLs (Kafka's KafkaApis.handleDeleteShareGroupStateRequest): CLUSTER_ACTION on the cluster — the
nodes' own principal has it — else every partition is CLUSTER_AUTHORIZATION_FAILED.

Version notes:

DeleteShareGroupState: v0-0

- v0: the only version (Kafka 4.0+).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from .. import errors
from . import _authz
from ._base import build, reply_later, response_module

API_KEY = 86
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    named = [(t.topic_id, p.partition) for t in request.topics for p in t.partitions]

    def response(codes):
        by_topic: dict = {}
        for topic_id, index in named:
            code = codes.get((topic_id, index), ErrorCode.none)
            by_topic.setdefault(topic_id, []).append(m.PartitionResult(partition=index, error_code=code,
                                                                       error_message=None))
        return build(m.DeleteShareGroupStateResponse, results=tuple(
            m.DeleteStateResult(topic_id=tid, partitions=tuple(ps)) for tid, ps in by_topic.items()))

    if not _authz.cluster(ctx, _authz.Op.CLUSTER_ACTION):
        return response({tp: ErrorCode.cluster_authorization_failed for tp in named})
    topics = ctx.broker.metadata.topics.by_id
    codes = {}
    here = set()
    for topic_id, index in named:
        topic = topics.get(topic_id)
        if topic is None or not 0 <= index < topic.partitions:
            codes[(topic_id, index)] = ErrorCode.unknown_topic_or_partition
        elif not ctx.broker.placement.leads(topic.name, index):
            codes[(topic_id, index)] = ErrorCode.not_coordinator
        else:
            here.add((topic_id, index))
    fut, respond = reply_later(response)

    def done(error):
        code = ErrorCode.none if error is None else errors.error_code_for(error)
        respond({**codes, **{tp: code for tp in here}})
    ctx.broker.share.delete_state(request.group_id, here, done)
    return fut
