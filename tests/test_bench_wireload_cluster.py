"""The benchmark's protocol-level producer (bench/wireload.py) against ``oncelog serve --nodes 2``.

It routes as a Kafka client does: a connection per leader node, each node's partitions in its
own Produce requests, its own window of requests in flight; a transactional producer's
InitProducerId, AddPartitionsToTxn and EndTxn go to the coordinator FindCoordinator names, the
EndTxn only once every node has answered. Checked as in tests/test_bench_wireload.py: every
acknowledged record is in the log (read back with confluent-kafka, which routes by itself), an
idempotent run leaves the last sequence it sent in every leader's producer state, a
transactional run commits everything it sent."""

from __future__ import annotations

import asyncio

import pytest

from bench.wireload import WireMode, WireProducer, wait_until_led
from oncelog.client.wire import request_module
from oncelog.process import BrokerProcess
from tests.helpers import consume_all, create_topic

PARTITIONS = 4
BATCH = 20
pytestmark = pytest.mark.e2e


@pytest.fixture
def cluster(tmp_path):
    b = BrokerProcess(str(tmp_path / "data"), fsync="never", extra_args=["--nodes", "2"]).start()
    try:
        yield b
    finally:
        b.stop()


def _run(bootstrap: str, topic: str, mode: WireMode, seconds: float = 0.5) -> WireProducer:
    assert sorted(set(wait_until_led(bootstrap, topic, PARTITIONS).values())) == [1, 2]

    async def main() -> WireProducer:
        producer = await WireProducer.create(bootstrap, topic, mode, batch_records=BATCH, value=b"v" * 100,
                                             client_id="test-wireload", transactional_id=f"{topic}-txn")
        try:
            await producer.run(seconds)
        finally:
            await producer.close()
        return producer

    return asyncio.run(main())


def _leaders(producer: WireProducer) -> dict[int, list[int]]:
    return {node: parts for node, (_, parts) in producer.leaders.items()}


def _active_producers(bootstrap: str, topic: str) -> dict[int, list]:
    """DescribeProducers of every partition, each asked of its leader (found by Metadata)."""
    from confluent_kafka.admin import AdminClient

    from oncelog.client.wire import RawClient

    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    m = request_module(61, 0)
    out = {}
    for p, pm in md.topics[topic].partitions.items():
        b = md.brokers[pm.leader]
        client = RawClient(f"{b.host}:{b.port}")
        try:
            resp = client.request(m.DescribeProducersRequest(topics=(m.TopicRequest(name=topic, partition_indexes=(p,)),)))
        finally:
            client.close()
        (part,) = resp.topics[0].partitions
        assert part.error_code == 0, (p, part.error_code)
        out[p] = list(part.active_producers)
    return out


def _check_landed(bootstrap: str, topic: str, p: WireProducer, isolation: str = "read_uncommitted") -> None:
    assert p.nodes == 2 and sorted(_leaders(p)) == [1, 2]  # both nodes led something, both got requests
    assert sum(p.acked_by_partition.values()) == p.acked > 0
    got = consume_all(bootstrap, topic, PARTITIONS, p.acked, isolation=isolation, timeout=60)
    assert {part: len(rows) for part, rows in got.items()} == p.acked_by_partition


@pytest.mark.parametrize("mode", [WireMode(acks=1, max_in_flight=5), WireMode(acks=-1, max_in_flight=1)],
                         ids=["at-most-once", "at-least-once"])
def test_plain_modes_route_each_partition_to_its_leader(cluster, mode):
    create_topic(cluster.bootstrap, "wlc-plain", PARTITIONS)
    p = _run(cluster.bootstrap, "wlc-plain", mode)
    assert p.max_in_flight_seen == mode.max_in_flight  # the window is per connection
    _check_landed(cluster.bootstrap, "wlc-plain", p)


def test_idempotent_mode_keeps_sequences_on_every_leader(cluster):
    create_topic(cluster.bootstrap, "wlc-idem", PARTITIONS)
    p = _run(cluster.bootstrap, "wlc-idem", WireMode(acks=-1, max_in_flight=5, idempotent=True))
    assert p.producer_id >= 0 and p.max_in_flight_seen == 5
    _check_landed(cluster.bootstrap, "wlc-idem", p)
    for part, producers in _active_producers(cluster.bootstrap, "wlc-idem").items():
        assert [(x.producer_id, x.last_sequence) for x in producers] == \
            [(p.producer_id, p.acked_by_partition[part] - 1)], part


def test_transactional_mode_commits_on_every_node(cluster):
    create_topic(cluster.bootstrap, "wlc-txn", PARTITIONS)
    p = _run(cluster.bootstrap, "wlc-txn", WireMode(acks=-1, max_in_flight=5, idempotent=True, txn_commit_ms=100), 1.0)
    assert p.transactions >= 2 and len(p.endtxn_latencies) == p.transactions  # (a loaded machine: >= 2, not 10)
    _check_landed(cluster.bootstrap, "wlc-txn", p, isolation="read_committed")
    for producers in _active_producers(cluster.bootstrap, "wlc-txn").values():
        assert all(x.current_txn_start_offset == -1 for x in producers)


def test_the_fetch_loop_reads_each_partition_from_its_leader(cluster):
    """The wire modes' read-back (WireFetcher) over a cluster: a loop per leader node, every
    acknowledged record counted once, per partition."""
    from bench.wireload import RoutedFetcher, WireFetcher

    create_topic(cluster.bootstrap, "wlc-read", PARTITIONS)
    p = _run(cluster.bootstrap, "wlc-read", WireMode(acks=-1, max_in_flight=5, idempotent=True, txn_commit_ms=100))

    async def main():
        f = await WireFetcher.create(cluster.bootstrap, "wlc-read", list(range(PARTITIONS)), "read_committed",
                                     client_id="test-fetch")
        try:
            await f.run(p.acked_by_partition, max_seconds=0, timeout=30)
        finally:
            await f.close()
        return f

    f = asyncio.run(main())
    assert isinstance(f, RoutedFetcher) and len(f.fetchers) == 2
    assert f.by_partition == p.acked_by_partition and f.records == p.acked
