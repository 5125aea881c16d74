"""Kafka behaviours real clients' own test suites still miss (issue 11), each against a real
broker process and a real client."""

from __future__ import annotations

import datetime
import time

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient

from oncelog.wire_client import RawClient, request_module

from .helpers import create_topic


# ---------------------------------------------------------------- 1. one request at a time


def _delete_records_request(topic: str, offset: int):
    m = request_module(21, 2)
    return m.DeleteRecordsRequest(
        topics=(m.DeleteRecordsTopic(name=topic, partitions=(m.DeleteRecordsPartition(partition_index=0, offset=offset),)),),
        timeout=datetime.timedelta(seconds=10))


def _list_offsets_earliest_request(topic: str):
    m = request_module(2, 7)
    return m.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(
        m.ListOffsetsTopic(name=topic, partitions=(
            m.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-2),)),))


def test_pipelined_list_offsets_sees_the_delete_records_before_it(broker):
    """DeleteRecords then ListOffsets(EARLIEST) sent back to back on one connection, without
    waiting for the first response: the ListOffsets must answer the new log start, every time."""
    topic = "pipelined-delete"
    create_topic(broker.bootstrap, topic, 1)
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(200):
        p.produce(topic, value=b"v%d" % i, partition=0)
        p.flush()  # one batch per record, so every offset is a possible log start
    c = RawClient(broker.bootstrap)
    try:
        seen = []
        for attempt in range(10):
            target = 10 * (attempt + 1)
            delete = c.encode(_delete_records_request(topic, target))
            listing = c.encode(_list_offsets_earliest_request(topic))
            c.sock.sendall(b"".join(len(f).to_bytes(4, "big") + f for f in (delete, listing)))
            cid = c.correlation_id
            c.correlation_id = cid - 1
            deleted = c.read_response(type(_delete_records_request(topic, 0)))
            c.correlation_id = cid
            earliest = c.read_response(type(_list_offsets_earliest_request(topic)))
            dp = deleted.topics[0].partitions[0]
            assert dp.error_code.value == 0 and dp.low_watermark == target, dp
            lp = earliest.topics[0].partitions[0]
            assert lp.error_code.value == 0, lp
            seen.append((target, lp.offset))
        assert all(start == target for target, start in seen), seen
    finally:
        c.close()


# ---------------------------------------------------------------- 2. fetch.max.bytes (KIP-74)


def test_fetch_max_bytes_is_honoured_across_partitions(broker):
    """A consumer with a small fetch.max.bytes (and receive.message.max.bytes just above it, so
    librdkafka rejects any larger response with "Invalid response size") reads several
    partitions of ~60 KB batches: every record arrives, with no error."""
    topic, partitions, per_partition = "fetch-max-bytes", 6, 400
    create_topic(broker.bootstrap, topic, partitions)
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 200, "batch.size": 60_000,
                     "compression.type": "none", "acks": "all"})
    value = bytes(1000)
    for part in range(partitions):
        for i in range(per_partition):
            p.produce(topic, key=b"%d-%d" % (part, i), value=value, partition=part)
    assert p.flush(30) == 0
    fetch_max = 100_000
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "fetch-max-bytes-reader",
                     "enable.auto.commit": False, "auto.offset.reset": "earliest",
                     "fetch.max.bytes": fetch_max, "message.max.bytes": 70_000,
                     "receive.message.max.bytes": fetch_max + 2048,
                     "fetch.wait.max.ms": 100})
    errors_seen = []
    c.assign([ck.TopicPartition(topic, part, 0) for part in range(partitions)])
    got: dict[int, list[int]] = {part: [] for part in range(partitions)}
    total = partitions * per_partition
    deadline = time.monotonic() + 60
    try:
        while sum(map(len, got.values())) < total and time.monotonic() < deadline and not errors_seen:
            for m in c.consume(1000, 0.5):
                if m.error():
                    errors_seen.append(str(m.error()))
                    continue
                got[m.partition()].append(m.offset())
    finally:
        c.close()
    assert not errors_seen, errors_seen[:3]
    for part in range(partitions):
        assert got[part] == list(range(per_partition)), (part, len(got[part]))
