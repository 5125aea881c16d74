"""End-to-end interoperability: real client libraries against a real broker process over TCP.

For every client (confluent-kafka / librdkafka, kafka-python, aiokafka) and every compression
codec, the client creates a 3-partition topic with its own admin API, produces
``N_RECORDS`` keyed records with headers at acks=all, and reads them back with the same library.
The round trip must be exact: each record once, keys/values/headers/timestamps intact, offsets
contiguous from 0 per partition, records in produce order per partition, and each record at the
(partition, offset) the broker acknowledged to the producer. Produce order holds without
idempotence only while no batch is retried: the topic's partitions must answer before the first
write (Kafka leads them a moment after CreateTopics answers: ``wait_for_partitions``).

Independently of the clients, a hand-written Fetch v4 request (raw socket, no library) reads the
stored batches back and checks that they carry the codec the producer used (the broker must keep
batches as sent), valid CRC32C, and contiguous offsets up to the high watermark — the latter
catches records beyond the ones the consumer counted.

kcat (librdkafka's CLI) lists metadata and consumes what confluent-kafka produced.

No idempotence here (tests/e2e/test_idempotence.py has it): batches carry producer id -1.

Every test runs against oncelog and against a one-node Apache Kafka (``both_brokers``): what they
assert is what Kafka does. The broker log must be clean on oncelog only (Kafka's log is its own,
and shared by the session).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import shutil
import socket
import struct
import subprocess
import time

import crc32c
import pytest

from ..helpers import broker_addresses, expected_leader, expected_nodes, leader_address, on_apache_kafka, unique, \
    wait_for_partitions

N_RECORDS = 100_000
PARTITIONS = 3
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
CLIENTS = ["confluent", "kafka-python", "aiokafka"]
# Batches must stay under the topic's max.message.bytes (1048588 by default).
BATCH_BYTES = 512 * 1024
DEADLINE_S = 120.0

# kafka-python loads its protocol schemas with importlib.resources' deprecated helpers
pytestmark = [pytest.mark.both_brokers,
              pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
              pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning")]


# ---------------------------------------------------------------------------------------------
# Records: deterministic content derived from the sequence number

def record_for(seq: int, client: str) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    """(key, value, headers) of record ``seq``; value length varies so record sizes differ."""
    key = b"key-%06d" % seq
    value = b"seq=%09d;" % seq + bytes((seq + i) & 0x7F for i in range(seq % 61))
    headers = [("seq", b"%d" % seq), ("client", client.encode())]
    return key, value, headers


def seq_of(value: bytes) -> int:
    assert value[:4] == b"seq=" and value[13:14] == b";", f"value does not encode a sequence number: {value[:20]!r}"
    return int(value[4:13])


@contextlib.contextmanager
def broker_diagnostics(broker):
    """On failure, attach the broker's log tail to the exception (Python 3.11 notes)."""
    try:
        yield
    except BaseException as exc:
        exc.add_note(f"--- broker log {broker.log_path} (tail) ---\n{broker.tail_log(60)}")
        raise


def assert_broker_log_clean(broker) -> None:
    """A clean interop run leaves no error, traceback or dropped connection in oncelog's log."""
    if on_apache_kafka(broker):
        return
    with open(broker.log_path, errors="replace") as f:
        bad = [line.rstrip() for line in f
               if "Traceback" in line or " ERROR " in line or " WARNING " in line or "closing connection" in line]
    assert not bad, "broker logged problems:\n" + "\n".join(bad[:40])


# ---------------------------------------------------------------------------------------------
# Raw Fetch v4 (hand-written, independent of every client library) to inspect stored batches

class RawBatch:
    __slots__ = ("base_offset", "last_offset", "attributes", "crc_ok", "producer_id", "count")

    def __init__(self, base_offset, last_offset, attributes, crc_ok, producer_id, count):
        self.base_offset, self.last_offset, self.attributes = base_offset, last_offset, attributes
        self.crc_ok, self.producer_id, self.count = crc_ok, producer_id, count


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"broker closed the connection after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def _str16(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def raw_fetch_v4(sock: socket.socket, topic: str, partition: int, offset: int, correlation_id: int,
                 max_bytes: int = 8 << 20) -> tuple[int, int, bytes]:
    """One Fetch v4 request; returns (error_code, high_watermark, records bytes)."""
    body = struct.pack(">hhi", 1, 4, correlation_id) + _str16("oncelog-raw-fetch")
    body += struct.pack(">iiiib", -1, 0, 0, max_bytes, 0)  # replica, max_wait, min_bytes, max_bytes, isolation
    body += struct.pack(">i", 1) + _str16(topic) + struct.pack(">i", 1) + struct.pack(">iqi", partition, offset, max_bytes)
    sock.sendall(struct.pack(">i", len(body)) + body)
    (size,) = struct.unpack(">i", _recv_exact(sock, 4))
    resp = _recv_exact(sock, size)
    pos = 0
    (corr,) = struct.unpack_from(">i", resp, pos); pos += 4
    assert corr == correlation_id, f"Fetch v4: correlation id {corr}, expected {correlation_id}"
    pos += 4  # throttle_time_ms
    (ntopics,) = struct.unpack_from(">i", resp, pos); pos += 4
    assert ntopics == 1, f"Fetch v4: {ntopics} topics in response, expected 1"
    (tlen,) = struct.unpack_from(">h", resp, pos); pos += 2
    name = resp[pos:pos + tlen].decode(); pos += tlen
    assert name == topic, f"Fetch v4: topic {name!r}, expected {topic!r}"
    (nparts,) = struct.unpack_from(">i", resp, pos); pos += 4
    assert nparts == 1, f"Fetch v4: {nparts} partitions in response, expected 1"
    pidx, err, hw, _lso = struct.unpack_from(">ihqq", resp, pos); pos += 22
    assert pidx == partition, f"Fetch v4: partition {pidx}, expected {partition}"
    (naborted,) = struct.unpack_from(">i", resp, pos); pos += 4
    pos += max(naborted, 0) * 16
    (rlen,) = struct.unpack_from(">i", resp, pos); pos += 4
    records = b"" if rlen < 0 else resp[pos:pos + rlen]
    return err, hw, records


def parse_batches(records: bytes) -> list[RawBatch]:
    out = []
    pos = 0
    while pos + 61 <= len(records):
        base, length = struct.unpack_from(">qi", records, pos)
        end = pos + 12 + length
        if end > len(records):
            break  # partial trailing batch (allowed in a Fetch response)
        magic = records[pos + 16]
        assert magic == 2, f"batch at offset {base}: magic {magic}, expected 2"
        (crc,) = struct.unpack_from(">I", records, pos + 17)
        attributes, last_delta = struct.unpack_from(">hi", records, pos + 21)
        (producer_id,) = struct.unpack_from(">q", records, pos + 43)
        (count,) = struct.unpack_from(">i", records, pos + 57)
        crc_ok = crc32c.crc32c(records[pos + 21:end]) == crc
        out.append(RawBatch(base, base + last_delta, attributes, crc_ok, producer_id, count))
        pos = end
    return out


def stored_batches(bootstrap: str, topic: str, partition: int) -> tuple[int, list[RawBatch]]:
    """(high watermark, every batch from offset 0 to the HW) of one partition, via raw Fetch v4
    sent to the partition's leader (Metadata's; on a cluster not every partition's)."""
    host, port = leader_address(bootstrap, topic, partition).rsplit(":", 1)
    batches: list[RawBatch] = []
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        offset, corr, hw = 0, 1, None
        while hw is None or offset < hw:
            err, hw, records = raw_fetch_v4(sock, topic, partition, offset, corr)
            corr += 1
            assert err == 0, f"Fetch v4 {topic}-{partition} at offset {offset}: error code {err}"
            got = parse_batches(records)
            if offset < hw:
                assert got, f"Fetch v4 {topic}-{partition} at offset {offset} < HW {hw} returned no complete batch"
            batches.extend(got)
            if got:
                offset = got[-1].last_offset + 1
    return hw, batches


def check_stored_batches(bootstrap: str, topic: str, codec: str, per_partition: dict[int, int]) -> int:
    """Stored batches carry the producer's codec, valid CRCs, contiguous offsets; HW == records
    consumed. Returns the number of batches."""
    want = CODEC_IDS[codec]
    total_batches = total_records = with_codec = 0
    for p in range(PARTITIONS):
        hw, batches = stored_batches(bootstrap, topic, p)
        assert hw == per_partition.get(p, 0), (
            f"{topic}-{p}: high watermark {hw}, but {per_partition.get(p, 0)} records were consumed")
        expected_base = 0
        for b in batches:
            assert b.base_offset == expected_base, (
                f"{topic}-{p}: batch starts at {b.base_offset}, expected {expected_base} (gap or overlap)")
            assert b.last_offset - b.base_offset + 1 == b.count, (
                f"{topic}-{p}: batch at {b.base_offset} has {b.count} records but spans "
                f"{b.last_offset - b.base_offset + 1} offsets")
            assert b.crc_ok, f"{topic}-{p}: batch at {b.base_offset} fails its CRC32C as served by Fetch"
            got = b.attributes & 0x7
            # a client may send a tiny batch uncompressed when compressing does not pay (librdkafka
            # does); anything else must be stored with the codec the producer used
            assert got == want or (got == 0 and b.count <= SMALL_BATCH), (
                f"{topic}-{p}: batch at {b.base_offset} ({b.count} records) is stored with codec {got}; "
                f"the producer was configured for {codec} ({want}).{codec_hint(codec, got)}")
            if got == want:
                with_codec += b.count
            assert b.producer_id == -1, f"{topic}-{p}: batch at {b.base_offset} has producer id {b.producer_id}"
            expected_base = b.last_offset + 1
        assert expected_base == hw, f"{topic}-{p}: batches end at {expected_base}, HW is {hw}"
        total_batches += len(batches)
        total_records += hw
    assert with_codec >= 0.9 * total_records, (
        f"{topic}: only {with_codec} of {total_records} records are in {codec} batches{codec_hint(codec, 0)}")
    return total_batches


SMALL_BATCH = 16


def codec_hint(codec: str, got: int) -> str:
    if codec == "lz4" and got == 0:
        return (" (librdkafka sends lz4 batches uncompressed unless the broker advertises FindCoordinator in "
                "ApiVersions: it uses that API as the marker of LZ4 support, feature 'LZ4')")
    return ""


# ---------------------------------------------------------------------------------------------
# Round-trip check shared by all clients

def check_roundtrip(client: str, acked: dict[int, tuple[int, int]], consumed: list[tuple],
                    t_start_ms: int, t_end_ms: int) -> dict[int, int]:
    """``acked``: seq -> (partition, offset) from the producer's acknowledgements.
    ``consumed``: (partition, offset, key, value, headers, timestamp_ms) in the order each
    partition was read. Returns {partition: record count}."""
    assert len(acked) == N_RECORDS, f"{len(acked)} of {N_RECORDS} records acknowledged"
    problems: list[str] = []

    def problem(msg: str) -> None:
        if len(problems) < 20:
            problems.append(msg)

    seen: dict[int, tuple[int, int]] = {}
    last_seq: dict[int, int] = {}
    next_offset: dict[int, int] = {p: 0 for p in range(PARTITIONS)}
    for partition, offset, key, value, headers, ts in consumed:
        if partition not in next_offset:
            problem(f"record from unexpected partition {partition}")
            continue
        if offset != next_offset[partition]:
            problem(f"partition {partition}: offset {offset} read where {next_offset[partition]} was expected")
        next_offset[partition] = offset + 1
        seq = seq_of(value)
        if seq in seen:
            problem(f"seq {seq} read twice: at {seen[seq]} and at {(partition, offset)}")
        seen[seq] = (partition, offset)
        if seq <= last_seq.get(partition, -1):
            problem(f"partition {partition}: seq {seq} at offset {offset} after seq {last_seq[partition]}")
        last_seq[partition] = seq
        exp_key, exp_value, exp_headers = record_for(seq, client)
        if key != exp_key:
            problem(f"seq {seq}: key {key!r}, expected {exp_key!r}")
        if value != exp_value:
            problem(f"seq {seq}: value {value!r}, expected {exp_value!r}")
        if [(k, bytes(v) if v is not None else None) for k, v in (headers or [])] != exp_headers:
            problem(f"seq {seq}: headers {headers!r}, expected {exp_headers!r}")
        if acked.get(seq) != (partition, offset):
            problem(f"seq {seq}: read at {(partition, offset)}, producer was acked {acked.get(seq)}")
        if not (t_start_ms - 5000 <= ts <= t_end_ms + 5000):
            problem(f"seq {seq}: timestamp {ts} outside the produce window [{t_start_ms}, {t_end_ms}]")
    missing = N_RECORDS - len(seen)
    if missing:
        sample = sorted(set(range(N_RECORDS)) - seen.keys())[:10]
        problem(f"{missing} records never read, e.g. seqs {sample}")
    assert not problems, f"{client}: {len(consumed)} records read; problems:\n" + "\n".join(problems)
    counts = dict(next_offset)
    assert all(counts[p] > 0 for p in range(PARTITIONS)), f"keys did not spread over all partitions: {counts}"
    return counts


# ---------------------------------------------------------------------------------------------
# confluent-kafka (librdkafka)

def confluent_roundtrip(bootstrap: str, topic: str, codec: str):
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(timeout=30)
    wait_for_partitions(bootstrap, topic, PARTITIONS)
    md = admin.list_topics(topic, timeout=30).topics[topic]
    assert md.error is None and sorted(md.partitions) == list(range(PARTITIONS)), f"metadata after create: {md}"

    producer = ck.Producer({
        "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": False,
        "compression.type": codec, "linger.ms": 20, "batch.size": BATCH_BYTES, "batch.num.messages": 100_000,
        "queue.buffering.max.messages": 2 * N_RECORDS, "message.timeout.ms": int(DEADLINE_S * 1000),
    })
    acked: dict[int, tuple[int, int]] = {}
    errors: list[str] = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(f"{err} (partition {msg.partition()})")
        else:
            acked[seq_of(msg.value())] = (msg.partition(), msg.offset())

    t0 = time.time()
    for seq in range(N_RECORDS):
        key, value, headers = record_for(seq, "confluent")
        while True:
            try:
                producer.produce(topic, value=value, key=key, headers=headers, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        if seq % 1000 == 0:
            producer.poll(0)
    remaining = producer.flush(DEADLINE_S)
    t1 = time.time()
    assert remaining == 0, f"{remaining} records still unacknowledged after {DEADLINE_S}s"
    assert not errors, f"{len(errors)} delivery errors, first: {errors[:5]}"

    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"interop-{topic}",
                            "enable.auto.commit": False, "auto.offset.reset": "error",
                            "fetch.wait.max.ms": 100, "check.crcs": True})
    consumed = []
    try:
        consumer.assign([ck.TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        deadline = time.monotonic() + DEADLINE_S
        while len(consumed) < N_RECORDS and time.monotonic() < deadline:
            for m in consumer.consume(10_000, 0.5):
                assert not m.error(), f"consumer error: {m.error()}"
                consumed.append((m.partition(), m.offset(), m.key(), m.value(), m.headers(), m.timestamp()[1]))
    finally:
        consumer.close()
    return acked, consumed, t0, t1


# ---------------------------------------------------------------------------------------------
# kafka-python

def kafka_python_roundtrip(bootstrap: str, topic: str, codec: str):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="interop-admin")
    try:
        resp = admin.create_topics([NewTopic(topic, PARTITIONS, 1)], timeout_ms=30_000)
    finally:
        admin.close()
    errs = [(t["name"], t["error_code"], t["error_message"]) for t in resp["topics"] if t["error_code"] != 0]
    assert not errs, f"kafka-python CreateTopics errors: {errs}"
    wait_for_partitions(bootstrap, topic, PARTITIONS)

    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", enable_idempotence=False,
        compression_type=None if codec == "none" else codec, linger_ms=20, batch_size=BATCH_BYTES,
        max_request_size=8 << 20, delivery_timeout_ms=int(DEADLINE_S * 1000),
    )
    try:
        assert producer.partitions_for(topic) == set(range(PARTITIONS))
        t0 = time.time()
        futures = []
        for seq in range(N_RECORDS):
            key, value, headers = record_for(seq, "kafka-python")
            futures.append((seq, producer.send(topic, key=key, value=value, headers=headers)))
        producer.flush(DEADLINE_S)
        t1 = time.time()
        acked = {}
        for seq, fut in futures:
            md = fut.get(timeout=0)  # raises the delivery error, if any
            acked[seq] = (md.partition, md.offset)
    finally:
        producer.close(timeout=10)

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="none", fetch_max_wait_ms=100, check_crcs=True,
                             max_partition_fetch_bytes=8 << 20, fetch_max_bytes=32 << 20)
    consumed = []
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        deadline = time.monotonic() + DEADLINE_S
        while len(consumed) < N_RECORDS and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500, max_records=50_000).values():
                for r in records:
                    consumed.append((r.partition, r.offset, r.key, r.value, list(r.headers), r.timestamp))
    finally:
        consumer.close()
    return acked, consumed, t0, t1


# ---------------------------------------------------------------------------------------------
# aiokafka

async def _aiokafka_roundtrip(bootstrap: str, topic: str, codec: str):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id="interop-admin")
    await admin.start()
    try:
        resp = await admin.create_topics([NewTopic(topic, PARTITIONS, 1)], timeout_ms=30_000)
    finally:
        await admin.close()
    errs = [e for e in resp.topic_errors if e[1] != 0]
    assert not errs, f"aiokafka CreateTopics errors: {errs}"
    wait_for_partitions(bootstrap, topic, PARTITIONS)

    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", enable_idempotence=False,
        compression_type=None if codec == "none" else codec, linger_ms=20, max_batch_size=BATCH_BYTES,
        max_request_size=8 << 20, request_timeout_ms=60_000,
    )
    await producer.start()
    try:
        assert await producer.partitions_for(topic) == set(range(PARTITIONS))
        t0 = time.time()
        futures = []
        for seq in range(N_RECORDS):
            key, value, headers = record_for(seq, "aiokafka")
            futures.append(await producer.send(topic, key=key, value=value, headers=headers))
        results = await asyncio.gather(*futures)
        t1 = time.time()
    finally:
        await producer.stop()
    acked = {seq: (md.partition, md.offset) for seq, md in enumerate(results)}

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                auto_offset_reset="none", fetch_max_wait_ms=100, check_crcs=True,
                                max_partition_fetch_bytes=8 << 20, fetch_max_bytes=32 << 20)
    await consumer.start()
    consumed = []
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        deadline = time.monotonic() + DEADLINE_S
        while len(consumed) < N_RECORDS and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=500, max_records=50_000)
            for records in batch.values():
                for r in records:
                    consumed.append((r.partition, r.offset, r.key, r.value, list(r.headers), r.timestamp))
    finally:
        await consumer.stop()
    return acked, consumed, t0, t1


def aiokafka_roundtrip(bootstrap: str, topic: str, codec: str):
    async def bounded():
        return await asyncio.wait_for(_aiokafka_roundtrip(bootstrap, topic, codec), 3 * DEADLINE_S)

    return asyncio.run(bounded())


ROUNDTRIPS = {"confluent": confluent_roundtrip, "kafka-python": kafka_python_roundtrip,
              "aiokafka": aiokafka_roundtrip}


# ---------------------------------------------------------------------------------------------
# Tests

@pytest.mark.cluster_only("compression does not depend on the node count; each client's routing on the "
                           "cluster is held with one codec", codec=["none"])
@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", CLIENTS)
def test_roundtrip(broker, client, codec):
    topic = unique(f"interop-{client}-{codec}")
    started = time.monotonic()
    with broker_diagnostics(broker):
        acked, consumed, t0, t1 = ROUNDTRIPS[client](broker.bootstrap, topic, codec)
        produced_s = t1 - t0
        consumed_s = time.monotonic() - started - produced_s
        counts = check_roundtrip(client, acked, consumed, int(t0 * 1000), int(t1 * 1000))
        batches = check_stored_batches(broker.bootstrap, topic, codec, counts)
        assert_broker_log_clean(broker)
    print(f"\n{client}/{codec}: {N_RECORDS} records in {batches} batches, per partition {counts}; "
          f"produce {produced_s:.2f}s, rest (admin+consume) {consumed_s:.2f}s, "
          f"total {time.monotonic() - started:.2f}s")


def _kcat(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
    return subprocess.run(["kcat", *args], capture_output=True, text=True, timeout=timeout)


KCAT_RECORDS = 3_000


@pytest.fixture
def kcat_topic(broker):
    """A 3-partition topic holding KCAT_RECORDS records produced by confluent-kafka."""
    if shutil.which("kcat") is None:
        pytest.skip("kcat is not installed (apt-get install -y kcat)")
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = unique("kcat-interop")
    with broker_diagnostics(broker):
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # keep a reference: the futures need it
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(timeout=30)
        wait_for_partitions(broker.bootstrap, topic, PARTITIONS)
        producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "acks": "all",
                                "enable.idempotence": False, "linger.ms": 10, "compression.type": "zstd"})
        acked: dict[int, tuple[int, int]] = {}
        errors = []

        def on_delivery(err, msg):
            if err is not None:
                errors.append(err)
            else:
                acked[seq_of(msg.value())] = (msg.partition(), msg.offset())

        for seq in range(KCAT_RECORDS):
            key, value, headers = kcat_record(seq)
            producer.produce(topic, key=key, value=value, headers=headers, on_delivery=on_delivery)
        assert producer.flush(30) == 0 and not errors, f"produce failed: {errors[:5]}"
        assert len(acked) == KCAT_RECORDS
    return topic, acked


def kcat_record(seq: int) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    # text only: kcat's JSON envelope carries key, payload and headers as strings
    return b"key-%06d" % seq, b"seq=%09d;payload-%d" % (seq, seq * 7), [("seq", b"%d" % seq), ("src", b"confluent")]


def test_kcat_metadata(broker, kcat_topic):
    topic, _ = kcat_topic
    with broker_diagnostics(broker):
        r = _kcat("-L", "-b", broker.bootstrap)
        assert r.returncode == 0, f"kcat -L failed ({r.returncode}): {r.stderr}"
        out = r.stdout
        host, port = broker.bootstrap.rsplit(":", 1)
        nodes = expected_nodes(broker)  # one, or an oncelog cluster's nodes
        assert re.search(rf"^\s*{nodes} brokers:\s*$", out, re.M), out
        listed = dict(re.findall(r"^\s*broker (\d+) at (\S+?)(?:\s|$)", out, re.M))
        assert len(listed) == nodes and f"{host}:{port}" in listed.values(), f"broker {broker.bootstrap} not listed:\n{out}"
        assert listed == {str(node): address for node, address in broker_addresses(broker.bootstrap).items()}, out
        assert re.search(rf'^\s*topic "{topic}" with {PARTITIONS} partitions:\s*$', out, re.M), out
        # the per-topic listing (-t) shows each partition led by its one broker (replication factor 1):
        # the one broker, or the node oncelog's placement names
        r = _kcat("-L", "-b", broker.bootstrap, "-t", topic)
        assert r.returncode == 0, f"kcat -L -t failed ({r.returncode}): {r.stderr}"
        parts = re.findall(r"^\s*partition (\d+), leader (\d+), replicas: (\S+), isrs: (\S+)", r.stdout, re.M)
        assert sorted(int(p) for p, *_ in parts) == list(range(PARTITIONS)), r.stdout
        leaders = {int(p): str(expected_leader(broker, topic, int(p))) for p, *_ in parts}
        assert all(leader == replicas == isrs == leaders[int(p)] for p, leader, replicas, isrs in parts), r.stdout
        assert "Error" not in r.stdout, r.stdout
        assert_broker_log_clean(broker)


def test_kcat_consumes_confluent_records(broker, kcat_topic):
    topic, acked = kcat_topic
    with broker_diagnostics(broker):
        r = _kcat("-C", "-b", broker.bootstrap, "-t", topic, "-o", "beginning", "-e", "-q", "-J")
        assert r.returncode == 0, f"kcat -C failed ({r.returncode}): {r.stderr}"
        msgs = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
        assert len(msgs) == KCAT_RECORDS, f"kcat read {len(msgs)} records, expected {KCAT_RECORDS}\n{r.stderr}"
        seen = set()
        last = {}
        for m in msgs:
            assert m["topic"] == topic
            payload = m["payload"].encode()
            seq = seq_of(payload)
            key, value, headers = kcat_record(seq)
            assert seq not in seen, f"seq {seq} read twice"
            seen.add(seq)
            assert m["key"].encode() == key and payload == value, m
            flat = [x for k, v in headers for x in (k, v.decode())]
            assert m["headers"] == flat, m
            assert (m["partition"], m["offset"]) == acked[seq], (m, acked[seq])
            assert seq > last.get(m["partition"], -1), f"partition {m['partition']}: out of order at {m}"
            last[m["partition"]] = seq
        assert seen == set(range(KCAT_RECORDS))
        assert_broker_log_clean(broker)
