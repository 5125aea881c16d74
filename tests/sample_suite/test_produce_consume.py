"""Producing and consuming with confluent-kafka: keys, headers, partitions, compression, timestamps."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, Consumer, Producer, TopicPartition

from .helpers import TIMEOUT, consume

pytestmark = [pytest.mark.e2e, pytest.mark.any_kafka]


def producer(broker, **extra) -> Producer:
    return Producer(broker.client_config(**{"linger.ms": 1, **extra}))


def reader(broker, topic: str, partitions=(0,), **extra) -> Consumer:
    """A consumer without a group, assigned from the start of ``partitions``."""
    c = Consumer(broker.client_config(**{"group.id": "unused", "enable.auto.commit": False,
                                        "fetch.wait.max.ms": 50, **extra}))
    c.assign([TopicPartition(topic, p, 0) for p in partitions])
    return c


def delivered(p: Producer, timeout: float = TIMEOUT) -> None:
    assert p.flush(timeout) == 0, "records not acknowledged"


def test_values_come_back_in_order(oncelog_broker):
    topic = oncelog_broker.topic()
    p = producer(oncelog_broker)
    for i in range(50):
        p.produce(topic, value=f"v{i}".encode())
    delivered(p)
    c = reader(oncelog_broker, topic)
    msgs = consume(c, 50)
    c.close()
    assert [m.value() for m in msgs] == [f"v{i}".encode() for i in range(50)]
    assert [m.offset() for m in msgs] == list(range(50))


def test_keys_and_null_values(oncelog_broker):
    topic = oncelog_broker.topic()
    p = producer(oncelog_broker)
    p.produce(topic, key=b"k1", value=b"a")
    p.produce(topic, key=b"k2", value=None)  # a tombstone
    p.produce(topic, key=None, value=b"c")
    delivered(p)
    c = reader(oncelog_broker, topic)
    msgs = consume(c, 3)
    c.close()
    assert [(m.key(), m.value()) for m in msgs] == [(b"k1", b"a"), (b"k2", None), (None, b"c")]


def test_headers_round_trip(oncelog_broker):
    topic = oncelog_broker.topic()
    p = producer(oncelog_broker)
    p.produce(topic, value=b"v", headers=[("trace-id", b"abc"), ("empty", b""), ("dup", b"1"), ("dup", b"2")])
    delivered(p)
    c = reader(oncelog_broker, topic)
    [m] = consume(c, 1)
    c.close()
    assert m.headers() == [("trace-id", b"abc"), ("empty", b""), ("dup", b"1"), ("dup", b"2")]


def test_explicit_partitions(oncelog_broker):
    topic = oncelog_broker.topic(partitions=3)
    p = producer(oncelog_broker)
    for part in range(3):
        for i in range(5):
            p.produce(topic, value=f"{part}-{i}".encode(), partition=part)
    delivered(p)
    c = reader(oncelog_broker, topic, partitions=range(3))
    msgs = consume(c, 15)
    c.close()
    by_partition = {}
    for m in msgs:
        by_partition.setdefault(m.partition(), []).append(m.value().decode())
    assert by_partition == {part: [f"{part}-{i}" for i in range(5)] for part in range(3)}


def test_same_key_same_partition(oncelog_broker):
    topic = oncelog_broker.topic(partitions=4)
    p = producer(oncelog_broker)
    partitions_of = {}

    def report(err, msg):
        assert err is None, err
        partitions_of.setdefault(msg.key(), set()).add(msg.partition())

    for i in range(40):
        p.produce(topic, key=f"user-{i % 8}".encode(), value=b"x", on_delivery=report)
    delivered(p)
    assert len(partitions_of) == 8
    assert all(len(parts) == 1 for parts in partitions_of.values()), partitions_of
    assert len({next(iter(parts)) for parts in partitions_of.values()}) > 1  # keys spread over partitions


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches(oncelog_broker, codec):
    topic = oncelog_broker.topic()
    p = producer(oncelog_broker, **{"compression.type": codec, "linger.ms": 20})
    values = [(f"record {i} " * 20).encode() for i in range(100)]
    for v in values:
        p.produce(topic, value=v)
    delivered(p)
    c = reader(oncelog_broker, topic)
    msgs = consume(c, 100)
    c.close()
    assert [m.value() for m in msgs] == values


def test_create_time_timestamps(oncelog_broker):
    topic = oncelog_broker.topic()
    p = producer(oncelog_broker)
    p.produce(topic, value=b"old", timestamp=1_600_000_000_000)
    p.produce(topic, value=b"now")
    delivered(p)
    c = reader(oncelog_broker, topic)
    old, now = consume(c, 2)
    c.close()
    assert old.timestamp() == (TIMESTAMP_CREATE_TIME, 1_600_000_000_000)
    kind, ts = now.timestamp()
    assert kind == TIMESTAMP_CREATE_TIME and abs(ts / 1000 - time.time()) < 60


def test_log_append_time_topic(oncelog_broker):
    topic = oncelog_broker.topic(config={"message.timestamp.type": "LogAppendTime"})
    p = producer(oncelog_broker)
    before = time.time()
    p.produce(topic, value=b"v", timestamp=1_600_000_000_000)  # replaced by the broker's time
    delivered(p)
    c = reader(oncelog_broker, topic)
    [m] = consume(c, 1)
    c.close()
    kind, ts = m.timestamp()
    assert kind == TIMESTAMP_LOG_APPEND_TIME
    assert before - 5 <= ts / 1000 <= time.time() + 5


def test_offsets_for_times_and_seek(oncelog_broker):
    topic = oncelog_broker.topic()
    p = producer(oncelog_broker)
    for i in range(10):
        p.produce(topic, value=str(i).encode(), timestamp=1_700_000_000_000 + i * 1000)
    delivered(p)
    c = reader(oncelog_broker, topic)
    [found] = c.offsets_for_times([TopicPartition(topic, 0, 1_700_000_004_500)], TIMEOUT)
    assert found.offset == 5  # the first record at or after the time
    c.assign([TopicPartition(topic, 0, found.offset)])
    msgs = consume(c, 5)
    c.close()
    assert [m.value() for m in msgs] == [b"5", b"6", b"7", b"8", b"9"]


def test_watermarks(oncelog_broker):
    topic = oncelog_broker.topic()
    p = producer(oncelog_broker)
    for i in range(7):
        p.produce(topic, value=b"x")
    delivered(p)
    c = reader(oncelog_broker, topic)
    assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT) == (0, 7)
    c.close()


def test_large_record(oncelog_broker):
    topic = oncelog_broker.topic()
    value = bytes(range(256)) * 2048  # 512 KiB, under the default 1 MiB limit
    p = producer(oncelog_broker)
    p.produce(topic, value=value)
    delivered(p)
    c = reader(oncelog_broker, topic)
    [m] = consume(c, 1)
    c.close()
    assert m.value() == value


def test_record_too_large_is_refused(oncelog_broker):
    topic = oncelog_broker.topic(config={"max.message.bytes": "10000"})
    p = producer(oncelog_broker)
    errors = []
    p.produce(topic, value=b"x" * 50_000, on_delivery=lambda err, msg: errors.append(err))
    p.flush(TIMEOUT)
    [err] = errors
    assert err is not None and err.name() in {"MSG_SIZE_TOO_LARGE", "INVALID_RECORD"}, err


def test_delivery_reports_give_partition_and_offset(oncelog_broker):
    topic = oncelog_broker.topic(partitions=2)
    p = producer(oncelog_broker)
    reports = []
    for i in range(6):
        p.produce(topic, value=str(i).encode(), partition=i % 2,
                  on_delivery=lambda err, msg: reports.append((err, msg.partition(), msg.offset(), msg.value())))
    delivered(p)
    assert all(err is None for err, *_ in reports), reports
    assert sorted(r[1:] for r in reports) == sorted((i % 2, i // 2, str(i).encode()) for i in range(6))


def test_consumer_from_the_end_sees_only_new_records(oncelog_broker):
    topic = oncelog_broker.topic()
    p = producer(oncelog_broker)
    p.produce(topic, value=b"before")
    delivered(p)
    c = Consumer(oncelog_broker.client_config(**{"group.id": "unused", "fetch.wait.max.ms": 50}))
    _low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT)
    assert high == 1
    c.assign([TopicPartition(topic, 0, high)])
    p.produce(topic, value=b"after")
    delivered(p)
    [m] = consume(c, 1)
    c.close()
    assert (m.offset(), m.value()) == (1, b"after")
