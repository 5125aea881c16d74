"""AlterConfigs (key 33), v0-2: replace a resource's whole set of dynamic configs (keys not
given are deleted), as Kafka's ConfigAdminManager (preprocessing) and controller
(ConfigurationControlManager.legacyAlterConfigs) do.

TOPIC resources: the topic's overrides, validated as at CreateTopics (INVALID_CONFIG with
Kafka's message), persisted in topics.json and applied to the live partitions at once;
UNKNOWN_TOPIC_OR_PARTITION if the topic does not exist (checked after the configs, as Kafka
does). BROKER resources: the cluster default (name "") or this broker (its node id); only what
Kafka allows to change at run time and oncelog has (:data:`oncelog.config.registry.BROKER_CONFIGS`
``dynamic``), persisted in broker-configs.json and applied to every topic without an override;
anything else is INVALID_REQUEST, as Kafka answers ("Cannot update these configs dynamically:
..."). GROUP resources (Kafka 4.x, KIP-848): the group's own configs become the given set,
validated as Kafka's GroupConfig (:mod:`oncelog.config.group_configs`), persisted in
group-configs.json and in force for the group at once; the group need not exist; the empty name
is INVALID_REQUEST ("Default group resources are not allowed."). ``validate_only`` checks
everything and changes nothing.

ACLs (Kafka's ConfigAdminManager, both alter APIs): ALTER_CONFIGS on the topic
(TOPIC_AUTHORIZATION_FAILED), on the group (GROUP_AUTHORIZATION_FAILED) or, for the broker, on the
cluster (CLUSTER_AUTHORIZATION_FAILED), per resource; a refused resource is left as it is.

Version notes:

AlterConfigs: v0-2

- v0: the oldest served.
- v1: the schema of v0; the throttle is applied after the answer (KIP-219).
- v2: flexible versions (compact strings and arrays, tagged fields).
"""

from __future__ import annotations

from collections import Counter

from .. import errors
from . import _authz
from ._base import NO_THROTTLE, OK, build, response_module

API_KEY = 33
MIN_VERSION = 0
MAX_VERSION = 2

TOPIC, BROKER, GROUP = 2, 4, 32
KNOWN_TYPES = {8: "BROKER_LOGGER", 16: "CLIENT_METRICS"}


def check_resources(resources) -> Counter:
    return Counter((r.resource_type, r.resource_name) for r in resources)


def broker_target(broker, name: str) -> bool:
    """Kafka's validateResourceNameIsCurrentNodeId: "" is the cluster default; otherwise this
    broker's id. Returns whether it is per-broker."""
    if name == "":
        return False
    try:
        node = int(name)
    except ValueError:
        raise errors.InvalidRequest(f"Node id must be an integer, but it is: {name}") from None
    if node != broker.node_id:
        raise errors.InvalidRequest(f"Unexpected broker id, expected {broker.node_id}, but received {name}")
    return True


def unsupported_type(resource_type: int) -> errors.KafkaError:
    label = KNOWN_TYPES.get(resource_type)
    if label is None:
        return errors.InvalidRequest(f"Unknown resource type {resource_type}")
    return errors.InvalidRequest(f"oncelog has no {label} configs (resource type {resource_type}); "
                                 "it configures topics (2), the broker (4) and groups (32)")


def check_common(resource, counts: Counter, null_ok=lambda c: False) -> None:
    """ConfigAdminManager.preprocess: each resource once, no duplicate keys, no null values."""
    if counts[(resource.resource_type, resource.resource_name)] > 1:
        raise errors.InvalidRequest("Each resource must appear at most once.")
    names = [c.name for c in resource.configs]
    if len(set(names)) != len(names):
        raise errors.InvalidRequest("Error due to duplicate config keys")
    nulls = [c.name for c in resource.configs if c.value is None and not null_ok(c)]
    if nulls:
        raise errors.InvalidRequest("Null value not supported for : " + ", ".join(nulls))


def answer(ctx, request, api_key: int, response_name: str, apply, null_ok=lambda c: False):
    """The loop both alter APIs share: per resource, Kafka's preprocessing checks, then
    ``apply(resource)`` for TOPIC, BROKER and GROUP resources; an error answers that resource only."""
    m = response_module(api_key, ctx.api_version)
    counts = check_resources(request.resources)
    results = []
    for res in request.resources:
        code, message = OK, None
        try:
            check_common(res, counts, null_ok)
            if res.resource_type not in (TOPIC, BROKER, GROUP):
                raise unsupported_type(res.resource_type)
            if res.resource_type == TOPIC and not _authz.topic(ctx, _authz.Op.ALTER_CONFIGS, res.resource_name):
                code = _authz.TOPIC_DENIED
            elif res.resource_type == BROKER and not _authz.cluster(ctx, _authz.Op.ALTER_CONFIGS):
                code = _authz.CLUSTER_DENIED
            elif res.resource_type == GROUP and not _authz.group(ctx, _authz.Op.ALTER_CONFIGS, res.resource_name):
                code = _authz.GROUP_DENIED
            else:
                if res.resource_type == GROUP and not res.resource_name:
                    raise errors.InvalidRequest("Default group resources are not allowed.")
                apply(res)
        except errors.KafkaError as exc:
            code, message = errors.error_code_for(exc), str(exc)
        results.append(build(m.AlterConfigsResourceResponse, error_code=code, error_message=message,
                             resource_type=res.resource_type, resource_name=res.resource_name))
    return build(getattr(m, response_name), throttle_time=NO_THROTTLE, responses=tuple(results))


def handle(ctx, request):
    md = ctx.broker.metadata

    def apply(res):
        new = {c.name: c.value for c in res.configs}
        if res.resource_type == TOPIC:
            md.topics.alter_topic_configs(res.resource_name, new, validate_only=request.validate_only)
        elif res.resource_type == GROUP:
            ctx.broker.metadata.group_configs.replace(res.resource_name, new, validate_only=request.validate_only)
        else:
            per_broker = broker_target(ctx.broker, res.resource_name)
            md.configs.set_broker_configs(per_broker, new, validate_only=request.validate_only,
                                          node_id=ctx.broker.node_id)

    return answer(ctx, request, API_KEY, "AlterConfigsResponse", apply)
