"""Administration with confluent-kafka's AdminClient: topics, partitions, configs, records, groups."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions,
                                   NewTopic, OffsetSpec)

from .helpers import TIMEOUT, consume, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.any_kafka]

T = TIMEOUT  # seconds: an admin call's upper bound


def admin(broker) -> AdminClient:
    return AdminClient(broker.client_config())


def fill(broker, topic: str, n: int, partition: int = 0) -> None:
    p = Producer(broker.client_config(**{"linger.ms": 1}))
    for i in range(n):
        p.produce(topic, value=str(i).encode(), partition=partition)
    assert p.flush(T) == 0


def test_create_and_list_topics(oncelog_broker):
    a = admin(oncelog_broker)
    name = oncelog_broker.unique("t")
    a.create_topics([NewTopic(name, num_partitions=3, replication_factor=1)])[name].result(T)
    md = wait_for(lambda: (m := a.list_topics(timeout=T)).topics.get(name) and
                  len(m.topics[name].partitions) == 3 and m, what="the new topic in metadata")
    assert md.topics[name].error is None
    assert sorted(md.topics[name].partitions) == [0, 1, 2]


def test_create_an_existing_topic_fails(oncelog_broker):
    name = oncelog_broker.topic()
    a = admin(oncelog_broker)  # held: a future of a destroyed client fails with _DESTROY
    fut = a.create_topics([NewTopic(name, 1, 1)])[name]
    with pytest.raises(Exception) as exc:
        fut.result(T)
    assert "TOPIC_ALREADY_EXISTS" in str(exc.value) or "already exists" in str(exc.value)


def test_describe_topics(oncelog_broker):
    name = oncelog_broker.topic(partitions=2)
    a = admin(oncelog_broker)
    [desc] = a.describe_topics(TopicCollection([name])).values()
    d = desc.result(T)
    assert d.name == name and not d.is_internal
    assert [p.id for p in d.partitions] == [0, 1]
    assert all(p.leader is not None for p in d.partitions)


def test_add_partitions(oncelog_broker):
    name = oncelog_broker.topic(partitions=1)
    a = admin(oncelog_broker)
    a.create_partitions([NewPartitions(name, 3)])[name].result(T)
    wait_for(lambda: len(a.list_topics(name, timeout=T).topics[name].partitions) == 3, what="3 partitions")
    fill(oncelog_broker, name, 2, partition=2)


def test_describe_and_alter_topic_configs(oncelog_broker):
    name = oncelog_broker.topic(config={"retention.ms": "3600000"})
    a = admin(oncelog_broker)
    res = ConfigResource(ConfigResource.Type.TOPIC, name)
    configs = a.describe_configs([res])[res].result(T)
    assert configs["retention.ms"].value == "3600000"
    assert configs["cleanup.policy"].value == "delete"  # a default
    change = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[
        ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("max.message.bytes", "200000", incremental_operation=AlterConfigOpType.SET)])
    a.incremental_alter_configs([change])[change].result(T)
    configs = wait_for(lambda: (c := a.describe_configs([res])[res].result(T))["retention.ms"].value == "7200000"
                       and c, what="the altered config")
    assert configs["max.message.bytes"].value == "200000"


def test_delete_records(oncelog_broker):
    name = oncelog_broker.topic()
    fill(oncelog_broker, name, 10)
    a = admin(oncelog_broker)
    tp = TopicPartition(name, 0, 6)  # everything before offset 6
    [fut] = a.delete_records([tp]).values()
    assert fut.result(T).low_watermark == 6
    c = Consumer(oncelog_broker.client_config(**{"group.id": "unused", "auto.offset.reset": "earliest",
                                                 "fetch.wait.max.ms": 50}))
    assert c.get_watermark_offsets(TopicPartition(name, 0), timeout=T) == (6, 10)
    c.assign([TopicPartition(name, 0, -2)])  # OFFSET_BEGINNING
    msgs = consume(c, 4)
    c.close()
    assert [m.offset() for m in msgs] == [6, 7, 8, 9]


def test_list_offsets(oncelog_broker):
    name = oncelog_broker.topic()
    fill(oncelog_broker, name, 5)
    a = admin(oncelog_broker)
    tp = TopicPartition(name, 0)
    earliest = a.list_offsets({tp: OffsetSpec.earliest()})[tp].result(T)
    latest = a.list_offsets({tp: OffsetSpec.latest()})[tp].result(T)
    assert (earliest.offset, latest.offset) == (0, 5)


def test_delete_topic(oncelog_broker):
    name = oncelog_broker.topic()
    a = admin(oncelog_broker)
    a.delete_topics([name])[name].result(T)
    wait_for(lambda: name not in a.list_topics(timeout=T).topics, what="the topic gone from metadata")


def test_list_and_describe_consumer_groups(oncelog_broker):
    topic, group = oncelog_broker.topic(), oncelog_broker.unique("g")
    fill(oncelog_broker, topic, 3)
    c = Consumer(oncelog_broker.client_config(**{"group.id": group, "auto.offset.reset": "earliest",
                                                 "enable.auto.commit": False, "fetch.wait.max.ms": 50}))
    c.subscribe([topic])
    msgs = consume(c, 3)
    c.commit(message=msgs[-1], asynchronous=False)
    a = admin(oncelog_broker)
    listed = a.list_consumer_groups().result(T)
    assert group in {g.group_id for g in listed.valid}
    desc = a.describe_consumer_groups([group])[group].result(T)
    assert desc.group_id == group and len(desc.members) == 1
    [offsets] = a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)]).values()
    assert [(tp.topic, tp.partition, tp.offset) for tp in offsets.result(T).topic_partitions] == [(topic, 0, 3)]
    c.close()
