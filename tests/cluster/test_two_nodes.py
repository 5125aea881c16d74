"""A 2-node cluster (``serve --nodes 2``), one for the module, through real clients over TCP:
Metadata lists both nodes with node 1 the controller; partitions are led as Placement says and
every record produced comes back, in order; metadata changes sent to node 2 are forwarded to
the controller and seen by both nodes; a request for a partition sent to the node that does
not lead it is answered NOT_LEADER_OR_FOLLOWER; garbage bytes on one node hurt neither node.
"""

from __future__ import annotations

import datetime
import socket
import struct
import time

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions,
                                   NewTopic)
from kio.schema.errors import ErrorCode

from oncelog.client.wire import RawClient, request_module
from oncelog.protocol import records as rb

from ..helpers import create_topic, unique

pytestmark = pytest.mark.e2e

NOT_LEADER = ErrorCode.not_leader_or_follower


def raw_metadata(address: str, topics: list[str] | None = None):
    m = request_module(3, 12)
    c = RawClient(address)
    try:
        return c.request(m.MetadataRequest(
            topics=None if topics is None else tuple(m.MetadataRequestTopic(topic_id=None, name=t) for t in topics),
            allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    finally:
        c.close()


def topic_view(address: str, topic: str) -> tuple[int, dict[int, int]] | None:
    """(error code, {partition: leader}) of ``topic`` as node at ``address`` answers Metadata;
    None if it does not know the topic."""
    t = raw_metadata(address, [topic]).topics[0]
    if t.error_code == ErrorCode.unknown_topic_or_partition:
        return None
    return t.error_code, {p.partition_index: p.leader_id for p in t.partitions}


def wait_until(what: str, check, timeout: float = 1.0):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return time.monotonic() - (deadline - timeout)
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(0.01)


def raw_config(address: str, topic: str, key: str) -> str | None:
    m = request_module(32, 4)
    c = RawClient(address)
    try:
        r = c.request(m.DescribeConfigsRequest(resources=(m.DescribeConfigsResource(
            resource_type=2, resource_name=topic, configuration_keys=(key,)),),
            include_synonyms=False, include_documentation=False))
    finally:
        c.close()
    res = r.results[0]
    assert res.error_code == ErrorCode.none, res
    values = {c.name: c.value for c in res.configs}
    return values.get(key)


def latest_offsets(cluster, topic: str, partitions: int) -> dict[int, int]:
    """Each partition's end offset, asked of its leader (Placement)."""
    m = request_module(2, 7)
    out = {}
    for p in range(partitions):
        c = RawClient(cluster.address(cluster.leader(topic, p)))
        try:
            r = c.request(list_offsets(m, topic, p))
        finally:
            c.close()
        part = r.topics[0].partitions[0]
        assert part.error_code == ErrorCode.none, (topic, p, part)
        out[p] = part.offset
    return out


def list_offsets(m, topic: str, partition: int):
    return m.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(m.ListOffsetsTopic(
        name=topic, partitions=(m.ListOffsetsPartition(partition_index=partition, current_leader_epoch=-1,
                                                        timestamp=-1),)),))


def produce_numbered(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    p = ck.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5})
    errors = []
    for i in range(per_partition):
        for part in range(partitions):
            p.produce(topic, key=b"k%d" % part, value=b"%d-%d" % (part, i), partition=part,
                      on_delivery=lambda err, _m: err and errors.append(err))
        p.poll(0)
    assert p.flush(30) == 0
    assert errors == []


def read_back(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 30.0) -> dict[int, list]:
    """An independent read_committed reader: {partition: [values in offset order]}."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": unique("reader"), "enable.auto.commit": False,
                     "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)])
    out: dict[int, list] = {p: [] for p in range(partitions)}
    got, deadline = 0, time.monotonic() + timeout
    try:
        while got < expected and time.monotonic() < deadline:
            for msg in c.consume(1000, 0.3):
                assert msg.error() is None, msg.error()
                out[msg.partition()].append((msg.offset(), msg.value()))
                got += 1
        time.sleep(0.3)  # nothing more than expected
        for msg in c.consume(1000, 0.5):
            assert msg.error() is None, msg.error()
            out[msg.partition()].append((msg.offset(), msg.value()))
    finally:
        c.close()
    return out


# ---------------------------------------------------------------------------- 1. metadata, produce


def test_metadata_lists_both_nodes_and_node_1_is_the_controller(cluster2):
    addresses = {k: cluster2.address(k) for k in (1, 2)}
    assert addresses[1] == cluster2.bootstrap
    for via in (1, 2):
        md = raw_metadata(addresses[via])
        assert {b.node_id: f"{b.host}:{b.port}" for b in md.brokers} == addresses, via
        assert md.controller_id == 1, via
        admin = AdminClient({"bootstrap.servers": addresses[via]})
        cmd = admin.list_topics(timeout=10)
        assert {k: f"{b.host}:{b.port}" for k, b in cmd.brokers.items()} == addresses
        assert cmd.controller_id == 1


def test_six_partitions_led_as_placement_says_and_everything_comes_back_in_order(cluster2):
    topic = cluster2.topic_spanning(6, "six")
    create_topic(cluster2.bootstrap, topic, 6)
    expected_leaders = {p: cluster2.leader(topic, p) for p in range(6)}
    assert set(expected_leaders.values()) == {1, 2}
    for via in (1, 2):
        wait_until(f"node {via} knows {topic}", lambda: topic_view(cluster2.address(via), topic) is not None, 2.0)
        assert topic_view(cluster2.address(via), topic) == (ErrorCode.none, expected_leaders)
    per_partition = 500
    produce_numbered(cluster2.bootstrap, topic, 6, per_partition)
    assert latest_offsets(cluster2, topic, 6) == {p: per_partition for p in range(6)}
    got = read_back(cluster2.address(2), topic, 6, 6 * per_partition)
    for p in range(6):
        assert [v for _o, v in got[p]] == [b"%d-%d" % (p, i) for i in range(per_partition)], p
        assert [o for o, _v in got[p]] == list(range(per_partition)), p


def test_kafka_python_and_aiokafka_route_to_both_nodes(cluster2):
    kafka = pytest.importorskip("kafka")
    topic = cluster2.topic_spanning(4, "kp")
    create_topic(cluster2.bootstrap, topic, 4)
    producer = kafka.KafkaProducer(bootstrap_servers=cluster2.address(2), acks="all", enable_idempotence=True)
    futures = [producer.send(topic, value=b"kp-%d-%d" % (p, i), partition=p) for i in range(50) for p in range(4)]
    for f in futures:
        f.get(timeout=30)
    producer.close()

    aiokafka = pytest.importorskip("aiokafka")
    import asyncio

    async def aio_produce():
        prod = aiokafka.AIOKafkaProducer(bootstrap_servers=cluster2.address(1), acks="all", enable_idempotence=True)
        await prod.start()
        try:
            for i in range(50):
                for p in range(4):
                    await prod.send(topic, value=b"aio-%d-%d" % (p, i), partition=p)
            await prod.flush()
        finally:
            await prod.stop()

    asyncio.run(aio_produce())
    got = read_back(cluster2.bootstrap, topic, 4, 400)
    for p in range(4):
        values = [v for _o, v in got[p]]
        assert values == [b"kp-%d-%d" % (p, i) for i in range(50)] + [b"aio-%d-%d" % (p, i) for i in range(50)], p


# ---------------------------------------------------------------------------- 2. metadata changes on node 2


def test_metadata_changes_sent_to_node_2_are_forwarded_and_seen_by_both_nodes(cluster2):
    node1, node2 = cluster2.address(1), cluster2.address(2)
    admin = AdminClient({"bootstrap.servers": node2})  # node 2 alone: it must forward to node 1
    topic = cluster2.topic_spanning(2, "fwd")

    admin.create_topics([NewTopic(topic, 2, 1, config={"retention.ms": "3600000"})])[topic].result(30)
    for via in (node1, node2):
        wait_until(f"{via} sees the created {topic}", lambda: (topic_view(via, topic) or (0, {}))[1].keys() == {0, 1})
    assert raw_config(node1, topic, "retention.ms") == "3600000"

    admin.create_partitions([NewPartitions(topic, 5)])[topic].result(30)
    leaders = {p: cluster2.leader(topic, p) for p in range(5)}
    for via in (node1, node2):
        wait_until(f"{via} sees 5 partitions", lambda: topic_view(via, topic) == (ErrorCode.none, leaders))
    produce_numbered(node2, topic, 5, 20)
    assert latest_offsets(cluster2, topic, 5) == {p: 20 for p in range(5)}

    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("max.message.bytes", "65536", incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([resource]).values():
        f.result(30)
    for via in (node1, node2):
        wait_until(f"{via} sees retention.ms", lambda: raw_config(via, topic, "retention.ms") == "7200000")
        wait_until(f"{via} sees max.message.bytes", lambda: raw_config(via, topic, "max.message.bytes") == "65536")
    # the new limit is enforced by the leaders on both nodes
    p = ck.Producer({"bootstrap.servers": node1, "enable.idempotence": True, "acks": "all",
                     "message.max.bytes": 200000, "message.timeout.ms": 10000})
    results = []
    for part in range(5):
        p.produce(topic, value=b"x" * 100000, partition=part, on_delivery=lambda err, m: results.append((m.partition(), err)))
    p.flush(20)
    assert len(results) == 5 and all(err is not None and err.code() == ck.KafkaError.MSG_SIZE_TOO_LARGE
                                      for _p, err in results), results

    admin.delete_topics([topic])[topic].result(30)
    for via in (node1, node2):
        wait_until(f"{via} forgets {topic}", lambda: topic_view(via, topic) is None)

    admin.create_topics([NewTopic(topic, 5, 1)])[topic].result(30)
    for via in (node1, node2):
        wait_until(f"{via} sees {topic} again", lambda: topic_view(via, topic) == (ErrorCode.none, leaders))
    assert latest_offsets(cluster2, topic, 5) == {p: 0 for p in range(5)}
    assert raw_config(node2, topic, "retention.ms") != "7200000"
    assert read_back(node2, topic, 5, 0, timeout=1) == {p: [] for p in range(5)}
    produce_numbered(node2, topic, 5, 3)
    got = read_back(node1, topic, 5, 15)
    assert {p: [v for _o, v in got[p]] for p in range(5)} == {p: [b"%d-%d" % (p, i) for i in range(3)] for p in range(5)}


def test_delete_and_recreate_quickly_from_node_2_gives_an_empty_topic(cluster2):
    """Delete then re-create at once, several times, writing between: each incarnation starts empty
    on both nodes (a follower that applied the two changes out of order would keep old records)."""
    node2 = cluster2.address(2)
    admin = AdminClient({"bootstrap.servers": node2})
    topic = cluster2.topic_spanning(4, "again")
    leaders = {p: cluster2.leader(topic, p) for p in range(4)}
    for round_ in range(4):
        admin.create_topics([NewTopic(topic, 4, 1)])[topic].result(30)
        for via in (cluster2.address(1), node2):
            wait_until(f"{via} sees {topic}", lambda: topic_view(via, topic) == (ErrorCode.none, leaders), 2.0)
        assert latest_offsets(cluster2, topic, 4) == {p: 0 for p in range(4)}, round_
        produce_numbered(node2, topic, 4, 10 + round_)
        got = read_back(cluster2.bootstrap, topic, 4, 4 * (10 + round_))
        assert {p: len(v) for p, v in got.items()} == {p: 10 + round_ for p in range(4)}, round_
        admin.delete_topics([topic])[topic].result(30)
        for via in (cluster2.address(1), node2):
            wait_until(f"{via} forgets {topic}", lambda: topic_view(via, topic) is None, 2.0)


# ---------------------------------------------------------------------------- 5. the wrong node, hostile bytes


def test_produce_fetch_list_offsets_at_the_wrong_node_are_not_leader_or_follower(cluster2):
    topic = cluster2.topic_spanning(2, "wrong")
    create_topic(cluster2.bootstrap, topic, 2)
    for p in range(2):
        leader = cluster2.leader(topic, p)
        other = 3 - leader
        wait_until("leader knows the topic", lambda: topic_view(cluster2.address(leader), topic) is not None, 2.0)
        wait_until("other knows the topic", lambda: topic_view(cluster2.address(other), topic) is not None, 2.0)
        records = rb.build_batch([(b"k", b"v")], timestamp_ms=int(time.time() * 1000))
        pm, fm, lm = request_module(0, 9), request_module(1, 12), request_module(2, 7)
        produce = pm.ProduceRequest(transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=5),
                                    topic_data=(pm.TopicProduceData(name=topic, partition_data=(
                                        pm.PartitionProduceData(index=p, records=records),)),))
        fetch = fm.FetchRequest(replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=1 << 20,
                                isolation_level=1, session_id=0, session_epoch=-1,
                                topics=(fm.FetchTopic(topic=topic, partitions=(fm.FetchPartition(
                                    partition=p, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                                    log_start_offset=-1, partition_max_bytes=1 << 20),)),),
                                forgotten_topics_data=(), rack_id="")
        wrong = RawClient(cluster2.address(other))
        right = RawClient(cluster2.address(leader))
        try:
            r = wrong.request(produce)
            assert r.responses[0].partition_responses[0].error_code == NOT_LEADER, r
            r = wrong.request(fetch)
            assert r.responses[0].partitions[0].error_code == NOT_LEADER, r
            r = wrong.request(list_offsets(lm, topic, p))
            assert r.topics[0].partitions[0].error_code == NOT_LEADER, r
            # the leader takes the same requests
            r = right.request(produce)
            assert r.responses[0].partition_responses[0].error_code == ErrorCode.none, r
            r = right.request(fetch)
            assert r.responses[0].partitions[0].error_code == ErrorCode.none
            assert r.responses[0].partitions[0].high_watermark == 1
            r = right.request(list_offsets(lm, topic, p))
            assert (r.topics[0].partitions[0].error_code, r.topics[0].partitions[0].offset) == (ErrorCode.none, 1)
        finally:
            wrong.close()
            right.close()
    # nothing was written by the wrong node
    assert latest_offsets(cluster2, topic, 2) == {0: 1, 1: 1}


def test_garbage_on_one_node_hurts_neither_node(cluster2):
    topic = cluster2.topic_spanning(2, "garbage")
    create_topic(cluster2.bootstrap, topic, 2)
    pids = {k: cluster2.pid(k) for k in (1, 2)}
    for victim in (2, 1):
        bystander = RawClient(cluster2.address(3 - victim))
        for payload in (b"\x00\x00\x00\x10" + b"\xff" * 16,  # a frame of garbage
                        struct.pack(">i", 0x7FFFFFF0) + b"xx",  # a huge declared size
                        bytes.fromhex("000000100003000c00000001ffff00ffffffff0f"),  # a huge array count
                        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"):
            s = socket.create_connection(tuple_of(cluster2.address(victim)), timeout=5)
            s.sendall(payload)
            s.settimeout(5)
            try:
                while s.recv(4096):
                    pass
            except (ConnectionResetError, socket.timeout):
                pass
            s.close()
        # and on its control socket (the link between nodes): the same garbage
        control = cluster2.registration(victim).get("control")
        if control:
            for payload in (b"\x00\x00\x00\x10" + b"\xff" * 16, struct.pack(">i", 0x7FFFFFF0) + b"xx",
                            bytes.fromhex("000000100003000c00000001ffff00ffffffff0f")):
                u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                u.settimeout(5)
                u.connect(control)
                u.sendall(payload)
                try:
                    while u.recv(4096):
                        pass
                except (ConnectionResetError, socket.timeout):
                    pass
                u.close()
        assert raw_metadata(cluster2.address(victim)).controller_id == 1
        m = request_module(3, 12)
        assert bystander.request(m.MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                   include_topic_authorized_operations=False)).controller_id == 1
        bystander.close()
    assert {k: cluster2.pid(k) for k in (1, 2)} == pids  # no node restarted
    produce_numbered(cluster2.bootstrap, topic, 2, 10)
    got = read_back(cluster2.address(2), topic, 2, 20)
    assert {p: len(v) for p, v in got.items()} == {0: 10, 1: 10}


def tuple_of(address: str) -> tuple[str, int]:
    host, port = address.rsplit(":", 1)
    return host, int(port)
