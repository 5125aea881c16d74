"""Capture the seed corpus: real request frames of confluent-kafka, kafka-python and aiokafka.

A TCP proxy on loopback stands in front of a real ``oncelog serve`` (which advertises the
proxy's address, so every connection of every client goes through it) and writes each request
frame the clients send — without its 4-byte size prefix, as ``codec.decode_request`` takes it —
to ``tests/fuzz/corpus/requests/<api>-v<version>-<client>-<hash>.bin``. Each client runs an
ordinary workload: admin calls, idempotent and transactional produce, a consumer group.

Re-run (replaces the corpus; a few minutes, starts one broker)::

    .venv/bin/python -m tests.fuzz.capture
    .venv/bin/python -m tests.fuzz.capture --only confluent-848    # add one workload's frames

Frames larger than :data:`MAX_FRAME` are left out, and at most :data:`PER_KIND` different frames
are kept per (client, API, version): the corpus stays a few hundred small files.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import socket
import struct
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter

from oncelog.process import BrokerProcess

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "requests")
MAX_FRAME = 16 * 1024
PER_KIND = 6


class Recorder:
    """Keeps the frames; ``label`` is the client whose workload runs now."""

    def __init__(self, out_dir: str) -> None:
        self.out_dir = out_dir
        self.label = "unknown"
        self.kinds: Counter = Counter()
        self.seen: set[bytes] = set()
        self.lock = threading.Lock()

    def frame(self, frame: bytes) -> None:
        if len(frame) < 8 or len(frame) > MAX_FRAME:
            return
        api_key, version = struct.unpack_from(">hh", frame)
        # The same request with another correlation id is the same seed.
        body = frame[:4] + b"\0\0\0\0" + frame[8:]
        digest = hashlib.sha1(body).hexdigest()[:12]
        with self.lock:
            kind = (self.label, api_key, version)
            if body in self.seen or self.kinds[kind] >= PER_KIND:
                return
            self.seen.add(body)
            self.kinds[kind] += 1
            name = f"{api_key:02d}-v{version}-{self.label}-{digest}.bin"
            with open(os.path.join(self.out_dir, name), "wb") as f:
                f.write(frame)


class Proxy:
    """Loopback TCP proxy that hands every client→broker frame to the recorder."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.upstream: tuple[str, int] | None = None
        self.closed = False

    def start(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self.closed = True
        self.listener.close()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            broker = socket.create_connection(self.upstream)
            threading.Thread(target=self._requests, args=(client, broker), daemon=True).start()
            threading.Thread(target=self._pump, args=(broker, client), daemon=True).start()

    def _requests(self, src: socket.socket, dst: socket.socket) -> None:
        buf = b""
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
                buf += data
                while len(buf) >= 4:
                    size = struct.unpack_from(">i", buf)[0]
                    if len(buf) < 4 + size:
                        break
                    self.recorder.frame(buf[4 : 4 + size])
                    buf = buf[4 + size :]
        except OSError:
            pass
        finally:
            _close(src, dst)

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            _close(src, dst)


def _close(*socks: socket.socket) -> None:
    for s in socks:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()


def step(what: str, fn, *args, **kwargs):
    """Run one workload step; a failing step is reported and the capture goes on."""
    try:
        return fn(*args, **kwargs)
    except Exception:
        print(f"  step {what} failed:\n" + traceback.format_exc(limit=2), file=sys.stderr)
        return None


# ------------------------------------------------------------------------- workloads

def confluent_workload(bootstrap: str) -> None:
    import confluent_kafka as ck
    from confluent_kafka.admin import (AdminClient, ConfigEntry, ConfigResource, NewPartitions, NewTopic,
                                       AlterConfigOpType, OffsetSpec)

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic, other = "seed-confluent", "seed-confluent-gone"
    step("create_topics", lambda: [f.result(30) for f in admin.create_topics(
        [NewTopic(topic, 2, 1, config={"cleanup.policy": "delete"}), NewTopic(other, 1, 1)]).values()])
    step("list_topics", admin.list_topics, timeout=10)
    step("describe_configs", lambda: [f.result(30) for f in admin.describe_configs(
        [ConfigResource("topic", topic), ConfigResource("broker", "1")]).values()])
    step("incremental_alter_configs", lambda: [f.result(30) for f in admin.incremental_alter_configs(
        [ConfigResource("topic", topic, incremental_configs=[
            ConfigEntry("retention.ms", "86400000", incremental_operation=AlterConfigOpType.SET)])]).values()])
    step("create_partitions", lambda: [f.result(30) for f in admin.create_partitions(
        [NewPartitions(topic, 3)]).values()])
    step("describe_cluster", lambda: admin.describe_cluster().result(30))
    step("describe_topics", lambda: admin.describe_topics(
        ck.TopicCollection([topic])) and None)

    p = ck.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "compression.type": "lz4",
                     "linger.ms": 5})
    for i in range(20):
        p.produce(topic, key=f"k{i}".encode(), value=f"value-{i}".encode() * 3, headers=[("h", b"v")])
    p.flush(30)
    p2 = ck.Producer({"bootstrap.servers": bootstrap, "acks": "1", "compression.type": "none"})
    p2.produce(topic, value=b"plain", partition=0)
    p2.flush(30)

    group = "seed-confluent-group"
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "session.timeout.ms": 6000})
    c.subscribe([topic])
    got = 0
    deadline = time.monotonic() + 30
    while got < 21 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got += 1
    step("commit", c.commit, asynchronous=False)
    step("committed", c.committed, [ck.TopicPartition(topic, 0)], timeout=10)

    tp = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "seed-confluent-txn"})
    tp.init_transactions(30)
    tp.begin_transaction()
    tp.produce(topic, key=b"t", value=b"in-transaction", partition=1)
    step("send_offsets_to_transaction", tp.send_offsets_to_transaction,
         [ck.TopicPartition(topic, 0, 1)], c.consumer_group_metadata(), 30)
    tp.commit_transaction(30)
    tp.begin_transaction()
    tp.produce(topic, value=b"aborted", partition=1)
    tp.abort_transaction(30)
    c.close()

    step("list_consumer_groups", lambda: admin.list_consumer_groups().result(30))
    step("describe_consumer_groups", lambda: [f.result(30) for f in admin.describe_consumer_groups([group]).values()])
    step("list_consumer_group_offsets", lambda: [f.result(30) for f in admin.list_consumer_group_offsets(
        [ck.ConsumerGroupTopicPartitions(group)]).values()])
    step("list_offsets", lambda: [f.result(30) for f in admin.list_offsets(
        {ck.TopicPartition(topic, 0): OffsetSpec.latest(), ck.TopicPartition(topic, 1): OffsetSpec.earliest()}).values()])
    step("delete_records", lambda: [f.result(30) for f in admin.delete_records(
        [ck.TopicPartition(topic, 0, 1)]).values()])
    step("delete_consumer_groups", lambda: [f.result(30) for f in admin.delete_consumer_groups([group]).values()])
    step("delete_topics", lambda: [f.result(30) for f in admin.delete_topics([other]).values()])


def kafka_python_workload(bootstrap: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewPartitions, NewTopic
    from kafka.structs import OffsetAndMetadata

    topic, other = "seed-kafka-python", "seed-kafka-python-gone"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="seed-kafka-python")
    step("create_topics", admin.create_topics, [NewTopic(topic, 2, 1), NewTopic(other, 1, 1)])
    step("describe_configs", admin.describe_configs, [ConfigResource(ConfigResourceType.TOPIC, topic)])
    step("alter_configs", admin.alter_configs,
         [ConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "86400000"})])
    step("create_partitions", admin.create_partitions, {topic: NewPartitions(3)})
    step("describe_cluster", admin.describe_cluster)
    step("describe_topics", admin.describe_topics, [topic])
    step("list_topics", admin.list_topics)

    p = KafkaProducer(bootstrap_servers=bootstrap, compression_type="gzip", linger_ms=5)
    for i in range(20):
        p.send(topic, key=f"k{i}".encode(), value=f"value-{i}".encode() * 3, headers=[("h", b"v")])
    p.flush(30)
    p.close(10)

    group = "seed-kafka-python-group"
    c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                      enable_auto_commit=False, consumer_timeout_ms=3000)
    got = 0
    deadline = time.monotonic() + 30
    while got < 20 and time.monotonic() < deadline:
        for records in c.poll(timeout_ms=500).values():
            got += len(records)
    step("commit", c.commit)
    step("committed", c.committed, TopicPartition(topic, 0))

    tp = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="seed-kafka-python-txn")
    tp.init_transactions()
    tp.begin_transaction()
    tp.send(topic, key=b"t", value=b"in-transaction", partition=1)
    step("send_offsets_to_transaction", tp.send_offsets_to_transaction,
         {TopicPartition(topic, 0): OffsetAndMetadata(1, "", -1)}, group)
    tp.commit_transaction()
    tp.begin_transaction()
    tp.send(topic, value=b"aborted", partition=1)
    tp.abort_transaction()
    tp.close(10)
    c.close()

    step("list_groups", admin.list_groups)
    step("describe_groups", admin.describe_groups, [group])
    step("list_group_offsets", admin.list_group_offsets, group)
    step("list_partition_offsets", admin.list_partition_offsets, {TopicPartition(topic, 0): -1})
    step("delete_records", admin.delete_records, {TopicPartition(topic, 0): 1})
    step("describe_log_dirs", admin.describe_log_dirs)
    step("describe_producers", admin.describe_producers, [TopicPartition(topic, 0)])
    step("list_transactions", admin.list_transactions)
    step("describe_transactions", admin.describe_transactions, ["seed-kafka-python-txn"])
    step("list_partition_reassignments", admin.list_partition_reassignments)
    step("describe_topic_partitions", admin.describe_topic_partitions, [topic])
    step("delete_group_offsets", admin.delete_group_offsets, group, [TopicPartition(topic, 0)])
    step("delete_groups", admin.delete_groups, [group])
    step("delete_topics", admin.delete_topics, [other])
    admin.close()


async def _aiokafka_workload(bootstrap: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.structs import OffsetAndMetadata

    topic, other = "seed-aiokafka", "seed-aiokafka-gone"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id="seed-aiokafka")
    await admin.start()

    async def astep(what, coro):
        try:
            return await coro
        except Exception:
            print(f"  step {what} failed:\n" + traceback.format_exc(limit=2), file=sys.stderr)

    await astep("create_topics", admin.create_topics([NewTopic(topic, 2, 1), NewTopic(other, 1, 1)]))
    await astep("list_topics", admin.list_topics())
    await astep("describe_cluster", admin.describe_cluster())

    p = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type="gzip", enable_idempotence=True)
    await p.start()
    for i in range(20):
        await p.send(topic, key=f"k{i}".encode(), value=f"value-{i}".encode() * 3, headers=[("h", b"v")])
    await p.flush()
    await p.stop()

    group = "seed-aiokafka-group"
    c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                         enable_auto_commit=False)
    await c.start()
    got = 0
    deadline = time.monotonic() + 30
    while got < 20 and time.monotonic() < deadline:
        for records in (await c.getmany(timeout_ms=500)).values():
            got += len(records)
    await astep("commit", c.commit())
    await astep("committed", c.committed(TopicPartition(topic, 0)))

    tp = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="seed-aiokafka-txn")
    await tp.start()
    async with tp.transaction():
        await tp.send_and_wait(topic, key=b"t", value=b"in-transaction", partition=1)
        await astep("send_offsets_to_transaction", tp.send_offsets_to_transaction(
            {TopicPartition(topic, 0): OffsetAndMetadata(1, "")}, group))
    await tp.begin_transaction()
    await tp.send_and_wait(topic, value=b"aborted", partition=1)
    await tp.abort_transaction()
    await tp.stop()
    await c.stop()

    await astep("list_consumer_groups", admin.list_consumer_groups())
    await astep("describe_consumer_groups", admin.describe_consumer_groups([group]))
    await astep("list_consumer_group_offsets", admin.list_consumer_group_offsets(group))
    await astep("delete_records", admin.delete_records({TopicPartition(topic, 0): 1}))
    await astep("delete_topics", admin.delete_topics([other]))
    await admin.close()


def aiokafka_workload(bootstrap: str) -> None:
    asyncio.run(asyncio.wait_for(_aiokafka_workload(bootstrap), 120))


def confluent_consumer_protocol_workload(bootstrap: str) -> None:
    """KIP-848 (group.protocol=consumer): ConsumerGroupHeartbeat (join by name and by regex,
    heartbeats with owned partitions, leave), OffsetCommit/Fetch with member epochs,
    TxnOffsetCommit with a member's group metadata, ConsumerGroupDescribe."""
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = "seed-848"
    step("create_topics", lambda: [f.result(30) for f in admin.create_topics([NewTopic(topic, 3, 1)]).values()])
    p = ck.Producer({"bootstrap.servers": bootstrap})
    for i in range(6):
        p.produce(topic, value=f"v{i}".encode(), partition=i % 3)
    p.flush(30)
    consumers = []
    for group, sub in (("seed-848-names", [topic]), ("seed-848-regex", ["^seed-8.*"])):
        c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
        c.subscribe(sub)
        consumers.append((group, c))
    deadline = time.monotonic() + 30
    got = 0
    while got < 12 and time.monotonic() < deadline:
        for _, c in consumers:
            m = c.poll(0.2)
            if m is not None and not m.error():
                got += 1
    group, c = consumers[0]
    step("commit", c.commit, asynchronous=False)
    step("committed", c.committed, [ck.TopicPartition(topic, 0)], timeout=10)
    tp = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "seed-848-txn"})
    tp.init_transactions(30)
    tp.begin_transaction()
    tp.produce(topic, value=b"in-transaction", partition=1)
    step("send_offsets_to_transaction", tp.send_offsets_to_transaction,
         [ck.TopicPartition(topic, 0, 1)], c.consumer_group_metadata(), 30)
    tp.commit_transaction(30)
    step("describe_consumer_groups", lambda: [f.result(30) for f in admin.describe_consumer_groups(
        [g for g, _ in consumers]).values()])
    for _, c in consumers:
        c.close()


WORKLOADS = {"confluent": confluent_workload, "kafka-python": kafka_python_workload,
             "aiokafka": aiokafka_workload, "confluent-848": confluent_consumer_protocol_workload}


def main() -> None:
    """Every workload, replacing the corpus; or ``--only LABEL``: that workload's frames added."""
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    if only is None and os.path.isdir(CORPUS):
        shutil.rmtree(CORPUS)
    os.makedirs(CORPUS, exist_ok=True)
    recorder = Recorder(CORPUS)
    proxy = Proxy(recorder)
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(os.path.join(tmp, "broker"),
                               extra_args=["--advertise", f"127.0.0.1:{proxy.port}"]).start()
        try:
            proxy.start((broker.host, broker.port))
            for label, workload in WORKLOADS.items():
                if only is not None and label != only:
                    continue
                recorder.label = label
                print(f"{label} ...", file=sys.stderr)
                step(label, workload, f"127.0.0.1:{proxy.port}")
                time.sleep(1)  # let the last requests through before the label changes
        finally:
            proxy.close()
            broker.kill()
    kinds = Counter((label, key) for label, key, _ in recorder.kinds.elements())
    print(f"{sum(recorder.kinds.values())} frames in {CORPUS}")
    for (label, key), n in sorted(kinds.items()):
        print(f"  {label:13} api {key:3}: {n}")


if __name__ == "__main__":
    main()
