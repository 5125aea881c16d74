"""Produce v13 (KIP-516): topics named by id, as Kafka 4.1+ and its Java client send them."""

from __future__ import annotations

import datetime
import uuid

from .framework import PRODUCE, batch, mod, scenario


def _produce_by_id(k, topic_ids, values=(b"v",)):
    m = mod(PRODUCE, 13)
    return k.send(m.ProduceRequest(
        transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=30),
        topic_data=tuple(m.TopicProduceData(topic_id=i, partition_data=(
            m.PartitionProduceData(index=0, records=batch(list(values))),)) for i in topic_ids)))


def _topic_id(k, name):
    return k.metadata([name]).topics[0].topic_id


@scenario("produce")
def v13_by_topic_id(k):
    """Produce v13 names the topic by its id: appended, answered with the id; a Fetch reads it back."""
    t = k.create_topic("t")
    return [_produce_by_id(k, [_topic_id(k, t)], [b"a", b"b"]), k.fetch(t)]


@scenario("produce")
def v13_unknown_topic_id(k):
    """Produce v13 to an id no topic has: UNKNOWN_TOPIC_ID for its partition."""
    return _produce_by_id(k, [uuid.UUID("00000000-0000-0000-0000-00000000abcd")])


@scenario("produce")
def v13_known_and_unknown_ids(k):
    """Produce v13 to a known and an unknown id in one request: the known one is appended."""
    t = k.create_topic("t")
    return [_produce_by_id(k, [_topic_id(k, t), uuid.UUID("00000000-0000-0000-0000-00000000abcd")]), k.fetch(t)]


@scenario("produce")
def v13_zero_topic_id(k):
    """Produce v13 with the zero UUID as topic id: Kafka's answer for a topic id that is not set."""
    return _produce_by_id(k, [uuid.UUID(int=0)])
