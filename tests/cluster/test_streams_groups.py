"""Streams groups (KIP-1071) on a two-node cluster, over real TCP: whichever node coordinates the
group, the internal topics its topology needs are created, by the controller (node 1) — at once
when the coordinator is node 1, asked over the nodes' link when it is node 2 — while the
heartbeat answers MISSING_INTERNAL_TOPICS without waiting (docs/streams-groups.md). One group
coordinated by each node joins with a topology of a repartition topic and a changelog topic; both
groups' topics appear in Metadata with the partition counts and configs the topology asks, and
the member then gets its tasks. A creation the controller refuses is told in the status' detail."""

from __future__ import annotations

import datetime
import time
import uuid

import pytest
from kio.schema.errors import ErrorCode

from oncelog.client.wire import RawClient, request_module

from ..helpers import create_topic

pytestmark = pytest.mark.e2e

MISSING_INTERNAL_TOPICS = 3
SOURCE_PARTITIONS, REPARTITION_PARTITIONS = 2, 3
REPARTITION_CONFIGS = {"cleanup.policy": "delete", "retention.ms": "-1", "segment.bytes": "52428800"}
CHANGELOG_CONFIGS = {"cleanup.policy": "compact", "message.timestamp.type": "CreateTime"}
TIMEOUT = 30.0


def ask(address: str, request):
    c = RawClient(address, timeout=30)
    try:
        return c.request(request)
    finally:
        c.close()


def find_coordinator(address: str, group: str) -> int:
    m = request_module(10, 4)
    r = ask(address, m.FindCoordinatorRequest(key_type=0, coordinator_keys=(group,)))
    assert r.coordinators[0].error_code == ErrorCode.none, r
    return r.coordinators[0].node_id


def no_initial_delay(address: str, group: str) -> None:
    m = request_module(44, 1)
    r = ask(address, m.IncrementalAlterConfigsRequest(validate_only=False, resources=(m.AlterConfigsResource(
        resource_type=32, resource_name=group, configs=(m.AlterableConfig(
            name="streams.initial.rebalance.delay.ms", config_operation=0, value="0"),)),)))
    assert r.responses[0].error_code == ErrorCode.none, r


def topology(m, source: str, repartition: str, changelog: str, repartition_configs: dict):
    """Subtopology 0 reads ``source`` and writes ``repartition``; subtopology 1 reads it (3
    partitions asked) into a store backed by ``changelog`` (its count left to the broker)."""
    def info(name, partitions, configs):
        return m.TopicInfo(name=name, partitions=partitions, replication_factor=0, topic_configs=tuple(
            m.KeyValue(key=k, value=v) for k, v in sorted(configs.items())))

    return m.Topology(epoch=0, subtopologies=(
        m.Subtopology(subtopology_id="0", source_topics=(source,), source_topic_regex=(), state_changelog_topics=(),
                      repartition_sink_topics=(repartition,), repartition_source_topics=(), copartition_groups=()),
        m.Subtopology(subtopology_id="1", source_topics=(), source_topic_regex=(),
                      state_changelog_topics=(info(changelog, 0, CHANGELOG_CONFIGS),), repartition_sink_topics=(),
                      repartition_source_topics=(info(repartition, REPARTITION_PARTITIONS, repartition_configs),),
                      copartition_groups=()),
    ))


def heartbeat(address: str, group: str, member: str, epoch: int, topo=None, owned=None):
    m = request_module(88, 0)
    joining = epoch == 0
    tasks = () if joining else tuple(m.TaskIds(subtopology_id=s, partitions=tuple(ps))
                                     for s, ps in sorted((owned or {}).items()))
    return ask(address, m.StreamsGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=epoch, endpoint_information_epoch=-1,
        rebalance_timeout=datetime.timedelta(seconds=30) if joining else datetime.timedelta(milliseconds=-1),
        topology=topo(m) if joining else None, active_tasks=tasks, standby_tasks=(), warmup_tasks=(),
        process_id=str(uuid.uuid4()) if joining else None, client_tags=() if joining else None,
        task_offsets=() if joining else None, task_end_offsets=() if joining else None))


def statuses(r) -> dict[int, str]:
    return {s.status_code: s.status_detail for s in r.status}


def topic_partitions(address: str, topic: str) -> int | None:
    """The topic's partition count in this node's Metadata (None: not there)."""
    m = request_module(3, 12)
    r = ask(address, m.MetadataRequest(topics=(m.MetadataRequestTopic(topic_id=None, name=topic),),
                                       allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    t = r.topics[0]
    if t.error_code == ErrorCode.unknown_topic_or_partition:
        return None
    assert t.error_code == ErrorCode.none, t
    return len(t.partitions)


def topic_overrides(address: str, topic: str) -> dict[str, str]:
    """The topic's own configs (DescribeConfigs, source DYNAMIC_TOPIC_CONFIG)."""
    m = request_module(32, 4)
    r = ask(address, m.DescribeConfigsRequest(resources=(m.DescribeConfigsResource(
        resource_type=2, resource_name=topic, configuration_keys=None),), include_synonyms=False,
        include_documentation=False))
    res = r.results[0]
    assert res.error_code == ErrorCode.none, res
    return {c.name: c.value for c in res.configs if c.config_source == 1}


def source_topic(cluster) -> str:
    """A new topic of SOURCE_PARTITIONS partitions, once both nodes know it."""
    source = f"ks-in-{uuid.uuid4().hex[:6]}"
    create_topic(cluster.bootstrap, source, SOURCE_PARTITIONS)
    deadline = time.monotonic() + TIMEOUT
    while topic_partitions(cluster.address(2), source) != SOURCE_PARTITIONS:
        assert time.monotonic() < deadline, f"node 2 never learnt {source}"
        time.sleep(0.05)
    return source


def test_internal_topics_are_created_whichever_node_coordinates_the_group(cluster_factory):
    cluster = cluster_factory(2)
    source = source_topic(cluster)
    groups = {}
    for node in (1, 2):
        group = cluster.group_on(node, "ks-app")
        assert find_coordinator(cluster.address(1), group) == node
        no_initial_delay(cluster.address(node), group)
        groups[node] = group

    joined = {}
    for node, group in groups.items():
        address, member = cluster.address(node), str(uuid.uuid4())
        rep, log = f"{group}-rep-repartition", f"{group}-store-changelog"
        started = time.monotonic()
        r = heartbeat(address, group, member, 0, lambda m: topology(m, source, rep, log, REPARTITION_CONFIGS))
        assert time.monotonic() - started < 5, "the join waited for the creation"
        assert r.error_code == ErrorCode.none, r
        assert MISSING_INTERNAL_TOPICS in statuses(r), r
        assert "Creation failed" not in statuses(r)[MISSING_INTERNAL_TOPICS], r
        assert not r.active_tasks, r
        joined[node] = (address, group, member, r.member_epoch, rep, log)

    for node, (address, group, member, epoch, rep, log) in joined.items():
        deadline = time.monotonic() + TIMEOUT
        owned: dict[str, list[int]] = {}
        while True:
            r = heartbeat(address, group, member, epoch, owned=owned)
            assert r.error_code == ErrorCode.none, (node, r)
            epoch = r.member_epoch
            if r.active_tasks is not None:
                owned = {t.subtopology_id: list(t.partitions) for t in r.active_tasks}
            if owned and not statuses(r):
                break
            assert time.monotonic() < deadline, f"group {group} (node {node}) never got its tasks: {r}"
            time.sleep(0.2)
        assert owned == {"0": list(range(SOURCE_PARTITIONS)), "1": list(range(REPARTITION_PARTITIONS))}, (node, r)
        for other in (1, 2):  # every node knows both topics, with the counts the topology asked
            assert topic_partitions(cluster.address(other), rep) == REPARTITION_PARTITIONS
            assert topic_partitions(cluster.address(other), log) == REPARTITION_PARTITIONS  # its subtopology's
        assert topic_overrides(cluster.address(1), rep) == REPARTITION_CONFIGS
        assert topic_overrides(cluster.address(1), log) == CHANGELOG_CONFIGS


def test_a_creation_the_controller_refuses_is_told_by_node_2(cluster_factory):
    cluster = cluster_factory(2)
    source = source_topic(cluster)
    group = cluster.group_on(2, "ks-bad")
    assert find_coordinator(cluster.address(2), group) == 2
    no_initial_delay(cluster.address(2), group)
    address, member = cluster.address(2), str(uuid.uuid4())
    rep, log = f"{group}-rep-repartition", f"{group}-store-changelog"
    bad = {"cleanup.policy": "bogus"}
    r = heartbeat(address, group, member, 0, lambda m: topology(m, source, rep, log, bad))
    assert r.error_code == ErrorCode.none and MISSING_INTERNAL_TOPICS in statuses(r), r
    epoch, deadline = r.member_epoch, time.monotonic() + TIMEOUT
    while "Creation failed" not in (detail := statuses(r).get(MISSING_INTERNAL_TOPICS, "")):
        assert time.monotonic() < deadline, r
        time.sleep(0.2)
        r = heartbeat(address, group, member, epoch, owned={})
        assert r.error_code == ErrorCode.none, r
    assert f"Creation failed: {rep} (" in detail and "bogus" in detail, detail
    assert topic_partitions(cluster.address(1), rep) is None
    assert topic_partitions(cluster.address(1), log) == REPARTITION_PARTITIONS  # the other was created
    assert not r.active_tasks
