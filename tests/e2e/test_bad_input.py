"""Bad input: each case gets a clear error or a closed connection, never a crash or lost data,
and is followed by a normal client succeeding on the same broker."""

from __future__ import annotations

import os
import random
import socket
import struct
import time

import confluent_kafka as ck
import pytest

from oncelog.protocol import records as rb

from ..helpers import consume_all, create_topic
from oncelog.client.wire import RawClient, list_offsets_latest, produce_request, request_module


def normal_client_works(bootstrap: str, topic: str = "after-bad-input") -> None:
    """A real client produces and reads back on the same broker."""
    p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    marker = os.urandom(8).hex().encode()
    p.produce(topic, key=b"k", value=marker)
    assert p.flush(20) == 0
    got = consume_all(bootstrap, topic, 1, expected=1, timeout=20)
    assert marker in [v for _, _, v, _ in got[0]]


def test_oversized_frame_closes_only_that_connection(broker_factory):
    broker = broker_factory(extra_args=["--socket-request-max-bytes", "1m"])
    bystander = RawClient(broker.bootstrap)
    bad = RawClient(broker.bootstrap)
    bad.sock.sendall(struct.pack(">i", 200 * 1024 * 1024))  # declares 200 MiB, sends nothing more
    assert bad.is_closed()
    assert "exceeds socket.request.max.bytes" in broker.tail_log()
    m = request_module(3, 12)
    resp = bystander.request(m.MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                               include_topic_authorized_operations=False))
    assert resp.brokers[0].port == broker.port
    normal_client_works(broker.bootstrap)


def test_malformed_request_is_logged_with_client_and_api_and_connection_closed(broker):
    bad = RawClient(broker.bootstrap)
    header = struct.pack(">hhih", 3, 12, 1, 9) + b"evilclient" [:9] + b"\x00"
    bad.send_frame(header + b"\xff\xff\xff\xff\xff\xff")
    assert bad.is_closed()
    log = broker.tail_log()
    assert "malformed or unsupported request" in log and "api=metadata v12" in log and "127.0.0.1:" in log
    normal_client_works(broker.bootstrap)


def test_unsupported_version_and_unknown_api_close_the_connection(broker):
    for frame in (struct.pack(">hhih", 0, 1, 1, -1), struct.pack(">hhih", 9999, 0, 1, -1), b"\x00"):
        c = RawClient(broker.bootstrap)
        c.send_frame(frame)
        assert c.is_closed()
    normal_client_works(broker.bootstrap)


def test_random_garbage_never_crashes_the_broker(broker):
    rng = random.Random(1234)
    for _ in range(200):
        c = RawClient(broker.bootstrap)
        key = rng.choice([0, 1, 2, 3, 18, 19, 20, 21, 32, 37, 60, rng.randrange(-5, 200)])
        frame = struct.pack(">hhi", key, rng.randrange(0, 20), rng.randrange(1 << 30)) + rng.randbytes(rng.randrange(0, 300))
        try:
            c.send_frame(frame)
            c.sock.settimeout(0.2)
            c.sock.recv(65536)
        except (socket.timeout, ConnectionError, OSError):
            pass
        c.close()
    assert broker.proc.poll() is None
    normal_client_works(broker.bootstrap)


def test_bad_crc_is_corrupt_message_and_nothing_is_written(broker):
    create_topic(broker.bootstrap, "crc", 1)
    c = RawClient(broker.bootstrap)
    good = rb.build_batch([(b"k", b"good")])
    assert c.request(produce_request("crc", 0, good)).responses[0].partition_responses[0].error_code == 0
    bad = bytearray(rb.build_batch([(b"k", b"flipped")]))
    bad[-3] ^= 0x40
    resp = c.request(produce_request("crc", 0, bytes(bad)))
    part = resp.responses[0].partition_responses[0]
    assert part.error_code == 2  # CORRUPT_MESSAGE
    assert "CRC" in (part.error_message or "")
    # a request with two batches for one partition writes neither: INVALID_RECORD before any CRC
    # check (Kafka's ProduceRequest.validateRecords: exactly one batch per partition, v3+)
    resp = c.request(produce_request("crc", 0, good + bytes(bad)))
    assert resp.responses[0].partition_responses[0].error_code == 87  # INVALID_RECORD
    assert list_offsets_latest(c, "crc") == 1
    normal_client_works(broker.bootstrap, "crc")
    got = consume_all(broker.bootstrap, "crc", 1, expected=2, timeout=20)
    assert [v for _, _, v, _ in got[0]][0] == b"good" and b"flipped" not in [v for _, _, v, _ in got[0]]


def test_unknown_topic_or_partition(broker):
    create_topic(broker.bootstrap, "known", 2)
    c = RawClient(broker.bootstrap)
    batch = rb.build_batch([(b"k", b"v")])
    assert c.request(produce_request("known", 7, batch)).responses[0].partition_responses[0].error_code == 3
    assert c.request(produce_request("never-made", 0, batch)).responses[0].partition_responses[0].error_code == 3
    m = request_module(1, 12)
    import datetime
    fetch = m.FetchRequest(replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=1 << 20,
                           isolation_level=0, session_id=0, session_epoch=-1,
                           topics=(m.FetchTopic(topic="known", partitions=(m.FetchPartition(
                               partition=9, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                               log_start_offset=-1, partition_max_bytes=1 << 20),)),),
                           forgotten_topics_data=(), rack_id="")
    assert c.request(fetch).responses[0].partitions[0].error_code == 3
    normal_client_works(broker.bootstrap)


@pytest.mark.parametrize("name", ["bad name", "slash/es", "", ".", "..", "x" * 250, "ünïcode"])
def test_illegal_topic_names_are_invalid_topic(broker, name):
    m = request_module(19, 7)
    c = RawClient(broker.bootstrap)
    resp = c.request(m.CreateTopicsRequest(topics=(m.CreatableTopic(name=name, num_partitions=1, replication_factor=1,
                                                                    assignments=(), configs=()),),
                                           timeout=__import__("datetime").timedelta(seconds=5), validate_only=False))
    assert resp.topics[0].error_code == 17  # INVALID_TOPIC_EXCEPTION
    md = request_module(3, 12)
    resp = c.request(md.MetadataRequest(topics=(md.MetadataRequestTopic(topic_id=__import__("uuid").UUID(int=0), name=name),),
                                        allow_auto_topic_creation=True, include_topic_authorized_operations=False))
    assert resp.topics[0].error_code == 17
    assert not any(n.startswith("bad") for n in os.listdir(broker.data_dir))
    normal_client_works(broker.bootstrap)


def test_message_too_large(broker_factory):
    broker = broker_factory(extra_args=["--max-message-bytes", "2000"])
    create_topic(broker.bootstrap, "big", 1)
    c = RawClient(broker.bootstrap)
    resp = c.request(produce_request("big", 0, rb.build_batch([(b"k", b"x" * 5000)])))
    assert resp.responses[0].partition_responses[0].error_code == 10  # MESSAGE_TOO_LARGE
    assert list_offsets_latest(c, "big") == 0
    normal_client_works(broker.bootstrap)
