"""Transactions across the nodes of a 2-node cluster, with confluent-kafka: the transaction
coordinator on node 1 or on node 2 (transactional ids picked by Kafka's placement), partitions
led by both nodes, committed and aborted; and a consume-transform-produce loop whose group
coordinator and transaction coordinator are on different nodes. An independent read_committed
reader checks every outcome.
"""

from __future__ import annotations

import collections
import time

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient

from ..helpers import create_topic, read_committed_to_end, unique

pytestmark = pytest.mark.e2e


def find_coordinator(bootstrap: str, key: str, key_type: int) -> int:
    """The node FindCoordinator (v4) names for a group (0) or transactional id (1)."""
    from oncelog.client.wire import RawClient, request_module

    m = request_module(10, 4)
    c = RawClient(bootstrap)
    try:
        r = c.request(m.FindCoordinatorRequest(key_type=key_type, coordinator_keys=(key,)))
    finally:
        c.close()
    assert r.coordinators[0].error_code == 0, r
    return r.coordinators[0].node_id


def txn_producer(bootstrap: str, txn_id: str, **extra) -> ck.Producer:
    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5,
                     "transaction.timeout.ms": 60000, **extra})
    p.init_transactions(30)
    return p


def read_committed(bootstrap: str, topic: str, partitions: int) -> list[bytes]:
    values, at_end = read_committed_to_end(bootstrap, topic, partitions)
    assert all(at_end.values()), at_end  # no transaction left open: the last stable offset is the end
    return values


def read_uncommitted_count(bootstrap: str, topic: str, partitions: int, expected: int) -> int:
    from ..helpers import consume_all

    got = consume_all(bootstrap, topic, partitions, expected, timeout=30)
    return sum(len(v) for v in got.values())


@pytest.mark.parametrize("coordinator", [1, 2])
def test_transactions_spanning_both_nodes_commit_and_abort(cluster2, coordinator):
    txn_id = cluster2.txn_id_on(coordinator, "span")
    assert find_coordinator(cluster2.address(1), txn_id, 1) == coordinator
    assert find_coordinator(cluster2.address(2), txn_id, 1) == coordinator
    topic = cluster2.topic_spanning(4, "span")
    create_topic(cluster2.bootstrap, topic, 4)
    producer = txn_producer(cluster2.address(3 - coordinator), txn_id)  # bootstrap: the other node
    committed, aborted = [], []
    for t in range(12):
        producer.begin_transaction()
        values = [b"t%d-p%d-%d" % (t, p, i) for p in range(4) for i in range(5)]
        for i, v in enumerate(values):
            producer.produce(topic, value=v, partition=(i // 5))
        if t % 3 == 1:
            assert producer.flush(30) == 0  # written to the logs (abort_transaction purges what is unsent)
            producer.abort_transaction(30)
            aborted += values
        else:
            producer.commit_transaction(30)
            committed += values
    # a transaction left to its abort by a new producer with the same id (fencing the old one)
    producer.begin_transaction()
    for p in range(4):
        producer.produce(topic, value=b"fenced-%d" % p, partition=p)
    producer.flush(30)
    aborted += [b"fenced-%d" % p for p in range(4)]
    successor = txn_producer(cluster2.address(coordinator), txn_id)
    successor.begin_transaction()
    last = [b"successor-%d" % p for p in range(4)]
    for p in range(4):
        successor.produce(topic, value=last[p], partition=p)
    successor.commit_transaction(30)
    committed += last

    values = read_committed(cluster2.address(coordinator), topic, 4)
    assert collections.Counter(values) == collections.Counter(committed)
    assert not set(values) & set(aborted)
    # the aborted records were written (and are skipped by read_committed, not missing)
    assert read_uncommitted_count(cluster2.bootstrap, topic, 4, len(committed) + len(aborted)) \
        == len(committed) + len(aborted)


@pytest.mark.parametrize("group_node", [1, 2])
def test_consume_transform_produce_with_coordinators_on_different_nodes(cluster2, group_node):
    txn_node = 3 - group_node
    group = cluster2.group_on(group_node, "ctp")
    txn_id = cluster2.txn_id_on(txn_node, "ctp")
    assert find_coordinator(cluster2.bootstrap, group, 0) == group_node
    assert find_coordinator(cluster2.bootstrap, txn_id, 1) == txn_node
    source, sink = cluster2.topic_spanning(4, "in"), cluster2.topic_spanning(4, "out")
    create_topic(cluster2.bootstrap, source, 4)
    create_topic(cluster2.bootstrap, sink, 4)
    n = 2000
    seed = ck.Producer({"bootstrap.servers": cluster2.bootstrap, "enable.idempotence": True, "acks": "all"})
    for i in range(n):
        seed.produce(source, value=b"%d" % i, partition=i % 4)
    assert seed.flush(30) == 0

    consumer = ck.Consumer({"bootstrap.servers": cluster2.address(txn_node), "group.id": group,
                            "enable.auto.commit": False, "auto.offset.reset": "earliest",
                            "isolation.level": "read_committed"})
    consumer.subscribe([source])
    producer = txn_producer(cluster2.address(group_node), txn_id)
    done, aborts, transactions, idle_since = 0, 0, 0, time.monotonic()
    try:
        while done < n and time.monotonic() - idle_since < 30:
            batch = [m for m in consumer.consume(200, 0.5) if m.error() is None]
            if not batch:
                continue
            idle_since = time.monotonic()
            producer.begin_transaction()
            for m in batch:
                producer.produce(sink, value=b"out-" + m.value(), partition=m.partition())
            transactions += 1
            if transactions % 4 == 2:  # abort, and read the same input again from the committed offsets
                assert producer.flush(30) == 0
                producer.abort_transaction(30)
                aborts += 1
                committed = consumer.committed(consumer.assignment(), timeout=10)
                for tp in committed:
                    consumer.seek(ck.TopicPartition(tp.topic, tp.partition,
                                                    tp.offset if tp.offset >= 0 else ck.OFFSET_BEGINNING))
                continue
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                 consumer.consumer_group_metadata(), 30)
            producer.commit_transaction(30)
            done += len(batch)
    finally:
        consumer.close()
    assert done == n, f"transformed {done} of {n}"
    assert aborts > 0

    values = read_committed(cluster2.address(group_node), sink, 4)
    counts = collections.Counter(values)
    assert sorted(counts) == sorted(b"out-%d" % i for i in range(n))
    assert [v for v, c in counts.items() if c != 1] == []

    admin = AdminClient({"bootstrap.servers": cluster2.address(txn_node)})
    from confluent_kafka import ConsumerGroupTopicPartitions

    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    offsets = {tp.partition: tp.offset for tp in result.topic_partitions if tp.topic == source}
    assert offsets == {p: n // 4 for p in range(4)}
