"""Broker limits and the admin APIs a one-broker Kafka answers,
against real broker processes with real clients (confluent-kafka, kafka-python) or, where no
client sends a version, the project's own wire client.

Each test runs against oncelog and against a one-node Apache Kafka (``both_brokers``), which is
shared by the session: topic and group ids are unique, and what the test needs to exist (the
internal topics) it makes exist. Those that configure oncelog or compare with its own tables are
oncelog-only."""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
import time
import uuid

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
from kafka import TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.protocol.consumer.offsets import OffsetSpec
from kio.schema.errors import ErrorCode

from oncelog.apis import HANDLERS
from oncelog.apis._base import build
from oncelog.client.wire import RawClient, request_module

from ..helpers import (COORDINATOR_GROUP, broker_addresses, coordinator_address, create_topic, expected_leader,
                       expected_nodes, leader_address, node_log_dir, unique, wait_for_partitions)

pytestmark = [pytest.mark.e2e, pytest.mark.both_brokers]  # starts processes


def _join(bootstrap: str, session_timeout_ms: int, topic: str, timeout: float = 10.0):
    """Subscribe a consumer with ``session.timeout.ms`` to a new group; the JoinGroup error, or
    None once assigned."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": unique(f"g-{session_timeout_ms}"),
                     "session.timeout.ms": session_timeout_ms, "heartbeat.interval.ms": 500,
                     "auto.offset.reset": "earliest"})
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = c.poll(0.1)
            if m is not None and m.error():
                return m.error().code()
            if c.assignment():
                return None
        raise AssertionError("neither an assignment nor an error")
    finally:
        c.close()


def test_session_timeout_below_the_default_minimum_is_invalid_session_timeout(broker):
    topic = unique("sessions")
    create_topic(broker.bootstrap, topic)
    wait_for_partitions(broker.bootstrap, topic, 1)  # every broker knows it: no UNKNOWN_TOPIC_OR_PART first
    assert _join(broker.bootstrap, 3000, topic) == ck.KafkaError.INVALID_SESSION_TIMEOUT  # below Kafka's 6000
    assert _join(broker.bootstrap, 6000, topic) is None


@pytest.mark.oncelog_only("starts a broker with group.min/max.session.timeout.ms of its own")
def test_session_timeout_outside_configured_group_limits_is_invalid_session_timeout(broker_factory):
    tuned = broker_factory("tuned", group_min_session_timeout_ms=1000, group_max_session_timeout_ms=5000)
    create_topic(tuned.bootstrap, "sessions")
    assert _join(tuned.bootstrap, 3000, "sessions") is None
    assert _join(tuned.bootstrap, 6000, "sessions") == ck.KafkaError.INVALID_SESSION_TIMEOUT  # above the maximum
    admin = AdminClient({"bootstrap.servers": tuned.bootstrap})
    resource = ConfigResource(ResourceType.BROKER, "1")
    configs = admin.describe_configs([resource])[resource].result(timeout=10)
    assert configs["group.min.session.timeout.ms"].value == "1000"
    assert configs["group.max.session.timeout.ms"].value == "5000"


def test_serve_refuses_a_minimum_session_timeout_above_the_maximum(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "oncelog", "serve", "--data-dir", str(tmp_path / "d"), "--port", "0",
                           "--group-min-session-timeout-ms", "7000", "--group-max-session-timeout-ms", "6000"],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and "--group-min-session-timeout-ms (7000)" in proc.stderr


# ---------------------------------------------------------------- helpers for the new APIs

@pytest.fixture
def raw(broker):
    """The project's wire client on the test's broker: for versions no client library sends."""
    client = RawClient(broker.bootstrap)
    yield client
    client.close()


def _produce(bootstrap: str, topic: str, partition: int, count: int, size: int = 100) -> None:
    p = ck.Producer({"bootstrap.servers": bootstrap})
    for _ in range(count):
        p.produce(topic, b"x" * size, partition=partition)
    assert p.flush(10) == 0


def _use_internal_topics(bootstrap: str) -> None:
    """Make ``__consumer_offsets`` and ``__transaction_state`` exist: oncelog has them from the
    start, Kafka creates each on its first use (the session's Kafka may not have had one yet)."""
    topic = unique("internal")
    create_topic(bootstrap, topic, 1)
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": topic, "enable.auto.commit": False})
    deadline = time.monotonic() + 30
    try:
        while True:  # Kafka's first use of the group coordinator: NOT_COORDINATOR while it loads
            try:
                c.commit(offsets=[ck.TopicPartition(topic, 0, 0)], asynchronous=False)
                break
            except ck.KafkaException as exc:
                if not exc.args[0].retriable() or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        c.close()
    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": topic})
    p.init_transactions(30)


@pytest.fixture
def routed():
    """RawClients by address: ``routed(address)``, for a request a client would send to one broker
    (a partition's leader, a group's coordinator), closed after the test."""
    clients: dict[str, RawClient] = {}

    def client(address: str) -> RawClient:
        return clients.get(address) or clients.setdefault(address, RawClient(address))

    yield client
    for c in clients.values():
        c.close()


def _log_file_bytes(data_dir: str, topic: str, partition: int) -> int:
    directory = os.path.join(data_dir, f"{topic}-{partition}")
    return sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory) if f.endswith(".log"))


# ---------------------------------------------------------------- ApiVersions

# What this issue added or raised; every other API keeps its range (compared with HANDLERS below).
NEW_RANGES = {
    1: (4, 18),    # Fetch: v18 follower high watermark (KIP-1166)
    2: (1, 11),    # ListOffsets: v10 timeout (KIP-1075), v11 earliest pending upload (KIP-1023)
    3: (0, 13),    # Metadata: v13 top-level error code (KIP-1102)
    8: (2, 10),    # OffsetCommit: v10 topic ids (KIP-848)
    9: (1, 10),    # OffsetFetch: v10 topic ids (KIP-848)
    10: (0, 6),    # FindCoordinator: v5 TRANSACTION_ABORTABLE, v6 share keys (refused)
    15: (0, 6),    # DescribeGroups: v6 GROUP_ID_NOT_FOUND (KIP-1043)
    35: (1, 5),    # DescribeLogDirs (new)
    43: (0, 2),    # ElectLeaders (new)
    46: (0, 0),    # ListPartitionReassignments (new)
    60: (0, 2),    # DescribeCluster: v2 fenced brokers (KIP-1073)
    75: (0, 0),    # DescribeTopicPartitions (new, KIP-966)
}


@pytest.mark.oncelog_only("compares ApiVersions with oncelog's own handler table")
def test_api_versions_advertises_the_new_apis_and_versions(broker, raw):
    resp = raw.request(
        request_module(18, 4).ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    advertised = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert advertised == {key: (getattr(m, "ADVERTISED_MIN_VERSION", m.MIN_VERSION), m.MAX_VERSION)
                          for key, m in HANDLERS.items()}  # Produce: advertised from v0 as Kafka 4.4 (KAFKA-18659)
    assert {key: advertised.get(key) for key in NEW_RANGES} == NEW_RANGES
    # kafka-python infers the broker's release from the maxima: DescribeLogDirs v5 is Kafka 4.3's.
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        assert admin._manager.broker_version_data.broker_version == (4, 3)
    finally:
        admin.close()


# ---------------------------------------------------------------- DescribeLogDirs

def test_describe_log_dirs_reports_the_data_dir_sizes_and_volume(broker):
    dirs, nope = unique("dirs"), unique("nope")
    create_topic(broker.bootstrap, dirs, 2)
    wait_for_partitions(broker.bootstrap, dirs, 2)  # each leader has its log (dirs-1 gets no write)
    _produce(broker.bootstrap, dirs, 0, 20)
    _use_internal_topics(broker.bootstrap)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)  # asks every broker (each its own log dirs)
    try:
        everything = admin.describe_log_dirs()
        asked = admin.describe_log_dirs({dirs: [0, 7], nope: [0]})
    finally:
        admin.close()
    assert sorted(b["broker"] for b in everything) == sorted(broker_addresses(broker.bootstrap))
    assert len(everything) == expected_nodes(broker)
    parts, hosted_by = {}, {}
    for answer in everything:
        node, log_dir_of_node = answer["broker"], node_log_dir(broker, answer["broker"])
        [log_dir] = answer["log_dirs"]
        assert log_dir["error_code"] == 0 and log_dir["log_dir"] == log_dir_of_node and log_dir["is_cordoned"] is False
        st = os.statvfs(log_dir_of_node)
        assert log_dir["total_bytes"] == st.f_blocks * st.f_frsize
        assert abs(log_dir["usable_bytes"] - st.f_bavail * st.f_frsize) < 0.01 * log_dir["total_bytes"]
        for t in log_dir["topics"]:
            for p in t["partitions"]:
                key = (t["name"], p["partition_index"])
                assert key not in parts, f"{key} reported by brokers {hosted_by[key]} and {node} (replication factor 1)"
                parts[key], hosted_by[key] = p, node
    assert {(dirs, 0), (dirs, 1), ("__consumer_offsets", 0)} <= set(parts)  # internal topics too
    for key in (dirs, 0), (dirs, 1), ("__consumer_offsets", 0):  # each by its leader
        assert hosted_by[key] == expected_leader(broker, *key), (key, hosted_by[key])
    assert parts[(dirs, 0)]["partition_size"] == _log_file_bytes(node_log_dir(broker, hosted_by[(dirs, 0)]), dirs, 0) > 20 * 100
    assert parts[(dirs, 1)]["partition_size"] == 0
    assert all(p["offset_lag"] == 0 and p["is_future_key"] is False for p in parts.values())
    # Partitions the broker does not host, and topics left with none, are left out (as Kafka): the
    # leader of dirs-0 lists it, every other broker nothing.
    assert sorted(b["broker"] for b in asked) == sorted(b["broker"] for b in everything)
    listed = {}
    for answer in asked:
        [only] = answer["log_dirs"]
        listed[answer["broker"]] = [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in only["topics"]]
    assert listed == {node: [(dirs, [0])] if node == hosted_by[(dirs, 0)] else [] for node in listed}


def test_describe_log_dirs_every_version(broker, routed):
    dirs = unique("dirs")
    create_topic(broker.bootstrap, dirs, 1)
    # Kafka answers CreateTopics before its broker has the partition's log: until then
    # DescribeLogDirs lists no topic (seen once in CI). oncelog has it when CreateTopics answers.
    wait_for_partitions(broker.bootstrap, dirs, 1)
    leader = expected_leader(broker, dirs, 0)
    brokers = broker_addresses(broker.bootstrap)
    assert len(brokers) == expected_nodes(broker)
    for version in range(1, 6):
        m = request_module(35, version)
        for node, address in brokers.items():  # each broker its own log dirs: the leader's lists the partition
            resp = routed(address).request(m.DescribeLogDirsRequest(
                topics=(m.DescribableLogDirTopic(topic=dirs, partitions=(0,)),)))
            [result] = resp.results
            assert result.log_dir == node_log_dir(broker, node)
            assert [(t.name, [p.partition_index for p in t.partitions]) for t in result.topics] == (
                [(dirs, [0])] if node == leader else [])
            assert getattr(resp, "error_code", ErrorCode.none) == ErrorCode.none  # v3+
            assert getattr(result, "total_bytes", 1) > 0  # v4+


# ---------------------------------------------------------------- DescribeTopicPartitions

def test_describe_topic_partitions_pages_with_a_cursor_as_kafka(broker):
    a, b, c, nope = unique("a"), unique("b"), unique("c"), unique("nope")  # sorted as named
    create_topic(broker.bootstrap, a, 3)
    create_topic(broker.bootstrap, b, 2)
    create_topic(broker.bootstrap, c, 1)
    for topic, partitions in (a, 3), (b, 2), (c, 1):  # whichever broker kafka-python asks knows them
        wait_for_partitions(broker.bootstrap, topic, partitions)
    _use_internal_topics(broker.bootstrap)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        pages, cursor = [], None
        while True:
            page = admin.describe_topic_partitions([c, nope, b, a], response_partition_limit=2, cursor=cursor)
            pages.append([(t["name"], t["error_code"], [p["partition_index"] for p in t["partitions"]])
                          for t in page["topics"]])
            cursor = page["next_cursor"]
            if cursor is None:
                break
            pages[-1].append(("cursor", cursor["topic_name"], cursor["partition_index"]))
        everything = admin.describe_topic_partitions([])
        bad = admin.describe_topic_partitions(["bad name!"])
    finally:
        admin.close()
    assert pages == [
        [(a, 0, [0, 1]), ("cursor", a, 2)],                   # a topic cut: the cursor is its next partition
        [(a, 0, [2]), (b, 0, [0]), ("cursor", b, 1)],
        [(b, 0, [1]), (c, 0, [0]), ("cursor", nope, 0)],   # the limit used up exactly: the next topic
        [(nope, ErrorCode.unknown_topic_or_partition.value, [])],
    ]
    topics = {t["name"]: t for t in everything["topics"]}
    assert everything["next_cursor"] is None
    assert {a, b, c, "__consumer_offsets", "__transaction_state"} <= set(topics)
    assert [t["name"] for t in everything["topics"]] == sorted(topics)
    assert topics["__consumer_offsets"]["is_internal"] is True and topics[a]["is_internal"] is False
    p0 = topics[a]["partitions"][0]
    leader = expected_leader(broker, a, 0)
    assert (p0["leader_id"], p0["replica_nodes"], p0["isr_nodes"], p0["offline_replicas"]) == (leader, [leader], [leader], [])
    assert topics[a]["topic_authorized_operations"] > 0  # no ACLs: every topic operation
    assert [(t["name"], t["error_code"]) for t in bad["topics"]] == [("bad name!", ErrorCode.invalid_topic_exception.value)]


def test_describe_topic_partitions_refuses_a_cursor_outside_the_topics(broker, raw):
    a, b = unique("a"), unique("b")
    create_topic(broker.bootstrap, a, 1)
    m = request_module(75, 0)

    resp = raw.request(m.DescribeTopicPartitionsRequest(
        topics=(m.TopicRequest(name=a),), cursor=m.Cursor(topic_name=b, partition_index=0)))
    assert [(t.name, t.error_code, t.partitions) for t in resp.topics] == [(a, ErrorCode.invalid_request, ())]
    resp = raw.request(m.DescribeTopicPartitionsRequest(
        topics=(m.TopicRequest(name=a),), cursor=m.Cursor(topic_name=a, partition_index=-1)))
    assert [t.error_code for t in resp.topics] == [ErrorCode.invalid_request]


# ---------------------------------------------------------------- ListPartitionReassignments, ElectLeaders

def test_list_partition_reassignments_is_empty(broker):
    a = unique("a")
    create_topic(broker.bootstrap, a, 2)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        assert admin.list_partition_reassignments() == {}
        assert admin.list_partition_reassignments({a: [0, 1], unique("nope"): [0]}) == {}  # unknown topics: no error
    finally:
        admin.close()


def test_elect_leaders_has_nothing_to_elect(broker, raw):
    a, nope = unique("a"), unique("nope")
    create_topic(broker.bootstrap, a, 2)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    tps = [ck.TopicPartition(a, 0), ck.TopicPartition(a, 7), ck.TopicPartition(nope, 0)]
    result = admin.elect_leaders(ck.ElectionType.PREFERRED, tps).result(timeout=10)
    answers = {(tp.topic, tp.partition): (err.code(), err.str()) for tp, err in result.items()}
    assert answers == {
        (a, 0): (ck.KafkaError.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."),
        (a, 7): (ck.KafkaError.UNKNOWN_TOPIC_OR_PART, f"No such partition as {a}-7"),
        (nope, 0): (ck.KafkaError.UNKNOWN_TOPIC_OR_PART, f"No such topic as {nope}"),
    }
    # All partitions (null list): partitions whose election is not needed are left out.
    assert admin.elect_leaders(ck.ElectionType.UNCLEAN, None).result(timeout=10) == {}

    m = request_module(43, 2)
    resp = raw.request(m.ElectLeadersRequest(election_type=1, topic_partitions=None))
    assert resp.error_code == ErrorCode.none
    results = {r.topic: r.partition_result for r in resp.replica_election_results}
    assert {a, "__consumer_offsets"} <= set(results) and not any(results.values())
    m = request_module(43, 0)  # v0: preferred only, no top-level error code
    resp = raw.request(m.ElectLeadersRequest(topic_partitions=(m.TopicPartitions(topic=a, partitions=(1,)),)))
    assert [(p.partition_id, p.error_code) for r in resp.replica_election_results for p in r.partition_result] \
        == [(1, ErrorCode.election_not_needed)]
    m = request_module(43, 1)
    resp = raw.request(m.ElectLeadersRequest(election_type=5, topic_partitions=(m.TopicPartitions(topic=a, partitions=(0,)),)))
    assert resp.error_code == ErrorCode.invalid_request
    assert [(p.error_code, p.error_message) for r in resp.replica_election_results for p in r.partition_result] \
        == [(ErrorCode.invalid_request, "Unknown election type 5")]


# ---------------------------------------------------------------- raised versions of existing APIs

def test_metadata_v13_fetch_v18_and_describe_cluster_v2(broker, raw, routed):
    v = unique("v")
    create_topic(broker.bootstrap, v, 1)
    _produce(broker.bootstrap, v, 0, 3)
    # librdkafka asks Metadata v13 now that it is advertised.
    md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    assert md.topics[v].error is None and list(md.topics[v].partitions) == [0]

    m = request_module(3, 13)
    resp = raw.request(m.MetadataRequest(topics=(m.MetadataRequestTopic(name=v, topic_id=None),),
                                            allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    assert resp.error_code == ErrorCode.none and [t.name for t in resp.topics] == [v]
    topic_id = resp.topics[0].topic_id
    m = request_module(1, 18)  # no client sends v18 yet (its field is a follower's)
    resp = routed(leader_address(broker.bootstrap, v, 0)).request(m.FetchRequest(
        max_wait=datetime.timedelta(0), min_bytes=1, topics=(m.FetchTopic(topic_id=topic_id, partitions=(
            m.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20, high_watermark=-1),)),),
        forgotten_topics_data=()))
    [part] = resp.responses[0].partitions
    assert part.error_code == ErrorCode.none and part.high_watermark == 3 and len(part.records) > 0
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)  # sends DescribeCluster v2 with fenced brokers
    try:
        cluster = admin.describe_cluster()
    finally:
        admin.close()
    assert sorted((b["broker_id"], b["is_fenced"]) for b in cluster["brokers"]) == [
        (node, False) for node in range(1, expected_nodes(broker) + 1)]


def test_list_offsets_v11_tiered_specials_and_version_gates(broker, routed):
    lo = unique("lo")
    create_topic(broker.bootstrap, lo, 2)
    wait_for_partitions(broker.bootstrap, lo, 2)  # kafka-python's admin asks any broker's Metadata first
    _produce(broker.bootstrap, lo, 0, 5)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)  # ListOffsets v11
    try:
        answers = admin.list_partition_offsets({TopicPartition(lo, 0): OffsetSpec.LATEST_TIERED,
                                                TopicPartition(lo, 1): OffsetSpec.EARLIEST_LOCAL})
    finally:
        admin.close()
    assert answers[TopicPartition(lo, 0)].offset == -1  # no tiered storage: -1, as Kafka without remote storage
    assert answers[TopicPartition(lo, 1)].offset == 0

    def ask(version, timestamp):
        m = request_module(2, version)
        req = build(m.ListOffsetsRequest, replica_id=-1, isolation_level=0, timeout=datetime.timedelta(seconds=5),
                    topics=(m.ListOffsetsTopic(name=lo, partitions=(
                        m.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=timestamp),)),))
        p = routed(leader_address(broker.bootstrap, lo, 0)).request(req).topics[0].partitions[0]
        return p.error_code, p.offset, p.timestamp, getattr(p, "leader_epoch", None)

    assert ask(11, -6) == (ErrorCode.none, -1, -1, -1)  # earliest pending upload: nothing to upload
    assert ask(11, -1) == (ErrorCode.none, 5, -1, 0)
    assert ask(10, -6)[0] == ErrorCode.unsupported_version  # a special the version does not know
    assert ask(6, -3)[0] == ErrorCode.unsupported_version
    assert ask(11, -7)[0] == ErrorCode.unsupported_version


def test_offset_commit_and_fetch_v10_name_topics_by_id(broker, raw, routed):
    ids, group = unique("ids"), unique("by-id")
    create_topic(broker.bootstrap, ids, 2)
    wait_for_partitions(broker.bootstrap, ids, 2)  # the group's coordinator (any node) knows its id
    m = request_module(3, 13)
    topic_id = raw.request(m.MetadataRequest(topics=(m.MetadataRequestTopic(name=ids, topic_id=None),),
                                                allow_auto_topic_creation=False,
                                                include_topic_authorized_operations=False)).topics[0].topic_id
    unknown_id = uuid.uuid4()
    coordinator = routed(coordinator_address(broker.bootstrap, group, COORDINATOR_GROUP))
    m = request_module(8, 10)
    resp = coordinator.request(m.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None, topics=(
            m.OffsetCommitRequestTopic(topic_id=topic_id, partitions=(
                m.OffsetCommitRequestPartition(partition_index=0, committed_offset=7, committed_metadata="m"),
                m.OffsetCommitRequestPartition(partition_index=5, committed_offset=1, committed_metadata=None))),
            m.OffsetCommitRequestTopic(topic_id=unknown_id, partitions=(
                m.OffsetCommitRequestPartition(partition_index=0, committed_offset=1, committed_metadata=None),)))))
    assert [(t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions]) for t in resp.topics] == [
        # Kafka's order: the partitions refused before the group coordinator is asked come first
        (topic_id, [(5, ErrorCode.unknown_topic_or_partition), (0, ErrorCode.none)]),
        (unknown_id, [(0, ErrorCode.unknown_topic_id)])]

    m = request_module(9, 10)
    resp = coordinator.request(m.OffsetFetchRequest(require_stable=True, groups=(
        m.OffsetFetchRequestGroup(group_id=group, topics=(
            m.OffsetFetchRequestTopics(topic_id=unknown_id, partition_indexes=(0,)),
            m.OffsetFetchRequestTopics(topic_id=topic_id, partition_indexes=(0, 1)))),
        m.OffsetFetchRequestGroup(group_id=group, topics=None))))
    named, everything = resp.groups
    assert [(t.topic_id, [(p.partition_index, p.committed_offset, p.error_code) for p in t.partitions])
            for t in named.topics] == [
        (topic_id, [(0, 7, ErrorCode.none), (1, -1, ErrorCode.none)]),
        (unknown_id, [(0, -1, ErrorCode.unknown_topic_id)])]  # unknown ids after the known topics, as Kafka
    assert [(t.topic_id, [(p.partition_index, p.committed_offset, p.metadata) for p in t.partitions])
            for t in everything.topics] == [(topic_id, [(0, 7, "m")])]
    # The offset committed by id is the one a librdkafka consumer (OffsetFetch v9, by name) sees.
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        assert [tp.offset for tp in c.committed([ck.TopicPartition(ids, 0)], timeout=10)] == [7]
    finally:
        c.close()


def test_find_coordinator_v6_and_describe_groups_v6(broker, raw):
    missing = unique("no-such-group")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)  # FindCoordinator v6, DescribeGroups v6
    try:
        described = admin.describe_groups([missing])[missing]
    finally:
        admin.close()
    assert described["group_state"] == "Dead" and described["members"] == []
    assert f"GroupIdNotFoundError: Group {missing} not found." in described["error"]
    # librdkafka asks DescribeGroups v5, where an unknown group is Dead without an error.
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    group = admin.describe_consumer_groups([missing])[missing].result(timeout=10)
    assert group.state == ck.ConsumerGroupState.DEAD
    m = request_module(10, 6)
    resp = raw.request(m.FindCoordinatorRequest(key_type=2, coordinator_keys=("g:topic:0",)))
    assert [(c.error_code, c.node_id) for c in resp.coordinators] == [(ErrorCode.invalid_request, -1)]
