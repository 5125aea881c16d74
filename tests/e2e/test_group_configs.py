"""KIP-848's GROUP config resource on oncelog (Kafka 4.x: ConfigResource type 32), end to end:
confluent-kafka's AdminClient sets a group's own configs, a real oncelog broker process applies
them to the group at once and keeps them across a SIGKILL and restart.

Invariants checked:
- a ConsumerGroupHeartbeat answered after an IncrementalAlterConfigs carries the group's own
  consumer.heartbeat.interval.ms (no restart, no rejoin), and the broker's again after DELETE;
- what DescribeConfigs reports (value, GROUP_CONFIG source, the broker's synonym below) and what
  the coordinator uses survive a SIGKILL of the broker: the change was durable when answered;
- a refused change (Kafka's INVALID_CONFIG) and a validate_only one change nothing, before and
  after the restart.
The answers themselves are compared field by field with Apache Kafka 4.4 in
tests/kafka/conformance/scenarios_configs.py (the group_configs_* scenarios)."""

from __future__ import annotations

import datetime
import uuid

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from kio.index import load_payload_module
from kio.static.constants import EntityType

from oncelog.client.wire import RawClient

pytestmark = pytest.mark.e2e

SESSION, HEARTBEAT, ASSIGNMENT = ("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms",
                                  "consumer.assignment.interval.ms")
GROUP_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 8, 4, 5
CGH, DESCRIBE_CONFIGS = 68, 32  # API keys


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def alter(bootstrap: str, group: str, ops: list[tuple[str, AlterConfigOpType, str | None]], *,
          validate_only: bool = False) -> None:
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=op) for name, op, value in ops])
    admin = _admin(bootstrap)  # held until the answers arrive (a collected client cancels them)
    for f in admin.incremental_alter_configs([resource], validate_only=validate_only).values():
        f.result(timeout=30)


def described(bootstrap: str, group: str) -> dict[str, tuple[str, int, list[tuple[str, str, int]]]]:
    """name -> (value, source, synonyms) of the group's consumer.* configs: DescribeConfigs v4 on
    the wire (confluent-kafka keeps synonyms in a dict by name, and Kafka names the broker config
    once per layer)."""
    m = load_payload_module(DESCRIBE_CONFIGS, 4, EntityType.request)
    resp = _call(bootstrap, m.DescribeConfigsRequest(include_synonyms=True, include_documentation=False, resources=(
        m.DescribeConfigsResource(resource_type=32, resource_name=group,
                                  configuration_keys=(SESSION, HEARTBEAT, ASSIGNMENT)),)))
    [result] = resp.results
    assert int(result.error_code) == 0, result
    return {c.name: (c.value, int(c.config_source), [(s.name, s.value, int(s.source)) for s in c.synonyms])
            for c in result.configs}


def _call(bootstrap: str, request):
    client = RawClient(bootstrap, timeout=30)
    try:
        return client.request(request)
    finally:
        client.close()


def heartbeat_interval(bootstrap: str, group: str, member_id: str, epoch: int) -> tuple[int, int]:
    """One ConsumerGroupHeartbeat (a join at epoch 0) with no subscription to speak of: the
    interval the broker tells the member, and the member's epoch."""
    m = load_payload_module(CGH, 0, EntityType.request)
    join = epoch == 0
    req = m.ConsumerGroupHeartbeatRequest(
        group_id=group, member_id=member_id, member_epoch=epoch, instance_id=None, rack_id=None,
        rebalance_timeout=datetime.timedelta(milliseconds=30000 if join else -1),
        subscribed_topic_names=("gc-none",) if join else None, server_assignor=None,
        topic_partitions=() if join else None)
    resp = _call(bootstrap, req)
    assert int(resp.error_code) == 0, resp
    return int(resp.heartbeat_interval.total_seconds() * 1000), resp.member_epoch


def test_group_config_applies_at_once_and_survives_a_restart(broker_factory):
    broker = broker_factory(extra_args=["--override", "group.consumer.heartbeat.interval.ms=2000"])
    group, member = f"gc-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    interval, epoch = heartbeat_interval(broker.bootstrap, group, member, 0)
    assert interval == 2000  # the broker's (static) value: the group has none of its own yet

    alter(broker.bootstrap, group, [(SESSION, AlterConfigOpType.SET, "6000"),
                                    (HEARTBEAT, AlterConfigOpType.SET, "700")])
    # Applied at once: the member's very next heartbeat is told the group's interval.
    assert heartbeat_interval(broker.bootstrap, group, member, epoch)[0] == 700
    before = described(broker.bootstrap, group)
    # As Kafka 4.4 describes it with a static group.consumer.heartbeat.interval.ms (measured):
    # the group's value, then the broker's in each layer, the static one and the default.
    assert before[HEARTBEAT] == ("700", GROUP_CONFIG, [
        (HEARTBEAT, "700", GROUP_CONFIG), ("group.consumer.heartbeat.interval.ms", "2000", STATIC_BROKER_CONFIG),
        ("group.consumer.heartbeat.interval.ms", "5000", DEFAULT_CONFIG)])
    assert before[SESSION][:2] == ("6000", GROUP_CONFIG)
    assert before[ASSIGNMENT] == ("1000", DEFAULT_CONFIG, [("group.consumer.assignment.interval.ms", "1000",
                                                           DEFAULT_CONFIG)])

    # Refused (session not above the heartbeat; above the broker's max) and validate_only: no change.
    with pytest.raises(KafkaException, match="consumer.session.timeout.ms must be greater than"):
        alter(broker.bootstrap, group, [(SESSION, AlterConfigOpType.SET, "700")])
    with pytest.raises(KafkaException, match="must be in the range 0 to 15000 inclusive"):
        alter(broker.bootstrap, group, [(ASSIGNMENT, AlterConfigOpType.SET, "20000")])
    alter(broker.bootstrap, group, [(HEARTBEAT, AlterConfigOpType.SET, "900")], validate_only=True)
    assert described(broker.bootstrap, group) == before

    broker.kill()  # SIGKILL: only what was durable when answered comes back
    broker.restart()
    assert described(broker.bootstrap, group) == before
    # The coordinator uses it after the restart too (a new member of the same group).
    assert heartbeat_interval(broker.bootstrap, group, uuid.uuid4().hex, 0)[0] == 700

    # DELETE: back to the broker's value, at once and after another restart.
    alter(broker.bootstrap, group, [(HEARTBEAT, AlterConfigOpType.DELETE, None)])
    after_delete = described(broker.bootstrap, group)
    assert after_delete[HEARTBEAT] == ("2000", STATIC_BROKER_CONFIG, [
        ("group.consumer.heartbeat.interval.ms", "2000", STATIC_BROKER_CONFIG),
        ("group.consumer.heartbeat.interval.ms", "5000", DEFAULT_CONFIG)])
    assert heartbeat_interval(broker.bootstrap, group, uuid.uuid4().hex, 0)[0] == 2000
    broker.kill()
    broker.restart()
    assert described(broker.bootstrap, group) == after_delete


def test_group_configs_are_per_group(broker_factory):
    """One group's configs are not another's: the second group keeps the broker's values."""
    broker = broker_factory()
    a, b = f"gc-a-{uuid.uuid4().hex[:8]}", f"gc-b-{uuid.uuid4().hex[:8]}"
    alter(broker.bootstrap, a, [(HEARTBEAT, AlterConfigOpType.SET, "1500")])
    assert heartbeat_interval(broker.bootstrap, a, uuid.uuid4().hex, 0)[0] == 1500
    assert heartbeat_interval(broker.bootstrap, b, uuid.uuid4().hex, 0)[0] == 5000
    assert described(broker.bootstrap, b)[HEARTBEAT][:2] == ("5000", DEFAULT_CONFIG)
