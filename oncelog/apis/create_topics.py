"""CreateTopics (key 19), v2-7.

Replication factor must be 1 or -1 (one broker). Explicit replica assignments are checked as
Kafka's ReplicationControlManager does (INVALID_REPLICA_ASSIGNMENT): partition indexes 0..n-1, no
empty list, no broker twice, every broker registered (here: only this broker's node.id), the
same number of replicas for every partition. ``validate_only`` checks everything and creates nothing.

Configs: every Kafka 4.x topic config (:data:`oncelog.config.registry.TOPIC_CONFIGS`), validated as
Kafka's controller does (unknown names, null values, types, ranges, valid strings, the
compaction-lag and tiered-storage checks: INVALID_CONFIG with Kafka's message), then the
values oncelog cannot honour (INVALID_CONFIG saying why). v5+ answers with the topic's
partitions, replication factor and every config with its value and source, as DescribeConfigs
reports them.

ACLs (Kafka's KafkaApis.handleCreateTopicsRequest): CREATE on the cluster, or on the topic,
else TOPIC_AUTHORIZATION_FAILED ("Authorization failed.") and nothing is created.

Version notes:

CreateTopics: v2-7 (v0-1, deprecated by KIP-896, are not served)

- v2: the oldest served: ``validate_only`` (v1), per-topic error messages (v1) and the throttle
  time.
- v3: the schema of v2; the throttle is applied after the answer (KIP-219).
- v4: partitions and replication factor may be -1 (the broker's defaults) without assignments
  (KIP-464).
- v5: flexible versions (compact strings and arrays, tagged fields); the answer has each topic's
  partitions, replication factor and configs (KIP-525).
- v6: the schema of v5; THROTTLING_QUOTA_EXCEEDED may be answered (KIP-599).
- v7: the topic id in the answer (KIP-516).
"""

from __future__ import annotations

from ..config import registry
from .. import errors
from . import _authz
from ._base import NO_THROTTLE, OK, build, response_module

API_KEY = 19
MIN_VERSION = 2
MAX_VERSION = 7


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    md = ctx.broker.metadata
    results = []
    # A name given twice: no topic of that name is created, and the answer has one result for it,
    # INVALID_REQUEST "Duplicate topic name.", after the others' (Kafka's ControllerApis.createTopics).
    names = [t.name for t in request.topics]
    duplicates = list(dict.fromkeys(n for n in names if names.count(n) > 1))
    may_create_any = _authz.cluster(ctx, _authz.Op.CREATE)
    for t in request.topics:
        if t.name in duplicates:
            continue
        code, message, topic = OK, None, None
        try:
            if not (may_create_any or _authz.topic(ctx, _authz.Op.CREATE, t.name)):
                results.append(build(m.CreatableTopicResult, name=t.name, topic_id=_zero(),
                                     error_code=_authz.TOPIC_DENIED, error_message="Authorization failed.",
                                     topic_config_error_code=OK, num_partitions=-1, replication_factor=-1,
                                     configs=()))
                continue
            partitions = t.num_partitions
            configs = {c.name: c.value for c in t.configs}
            if t.assignments:
                # Kafka's order: name, existence and configs first, then the assignment
                md.topics.check_new_topic(t.name, -1, -1, configs)
                if t.replication_factor != -1:
                    raise errors.InvalidRequest("A manual partition assignment was specified, but replication "
                                                "factor was not set to -1.")
                if partitions != -1:
                    raise errors.InvalidRequest("A manual partition assignment was specified, but numPartitions "
                                                "was not set to -1.")
                indexes: set[int] = set()
                for i, a in enumerate(t.assignments):  # as Kafka's ReplicationControlManager.createTopic
                    if a.partition_index in indexes:
                        raise errors.InvalidReplicaAssignment(
                            f"Found multiple manual partition assignments for partition {a.partition_index}")
                    indexes.add(a.partition_index)
                    check_assignments([list(x.broker_ids) for x in t.assignments[:i + 1]], ctx.broker.node_id)
                if indexes != set(range(len(indexes))):
                    raise errors.InvalidReplicaAssignment("partitions should be a consecutive 0-based integer sequence")
                partitions = len(t.assignments)
            elif partitions == -1:
                partitions = md.configs.default_partitions
            topic = md.topics.create_topic(t.name, partitions, t.replication_factor, configs,
                                      validate_only=request.validate_only)
        except errors.KafkaError as exc:
            code, message = errors.error_code_for(exc), str(exc)
        configs = ()
        if topic is not None and hasattr(m, "CreatableTopicConfigs"):
            # an override as given (Kafka's controller reports the request's string: " compact "
            # stays so here, while DescribeConfigs shows the parsed value "compact")
            configs = tuple(
                build(m.CreatableTopicConfigs, name=e.name,
                      value=topic.overrides[e.name] if e.name in topic.overrides and not e.sensitive else e.value,
                      read_only=e.read_only, config_source=int(e.source), is_sensitive=e.sensitive)
                for e in registry.describe_topic(topic.overrides, topic.config.values(), md.configs.layers,
                                             include_synonyms=False)
            )
        results.append(build(m.CreatableTopicResult, name=t.name, topic_id=topic.topic_id if topic else _zero(),
                             error_code=code, error_message=message, topic_config_error_code=OK,
                             num_partitions=topic.partitions if topic else -1,
                             replication_factor=1 if topic else -1, configs=configs))
    for name in duplicates:
        results.append(build(m.CreatableTopicResult, name=name, topic_id=_zero(), error_code=errors.error_code_for(
            errors.InvalidRequest("")), error_message="Duplicate topic name.", topic_config_error_code=OK,
            num_partitions=-1, replication_factor=-1, configs=()))
    return build(m.CreateTopicsResponse, throttle_time=NO_THROTTLE, topics=tuple(results))


def check_assignments(assignments: list[list[int]], node_id: int) -> None:
    """Kafka's validateManualPartitionAssignment, for a cluster of one broker."""
    replicas = None
    for brokers in assignments:
        if not brokers:
            raise errors.InvalidReplicaAssignment("The manual partition assignment includes an empty replica list.")
        seen = set()
        for b in brokers:
            if b in seen:
                raise errors.InvalidReplicaAssignment(
                    f"The manual partition assignment includes the broker {b} more than once.")
            seen.add(b)
            if b != node_id:
                raise errors.InvalidReplicaAssignment(
                    f"The manual partition assignment includes broker {b}, but no such broker is registered.")
        if replicas is not None and len(brokers) != replicas:
            raise errors.InvalidReplicaAssignment(
                f"The manual partition assignment includes a partition with {len(brokers)} replica(s), but this is "
                f"not consistent with previous partitions, which have {replicas} replica(s).")
        replicas = len(brokers)


def _zero():
    import uuid
    return uuid.UUID(int=0)
