"""SASL on the broker: SASL_PLAINTEXT and SASL_SSL listeners with PLAIN and
SCRAM-SHA-256/512, real clients (confluent-kafka, kafka-python); a wrong password or an unknown
user is refused with SASL_AUTHENTICATION_FAILED and nothing is written; a request before
authentication closes the connection."""

from __future__ import annotations

import os
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

from kio.schema.errors import ErrorCode

from oncelog.client.wire import RawClient, request_module
from oncelog.process import BrokerProcess
from tests.helpers import free_port, produce_one, read_values

trustme = pytest.importorskip("trustme")

pytestmark = pytest.mark.e2e

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')




@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    d = tmp_path_factory.mktemp("sasl")
    ca = trustme.CA()
    ca_path = os.path.join(d, "ca.pem")
    ca.cert_pem.write_to_path(ca_path)
    keystore = os.path.join(d, "broker.pem")
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(keystore)
    sasl_port, sasl_ssl_port = free_port(), free_port()
    b = BrokerProcess(str(d / "broker"), extra_args=[
        "--override", f"listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{sasl_port},"
                      f"SASL_SSL://127.0.0.1:{sasl_ssl_port}",
        "--override", f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}",
        "--override", f"listener.name.sasl_ssl.plain.sasl.jaas.config={JAAS}",
        "--override", f"ssl.keystore.location={keystore}"])
    b.start()
    # SCRAM credentials for alice, over the PLAINTEXT listener (no authorizer configured).
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
        futures = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "alice", ScramCredentialInfo(mechanism, 4096), b"alice-scram")])
        for f in futures.values():
            f.result(10)
    b.sasl_port, b.sasl_ssl_port, b.ca = sasl_port, sasl_ssl_port, ca_path
    yield b
    b.kill()


def _conf(b, mechanism: str, user: str, password: str, tls: bool = False) -> dict:
    conf = {"bootstrap.servers": f"127.0.0.1:{b.sasl_ssl_port if tls else b.sasl_port}",
            "security.protocol": "SASL_SSL" if tls else "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password}
    if tls:
        conf["ssl.ca.location"] = b.ca
    return conf






@pytest.mark.parametrize("mechanism, user, password, tls", [
    ("PLAIN", "alice", "alice-secret", False),
    ("SCRAM-SHA-256", "alice", "alice-scram", False),
    ("SCRAM-SHA-512", "alice", "alice-scram", False),
    ("PLAIN", "admin", "admin-secret", True),
    ("SCRAM-SHA-512", "alice", "alice-scram", True),
])
def test_authenticated_clients_produce_and_consume(broker, mechanism, user, password, tls):
    conf = _conf(broker, mechanism, user, password, tls)
    topic = f"sasl-{mechanism.lower()}-{'tls' if tls else 'plain'}"
    error = produce_one(conf, topic, b"v")
    assert error is None, error
    assert read_values(conf, topic, 1) == [b"v"]
    # Metadata answers a SASL client with its own listener's address.
    port = broker.sasl_ssl_port if tls else broker.sasl_port
    assert [x.port for x in AdminClient(conf).list_topics(timeout=10).brokers.values()] == [port]


@pytest.mark.parametrize("mechanism, user, password", [
    ("PLAIN", "alice", "wrong"), ("PLAIN", "mallory", "alice-secret"),
    ("SCRAM-SHA-256", "alice", "wrong"), ("SCRAM-SHA-512", "mallory", "x"),
])
def test_a_wrong_password_or_unknown_user_is_refused_and_nothing_is_written(broker, mechanism, user, password):
    topic = f"refused-{uuid.uuid4().hex[:6]}"
    assert produce_one(_conf(broker, mechanism, user, password), topic, b"x") is not None  # librdkafka retries the authentication until the record times out
    assert topic not in AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10).topics
    with open(broker.log_path) as f:
        assert f"SASL {mechanism} authentication failed from 127.0.0.1" in f.read()


@pytest.mark.parametrize("mechanism, password, tls", [
    ("PLAIN", "alice-secret", False), ("SCRAM-SHA-256", "alice-scram", False), ("SCRAM-SHA-512", "alice-scram", True),
])
def test_kafka_python_over_sasl(broker, mechanism, password, tls):
    from kafka import KafkaConsumer, KafkaProducer

    topic = f"kafka-python-{mechanism.lower()}-{'tls' if tls else 'plain'}"
    common = dict(bootstrap_servers=f"127.0.0.1:{broker.sasl_ssl_port if tls else broker.sasl_port}",
                  security_protocol="SASL_SSL" if tls else "SASL_PLAINTEXT", sasl_mechanism=mechanism,
                  sasl_plain_username="alice", sasl_plain_password=password)
    if tls:
        common["ssl_cafile"] = broker.ca
    p = KafkaProducer(**common)
    p.send(topic, b"kp").get(timeout=20)
    p.close()
    c = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=10000, **common)
    assert [m.value for m in c] == [b"kp"]
    c.close()


def test_a_request_before_authentication_closes_the_connection(broker):
    c = RawClient(f"127.0.0.1:{broker.sasl_port}")
    try:
        c.send_frame(c.encode(request_module(3, 1).MetadataRequest(topics=None)))
        assert c.is_closed()  # closed, no answer
    finally:
        c.close()


def test_an_unsupported_mechanism_is_refused(broker):
    assert produce_one(_conf(broker, "OAUTHBEARER", "alice", "x") | {"sasl.oauthbearer.config": "principal=alice"},
                       "oauth", b"x") is not None


def test_sasl_handshake_on_a_plaintext_listener_is_an_illegal_state(broker):
    c = RawClient(broker.bootstrap)
    try:
        answer = c.request(request_module(17, 1).SaslHandshakeRequest(mechanism="PLAIN"))
        assert answer.error_code == ErrorCode.illegal_sasl_state
    finally:
        c.close()


def test_handshake_then_authenticate_by_hand_with_plain(broker):
    """The exchange at the protocol level: the handshake lists the listener's mechanisms, a
    wrong password is SASL_AUTHENTICATION_FAILED with Kafka's message and the connection closes."""
    c = RawClient(f"127.0.0.1:{broker.sasl_port}")
    try:
        hs = c.request(request_module(17, 1).SaslHandshakeRequest(mechanism="PLAIN"))
        assert hs.error_code == ErrorCode.none
        assert set(hs.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
        m = request_module(36, 2)
        answer = c.request(m.SaslAuthenticateRequest(auth_bytes=b"\0alice\0nope"))
        assert answer.error_code == ErrorCode.sasl_authentication_failed
        assert answer.error_message == "Authentication failed: Invalid username or password"
        assert c.is_closed()
    finally:
        c.close()


# ---------------------------------------------------------------------------- KIP-368


@pytest.fixture(scope="module")
def reauth_broker(tmp_path_factory):
    d = tmp_path_factory.mktemp("reauth")
    port = free_port()
    b = BrokerProcess(str(d / "broker"), extra_args=[
        "--override", f"listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{port}",
        "--override", f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}",
        "--override", "listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN",
        "--override", "connections.max.reauth.ms=1500"])
    b.start()
    b.sasl_port = port
    yield b
    b.kill()


def _plain_login(c: RawClient, user: str, password: str):
    hs = c.request(request_module(17, 1).SaslHandshakeRequest(mechanism="PLAIN"))
    assert hs.error_code == ErrorCode.none
    return c.request(request_module(36, 2).SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{password}".encode()))


def _metadata(c: RawClient):
    return c.request(request_module(3, 1).MetadataRequest(topics=None))


def test_a_session_past_its_lifetime_without_reauthentication_is_closed(reauth_broker):
    import time

    c = RawClient(f"127.0.0.1:{reauth_broker.sasl_port}")
    try:
        answer = _plain_login(c, "alice", "alice-secret")
        assert answer.error_code == ErrorCode.none
        assert answer.session_lifetime.total_seconds() == 1.5  # connections.max.reauth.ms
        assert _metadata(c).brokers  # within the session
        time.sleep(1.7)
        c.send_frame(c.encode(request_module(3, 1).MetadataRequest(topics=None)))
        assert c.is_closed()
    finally:
        c.close()


def test_reauthentication_extends_the_session_and_keeps_the_principal(reauth_broker):
    import time

    c = RawClient(f"127.0.0.1:{reauth_broker.sasl_port}")
    try:
        assert _plain_login(c, "alice", "alice-secret").error_code == ErrorCode.none
        time.sleep(1.0)
        assert _plain_login(c, "alice", "alice-secret").error_code == ErrorCode.none  # re-authenticated
        time.sleep(0.8)  # 1.8 s after the first login, 0.8 s after the second
        assert _metadata(c).brokers
        time.sleep(0.3)  # Kafka begins at most one re-authentication a second (KafkaChannel)
        changed = _plain_login(c, "admin", "admin-secret")
        assert changed.error_code == ErrorCode.sasl_authentication_failed
        assert changed.error_message == "Cannot change principals during re-authentication from User:alice: User:admin"
        assert c.is_closed()
    finally:
        c.close()


def test_librdkafka_reauthenticates_and_keeps_producing(reauth_broker):
    import time

    conf = {"bootstrap.servers": f"127.0.0.1:{reauth_broker.sasl_port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret"}
    p = Producer({**conf, "linger.ms": 0})
    delivered = []
    deadline = time.monotonic() + 5  # three session lifetimes
    i = 0
    while time.monotonic() < deadline:
        p.produce("reauth", str(i).encode(), on_delivery=lambda err, msg: delivered.append(err))
        p.flush(10)
        i += 1
        time.sleep(0.2)
    assert delivered and all(err is None for err in delivered), [e for e in delivered if e][:3]
    assert len(read_values(conf, "reauth", i)) == i


def test_failed_logins_are_logged_rate_limited_per_address(broker):
    """A password-guessing flood: every attempt is refused, the log gets at most one line a
    minute per address and mechanism (oncelog.notices)."""
    def lines() -> int:
        with open(broker.log_path) as f:
            return f.read().count("SASL PLAIN authentication failed from 127.0.0.1")

    before = lines()
    for i in range(20):
        c = RawClient(f"127.0.0.1:{broker.sasl_port}")
        try:
            assert _plain_login(c, "alice", f"guess-{i}").error_code == ErrorCode.sasl_authentication_failed
            assert c.is_closed()
        finally:
            c.close()
    assert lines() - before <= 1


@pytest.mark.parametrize("mechanism, password, tls", [
    ("PLAIN", "alice-secret", False), ("SCRAM-SHA-256", "alice-scram", False), ("SCRAM-SHA-512", "alice-scram", True),
])
def test_aiokafka_over_sasl(broker, mechanism, password, tls, caplog):
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    topic = f"aiokafka-{mechanism.lower()}-{'tls' if tls else 'plain'}"
    common = dict(bootstrap_servers=f"127.0.0.1:{broker.sasl_ssl_port if tls else broker.sasl_port}",
                  security_protocol="SASL_SSL" if tls else "SASL_PLAINTEXT", sasl_mechanism=mechanism,
                  sasl_plain_username="alice", sasl_plain_password=password,
                  ssl_context=create_ssl_context(cafile=broker.ca) if tls else None)

    async def run():
        p = AIOKafkaProducer(**common)
        await p.start()
        try:
            await p.send_and_wait(topic, b"aio")
        finally:
            await p.stop()
        c = AIOKafkaConsumer(topic, auto_offset_reset="earliest", **common)
        await c.start()
        try:
            m = await asyncio.wait_for(c.getone(), 20)
            return m.value
        finally:
            await c.stop()

    assert asyncio.run(run()) == b"aio"

    async def wrong():
        p = AIOKafkaProducer(**{**common, "sasl_plain_password": "wrong"})
        try:
            await p.start()
        finally:
            await p.stop()

    with pytest.raises(Exception, match="Unable to bootstrap"):
        asyncio.run(wrong())
    assert "[Error 58] SaslAuthenticationFailed" in caplog.text  # aiokafka logs the broker's answer


def test_sasl_handshake_v0_with_raw_tokens(broker):
    """Kafka 0.10's framing: SaslHandshake v0, then the SASL tokens as raw size-prefixed frames;
    a wrong password closes the connection without an answer."""
    c = RawClient(f"127.0.0.1:{broker.sasl_port}")
    try:
        hs = c.request(request_module(17, 0).SaslHandshakeRequest(mechanism="PLAIN"))
        assert hs.error_code == ErrorCode.none and "PLAIN" in hs.mechanisms
        c.send_frame(b"\0alice\0alice-secret")
        assert c.recv_frame() == b""  # PLAIN's empty server token: authenticated
        assert _metadata(c).brokers
    finally:
        c.close()
    c = RawClient(f"127.0.0.1:{broker.sasl_port}")
    try:
        assert c.request(request_module(17, 0).SaslHandshakeRequest(mechanism="PLAIN")).error_code == ErrorCode.none
        c.send_frame(b"\0alice\0wrong")
        assert c.is_closed()
    finally:
        c.close()


def _raw_plain_login(c: RawClient, user: str, password: str) -> bytes:
    """SaslHandshake v0, then PLAIN's token as a raw frame (Kafka 0.10's framing)."""
    assert c.request(request_module(17, 0).SaslHandshakeRequest(mechanism="PLAIN")).error_code == ErrorCode.none
    c.send_frame(f"\0{user}\0{password}".encode())
    return c.recv_frame()


def test_handshake_v0_reauthentication_keeps_the_principal(reauth_broker):
    """The legacy path checks what SaslAuthenticate checks (Kafka's ensurePrincipalUnchanged on
    both branches): re-authenticating as the same user works, as another user closes the
    connection and the session does not become that user's. (Only a session with a lifetime
    re-authenticates, at most once a second: reauth_broker's.)"""
    import time

    c = RawClient(f"127.0.0.1:{reauth_broker.sasl_port}")
    try:
        assert _raw_plain_login(c, "alice", "alice-secret") == b""
        assert _raw_plain_login(c, "alice", "alice-secret") == b""  # same principal: fine
        assert _metadata(c).brokers
        time.sleep(1.05)
        assert c.request(request_module(17, 0).SaslHandshakeRequest(mechanism="PLAIN")).error_code == ErrorCode.none
        c.send_frame(b"\0admin\0admin-secret")
        assert c.is_closed(), "re-authentication through handshake v0 switched alice to admin"
    finally:
        c.close()


def test_handshake_v0_sessions_expire(reauth_broker):
    """connections.max.reauth.ms holds on the legacy path too: past it, the next request
    closes the connection (Kafka computes the session lifetime on both branches)."""
    import time

    c = RawClient(f"127.0.0.1:{reauth_broker.sasl_port}")
    try:
        assert _raw_plain_login(c, "alice", "alice-secret") == b""
        assert _metadata(c).brokers  # within the session
        time.sleep(1.7)
        c.send_frame(c.encode(request_module(3, 1).MetadataRequest(topics=None)))
        assert c.is_closed(), "a handshake-v0 session was served past connections.max.reauth.ms"
    finally:
        c.close()
