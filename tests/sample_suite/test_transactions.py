"""The idempotent producer and transactions with confluent-kafka: read_committed sees commits only,
aborts are invisible, consume-transform-produce commits its input offsets with its output."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from .helpers import TIMEOUT, consume, consume_quiet

pytestmark = [pytest.mark.e2e, pytest.mark.any_kafka]


def reader(broker, topic: str, isolation: str, partitions=(0,)) -> Consumer:
    c = Consumer(broker.client_config(**{"group.id": "unused", "enable.auto.commit": False,
                                        "isolation.level": isolation, "fetch.wait.max.ms": 50}))
    c.assign([TopicPartition(topic, p, 0) for p in partitions])
    return c


def transactional(broker, txn_id: str) -> Producer:
    p = Producer(broker.client_config(**{"transactional.id": txn_id, "linger.ms": 1,
                                        "transaction.timeout.ms": 60000}))
    p.init_transactions(TIMEOUT)
    return p


def test_idempotent_producer_writes_each_record_once(oncelog_broker):
    topic = oncelog_broker.topic(partitions=2)
    p = Producer(oncelog_broker.client_config(**{"enable.idempotence": True, "linger.ms": 1,
                                                 "max.in.flight.requests.per.connection": 5}))
    for i in range(200):
        p.produce(topic, value=str(i).encode(), partition=i % 2)
    assert p.flush(TIMEOUT) == 0
    c = reader(oncelog_broker, topic, "read_uncommitted", partitions=(0, 1))
    msgs = consume(c, 200)
    extra = consume_quiet(c, 0.3)
    c.close()
    assert not extra
    for part in (0, 1):
        assert [int(m.value()) for m in msgs if m.partition() == part] == list(range(part, 200, 2))


def test_idempotent_producer_keeps_order_per_key(oncelog_broker):
    topic = oncelog_broker.topic(partitions=3)
    p = Producer(oncelog_broker.client_config(**{"enable.idempotence": True, "linger.ms": 2}))
    for i in range(90):
        p.produce(topic, key=f"k{i % 3}".encode(), value=str(i).encode())
    assert p.flush(TIMEOUT) == 0
    c = reader(oncelog_broker, topic, "read_uncommitted", partitions=(0, 1, 2))
    msgs = consume(c, 90)
    c.close()
    for k in range(3):
        seen = [int(m.value()) for m in msgs if m.key() == f"k{k}".encode()]
        assert seen == list(range(k, 90, 3))


def test_committed_transaction_is_visible_to_read_committed(oncelog_broker):
    topic = oncelog_broker.topic()
    p = transactional(oncelog_broker, oncelog_broker.unique("txn"))
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, value=f"c{i}".encode())
    p.commit_transaction(TIMEOUT)
    c = reader(oncelog_broker, topic, "read_committed")
    msgs = consume(c, 5)
    c.close()
    assert [m.value() for m in msgs] == [f"c{i}".encode() for i in range(5)]


def test_aborted_transaction_is_invisible_to_read_committed(oncelog_broker):
    topic = oncelog_broker.topic()
    p = transactional(oncelog_broker, oncelog_broker.unique("txn"))
    p.begin_transaction()
    p.produce(topic, value=b"aborted-1")
    p.produce(topic, value=b"aborted-2")
    p.flush(TIMEOUT)
    p.abort_transaction(TIMEOUT)
    p.begin_transaction()
    p.produce(topic, value=b"committed")
    p.commit_transaction(TIMEOUT)

    committed = reader(oncelog_broker, topic, "read_committed")
    [m] = consume(committed, 1)
    assert m.value() == b"committed"
    assert not consume_quiet(committed, 0.3)
    committed.close()

    uncommitted = reader(oncelog_broker, topic, "read_uncommitted")
    msgs = consume(uncommitted, 3)
    uncommitted.close()
    assert [m.value() for m in msgs] == [b"aborted-1", b"aborted-2", b"committed"]


def test_open_transaction_holds_back_read_committed(oncelog_broker):
    topic = oncelog_broker.topic()
    p = transactional(oncelog_broker, oncelog_broker.unique("txn"))
    p.begin_transaction()
    p.produce(topic, value=b"pending")
    p.flush(TIMEOUT)
    c = reader(oncelog_broker, topic, "read_committed")
    assert not consume_quiet(c, 0.3)  # not decided yet
    p.commit_transaction(TIMEOUT)
    [m] = consume(c, 1)
    c.close()
    assert m.value() == b"pending"


def test_transaction_across_partitions_and_topics(oncelog_broker):
    orders, audit = oncelog_broker.topic(partitions=2), oncelog_broker.topic()
    p = transactional(oncelog_broker, oncelog_broker.unique("txn"))
    p.begin_transaction()
    p.produce(orders, value=b"o0", partition=0)
    p.produce(orders, value=b"o1", partition=1)
    p.produce(audit, value=b"a")
    p.commit_transaction(TIMEOUT)
    c1 = reader(oncelog_broker, orders, "read_committed", partitions=(0, 1))
    c2 = reader(oncelog_broker, audit, "read_committed")
    assert sorted(m.value() for m in consume(c1, 2)) == [b"o0", b"o1"]
    assert [m.value() for m in consume(c2, 1)] == [b"a"]
    c1.close()
    c2.close()


def test_a_new_producer_fences_the_old_one(oncelog_broker):
    topic, txn_id = oncelog_broker.topic(), oncelog_broker.unique("txn")
    old = transactional(oncelog_broker, txn_id)
    old.begin_transaction()
    old.produce(topic, value=b"zombie")
    old.flush(TIMEOUT)
    new = transactional(oncelog_broker, txn_id)  # aborts the old one's open transaction
    new.begin_transaction()
    new.produce(topic, value=b"fresh")
    new.commit_transaction(TIMEOUT)
    with pytest.raises(KafkaException) as fenced:
        old.commit_transaction(TIMEOUT)
    assert fenced.value.args[0].fatal() or "fenced" in str(fenced.value).lower()
    c = reader(oncelog_broker, topic, "read_committed")
    [m] = consume(c, 1)
    assert not consume_quiet(c, 0.3)
    c.close()
    assert m.value() == b"fresh"


def test_consume_transform_produce(oncelog_broker):
    """Read a batch in a group, write its transform and commit the input offsets in one
    transaction; an aborted round leaves neither output nor offsets behind."""
    src, dst, group = oncelog_broker.topic(), oncelog_broker.topic(), oncelog_broker.unique("g")
    p = Producer(oncelog_broker.client_config())
    for i in range(10):
        p.produce(src, value=f"in-{i}".encode())
    assert p.flush(TIMEOUT) == 0

    def worker() -> Consumer:
        c = Consumer(oncelog_broker.client_config(**{
            "group.id": group, "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "isolation.level": "read_committed", "fetch.wait.max.ms": 50}))
        c.subscribe([src])
        return c

    txn = transactional(oncelog_broker, oncelog_broker.unique("txn"))
    c = worker()
    batch = consume(c, 4)
    txn.begin_transaction()
    for m in batch:
        txn.produce(dst, value=m.value().upper())
    txn.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), TIMEOUT)
    txn.commit_transaction(TIMEOUT)

    more = consume(c, 3)  # read but the transaction aborts: these go round again
    txn.begin_transaction()
    for m in more:
        txn.produce(dst, value=b"never")
    txn.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), TIMEOUT)
    txn.abort_transaction(TIMEOUT)
    c.close()

    c = worker()  # a restarted worker resumes from the committed input offset
    rest = consume(c, 6)
    txn.begin_transaction()
    for m in rest:
        txn.produce(dst, value=m.value().upper())
    txn.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), TIMEOUT)
    txn.commit_transaction(TIMEOUT)
    [tp] = c.committed([TopicPartition(src, 0)], timeout=TIMEOUT)
    c.close()
    assert tp.offset == 10

    out = reader(oncelog_broker, dst, "read_committed")
    values = [m.value() for m in consume(out, 10)]
    assert not consume_quiet(out, 0.3)
    out.close()
    assert values == [f"IN-{i}".encode() for i in range(10)]
