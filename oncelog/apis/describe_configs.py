"""DescribeConfigs (key 32), v1-4: real values of topic configs (resource type 2) and of the
broker's settings (resource type 4). Config source: 1 = topic override, 5 = static broker
default (what Kafka reports for values from server.properties)."""

from __future__ import annotations

from .. import errors
from ._base import NO_THROTTLE, OK, build, response_module

API_KEY = 32
MIN_VERSION = 1
MAX_VERSION = 4

TOPIC, BROKER = 2, 4
TOPIC_OVERRIDE, STATIC_BROKER = 1, 5


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    broker = ctx.broker
    results = []
    for res in request.resources:
        code, message, entries = OK, None, []
        try:
            if res.resource_type == TOPIC:
                topic = broker.logs.topics.get(res.resource_name)
                if topic is None:
                    raise errors.UnknownTopicOrPartition(f"topic {res.resource_name!r} does not exist")
                entries = [(k, v, TOPIC_OVERRIDE if k in topic.overrides else STATIC_BROKER)
                           for k, v in sorted(topic.config.describe().items())]
            elif res.resource_type == BROKER:
                if res.resource_name not in ("", str(broker.node_id)):
                    raise errors.InvalidRequest(f"unknown broker {res.resource_name!r}")
                entries = [(k, v, STATIC_BROKER) for k, v in sorted(broker.describe_config().items())]
            else:
                raise errors.InvalidRequest(f"unsupported resource type {res.resource_type}")
            if res.configuration_keys is not None:
                keys = set(res.configuration_keys)
                entries = [e for e in entries if e[0] in keys]
        except errors.KafkaError as exc:
            code, message = errors.error_code_for(exc), str(exc)
        configs = tuple(
            build(m.DescribeConfigsResourceResult, name=k, value=v, read_only=False, config_source=src,
                  is_default=False, is_sensitive=False, synonyms=(), config_type=0, documentation=None)
            for k, v, src in entries
        )
        results.append(build(m.DescribeConfigsResult, error_code=code, error_message=message,
                             resource_type=res.resource_type, resource_name=res.resource_name, configs=configs))
    return build(m.DescribeConfigsResponse, throttle_time=NO_THROTTLE, results=tuple(results))
