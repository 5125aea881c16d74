"""Kafka behaviours checked with real clients against a real broker process:
ListOffsets by timestamp exact to the record, authorized operations, admin tool operability."""

from __future__ import annotations

import random
import subprocess
import sys
import time

import confluent_kafka as ck
import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient, OffsetSpec

from oncelog.client.wire import RawClient, request_module

from ..helpers import create_topic


# ---------------------------------------------------------------- 1. ListOffsets by timestamp


def _produce_one_batch(bootstrap: str, topic: str, timestamps: list[int], compression: str) -> list[int]:
    """Produce one record per timestamp to partition 0 in a single batch (long linger, one
    flush); returns the offsets the broker assigned, in produce order."""
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 2000, "batch.num.messages": 10_000,
                     "compression.type": compression, "acks": "all"})
    offsets: list[int] = [None] * len(timestamps)

    def report(i):
        def cb(err, msg):
            assert err is None, err
            offsets[i] = msg.offset()
        return cb

    for i, ts in enumerate(timestamps):
        p.produce(topic, key=b"k%d" % i, value=b"value-%d-" % i + bytes(100), partition=0, timestamp=ts,
                  on_delivery=report(i))
    assert p.flush(60) == 0
    return offsets


def _list_offsets(admin: AdminClient, topic: str, spec) -> tuple[int, int]:
    tp = ck.TopicPartition(topic, 0)
    info = admin.list_offsets({tp: spec}, request_timeout=30)[tp].result(timeout=30)
    return info.offset, info.timestamp


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_list_offsets_by_timestamp_is_exact_to_the_record(broker, compression):
    """Fifty records in one batch (compressed with each codec), CreateTime timestamps out of
    order inside it: for every target, ListOffsets answers the first record in offset order
    whose timestamp is >= the target, with that record's timestamp; MAX_TIMESTAMP answers the
    first record carrying the largest timestamp."""
    topic = f"ts-exact-{compression}"
    create_topic(broker.bootstrap, topic, 1)
    base = int(time.time() * 1000) - 3_600_000
    rng = random.Random(11)
    timestamps = [base + 10 * i for i in range(50)]
    rng.shuffle(timestamps)
    timestamps[37] = timestamps[12] = base + 10_000  # the largest, twice: the first one counts
    offsets = _produce_one_batch(broker.bootstrap, topic, timestamps, compression)
    assert offsets == list(range(50))
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for target in [base - 1, base, base + 5, base + 205, base + 250, base + 489, base + 490, base + 491,
                   base + 9_999, base + 10_000]:
        i = next(i for i, ts in enumerate(timestamps) if ts >= target)
        assert _list_offsets(admin, topic, OffsetSpec.for_timestamp(target)) == (i, timestamps[i]), target
    assert _list_offsets(admin, topic, OffsetSpec.for_timestamp(base + 10_001))[0] == -1
    assert _list_offsets(admin, topic, OffsetSpec.max_timestamp()) == (12, base + 10_000)


def test_list_offsets_by_timestamp_across_batches_and_after_delete_records(broker):
    """Three batches; a target inside the second answers a record inside it; after DeleteRecords
    cuts into the batch holding the answer, the answer is the first remaining record that
    qualifies, and MAX_TIMESTAMP never answers a deleted offset."""
    topic = "ts-exact-batches"
    create_topic(broker.bootstrap, topic, 1)
    base = int(time.time() * 1000) - 3_600_000
    all_ts = []
    for b in range(3):
        ts = [base + 1000 * b + 10 * i for i in range(20)]
        _produce_one_batch(broker.bootstrap, topic, ts, "lz4")
        all_ts += ts
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert _list_offsets(admin, topic, OffsetSpec.for_timestamp(base + 1055)) == (26, base + 1060)
    assert _list_offsets(admin, topic, OffsetSpec.max_timestamp()) == (59, base + 2190)
    tp = ck.TopicPartition(topic, 0, 30)
    admin.delete_records([tp])[tp].result(timeout=30)
    assert _list_offsets(admin, topic, OffsetSpec.for_timestamp(base + 1055)) == (30, base + 1100)
    assert _list_offsets(admin, topic, OffsetSpec.for_timestamp(base)) == (30, base + 1100)
    assert _list_offsets(admin, topic, OffsetSpec.earliest()) == (30, -1)


def test_list_offsets_by_timestamp_log_append_time(broker):
    """LogAppendTime: every record of a batch has the batch's append time, so a target at or
    before it answers the batch's first record, with that time."""
    topic = "ts-exact-append-time"
    create_topic(broker.bootstrap, topic, 1, config={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    _produce_one_batch(broker.bootstrap, topic, [1000 + i for i in range(10)], "gzip")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    offset, ts = _list_offsets(admin, topic, OffsetSpec.for_timestamp(before - 1))
    assert offset == 0 and ts >= before
    # The largest timestamp: the first record of the batch appended last. librdkafka may still
    # split the ten records in two batches on a loaded machine (a CI run saw offsets 0-6 and 7-9,
    # 6 ms apart): then that batch's first record, with its later append time.
    last, last_ts = _list_offsets(admin, topic, OffsetSpec.max_timestamp())
    assert (last, last_ts) == (0, ts) or (0 < last < 10 and last_ts > ts)


# ---------------------------------------------------------------- 2. authorized operations (KIP-430)

TOPIC_OPS = {AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE, AclOperation.ALTER,
             AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
CLUSTER_OPS = {AclOperation.CREATE, AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.CLUSTER_ACTION,
               AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE}
# Kafka 4.4's AclEntry.supportedOperations of a group (group configs: DESCRIBE_CONFIGS, ALTER_CONFIGS).
GROUP_OPS = {AclOperation.READ, AclOperation.DELETE, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS,
             AclOperation.ALTER_CONFIGS}


def test_authorized_operations_with_admin_client(broker):
    """describe_topics / describe_cluster / describe_consumer_groups with
    include_authorized_operations=True list every operation Kafka supports on the resource (no
    ACLs, so all allowed); without it, none are reported (the omitted sentinel)."""
    topic, group = "authz-ops", "authz-ops-group"
    create_topic(broker.bootstrap, topic, 2)
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    deadline = time.monotonic() + 30
    while not c.assignment() and time.monotonic() < deadline:
        c.poll(0.2)
    assert c.assignment()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    try:
        for asked in (True, False):
            td = admin.describe_topics(TopicCollection([topic]), include_authorized_operations=asked)[topic] \
                .result(timeout=30)
            cd = admin.describe_cluster(include_authorized_operations=asked).result(timeout=30)
            gd = admin.describe_consumer_groups([group], include_authorized_operations=asked)[group] \
                .result(timeout=30)
            assert len(td.partitions) == 2 and len(gd.members) == 1
            if asked:
                assert set(td.authorized_operations) == TOPIC_OPS
                assert set(cd.authorized_operations) == CLUSTER_OPS
                assert set(gd.authorized_operations) == GROUP_OPS
            else:
                assert td.authorized_operations is None
                assert cd.authorized_operations is None
                assert gd.authorized_operations is None
    finally:
        c.close()


def _metadata_v9(topic: str, *, cluster: bool, topics: bool):
    m = request_module(3, 9)
    return m.MetadataRequest(topics=(m.MetadataRequestTopic(name=topic),), allow_auto_topic_creation=False,
                             include_cluster_authorized_operations=cluster, include_topic_authorized_operations=topics)


def test_metadata_v9_cluster_and_topic_operations_bits(broker):
    """The exact bit fields, at Metadata v9 (the last version carrying the cluster's): bit n for
    AclOperation code n; an unknown topic's stays omitted."""
    create_topic(broker.bootstrap, "authz-bits", 1)
    topic_bits = sum(1 << op.value for op in TOPIC_OPS)
    cluster_bits = sum(1 << op.value for op in CLUSTER_OPS)
    assert (topic_bits, cluster_bits) == (3576, 8096)
    c = RawClient(broker.bootstrap)
    try:
        r = c.request(_metadata_v9("authz-bits", cluster=True, topics=True))
        assert r.cluster_authorized_operations == cluster_bits
        assert r.topics[0].topic_authorized_operations == topic_bits
        r = c.request(_metadata_v9("authz-bits", cluster=False, topics=False))
        assert r.cluster_authorized_operations == r.topics[0].topic_authorized_operations == -2147483648
        r = c.request(_metadata_v9("authz-missing", cluster=True, topics=True))
        assert r.topics[0].error_code.value == 3
        assert r.topics[0].topic_authorized_operations == -2147483648
    finally:
        c.close()


# ---------------------------------------------------------------- 3. operability


def _oncelog(*args):
    proc = subprocess.run([sys.executable, "-m", "oncelog", *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_admin_commands_take_bootstrap_server_before_or_after_the_verb(broker):
    """Kafka's tools' ``--bootstrap-server``, before the verb or after it, and the old
    ``--bootstrap``: each form reaches the broker (the default 127.0.0.1:9092 has none)."""
    b = broker.bootstrap
    _oncelog("topics", "create", "cli-after", "--partitions", "2", "--bootstrap-server", b)
    _oncelog("topics", "--bootstrap-server", b, "create", "cli-before")
    _oncelog("topics", "--bootstrap", b, "create", "cli-alias")
    for listing in (_oncelog("topics", "--bootstrap-server", b, "list"), _oncelog("topics", "list", "--bootstrap-server", b),
                    _oncelog("topics", "list", "--bootstrap", b)):
        assert {"cli-after", "cli-before", "cli-alias"} <= set(listing.split()), listing
    assert "cli-after" in _oncelog("topics", "describe", "cli-after", "--bootstrap-server", b)
    _oncelog("groups", "list", "--bootstrap-server", b)
    _oncelog("transactions", "list", "--bootstrap-server", b)
    _oncelog("producers", "describe", "cli-after", "--bootstrap-server", b)
    _oncelog("topics", "delete", "cli-alias", "--bootstrap-server", b)
    assert "cli-alias" not in _oncelog("topics", "--bootstrap-server", b, "list").split()


def _log(broker) -> str:
    with open(broker.log_path, errors="replace") as f:
        return f.read()


def _wait_for_log(broker, needle: str, timeout: float = 20.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = _log(broker)
        if needle in text:
            return text
        time.sleep(0.1)
    raise AssertionError(f"{needle!r} not in the broker log:\n{_log(broker)[-4000:]}")


def _lines(text: str, *needles: str) -> list[str]:
    return [line for line in text.splitlines() if all(n in line for n in needles)]


def test_new_data_dir_is_not_an_unclean_shutdown(broker_factory):
    b = broker_factory("fresh")
    text = _wait_for_log(b, "opened 0 topic(s)")
    assert "new data directory" in text and "unclean" not in text
    assert b.stop() == 0
    b.start()
    text = _wait_for_log(b, "(clean shutdown)")
    assert "unclean" not in text
    b.kill()
    b.start()
    _wait_for_log(b, "(unclean shutdown)")


def test_broker_logs_rejections_once_with_the_client_id(broker):
    """INVALID_CONFIG, NON_EMPTY_GROUP, INVALID_PRODUCER_EPOCH and transactional fencing each give
    one INFO line naming the client and the reason; five identical rejections give one line."""
    from confluent_kafka.admin import NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "client.id": "ops-admin"})
    for _ in range(5):
        fut = admin.create_topics([NewTopic("bad-config", 1, 1, config={"retention.ms": "soon"})])["bad-config"]
        with pytest.raises(ck.KafkaException):
            fut.result(timeout=30)
    text = _wait_for_log(broker, "INVALID_CONFIG")
    lines = _lines(text, "INFO", "ops-admin", "INVALID_CONFIG", "bad-config")
    assert len(lines) == 1, lines
    assert "retention.ms" in lines[0]

    # NON_EMPTY_GROUP: deleting a group with a live member.
    topic, group = "ops-topic", "ops-group"
    create_topic(broker.bootstrap, topic, 1)
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": "ops-consumer"})
    c.subscribe([topic])
    deadline = time.monotonic() + 30
    while not c.assignment() and time.monotonic() < deadline:
        c.poll(0.2)
    with pytest.raises(ck.KafkaException):
        admin.delete_consumer_groups([group], request_timeout=30)[group].result(timeout=30)
    text = _wait_for_log(broker, "NON_EMPTY_GROUP")
    assert len(_lines(text, "INFO", "ops-admin", "NON_EMPTY_GROUP", group)) == 1
    # The group's life is logged: the join and the stabilized generation.
    assert _lines(text, "INFO", f"group {group}: member ops-consumer", "joins")
    assert _lines(text, "INFO", f"group {group}: stabilized generation 1 with 1 member(s)")
    c.close()
    text = _wait_for_log(broker, f"group {group} with generation 2 is now empty")
    assert _lines(text, "INFO", f"group {group}: member ops-consumer", "left")

    # INVALID_PRODUCER_EPOCH: a producer's batch of an epoch older than the one it wrote with.
    from oncelog.protocol import records as rb
    from oncelog.client.wire import produce_request

    raw = RawClient(broker.bootstrap)
    try:
        now = int(time.time() * 1000)
        newer = rb.build_batch([(None, b"x")], timestamp_ms=now, producer_id=424242, producer_epoch=1,
                               base_sequence=0)
        assert raw.request(produce_request(topic, 0, newer)).responses[0].partition_responses[0].error_code.value == 0
        stale = rb.build_batch([(None, b"y")], timestamp_ms=now, producer_id=424242, producer_epoch=0,
                               base_sequence=1)
        for _ in range(3):
            resp = raw.request(produce_request(topic, 0, stale))
            assert resp.responses[0].partition_responses[0].error_code.value == 47
    finally:
        raw.close()
    text = _wait_for_log(broker, "INVALID_PRODUCER_EPOCH")
    lines = _lines(text, "INFO", "rawclient", "INVALID_PRODUCER_EPOCH")
    assert len(lines) == 1 and "424242" in lines[0], lines

    # Fencing: a second producer with the same transactional id fences the first.
    p1 = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "ops-txn", "client.id": "ops-zombie"})
    p1.init_transactions(30)
    p1.begin_transaction()
    p1.produce(topic, value=b"z")
    p1.flush(30)
    p2 = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "ops-txn", "client.id": "ops-new"})
    p2.init_transactions(30)
    with pytest.raises(ck.KafkaException):
        p1.commit_transaction(30)
    text = _wait_for_log(broker, "ops-zombie")
    fenced = [line for line in _lines(text, "INFO", "ops-zombie")
              if "PRODUCER_FENCED" in line or "INVALID_PRODUCER_EPOCH" in line]
    assert fenced and "transactional_id=ops-txn" in fenced[0], _lines(text, "ops-zombie")
    assert _lines(text, "INFO", "transactional id ops-txn: InitProducerId from client ops-new", "fenced")


def test_broker_logs_a_member_expiry(broker, tmp_path):
    """A consumer SIGKILLed mid-group: the broker logs the member's expiry after its session
    timeout, with its client id, and the rebalance that follows."""
    import signal

    topic, group = "ops-expiry", "ops-expiry-group"
    create_topic(broker.bootstrap, topic, 1)
    script = (
        "import confluent_kafka as ck, sys, time\n"
        f"c = ck.Consumer({{'bootstrap.servers': '{broker.bootstrap}', 'group.id': '{group}', "
        "'client.id': 'doomed', 'session.timeout.ms': 6000})\n"
        f"c.subscribe(['{topic}'])\n"
        "while not c.assignment():\n    c.poll(0.2)\n"
        "print('assigned', flush=True)\n"
        "while True:\n    c.poll(0.2)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "assigned"
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        text = _wait_for_log(broker, "expired: no heartbeat", timeout=30)
        lines = _lines(text, "INFO", f"group {group}: member doomed", "session.timeout.ms=6000")
        assert len(lines) == 1, lines
        text = _wait_for_log(broker, f"group {group} with generation 2 is now empty")
        assert _lines(text, f"group {group}: preparing to rebalance", "expired (session timeout)")
    finally:
        if proc.poll() is None:
            proc.kill()


# ---------------------------------------------------------------- 4. node.id, replica assignments


def test_node_id_is_configurable_and_kept_with_the_data(broker_factory):
    """serve --node-id 7: Metadata, DescribeCluster and FindCoordinator name node 7 and clients
    work through it; the data dir then refuses another node id, as Kafka's meta.properties."""
    b = broker_factory("node7", extra_args=["--node-id", "7"])
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    cluster = admin.describe_cluster().result(timeout=30)
    assert [n.id for n in cluster.nodes] == [7] and cluster.controller.id == 7
    create_topic(b.bootstrap, "on-node-7", 2)
    md = admin.list_topics("on-node-7", timeout=30)
    assert {p.leader for p in md.topics["on-node-7"].partitions.values()} == {7}
    assert list(md.brokers) == [7]
    p = ck.Producer({"bootstrap.servers": b.bootstrap})
    p.produce("on-node-7", value=b"x", partition=1)
    assert p.flush(30) == 0
    c = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": "node7-group", "auto.offset.reset": "earliest"})
    c.subscribe(["on-node-7"])
    msg = None
    deadline = time.monotonic() + 30
    while msg is None and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            msg = m
    c.commit(msg, asynchronous=False)  # through the group coordinator on node 7
    c.close()
    assert msg.value() == b"x"
    assert b.stop() == 0
    proc = subprocess.run([sys.executable, "-m", "oncelog", "serve", "--data-dir", b.data_dir, "--port", "0",
                           "--node-id", "8"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "node.id 7" in proc.stderr and "node.id 8" in proc.stderr, proc.stderr


def test_create_topics_with_an_unknown_broker_is_invalid_replica_assignment(broker):
    """Explicit assignments naming a broker that is not registered (or one broker twice, or an
    empty list) are INVALID_REPLICA_ASSIGNMENT (39), as Kafka; naming this broker works."""
    from confluent_kafka.admin import NewPartitions, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for assignment in ([[1], [2]], [[1, 1]], [[1, 2]]):
        fut = admin.create_topics([NewTopic("assigned", len(assignment), replica_assignment=assignment)])["assigned"]
        with pytest.raises(ck.KafkaException) as info:
            fut.result(timeout=30)
        assert info.value.args[0].code() == ck.KafkaError.INVALID_REPLICA_ASSIGNMENT == 39, (assignment, info.value)
    admin.create_topics([NewTopic("assigned", 2, replica_assignment=[[1], [1]])])["assigned"].result(timeout=30)
    assert len(admin.list_topics("assigned", timeout=30).topics["assigned"].partitions) == 2
    fut = admin.create_partitions([NewPartitions("assigned", 3, replica_assignment=[[5]])])["assigned"]
    with pytest.raises(ck.KafkaException) as info:
        fut.result(timeout=30)
    assert info.value.args[0].code() == 39
    admin.create_partitions([NewPartitions("assigned", 3, replica_assignment=[[1]])])["assigned"].result(timeout=30)
    assert len(admin.list_topics("assigned", timeout=30).topics["assigned"].partitions) == 3
