"""Topic administration: CreateTopics validation, DeleteTopics, CreatePartitions, DeleteRecords.
Configs (AlterConfigs/IncrementalAlterConfigs, DescribeConfigs, GROUP configs) are
:mod:`.scenarios_configs`', Metadata, ApiVersions and the cluster APIs :mod:`.scenarios_cluster`';
both use the helpers here and hold to the same invariants.

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

from .framework import (ALTER_CONFIGS, CREATE_PARTITIONS, CREATE_TOPICS, DELETE_RECORDS, DELETE_TOPICS,
                        DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS, METADATA, batch, mod)
from .scenarios_groups import build, make, scenario

TOPIC, BROKER, GROUP = 2, 4, 32  # config resource types
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
            (_as_list(own.get(n)) == _as_list(v)) if op == SET else (n not in own)
            for n, op, v in ops if op in (SET, DELETE)))
    return _node_named(resp, resource_type)


def _as_list(value):
    """A config value as a LIST config's items: Kafka describes "a, b" as "a,b"."""
    return value if value is None else ",".join(item.strip() for item in value.split(","))


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
    """CreateTopics v7 of a topic with 3 partitions: its id, partitions, replication factor and default configs.
    Kafka answers CreateTopics once its controller has the topic; its broker learns the topic a
    moment later, so the Metadata read waits for the leaders (a loaded CI run once read
    UNKNOWN_TOPIC_OR_PARTITION from Kafka there)."""
    name = k.name("t")
    created = create(k, {"name": name, "partitions": 3})
    k.wait_until(lambda: k._leaders_known(name, 3), "the created topic's leaders")
    return [created, topic_view(metadata(k, [name]).topics[0])]


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
    k.wait_until(lambda: all(int(md.topics[0].error_code) != 0 for md in k.every_node_metadata([name])),
                 "topic gone")  # from every node (a cluster's): none still serves the old log
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
