"""Resource limits against a real broker process: what a stalled, flooding or
garbage-sending client can make the broker hold is bounded, memory comes back, and other
clients keep working. Memory is the broker process's own, from /proc/<pid>/status."""

from __future__ import annotations

import datetime
import random
import resource
import socket
import struct
import threading
import time

import pytest

from oncelog.protocol import records as rb
from oncelog.client.wire import RawClient, list_offsets_latest, produce_request, request_module

from ..helpers import create_topic
from .test_bad_input import normal_client_works

pytestmark = pytest.mark.e2e

MiB = 1 << 20


def memory_mib(broker) -> dict[str, float]:
    """VmRSS (resident now) and VmHWM (peak resident) of the broker process, in MiB."""
    out = {}
    with open(f"/proc/{broker.proc.pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) / 1024
    return out


def log_text(broker) -> str:
    with open(broker.log_path, errors="replace") as f:
        return f.read()


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return predicate()


def api_versions(client: RawClient):
    return client.request(request_module(18, 3).ApiVersionsRequest(client_software_name="t",
                                                                    client_software_version="1"))


def connect(broker, source_ip: str | None = None) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if source_ip:
        s.bind((source_ip, 0))
    s.settimeout(10)
    s.connect((broker.host, broker.port))
    return s


def closed_by_broker(s: socket.socket, timeout: float) -> bool:
    s.settimeout(timeout)
    try:
        return s.recv(1) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def test_slowloris_frames_cost_what_arrived_and_time_out(broker_factory):
    """12 connections declare ~100 MiB frames (under socket.request.max.bytes) and stall: the
    broker's peak RSS stays far below 12 x 100 MiB, a normal client produces and consumes
    meanwhile, and the stalled connections are closed after the read timeout."""
    broker = broker_factory(extra_args=["--request-read-timeout-ms", "3000"])
    normal_client_works(broker.bootstrap, "warm-up")
    before = memory_mib(broker)
    stalled = []
    for i in range(12):
        s = connect(broker)
        # half send a few bytes of the body, half 4 MiB of it, then nothing more
        s.sendall(struct.pack(">i", 100 * MiB - 1) + (b"\x00\x00\x00\x03" if i % 2 else bytes(4 * MiB)))
        stalled.append(s)
    started = time.monotonic()
    normal_client_works(broker.bootstrap)
    during = memory_mib(broker)
    closed_at = []
    for s in stalled:
        assert closed_by_broker(s, 30), "a stalled connection outlived the read timeout"
        closed_at.append(time.monotonic() - started)
    after = memory_mib(broker)
    print(f"slowloris 12 x 100 MiB: RSS before {before['VmRSS']:.0f} MiB, during {during['VmRSS']:.0f} MiB, "
          f"after {after['VmRSS']:.0f} MiB, peak {after['VmHWM']:.0f} MiB; closed after {min(closed_at):.1f}-"
          f"{max(closed_at):.1f} s")
    assert after["VmHWM"] < 600, after
    assert after["VmHWM"] - before["VmRSS"] < 150, (before, after)  # 6 x 4 MiB sent: at most 4x that held
    assert min(closed_at) > 2.5  # not before the timeout (3 s from the frame's first byte)
    # one line per connection, at most 10 a second: the rest are counted in a summary line
    line = "request read timeout (oncelog.request.read.timeout.ms=3000)"
    log = wait_for(lambda: (text := log_text(broker)).count(line) == 12 or "suppressed" in text and text, 10) \
        or log_text(broker)
    assert log.count(line) == 12 or (log.count(line) >= 10 and "suppressed" in log), log[-3000:]
    assert "104857599-byte request frame" in log
    assert broker.proc.poll() is None
    normal_client_works(broker.bootstrap)


def _produce_frame(client: RawClient, topic: str, value: bytes) -> bytes:
    batch = rb.build_batch([(b"k", value)], timestamp_ms=int(time.time() * 1000))
    payload = client.encode(produce_request(topic, 0, batch))
    return struct.pack(">i", len(payload)) + payload


def _parked_fetch(client: RawClient, topic: str):
    m = request_module(1, 12)
    return m.FetchRequest(replica_id=-1, max_wait=datetime.timedelta(seconds=60), min_bytes=1, max_bytes=1 << 20,
                          isolation_level=0, session_id=0, session_epoch=-1,
                          topics=(m.FetchTopic(topic=topic, partitions=(m.FetchPartition(
                              partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                              log_start_offset=-1, partition_max_bytes=1 << 20),)),),
                          forgotten_topics_data=(), rack_id="")


def test_queued_max_request_bytes_stops_reading_and_everything_is_answered_after(broker_factory):
    """Three connections each park a long-poll Fetch, then pipeline 30 x 1 MiB produces behind it
    (requests on a connection are processed in order, so they all wait): with an 8 MiB
    queued.max.request.bytes the broker stops reading, so its RSS grows by ~10 MiB, not 90;
    once the fetches return, every produce is answered, in order, and stored."""
    limit_mib, per_conn, conns = 8, 30, 3
    broker = broker_factory(fsync="never", extra_args=["--queued-max-request-bytes", f"{limit_mib}m"])
    create_topic(broker.bootstrap, "parked", 1)
    create_topic(broker.bootstrap, "big", 1)
    value = bytes(MiB - 1024)
    warm = RawClient(broker.bootstrap)
    assert warm.request(produce_request("big", 0, rb.build_batch(
        [(b"k", value)], timestamp_ms=int(time.time() * 1000)))).responses[0].partition_responses[0].error_code == 0
    before = memory_mib(broker)

    clients, fetch_cids, frames_sent, senders = [], [], [], []
    for i in range(conns):
        c = RawClient(broker.bootstrap, timeout=60)
        c.send_frame(c.encode(_parked_fetch(c, "parked")))
        fetch_cids.append(c.correlation_id)
        frames = [_produce_frame(c, "big", value) for _ in range(per_conn)]
        sent = [0]

        def send(c=c, frames=frames, sent=sent):
            for frame in frames:
                c.sock.sendall(frame)
                sent[0] += 1

        t = threading.Thread(target=send, daemon=True)
        t.start()
        clients.append(c)
        frames_sent.append(sent)
        senders.append(t)

    # The senders block once the broker stops reading: wait until none has progressed for 1.5 s.
    last, still_since = None, time.monotonic()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        now = [s[0] for s in frames_sent]
        if now != last:
            last, still_since = now, time.monotonic()
        elif time.monotonic() - still_since > 1.5:
            break
        time.sleep(0.1)
    parked = memory_mib(broker)
    total_sent = sum(s[0] for s in frames_sent)
    print(f"queued.max.request.bytes={limit_mib} MiB: {total_sent} of {conns * per_conn} 1 MiB frames sent while "
          f"parked; RSS {before['VmRSS']:.0f} -> {parked['VmRSS']:.0f} MiB, peak {parked['VmHWM']:.0f} MiB")
    assert total_sent < conns * per_conn // 2, "the broker kept reading past queued.max.request.bytes"
    # limit + one frame finishing over it + a read per connection, plus decoding and allocator slack
    assert parked["VmHWM"] - before["VmRSS"] < limit_mib + 30, (before, parked)

    # Data for the parked fetches: they answer, and the queued produces drain.
    assert warm.request(produce_request("parked", 0, rb.build_batch(
        [(b"k", b"v")], timestamp_ms=int(time.time() * 1000)))).responses[0].partition_responses[0].error_code == 0
    fetch_cls = type(_parked_fetch(clients[0], "parked"))
    produce_cls = type(produce_request("big", 0, b""))
    offsets = []
    for c, fetch_cid in zip(clients, fetch_cids):
        cid, resp = _read(c, fetch_cls)
        assert cid == fetch_cid and resp.responses[0].partitions[0].error_code == 0
        for k in range(per_conn):
            cid, resp = _read(c, produce_cls)
            assert cid == fetch_cid + 1 + k  # in request order
            part = resp.responses[0].partition_responses[0]
            assert part.error_code == 0
            offsets.append(part.base_offset)
    for t in senders:
        t.join(30)
    assert sorted(offsets) == list(range(1, 1 + conns * per_conn))
    assert list_offsets_latest(warm, "big") == 1 + conns * per_conn
    assert broker.proc.poll() is None


def test_frames_larger_than_queued_max_request_bytes_still_get_through(broker_factory):
    """Frames each larger than the whole queued.max.request.bytes, on several connections at
    once: one at a time may finish over the limit (Kafka's memory pool lets one request exceed
    it too), so none waits for ever."""
    broker = broker_factory(fsync="never", extra_args=["--queued-max-request-bytes", "1m",
                                                       "--max-message-bytes", "8m"])
    create_topic(broker.bootstrap, "big", 1)
    clients = [RawClient(broker.bootstrap, timeout=60) for _ in range(3)]
    frames = [[_produce_frame(c, "big", bytes(3 * MiB)) for _ in range(2)] for c in clients]
    threads = [threading.Thread(target=lambda c=c, fs=fs: [c.sock.sendall(f) for f in fs], daemon=True)
               for c, fs in zip(clients, frames)]
    for t in threads:
        t.start()
    produce_cls = type(produce_request("big", 0, b""))
    for c in clients:
        for k in (1, 2):
            cid, resp = _read(c, produce_cls)
            assert cid == k and resp.responses[0].partition_responses[0].error_code == 0
    for t in threads:
        t.join(30)
    assert list_offsets_latest(clients[0], "big") == 6


def _read(client: RawClient, request_cls):
    from oncelog.client.wire import decode_response

    return decode_response(client.recv_frame(), request_cls)


def test_max_connections_and_per_ip(broker_factory):
    broker = broker_factory(extra_args=["--max-connections", "5", "--max-connections-per-ip", "3"])
    local = [connect(broker, "127.0.0.1") for _ in range(3)]
    over_ip = connect(broker, "127.0.0.1")
    assert closed_by_broker(over_ip, 10)  # 4th from one address
    other = [connect(broker, "127.0.0.2") for _ in range(2)]  # another address: 5 in all
    over_total = connect(broker, "127.0.0.3")
    assert closed_by_broker(over_total, 10)  # 6th overall
    for s in local + other:  # the admitted ones work
        c = RawClient.__new__(RawClient)
        c.sock, c.correlation_id = s, 0
        assert api_versions(c).error_code == 0
    local.pop().close()  # a slot frees up: a new connection from that address is served
    c = wait_for(lambda: _served(broker, "127.0.0.1"), timeout=20)
    assert c, "a freed connection slot was not reused"
    log = broker.tail_log(50)
    assert "max.connections.per.ip=3 reached for 127.0.0.1" in log and "max.connections=5 reached" in log
    for s in local + other:
        s.close()
    # DescribeConfigs reports the limits: given ones as static broker configs, the others as defaults
    from confluent_kafka.admin import AdminClient, ConfigResource

    res = ConfigResource("broker", "1")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    got = admin.describe_configs([res])[res].result(30)
    assert (got["max.connections"].value, got["max.connections"].source) == ("5", 4)  # STATIC_BROKER_CONFIG
    assert (got["max.connections.per.ip"].value, got["max.connections.per.ip"].source) == ("3", 4)
    assert (got["queued.max.request.bytes"].value, got["queued.max.request.bytes"].source) == (str(100 * MiB), 5)
    assert got["connections.max.idle.ms"].value == "600000"
    assert got["oncelog.request.read.timeout.ms"].value == "30000"
    assert got["socket.request.max.bytes"].value == str(100 * MiB)


def _served(broker, source_ip: str) -> bool:
    s = connect(broker, source_ip)
    c = RawClient.__new__(RawClient)
    c.sock, c.correlation_id = s, 0
    try:
        return api_versions(c).error_code == 0
    except (ConnectionError, OSError):
        s.close()
        return False


def test_idle_connections_are_closed_active_and_waiting_ones_are_not(broker_factory):
    broker = broker_factory(extra_args=["--connections-max-idle-ms", "2000"])
    create_topic(broker.bootstrap, "parked", 1)
    idle, active, waiting = (RawClient(broker.bootstrap, timeout=30) for _ in range(3))
    assert api_versions(idle).error_code == 0
    idle_since = time.monotonic()
    waiting.send_frame(waiting.encode(_long_poll(4)))  # a request in progress for longer than idle
    closed = threading.Event()

    def watch():
        if closed_by_broker(idle.sock, 30):
            closed.set()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    until = time.monotonic() + 4.5
    while time.monotonic() < until:  # requests 10 times a second, for more than twice the idle time
        assert api_versions(active).error_code == 0
        time.sleep(0.1)
    watcher.join(30)
    assert closed.is_set(), "the idle connection was not closed"
    cid, resp = _read(waiting, type(_long_poll(4)))
    assert resp.responses[0].partitions[0].error_code == 0  # the long poll was answered, not cut
    assert api_versions(active).error_code == 0 and api_versions(waiting).error_code == 0
    assert "closed idle connection" in broker.tail_log(50)
    assert time.monotonic() - idle_since >= 2.0


def _long_poll(seconds: float):
    m = request_module(1, 12)
    return m.FetchRequest(replica_id=-1, max_wait=datetime.timedelta(seconds=seconds), min_bytes=1,
                          max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
                          topics=(m.FetchTopic(topic="parked", partitions=(m.FetchPartition(
                              partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                              log_start_offset=-1, partition_max_bytes=1 << 20),)),),
                          forgotten_topics_data=(), rack_id="")


def test_memory_returns_after_2000_connections_close(broker_factory):
    n = 2000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n + 200 and (hard == resource.RLIM_INFINITY or hard >= n + 200):
        resource.setrlimit(resource.RLIMIT_NOFILE, (n + 200, hard))
    batch = min(n, resource.getrlimit(resource.RLIMIT_NOFILE)[0] - 200)  # at once, as far as our fd limit allows
    broker = broker_factory(extra_args=["--max-connections", str(n + 100)])
    request = RawClient(broker.bootstrap)
    frame = struct.pack(">i", 0)  # placeholder, replaced below
    payload = request.encode(request_module(18, 3).ApiVersionsRequest(client_software_name="t",
                                                                     client_software_version="1"))
    frame = struct.pack(">i", len(payload)) + payload

    def round_of(count: int) -> None:
        done = 0
        while done < count:
            socks = [connect(broker) for _ in range(min(batch, count - done))]
            for s in socks:
                s.sendall(frame)
            for i, s in enumerate(socks):
                assert s.recv(4), "no response"
                if i % 2:  # half leave a partial frame behind (a 1 MiB one started)
                    s.sendall(struct.pack(">i", MiB) + bytes(1000))
            for s in socks:
                s.close()
            done += len(socks)

    round_of(100)  # warm the code paths
    time.sleep(0.5)
    before = memory_mib(broker)
    round_of(n)
    after = wait_for(lambda: (m := memory_mib(broker))["VmRSS"] - before["VmRSS"] < 20 and m, timeout=20) \
        or memory_mib(broker)
    print(f"{n} connections ({batch} at once): RSS before {before['VmRSS']:.0f} MiB, after {after['VmRSS']:.0f} MiB, "
          f"peak {after['VmHWM']:.0f} MiB")
    assert after["VmRSS"] - before["VmRSS"] < 20, (before, after)
    assert api_versions(RawClient(broker.bootstrap)).error_code == 0


def test_garbage_burst_gives_bounded_log_without_tracebacks(broker):
    """One WARNING line per offending connection, with the client's id escaped, at most 10 a
    second with a summary of the rest, and never a traceback."""
    start = len(log_text(broker))
    evil = connect(broker)  # a client id with control characters, then nonsense
    frame = struct.pack(">hhih", 3, 12, 1, 11) + b"evil\nclient" + b"\x00" + b"\xff" * 8
    evil.sendall(struct.pack(">i", len(frame)) + frame)
    assert closed_by_broker(evil, 10)
    line = wait_for(lambda: "evil\\nclient" in log_text(broker)[start:], 10)
    assert line, log_text(broker)[start:]

    rng = random.Random(17)
    real = RawClient(broker.bootstrap).encode(produce_request("t", 0, rb.build_batch([(b"k", b"v")])))
    t0 = time.monotonic()
    for i in range(500):
        kind = i % 3
        if kind == 0:
            frame = rng.randbytes(rng.randrange(0, 200))
        elif kind == 1:  # a real produce with some bytes flipped
            frame = bytearray(real)
            for _ in range(rng.randrange(1, 6)):
                frame[rng.randrange(len(frame))] = rng.randrange(256)
            frame = bytes(frame)
        else:  # a known API and version, garbage body
            frame = struct.pack(">hhih", rng.choice([0, 1, 3, 18, 19, 32]), rng.randrange(0, 13), i, 4) + b"fuzz" \
                + rng.randbytes(rng.randrange(0, 100))
        s = connect(broker)
        try:
            s.sendall(struct.pack(">i", len(frame)) + frame)
            s.settimeout(0.5)
            s.recv(65536)
        except (socket.timeout, OSError):
            pass
        s.close()
    elapsed = time.monotonic() - t0
    assert broker.proc.poll() is None
    normal_client_works(broker.bootstrap)
    written = wait_for(lambda: "suppressed" in (text := log_text(broker)[start:]) and text, 10) \
        or log_text(broker)[start:]
    lines = written.splitlines()
    print(f"500 garbage frames in {elapsed:.1f} s: {len(lines)} log lines, {len(written)} bytes")
    assert "Traceback" not in written
    assert len(lines) <= 10 * (elapsed + 3) + 20, "\n".join(lines[:50])
    assert all(len(line) < 2000 for line in lines)
    assert "evil\nclient" not in written  # no raw control characters from a client in the log
    assert "suppressed" in written  # 500 bad connections in well under 50 s: most were counted, not written
