"""The Java client's KafkaShareConsumer (kafka-clients 4.x, KIP-932) against oncelog and against
Apache Kafka, the same program and the same checks on both (tests/kafka/java/ShareQueueClient.java,
explicit acknowledgement): every record is accepted exactly once, except that a record whose value
ends in ``-release`` is released on its first delivery and delivered again with delivery count 2,
and one ending in ``-reject`` is rejected and never delivered again."""

from __future__ import annotations

import collections

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from oncelog.tools import apache_kafka

from ..helpers import create_topic, unique
from .java.harness import java_classes, json_lines, target

pytestmark = [pytest.mark.e2e, pytest.mark.apache_kafka]

__all__ = ["target"]  # the fixture, imported for pytest


def test_kafka_share_consumer_accepts_releases_and_rejects_as_on_kafka(target):
    classes = java_classes()
    topic, group = unique("sq"), unique("sg")
    create_topic(target.bootstrap, topic, 2)
    admin = AdminClient({"bootstrap.servers": target.bootstrap})
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([res]).values():
        f.result(30)
    values = [f"v{i:03d}" + ("-release" if i % 10 == 3 else "-reject" if i % 10 == 7 else "") for i in range(60)]
    p = ck.Producer({"bootstrap.servers": target.bootstrap})
    for i, v in enumerate(values):
        p.produce(topic, value=v.encode(), partition=i % 2)
    assert p.flush(30) == 0
    accept_wanted = [v for v in values if not v.endswith("-reject")]
    done = apache_kafka.run_tool("ShareQueueClient", ["--bootstrap", target.bootstrap, "--topic", topic,
                                                      "--group", group, "--expect", str(len(accept_wanted)),
                                                      "--timeout-ms", "60000"], classpath=[classes], timeout=120)
    assert done.returncode == 0, done.stderr[-4000:]
    lines = json_lines(done.stdout)
    assert lines[-1] == {"end": True, "accepted": len(accept_wanted)}, lines[-3:]
    deliveries = collections.defaultdict(list)
    for line in lines[:-1]:
        deliveries[line["value"]].append((line["delivery_count"], line["ack"].upper()))
    for v in values:
        if v.endswith("-release"):
            assert deliveries[v] == [(1, "RELEASE"), (2, "ACCEPT")], (v, deliveries[v])
        elif v.endswith("-reject"):
            assert deliveries[v] == [(1, "REJECT")], (v, deliveries[v])
        else:
            assert deliveries[v] == [(1, "ACCEPT")], (v, deliveries[v])
