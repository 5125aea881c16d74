"""ReadShareGroupStateSummary (key 87), v0-1: an inter-broker API (KIP-932's persister): the
summary of a share group's share-partition state — its start offset and, from v1, its
delivery-complete count (KIP-1226). In a cluster of nodes (:mod:`oncelog.cluster`) the node
coordinating a share group sends it to the other nodes for DescribeShareGroupOffsets and
DeleteShareGroupOffsets, since each node keeps the state of the share partitions it leads
(docs/share-groups.md); a partition another node leads is NOT_COORDINATOR (its state is not here).

Each partition this node leads answers its state as :meth:`~oncelog.groups.share_coordinator.ShareCoordinator.summary`
reads it: start offset, delivery-complete count, state epoch 0 and leader epoch 0 (oncelog keeps no
state epochs, and a partition's leader epoch is always 0); a partition without state answers start
offset -1, delivery-complete count -1 and state epoch -1 (Kafka's uninitialised values), no error.
A topic id no topic has, or a partition the topic lacks, is UNKNOWN_TOPIC_OR_PARTITION.

ACLs (Kafka's KafkaApis.handleReadShareGroupStateSummaryRequest): CLUSTER_ACTION on the cluster —
the nodes' own principal has it — else every partition is CLUSTER_AUTHORIZATION_FAILED.

Version notes:

ReadShareGroupStateSummary: v0-1

- v0: Kafka 4.0's (KIP-932).
- v1: adds each partition's ``delivery_complete_count`` (KIP-1226, Kafka 4.2).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from . import _authz
from ._base import LEADER_EPOCH, build, response_module

API_KEY = 87
MIN_VERSION = 0
MAX_VERSION = 1

UNINITIALIZED = -1  # Kafka's PartitionFactory.UNINITIALIZED_START_OFFSET (and the other uninitialised values)
STATE_EPOCH = 0  # oncelog keeps no state epochs: every state it holds answers 0


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    allowed = _authz.cluster(ctx, _authz.Op.CLUSTER_ACTION)
    topics = ctx.broker.metadata.topics.by_id
    results = []
    for t in request.topics:
        topic = topics.get(t.topic_id)
        rows = []
        for p in t.partitions:
            index = p.partition
            found = None
            if not allowed:
                code = ErrorCode.cluster_authorization_failed
            elif topic is None or not 0 <= index < topic.partitions:
                code = ErrorCode.unknown_topic_or_partition
            elif not ctx.broker.placement.leads(topic.name, index):
                code = ErrorCode.not_coordinator
            else:
                code = ErrorCode.none
                found = ctx.broker.share.summary(request.group_id, t.topic_id, index)
            start, complete = found if found is not None else (UNINITIALIZED, UNINITIALIZED)
            rows.append(build(m.PartitionResult, partition=index, error_code=code, error_message=None,
                              state_epoch=STATE_EPOCH if found is not None else UNINITIALIZED,
                              leader_epoch=LEADER_EPOCH,
                              start_offset=start, delivery_complete_count=complete))
        results.append(m.ReadStateSummaryResult(topic_id=t.topic_id, partitions=tuple(rows)))
    return build(m.ReadShareGroupStateSummaryResponse, results=tuple(results))
