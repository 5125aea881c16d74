"""DescribeProducers (key 61), v0 (KIP-664): each partition's active idempotent producers with
their epoch, last sequence and last append time.

ACLs (Kafka's KafkaApis.handleDescribeProducersRequest): READ on the topic, else its partitions
are TOPIC_AUTHORIZATION_FAILED.

Version notes:

DescribeProducers: v0

- v0: the only version (KIP-664), flexible versions (compact strings and arrays, tagged fields).
"""

from __future__ import annotations

from .. import errors
from . import _authz
from ._base import NO_THROTTLE, OK, build, response_module

API_KEY = 61
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    topics = []
    readable = _authz.filter_topics(ctx, _authz.Op.READ, (t.name for t in request.topics))
    for t in request.topics:
        parts = []
        for index in t.partition_indexes:
            code, message, producers = OK, None, ()
            if t.name not in readable:
                parts.append(build(m.PartitionResponse, partition_index=index, error_code=_authz.TOPIC_DENIED,
                                   error_message=None, active_producers=()))
                continue
            try:
                partition = ctx.broker.partitions.get(t.name, index)
                producers = tuple(
                    build(m.ProducerState, producer_id=e.producer_id, producer_epoch=e.producer_epoch,
                          last_sequence=e.last_seq, last_timestamp=e.last_timestamp_ms, coordinator_epoch=e.coordinator_epoch,
                          current_txn_start_offset=e.current_txn_first_offset)
                    for e in sorted(partition.producers.producers.values(), key=lambda e: e.producer_id)
                )
            except errors.KafkaError as exc:
                code = errors.error_code_for(exc)
                # Kafka's message (KafkaApis.handleDescribeProducersRequest): the error's own
                message = ("This server does not host this topic-partition."
                           if isinstance(exc, errors.UnknownTopicOrPartition) else str(exc))
            parts.append(build(m.PartitionResponse, partition_index=index, error_code=code, error_message=message,
                               active_producers=producers))
        topics.append(build(m.TopicResponse, name=t.name, partitions=tuple(parts)))
    return build(m.DescribeProducersResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))
