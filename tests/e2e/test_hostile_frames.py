"""Frames that once killed the broker process: against a real broker, each
closes its own connection with one log line naming the field, the process stays up with its
memory where it was, and other clients — one connected throughout, and a new confluent-kafka
producer and consumer — carry on.

Without the decode guard the first frame alone makes kio ask for 34 GB and the process abort.
"""

from __future__ import annotations

import random
import struct

from oncelog.client.wire import RawClient, request_module

from ..protocol.test_guard import FUZZ_FINDS
from .test_bad_input import normal_client_works

ISSUE_FRAME = bytes.fromhex("000000100003000c00000001ffff00ffffffff0f")  # size prefix included


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def send_raw(bootstrap: str, data: bytes) -> RawClient:
    c = RawClient(bootstrap)
    c.sock.sendall(data)
    return c


def metadata_ok(client: RawClient, port: int) -> None:
    m = request_module(3, 12)
    resp = client.request(m.MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                            include_topic_authorized_operations=False))
    assert resp.brokers[0].port == port


def mutated_variants(seed: int = 17, count: int = 60) -> list[bytes]:
    """The issue's frame with its count varint, api version and tail randomised: each declares
    an array far larger than the frame (flexible Metadata versions 9..13)."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        version = rng.randrange(9, 14)
        count_varint = bytes([rng.randrange(0x80, 0x100) for _ in range(rng.randrange(2, 5))]) + bytes([rng.randrange(1, 0x10)])
        tail = rng.randbytes(rng.randrange(0, 12))
        body = struct.pack(">hhih", 3, version, rng.randrange(1 << 30), -1) + b"\x00" + count_varint + tail
        out.append(struct.pack(">i", len(body)) + body)
    return out


def test_the_20_byte_metadata_frame_closes_its_connection_and_nothing_else(broker):
    bystander = RawClient(broker.bootstrap)
    metadata_ok(bystander, broker.port)
    before = rss_kib(broker.proc.pid)

    bad = send_raw(broker.bootstrap, ISSUE_FRAME)
    assert bad.is_closed()
    assert broker.proc.poll() is None
    log = broker.tail_log()
    assert "topics: array of 4294967294 elements (at least 18 bytes each) but 0 bytes left" in log
    assert "Traceback" not in log

    metadata_ok(bystander, broker.port)
    assert rss_kib(broker.proc.pid) < before + 64 * 1024
    normal_client_works(broker.bootstrap)


def test_mutated_and_fuzz_found_frames_never_take_the_broker_down(broker):
    bystander = RawClient(broker.bootstrap)
    metadata_ok(bystander, broker.port)
    before = rss_kib(broker.proc.pid)
    frames = mutated_variants() + [struct.pack(">i", len(f)) + f for f in map(bytes.fromhex, FUZZ_FINDS)]
    # Also a legacy (int32) count of 2^31-1: 16 GiB in kio, an abort wherever memory is capped.
    legacy = struct.pack(">hhih", 3, 1, 1, -1) + struct.pack(">i", 2**31 - 1)
    frames.append(struct.pack(">i", len(legacy)) + legacy)
    for frame in frames:
        bad = send_raw(broker.bootstrap, frame)
        assert bad.is_closed(), frame.hex()
        bad.close()
        assert broker.proc.poll() is None, frame.hex()
    metadata_ok(bystander, broker.port)
    assert rss_kib(broker.proc.pid) < before + 64 * 1024
    normal_client_works(broker.bootstrap)


def test_hostile_frames_pipelined_behind_a_good_request(broker):
    """A good request and a hostile one in one write: the good one is answered (or dropped with
    the connection), the process survives."""
    m = request_module(3, 12)
    good_client = RawClient(broker.bootstrap)
    good = good_client.encode(m.MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                include_topic_authorized_operations=False))
    good_client.sock.sendall(struct.pack(">i", len(good)) + good + ISSUE_FRAME)
    good_client.sock.settimeout(5)
    try:
        while good_client.sock.recv(65536):
            pass
    except OSError:
        pass
    assert broker.proc.poll() is None
    normal_client_works(broker.bootstrap)
