"""IncrementalAlterConfigs (key 44), v0-1: change some configs of a resource. Operations:
SET (0), DELETE (1), and for LIST configs APPEND (2) / SUBTRACT (3), which start from the
current value or, unset, the config's default (Kafka's ConfigurationControlManager and, for
brokers, ConfigAdminManager.prepareIncrementalConfigs). The resulting set is then validated,
persisted and applied exactly as :mod:`oncelog.apis.alter_configs` does.
"""

from __future__ import annotations

from .. import configs, errors
from ._base import NO_THROTTLE, OK, build, response_module
from .alter_configs import BROKER, TOPIC, broker_target, check_common, check_resources, unsupported_type

API_KEY = 44
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    logs = ctx.broker.logs
    counts = check_resources(request.resources)
    results = []
    for res in request.resources:
        code, message = OK, None
        try:
            check_common(res, counts, null_ok=lambda c: c.config_operation == configs.OP_DELETE)
            ops = [(c.name, c.config_operation, c.value) for c in res.configs]
            for _, op, _ in ops:
                if op not in configs.OP_NAMES:
                    raise errors.InvalidRequest(f"Unknown operations type {op}")
            if res.resource_type == TOPIC:
                topic = logs.topics.get(res.resource_name)
                current = dict(topic.overrides) if topic is not None else {}
                try:
                    new = configs.apply_incremental(current, ops, _topic_list_default, _topic_is_list)
                except configs.ConfigError as exc:
                    raise errors.InvalidConfig(str(exc)) from None
                logs.alter_topic_configs(res.resource_name, new, validate_only=request.validate_only)
            elif res.resource_type == BROKER:
                per_broker = broker_target(ctx.broker, res.resource_name)
                layers = logs.layers
                current = dict(layers.dynamic_broker if per_broker else layers.dynamic_default)
                _check_broker_list_ops(ops)
                new = configs.apply_incremental(current, ops, lambda n: configs.BROKER_CONFIGS[n].default,
                                                lambda n: True)
                logs.set_broker_configs(per_broker, new, validate_only=request.validate_only)
            else:
                raise unsupported_type(res.resource_type)
        except errors.KafkaError as exc:
            code, message = errors.error_code_for(exc), str(exc)
        results.append(build(m.AlterConfigsResourceResponse, error_code=code, error_message=message,
                             resource_type=res.resource_type, resource_name=res.resource_name))
    return build(m.IncrementalAlterConfigsResponse, throttle_time=NO_THROTTLE, responses=tuple(results))


def _topic_list_default(name: str) -> str | None:
    """Kafka's KafkaConfigSchema.getDefault: the config's own default (not the broker's)."""
    return configs.TOPIC_CONFIGS[name].default


def _topic_is_list(name: str) -> bool:
    c = configs.TOPIC_CONFIGS.get(name)
    return c is not None and c.type == configs.ConfigType.LIST


def _check_broker_list_ops(ops) -> None:
    """ConfigAdminManager.prepareIncrementalConfigs' checks (INVALID_CONFIG there)."""
    for name, op, _ in ops:
        if op in (configs.OP_APPEND, configs.OP_SUBTRACT):
            d = configs.BROKER_CONFIGS.get(name)
            if d is None:
                raise errors.InvalidConfig(f"Unknown config name: {name}")
            if d.type != configs.ConfigType.LIST:
                verb = "append" if op == configs.OP_APPEND else "subtract"
                raise errors.InvalidConfig(f"Config value {verb} is not allowed for config key: {name}")
