"""The same broker through kafka-python and aiokafka: round trips, groups, transactions."""

from __future__ import annotations

import asyncio

import pytest

from .helpers import TIMEOUT

pytestmark = [pytest.mark.e2e, pytest.mark.any_kafka]


def poll_all(consumer, n: int, timeout: float = TIMEOUT) -> list:
    """``n`` records from a kafka-python consumer."""
    import time

    got = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            got += records
    assert len(got) == n, f"read {len(got)} of {n} records"
    return got


def joined_once(consumer, topic: str, timeout: float = TIMEOUT):
    """A subscribed kafka-python consumer, returned once its group coordinator has ``topic``'s
    partitions in its metadata snapshot. kafka-python 3.0's leader assigns from that snapshot;
    empty, the next metadata update starts a second round, and one that outlives its ``poll``
    leaves the consumer rebalancing for good (every commit refused with
    RebalanceInProgressError). A client bug, the same on any broker: this waits it out."""
    import time

    deadline = time.monotonic() + timeout
    while not consumer._coordinator._metadata_snapshot.get(topic):
        assert time.monotonic() < deadline, f"kafka-python never had the partitions of {topic}"
        time.sleep(0.05)
    return consumer


def test_kafka_python_round_trip(oncelog_broker):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = oncelog_broker.topic()
    p = KafkaProducer(bootstrap_servers=oncelog_broker.bootstrap_servers, linger_ms=1)
    for i in range(20):
        p.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), headers=[("h", b"1")])
    p.flush(TIMEOUT)
    p.close()
    c = KafkaConsumer(bootstrap_servers=oncelog_broker.bootstrap_servers, enable_auto_commit=False,
                      fetch_max_wait_ms=50)
    c.assign([TopicPartition(topic, 0)])
    c.seek_to_beginning()
    records = poll_all(c, 20)
    c.close()
    assert [(r.key, r.value) for r in records] == [(f"k{i}".encode(), f"v{i}".encode()) for i in range(20)]
    assert list(records[0].headers) == [("h", b"1")]


def test_kafka_python_group_commit(oncelog_broker):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic, group = oncelog_broker.topic(partitions=2), oncelog_broker.unique("g")
    p = KafkaProducer(bootstrap_servers=oncelog_broker.bootstrap_servers, compression_type="gzip")
    for i in range(10):
        p.send(topic, value=str(i).encode(), partition=i % 2)
    p.flush(TIMEOUT)
    p.close()
    c = joined_once(KafkaConsumer(topic, bootstrap_servers=oncelog_broker.bootstrap_servers, group_id=group,
                                  auto_offset_reset="earliest", enable_auto_commit=False, fetch_max_wait_ms=50),
                    topic)
    records = poll_all(c, 10)
    c.commit()
    committed = {part: c.committed(TopicPartition(topic, part)) for part in (0, 1)}
    c.close()
    assert sorted(int(r.value) for r in records) == list(range(10))
    assert committed == {0: 5, 1: 5}


def test_kafka_python_admin(oncelog_broker):
    from kafka.admin import KafkaAdminClient, NewTopic

    name = oncelog_broker.unique("t")
    a = KafkaAdminClient(bootstrap_servers=oncelog_broker.bootstrap_servers)
    a.create_topics([NewTopic(name, num_partitions=2, replication_factor=1)])
    assert name in a.list_topics()
    a.delete_topics([name])
    a.close()


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, TIMEOUT * 2))


def test_aiokafka_round_trip(oncelog_broker):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    topic, group = oncelog_broker.topic(), oncelog_broker.unique("g")

    async def main():
        p = AIOKafkaProducer(bootstrap_servers=oncelog_broker.bootstrap_servers, compression_type="lz4")
        await p.start()
        try:
            for i in range(20):
                await p.send(topic, key=b"k", value=f"v{i}".encode())
            await p.flush()
        finally:
            await p.stop()
        c = AIOKafkaConsumer(topic, bootstrap_servers=oncelog_broker.bootstrap_servers, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False, fetch_max_wait_ms=50)
        await c.start()
        try:
            got = []
            while len(got) < 20:
                batches = await c.getmany(timeout_ms=200)
                for records in batches.values():
                    got += records
            await c.commit()
            return got
        finally:
            await c.stop()

    got = run(main())
    assert [r.value for r in got] == [f"v{i}".encode() for i in range(20)]


def test_aiokafka_transaction(oncelog_broker):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    topic, txn_id = oncelog_broker.topic(), oncelog_broker.unique("txn")

    async def main():
        p = AIOKafkaProducer(bootstrap_servers=oncelog_broker.bootstrap_servers, transactional_id=txn_id)
        await p.start()
        try:
            async with p.transaction():
                await p.send(topic, value=b"committed")
            await p.begin_transaction()
            await p.send(topic, value=b"aborted")
            await p.abort_transaction()
            async with p.transaction():
                await p.send(topic, value=b"last")
        finally:
            await p.stop()
        c = AIOKafkaConsumer(topic, bootstrap_servers=oncelog_broker.bootstrap_servers,
                             isolation_level="read_committed", auto_offset_reset="earliest", fetch_max_wait_ms=50)
        await c.start()
        try:
            got = []
            while len(got) < 2:
                for records in (await c.getmany(timeout_ms=200)).values():
                    got += records
            return got
        finally:
            await c.stop()

    assert [r.value for r in run(main())] == [b"committed", b"last"]
