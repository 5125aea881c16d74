"""AlterPartitionReassignments (key 45), v0-1: on one broker a partition's only replica is this
broker, so the only assignment there is to keep is the one it has. As a one-node Kafka 4.4's
ReplicationControlManager answers (measured against it), per partition, in this order:

* a topic that does not exist: UNKNOWN_TOPIC_OR_PARTITION "Unable to find a topic named <t>.";
  a partition beyond its count: "Unable to find partition <t>:<p>.";
* replicas null (cancel): NO_REASSIGNMENT_IN_PROGRESS (nothing is ever reassigning);
* an empty list: INVALID_REPLICA_ASSIGNMENT "The manual partition assignment includes an empty
  replica list."; a broker twice: "... includes the broker <b> more than once."; another broker:
  "... includes broker <b>, but no such broker is registered.";
* exactly this broker: NONE (nothing to move; ListPartitionReassignments stays empty).

ACLs (Kafka's KafkaApis.handleAlterPartitionReassignmentsRequest): ALTER on the cluster, else
CLUSTER_AUTHORIZATION_FAILED at the top and for every partition.

Version notes:

AlterPartitionReassignments: v0-1

- v0: the oldest served (KIP-455).
- v1: ``allow_replication_factor_change`` in the request (KIP-860); nothing here changes a
  replication factor.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from . import _authz
from ._base import NO_THROTTLE, OK, build, response_module

API_KEY = 45
MIN_VERSION = 0
MAX_VERSION = 1


def _check(ctx, topic: str, partition: int, replicas) -> tuple[ErrorCode, str | None]:
    t = ctx.broker.metadata.topics.get(topic)
    if t is None:
        return ErrorCode.unknown_topic_or_partition, f"Unable to find a topic named {topic}."
    if not 0 <= partition < t.partitions:
        return ErrorCode.unknown_topic_or_partition, f"Unable to find partition {topic}:{partition}."
    if replicas is None:
        return ErrorCode.no_reassignment_in_progress, None
    if not replicas:
        return ErrorCode.invalid_replica_assignment, "The manual partition assignment includes an empty replica list."
    seen: set[int] = set()
    for b in replicas:
        if b in seen:
            return ErrorCode.invalid_replica_assignment, (f"The manual partition assignment includes the broker {b} "
                                                          "more than once.")
        seen.add(b)
    nodes = ctx.broker.placement.node_ids()
    for b in replicas:
        if b not in nodes:
            return ErrorCode.invalid_replica_assignment, (f"The manual partition assignment includes broker {b}, but "
                                                          "no such broker is registered.")
    leader = ctx.broker.placement.leader(topic, partition)
    if list(replicas) != [leader]:
        # A cluster of nodes (oncelog.cluster) places each partition on one node for good.
        return ErrorCode.invalid_replica_assignment, (f"{topic}-{partition} stays on node {leader}: oncelog's "
                                                      "partitions have one replica and do not move between nodes.")
    return OK, None


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    denied = not _authz.cluster(ctx, _authz.Op.ALTER)
    responses = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            code, message = ((_authz.CLUSTER_DENIED, None) if denied
                             else _check(ctx, t.name, p.partition_index, p.replicas))
            parts.append(m.ReassignablePartitionResponse(partition_index=p.partition_index, error_code=code,
                                                         error_message=message))
        responses.append(m.ReassignableTopicResponse(name=t.name, partitions=tuple(parts)))
    return build(m.AlterPartitionReassignmentsResponse, throttle_time=NO_THROTTLE,
                 allow_replication_factor_change=getattr(request, "allow_replication_factor_change", True),
                 error_code=_authz.CLUSTER_DENIED if denied else OK, error_message=None, responses=tuple(responses))
