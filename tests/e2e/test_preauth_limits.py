"""Pre-authentication limits, against a real broker process, as an
attacker would try them:

- connections to a TLS listener are counted when accepted, before their handshake (Kafka's
  ConnectionQuotas): idle half-open TLS connections over ``max.connections.per.ip`` are closed
  at once, and a failed or abandoned handshake gives its slot back;
- on a SASL listener, frames before the first authentication are capped at
  ``sasl.server.max.receive.size`` (512 KiB, Kafka's name and default) and held outside
  ``queued.max.request.bytes``: a 3 MiB pre-auth size prefix is closed at once, and stalled
  pre-auth frames filling more than the pool do not stall an authenticated client.
"""

from __future__ import annotations

import os
import socket
import struct
import time

import pytest
from kio.schema.errors import ErrorCode

from oncelog.client.wire import RawClient, request_module

from ..helpers import free_port
from .test_limits import closed_by_broker, log_text, wait_for

trustme = pytest.importorskip("trustme")

pytestmark = pytest.mark.e2e

KiB, MiB = 1 << 10, 1 << 20
ATTACKER = "127.0.0.7"
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_alice="alice-secret";')


def _tcp(port: int, source_ip: str = "127.0.0.1") -> socket.socket:
    """A TCP connection from ``source_ip`` (a loopback address of its own, so that the per-IP
    count holds only this test's connections)."""
    return socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source_ip, 0))


def test_tls_connections_are_counted_before_their_handshake(broker_factory, tmp_path):
    ca = trustme.CA()
    keystore = str(tmp_path / "broker.pem")
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(keystore)
    ca_path = str(tmp_path / "ca.pem")
    ca.cert_pem.write_to_path(ca_path)
    ssl_port = free_port()
    broker = broker_factory(extra_args=[
        "--override", f"listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:{ssl_port}",
        "--override", f"ssl.keystore.location={keystore}", "--max-connections-per-ip", "20"])
    # 30 TCP connections that never start their TLS handshake: 20 are held, 10 refused at once.
    idle = [_tcp(ssl_port, ATTACKER) for _ in range(30)]
    time.sleep(1.0)  # well within the 10 s handshake timeout: the held ones are still open
    refused = [s for s in idle if closed_by_broker(s, 0.01)]
    assert len(refused) == 10, f"{len(refused)} of 30 half-open TLS connections refused (max.connections.per.ip=20)"
    assert f"max.connections.per.ip=20 reached for {ATTACKER}" in log_text(broker)
    # They go away without a handshake: every slot comes back (a handshake that never happened
    # is uncounted too), so 20 new half-open ones are all admitted again.
    for s in idle:
        s.close()
    time.sleep(0.5)

    def admitted_again() -> bool:
        again = [_tcp(ssl_port, ATTACKER) for _ in range(20)]
        time.sleep(0.5)
        try:
            return not any(closed_by_broker(s, 0.01) for s in again)
        finally:
            for s in again:
                s.close()

    assert wait_for(admitted_again, timeout=20, interval=0.5), "slots of abandoned TLS handshakes were not freed"
    # A real TLS client is served.
    import ssl

    ctx = ssl.create_default_context(cafile=ca_path)
    with ctx.wrap_socket(_tcp(ssl_port), server_hostname="127.0.0.1") as t:
        c = RawClient.__new__(RawClient)
        c.sock, c.correlation_id = t, 0
        answer = c.request(request_module(18, 3).ApiVersionsRequest(client_software_name="t",
                                                                     client_software_version="1"))
        assert answer.error_code == ErrorCode.none


def test_a_tls_connection_that_never_finishes_its_handshake_is_closed(broker_factory, tmp_path):
    """Idle half-open TLS: a TCP connection that never sends a ClientHello (or stops halfway)
    holds its slot for TLS_HANDSHAKE_TIMEOUT_S (10 s) at most, then the broker closes it."""
    from oncelog.server import TLS_HANDSHAKE_TIMEOUT_S

    ca = trustme.CA()
    keystore = str(tmp_path / "broker.pem")
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(keystore)
    ssl_port = free_port()
    broker_factory(extra_args=["--override", f"listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:{ssl_port}",
                               "--override", f"ssl.keystore.location={keystore}"])
    silent, halfway = _tcp(ssl_port, ATTACKER), _tcp(ssl_port, ATTACKER)
    halfway.sendall(bytes.fromhex("160301") + struct.pack(">H", 512) + os.urandom(40))  # a record cut short
    start = time.monotonic()
    try:
        assert closed_by_broker(silent, TLS_HANDSHAKE_TIMEOUT_S + 10)
        assert closed_by_broker(halfway, 5)
        took = time.monotonic() - start
        assert took >= TLS_HANDSHAKE_TIMEOUT_S - 1, f"closed after {took:.1f} s, before the handshake timeout"
    finally:
        silent.close()
        halfway.close()


@pytest.fixture
def sasl_broker(broker_factory):
    port = free_port()
    broker = broker_factory(extra_args=[
        "--override", f"listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{port}",
        "--override", f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}",
        "--override", "listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN",
        "--queued-max-request-bytes", str(4 * MiB)])
    broker.sasl_port = port
    return broker


def _login(port: int) -> RawClient:
    c = RawClient(f"127.0.0.1:{port}")
    assert c.request(request_module(17, 1).SaslHandshakeRequest(mechanism="PLAIN")).error_code == ErrorCode.none
    answer = c.request(request_module(36, 2).SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"))
    assert answer.error_code == ErrorCode.none
    return c


def test_a_large_pre_authentication_frame_is_closed_at_once(sasl_broker):
    s = _tcp(sasl_broker.sasl_port)
    try:
        s.sendall(struct.pack(">i", 3 * MiB) + os.urandom(1024))  # 3 MiB declared, before any login
        assert closed_by_broker(s, 5), "a 3 MiB pre-authentication frame was accepted"
    finally:
        s.close()
    assert "exceeds sasl.server.max.receive.size=524288" in log_text(sasl_broker)
    # A client that logs in is served as usual.
    c = _login(sasl_broker.sasl_port)
    try:
        assert c.request(request_module(3, 1).MetadataRequest(topics=None)).brokers
    finally:
        c.close()


def test_pre_authentication_frames_do_not_take_request_memory(sasl_broker):
    """Ten unauthenticated connections each park 480 KiB of a declared 500 KiB frame (4.7 MiB,
    over the 4 MiB queued.max.request.bytes): an authenticated client's Metadata is answered
    at once. Before, those frames held the shared pool and the client stalled for ~30 s (until
    the attackers' read timeout)."""
    c = _login(sasl_broker.sasl_port)
    attackers = []
    try:
        for _ in range(10):
            s = _tcp(sasl_broker.sasl_port)
            s.sendall(struct.pack(">i", 500 * KiB) + os.urandom(480 * KiB))
            attackers.append(s)
        time.sleep(1.0)  # let the broker read what was sent
        assert not any(closed_by_broker(s, 0.05) for s in attackers)  # under the cap: held, not refused
        start = time.monotonic()
        for _ in range(5):  # over the pool, a reading connection is paused after its first frame
            assert c.request(request_module(3, 1).MetadataRequest(topics=None)).brokers
        took = time.monotonic() - start
        assert took < 5.0, f"5 authenticated Metadata took {took:.1f} s while pre-auth frames were parked"
    finally:
        for s in attackers:
            s.close()
        c.close()


def test_2000_hostile_sockets_stay_bounded_and_authenticated_clients_are_served(tmp_path):
    """bench/preauth.py's attack as a test, asserting bounds only (its latency ratio is a
    benchmark figure, BENCHMARKS.md): 2,000 hostile sockets (no handshake, idle TLS, parked
    pre-auth frames, oversized pre-auth prefixes) against the default max.connections (1000):
    the broker holds at most that many descriptors for them, its memory grows by less than
    1000 x its pre-auth frame cap, and an authenticated client is answered throughout."""
    from bench.preauth import KINDS, attack, start_broker

    broker, port, ca_path = start_broker(str(tmp_path))
    try:
        r = attack(broker, port, ca_path, 2000, probe_seconds=2.0)
    finally:
        broker.kill()
    assert r["attacked"], "the authenticated probe got no answer under attack"
    assert max(r["attacked"]) < 5.0, f"an authenticated Metadata took {max(r['attacked']):.1f} s under attack"
    assert r["under"]["fds"] - r["before"]["fds"] <= 1000 + 16, (r["before"], r["under"])
    assert r["peak"]["VmHWM"] - r["before"]["VmRSS"] < 512, (r["before"], r["peak"])  # MiB, << 1000 x 512 KiB
    assert r["alive"]["oversize"] == 0, r["alive"]  # a 3 MiB pre-auth prefix is closed at once
    assert sum(r["alive"].values()) <= 1000, r["alive"]
    assert set(r["alive"]) == set(KINDS)
