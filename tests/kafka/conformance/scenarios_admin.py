"""Topic and config administration: CreateTopics validation, DeleteTopics, CreatePartitions,
AlterConfigs/IncrementalAlterConfigs, DescribeConfigs, DeleteRecords, Metadata, ApiVersions.

Invariants: the session's Apache Kafka is shared with other tests, so broker-resource changes are
sent with validate_only only; topic configs are compared by the names both brokers report
(:data:`TOPIC_CONFIGS`), never as whole lists (Kafka has configs oncelog does not, e.g. tiered
storage); a broker resource is named by the node id each broker reports in Metadata, and read
back as "<node>".
"""

from __future__ import annotations

import dataclasses
import datetime
import uuid

from .framework import (ALTER_CONFIGS, API_VERSIONS, CREATE_PARTITIONS, CREATE_TOPICS, DELETE_RECORDS,
                        DELETE_TOPICS, DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS, METADATA, batch, mod)
from .scenarios_groups import build, make, scenario

TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

# Topic configs compared field by field (value, read_only, source, sensitivity, synonyms).
TOPIC_CONFIGS = ("cleanup.policy", "retention.ms", "retention.bytes", "segment.bytes", "segment.ms",
                 "max.message.bytes", "message.timestamp.type", "compression.type", "min.compaction.lag.ms",
                 "delete.retention.ms", "min.cleanable.dirty.ratio", "message.timestamp.before.max.ms")
# Broker configs neither broker's test setup sets (their source is the default on both).
BROKER_CONFIGS = ("log.retention.hours", "log.retention.ms", "message.max.bytes", "log.segment.bytes",
                  "auto.create.topics.enable", "log.cleanup.policy", "offsets.retention.minutes",
                  "compression.type")
TIMEOUT = datetime.timedelta(seconds=30)


# ---------------------------------------------------------------------- helpers


def create(k, *topics, validate_only: bool = False, version: int = 7, configs_of=TOPIC_CONFIGS):
    """CreateTopics of ``topics``: dicts name (the run-unique name is the caller's), partitions,
    rf, assignments {partition: [node ids]}, configs {name: value}. The answer's per-topic
    configs (v5+) are kept for the names in ``configs_of``."""
    m = mod(CREATE_TOPICS, version)
    req = build(CREATE_TOPICS, version, validate_only=validate_only, timeout=TIMEOUT, topics=tuple(
        m.CreatableTopic(name=t["name"], num_partitions=t.get("partitions", 1), replication_factor=t.get("rf", 1),
                         assignments=tuple(m.CreatableReplicaAssignment(partition_index=p, broker_ids=tuple(ids))
                                           for p, ids in t.get("assignments", {}).items()),
                         configs=tuple(m.CreatableTopicConfig(name=n, value=v) for n, v in t.get("configs", {}).items()))
        for t in topics))
    resp = k.send(req)
    if version < 5:
        return resp
    return dataclasses.replace(resp, topics=tuple(
        dataclasses.replace(t, configs=tuple(c for c in t.configs if c.name in configs_of)) for t in resp.topics))


def exists(k, name: str) -> bool:
    return int(k.metadata([name]).topics[0].error_code) == 0


def topic_view(md_topic):
    """A Metadata topic without node ids: name, error, internal, each partition's error, epoch, replica count."""
    return {"name": md_topic.name, "error_code": md_topic.error_code, "is_internal": md_topic.is_internal,
            "partitions": [{"partition_index": p.partition_index, "error_code": p.error_code,
                            "leader_epoch": p.leader_epoch, "replicas": len(p.replica_nodes), "isr": len(p.isr_nodes)}
                           for p in sorted(md_topic.partitions, key=lambda p: p.partition_index)]}


def metadata(k, names, *, auto_create: bool = False, version: int = 12):
    m = mod(METADATA, version)
    return k.send(build(METADATA, version, allow_auto_topic_creation=auto_create,
                        include_topic_authorized_operations=False, include_cluster_authorized_operations=False,
                        topics=None if names is None else tuple(
                            make(m.MetadataRequestTopic, name=n, topic_id=uuid.UUID(int=0)) for n in names)))



def node_id(k) -> int:
    return metadata(k, []).brokers[0].node_id


def delete_topics(k, names=(), ids=(), *, version: int = 6):
    m = mod(DELETE_TOPICS, version)
    if version < 6:
        return k.send(build(DELETE_TOPICS, version, topic_names=tuple(names), timeout=TIMEOUT))
    return k.send(m.DeleteTopicsRequest(timeout=TIMEOUT, topics=tuple(
        [m.DeleteTopicState(name=n, topic_id=uuid.UUID(int=0)) for n in names]
        + [m.DeleteTopicState(name=None, topic_id=i) for i in ids])))


def create_partitions(k, name: str, count: int, *, validate_only: bool = False):
    m = mod(CREATE_PARTITIONS, 3)
    return k.send(m.CreatePartitionsRequest(timeout=TIMEOUT, validate_only=validate_only, topics=(
        m.CreatePartitionsTopic(name=name, count=count, assignments=None),)))


def describe_configs(k, resource_type: int, name: str, names=None, *, synonyms: bool = False,
                     keep=TOPIC_CONFIGS):
    """DescribeConfigs v4 of one resource; the answer's configs those of ``keep`` (all asked for if
    ``names`` is given), sorted by name; a broker's resource name reads "<node>"."""
    m = mod(DESCRIBE_CONFIGS, 4)
    resp = k.send(m.DescribeConfigsRequest(include_synonyms=synonyms, include_documentation=False, resources=(
        m.DescribeConfigsResource(resource_type=resource_type, resource_name=name,
                                  configuration_keys=None if names is None else tuple(names)),)))
    wanted = set(names) if names is not None else set(keep)
    return dataclasses.replace(resp, results=tuple(dataclasses.replace(
        r, resource_name="<node>" if resource_type == BROKER else r.resource_name,
        configs=tuple(sorted((c for c in r.configs if c.name in wanted), key=lambda c: c.name)))
        for r in resp.results))


def config_value(k, topic: str, name: str):
    got = describe_configs(k, TOPIC, topic, [name]).results[0].configs
    return (got[0].value, got[0].config_source) if got else None


def settled(k, topic: str, name: str, until):
    """(value, source) of a topic config once ``until((value, source))`` holds: Kafka applies a
    config change when the controller's record reaches the broker, a moment after answering."""
    return k.wait_until(lambda: (v := config_value(k, topic, name)) and until(v) and v, f"{name} of {topic} settled")


MARK = ("segment.jitter.ms", SET, "1234")  # sent beside a change that may change nothing: its arrival shows the change's


def marked(k, topic: str):
    """Wait until the :data:`MARK` sent with the last change is in force."""
    settled(k, topic, MARK[0], lambda v: v[0] == MARK[2])


def alter_configs(k, resource_type: int, name: str, configs: dict, *, validate_only: bool = False):
    """The legacy AlterConfigs v2: the resource's overrides become ``configs``."""
    m = mod(ALTER_CONFIGS, 2)
    resp = k.send(m.AlterConfigsRequest(validate_only=validate_only, resources=(m.AlterConfigsResource(
        resource_type=resource_type, resource_name=name,
        configs=tuple(m.AlterableConfig(name=n, value=v) for n, v in configs.items())),)))
    if resource_type == GROUP and not validate_only and resp.responses[0].error_code == 0:
        _group_settled(k, name, lambda own: own == configs)
    return _node_named(resp, resource_type)


def incremental(k, resource_type: int, name: str, ops, *, validate_only: bool = False):
    """IncrementalAlterConfigs v1 of one resource: ops [(config, op, value)]."""
    m = mod(INCREMENTAL_ALTER_CONFIGS, 1)
    resp = k.send(m.IncrementalAlterConfigsRequest(validate_only=validate_only, resources=(m.AlterConfigsResource(
        resource_type=resource_type, resource_name=name,
        configs=tuple(m.AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in ops)),)))
    if resource_type == GROUP and not validate_only and resp.responses[0].error_code == 0:
        _group_settled(k, name, lambda own: all(
            (own.get(n) == v) if op == SET else (n not in own) for n, op, v in ops if op in (SET, DELETE)))
    return _node_named(resp, resource_type)


def _group_settled(k, group: str, done) -> None:
    """Wait until DescribeConfigs shows the group's own configs (source GROUP_CONFIG, 8) as ``done``
    wants them: Kafka's broker answers a group config change once its controller has it and applies
    it to the metadata image it describes from a moment later (oncelog at once); a describe in
    between saw the old values under load (CI)."""
    def own():
        m = mod(DESCRIBE_CONFIGS, 4)
        r = k.send(m.DescribeConfigsRequest(include_synonyms=False, include_documentation=False, resources=(
            m.DescribeConfigsResource(resource_type=GROUP, resource_name=group, configuration_keys=None),)))
        return {c.name: c.value for c in r.results[0].configs if int(c.config_source) == 8}
    k.wait_until(lambda: done(own()), f"group {group}'s configs in DescribeConfigs", timeout=15)


def _node_named(resp, resource_type):
    if resource_type != BROKER:
        return resp
    return dataclasses.replace(resp, responses=tuple(dataclasses.replace(r, resource_name="<node>")
                                                     for r in resp.responses))


def delete_records(k, topic: str, offsets: dict[int, int]):
    m = mod(DELETE_RECORDS, 2)
    return k.send(m.DeleteRecordsRequest(timeout=TIMEOUT, topics=(m.DeleteRecordsTopic(name=topic, partitions=tuple(
        m.DeleteRecordsPartition(partition_index=p, offset=o) for p, o in offsets.items())),)))


def filled(k, base: str = "t", records: int = 10):
    """A one-partition topic holding ``records`` records (offsets 0..records-1)."""
    t = k.create_topic(base)
    k.produce(t, batch([b"v%d" % i for i in range(records)]))
    return t


# ---------------------------------------------------------------------- CreateTopics


@scenario("admin")
def create_topic_defaults(k):
    """CreateTopics v7 of a topic with 3 partitions: its id, partitions, replication factor and default configs."""
    name = k.name("t")
    return [create(k, {"name": name, "partitions": 3}), topic_view(metadata(k, [name]).topics[0])]


@scenario("admin")
def create_topic_default_partitions(k):
    """CreateTopics with partitions -1 and replication factor -1: the broker defaults (num.partitions 1)."""
    return create(k, {"name": k.name("t"), "partitions": -1, "rf": -1})


@scenario("admin")
def create_topic_name_dot(k):
    """CreateTopics of topic ".": INVALID_TOPIC_EXCEPTION with Kafka's message."""
    return create(k, {"name": "."})


@scenario("admin")
def create_topic_name_dotdot(k):
    """CreateTopics of topic "..": INVALID_TOPIC_EXCEPTION with Kafka's message."""
    return create(k, {"name": ".."})


@scenario("admin")
def create_topic_name_too_long(k):
    """CreateTopics of a 250-character name: INVALID_TOPIC_EXCEPTION (the limit is 249)."""
    return create(k, {"name": k.name("x" * (250 - len(k.name(""))))})


@scenario("admin")
def create_topic_name_249(k):
    """CreateTopics of a 249-character name: created."""
    return create(k, {"name": k.name("x" * (249 - len(k.name(""))))})


@scenario("admin")
def create_topic_name_illegal_chars(k):
    """CreateTopics of names with a space, a slash and a non-ASCII letter: INVALID_TOPIC_EXCEPTION each."""
    return [create(k, {"name": k.name("a b")}), create(k, {"name": k.name("a/b")}), create(k, {"name": k.name("é")})]


@scenario("admin")
def create_topic_name_empty(k):
    """CreateTopics of the empty name: INVALID_TOPIC_EXCEPTION."""
    return create(k, {"name": ""})


@scenario("admin")
def create_topic_replication_factor_2(k):
    """CreateTopics with replication factor 2 on one broker: INVALID_REPLICATION_FACTOR with Kafka's message."""
    return create(k, {"name": k.name("t"), "rf": 2})


@scenario("admin")
def create_topic_replication_factor_3(k):
    """CreateTopics with replication factor 3 on one broker: INVALID_REPLICATION_FACTOR."""
    return create(k, {"name": k.name("t"), "rf": 3})


@scenario("admin")
def create_topic_replication_factor_0(k):
    """CreateTopics with replication factor 0: INVALID_REPLICATION_FACTOR."""
    return create(k, {"name": k.name("t"), "rf": 0})


@scenario("admin")
def create_topic_zero_partitions(k):
    """CreateTopics with 0 partitions: INVALID_PARTITIONS with Kafka's message."""
    return create(k, {"name": k.name("t"), "partitions": 0})


@scenario("admin")
def create_topic_minus_two_partitions(k):
    """CreateTopics with -2 partitions: INVALID_PARTITIONS."""
    return create(k, {"name": k.name("t"), "partitions": -2})


@scenario("admin")
def create_topic_with_assignments(k):
    """CreateTopics with a manual assignment of two partitions to this broker (partitions and rf -1)."""
    node = node_id(k)
    name = k.name("t")
    return [create(k, {"name": name, "partitions": -1, "rf": -1, "assignments": {0: [node], 1: [node]}}),
            topic_view(k.wait_until(lambda: (t := metadata(k, [name]).topics[0]) and int(t.error_code) == 0 and
                                    len(t.partitions) == 2 and t, "two partitions"))]


@scenario("admin")
def create_topic_assignments_with_partitions(k):
    """CreateTopics with assignments and a partition count too: INVALID_REQUEST."""
    node = node_id(k)
    return create(k, {"name": k.name("t"), "partitions": 2, "assignments": {0: [node], 1: [node]}})


@scenario("admin")
def create_topic_assignment_unknown_broker(k):
    """CreateTopics assigning a partition to a broker that does not exist: INVALID_REPLICA_ASSIGNMENT."""
    return create(k, {"name": k.name("t"), "partitions": -1, "rf": -1, "assignments": {0: [4711]}})


@scenario("admin")
def create_topic_assignment_gap(k):
    """CreateTopics assigning partitions 0 and 2 (no 1): INVALID_REPLICA_ASSIGNMENT."""
    node = node_id(k)
    return create(k, {"name": k.name("t"), "partitions": -1, "rf": -1, "assignments": {0: [node], 2: [node]}})


@scenario("admin")
def create_topic_unknown_config(k):
    """CreateTopics with a config Kafka does not know: INVALID_CONFIG with its message."""
    return create(k, {"name": k.name("t"), "configs": {"no.such.config": "1"}})


@scenario("admin")
def create_topic_invalid_config_values(k):
    """CreateTopics with invalid values of cleanup.policy, retention.ms, segment.bytes, min.insync.replicas, compression.type."""
    return [create(k, {"name": k.name(f"t{i}"), "configs": {n: v}}) for i, (n, v) in enumerate((
        ("cleanup.policy", "bogus"), ("retention.ms", "abc"), ("segment.bytes", "10"),
        ("min.insync.replicas", "0"), ("compression.type", "brotli"), ("message.timestamp.type", "Sometime"),
        ("retention.ms", "-2")))]


@scenario("admin")
def create_topic_removed_config(k):
    """CreateTopics with message.downconversion.enable, a topic config Kafka 4.4 removed."""
    return create(k, {"name": k.name("t"), "configs": {"message.downconversion.enable": "true"}})


@scenario("admin")
def create_topic_null_config_value(k):
    """CreateTopics with a config whose value is null: INVALID_CONFIG."""
    return create(k, {"name": k.name("t"), "configs": {"retention.ms": None}})


@scenario("admin")
def create_topic_check_order(k):
    """CreateTopics with several faults at once: Kafka's order (name, configs, replication factor, partitions, assignment)."""
    node = node_id(k)
    return create(k, {"name": ".", "rf": 0, "configs": {"no.such.config": "1"}},
                  {"name": k.name("a"), "rf": 0, "partitions": 0, "configs": {"retention.ms": "x"}},
                  {"name": k.name("b"), "rf": 0, "partitions": 0},
                  {"name": k.name("c"), "rf": 5, "partitions": 0},
                  {"name": k.name("d"), "rf": 2, "partitions": -1, "assignments": {0: [node]}},
                  {"name": k.name("e"), "partitions": -1, "rf": -1, "configs": {"retention.ms": "x"},
                   "assignments": {0: [4711]}},
                  {"name": k.name("f"), "partitions": -1, "rf": -1, "assignments": {0: [node], 1: [node, node]}},
                  {"name": k.name("g"), "partitions": -1, "rf": -1, "assignments": {0: [node], 0: [node]}})


@scenario("admin")
def create_topic_colliding_name(k):
    """CreateTopics of "a.b" when "a_b" exists: INVALID_TOPIC_EXCEPTION (the names collide in metric names)."""
    k.create_topic("x_y")
    return create(k, {"name": k.name("x.y")})


@scenario("admin")
def create_topic_internal_name(k):
    """CreateTopics of a name starting with "__" (not an internal topic of the broker): created, not internal."""
    name = "__" + k.name("t")
    r = create(k, {"name": name})
    k.wait_until(lambda: k._leaders_known(name, 1), "leader")
    out = [r, topic_view(metadata(k, [name]).topics[0])]
    delete_topics(k, [name])
    return out


@scenario("admin")
def create_topic_with_configs(k):
    """CreateTopics with valid configs: the answer reports them as DYNAMIC_TOPIC_CONFIG."""
    return create(k, {"name": k.name("t"), "configs": {"cleanup.policy": "compact,delete", "retention.ms": "1000",
                                                       "max.message.bytes": "2048", "compression.type": "zstd"}})


@scenario("admin")
def create_topic_list_config_edges(k):
    """CreateTopics with cleanup.policy "", " compact " (answered as given, described parsed), "compact,bogus", "compact,compact"."""
    created = [create(k, {"name": k.name(f"t{i}"), "configs": {"cleanup.policy": v}})
               for i, v in enumerate(("", " compact ", "compact,bogus", "compact,compact"))]
    k.wait_until(lambda: k._leaders_known(k.name("t1"), 1), "t1")
    return [created, config_value(k, k.name("t1"), "cleanup.policy")]


@scenario("admin")
def create_topic_numeric_config_edges(k):
    """CreateTopics with retention.ms -1 (keep for ever), max.message.bytes 0, min.cleanable.dirty.ratio 1.5, segment.ms 0."""
    return [create(k, {"name": k.name(f"t{i}"), "configs": {n: v}}) for i, (n, v) in enumerate((
        ("retention.ms", "-1"), ("max.message.bytes", "0"), ("min.cleanable.dirty.ratio", "1.5"),
        ("segment.ms", "0"), ("retention.bytes", "-7"), ("message.timestamp.type", "LogAppendTime")))]


@scenario("admin")
def create_topic_validate_only(k):
    """CreateTopics with validate_only: the answer as for a creation, no topic made."""
    name = k.name("t")
    return [create(k, {"name": name, "partitions": 2}, validate_only=True), exists(k, name)]


@scenario("admin")
def create_topic_validate_only_invalid(k):
    """CreateTopics with validate_only and an invalid config: INVALID_CONFIG as without it."""
    return create(k, {"name": k.name("t"), "configs": {"cleanup.policy": "bogus"}}, validate_only=True)


@scenario("admin")
def create_topic_duplicate_in_request(k):
    """CreateTopics naming one topic twice: INVALID_REQUEST for it, no topic made."""
    name = k.name("t")
    return [create(k, {"name": name}, {"name": name}), exists(k, name)]


@scenario("admin")
def create_topic_already_exists(k):
    """CreateTopics of an existing topic: TOPIC_ALREADY_EXISTS with Kafka's message."""
    name = k.create_topic("t")
    return create(k, {"name": name})


@scenario("admin")
def create_topic_v4(k):
    """CreateTopics v4 (before per-topic configs in the answer): errors and messages."""
    return create(k, {"name": k.name("t")}, {"name": "."}, {"name": k.name("u"), "rf": 2}, version=4)


# ---------------------------------------------------------------------- DeleteTopics


@scenario("admin")
def delete_topic_by_name(k):
    """DeleteTopics v6 by name: NONE, the topic is gone from Metadata."""
    name = k.create_topic("t")
    return [delete_topics(k, [name]), k.wait_until(lambda: not exists(k, name), "topic gone")]


@scenario("admin")
def delete_topic_unknown(k):
    """DeleteTopics v6 of an unknown name: UNKNOWN_TOPIC_OR_PARTITION."""
    return delete_topics(k, [k.name("missing")])


@scenario("admin")
def delete_topic_v5_unknown(k):
    """DeleteTopics v5 (names only) of an unknown name: UNKNOWN_TOPIC_OR_PARTITION."""
    return delete_topics(k, [k.name("missing")], version=5)


@scenario("admin")
def delete_topic_by_id(k):
    """DeleteTopics v6 by topic id: NONE, the answer names the topic."""
    name = k.create_topic("t")
    tid = metadata(k, [name]).topics[0].topic_id
    return [delete_topics(k, ids=[tid]), k.wait_until(lambda: not exists(k, name), "topic gone")]


@scenario("admin")
def delete_topic_unknown_id(k):
    """DeleteTopics v6 of an unknown topic id: UNKNOWN_TOPIC_ID."""
    return delete_topics(k, ids=[uuid.uuid4()])


@scenario("admin")
def delete_then_recreate(k):
    """A deleted topic created again gets a new id and an empty log."""
    name = filled(k)
    delete_topics(k, [name])
    k.wait_until(lambda: not exists(k, name), "topic gone")
    again = k.wait_until(lambda: (r := create(k, {"name": name})) and int(r.topics[0].error_code) == 0 and r,
                         "topic created again")
    # a new partition's leader may answer NOT_LEADER_OR_FOLLOWER a moment after Metadata names it
    p = k.wait_until(lambda: (f := k.fetch(name).responses[0].partitions[0]) and int(f.error_code) == 0 and f,
                     "the new partition served")
    return [again, p.high_watermark, p.log_start_offset]


# ---------------------------------------------------------------------- CreatePartitions


@scenario("admin")
def create_partitions_increase(k):
    """CreatePartitions from 1 to 3: NONE, Metadata shows 3 partitions."""
    name = k.create_topic("t")
    r = create_partitions(k, name, 3)
    k.wait_until(lambda: k._leaders_known(name, 3), "three partitions")
    return [r, topic_view(metadata(k, [name]).topics[0])]


@scenario("admin")
def create_partitions_decrease(k):
    """CreatePartitions from 2 to 1: INVALID_PARTITIONS with Kafka's message."""
    name = k.create_topic("t", partitions=2)
    return create_partitions(k, name, 1)


@scenario("admin")
def create_partitions_same_count(k):
    """CreatePartitions to the count the topic has: INVALID_PARTITIONS with Kafka's message."""
    name = k.create_topic("t", partitions=2)
    return create_partitions(k, name, 2)


@scenario("admin")
def create_partitions_unknown_topic(k):
    """CreatePartitions of an unknown topic: UNKNOWN_TOPIC_OR_PARTITION."""
    return create_partitions(k, k.name("missing"), 2)


@scenario("admin")
def create_partitions_assignment_count_mismatch(k):
    """CreatePartitions from 1 to 3 with one assignment: INVALID_REPLICA_ASSIGNMENT with Kafka's message."""
    name = k.create_topic("t")
    node = node_id(k)
    m = mod(CREATE_PARTITIONS, 3)
    return k.send(m.CreatePartitionsRequest(timeout=TIMEOUT, validate_only=False, topics=(
        m.CreatePartitionsTopic(name=name, count=3, assignments=(m.CreatePartitionsAssignment(broker_ids=(node,)),)),)))


@scenario("admin")
def create_partitions_with_assignment(k):
    """CreatePartitions from 1 to 2 with an assignment to this broker: NONE."""
    name = k.create_topic("t")
    node = node_id(k)
    m = mod(CREATE_PARTITIONS, 3)
    r = k.send(m.CreatePartitionsRequest(timeout=TIMEOUT, validate_only=False, topics=(
        m.CreatePartitionsTopic(name=name, count=2, assignments=(m.CreatePartitionsAssignment(broker_ids=(node,)),)),)))
    k.wait_until(lambda: k._leaders_known(name, 2), "two partitions")
    return r


@scenario("admin")
def create_partitions_duplicate_topic(k):
    """CreatePartitions naming one topic twice: INVALID_REQUEST for it."""
    name = k.create_topic("t")
    m = mod(CREATE_PARTITIONS, 3)
    return k.send(m.CreatePartitionsRequest(timeout=TIMEOUT, validate_only=True, topics=(
        m.CreatePartitionsTopic(name=name, count=2, assignments=None),
        m.CreatePartitionsTopic(name=name, count=3, assignments=None))))


@scenario("admin")
def create_partitions_validate_only(k):
    """CreatePartitions with validate_only: NONE, the count unchanged."""
    name = k.create_topic("t")
    return [create_partitions(k, name, 4, validate_only=True), len(metadata(k, [name]).topics[0].partitions)]


# ---------------------------------------------------------------------- AlterConfigs / IncrementalAlterConfigs


@scenario("admin")
def alter_configs_topic(k):
    """AlterConfigs v2 of a topic: its overrides become the given set (an earlier override is dropped)."""
    name = k.create_topic("t", configs={"retention.ms": "5000"})
    r = alter_configs(k, TOPIC, name, {"max.message.bytes": "4096"})
    settled(k, name, "max.message.bytes", lambda v: v[0] == "4096")
    return [r, describe_configs(k, TOPIC, name, ["retention.ms", "max.message.bytes"])]


@scenario("admin")
def alter_configs_invalid_value(k):
    """AlterConfigs v2 with an invalid value: INVALID_CONFIG with Kafka's message, nothing changed."""
    name = k.create_topic("t")
    return [alter_configs(k, TOPIC, name, {"retention.ms": "soon"}), config_value(k, name, "retention.ms")]


@scenario("admin")
def alter_configs_unknown_config(k):
    """AlterConfigs v2 with an unknown config name: INVALID_CONFIG with Kafka's message."""
    name = k.create_topic("t")
    return alter_configs(k, TOPIC, name, {"no.such.config": "1"})


@scenario("admin")
def alter_configs_unknown_topic(k):
    """AlterConfigs v2 of a topic that does not exist: UNKNOWN_TOPIC_OR_PARTITION."""
    return alter_configs(k, TOPIC, k.name("missing"), {"retention.ms": "1000"})


@scenario("admin")
def alter_configs_validate_only(k):
    """AlterConfigs v2 with validate_only: NONE, the value unchanged."""
    name = k.create_topic("t")
    return [alter_configs(k, TOPIC, name, {"retention.ms": "1000"}, validate_only=True),
            config_value(k, name, "retention.ms")]


@scenario("admin")
def incremental_set(k):
    """IncrementalAlterConfigs SET of retention.ms: DescribeConfigs shows it as DYNAMIC_TOPIC_CONFIG."""
    name = k.create_topic("t")
    return [incremental(k, TOPIC, name, [("retention.ms", SET, "7000")]),
            settled(k, name, "retention.ms", lambda v: v[0] == "7000")]


@scenario("admin")
def incremental_invalid_value(k):
    """IncrementalAlterConfigs SET with invalid values (retention.ms, cleanup.policy): INVALID_CONFIG with Kafka's message."""
    name = k.create_topic("t")
    return [incremental(k, TOPIC, name, [("retention.ms", SET, "later")]),
            incremental(k, TOPIC, name, [("cleanup.policy", SET, "forever")]),
            incremental(k, TOPIC, name, [("min.insync.replicas", SET, "0")])]


@scenario("admin")
def incremental_unknown_config(k):
    """IncrementalAlterConfigs SET of an unknown config: INVALID_CONFIG with Kafka's message."""
    name = k.create_topic("t")
    return incremental(k, TOPIC, name, [("no.such.config", SET, "1")])


@scenario("admin")
def incremental_append_cleanup_policy(k):
    """IncrementalAlterConfigs APPEND compact to cleanup.policy (default delete): delete,compact."""
    name = k.create_topic("t")
    first = incremental(k, TOPIC, name, [("cleanup.policy", APPEND, "compact")])
    after_first = settled(k, name, "cleanup.policy", lambda v: v[1] == 1)
    second = incremental(k, TOPIC, name, [("cleanup.policy", APPEND, "compact"), MARK])
    marked(k, name)
    return [first, after_first, second, config_value(k, name, "cleanup.policy")]


@scenario("admin")
def incremental_subtract_cleanup_policy(k):
    """IncrementalAlterConfigs SUBTRACT delete from cleanup.policy=compact,delete: compact; subtracting an absent value changes nothing."""
    name = k.create_topic("t", configs={"cleanup.policy": "compact,delete"})
    first = incremental(k, TOPIC, name, [("cleanup.policy", SUBTRACT, "delete"), MARK])
    marked(k, name)
    after_first = config_value(k, name, "cleanup.policy")
    second = incremental(k, TOPIC, name, [("cleanup.policy", SUBTRACT, "delete"), ("segment.jitter.ms", SET, "99")])
    settled(k, name, "segment.jitter.ms", lambda v: v[0] == "99")
    return [first, after_first, second, config_value(k, name, "cleanup.policy")]


@scenario("admin")
def incremental_append_non_list(k):
    """IncrementalAlterConfigs APPEND to retention.ms (not a list): INVALID_CONFIG with Kafka's message."""
    name = k.create_topic("t")
    return incremental(k, TOPIC, name, [("retention.ms", APPEND, "5")])


@scenario("admin")
def incremental_subtract_non_list(k):
    """IncrementalAlterConfigs SUBTRACT from retention.ms (not a list): INVALID_CONFIG with Kafka's message."""
    name = k.create_topic("t")
    return incremental(k, TOPIC, name, [("retention.ms", SUBTRACT, "5")])


@scenario("admin")
def incremental_append_invalid_value(k):
    """IncrementalAlterConfigs APPEND "bogus" to cleanup.policy: INVALID_CONFIG with Kafka's message."""
    name = k.create_topic("t")
    return incremental(k, TOPIC, name, [("cleanup.policy", APPEND, "bogus")])


@scenario("admin", differs="by design: Kafka fails on the unknown operation code with UNKNOWN_SERVER_ERROR (an "
                           "unchecked exception, no message); oncelog answers INVALID_REQUEST naming it")
def incremental_unknown_operation(k):
    """IncrementalAlterConfigs with operation 7 (none such)."""
    name = k.create_topic("t")
    return incremental(k, TOPIC, name, [("retention.ms", 7, "1000")])


@scenario("admin")
def incremental_set_null_value(k):
    """IncrementalAlterConfigs SET with a null value: INVALID_REQUEST or INVALID_CONFIG as Kafka answers."""
    name = k.create_topic("t")
    return incremental(k, TOPIC, name, [("retention.ms", SET, None)])


@scenario("admin")
def incremental_delete(k):
    """IncrementalAlterConfigs DELETE of an override: the default again (DEFAULT_CONFIG); DELETE of no override is NONE."""
    name = k.create_topic("t", configs={"retention.ms": "5000"})
    return [incremental(k, TOPIC, name, [("retention.ms", DELETE, None)]),
            settled(k, name, "retention.ms", lambda v: v[1] != 1),
            incremental(k, TOPIC, name, [("segment.ms", DELETE, None)])]


@scenario("admin")
def incremental_validate_only(k):
    """IncrementalAlterConfigs SET with validate_only: NONE, the value unchanged."""
    name = k.create_topic("t")
    return [incremental(k, TOPIC, name, [("retention.ms", SET, "7000")], validate_only=True),
            config_value(k, name, "retention.ms")]


@scenario("admin")
def incremental_duplicate_config(k):
    """IncrementalAlterConfigs naming one config twice in a resource: INVALID_REQUEST."""
    name = k.create_topic("t")
    return incremental(k, TOPIC, name, [("retention.ms", SET, "7000"), ("retention.ms", SET, "8000")])


@scenario("admin")
def incremental_unknown_topic(k):
    """IncrementalAlterConfigs of a topic that does not exist: UNKNOWN_TOPIC_OR_PARTITION."""
    return incremental(k, TOPIC, k.name("missing"), [("retention.ms", SET, "7000")])


@scenario("admin")
def incremental_broker_dynamic(k):
    """IncrementalAlterConfigs (validate_only) of this broker: message.max.bytes and log.retention.ms are dynamic."""
    node = str(node_id(k))
    return [incremental(k, BROKER, node, [("message.max.bytes", SET, "2000000")], validate_only=True),
            incremental(k, BROKER, node, [("log.retention.ms", SET, "600000")], validate_only=True),
            incremental(k, BROKER, "", [("log.retention.ms", SET, "600000")], validate_only=True)]


@scenario("admin")
def incremental_broker_read_only(k):
    """IncrementalAlterConfigs (validate_only) of this broker's read-only configs (node.id, log.dirs): refused."""
    node = str(node_id(k))
    return [incremental(k, BROKER, node, [("node.id", SET, "7")], validate_only=True),
            incremental(k, BROKER, node, [("log.dirs", SET, "/tmp/elsewhere")], validate_only=True)]


@scenario("admin", differs="by design: Kafka stores an unknown broker config name (for plugins); oncelog has "
                           "no plugins and refuses it with INVALID_REQUEST saying so rather than keep and ignore it")
def incremental_broker_unknown_config(k):
    """IncrementalAlterConfigs (validate_only) of an unknown broker config."""
    return incremental(k, BROKER, str(node_id(k)), [("no.such.config", SET, "1")], validate_only=True)


@scenario("admin")
def incremental_broker_other_node(k):
    """IncrementalAlterConfigs of a broker id that is not this broker's."""
    return incremental(k, BROKER, str(node_id(k) + 100), [("message.max.bytes", SET, "2000000")], validate_only=True)


# ---------------------------------------------------------------------- DescribeConfigs


@scenario("admin")
def describe_configs_topic_defaults(k):
    """DescribeConfigs v4 of a new topic: value, read_only, source and sensitivity of the configs both brokers report."""
    name = k.create_topic("t")
    return describe_configs(k, TOPIC, name)


@scenario("admin")
def describe_configs_topic_synonyms(k):
    """DescribeConfigs v4 with include_synonyms of a topic with overrides: the override, then the broker's layers."""
    name = k.create_topic("t", configs={"retention.ms": "5000", "cleanup.policy": "compact"})
    return describe_configs(k, TOPIC, name, synonyms=True)


@scenario("admin")
def describe_configs_topic_names(k):
    """DescribeConfigs v4 of a topic asking for two configs and an unknown name: only the known two."""
    name = k.create_topic("t")
    return describe_configs(k, TOPIC, name, ["retention.ms", "cleanup.policy", "no.such.config"])


@scenario("admin")
def describe_configs_topic_all_names(k):
    """DescribeConfigs v4 of a topic, every config: the set of names each broker reports."""
    name = k.create_topic("t")
    m = mod(DESCRIBE_CONFIGS, 4)
    resp = k.send(m.DescribeConfigsRequest(include_synonyms=False, include_documentation=False, resources=(
        m.DescribeConfigsResource(resource_type=TOPIC, resource_name=name, configuration_keys=None),)))
    return sorted(c.name for c in resp.results[0].configs)


@scenario("admin", differs="by design: Kafka leaves the message empty (\"\", its field's default, as for no "
                           "error); oncelog names the missing topic — the rule 'bad input gets a clear error' that "
                           "the comparison grants where Kafka sends null")
def describe_configs_unknown_topic(k):
    """DescribeConfigs v4 of a topic that does not exist: UNKNOWN_TOPIC_OR_PARTITION with Kafka's message."""
    return describe_configs(k, TOPIC, k.name("missing"))


@scenario("admin")
def describe_configs_invalid_topic_name(k):
    """DescribeConfigs v4 of topic "..": INVALID_TOPIC_EXCEPTION."""
    return describe_configs(k, TOPIC, "..")


@scenario("admin")
def describe_configs_broker(k):
    """DescribeConfigs v4 of this broker, a few default configs with synonyms."""
    return describe_configs(k, BROKER, str(node_id(k)), list(BROKER_CONFIGS), synonyms=True)


@scenario("admin")
def describe_configs_broker_default_resource(k):
    """DescribeConfigs v4 of the cluster-default broker resource "" for a few configs: none set dynamically."""
    return describe_configs(k, BROKER, "", list(BROKER_CONFIGS))


@scenario("admin")
def describe_configs_group_resource(k):
    """DescribeConfigs v4 of a GROUP resource (type 32): Kafka 4.4's group configs."""
    m = mod(DESCRIBE_CONFIGS, 4)
    resp = k.send(m.DescribeConfigsRequest(include_synonyms=False, include_documentation=False, resources=(
        m.DescribeConfigsResource(resource_type=32, resource_name=k.name("g"),
                                  configuration_keys=("consumer.session.timeout.ms",)),)))
    return [(r.error_code, [(c.name, c.value) for c in r.configs]) for r in resp.results]


# ---------------------------------------------------------------------- GROUP configs (KIP-848, type 32)

GROUP = 32
GROUP_CONSUMER = ("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms", "consumer.assignment.interval.ms")


def describe_group(k, group: str, names=None, *, docs: bool = False):
    """DescribeConfigs v4 of a GROUP resource with synonyms, in the order the broker sends them."""
    m = mod(DESCRIBE_CONFIGS, 4)
    return k.send(m.DescribeConfigsRequest(include_synonyms=True, include_documentation=docs, resources=(
        m.DescribeConfigsResource(resource_type=GROUP, resource_name=group,
                                  configuration_keys=None if names is None else tuple(names)),)))


def group_values(k, group: str):
    """The group's consumer.* configs as (name, value, source), sorted by name."""
    return sorted((c.name, c.value, c.config_source) for c in describe_group(k, group, GROUP_CONSUMER).results[0].configs)


@scenario("admin")
def describe_configs_group_all(k):
    """DescribeConfigs v4 of a group that was never used: every group config Kafka 4.4 describes
    (share and streams ones too), in its order, with value, source, type, synonyms and documentation."""
    return describe_group(k, k.name("g"), docs=True)


@scenario("admin")
def group_configs_set(k):
    """IncrementalAlterConfigs SET of a group's session timeout and heartbeat interval: DescribeConfigs
    answers them as GROUP_CONFIG (8) with the broker's synonym below."""
    g = k.name("g")
    return [incremental(k, GROUP, g, [("consumer.session.timeout.ms", SET, "3000"),
                                       ("consumer.heartbeat.interval.ms", SET, "300")]),
            describe_group(k, g, GROUP_CONSUMER)]


@scenario("admin")
def group_configs_delete(k):
    """DELETE of a group config: back to the broker's value; DELETE of a name not set, even an
    unknown one, is no error; DELETE of the heartbeat that would leave the session no longer than
    the broker's heartbeat interval is refused."""
    g = k.name("g")
    return [incremental(k, GROUP, g, [("consumer.assignment.interval.ms", SET, "2000"),
                                       ("consumer.session.timeout.ms", SET, "3000"),
                                       ("consumer.heartbeat.interval.ms", SET, "300")]),
            incremental(k, GROUP, g, [("consumer.assignment.interval.ms", DELETE, None)]),
            incremental(k, GROUP, g, [("no.such.config", DELETE, None)]),
            incremental(k, GROUP, g, [("consumer.heartbeat.interval.ms", DELETE, None)]),
            group_values(k, g)]


@scenario("admin")
def group_configs_invalid_values(k):
    """Values Kafka refuses (INVALID_CONFIG, its messages): above the broker's
    group.consumer.max.assignment.interval.ms, a session not above the heartbeat (the group's or
    the broker's), not a number, below the config's own minimum, null (INVALID_REQUEST), APPEND
    to a group config; the first bad value in Kafka's order; nothing changes."""
    g = k.name("g")
    return [incremental(k, GROUP, g, [("consumer.assignment.interval.ms", SET, "20000")]),
            incremental(k, GROUP, g, [("consumer.session.timeout.ms", SET, "3000"),
                                       ("consumer.heartbeat.interval.ms", SET, "3000")]),
            incremental(k, GROUP, g, [("consumer.session.timeout.ms", SET, "3000")]),
            incremental(k, GROUP, g, [("consumer.session.timeout.ms", SET, "abc")]),
            incremental(k, GROUP, g, [("consumer.heartbeat.interval.ms", SET, "-5")]),
            incremental(k, GROUP, g, [("consumer.assignment.interval.ms", SET, "x"),
                                       ("consumer.session.timeout.ms", SET, "y")]),
            # Bounds in Kafka's order (consumer heartbeat, session, assignment interval, then share.*);
            # the consumer heartbeat and session messages name the broker's minimum, which the two
            # brokers of this suite set differently, so the order is shown with the others.
            incremental(k, GROUP, g, [("share.heartbeat.interval.ms", SET, "1"),
                                       ("consumer.assignment.interval.ms", SET, "99999")]),
            incremental(k, GROUP, g, [("consumer.assignment.interval.ms", SET, None)]),
            incremental(k, GROUP, g, [("consumer.assignment.interval.ms", APPEND, "1")]),
            group_values(k, g)]


@scenario("admin")
def group_configs_unknown_name(k):
    """SET of an unknown group config (alone, or beside a good one): INVALID_CONFIG "Unknown group
    config name", and the good one is not set either."""
    g = k.name("g")
    return [incremental(k, GROUP, g, [("no.such.config", SET, "1")]),
            incremental(k, GROUP, g, [("consumer.assignment.interval.ms", SET, "2000"), ("no.such.config", SET, "1")]),
            alter_configs(k, GROUP, g, {"no.such.config": "1"}),
            group_values(k, g)]


@scenario("admin")
def group_configs_validate_only(k):
    """validate_only: a good change is answered NONE and not made; a bad one is refused as without it."""
    g = k.name("g")
    return [incremental(k, GROUP, g, [("consumer.assignment.interval.ms", SET, "3000")], validate_only=True),
            incremental(k, GROUP, g, [("consumer.assignment.interval.ms", SET, "30000")], validate_only=True),
            alter_configs(k, GROUP, g, {"consumer.assignment.interval.ms": "3000"}, validate_only=True),
            group_values(k, g)]


@scenario("admin")
def group_configs_legacy_alter(k):
    """The legacy AlterConfigs v2 on a group: its configs become the given set (one set before is
    dropped), an empty set removes them all."""
    g = k.name("g")
    return [incremental(k, GROUP, g, [("consumer.session.timeout.ms", SET, "30000")]),
            alter_configs(k, GROUP, g, {"consumer.assignment.interval.ms": "4000"}),
            group_values(k, g),
            alter_configs(k, GROUP, g, {}),
            group_values(k, g)]


@scenario("admin")
def group_configs_no_group(k):
    """A group that does not exist may be configured (Kafka keeps group configs apart from
    groups); the empty group name is INVALID_REQUEST for both APIs, with Kafka's messages."""
    g = k.name("never-joined")
    return [incremental(k, GROUP, g, [("consumer.assignment.interval.ms", SET, "2500")]),
            group_values(k, g),
            incremental(k, GROUP, "", [("consumer.assignment.interval.ms", SET, "2500")]),
            alter_configs(k, GROUP, "", {"consumer.assignment.interval.ms": "2500"}),
            describe_group(k, "", GROUP_CONSUMER)]


@scenario("admin")
def group_configs_share_and_streams(k):
    """The share, streams and dead-letter-queue group configs Kafka 4.4 has: validated against
    its broker defaults' bounds and described as it does (an internal one only once set)."""
    g = k.name("g")
    names = ("share.isolation.level", "streams.rack.aware.assignment.tags", "streams.num.warmup.replicas",
             "share.auto.offset.reset", "share.record.lock.duration.ms")
    return [incremental(k, GROUP, g, [("share.isolation.level", SET, "read_committed"),
                                       ("streams.rack.aware.assignment.tags", SET, "a, b"),
                                       ("streams.num.warmup.replicas", SET, "1")]),
            incremental(k, GROUP, g, [("streams.num.standby.replicas", SET, "10")]),
            incremental(k, GROUP, g, [("share.session.timeout.ms", SET, "3000")]),
            incremental(k, GROUP, g, [("share.record.lock.duration.ms", SET, "100")]),
            incremental(k, GROUP, g, [("share.auto.offset.reset", SET, "by_duration:-PT1H")]),
            incremental(k, GROUP, g, [("share.auto.offset.reset", SET, "by_duration:PT1H")]),
            incremental(k, GROUP, g, [("streams.rack.aware.assignment.tags", SET, "a,a")]),
            incremental(k, GROUP, g, [("streams.assignor.name", SET, "x")]),
            incremental(k, GROUP, g, [("streams.task.offset.interval.ms", SET, "1")]),
            incremental(k, GROUP, g, [("errors.deadletterqueue.topic.name", SET, "__x")]),
            describe_group(k, g, names)]


@scenario("admin")
def describe_configs_broker_unknown_name(k):
    """DescribeConfigs v4 of this broker asking for an unknown config name and one known: only the known one."""
    return describe_configs(k, BROKER, str(node_id(k)), ["no.such.config", "message.max.bytes"])


@scenario("admin")
def alter_configs_broker_validate_only(k):
    """AlterConfigs v2 (validate_only) of this broker: a dynamic config, and a read-only one refused."""
    node = str(node_id(k))
    return [alter_configs(k, BROKER, node, {"message.max.bytes": "2000000"}, validate_only=True),
            alter_configs(k, BROKER, node, {"log.dirs": "/tmp/x"}, validate_only=True)]


@scenario("admin")
def describe_configs_other_broker(k):
    """DescribeConfigs v4 of a broker id that is not this broker's."""
    resp = describe_configs(k, BROKER, str(node_id(k) + 100), ["message.max.bytes"])
    return resp


# ---------------------------------------------------------------------- DeleteRecords


@scenario("admin")
def delete_records_middle(k):
    """DeleteRecords to offset 4 of 10: low watermark 4, a Fetch from 0 is OFFSET_OUT_OF_RANGE, ListOffsets earliest 4."""
    t = filled(k)
    return [delete_records(k, t, {0: 4}), k.fetch(t, 0).responses[0].partitions[0].error_code,
            k.list_offsets(t, -2).topics[0].partitions[0].offset]


@scenario("admin")
def delete_records_high_watermark(k):
    """DeleteRecords to -1 (the high watermark): low watermark 10."""
    t = filled(k)
    return [delete_records(k, t, {0: -1}), k.list_offsets(t, -2).topics[0].partitions[0].offset]


@scenario("admin")
def delete_records_beyond_high_watermark(k):
    """DeleteRecords to offset 11 of 10: OFFSET_OUT_OF_RANGE."""
    t = filled(k)
    return delete_records(k, t, {0: 11})


@scenario("admin")
def delete_records_backwards(k):
    """DeleteRecords to 6, then to 3: the low watermark stays 6."""
    t = filled(k)
    return [delete_records(k, t, {0: 6}), delete_records(k, t, {0: 3})]


@scenario("admin")
def delete_records_unknown_partition(k):
    """DeleteRecords of partition 3 of a one-partition topic and of an unknown topic: UNKNOWN_TOPIC_OR_PARTITION."""
    t = filled(k)
    return [delete_records(k, t, {3: 1}), delete_records(k, k.name("missing"), {0: 1})]


@scenario("admin")
def delete_records_open_transaction(k):
    """DeleteRecords to the high watermark past an open transaction's records (beyond the last stable offset)."""
    t = k.create_topic("t")
    txn = k.name("txn")
    init = k.init_producer_id(txn)
    pid, epoch = init.producer_id, init.producer_epoch
    k.add_partitions_to_txn(txn, pid, epoch, {t: [0]})
    k.produce(t, batch([b"a", b"b"], pid=pid, epoch=epoch, seq=0, transactional=True), transactional_id=txn)
    out = delete_records(k, t, {0: -1})
    k.end_txn(txn, pid, epoch, False)
    k.wait_txn_complete(txn)
    return out


@scenario("admin")
def delete_records_invalid_offset(k):
    """DeleteRecords to offset -2 (not a valid target)."""
    t = filled(k)
    return delete_records(k, t, {0: -2})


# ---------------------------------------------------------------------- Metadata


@scenario("admin")
def metadata_unknown_topic(k):
    """Metadata v12 of an unknown topic without auto-creation: UNKNOWN_TOPIC_OR_PARTITION."""
    return topic_view(metadata(k, [k.name("missing")]).topics[0])


@scenario("admin", differs="by design: oncelog creates the topic within the Metadata request, so its first answer "
                           "lists it; Kafka forwards the creation to the KRaft controller and answers "
                           "UNKNOWN_TOPIC_OR_PARTITION until the new metadata reaches the broker")
def metadata_auto_create(k):
    """Metadata v12 of an unknown topic with allow_auto_topic_creation: created (auto.create.topics.enable), 1 partition."""
    name = k.name("auto")
    first = metadata(k, [name], auto_create=True).topics[0]
    k.wait_until(lambda: k._leaders_known(name, 1), "auto-created topic")
    return [first.error_code, topic_view(metadata(k, [name]).topics[0])]


@scenario("admin")
def metadata_auto_create_invalid_name(k):
    """Metadata v12 with allow_auto_topic_creation of an invalid name: INVALID_TOPIC_EXCEPTION, nothing created."""
    return topic_view(metadata(k, [k.name("a b")], auto_create=True).topics[0])


@scenario("admin")
def metadata_v4_auto_create_unknown(k):
    """Metadata v4 with allow_auto_topic_creation false of an unknown topic: UNKNOWN_TOPIC_OR_PARTITION."""
    return topic_view(metadata(k, [k.name("missing")], version=4).topics[0])


@scenario("admin")
def metadata_all_topics(k):
    """Metadata v12 of all topics (null list), this run's topics: names, partitions, not internal."""
    k.create_topic("a", partitions=2)
    k.create_topic("b")
    topics = metadata(k, None).topics
    return sorted((topic_view(t) for t in topics if t.name.startswith(k.prefix)), key=lambda t: t["name"])


@scenario("admin")
def metadata_internal_topics(k):
    """Metadata v12 of __consumer_offsets and __transaction_state: internal."""
    return [{"name": t.name, "error_code": t.error_code, "is_internal": t.is_internal}
            for t in metadata(k, ["__consumer_offsets", "__transaction_state"]).topics]


@scenario("admin")
def metadata_authorized_operations(k):
    """Metadata v12 with include_topic_authorized_operations, no authorizer configured."""
    name = k.create_topic("t")
    m = mod(METADATA, 12)
    resp = k.send(m.MetadataRequest(topics=(m.MetadataRequestTopic(name=name, topic_id=uuid.UUID(int=0)),),
                                    allow_auto_topic_creation=False, include_topic_authorized_operations=True))
    return [(t.name, t.topic_authorized_operations) for t in resp.topics]


@scenario("admin")
def metadata_after_create_partitions(k):
    """Metadata after CreatePartitions 1 -> 2: the new partition's leader epoch and replicas."""
    name = k.create_topic("t")
    create_partitions(k, name, 2)
    k.wait_until(lambda: k._leaders_known(name, 2), "two partitions")
    return topic_view(metadata(k, [name]).topics[0])


@scenario("admin")
def metadata_by_topic_id(k):
    """Metadata v12 naming a topic by id only: Kafka answers INVALID_REQUEST (ids are for v13 DescribeTopicPartitions)."""
    name = k.create_topic("t")
    tid = metadata(k, [name]).topics[0].topic_id
    m = mod(METADATA, 12)
    try:
        resp = k.send(m.MetadataRequest(topics=(m.MetadataRequestTopic(name=None, topic_id=tid),),
                                        allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    except ConnectionError as exc:
        return {"connection": str(exc)}
    return [{"name": t.name, "error_code": t.error_code} for t in resp.topics]


# ---------------------------------------------------------------------- ApiVersions

# The versions the Java client 4.4 sends at most (its own ApiVersions table, equal to the broker's
# of the same release) for the APIs oncelog serves.
JAVA_CLIENT_4_4 = {0: 13, 1: 18, 2: 11, 3: 13, 8: 10, 9: 10, 10: 6, 11: 9, 12: 4, 13: 5, 14: 5, 15: 6, 16: 5, 17: 1,
                   18: 5, 19: 7, 20: 6, 21: 2, 22: 5, 24: 5, 25: 4, 26: 5, 28: 6, 29: 3, 30: 3, 31: 3, 32: 4, 33: 2,
                   35: 5, 36: 2, 37: 3, 42: 3, 43: 2, 44: 1, 46: 0, 47: 0, 50: 0, 51: 0, 60: 2, 61: 0, 65: 0,
                   66: 2, 68: 1, 69: 1, 75: 0}


def _api_versions(k):
    m = mod(API_VERSIONS, 3)
    return k.send(m.ApiVersionsRequest(client_software_name="oncelog-conformance", client_software_version="1"))


@scenario("admin", differs="by design: Kafka also serves replication (OffsetForLeaderEpoch 23), KRaft "
                           "(UpdateFeatures 57, UnregisterBroker 64, Add/RemoveRaftVoter 80/81), delegation tokens "
                           "(38-41), client quotas (48/49), share and streams groups (76-79, 83-94): docs/broker.md "
                           "'Not implemented' and docs/conformance.md's differences")
def api_versions_keys(k):
    """ApiVersions v3: the API keys each broker serves."""
    return sorted(int(a.api_key) for a in _api_versions(k).api_keys)


@scenario("admin", differs="open: three APIs are served below the Java client 4.4's newest version, which the "
                           "client negotiates down to: ApiVersions v5, TxnOffsetCommit v6, DeleteGroups v3 — kio "
                           "0.6.5, the protocol library (its newest release), has no schemas for them")
def api_versions_client_versions(k):
    """ApiVersions v3: for each API oncelog serves, whether the broker's newest version reaches the Java client 4.4's."""
    served = {int(a.api_key): int(a.max_version) for a in _api_versions(k).api_keys}
    return {str(key): "ok" if served.get(key, -1) >= v else f"v{served.get(key)} < client v{v}"
            for key, v in sorted(JAVA_CLIENT_4_4.items())}


def _api_versions_at(k, version: int):
    m = mod(API_VERSIONS, version)
    fields = {"client_software_name": "apache-kafka-java", "client_software_version": "3.4.0"} if version >= 3 else {}
    return k.send(m.ApiVersionsRequest(**fields))


def _served_keys():
    from oncelog import apis
    return sorted(apis.HANDLERS)


@scenario("admin")
def api_versions_min_versions(k):
    """ApiVersions v0-v4: the lowest version advertised for each API oncelog serves (Produce from v0, KAFKA-18659; JoinGroup from v0)."""
    out = {}
    for v in range(0, 5):
        r = _api_versions_at(k, v)
        got = {int(a.api_key): int(a.min_version) for a in r.api_keys}
        out[f"v{v}"] = [int(r.error_code), {str(key): got.get(key) for key in _served_keys()}]
    return out


def _oncelog_feature_names():
    from oncelog.apis.api_versions import FEATURES
    return [f.name for f in FEATURES]


@scenario("admin")
def api_versions_features_by_version(k):
    """ApiVersions v0-v4: the features oncelog implements, supported and finalized, as each version carries them (no supported feature with minimum 0 below v4, KAFKA-17492)."""
    out = {}
    names = _oncelog_feature_names()
    for v in range(0, 5):
        r = _api_versions_at(k, v)
        supported = {f.name: [int(f.min_version), int(f.max_version)] for f in getattr(r, "supported_features", ())}
        finalized = {f.name: [int(f.min_version_level), int(f.max_version_level)]
                     for f in getattr(r, "finalized_features", ())}
        out[f"v{v}"] = {"supported": {n: supported.get(n) for n in names},
                        "finalized": {n: finalized.get(n) for n in names},
                        "supported_with_min_0": sorted(n for n, (lo, _) in supported.items() if lo == 0),
                        "finalized_at_level_0": sorted(n for n, (lo, _) in finalized.items() if lo == 0),
                        "epoch_known": getattr(r, "finalized_features_epoch", -1) >= 0 if v >= 3 else None}
    # which features with minimum 0 are left out below v4 is compared for those both brokers share
    for v in ("v3", "v4"):
        out[v]["supported_with_min_0"] = [n for n in out[v]["supported_with_min_0"] if n in names]
    return out


@scenario("admin", differs="by design: Kafka also advertises metadata.version, kraft.version, share.version, "
                           "streams.version and eligible.leader.replicas.version (KRaft metadata, share and streams "
                           "groups, ELR): oncelog implements none of them and does not claim them (docs/conformance.md's "
                           "differences)")
def api_versions_feature_names(k):
    """ApiVersions v4: the names of the supported and finalized features."""
    r = _api_versions_at(k, 4)
    return {"supported": sorted(f.name for f in r.supported_features),
            "finalized": sorted(f.name for f in r.finalized_features)}


@scenario("admin")
def produce_removed_versions(k):
    """Produce v0-v2 (message formats 0 and 1, removed in Kafka 4, KIP-896) although ApiVersions advertises v0: the connection is closed."""
    import struct

    def s(x: str) -> bytes:
        return struct.pack(">h", len(x)) + x.encode()

    out = {}
    for v in (0, 1, 2):
        body = struct.pack(">hi", 1, 5000) + struct.pack(">i", 1) + s(k.name("t")) + struct.pack(">iii", 1, 0, -1)
        c = k.connect()
        try:
            c.send_frame(struct.pack(">hhi", 0, v, 7) + s("conformance") + body)
            out[f"v{v}"] = f"answered {len(c.recv_frame())} bytes"
        except (ConnectionError, OSError) as exc:
            out[f"v{v}"] = "connection closed" if "closed" in str(exc) or isinstance(exc, ConnectionError) else repr(exc)
    return out


@scenario("admin")
def api_versions_error_and_features(k):
    """ApiVersions v3: error NONE and transaction.version finalized at 2 (TV2)."""
    r = _api_versions(k)
    return [r.error_code, [(f.name, f.max_version_level) for f in r.finalized_features if f.name == "transaction.version"]]


@scenario("admin")
def api_versions_unsupported_version(k):
    """ApiVersions at a version the broker does not know (v127): UNSUPPORTED_VERSION, a v0 answer with ApiVersions' own range (from v0, to v3 or more)."""
    from oncelog.client.wire import decode_response, write_request
    import io
    import struct

    m = mod(API_VERSIONS, 3)
    req = m.ApiVersionsRequest(client_software_name="x", client_software_version="1")
    buf = io.BytesIO()
    write_request(buf, req, 7, "conformance")
    raw = bytearray(buf.getvalue())
    struct.pack_into(">h", raw, 2, 127)  # request_api_version
    c = k.client
    c.send_frame(bytes(raw))
    frame = c.recv_frame()
    _, resp = decode_response(frame, request_class_v0())
    return [resp.error_code, [(int(a.api_key), int(a.min_version), int(a.max_version) >= 3)
                              for a in resp.api_keys if int(a.api_key) == API_VERSIONS]]


def request_class_v0():
    from .framework import request_class
    return request_class(API_VERSIONS, 0)


# ---------------------------------------------------------------------- the cluster APIs a one-node Kafka answers

LIST_CONFIG_RESOURCES, DESCRIBE_QUORUM, ALTER_PARTITION_REASSIGNMENTS, LIST_PARTITION_REASSIGNMENTS = 74, 55, 45, 46
ALTER_REPLICA_LOG_DIRS, DESCRIBE_LOG_DIRS = 34, 35


def _node_id(k) -> int:
    return int(k.metadata([]).brokers[0].node_id)


def _set_group_config(k, group: str):
    m = mod(INCREMENTAL_ALTER_CONFIGS, 1)
    r = k.send(m.IncrementalAlterConfigsRequest(validate_only=False, resources=(m.AlterConfigsResource(
        resource_type=GROUP, resource_name=group, configs=(m.AlterableConfig(
            name="consumer.session.timeout.ms", config_operation=0, value="50000"),)),)))
    assert r.responses[0].error_code == 0, r


def _config_resources(k, version: int, types=()):
    """ListConfigResources, this run's topics and groups only (the session's Kafka holds other
    scenarios' too), this broker's node id as "node"."""
    m = mod(LIST_CONFIG_RESOURCES, version)
    r = k.send(m.ListConfigResourcesRequest(resource_types=tuple(types)) if version >= 1 else m.ListConfigResourcesRequest())
    node = str(_node_id(k))
    mine = []
    for res in r.config_resources:
        name, rtype = res.resource_name, int(res.resource_type)
        if rtype in (4, 8):
            mine.append((rtype, "node" if name == node else name))
        elif name.startswith(k.prefix):
            mine.append((rtype, name))
    return [int(r.error_code), sorted(mine)]


@scenario("admin")
def list_config_resources(k):
    """ListConfigResources v0 (client metrics: none) and v1 by type: topics without the internal ones, the broker and its loggers by node id, only groups with configs of their own, a type twice once, an unknown type UNSUPPORTED_VERSION."""
    k.create_topic("t", partitions=2)
    from .scenarios_groups import simple_commit
    simple_commit(k, k.name("plain-group"), k.name("t"), 1)  # a group without configs: not listed
    _set_group_config(k, k.name("configured-group"))
    return {"v0": _config_resources(k, 0),
            **{f"v1 {list(types)}": _config_resources(k, 1, types)
               for types in ((), (2,), (4,), (8,), (16,), (32,), (2, 2), (2, 32), (99,))}}


def _quorum(k, version: int, topic: str = "__cluster_metadata", partition: int = 0):
    m = mod(DESCRIBE_QUORUM, version)
    r = k.send(m.DescribeQuorumRequest(topics=(m.TopicData(topic_name=topic, partitions=(
        m.PartitionData(partition_index=partition),)),)))
    out = {"error_code": r.error_code, "topics": []}
    for t in r.topics:
        for p in t.partitions:
            voters = [v.replica_id for v in p.current_voters]
            out["topics"].append({
                "topic": t.topic_name, "partition": p.partition_index, "error_code": p.error_code,
                "error_message": getattr(p, "error_message", None), "leader_is_the_voter": voters == [p.leader_id],
                "leader_epoch": p.leader_epoch, "voters": len(voters), "observers": len(p.observers),
                "voter_at_high_watermark": [v.log_end_offset == p.high_watermark for v in p.current_voters]})
    if hasattr(r, "nodes"):
        out["nodes"] = [[lst.name for lst in n.listeners] for n in r.nodes]
    return out


@scenario("admin")
def describe_quorum(k):
    """DescribeQuorum v0-v2 of __cluster_metadata-0: a one-voter quorum, the voter its leader at epoch 1, no observers, (v2) the node under listener CONTROLLER."""
    return {f"v{v}": _quorum(k, v) for v in (0, 1, 2)}


@scenario("admin")
def describe_quorum_other_partitions(k):
    """DescribeQuorum of another topic, and of partition 1 of __cluster_metadata: UNKNOWN_TOPIC_OR_PARTITION for the partition asked, no error at the top."""
    return [_quorum(k, 2, "other", 0), _quorum(k, 2, "__cluster_metadata", 1), _quorum(k, 0, "other", 0)]


def _reassign(k, version: int, cases):
    m = mod(ALTER_PARTITION_REASSIGNMENTS, version)
    topics = {}
    for topic, partition, replicas in cases:
        topics.setdefault(topic, []).append(m.ReassignablePartition(partition_index=partition, replicas=replicas))
    r = k.send(build(ALTER_PARTITION_REASSIGNMENTS, version, timeout=datetime.timedelta(seconds=30),
                     allow_replication_factor_change=True, topics=tuple(
                         m.ReassignableTopic(name=t, partitions=tuple(ps)) for t, ps in topics.items())))
    return r


@scenario("admin")
def alter_partition_reassignments(k):
    """AlterPartitionReassignments v0 and v1 on one node: to the replica it has NONE, cancel NO_REASSIGNMENT_IN_PROGRESS, another or a doubled or no broker INVALID_REPLICA_ASSIGNMENT, unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION, each with Kafka's message; then nothing is reassigning."""
    k.create_topic("t", partitions=2)
    node = _node_id(k)
    t = k.name("t")
    cases = [(t, 0, (node,)), (t, 1, None), (t, 0, (node + 1,)), (t, 0, (node, node + 1)), (t, 0, (node, node)),
             (t, 1, ()), (t, 0, (-1,)), (t, 5, (node,)), (k.name("nope"), 0, (node,))]
    answers = {f"v{v}": _reassign(k, v, cases) for v in (0, 1)}
    m = mod(LIST_PARTITION_REASSIGNMENTS, 0)
    listed = k.send(m.ListPartitionReassignmentsRequest(timeout=datetime.timedelta(seconds=30), topics=None))
    return {**answers, "listed": [listed.error_code, [x.name for x in listed.topics if x.name.startswith(k.prefix)]]}


@scenario("admin")
def alter_replica_log_dirs(k):
    """AlterReplicaLogDirs v1/v2: to the broker's own log directory NONE (unknown topic UNKNOWN_TOPIC_OR_PARTITION), to any other path LOG_DIR_NOT_FOUND for every partition."""
    k.create_topic("t", partitions=2)
    dirs = k.send(mod(DESCRIBE_LOG_DIRS, 4).DescribeLogDirsRequest(topics=None))
    here = dirs.results[0].log_dir
    out = {}
    for v in (1, 2):
        m = mod(ALTER_REPLICA_LOG_DIRS, v)
        for label, path in (("own dir", here), ("other dir", "/nonexistent/oncelog-conformance")):
            r = k.send(m.AlterReplicaLogDirsRequest(dirs=(m.AlterReplicaLogDir(path=path, topics=(
                m.AlterReplicaLogDirTopic(name=k.name("t"), partitions=(0, 1, 7)),
                m.AlterReplicaLogDirTopic(name=k.name("nope"), partitions=(0,)))),)))
            # per topic, partitions sorted: Kafka answers in its hash map's order
            out[f"v{v} {label}"] = {t.topic_name[len(k.prefix):]: sorted((p.partition_index, p.error_code) for p in t.partitions)
                                    for t in r.results}
    return out
