"""ElectLeaders (key 43), v0-2: this broker is every partition's only replica and its leader,
so there is nothing to elect. As Kafka's ReplicationControlManager.electLeaders answers:

* each partition asked: ELECTION_NOT_NEEDED (84) for both election types (the preferred
  replica leads; for UNCLEAN, a leader exists); a partition of an unknown topic, or beyond the
  topic's count, UNKNOWN_TOPIC_OR_PARTITION with Kafka's message;
* null topic list (all partitions): every topic with an empty result list, because partitions
  whose election is not needed are left out of an all-partitions answer;
* empty topic list: an empty answer;
* an election type other than 0 (preferred) or 1 (unclean, v1+): INVALID_REQUEST for the whole
  request (top-level, v1+) and for every partition asked.

ACLs (Kafka's KafkaApis.handleElectLeaders): ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED
at the top and for every partition.

Version notes:

ElectLeaders: v0-2

- v0: the oldest served: preferred leader election (KIP-183).
- v1: ``election_type`` (preferred or unclean, KIP-460) and a top-level error code.
- v2: flexible versions (compact strings and arrays, tagged fields).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from . import _authz
from ._base import NO_THROTTLE, OK, build, response_module

API_KEY = 43
MIN_VERSION = 0
MAX_VERSION = 2

PREFERRED, UNCLEAN = 0, 1
# org.apache.kafka.common.protocol.Errors.ELECTION_NOT_NEEDED's message, which ApiError carries.
ELECTION_NOT_NEEDED_MESSAGE = "Leader election not needed for topic partition."


def _elect(ctx, topic: str, partition: int) -> tuple[ErrorCode, str | None]:
    t = ctx.broker.metadata.topics.get(topic)
    if t is None:
        return ErrorCode.unknown_topic_or_partition, f"No such topic as {topic}"
    if not 0 <= partition < t.partitions:
        return ErrorCode.unknown_topic_or_partition, f"No such partition as {topic}-{partition}"
    return ErrorCode.election_not_needed, ELECTION_NOT_NEEDED_MESSAGE


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    election_type = getattr(request, "election_type", PREFERRED)
    asked = request.topic_partitions

    def respond(error_code, results):
        return build(m.ElectLeadersResponse, throttle_time=NO_THROTTLE, error_code=error_code,
                     replica_election_results=tuple(results))

    if not _authz.cluster(ctx, _authz.Op.ALTER):
        return respond(_authz.CLUSTER_DENIED, (
            m.ReplicaElectionResult(topic=t.topic, partition_result=tuple(
                m.PartitionResult(partition_id=p, error_code=_authz.CLUSTER_DENIED, error_message=None)
                for p in t.partitions))
            for t in asked or ()))
    if election_type not in (PREFERRED, UNCLEAN):
        message = f"Unknown election type {election_type}"
        return respond(ErrorCode.invalid_request, (
            m.ReplicaElectionResult(topic=t.topic, partition_result=tuple(
                m.PartitionResult(partition_id=p, error_code=ErrorCode.invalid_request, error_message=message)
                for p in t.partitions))
            for t in asked or ()))
    if asked is None:
        return respond(OK, (m.ReplicaElectionResult(topic=name, partition_result=())
                            for name in sorted(ctx.broker.metadata.topics)))
    results = []
    for t in asked:
        parts = []
        for p in t.partitions:
            code, message = _elect(ctx, t.topic, p)
            parts.append(m.PartitionResult(partition_id=p, error_code=code, error_message=message))
        results.append(m.ReplicaElectionResult(topic=t.topic, partition_result=tuple(parts)))
    return respond(OK, results)
