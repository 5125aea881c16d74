"""What a crash does to a user's data: a broker of this test's own (``oncelog_broker_fresh``),
SIGKILLed and restarted. Not ``any_kafka``: a shared cluster cannot be killed."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from .helpers import TIMEOUT, consume, consume_quiet

pytestmark = pytest.mark.e2e


def test_acknowledged_records_survive_a_kill_and_clients_go_on(oncelog_broker_fresh):
    broker = oncelog_broker_fresh
    topic = broker.topic()
    p = Producer(broker.client_config(**{"acks": "all", "linger.ms": 1, "message.timeout.ms": 30000}))
    for i in range(20):
        p.produce(topic, value=str(i).encode())
    assert p.flush(TIMEOUT) == 0
    c = Consumer(broker.client_config(**{"group.id": "unused", "fetch.wait.max.ms": 50}))
    c.assign([TopicPartition(topic, 0, 0)])
    consume(c, 5)
    broker.kill()
    broker.restart()  # same port, same data
    rest = consume(c, 15)  # the same consumer goes on where it was
    assert [int(m.value()) for m in rest] == list(range(5, 20))
    p.produce(topic, value=b"after")  # and the same producer
    assert p.flush(TIMEOUT) == 0
    [m] = consume(c, 1)
    assert (m.offset(), m.value()) == (20, b"after")
    assert not consume_quiet(c, 0.3)
    c.close()
    fresh = Consumer(broker.client_config(**{"group.id": "unused", "fetch.wait.max.ms": 50}))
    fresh.assign([TopicPartition(topic, 0, 0)])
    assert len(consume(fresh, 21)) == 21
    fresh.close()


def test_committed_offsets_and_transactions_survive_a_kill(oncelog_broker_fresh):
    broker = oncelog_broker_fresh
    topic, group = broker.topic(), broker.unique("g")
    txn = Producer(broker.client_config(**{"transactional.id": broker.unique("txn")}))
    txn.init_transactions(TIMEOUT)
    txn.begin_transaction()
    for i in range(5):
        txn.produce(topic, value=f"c{i}".encode())
    txn.commit_transaction(TIMEOUT)
    txn.begin_transaction()
    txn.produce(topic, value=b"open when killed")
    txn.flush(TIMEOUT)
    c = Consumer(broker.client_config(**{"group.id": group, "enable.auto.commit": False,
                                        "auto.offset.reset": "earliest", "isolation.level": "read_committed"}))
    c.assign([TopicPartition(topic, 0, 0)])
    msgs = consume(c, 5)
    c.commit(message=msgs[2], asynchronous=False)
    c.close()

    broker.kill()
    broker.restart()
    c = Consumer(broker.client_config(**{"group.id": group, "enable.auto.commit": False,
                                        "isolation.level": "read_committed", "fetch.wait.max.ms": 50}))
    [tp] = c.committed([TopicPartition(topic, 0)], timeout=TIMEOUT)
    assert tp.offset == 3
    c.assign([TopicPartition(topic, 0, tp.offset)])
    rest = consume(c, 2)
    assert [m.value() for m in rest] == [b"c3", b"c4"]
    c.close()
