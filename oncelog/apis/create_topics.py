"""CreateTopics (key 19), v2-7.

Replication factor must be 1 or -1 (one broker); explicit replica assignments must name only
this broker. ``validate_only`` checks everything and creates nothing. Configs use Kafka's names
(see :data:`oncelog.storage.partition_log.CONFIG_NAMES`); an unknown one is INVALID_CONFIG.
v5+ answers with the topic's partitions, replication factor and effective configs.
"""

from __future__ import annotations

from .. import errors
from ._base import NO_THROTTLE, OK, build, response_module

API_KEY = 19
MIN_VERSION = 2
MAX_VERSION = 7


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    logs = ctx.broker.logs
    results = []
    seen = set()
    for t in request.topics:
        code, message, topic = OK, None, None
        try:
            if t.name in seen:
                raise errors.InvalidRequest(f"topic {t.name!r} appears twice in the request")
            seen.add(t.name)
            partitions = t.num_partitions
            if t.assignments:
                if partitions != -1 or t.replication_factor != -1:
                    raise errors.InvalidRequest("give either assignments or partition count and replication factor")
                for a in t.assignments:
                    if tuple(a.broker_ids) != (ctx.broker.node_id,):
                        raise errors.InvalidReplicationFactor(f"assignment {list(a.broker_ids)} names brokers other than {ctx.broker.node_id}")
                partitions = len(t.assignments)
            elif partitions == -1:
                partitions = ctx.broker.config.num_partitions
            configs = {c.name: c.value for c in t.configs}
            topic = logs.create_topic(t.name, partitions, t.replication_factor, configs,
                                      validate_only=request.validate_only)
        except errors.KafkaError as exc:
            code, message = errors.error_code_for(exc), str(exc)
        configs = ()
        if topic is not None and hasattr(m, "CreatableTopicConfigs"):
            configs = tuple(
                build(m.CreatableTopicConfigs, name=k, value=v, read_only=False,
                      config_source=(1 if k in topic.overrides else 5), is_sensitive=False)
                for k, v in sorted(topic.config.describe().items())
            )
        results.append(build(m.CreatableTopicResult, name=t.name, topic_id=topic.topic_id if topic else _zero(),
                             error_code=code, error_message=message, topic_config_error_code=OK,
                             num_partitions=topic.partitions if topic else -1,
                             replication_factor=1 if topic else -1, configs=configs))
    return build(m.CreateTopicsResponse, throttle_time=NO_THROTTLE, topics=tuple(results))


def _zero():
    import uuid
    return uuid.UUID(int=0)
