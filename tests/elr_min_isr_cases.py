"""The cluster-level min.insync.replicas that Kafka 4.1+ keeps while eligible leader replicas
(KIP-966 ELR) are on, as a client sees it: one check, run against Apache Kafka 4.4 (the reference,
tests/kafka/test_elr_min_isr_kafka.py) and against oncelog (tests/config/test_registry.py).

Invariants checked: DescribeConfigs of the cluster-default resource "" lists min.insync.replicas
(DYNAMIC_DEFAULT_BROKER_CONFIG, the static value, "1" on both test brokers), and so a topic without
an override reports it with that source, not as a default (confluent-kafka-python's
test_incremental_alter_configs expects it among a topic's non-default configs); removing it at the
cluster level (IncrementalAlterConfigs DELETE, or a legacy AlterConfigs whose set lacks it) is
INVALID_CONFIG, and so is naming it at the broker level, each with Kafka's message, even with
validate_only; other configs of both resources stay alterable. Everything that could change the
shared broker is sent with validate_only."""

from __future__ import annotations

from oncelog.client.wire import RawClient, request_module

TOPIC, BROKER = 2, 4
SET, DELETE = 0, 1
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
INVALID_CONFIG = 40
CLUSTER_LEVEL = "Cluster-level min.insync.replicas cannot be removed while ELR is enabled."
BROKER_LEVEL = "Broker-level min.insync.replicas cannot be altered while ELR is enabled."


def _describe(c: RawClient, rtype: int, name: str, keys):
    m = request_module(32, 4)
    r = c.request(m.DescribeConfigsRequest(include_synonyms=False, include_documentation=False, resources=(
        m.DescribeConfigsResource(resource_type=rtype, resource_name=name, configuration_keys=tuple(keys)),)))
    return {e.name: (e.value, e.config_source) for e in r.results[0].configs}


def _incremental(c: RawClient, name: str, ops, validate_only: bool = True):
    m = request_module(44, 1)
    r = c.request(m.IncrementalAlterConfigsRequest(validate_only=validate_only, resources=(m.AlterConfigsResource(
        resource_type=BROKER, resource_name=name,
        configs=tuple(m.AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in ops)),)))
    return r.responses[0].error_code, r.responses[0].error_message


def _legacy(c: RawClient, name: str, configs: dict, validate_only: bool = True):
    m = request_module(33, 2)
    r = c.request(m.AlterConfigsRequest(validate_only=validate_only, resources=(m.AlterConfigsResource(
        resource_type=BROKER, resource_name=name,
        configs=tuple(m.AlterableConfig(name=n, value=v) for n, v in configs.items())),)))
    return r.responses[0].error_code, r.responses[0].error_message


def check(bootstrap: str, node_id: int, topic: str) -> None:
    """``topic``: an existing topic without a min.insync.replicas override."""
    node = str(node_id)
    c = RawClient(bootstrap)
    try:
        assert _describe(c, BROKER, "", ["min.insync.replicas"]) == {
            "min.insync.replicas": ("1", DYNAMIC_DEFAULT_BROKER_CONFIG)}
        assert _describe(c, TOPIC, topic, ["min.insync.replicas"]) == {
            "min.insync.replicas": ("1", DYNAMIC_DEFAULT_BROKER_CONFIG)}
        assert _describe(c, BROKER, node, ["min.insync.replicas"]) == {
            "min.insync.replicas": ("1", DYNAMIC_DEFAULT_BROKER_CONFIG)}
        # The cluster-level value cannot go, whichever API tries.
        assert _incremental(c, "", [("min.insync.replicas", DELETE, None)]) == (INVALID_CONFIG, CLUSTER_LEVEL)
        assert _legacy(c, "", {}) == (INVALID_CONFIG, CLUSTER_LEVEL)
        assert _legacy(c, "", {"log.retention.ms": "5000"}) == (INVALID_CONFIG, CLUSTER_LEVEL)
        # ... but can be set, and other cluster-level configs change beside it.
        assert _incremental(c, "", [("min.insync.replicas", SET, "1")]) == (0, None)
        assert _incremental(c, "", [("log.retention.ms", SET, "5000")]) == (0, None)
        assert _legacy(c, "", {"min.insync.replicas": "1", "log.retention.ms": "5000"}) == (0, None)
        # A broker-level one is never allowed; the broker's other configs are.
        assert _incremental(c, node, [("min.insync.replicas", SET, "1")]) == (INVALID_CONFIG, BROKER_LEVEL)
        assert _incremental(c, node, [("min.insync.replicas", DELETE, None)]) == (INVALID_CONFIG, BROKER_LEVEL)
        assert _legacy(c, node, {"min.insync.replicas": "1"}) == (INVALID_CONFIG, BROKER_LEVEL)
        assert _legacy(c, node, {"log.retention.ms": "5000"}) == (0, None)
        assert _incremental(c, node, [("log.retention.ms", SET, "5000")]) == (0, None)
        # Refused for real too, not only when validating.
        assert _incremental(c, "", [("min.insync.replicas", DELETE, None)], validate_only=False) == (
            INVALID_CONFIG, CLUSTER_LEVEL)
        assert _describe(c, BROKER, "", ["min.insync.replicas"]) == {
            "min.insync.replicas": ("1", DYNAMIC_DEFAULT_BROKER_CONFIG)}
    finally:
        c.close()
