"""Config administration: AlterConfigs/IncrementalAlterConfigs and DescribeConfigs of topics and
the broker, and GROUP configs (KIP-848, resource type 32). :mod:`.scenarios_admin`'s invariants
hold here (broker resources changed with validate_only only, topic configs compared by the names
in its :data:`TOPIC_CONFIGS`), and its helpers serve.
"""

from __future__ import annotations

from .framework import DESCRIBE_CONFIGS, mod
from .scenarios_admin import (APPEND, BROKER, BROKER_CONFIGS, DELETE, GROUP, MARK, SET, SUBTRACT, TOPIC, alter_configs,
                              config_value, describe_configs, incremental, marked, node_id, settled)
from .scenarios_groups import scenario


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
