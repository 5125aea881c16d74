"""InitializeShareGroupState (key 83), v0-0: an inter-broker API (KIP-932's persister): give share
partitions of a share group a new state at a start offset, nothing in flight. In a cluster of
nodes (:mod:`oncelog.cluster`) the node coordinating a share group sends it to the other nodes
for AlterShareGroupOffsets, since each node keeps the state of the share partitions it leads
(docs/share-groups.md); each named partition this node leads gets its new state
(:meth:`~oncelog.groups.share_coordinator.ShareCoordinator.alter_start`: written to
``__share_group_state``, and the share partition held in memory, if any, is dropped, so its next
fetch begins there) and the answer waits until it is durable. A start offset of -1 ("not being
initialized") makes the share partition begin at ``share.auto.offset.reset`` on its next fetch. A
partition another node leads is NOT_COORDINATOR (its state is not here); a topic id no topic
has, or a partition the topic lacks, UNKNOWN_TOPIC_OR_PARTITION. The state epoch is not checked
(oncelog keeps no state epochs: the coordinator's new state replaces the one here).

ACLs (Kafka's KafkaApis.handleInitializeShareGroupStateRequest): CLUSTER_ACTION on the cluster —
the nodes' own principal has it — else every partition is CLUSTER_AUTHORIZATION_FAILED.

Version notes:

InitializeShareGroupState: v0-0

- v0: the only version (Kafka 4.0+).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from .. import errors
from . import _authz
from ._base import build, reply_later, response_module

API_KEY = 83
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    named = [(t.topic_id, p.partition, p.start_offset) for t in request.topics for p in t.partitions]

    def response(codes):
        by_topic: dict = {}
        for topic_id, index, _start in named:
            code = codes.get((topic_id, index), ErrorCode.none)
            by_topic.setdefault(topic_id, []).append(m.PartitionResult(partition=index, error_code=code,
                                                                       error_message=None))
        return build(m.InitializeShareGroupStateResponse, results=tuple(
            m.InitializeStateResult(topic_id=tid, partitions=tuple(ps)) for tid, ps in by_topic.items()))

    if not _authz.cluster(ctx, _authz.Op.CLUSTER_ACTION):
        return response({(tid, i): ErrorCode.cluster_authorization_failed for tid, i, _s in named})
    topics = ctx.broker.metadata.topics.by_id
    codes = {}
    starts = {}
    for topic_id, index, start in named:
        topic = topics.get(topic_id)
        if topic is None or not 0 <= index < topic.partitions:
            codes[(topic_id, index)] = ErrorCode.unknown_topic_or_partition
        elif not ctx.broker.placement.leads(topic.name, index):
            codes[(topic_id, index)] = ErrorCode.not_coordinator
        else:
            starts[(topic_id, index)] = start
    if not starts:
        return response(codes)
    fut, respond = reply_later(response)

    def done(results):
        respond({**codes, **{part: ErrorCode.none if error is None else errors.error_code_for(error)
                             for part, error in results.items()}})
    ctx.broker.share.alter_start(request.group_id, starts, done)
    return fut
