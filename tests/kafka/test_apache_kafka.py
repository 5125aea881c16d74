"""Apache Kafka itself (oncelog.tools.apache_kafka) as the reference the connector is held to: the single
node and the 3-node KRaft cluster start from the Maven Central cache, a confluent-kafka
transactional producer commits and a read_committed consumer reads exactly that back, and on the
3-node cluster a SIGKILLed partition leader or transaction coordinator costs no committed record.
These tests check the harness that the connector's Apache Kafka tests and the demo stand on."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from ..helpers import need_apache_kafka

pytestmark = [pytest.mark.e2e, pytest.mark.apache_kafka]


def test_two_first_fetches_at_once_run_maven_once(tmp_path):
    """The cache is shared: of two processes fetching into an empty cache at the same moment, one
    runs Maven and the other waits on the lock and finds the jars; later calls run nothing."""
    from oncelog.tools.apache_kafka import fetch

    need_apache_kafka("Apache Kafka", fetch)  # Maven's repository warm: the fetches below download nothing
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    code = "from oncelog.tools.apache_kafka import fetch; print(fetch(quiet=False).lib)"
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    lib = tmp_path / "oncelog" / "apache-kafka" / fetch().version / "lib"
    assert {out.strip() for out, _ in outs} == {str(lib)}
    assert sum("fetching Apache Kafka" in err for _, err in outs) == 1, outs
    assert any(name.startswith("kafka_2.13-") for name in os.listdir(lib))
    again = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "fetching" not in again.stderr, again
    assert sorted(os.listdir(lib.parent)) == [".lock", "fetch.json", "fetch.log", "lib", "log4j2.properties"]


def _create_topic(bootstrap: str, name: str, partitions: int) -> None:
    # replication_factor -1: the cluster's default.replication.factor (3 on the 3-node cluster)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, -1)])[name].result(timeout=60)


def _producer(bootstrap: str, transactional_id: str) -> ck.Producer:
    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                     "linger.ms": 5, "error_cb": lambda err: None})  # broker-down notices: expected here
    p.init_transactions(60)
    return p


def _commit(producer: ck.Producer, topic: str, values: list[str], partitions: int = 1) -> None:
    producer.begin_transaction()
    for i, v in enumerate(values):
        producer.produce(topic, v.encode(), key=str(i).encode(), partition=i % partitions)
    producer.commit_transaction(60)


def _read_committed(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 60.0) -> dict[int, list[str]]:
    """Every record of ``topic`` from offset 0, read_committed, until ``expected`` arrived and a
    further half second brings nothing (a duplicate or an aborted record would show up there)."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"audit-{uuid.uuid4().hex[:8]}",
                     "isolation.level": "read_committed", "enable.auto.commit": False,
                     "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100, "error_cb": lambda err: None})
    c.assign([ck.TopicPartition(topic, p, 0) for p in range(partitions)])
    out: dict[int, list[str]] = {p: [] for p in range(partitions)}
    got, quiet_since = 0, None
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            batch = c.consume(1000, 0.25)
            for m in batch:
                if m.error():
                    assert m.error().retriable() or m.error().code() in (ck.KafkaError._TRANSPORT,
                                                                        ck.KafkaError._ALL_BROKERS_DOWN), m.error()
                    continue
                out[m.partition()].append(m.value().decode())
                got += 1
            if got >= expected:
                quiet_since = quiet_since or time.monotonic()
                if batch:
                    quiet_since = time.monotonic()
                elif time.monotonic() - quiet_since > 0.5:
                    break
    finally:
        c.close()
    return out


def test_single_node_commits_and_reads_back_only_committed(apache_kafka):
    assert apache_kafka.node_ids() == [1]
    assert {b.node_id for b in apache_kafka.metadata().brokers} == {1}
    topic, txn = f"t-{uuid.uuid4().hex[:8]}", f"txn-{uuid.uuid4().hex[:8]}"
    _create_topic(apache_kafka.bootstrap, topic, 3)
    producer = _producer(apache_kafka.bootstrap, txn)
    assert apache_kafka.transaction_coordinator(txn) == 1
    committed = [f"c-{i}" for i in range(300)]
    _commit(producer, topic, committed[:150], 3)
    producer.begin_transaction()  # an aborted transaction between two committed ones
    for i in range(100):
        producer.produce(topic, f"aborted-{i}".encode(), partition=i % 3)
    producer.abort_transaction(60)
    _commit(producer, topic, committed[150:], 3)
    read = _read_committed(apache_kafka.bootstrap, topic, 3, len(committed))
    for p in range(3):
        assert read[p] == [v for i, v in enumerate(committed[:150]) if i % 3 == p] + \
            [v for i, v in enumerate(committed[150:]) if i % 3 == p]


def test_three_nodes_replicate_every_topic_and_the_transaction_log(apache_kafka_cluster):
    cluster = apache_kafka_cluster
    assert {b.node_id for b in cluster.metadata().brokers} == {1, 2, 3}
    topic, txn = f"t-{uuid.uuid4().hex[:8]}", f"txn-{uuid.uuid4().hex[:8]}"
    _create_topic(cluster.bootstrap, topic, 2)
    producer = _producer(cluster.bootstrap, txn)
    values = [f"v-{i}" for i in range(200)]
    _commit(producer, topic, values, 2)
    read = _read_committed(cluster.bootstrap, topic, 2, len(values))
    assert read == {p: [v for i, v in enumerate(values) if i % 2 == p] for p in range(2)}
    meta = cluster.metadata([topic, "__transaction_state"])
    for t in meta.topics:
        assert t.error_code == 0, t
        for p in t.partitions:
            assert sorted(p.replica_nodes) == [1, 2, 3], (t.name, p)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})  # kept: its futures die with it
    configs = admin.describe_configs([ck.admin.ConfigResource(ck.admin.ResourceType.TOPIC, topic)])
    config = next(iter(configs.values())).result(timeout=30)
    assert config["min.insync.replicas"].value == "2"


def test_sigkill_of_the_partition_leader_loses_no_committed_record(apache_kafka_cluster):
    """acks=all transactions go on once the leader moves to an in-sync follower; everything committed
    before and after the kill reads back, read_committed, with two of three nodes up; the killed
    node restarts, catches up and rejoins the ISR."""
    cluster = apache_kafka_cluster
    topic, txn = f"t-{uuid.uuid4().hex[:8]}", f"txn-{uuid.uuid4().hex[:8]}"
    _create_topic(cluster.bootstrap, topic, 1)
    producer = _producer(cluster.bootstrap, txn)
    before = [f"before-{i}" for i in range(500)]
    _commit(producer, topic, before)
    leader = cluster.wait_for_leader(topic, 0)
    cluster.kill(leader)
    new_leader = cluster.wait_for_leader(topic, 0, not_on=leader)
    assert new_leader != leader and new_leader in cluster.live_node_ids()
    after = [f"after-{i}" for i in range(500)]
    _commit(producer, topic, after)
    assert _read_committed(cluster.bootstrap, topic, 1, 1000) == {0: before + after}
    cluster.restart(leader)
    deadline = time.monotonic() + 60
    while sorted(cluster.metadata([topic]).topics[0].partitions[0].isr_nodes) != [1, 2, 3]:
        assert time.monotonic() < deadline, "the restarted node did not rejoin the ISR"
        time.sleep(0.1)


def test_sigkill_of_the_transaction_coordinator_mid_transaction(apache_kafka_cluster):
    """The records of a transaction open when its coordinator's node dies commit once the
    producer finds the new coordinator (__transaction_state has RF 3, min ISR 2)."""
    cluster = apache_kafka_cluster
    topic, txn = f"t-{uuid.uuid4().hex[:8]}", f"txn-{uuid.uuid4().hex[:8]}"
    _create_topic(cluster.bootstrap, topic, 3)
    producer = _producer(cluster.bootstrap, txn)
    first = [f"first-{i}" for i in range(150)]
    _commit(producer, topic, first, 3)
    coordinator = cluster.transaction_coordinator(txn)
    second = [f"second-{i}" for i in range(150)]
    producer.begin_transaction()
    for i, v in enumerate(second):
        producer.produce(topic, v.encode(), partition=i % 3)
    producer.flush(60)
    cluster.kill(coordinator)
    producer.commit_transaction(120)
    assert cluster.transaction_coordinator(txn) != coordinator
    read = _read_committed(cluster.bootstrap, topic, 3, 300)
    assert read == {p: [v for i, v in enumerate(first) if i % 3 == p] + [v for i, v in enumerate(second) if i % 3 == p]
                    for p in range(3)}
