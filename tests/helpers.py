"""Small helpers for tests that talk to a real broker."""

from __future__ import annotations

import os
import time

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: dict | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])
    futures[name].result(timeout=30)


def wait_for_partitions(bootstrap: str, topic: str, partitions: int, timeout: float = 30.0) -> None:
    """Wait until every partition of a topic just created answers ListOffsets without an error,
    for a test that needs its first writes stored in order without idempotence. Kafka answers
    CreateTopics once its controller has the topic, before the broker leads the partitions: a
    write in between gets NOT_LEADER_OR_FOLLOWER and is retried, and a producer without
    idempotence then stores its first batches after later ones (oncelog's partitions exist when
    CreateTopics answers: one round trip). Each partition is asked of its leader."""
    import datetime

    from oncelog.apis._base import build
    from oncelog.client.wire import RawClient, request_module

    m = request_module(2, 7)
    deadline = time.monotonic() + timeout
    clients: dict[str, RawClient] = {}
    try:
        while True:
            # Each partition is asked of its leader (a cluster of nodes has several; one node
            # leads them all), as Metadata says now.
            by_leader: dict[str, list[int]] = {}
            md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
            brokers = {b.id: f"{b.host}:{b.port}" for b in md.brokers.values()}
            t = md.topics.get(topic)
            for p, pm in (t.partitions.items() if t is not None else ()):
                by_leader.setdefault(brokers.get(pm.leader, bootstrap), []).append(p)
            codes = []
            for address, ps in by_leader.items():
                request = build(m.ListOffsetsRequest, replica_id=-1, isolation_level=0, topics=(m.ListOffsetsTopic(
                    name=topic, partitions=tuple(m.ListOffsetsPartition(partition_index=p, current_leader_epoch=-1,
                                                                        timestamp=-1) for p in ps)),),
                                timeout=datetime.timedelta(seconds=5))
                client = clients.get(address) or clients.setdefault(address, RawClient(address))
                codes += [p.error_code for t in client.request(request).topics for p in t.partitions]
            if len(codes) == partitions and not any(codes):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"{topic}: partitions still answer ListOffsets with {codes} after {timeout:.0f} s")
            time.sleep(0.05)
    finally:
        for client in clients.values():
            client.close()


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


def read_committed_to_end(bootstrap: str, topic: str, partitions: int, timeout: float = 60.0
                          ) -> tuple[list[bytes], dict[int, bool]]:
    """Every value of ``topic`` at read_committed (an independent reader of what an engine or the
    connector committed), read until each partition's position reaches the high watermark taken
    at the start; also {partition: position reached the high watermark}, i.e. no transaction
    left open (the last stable offset is the end). Duplicates are kept: the caller counts them."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": unique("committed-reader"),
                     "enable.auto.commit": False, "isolation.level": "read_committed",
                     "auto.offset.reset": "earliest"})
    ends = {p: c.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=30)[1] for p in range(partitions)}
    c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            for m in c.consume(1000, 0.3):
                assert m.error() is None, m.error()
                values.append(m.value())
            positions = {tp.partition: tp.offset for tp in c.position([ck.TopicPartition(topic, p)
                                                                       for p in range(partitions)])}
            if all(positions[p] >= ends[p] or ends[p] == 0 for p in range(partitions)):
                return values, {p: positions[p] >= ends[p] for p in range(partitions)}
        raise AssertionError(f"read_committed did not reach the end {ends} in {timeout} s (an open transaction?)")
    finally:
        c.close()


def first_difference(actual: list, expected: list) -> int:
    """Index of the first element where two sequences differ (or the shorter length)."""
    return next((i for i, (a, b) in enumerate(zip(actual, expected)) if a != b), min(len(actual), len(expected)))


def need_apache_kafka(what: str, fn):
    """``fn()``, where ``fn`` fetches or starts Apache Kafka (or Spark's Kafka connector); without
    Java, Maven or the download, skip with the reason, except under ``CI=true``, where the
    ``apache_kafka`` tests must run: fail."""
    import os

    import pytest

    from oncelog.tools.apache_kafka import ApacheKafkaUnavailable

    try:
        return fn()
    except ApacheKafkaUnavailable as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{what} is unavailable and CI=true requires its tests to run: {exc}", pytrace=False)
        pytest.skip(f"{what} unavailable: {exc}")


def start_apache_kafka(cluster):
    """Start an ``oncelog.tools.apache_kafka.KafkaCluster`` (see :func:`need_apache_kafka`)."""
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


def unique(name: str) -> str:
    """``name`` with a random suffix: a topic, group or transactional id of its own on a broker that
    outlives the test (the session's one Apache Kafka serves every ``apache-kafka`` variant, so a
    fixed name would meet the previous test's topic, committed offsets or producer epoch)."""
    import uuid

    return f"{name}-{uuid.uuid4().hex[:8]}"


class ApacheKafkaBroker:
    """The ``broker`` fixture's ``apache-kafka`` variant (tests/conftest.py, marker ``both_brokers``):
    the session's one-node Apache Kafka (``oncelog.tools.apache_kafka.KafkaCluster``) seen through the
    part of ``oncelog.process.BrokerProcess`` a portable test uses: ``bootstrap``, the node's
    ``data_dir`` (``log.dirs``), its log. It is shared by every test of the session, so names must
    be :func:`unique`; crashing or restarting it, or reading oncelog's own log, is what an
    ``oncelog_only`` test does, and the methods for that refuse."""

    kind = "apache-kafka"

    def __init__(self, cluster) -> None:
        self.cluster = cluster
        [self.node] = cluster.members.values()

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    @property
    def data_dir(self) -> str:
        return os.path.join(self.node.dir, "data")

    @property
    def log_path(self) -> str:
        return self.node.log_path

    def tail_log(self, lines: int = 30) -> str:
        return self.node.tail_log(lines)

    def _oncelog_only(self, what: str):
        raise AssertionError(f"{what} on the session's shared Apache Kafka: mark the test "
                             "pytest.mark.oncelog_only(reason) (tests/conftest.py)")

    def kill(self) -> None:
        self._oncelog_only("kill()")

    def restart(self):
        self._oncelog_only("restart()")

    def stop(self, timeout: float = 30.0):
        self._oncelog_only("stop()")


def on_apache_kafka(broker) -> bool:
    """Whether the ``broker`` fixture is Apache Kafka (the ``apache-kafka`` variant), not oncelog."""
    return getattr(broker, "kind", "oncelog") == "apache-kafka"


def mount_small_disk(path: str, size_bytes: int, **kwargs):
    """An entered :class:`oncelog.chaos.disk.SmallDisk` (the caller unmounts it). When a tmpfs
    cannot be mounted the test is skipped with the reason, except under ``CI=true`` as root,
    where the full-disk tests must run: it fails."""
    import pytest

    from oncelog.chaos.disk import DiskFaultUnavailable, SmallDisk

    disk = SmallDisk(path, size_bytes, **kwargs)
    try:
        return disk.__enter__()
    except DiskFaultUnavailable as exc:
        if os.environ.get("CI") == "true" and os.geteuid() == 0:
            pytest.fail(f"CI=true as root: the full-disk tests must run, but {exc}", pytrace=False)
        pytest.skip(f"no small filesystem for the full-disk fault: {exc}")
