"""Small helpers for tests that talk to a real broker."""

from __future__ import annotations

import time

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: dict | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])
    futures[name].result(timeout=30)


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int, *, timeout: float = 60.0,
                isolation: str = "read_uncommitted") -> dict[int, list]:
    """Read every partition from offset 0 until ``expected`` records arrived; returns
    {partition: [(offset, key, value, headers), ...]} in the order read."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.monotonic_ns()}",
                     "enable.auto.commit": False, "isolation.level": isolation,
                     "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100})
    c.assign([ck.TopicPartition(topic, p, 0) for p in range(partitions)])
    out: dict[int, list] = {p: [] for p in range(partitions)}
    got = 0
    deadline = time.monotonic() + timeout
    try:
        while got < expected and time.monotonic() < deadline:
            for m in c.consume(10000, 0.5):
                if m.error():
                    raise AssertionError(f"consumer error: {m.error()}")
                out[m.partition()].append((m.offset(), m.key(), m.value(), m.headers()))
                got += 1
    finally:
        c.close()
    return out


def first_difference(actual: list, expected: list) -> int:
    """Index of the first element where two sequences differ (or the shorter length)."""
    return next((i for i, (a, b) in enumerate(zip(actual, expected)) if a != b), min(len(actual), len(expected)))


def need_apache_kafka(what: str, fn):
    """``fn()``, where ``fn`` fetches or starts Apache Kafka (or Spark's Kafka connector); without
    Java, Maven or the download, skip with the reason, except under ``CI=true``, where the
    ``apache_kafka`` tests must run: fail."""
    import os

    import pytest

    from oncelog.apache_kafka import ApacheKafkaUnavailable

    try:
        return fn()
    except ApacheKafkaUnavailable as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{what} is unavailable and CI=true requires its tests to run: {exc}", pytrace=False)
        pytest.skip(f"{what} unavailable: {exc}")


def start_apache_kafka(cluster):
    """Start an ``oncelog.apache_kafka.KafkaCluster`` (see :func:`need_apache_kafka`)."""
    return need_apache_kafka("Apache Kafka", cluster.start)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (for a second listener, whose port a test must know)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def produce_one(conf: dict, topic: str, value: bytes, *, timeout_ms: int = 5000):
    """Produce one record with confluent-kafka; the delivery report's error, None if it was
    acknowledged (a refused login or handshake times the record out: nothing was sent)."""
    from confluent_kafka import Producer

    results = []
    p = Producer({**conf, "message.timeout.ms": timeout_ms})
    p.produce(topic, value, on_delivery=lambda err, msg: results.append(err))
    p.flush(timeout_ms / 1000 + 15)
    assert len(results) == 1
    return results[0]


def read_values(conf: dict, topic: str, n: int) -> list[bytes]:
    """Up to ``n`` values of ``topic`` from the start, read_committed, with a fresh group."""
    import uuid

    from confluent_kafka import Consumer

    c = Consumer({**conf, "group.id": f"g-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest",
                  "isolation.level": "read_committed"})
    c.subscribe([topic])
    got = []
    for _ in range(60):
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
            if len(got) >= n:
                break
    c.close()
    return got
