"""IncrementalAlterConfigs (key 44), v0-1: change some configs of a resource. Operations:
SET (0), DELETE (1), and for LIST configs APPEND (2) / SUBTRACT (3), which start from the
current value or, unset, the config's default (Kafka's ConfigurationControlManager and, for
brokers, ConfigAdminManager.prepareIncrementalConfigs). The resulting set is then validated,
persisted and applied exactly as :mod:`oncelog.apis.alter_configs` does. GROUP resources (Kafka
4.x): SET and DELETE (of a name not set, even unknown: nothing); APPEND and SUBTRACT are
INVALID_CONFIG for every group config, as Kafka answers.

ACLs: ALTER_CONFIGS, checked in :func:`.alter_configs.answer` (shared).

Version notes:

IncrementalAlterConfigs: v0-1

- v0: the oldest served (KIP-339).
- v1: flexible versions (compact strings and arrays, tagged fields).
"""

from __future__ import annotations

from .. import errors
from ..config import group_configs, registry
from .alter_configs import GROUP, TOPIC, answer, broker_target

API_KEY = 44
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx, request):
    md = ctx.broker.metadata

    def apply(res):
        ops = [(c.name, c.config_operation, c.value) for c in res.configs]
        for _, op, _ in ops:
            if op not in registry.OP_NAMES:
                raise errors.InvalidRequest(f"Unknown operations type {op}")
        if res.resource_type == TOPIC:
            topic = md.topics.get(res.resource_name)
            try:
                new = registry.apply_incremental(dict(topic.overrides) if topic is not None else {}, ops,
                                                _topic_list_default, _topic_is_list)
            except registry.ConfigError as exc:
                raise errors.InvalidConfig(str(exc)) from None
            md.topics.alter_topic_configs(res.resource_name, new, validate_only=request.validate_only)
        elif res.resource_type == GROUP:
            store = ctx.broker.metadata.group_configs
            try:
                new = group_configs.apply_incremental(store.get(res.resource_name), ops)
            except registry.ConfigError as exc:
                raise errors.InvalidConfig(str(exc)) from None
            store.replace(res.resource_name, new, validate_only=request.validate_only)
        else:
            per_broker = broker_target(ctx.broker, res.resource_name)
            current = md.configs.layers.dynamic_broker if per_broker else md.configs.layers.dynamic_default
            _check_broker_list_ops(ops)
            new = registry.apply_incremental(current, ops, lambda n: registry.BROKER_CONFIGS[n].default, lambda n: True)
            md.configs.set_broker_configs(per_broker, new, validate_only=request.validate_only,
                                          named={name for name, _, _ in ops}, node_id=ctx.broker.node_id)

    return answer(ctx, request, API_KEY, "IncrementalAlterConfigsResponse", apply,
                  null_ok=lambda c: c.config_operation == registry.OP_DELETE)


def _topic_list_default(name: str) -> str | None:
    """Kafka's KafkaConfigSchema.getDefault: the config's own default (not the broker's)."""
    return registry.TOPIC_CONFIGS[name].default


def _topic_is_list(name: str) -> bool:
    c = registry.TOPIC_CONFIGS.get(name)
    return c is not None and c.type == registry.ConfigType.LIST


def _check_broker_list_ops(ops) -> None:
    """ConfigAdminManager.prepareIncrementalConfigs' checks (INVALID_CONFIG there)."""
    for name, op, _ in ops:
        if op in (registry.OP_APPEND, registry.OP_SUBTRACT):
            d = registry.BROKER_CONFIGS.get(name)
            if d is None:
                raise errors.InvalidConfig(f"Unknown config name: {name}")
            if d.type != registry.ConfigType.LIST:
                verb = "append" if op == registry.OP_APPEND else "subtract"
                raise errors.InvalidConfig(f"Config value {verb} is not allowed for config key: {name}")
