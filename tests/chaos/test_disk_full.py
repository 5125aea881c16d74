"""A full disk under a real broker: writes are refused, nothing acknowledged is lost, and writes
resume by themselves once space returns.

The broker (``oncelog serve``, a subprocess) keeps its data dir on a small tmpfs
(:class:`oncelog.chaos.disk.SmallDisk`); a ballast file (:class:`oncelog.chaos.disk.Ballast`)
takes every free page. Then, with real clients (confluent-kafka and the project's protocol
client):

* a Produce is answered KAFKA_STORAGE_ERROR per partition; the broker stays up and serves reads
  of everything acknowledged before;
* coordinator writes (``__transaction_state``, ``__consumer_offsets``) are refused with
  NOT_COORDINATOR, as Kafka's coordinators answer a KAFKA_STORAGE_ERROR of their log, and what
  was not written is not installed (the transaction stays Ongoing, the offset is not visible);
* once the ballast is released the same broker process accepts writes again (no restart);
* after a SIGKILL and a restart an independent read_committed reader finds every acknowledged
  record exactly once, at its acknowledged offset, and nothing else: a refused write left no
  bytes behind (no torn batch for recovery to cut, no stray record).

Records that must not fit in the slack of a page a file already holds (tmpfs refuses a write only
when it needs a new page) are made larger than a page: raw batches of 64 KiB, a transaction over
twenty long topic names (its PrepareCommit record is ~5 KB), offset metadata of 4000 bytes.

Skipped only when the tmpfs cannot be mounted (not root); under CI=true as root it must run.
"""

from __future__ import annotations

import datetime
import os
import time

import confluent_kafka as ck
import pytest

from oncelog.chaos.disk import Ballast
from oncelog.client.kafka import READ_COMMITTED, KafkaClient
from oncelog.client.wire import RawClient, request_module
from oncelog.process import BrokerProcess
from oncelog.protocol import records as rb

from ..helpers import create_topic, mount_small_disk

pytestmark = pytest.mark.e2e

DISK_BYTES = 48 << 20
KAFKA_STORAGE_ERROR = 56
NOT_COORDINATOR = 16


@pytest.fixture
def small_disk(tmp_path):
    disk = mount_small_disk(str(tmp_path / "disk"), DISK_BYTES)
    try:
        yield disk
    finally:
        disk.unmount()


@pytest.fixture
def disk_broker(small_disk, tmp_path):
    """A broker whose data dir is on the small disk (its log is not), checkpointing, rolling and
    compacting often, so those background writes also meet the full disk."""
    broker = BrokerProcess(
        os.path.join(small_disk.path, "data"), log_path=str(tmp_path / "broker.log"),
        extra_args=["--offsets-topic-partitions", "2", "--override", "transaction.state.log.num.partitions=2",
                    "--override", "log.flush.offset.checkpoint.interval.ms=200", "--segment-ms", "500",
                    "--log-cleaner-interval-ms", "300", "--retention-check-ms", "300"])
    broker.start()
    try:
        yield broker
    finally:
        broker.kill()


@pytest.fixture
def ballast(small_disk):
    b = Ballast(os.path.join(small_disk.path, "ballast"))
    yield b
    b.release()


# --------------------------------------------------------------------------- helpers


def assert_alive(broker: BrokerProcess) -> None:
    assert broker.proc.poll() is None, f"the broker exited ({broker.proc.returncode}):\n{broker.tail_log(60)}"


def raw_produce(bootstrap: str, topic: str, partition: int, value: bytes) -> tuple[int, int]:
    """(error code, base offset) of one acks=all Produce of one plain batch holding ``value``."""
    m = request_module(0, 9)
    batch = rb.build_batch([(None, value)], timestamp_ms=int(time.time() * 1000))
    req = m.ProduceRequest(transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=10), topic_data=(
        m.TopicProduceData(name=topic, partition_data=(m.PartitionProduceData(index=partition, records=batch),)),))
    client = RawClient(bootstrap)
    try:
        p = client.request(req).responses[0].partition_responses[0]
    finally:
        client.close()
    return int(p.error_code), p.base_offset


def describe_transaction(bootstrap: str, txn_id: str) -> str:
    m = request_module(65, 0)
    client = RawClient(bootstrap)
    try:
        state = client.request(m.DescribeTransactionsRequest(transactional_ids=(txn_id,))).transaction_states[0]
    finally:
        client.close()
    assert state.error_code == 0, state
    return state.transaction_state


class Acks:
    """Delivery reports of a confluent producer: (topic, partition, offset, value) acknowledged."""

    def __init__(self) -> None:
        self.acked: list[tuple[str, int, int, bytes]] = []
        self.errors: list[str] = []

    def __call__(self, err, msg) -> None:
        if err is None:
            self.acked.append((msg.topic(), msg.partition(), msg.offset(), msg.value()))
        else:
            self.errors.append(str(err))


def read_committed(bootstrap: str, partitions: list[tuple[str, int]], *, want: int,
                   timeout: float = 60.0) -> list[tuple[str, int, int, bytes]]:
    """Every record a fresh read_committed confluent consumer reads from offset 0 of
    ``partitions``, until it has at least ``want`` records and has reached the end (EOF: the
    last stable offset) of every partition."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.monotonic_ns()}",
                     "enable.auto.commit": False, "isolation.level": "read_committed",
                     "enable.partition.eof": True, "fetch.wait.max.ms": 50})
    c.assign([ck.TopicPartition(t, p, 0) for t, p in partitions])
    out: list[tuple[str, int, int, bytes]] = []
    at_end: set[tuple[str, int]] = set()
    deadline = time.monotonic() + timeout
    try:
        while len(out) < want or len(at_end) < len(partitions):
            assert time.monotonic() < deadline, (f"read {len(out)} of {want} records, at the end of "
                                                 f"{len(at_end)} of {len(partitions)} partitions")
            for m in c.consume(1000, 0.2):
                if m.error() is not None:
                    if m.error().code() == ck.KafkaError._PARTITION_EOF:
                        at_end.add((m.topic(), m.partition()))
                        continue
                    raise AssertionError(f"consumer error: {m.error()}")
                at_end.discard((m.topic(), m.partition()))
                out.append((m.topic(), m.partition(), m.offset(), m.value()))
    finally:
        c.close()
    return out


def assert_exactly(read: list[tuple[str, int, int, bytes]], acked: list[tuple[str, int, int, bytes]]) -> None:
    """Every acknowledged record once, at its offset; nothing else."""
    assert len(set(acked)) == len(acked)
    seen = sorted(read)
    expected = sorted(acked)
    if seen != expected:
        missing = sorted(set(expected) - set(seen))
        extra = sorted(set(seen) - set(expected))
        dups = len(seen) - len(set(seen))
        raise AssertionError(f"read {len(seen)} records, {len(expected)} acknowledged: {len(missing)} missing "
                             f"(first {[(t, p, o) for t, p, o, _ in missing[:5]]}), {len(extra)} not acknowledged "
                             f"(first {[(t, p, o, v[:20]) for t, p, o, v in extra[:5]]}), {dups} duplicates")


def wait_for_log(broker: BrokerProcess, text: str, producer: ck.Producer, timeout: float = 60.0) -> None:
    """Until the broker's log has ``text`` (serving ``producer``'s callbacks meanwhile)."""
    deadline = time.monotonic() + timeout
    while text not in open(broker.log_path, errors="replace").read():
        assert time.monotonic() < deadline, f"no {text!r} in the broker's log:\n{broker.tail_log()}"
        producer.poll(0.05)


def idempotent_producer(bootstrap: str, **conf) -> ck.Producer:
    return ck.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                        "linger.ms": 5, "message.timeout.ms": 120000, **conf})


def produce_values(producer: ck.Producer, topic: str, prefix: str, count: int, acks: Acks, partitions: int) -> None:
    for i in range(count):
        producer.produce(topic, f"{prefix}-{i}".encode(), partition=i % partitions, on_delivery=acks)
        producer.poll(0)


# --------------------------------------------------------------------------- tests


def test_a_full_disk_refuses_produce_keeps_what_was_acked_and_takes_writes_again_by_itself(disk_broker, ballast):
    bootstrap = disk_broker.bootstrap
    topic, partitions = "disk-full", 2
    create_topic(bootstrap, topic, partitions)
    acks = Acks()

    # Space: an idempotent producer's records are acknowledged.
    before = idempotent_producer(bootstrap)
    produce_values(before, topic, "before", 2000, acks, partitions)
    assert before.flush(60) == 0 and not acks.errors, acks.errors
    assert len(acks.acked) == 2000

    # The first recovery checkpoint (every 200 ms) is written before the disk fills: that it is
    # written again once there is space is checked below (start to full took 130 ms in one CI run).
    checkpoint = os.path.join(disk_broker.data_dir, "recovery-checkpoint.json")
    deadline = time.monotonic() + 30
    while not os.path.exists(checkpoint):
        assert time.monotonic() < deadline, "no recovery checkpoint written in 30 s"
        time.sleep(0.05)

    # Full: a batch larger than a page is refused with KAFKA_STORAGE_ERROR, on each partition.
    ballast.fill()
    assert ballast.size > 0
    for p in range(partitions):
        code, _ = raw_produce(bootstrap, topic, p, b"refused" + os.urandom(64 << 10))
        assert code == KAFKA_STORAGE_ERROR, code
    assert_alive(disk_broker)
    # An idempotent producer writes meanwhile: its batches are refused (the broker says so in its
    # log, once per client and reason) and retried.
    during = idempotent_producer(bootstrap, **{"client.id": "disk-full-during"})
    produce_values(during, topic, "during", 2000, acks, partitions)
    wait_for_log(disk_broker, "produce from client disk-full-during", during)
    # Reads of everything acknowledged still work, from the same broker.
    read = read_committed(bootstrap, [(topic, p) for p in range(partitions)], want=len(acks.acked))
    assert {r for r in read if r[3].startswith(b"before-")} == set(acks.acked[:2000])
    assert_alive(disk_broker)

    # Space again: the same process takes writes; the retried batches land, each once; the
    # background writes (here the recovery checkpoint, every 200 ms) have gone on too.
    full_since = os.stat(checkpoint).st_mtime_ns
    ballast.release()
    assert during.flush(120) == 0 and not acks.errors, acks.errors
    assert sum(v.startswith(b"during-") for _, _, _, v in acks.acked) == 2000
    deadline = time.monotonic() + 30
    while os.stat(checkpoint).st_mtime_ns == full_since:
        assert time.monotonic() < deadline, "the recovery checkpoint is not written again after the disk had space"
        time.sleep(0.05)
    for p in range(partitions):
        value = f"raw-after-{p}-".encode() + os.urandom(64 << 10)
        code, offset = raw_produce(bootstrap, topic, p, value)
        assert code == 0, code
        acks.acked.append((topic, p, offset, value))
    after = idempotent_producer(bootstrap)
    produce_values(after, topic, "after", 500, acks, partitions)
    assert after.flush(60) == 0 and not acks.errors, acks.errors
    assert_alive(disk_broker)

    # A crash, a restart on the same disk: every acknowledged record once, and nothing else.
    disk_broker.kill()
    disk_broker.restart()
    read = read_committed(bootstrap, [(topic, p) for p in range(partitions)], want=len(acks.acked))
    assert_exactly(read, acks.acked)
    log = open(disk_broker.log_path).read()
    assert "recovery truncated" not in log, "a refused write left a torn batch behind"


def test_a_transaction_committed_on_a_full_disk_is_retried_and_commits_whole(disk_broker, ballast):
    bootstrap = disk_broker.bootstrap
    # Twenty long topic names: the transaction's PrepareCommit record (~5 KB) cannot fit in the
    # slack of the __transaction_state page it would go to.
    topics = [f"disk-full-txn-{i:02d}-" + "x" * 200 for i in range(20)]
    for t in topics:
        create_topic(bootstrap, t, 1)
    txn_id = "disk-full-txn"
    producer = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                            "transaction.timeout.ms": 120000, "linger.ms": 5})
    producer.init_transactions(30)
    acks = Acks()
    producer.begin_transaction()
    for t in topics:
        producer.produce(t, f"first-{t[:16]}".encode(), on_delivery=acks)
    assert producer.flush(30) == 0 and len(acks.acked) == len(topics), acks.errors
    first = list(acks.acked)
    assert describe_transaction(bootstrap, txn_id) == "Ongoing"

    ballast.fill()
    with pytest.raises(ck.KafkaException) as refused:
        producer.commit_transaction(5)
    error = refused.value.args[0]
    # The coordinator answers EndTxn NOT_COORDINATOR (Kafka's answer when its log refuses the
    # PrepareCommit): librdkafka retries it until the call's timeout, then says "retry the call".
    assert error.retriable() and not error.txn_requires_abort() and not error.fatal(), error
    # Nothing that was not written is installed: still Ongoing, nothing of it readable.
    assert describe_transaction(bootstrap, txn_id) == "Ongoing"
    client = KafkaClient(bootstrap, client_id="disk-full-test")
    try:
        stable = client.list_offsets({(t, 0): -1 for t in topics}, READ_COMMITTED)
    finally:
        client.close()
    assert {o for o, _ in stable.values()} == {0}, stable
    assert_alive(disk_broker)

    ballast.release()
    producer.commit_transaction(30)  # the same call again, same process, nothing restarted
    # EndTxn is answered once PrepareCommit is durable; the markers and CompleteCommit follow.
    deadline = time.monotonic() + 30
    while (state := describe_transaction(bootstrap, txn_id)) != "CompleteCommit":
        assert state == "PrepareCommit" and time.monotonic() < deadline, state
        time.sleep(0.05)
    acks.acked.clear()
    producer.begin_transaction()
    for t in topics:
        producer.produce(t, f"second-{t[:16]}".encode(), on_delivery=acks)
    producer.commit_transaction(30)
    second = list(acks.acked)
    assert len(second) == len(topics)

    disk_broker.kill()
    disk_broker.restart()
    expected = first + second
    read = read_committed(bootstrap, [(t, 0) for t in topics], want=len(expected))
    assert_exactly(read, expected)


def test_an_offset_commit_on_a_full_disk_is_refused_and_not_visible(disk_broker, ballast):
    bootstrap = disk_broker.bootstrap
    topic = "disk-full-offsets"
    create_topic(bootstrap, topic, 1)
    group = "disk-full-group"
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    # Metadata of 4000 bytes: the commit's record cannot fit in the slack of a page.
    metadata = "m" * 4000
    try:
        consumer.commit(offsets=[ck.TopicPartition(topic, 0, 5, metadata=metadata)], asynchronous=False)
        ballast.fill()
        with pytest.raises(ck.KafkaException) as refused:
            consumer.commit(offsets=[ck.TopicPartition(topic, 0, 9, metadata=metadata)], asynchronous=False)
        assert refused.value.args[0].code() == NOT_COORDINATOR, refused.value
        [tp] = consumer.committed([ck.TopicPartition(topic, 0)], timeout=30)
        assert tp.offset == 5, tp
        assert_alive(disk_broker)
        ballast.release()
        consumer.commit(offsets=[ck.TopicPartition(topic, 0, 9, metadata=metadata)], asynchronous=False)
    finally:
        consumer.close()

    disk_broker.kill()
    disk_broker.restart()
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        [tp] = consumer.committed([ck.TopicPartition(topic, 0)], timeout=30)
    finally:
        consumer.close()
    assert tp.offset == 9 and tp.metadata == metadata, tp


def test_a_broker_killed_on_a_full_disk_starts_on_it_serves_reads_and_takes_writes_once_space_returns(
        disk_broker, ballast):
    """The nemesis may kill the broker while the disk is full: it must start again there (its
    start-up writes nothing it cannot do without), serve every acknowledged record with the
    aborted transaction still dropped, refuse writes, and take them once space returns."""
    bootstrap = disk_broker.bootstrap
    topic, partitions = "disk-full-restart", 2
    create_topic(bootstrap, topic, partitions)
    acks = Acks()
    plain = idempotent_producer(bootstrap)
    produce_values(plain, topic, "plain", 500, acks, partitions)
    assert plain.flush(60) == 0 and not acks.errors, acks.errors
    txn = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "disk-full-restart"})
    txn.init_transactions(30)
    aborted = Acks()
    txn.begin_transaction()
    produce_values(txn, topic, "aborted", 10, aborted, partitions)
    assert txn.flush(30) == 0 and len(aborted.acked) == 10
    txn.abort_transaction(30)  # an entry in each partition's aborted-transaction index
    txn.begin_transaction()
    produce_values(txn, topic, "committed", 10, acks, partitions)
    txn.commit_transaction(30)
    assert len(acks.acked) == 510

    ballast.fill()
    disk_broker.kill()
    disk_broker.restart()
    read = read_committed(bootstrap, [(topic, p) for p in range(partitions)], want=len(acks.acked))
    assert_exactly(read, acks.acked)
    code, _ = raw_produce(bootstrap, topic, 0, b"refused" + os.urandom(64 << 10))
    assert code == KAFKA_STORAGE_ERROR, code
    assert_alive(disk_broker)

    ballast.release()
    for p in range(partitions):
        value = f"raw-after-{p}-".encode() + os.urandom(64 << 10)
        code, offset = raw_produce(bootstrap, topic, p, value)
        assert code == 0, code
        acks.acked.append((topic, p, offset, value))
    disk_broker.kill()
    disk_broker.restart()
    read = read_committed(bootstrap, [(topic, p) for p in range(partitions)], want=len(acks.acked))
    assert_exactly(read, acks.acked)
