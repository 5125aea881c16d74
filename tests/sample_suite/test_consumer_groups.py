"""Consumer groups with confluent-kafka: sharing partitions, committing and resuming, rebalancing."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from .helpers import TIMEOUT, consume, consume_quiet, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.any_kafka]


def fill(broker, topic: str, partitions: int, per_partition: int) -> None:
    p = Producer(broker.client_config(**{"linger.ms": 1}))
    for part in range(partitions):
        for i in range(per_partition):
            p.produce(topic, key=f"{part}-{i}".encode(), value=f"{part}-{i}".encode(), partition=part)
    assert p.flush(TIMEOUT) == 0


def member(broker, group: str, **extra) -> Consumer:
    return Consumer(broker.client_config(**{
        "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "fetch.wait.max.ms": 50, "session.timeout.ms": 10000, "heartbeat.interval.ms": 500, **extra}))


def poll_until_assigned(consumers, count: int, timeout: float = TIMEOUT) -> None:
    """Poll every consumer until their assignments cover ``count`` partitions without overlap."""
    def settled():
        for c in consumers:
            c.poll(0.1)
        parts = [tp.partition for c in consumers for tp in c.assignment()]
        return len(parts) == count and len(set(parts)) == count and all(c.assignment() for c in consumers)

    wait_for(settled, timeout, what=f"{len(consumers)} members sharing {count} partitions", interval=0)


def test_one_member_reads_every_partition(oncelog_broker):
    topic, group = oncelog_broker.topic(partitions=3), oncelog_broker.unique("g")
    fill(oncelog_broker, topic, 3, 4)
    c = member(oncelog_broker, group)
    c.subscribe([topic])
    msgs = consume(c, 12)
    c.close()
    assert sorted(m.value().decode() for m in msgs) == sorted(f"{p}-{i}" for p in range(3) for i in range(4))


def test_two_members_share_the_partitions(oncelog_broker):
    topic, group = oncelog_broker.topic(partitions=4), oncelog_broker.unique("g")
    a, b = member(oncelog_broker, group), member(oncelog_broker, group)
    a.subscribe([topic])
    b.subscribe([topic])
    poll_until_assigned([a, b], 4)
    fill(oncelog_broker, topic, 4, 3)
    got_a, got_b = [], []
    wait_for(lambda: (got_a.extend(consume_quiet(a, 0.1)), got_b.extend(consume_quiet(b, 0.1)))
             and len(got_a) + len(got_b) >= 12, what="12 records between the two members", interval=0)
    assert got_a and got_b
    assert {m.partition() for m in got_a}.isdisjoint({m.partition() for m in got_b})
    assert sorted(m.value() for m in got_a + got_b) == sorted(f"{p}-{i}".encode() for p in range(4) for i in range(3))
    a.close()
    b.close()


def test_commit_and_resume_from_committed_offsets(oncelog_broker):
    topic, group = oncelog_broker.topic(), oncelog_broker.unique("g")
    fill(oncelog_broker, topic, 1, 10)
    first = member(oncelog_broker, group)
    first.subscribe([topic])
    msgs = consume(first, 4)
    first.commit(message=msgs[-1], asynchronous=False)  # commits offset 4: the next to read
    first.close()

    second = member(oncelog_broker, group)
    [tp] = second.committed([TopicPartition(topic, 0)], timeout=TIMEOUT)
    assert tp.offset == 4
    second.subscribe([topic])
    rest = consume(second, 6)
    second.close()
    assert [m.offset() for m in rest] == list(range(4, 10))


def test_commit_explicit_offsets_with_metadata(oncelog_broker):
    topic, group = oncelog_broker.topic(partitions=2), oncelog_broker.unique("g")
    c = member(oncelog_broker, group)
    c.commit(offsets=[TopicPartition(topic, 0, 7, metadata="checkpoint-a"), TopicPartition(topic, 1, 3)],
             asynchronous=False)
    committed = c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=TIMEOUT)
    got = {tp.partition: tp for tp in committed}
    c.close()
    assert (got[0].offset, got[0].metadata) == (7, "checkpoint-a")
    assert got[1].offset == 3


def test_rebalance_when_a_member_leaves(oncelog_broker):
    topic, group = oncelog_broker.topic(partitions=4), oncelog_broker.unique("g")
    a, b = member(oncelog_broker, group), member(oncelog_broker, group)
    a.subscribe([topic])
    b.subscribe([topic])
    poll_until_assigned([a, b], 4)
    b.close()  # leaves the group at once (LeaveGroup): no session timeout to wait for
    poll_until_assigned([a], 4)
    fill(oncelog_broker, topic, 4, 2)
    msgs = consume(a, 8)
    a.close()
    assert {m.partition() for m in msgs} == {0, 1, 2, 3}


def test_rebalance_callbacks(oncelog_broker):
    topic, group = oncelog_broker.topic(partitions=2), oncelog_broker.unique("g")
    events = []
    c = member(oncelog_broker, group)
    c.subscribe([topic],
                on_assign=lambda consumer, parts: events.append(("assign", sorted(p.partition for p in parts))),
                on_revoke=lambda consumer, parts: events.append(("revoke", sorted(p.partition for p in parts))))
    wait_for(lambda: c.poll(0.1) is None and events, what="the assignment callback", interval=0)
    c.close()
    assert events[0] == ("assign", [0, 1])
    assert events[-1] == ("revoke", [0, 1])


def test_auto_commit_on_close(oncelog_broker):
    topic, group = oncelog_broker.topic(), oncelog_broker.unique("g")
    fill(oncelog_broker, topic, 1, 5)
    c = member(oncelog_broker, group, **{"enable.auto.commit": True, "auto.commit.interval.ms": 100})
    c.subscribe([topic])
    consume(c, 5)
    c.close()  # commits the consumed position
    check = member(oncelog_broker, group)
    [tp] = check.committed([TopicPartition(topic, 0)], timeout=TIMEOUT)
    check.close()
    assert tp.offset == 5


def test_next_generation_consumer_protocol(oncelog_broker):
    """KIP-848: the group protocol where the broker computes the assignment."""
    topic, group = oncelog_broker.topic(partitions=2), oncelog_broker.unique("g")
    fill(oncelog_broker, topic, 2, 3)
    c = Consumer(oncelog_broker.client_config(**{"group.id": group, "group.protocol": "consumer",
                                                 "auto.offset.reset": "earliest", "fetch.wait.max.ms": 50}))
    c.subscribe([topic])
    msgs = consume(c, 6)
    c.close()
    assert sorted(m.value() for m in msgs) == sorted(f"{p}-{i}".encode() for p in range(2) for i in range(3))
