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
    CreateTopics answers: one round trip). Each partition is asked of its leader. Also until every
    broker's Metadata lists the topic with its partitions: on a cluster (Kafka's, or oncelog's of
    several nodes) a broker's metadata lags the controller's a moment after CreateTopics, and a
    client asking it then is told UNKNOWN_TOPIC_OR_PARTITION (librdkafka reports it to a consumer
    that subscribed; kafka-python's admin raises it)."""
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
            if len(codes) == partitions and not any(codes) and _every_broker_lists(brokers, topic, partitions, clients):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"{topic}: partitions still answer ListOffsets with {codes} after {timeout:.0f} s")
            time.sleep(0.05)
    finally:
        for client in clients.values():
            client.close()


def _every_broker_lists(brokers: dict[int, str], topic: str, partitions: int, clients: dict) -> bool:
    """Whether each broker's own Metadata (v12, asked of it) lists ``topic`` with ``partitions``
    partitions, each with a leader."""
    from oncelog.client.wire import RawClient, request_module

    m = request_module(3, 12)
    for address in brokers.values():
        client = clients.get(address) or clients.setdefault(address, RawClient(address))
        [t] = client.request(m.MetadataRequest(topics=(m.MetadataRequestTopic(name=topic, topic_id=None),),
                                               allow_auto_topic_creation=False,
                                               include_topic_authorized_operations=False)).topics
        if t.error_code or len(t.partitions) != partitions or any(p.leader_id < 0 for p in t.partitions):
            return False
    return True


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


# ---------------------------------------------------------------------------------------------
# Routing, as a Kafka client routes: a test that sends its own requests (RawClient, a raw
# socket) sends each to the broker a client would, since the `broker` fixture may be a cluster of
# nodes (the ``oncelog-2-nodes`` variant) where each partition, group and transactional id has
# one node: Metadata names a partition's leader, FindCoordinator a group's or transactional id's
# coordinator, and per-broker APIs (DescribeLogDirs) are asked of every broker.

def broker_addresses(bootstrap: str) -> dict[int, str]:
    """{node id: "host:port"} of every broker Metadata lists."""
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30)
    return {b.id: f"{b.host}:{b.port}" for b in md.brokers.values()}


def leader_id(bootstrap: str, topic: str, partition: int, timeout: float = 30.0) -> int:
    """The node id Metadata names the leader of ``topic``-``partition`` (waiting for one)."""
    deadline = time.monotonic() + timeout
    while True:
        t = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10).topics.get(topic)
        pm = t.partitions.get(partition) if t is not None and t.error is None else None
        if pm is not None and pm.leader >= 0:
            return pm.leader
        if time.monotonic() > deadline:
            raise AssertionError(f"{topic}-{partition}: no leader in Metadata after {timeout:.0f} s: {t}")
        time.sleep(0.05)


def leader_address(bootstrap: str, topic: str, partition: int) -> str:
    """"host:port" of the leader of ``topic``-``partition``, as Metadata says."""
    return broker_addresses(bootstrap)[leader_id(bootstrap, topic, partition)]


COORDINATOR_GROUP, COORDINATOR_TRANSACTION = 0, 1


def coordinator_address(bootstrap: str, key: str, key_type: int = COORDINATOR_GROUP, timeout: float = 30.0) -> str:
    """"host:port" of the coordinator FindCoordinator (v4) names for a group (key type 0) or a
    transactional id (1), retrying the transient answers (a fresh Kafka makes its internal topic
    on the first FindCoordinator: COORDINATOR_NOT_AVAILABLE until then)."""
    from oncelog.client.wire import RawClient, request_module

    m = request_module(10, 4)
    deadline = time.monotonic() + timeout
    client = RawClient(bootstrap)
    try:
        while True:
            [found] = client.request(m.FindCoordinatorRequest(key_type=key_type, coordinator_keys=(key,))).coordinators
            if found.error_code == 0:
                return f"{found.host}:{found.port}"
            assert found.error_code in (14, 15, 16) and time.monotonic() < deadline, found
            time.sleep(0.1)
    finally:
        client.close()


def expected_nodes(broker) -> int:
    """How many brokers the ``broker`` fixture is: the nodes of an oncelog cluster, else 1."""
    return 1 if on_apache_kafka(broker) else (getattr(broker, "nodes", None) or 1)


def expected_leader(broker, topic: str, partition: int) -> int:
    """The node that must lead ``topic``-``partition``: the one node of a one-node broker, the
    node oncelog's placement names on a cluster (docs/multicore.md, oncelog.cluster.Placement)."""
    if on_apache_kafka(broker):
        [node] = broker.cluster.members
        return node
    from oncelog.cluster import Placement

    return Placement(nodes=expected_nodes(broker)).leader(topic, partition)


def node_log_dir(broker, node_id: int) -> str:
    """The log directory of node ``node_id`` (what its DescribeLogDirs reports): the data
    directory of a one-node broker, ``<data dir>/nodes/<id>`` on an oncelog cluster."""
    data_dir = os.path.abspath(broker.data_dir)
    return data_dir if expected_nodes(broker) == 1 else os.path.join(data_dir, "nodes", str(node_id))


def unique_away_from_bootstrap(broker, name: str, key_type: int = COORDINATOR_GROUP) -> str:
    """:func:`unique` ``name`` whose coordinator (a group, key type 0, or a transactional id, 1)
    is, on a cluster of nodes, another node than the bootstrap's: the case a tool that does not
    route would get wrong. On one broker, any unique name."""
    if expected_nodes(broker) == 1:
        return unique(name)
    while True:
        candidate = unique(name)
        if coordinator_address(broker.bootstrap, candidate, key_type) != broker.bootstrap:
            return candidate
