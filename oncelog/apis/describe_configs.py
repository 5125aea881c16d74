"""DescribeConfigs (key 32), v1-4, as Kafka's ConfigHelper answers it.

Topic resources (type 2): every topic config (:data:`oncelog.config.registry.TOPIC_CONFIGS`) with its
value in force, its real type (config_type, v3+), its source — DYNAMIC_TOPIC_CONFIG (1) for an
override, else where the broker's value comes from: DYNAMIC_BROKER_CONFIG (2),
DYNAMIC_DEFAULT_BROKER_CONFIG (3), STATIC_BROKER_CONFIG (4: ``oncelog serve`` options) or
DEFAULT_CONFIG (5) — and, with include_synonyms, the synonyms in Kafka's order: the topic
override, then the broker config under the topic config's broker name in each layer.
Documentation (v3+) says what oncelog does with each config.

Broker resources (type 4): with this broker's id, every broker config oncelog has (the topic
defaults ``log.*``, ``listeners``, ``advertised.listeners``, ``node.id``, ...) with its value and
source; read_only is false for what AlterConfigs may change (:data:`BROKER_CONFIGS` ``dynamic``).
With the empty name, the cluster-default dynamic configs only, as Kafka lists them.

Group resources (type 32, Kafka 4.x's KIP-848 group configs): every group config
(:mod:`oncelog.config.group_configs`) with the group's value (GROUP_CONFIG, 8) or the broker's
(group.consumer.session.timeout.ms, ... in its layer), as Kafka 4.4 answers; the group need not
exist; the empty name is INVALID_REQUEST ("Group name must not be empty").

ACLs: DESCRIBE_CONFIGS on the topic (TOPIC_AUTHORIZATION_FAILED), on the group
(GROUP_AUTHORIZATION_FAILED) or, for the broker, on the cluster (CLUSTER_AUTHORIZATION_FAILED),
per resource, as Kafka's ConfigHelper.

Version notes:

DescribeConfigs: v1-4 (v0, deprecated by KIP-896, is not served)

- v1: ``include_synonyms``; each config's source and synonyms.
- v2: the schema of v1; the throttle is applied after the answer (KIP-219).
- v3: ``include_documentation``; each config's type and documentation (KIP-569).
- v4: flexible versions (compact strings and arrays, tagged fields).
"""

from __future__ import annotations

from .. import errors
from ..config import group_configs, registry
from ..metadata.topics import validate_topic_name
from . import _authz
from ._base import NO_THROTTLE, OK, build, response_module

API_KEY = 32
MIN_VERSION = 1
MAX_VERSION = 4

TOPIC, BROKER, GROUP = 2, 4, 32


def broker_resource(broker, name: str) -> bool:
    """Kafka's checks of a BROKER resource name for DescribeConfigs: "" (cluster default) or
    this broker's id. Returns whether it names this broker (per-broker)."""
    if name == "":
        return False
    try:
        node = int(name)
    except ValueError:
        raise errors.InvalidRequest(f"Broker id must be an integer, but it is: {name}") from None
    if node != broker.node_id:
        raise errors.InvalidRequest(f"Unexpected broker id, expected {broker.node_id} or empty string, "
                                    f"but received {name}")
    return True


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    broker = ctx.broker
    synonyms = getattr(request, "include_synonyms", False)
    docs = getattr(request, "include_documentation", False)
    results = []
    for res in request.resources:
        code, message, entries = OK, "", []  # Kafka's message of a resource described: "" (no error)
        denied = _denied(ctx, _authz.Op.DESCRIBE_CONFIGS, res.resource_type, res.resource_name)
        if denied is not None:
            results.append(build(m.DescribeConfigsResult, error_code=denied, error_message=None,
                                 resource_type=res.resource_type, resource_name=res.resource_name, configs=()))
            continue
        try:
            if res.resource_type == TOPIC:
                validate_topic_name(res.resource_name)
                topic = broker.metadata.topics.get(res.resource_name)
                if topic is None:
                    raise errors.UnknownTopicOrPartition(f"topic {res.resource_name!r} does not exist")
                entries = registry.describe_topic(topic.overrides, topic.config.values(), broker.metadata.configs.layers,
                                                 include_synonyms=synonyms, include_docs=docs)
            elif res.resource_type == BROKER:
                per_broker = broker_resource(broker, res.resource_name)
                layers = broker.metadata.configs.layers
                values = broker.describe_config() if per_broker else dict(layers.dynamic_default)
                entries = registry.describe_broker(values, layers, per_broker=per_broker,
                                                  include_synonyms=synonyms, include_docs=docs)
            elif res.resource_type == GROUP:
                if not res.resource_name:
                    raise errors.InvalidRequest("Group name must not be empty")
                entries = group_configs.describe(broker.metadata.group_configs.get(res.resource_name),
                                                 lambda name: _broker_synonyms(broker.metadata.configs.layers, name),
                                                 include_synonyms=synonyms, include_docs=docs)
            else:
                raise errors.InvalidRequest(f"oncelog has no configs for resource type {res.resource_type} "
                                            "(topics: 2, brokers: 4, groups: 32)")
            if res.configuration_keys:  # null or empty: all, as in Kafka
                keys = set(res.configuration_keys)
                entries = [e for e in entries if e.name in keys]
        except errors.KafkaError as exc:
            code, message, entries = errors.error_code_for(exc), str(exc), []
        results.append(build(m.DescribeConfigsResult, error_code=code, error_message=message,
                             resource_type=res.resource_type, resource_name=res.resource_name,
                             configs=tuple(_entry(m, e) for e in entries)))
    return build(m.DescribeConfigsResponse, throttle_time=NO_THROTTLE, results=tuple(results))


def _denied(ctx, op, resource_type: int, name: str):
    """The ACL check of a config resource (Kafka's ConfigHelper / ConfigAdminManager): ``op`` on the
    topic for TOPIC (TOPIC_AUTHORIZATION_FAILED), on the group for GROUP
    (GROUP_AUTHORIZATION_FAILED), on the cluster for BROKER (CLUSTER_AUTHORIZATION_FAILED); None
    when allowed or another resource type."""
    if resource_type == TOPIC and not _authz.topic(ctx, op, name):
        return _authz.TOPIC_DENIED
    if resource_type == BROKER and not _authz.cluster(ctx, op):
        return _authz.CLUSTER_DENIED
    if resource_type == GROUP and not _authz.group(ctx, op, name):
        return _authz.GROUP_DENIED
    return None


def _broker_synonyms(layers: registry.BrokerLayers, name: str) -> list[tuple[str, str | None, int]]:
    """The broker config a group config falls back to, in each layer that has it (highest
    first): oncelog's own (group.consumer.*), else Kafka's default of the share/streams setting
    oncelog has no broker config for."""
    if name in registry.BROKER_CONFIGS:
        found = [(n, v, int(src)) for n, v, src in layers.synonyms(name)]
        return found or [(name, layers.value(name), int(registry.ConfigSource.DEFAULT))]
    return [(name, group_configs.KAFKA_BROKER_DEFAULTS[name], int(registry.ConfigSource.DEFAULT))]


def _entry(m, e: registry.Described):
    return build(m.DescribeConfigsResourceResult, name=e.name, value=e.value, read_only=e.read_only,
                 config_source=int(e.source), is_default=e.is_default, is_sensitive=e.sensitive,
                 synonyms=tuple(build(m.DescribeConfigsSynonym, name=n, value=v, source=int(src))
                                for n, v, src in e.synonyms),
                 config_type=int(e.type), documentation=e.doc)
