"""The share-group offsets APIs on a two-node cluster, over real TCP: the state of a share
partition lives on the partition's leader (docs/share-groups.md), and the group's coordinator reads
it with ReadShareGroupStateSummary, writes it with InitializeShareGroupState and deletes it with
DeleteShareGroupState over the nodes' control link. A topic whose partitions both nodes lead:
AlterShareGroupOffsets sets every partition's start offset, DescribeShareGroupOffsets answers them
with their lag, a share consumer then reads from there, and DeleteShareGroupOffsets forgets them."""

from __future__ import annotations

import time

import confluent_kafka as ck
import pytest
from kio.schema.errors import ErrorCode

from oncelog.client.wire import RawClient, request_module

from ..helpers import create_topic, unique
from .test_two_nodes import produce_numbered

pytestmark = pytest.mark.e2e

PARTITIONS, PER_PARTITION, START = 4, 5, 2


def _ask(cluster, group: str, request):
    c = RawClient(cluster.address(cluster.group_coordinator(group)))
    try:
        return c.request(request)
    finally:
        c.close()


def alter(cluster, group, topic, starts: dict[int, int]):
    m = request_module(91, 0)
    return _ask(cluster, group, m.AlterShareGroupOffsetsRequest(group_id=group, topics=(
        m.AlterShareGroupOffsetsRequestTopic(topic_name=topic, partitions=tuple(
            m.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=o) for p, o in starts.items())),)))


def describe(cluster, group, topic: str | None, partitions=()):
    """{(topic, partition): (start offset, lag, error)} of DescribeShareGroupOffsets v1."""
    m = request_module(90, 1)
    r = _ask(cluster, group, m.DescribeShareGroupOffsetsRequest(groups=(m.DescribeShareGroupOffsetsRequestGroup(
        group_id=group, topics=None if topic is None else (
            m.DescribeShareGroupOffsetsRequestTopic(topic_name=topic, partitions=tuple(partitions)),)),)))
    g = r.groups[0]
    assert g.error_code == ErrorCode.none, g
    return {(t.topic_name, p.partition_index): (p.start_offset, p.lag, p.error_code)
            for t in g.topics for p in t.partitions}


def delete(cluster, group, topic):
    m = request_module(92, 0)
    return _ask(cluster, group, m.DeleteShareGroupOffsetsRequest(group_id=group, topics=(
        m.DeleteShareGroupOffsetsRequestTopic(topic_name=topic),)))


def test_alter_describe_and_delete_on_partitions_both_nodes_lead(cluster_factory):
    cluster = cluster_factory(2)
    topic = cluster.topic_spanning(PARTITIONS, "sgo")
    create_topic(cluster.bootstrap, topic, PARTITIONS)
    produce_numbered(cluster.bootstrap, topic, PARTITIONS, PER_PARTITION)
    for coordinator in (1, 2):  # the group's coordinator on each node: the other leads some partitions
        group = cluster.group_on(coordinator, "sg")
        led_elsewhere = [p for p in range(PARTITIONS) if cluster.leader(topic, p) != coordinator]
        assert led_elsewhere and len(led_elsewhere) < PARTITIONS

        r = alter(cluster, group, topic, {p: START for p in range(PARTITIONS)})
        assert r.error_code == ErrorCode.none, r
        assert [(p.partition_index, p.error_code) for p in r.responses[0].partitions] == \
            [(p, ErrorCode.none) for p in range(PARTITIONS)], r
        want = {(topic, p): (START, PER_PARTITION - START, ErrorCode.none) for p in range(PARTITIONS)}
        assert describe(cluster, group, topic, range(PARTITIONS)) == want
        assert describe(cluster, group, None) == want  # every topic the group has state of, on either node

        # A share consumer reads every partition from the new start offset, whichever node leads it.
        c = ck.ShareConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
        c.subscribe([topic])
        got: dict[int, list[int]] = {}
        deadline = time.monotonic() + 30
        try:
            while sum(map(len, got.values())) < PARTITIONS * (PER_PARTITION - START) and time.monotonic() < deadline:
                for msg in c.poll(1.0) or []:
                    assert msg.error() is None, msg.error()
                    got.setdefault(msg.partition(), []).append(msg.offset())
        finally:
            c.close()
        assert {p: sorted(os) for p, os in got.items()} == \
            {p: list(range(START, PER_PARTITION)) for p in range(PARTITIONS)}

        def deleted():  # the group's member has left once its session timed out or it closed
            r = delete(cluster, group, topic)
            assert r.error_code in (ErrorCode.none, ErrorCode.non_empty_group), r
            return r if r.error_code == ErrorCode.none else None
        deadline = time.monotonic() + 60
        while (r := deleted()) is None:
            assert time.monotonic() < deadline, "the group stayed non-empty"
            time.sleep(0.5)
        assert [(t.topic_name, t.error_code) for t in r.responses] == [(topic, ErrorCode.none)], r
        assert describe(cluster, group, topic, range(PARTITIONS)) == \
            {(topic, p): (-1, -1, ErrorCode.none) for p in range(PARTITIONS)}
        assert describe(cluster, group, None) == {}
        r = delete(cluster, group, topic)  # no share partition left anywhere: Kafka's answer lists no topic
        assert (r.error_code, r.responses) == (ErrorCode.none, ()), r


def test_a_group_nobody_joined_is_altered_on_every_leader(cluster_factory):
    """Kafka 4.4 alters a group id nobody joined (its state is made); on a cluster each partition's
    leader keeps it, and the coordinator's describe and delete see it there."""
    cluster = cluster_factory(2)
    topic = cluster.topic_spanning(2, "sgo")
    create_topic(cluster.bootstrap, topic, 2)
    produce_numbered(cluster.bootstrap, topic, 2, 3)
    group = unique("nobody")
    assert alter(cluster, group, topic, {0: 1, 1: 2}).error_code == ErrorCode.none
    assert describe(cluster, group, None) == {(topic, 0): (1, 2, ErrorCode.none), (topic, 1): (2, 1, ErrorCode.none)}
    r = delete(cluster, group, topic)
    assert (r.error_code, [(t.topic_name, t.error_code) for t in r.responses]) == \
        (ErrorCode.none, [(topic, ErrorCode.none)]), r
    assert describe(cluster, group, None) == {}
