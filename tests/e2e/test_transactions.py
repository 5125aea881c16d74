"""Transactions against a real broker with real clients: commit/abort visibility, the LSO,
zombie fencing, timeouts, other clients, transaction version 2, and crashes of the broker in
each coordinator state (real SIGKILLs).

Each test runs against oncelog and against a one-node Apache Kafka (``both_brokers``), which is
shared by the session: topic, transactional and group ids are unique. Those that crash the broker
(SIGKILL, oncelog's crash points) are oncelog-only."""

from __future__ import annotations

import datetime
import time

import confluent_kafka as ck
import pytest

from oncelog.protocol import records as rb
from oncelog.client.wire import RawClient, request_module

from ..helpers import (COORDINATOR_GROUP, COORDINATOR_TRANSACTION, coordinator_address, create_topic, leader_address,
                       on_apache_kafka, unique, wait_for_partitions)

pytestmark = pytest.mark.both_brokers


def read_values(bootstrap, topics_partitions, isolation, *, settle=2.0, timeout=30.0):
    """Everything readable now at the given isolation level: {(topic, partition): [values]}."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{time.monotonic_ns()}", "isolation.level": isolation,
                     "enable.auto.commit": False, "fetch.wait.max.ms": 50})
    c.assign([ck.TopicPartition(t, p, 0) for t, p in topics_partitions])
    out = {tp: [] for tp in topics_partitions}
    deadline, quiet_since = time.monotonic() + timeout, time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - quiet_since < settle:
        msgs = c.consume(1000, 0.2)
        for m in msgs:
            if m.error():
                if m.error().code() == ck.KafkaError._PARTITION_EOF:
                    continue
                raise AssertionError(m.error())
            out[(m.topic(), m.partition())].append(m.value())
        if msgs:
            quiet_since = time.monotonic()
    c.close()
    return out


def lso(bootstrap, topic, partition):
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "lso", "isolation.level": "read_committed"})
    low, high = c.get_watermark_offsets(ck.TopicPartition(topic, partition), timeout=10)
    c.close()
    return high  # librdkafka's high watermark at read_committed is the LSO


def txn_producer(bootstrap, txn_id, **extra):
    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 1, **extra})
    p.init_transactions(30)
    return p


def test_commit_and_abort_across_partitions_of_two_topics(broker):
    ta, tb = unique("ta"), unique("tb")
    TPS = [(t, p) for t in (ta, tb) for p in range(3)]
    create_topic(broker.bootstrap, ta, 3)
    create_topic(broker.bootstrap, tb, 3)
    p = txn_producer(broker.bootstrap, unique("tx-visibility"))
    p.begin_transaction()
    for i in range(30):
        t, q = TPS[i % 6]
        p.produce(t, value=f"commit-{i}".encode(), partition=q)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(30):
        t, q = TPS[i % 6]
        p.produce(t, value=f"abort-{i}".encode(), partition=q)
    p.flush(30)
    p.abort_transaction(30)
    committed = read_values(broker.bootstrap, TPS, "read_committed")
    everything = read_values(broker.bootstrap, TPS, "read_uncommitted")
    assert sorted(v for vs in committed.values() for v in vs) == sorted(f"commit-{i}".encode() for i in range(30))
    assert sorted(v for vs in everything.values() for v in vs) == sorted(
        [f"commit-{i}".encode() for i in range(30)] + [f"abort-{i}".encode() for i in range(30)])
    for tp, values in committed.items():  # every partition got 5 of each, in order
        assert values == [f"commit-{i}".encode() for i in range(30) if TPS[i % 6] == tp]


def test_read_committed_stops_at_open_transaction_and_continues_after_commit(broker):
    topic = unique("lso")
    create_topic(broker.bootstrap, topic, 1)
    wait_for_partitions(broker.bootstrap, topic, 1)  # the plain writes below are stored in order
    plain = ck.Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(5):
        plain.produce(topic, value=f"before-{i}".encode())
    plain.flush(10)
    p = txn_producer(broker.bootstrap, unique("tx-lso"))
    p.begin_transaction()
    p.produce(topic, value=b"in-txn")
    p.flush(10)
    for i in range(3):  # non-transactional data after the open transaction's first offset
        plain.produce(topic, value=f"after-{i}".encode())
    plain.flush(10)
    assert lso(broker.bootstrap, topic, 0) == 5  # the open transaction's first offset
    assert read_values(broker.bootstrap, [(topic, 0)], "read_committed")[(topic, 0)] == [f"before-{i}".encode() for i in range(5)]
    assert len(read_values(broker.bootstrap, [(topic, 0)], "read_uncommitted")[(topic, 0)]) == 9
    p.commit_transaction(30)
    # EndTxn is answered once the commit is decided; the markers (and so the LSO) follow, in
    # Kafka as here: wait for them rather than read the LSO once.
    deadline = time.monotonic() + 10
    while lso(broker.bootstrap, topic, 0) != 10 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert lso(broker.bootstrap, topic, 0) == 10  # 5 + txn record + 3 + commit marker
    assert read_values(broker.bootstrap, [(topic, 0)], "read_committed")[(topic, 0)] == (
        [f"before-{i}".encode() for i in range(5)] + [b"in-txn"] + [f"after-{i}".encode() for i in range(3)])


def test_zombie_is_fenced_and_leaves_nothing_visible(broker):
    topic, txn_id = unique("z"), unique("tx-zombie")
    create_topic(broker.bootstrap, topic, 1)
    zombie = txn_producer(broker.bootstrap, txn_id)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie-1")
    zombie.flush(10)
    successor = txn_producer(broker.bootstrap, txn_id)  # fences the first, aborts its transaction
    zombie.produce(topic, value=b"zombie-2")
    with pytest.raises(ck.KafkaException) as info:
        zombie.commit_transaction(20)
    err = info.value.args[0]
    assert err.fatal() or "fenced" in err.str().lower(), err
    successor.begin_transaction()
    successor.produce(topic, value=b"successor")
    successor.commit_transaction(30)
    assert read_values(broker.bootstrap, [(topic, 0)], "read_committed")[(topic, 0)] == [b"successor"]


def test_transaction_timeout_aborts_fences_and_moves_the_lso(broker):
    topic = unique("slow")
    create_topic(broker.bootstrap, topic, 1)
    p = txn_producer(broker.bootstrap, unique("tx-slow"), **{"transaction.timeout.ms": 1500})
    p.begin_transaction()
    p.produce(topic, value=b"late")
    p.flush(10)
    assert lso(broker.bootstrap, topic, 0) == 0
    # Kafka looks for timed-out transactions every 10 s (transaction.abort.timed.out.transaction.
    # cleanup.interval.ms), oncelog at once: wait for the abort, not for a time.
    deadline = time.monotonic() + 30
    while lso(broker.bootstrap, topic, 0) == 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert lso(broker.bootstrap, topic, 0) == 2  # data + abort marker
    with pytest.raises(ck.KafkaException):
        p.commit_transaction(10)
    assert read_values(broker.bootstrap, [(topic, 0)], "read_committed")[(topic, 0)] == []
    if not on_apache_kafka(broker):
        assert "timed out" in broker.tail_log(50)


def test_kafka_python_transactional_producer(broker):
    from kafka import KafkaProducer

    topic = unique("kp")
    create_topic(broker.bootstrap, topic, 2)
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=unique("tx-kafka-python"))
    p.init_transactions()
    p.begin_transaction()
    for i in range(20):
        p.send(topic, value=f"c{i}".encode(), partition=i % 2)
    p.commit_transaction()
    p.begin_transaction()
    for i in range(20):
        p.send(topic, value=f"a{i}".encode(), partition=i % 2)
    p.flush()
    p.abort_transaction()
    p.close()
    got = read_values(broker.bootstrap, [(topic, 0), (topic, 1)], "read_committed")
    assert sorted(got[(topic, 0)] + got[(topic, 1)]) == sorted(f"c{i}".encode() for i in range(20))


def test_aiokafka_transactional_producer_with_offsets(broker):
    import asyncio

    from aiokafka import AIOKafkaProducer

    topic, source, group = unique("ai"), unique("ai-in"), unique("ai-group")
    create_topic(broker.bootstrap, topic, 1)
    create_topic(broker.bootstrap, source, 1)

    async def go():
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=unique("tx-aiokafka"))
        await p.start()
        async with p.transaction():
            await p.send_and_wait(topic, b"committed")
            await p.send_offsets_to_transaction({__import__("aiokafka").TopicPartition(source, 0): 17}, group)
        await p.begin_transaction()
        await p.send_and_wait(topic, b"aborted")
        await p.abort_transaction()
        await p.stop()

    asyncio.run(go())
    assert read_values(broker.bootstrap, [(topic, 0)], "read_committed")[(topic, 0)] == [b"committed"]
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    assert c.committed([ck.TopicPartition(source, 0)], timeout=10)[0].offset == 17
    c.close()


def test_transactional_offsets_are_pending_until_commit(broker):
    from oncelog.client.wire import RawClient

    src, dst, group = unique("src"), unique("dst"), unique("g-off")
    create_topic(broker.bootstrap, src, 1)
    create_topic(broker.bootstrap, dst, 1)
    p = txn_producer(broker.bootstrap, unique("tx-offsets"))
    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    p.begin_transaction()
    p.produce(dst, value=b"x")
    p.send_offsets_to_transaction([ck.TopicPartition(src, 0, 42)], consumer.consumer_group_metadata(), 20)
    p.flush(10)
    # pending: invisible to a plain fetch, UNSTABLE_OFFSET_COMMIT for require_stable
    m = request_module(9, 7)
    raw = RawClient(coordinator_address(broker.bootstrap, group, COORDINATOR_GROUP))  # the group's coordinator

    def fetch(stable):
        r = raw.request(m.OffsetFetchRequest(group_id=group, topics=(m.OffsetFetchRequestTopic(name=src, partition_indexes=(0,)),),
                                             require_stable=stable))
        part = r.topics[0].partitions[0]
        return part.committed_offset, part.error_code

    assert fetch(False) == (-1, 0)
    assert fetch(True) == (-1, 88)  # UNSTABLE_OFFSET_COMMIT
    p.commit_transaction(30)
    # EndTxn is answered once PrepareCommit is durable; the markers follow right after
    deadline = time.monotonic() + 10
    while fetch(True) != (42, 0) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert fetch(True) == (42, 0)
    consumer.close()
    raw.close()


@pytest.mark.oncelog_only("SIGKILLs and restarts the broker")
@pytest.mark.crash
def test_init_producer_id_right_after_a_restart_aborts_the_open_transaction_at_once(broker):
    """The soak's stall once suggested the coordinator of answering CONCURRENT_TRANSACTIONS for 22 s across
    broker restarts (it was twelve worker instances, each answered once). Right after a SIGKILL
    and restart, a new instance's InitProducerId finds the replayed Ongoing transaction (data on
    two partitions and a pending transactional offset commit): the first answer is
    CONCURRENT_TRANSACTIONS while the abort runs, the next one (queued behind the abort's writes)
    carries the bumped epoch, within well under a second even on a loaded machine. The abort
    settles the pending offsets (require_stable no longer sees UNSTABLE_OFFSET_COMMIT) and the
    last stable offset moves past the aborted data."""
    create_topic(broker.bootstrap, "src", 1)
    create_topic(broker.bootstrap, "dst", 2)
    p = txn_producer(broker.bootstrap, "tx-restart")
    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g-restart"})
    p.begin_transaction()
    p.produce("dst", value=b"x", partition=0)
    p.produce("dst", value=b"y", partition=1)
    p.send_offsets_to_transaction([ck.TopicPartition("src", 0, 7)], consumer.consumer_group_metadata(), 20)
    p.flush(10)
    consumer.close()
    broker.kill()
    broker.restart()
    raw = RawClient(coordinator_address(broker.bootstrap, "tx-restart", COORDINATOR_TRANSACTION))
    init = request_module(22, 4)
    answers = []
    started = time.monotonic()
    while not answers or answers[-1].error_code == 51:  # CONCURRENT_TRANSACTIONS
        answers.append(raw.request(init.InitProducerIdRequest(
            transactional_id="tx-restart", transaction_timeout=datetime.timedelta(seconds=60), producer_id=-1,
            producer_epoch=-1)))
    took = time.monotonic() - started
    assert [a.error_code for a in answers] == [51, 0], [a.error_code for a in answers]
    assert answers[-1].producer_epoch == 2  # 0 for the old instance, 1 for the fence, 2 for this one
    assert took < 1.0, f"InitProducerId took {took:.3f} s after the restart"
    fetch = request_module(9, 7)
    raw.close()
    raw = RawClient(coordinator_address(broker.bootstrap, "g-restart", COORDINATOR_GROUP))
    r = raw.request(fetch.OffsetFetchRequest(group_id="g-restart", require_stable=True, topics=(
        fetch.OffsetFetchRequestTopic(name="src", partition_indexes=(0,)),)))
    part = r.topics[0].partitions[0]
    assert (part.committed_offset, part.error_code) == (-1, 0)  # aborted: no offset, nothing pending
    assert (lso(broker.bootstrap, "dst", 0), lso(broker.bootstrap, "dst", 1)) == (2, 2)  # record + ABORT marker
    assert read_values(broker.bootstrap, [("dst", 0), ("dst", 1)], "read_committed") == {("dst", 0): [], ("dst", 1): []}


def tv2_produce(client, topic, txn_id, pid, epoch, seq, value, version=12):
    batch = rb.build_batch([(None, value)], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                           attributes=rb.ATTR_TRANSACTIONAL)
    m = request_module(0, version)
    req = m.ProduceRequest(transactional_id=txn_id, acks=-1, timeout=datetime.timedelta(seconds=10),
                           topic_data=(m.TopicProduceData(name=topic, partition_data=(m.PartitionProduceData(index=0, records=batch),)),))
    return client.request(req).responses[0].partition_responses[0].error_code


def init_transactional_producer_id(bootstrap, txn_id, timeout=60.0):
    """(a RawClient to the coordinator, producer id, epoch) from InitProducerId v5 for a new
    transactional id, as a client gets it: FindCoordinator(TRANSACTION) first (on a cluster of nodes
    another node than the bootstrap's may be the coordinator), retrying the coordinator's transient
    answers. A fresh Kafka creates __transaction_state on the first FindCoordinator
    (COORDINATOR_NOT_AVAILABLE until then) and then loads it (InitProducerId NOT_COORDINATOR, then
    COORDINATOR_LOAD_IN_PROGRESS); oncelog's coordinator answers at once."""
    init = request_module(22, 5)
    transient = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
    deadline = time.monotonic() + timeout
    while True:
        client = RawClient(coordinator_address(bootstrap, txn_id, COORDINATOR_TRANSACTION, timeout))
        r = client.request(init.InitProducerIdRequest(
            transactional_id=txn_id, transaction_timeout=datetime.timedelta(seconds=60), producer_id=-1, producer_epoch=-1))
        if r.error_code == 0:
            return client, r.producer_id, r.producer_epoch
        client.close()
        assert r.error_code in transient and time.monotonic() < deadline, r
        time.sleep(0.1)


def test_transaction_version_2_bumps_the_epoch_so_late_requests_are_fenced(broker):
    """KAFKA-17754: with TV2 a delayed EndTxn or produce of an earlier transaction cannot
    commit or abort a later one: EndTxn bumps the epoch, and the earlier epoch's produce is
    INVALID_PRODUCER_EPOCH, its EndTxn (abort or commit) PRODUCER_FENCED, as Kafka 4.4 answers.
    (A transaction aborted on timeout is another case: tests/txn/test_timeouts.py.)"""
    topic, txn_id = unique("tv2"), unique("tx-tv2")
    create_topic(broker.bootstrap, topic, 1)
    wait_for_partitions(broker.bootstrap, topic, 1)  # Kafka leads the partition a moment after CreateTopics
    c, pid, epoch = init_transactional_producer_id(broker.bootstrap, txn_id)  # the transaction coordinator
    leader = RawClient(leader_address(broker.bootstrap, topic, 0))  # produce goes to the partition's leader
    end = request_module(26, 5)

    def end_txn(e, commit=True):
        return c.request(end.EndTxnRequest(transactional_id=txn_id, producer_id=pid, producer_epoch=e, committed=commit))

    # transaction 1: Produce v12 adds the partition implicitly
    assert tv2_produce(leader, topic, txn_id, pid, epoch, 0, b"t1") == 0
    r1 = end_txn(epoch)
    assert r1.error_code == 0 and r1.producer_epoch == epoch + 1
    # a retried EndTxn of transaction 1 is answered again (once its markers are written),
    # changing nothing
    deadline = time.monotonic() + 10
    while (retry := end_txn(epoch)).error_code == 51 and time.monotonic() < deadline:  # CONCURRENT_TRANSACTIONS
        time.sleep(0.05)
    assert retry.error_code == 0 and retry.producer_epoch == epoch + 1
    # transaction 2 with the new epoch
    assert tv2_produce(leader, topic, txn_id, pid, epoch + 1, 0, b"t2") == 0
    # a late produce of transaction 1 (old epoch) is fenced and does not join transaction 2
    assert tv2_produce(leader, topic, txn_id, pid, epoch, 1, b"late-t1") == 47  # INVALID_PRODUCER_EPOCH
    # a late abort or commit of transaction 1 (old epoch) can neither abort nor commit transaction 2
    assert end_txn(epoch, commit=False).error_code == 90  # PRODUCER_FENCED
    assert end_txn(epoch, commit=True).error_code == 90
    r2 = end_txn(epoch + 1)
    assert r2.error_code == 0 and r2.producer_epoch == epoch + 2
    c.close()
    leader.close()
    got = read_values(broker.bootstrap, [(topic, 0)], "read_committed")[(topic, 0)]
    assert got == [b"t1", b"t2"]


@pytest.mark.oncelog_only("oncelog's crash points (ONCELOG_CRASH_POINT) SIGKILL the broker in each coordinator state")
@pytest.mark.parametrize("crash_point, visible", [
    ("txn-durable:PrepareCommit", True),
    ("markers:after-first", True),
    ("txn-durable:PrepareAbort", False),
    ("txn-durable:CompleteCommit", True),
    ("txn-durable:Ongoing", False),
])
def test_broker_sigkill_in_each_coordinator_state_ends_consistently(broker_factory, crash_point, visible):
    broker = broker_factory(env={"ONCELOG_CRASH_POINT": crash_point})
    create_topic(broker.bootstrap, "st", 2)
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "tx-crash",
                     "transaction.timeout.ms": 3000, "message.timeout.ms": 3000})
    try:
        p.init_transactions(20)
        p.begin_transaction()
        p.produce("st", value=b"v0", partition=0)
        p.produce("st", value=b"v1", partition=1)
        p.flush(5)
        if "Abort" in crash_point:
            p.abort_transaction(5)
        else:
            p.commit_transaction(5)
    except ck.KafkaException:
        pass  # the broker died under it
    deadline = time.monotonic() + 20
    while broker.proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert broker.proc.poll() is not None, f"crash point {crash_point} was not reached"
    assert f"crash point {crash_point} reached" in broker.tail_log(20)
    broker.env = {}
    broker.restart()
    # after recovery (roll-forward of Prepare*, timeout abort of Ongoing) the outcome is whole
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (lso(broker.bootstrap, "st", 0) < 2 or lso(broker.bootstrap, "st", 1) < 2):
        time.sleep(0.2)
    got = read_values(broker.bootstrap, [("st", 0), ("st", 1)], "read_committed")
    assert (got[("st", 0)], got[("st", 1)]) == (([b"v0"], [b"v1"]) if visible else ([], []))
