"""The SASL session rules on both brokers, with the same settings: a SASL_PLAINTEXT
listener with PLAIN (users alice and admin) and ``connections.max.reauth.ms=2000``, on oncelog
and on a one-node Apache Kafka 4.4 started for this module. Each test runs against both and
asserts the same outcome, so a difference is a failure whichever broker changed:

- a second SaslHandshake during an exchange: ILLEGAL_SASL_STATE, then the connection is closed;
- SaslHandshake v0 (raw token frames) re-authenticating as the same user goes on; as another
  user closes the connection (the principal never changes);
- a SaslHandshake v0 session past ``connections.max.reauth.ms``: the next request closes it;
- a 3 MiB size prefix before authentication (over ``sasl.server.max.receive.size``, 512 KiB) is
  closed at once.
"""

from __future__ import annotations

import os
import socket
import struct
import time

import pytest
from kio.schema.errors import ErrorCode

from oncelog.tools.apache_kafka import KafkaCluster
from oncelog.client.wire import RawClient, request_module
from oncelog.process import BrokerProcess

from ..helpers import free_port, start_apache_kafka

pytestmark = [pytest.mark.e2e, pytest.mark.apache_kafka]

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
JAAS = f'{PLAIN} required user_alice="alice-secret" user_admin="admin-secret";'
REAUTH_MS = 2000


@pytest.fixture(scope="module")
def endpoints(tmp_path_factory):
    """{kind: "host:port" of the SASL_PLAINTEXT listener} for both brokers, configured alike."""
    kafka = KafkaCluster(nodes=1, client_protocol="SASL_PLAINTEXT", config={
        "listener.name.client.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.client.plain.sasl.jaas.config": JAAS,
        "connections.max.reauth.ms": str(REAUTH_MS)})
    start_apache_kafka(kafka)
    port = free_port()
    oncelog = BrokerProcess(str(tmp_path_factory.mktemp("sasl-diff") / "broker"), extra_args=[
        "--override", f"listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{port}",
        "--override", "listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN",
        "--override", f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}",
        "--override", f"connections.max.reauth.ms={REAUTH_MS}"])
    oncelog.start()
    try:
        yield {"apache-kafka": kafka.bootstrap, "oncelog": f"127.0.0.1:{port}"}
    finally:
        oncelog.kill()
        kafka.stop(graceful=False)


KINDS = ["oncelog", "apache-kafka"]


def _raw_login(c: RawClient, user: str, password: str) -> bytes:
    """SaslHandshake v0, then PLAIN's token as a raw frame (Kafka 0.10's framing)."""
    assert c.request(request_module(17, 0).SaslHandshakeRequest(mechanism="PLAIN")).error_code == ErrorCode.none
    c.send_frame(f"\0{user}\0{password}".encode())
    return c.recv_frame()


def _metadata(c: RawClient):
    return c.request(request_module(3, 1).MetadataRequest(topics=None))


@pytest.mark.parametrize("kind", KINDS)
def test_a_second_handshake_during_an_exchange(endpoints, kind):
    c = RawClient(endpoints[kind])
    try:
        assert c.request(request_module(17, 1).SaslHandshakeRequest(mechanism="PLAIN")).error_code == ErrorCode.none
        again = c.request(request_module(17, 1).SaslHandshakeRequest(mechanism="PLAIN"))
        assert again.error_code == ErrorCode.illegal_sasl_state
        assert c.is_closed()
    finally:
        c.close()


@pytest.mark.parametrize("kind", KINDS)
def test_handshake_v0_reauthentication_keeps_the_principal(endpoints, kind):
    c = RawClient(endpoints[kind])
    try:
        assert _raw_login(c, "alice", "alice-secret") == b""
        assert _metadata(c).brokers
        assert c.request(request_module(17, 0).SaslHandshakeRequest(mechanism="PLAIN")).error_code == ErrorCode.none
        c.send_frame(b"\0admin\0admin-secret")
        assert c.is_closed(), f"{kind}: re-authentication through handshake v0 switched alice to admin"
    finally:
        c.close()


@pytest.mark.parametrize("kind", KINDS)
def test_handshake_v0_sessions_expire(endpoints, kind):
    c = RawClient(endpoints[kind])
    try:
        assert _raw_login(c, "alice", "alice-secret") == b""
        assert _metadata(c).brokers  # within the session
        time.sleep(REAUTH_MS / 1000 + 0.5)
        c.send_frame(c.encode(request_module(3, 1).MetadataRequest(topics=None)))
        assert c.is_closed(), f"{kind}: a handshake-v0 session was served past connections.max.reauth.ms"
    finally:
        c.close()


@pytest.mark.parametrize("kind", KINDS)
def test_a_large_pre_authentication_frame_is_closed(endpoints, kind):
    host, port = endpoints[kind].split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(struct.pack(">i", 3 << 20) + os.urandom(1024))
        s.settimeout(5)
        try:
            closed = s.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            closed = True
        except socket.timeout:
            closed = False
        assert closed, f"{kind}: a 3 MiB pre-authentication frame was accepted"
