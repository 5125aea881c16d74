"""TLS listeners: a broker with PLAINTEXT and SSL listeners at once, each
client answered with its own listener's address; mTLS; TLS 1.2+ only; untrusted certificates
refused with nothing written. Real broker process, real clients (confluent-kafka, kafka-python)."""

from __future__ import annotations

import os
import socket
import ssl
import uuid

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, ConfigResource

from oncelog.process import BrokerProcess
from tests.helpers import free_port, produce_one, read_values
from oncelog.security.tls import subject_dn

trustme = pytest.importorskip("trustme")

pytestmark = pytest.mark.e2e




class Certs:
    def __init__(self, d) -> None:
        ca = trustme.CA()
        self.dir = d
        self.ca = self._write("ca.pem", ca.cert_pem.bytes())
        broker = ca.issue_cert("127.0.0.1", "localhost")
        self.broker = self._write("broker.pem", broker.private_key_and_cert_chain_pem.bytes())
        self.broker_chain = b"".join(c.bytes() for c in broker.cert_chain_pems).decode()
        self.broker_key = broker.private_key_pem.bytes().decode()
        client = ca.issue_cert("client.example.com", common_name="alice", organization_name="Acme, Inc.",
                               organization_unit_name="eng")
        self.client_cert = self._write("client-cert.pem", b"".join(c.bytes() for c in client.cert_chain_pems))
        self.client_key = self._write("client-key.pem", client.private_key_pem.bytes())
        self.rogue_ca = self._write("rogue-ca.pem", trustme.CA().cert_pem.bytes())

    def _write(self, name: str, data: bytes) -> str:
        path = os.path.join(self.dir, name)
        with open(path, "wb") as f:
            f.write(data)
        return path


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return Certs(str(tmp_path_factory.mktemp("certs")))


def _start(tmp_path, certs, *overrides: str) -> tuple[BrokerProcess, int]:
    ssl_port = free_port()
    b = BrokerProcess(str(tmp_path / f"broker-{uuid.uuid4().hex[:6]}"), extra_args=[
        "--override", f"listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:{ssl_port}",
        "--override", f"ssl.keystore.location={certs.broker}", *overrides])
    b.start()
    return b, ssl_port


def _ssl_client(certs, port: int, **extra) -> dict:
    return {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL", "ssl.ca.location": certs.ca,
            **extra}






def test_plaintext_and_ssl_listeners_at_once_each_with_its_own_address(tmp_path, certs):
    b, ssl_port = _start(tmp_path, certs)
    try:
        tls = _ssl_client(certs, ssl_port)
        metadata = AdminClient(tls).list_topics(timeout=10)
        assert [(x.host, x.port) for x in metadata.brokers.values()] == [("127.0.0.1", ssl_port)]
        plain = {"bootstrap.servers": b.bootstrap}
        assert [x.port for x in AdminClient(plain).list_topics(timeout=10).brokers.values()] == [b.port]
        # Written over TLS, read over PLAINTEXT and over TLS (transactional, read_committed).
        p = Producer({**tls, "transactional.id": "tls-txn"})
        p.init_transactions(30)
        p.begin_transaction()
        for i in range(10):
            p.produce("over-tls", f"r{i}".encode())
        p.commit_transaction(30)
        assert read_values(plain, "over-tls", 10) == [f"r{i}".encode() for i in range(10)]
        assert read_values(tls, "over-tls", 10) == [f"r{i}".encode() for i in range(10)]
        # kafka-python over TLS, too.
        from kafka import KafkaConsumer

        kc = KafkaConsumer("over-tls", bootstrap_servers=f"127.0.0.1:{ssl_port}", security_protocol="SSL",
                           ssl_cafile=certs.ca, auto_offset_reset="earliest", consumer_timeout_ms=10000)
        assert sorted(m.value for m in kc)[:10] == sorted(f"r{i}".encode() for i in range(10))
        kc.close()
    finally:
        b.stop()


def test_an_untrusted_server_certificate_is_refused_and_nothing_is_written(tmp_path, certs):
    b, ssl_port = _start(tmp_path, certs)
    try:
        assert None is not produce_one(_ssl_client(certs, ssl_port, **{"ssl.ca.location": certs.rogue_ca}), "never", b"x")
        topics = AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(timeout=10).topics
        assert "never" not in topics
    finally:
        b.stop()


def test_mtls_required_refuses_a_client_without_a_certificate(tmp_path, certs):
    b, ssl_port = _start(tmp_path, certs, "--override", "ssl.client.auth=required",
                         "--override", f"ssl.truststore.location={certs.ca}")
    try:
        with_cert = _ssl_client(certs, ssl_port, **{"ssl.certificate.location": certs.client_cert,
                                                    "ssl.key.location": certs.client_key})
        assert None is produce_one(with_cert, "mtls", b"ok")
        assert None is not produce_one(_ssl_client(certs, ssl_port), "mtls", b"refused")
        assert read_values({"bootstrap.servers": b.bootstrap}, "mtls", 1) == [b"ok"]
        from kafka import KafkaProducer

        kp = KafkaProducer(bootstrap_servers=f"127.0.0.1:{ssl_port}", security_protocol="SSL", ssl_cafile=certs.ca,
                           ssl_certfile=certs.client_cert, ssl_keyfile=certs.client_key)
        kp.send("mtls", b"kafka-python").get(timeout=20)  # kafka-python with a client certificate
        kp.close()
        assert read_values({"bootstrap.servers": b.bootstrap}, "mtls", 2) == [b"ok", b"kafka-python"]
    finally:
        b.stop()


def test_tls_below_1_2_is_refused_and_1_2_and_1_3_are_accepted(tmp_path, certs):
    b, ssl_port = _start(tmp_path, certs)
    try:
        for version, ok in ((ssl.TLSVersion.TLSv1_2, True), (ssl.TLSVersion.TLSv1_3, True),
                            (ssl.TLSVersion.TLSv1_1, False)):
            context = ssl.create_default_context(cafile=certs.ca)
            context.minimum_version = context.maximum_version = version
            if version == ssl.TLSVersion.TLSv1_1:
                context.set_ciphers("ALL:@SECLEVEL=0")
            with socket.create_connection(("127.0.0.1", ssl_port), timeout=10) as raw:
                try:
                    with context.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                        assert ok, f"{version.name} was accepted"
                        assert s.version() == version.name.replace("v1_", "v1.")
                except (ssl.SSLError, ConnectionResetError):
                    assert not ok, f"{version.name} was refused"
    finally:
        b.stop()


def test_keystore_as_pem_text_per_listener(tmp_path, certs):
    """ssl.keystore.certificate.chain / ssl.keystore.key as text, for one listener only
    (listener.name.ssl.*), and DescribeConfigs never shows them."""
    ssl_port = free_port()
    b = BrokerProcess(str(tmp_path / "broker"), extra_args=[
        "--override", f"listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:{ssl_port}",
        "--override", f"listener.name.ssl.ssl.keystore.certificate.chain={certs.broker_chain}",
        "--override", f"listener.name.ssl.ssl.keystore.key={certs.broker_key}"])
    b.start()
    try:
        assert None is produce_one(_ssl_client(certs, ssl_port), "pem-text", b"v")
    finally:
        b.stop()


def test_subject_dn_is_rfc2253_as_java_prints_it(certs):
    decoded = ssl._ssl._test_decode_cert(certs.client_cert)
    assert subject_dn(decoded) == "CN=alice,OU=eng,O=Acme\\, Inc."


def test_ssl_listener_without_a_keystore_does_not_start(tmp_path):
    b = BrokerProcess(str(tmp_path / "broker"), extra_args=["--override", "listeners=SSL://127.0.0.1:0"])
    with pytest.raises(RuntimeError, match="give ssl.keystore.location"):
        b.start(timeout=20)


def test_plaintext_clients_cannot_speak_to_the_ssl_listener(tmp_path, certs):
    b, ssl_port = _start(tmp_path, certs)
    try:
        assert None is not produce_one({"bootstrap.servers": f"127.0.0.1:{ssl_port}"}, "plain-to-tls", b"x")
        with pytest.raises(KafkaException):
            AdminClient({"bootstrap.servers": f"127.0.0.1:{ssl_port}"}).list_topics(timeout=3)
    finally:
        b.stop()


def test_aiokafka_over_ssl_and_mtls(tmp_path, certs):
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    b, ssl_port = _start(tmp_path, certs, "--override", "ssl.client.auth=required",
                         "--override", f"ssl.truststore.location={certs.ca}")
    try:
        context = create_ssl_context(cafile=certs.ca, certfile=certs.client_cert, keyfile=certs.client_key)
        common = dict(bootstrap_servers=f"127.0.0.1:{ssl_port}", security_protocol="SSL", ssl_context=context)

        async def run():
            p = AIOKafkaProducer(**common)
            await p.start()
            try:
                await p.send_and_wait("aio-tls", b"v")
            finally:
                await p.stop()
            c = AIOKafkaConsumer("aio-tls", auto_offset_reset="earliest", **common)
            await c.start()
            try:
                return (await asyncio.wait_for(c.getone(), 20)).value
            finally:
                await c.stop()

        assert asyncio.run(run()) == b"v"
    finally:
        b.stop()


def test_an_encrypted_private_key_with_ssl_key_password(tmp_path, certs):
    from cryptography.hazmat.primitives import serialization

    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1")
    key = serialization.load_pem_private_key(leaf.private_key_pem.bytes(), None)
    encrypted = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.BestAvailableEncryption(b"key-secret"))
    keystore = tmp_path / "encrypted.pem"
    keystore.write_bytes(b"".join(c.bytes() for c in leaf.cert_chain_pems) + encrypted)
    ca_path = tmp_path / "ca2.pem"
    ca.cert_pem.write_to_path(str(ca_path))
    ssl_port = free_port()
    b = BrokerProcess(str(tmp_path / "broker"), extra_args=[
        "--override", f"listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:{ssl_port}",
        "--override", f"ssl.keystore.location={keystore}", "--override", "ssl.key.password=key-secret"])
    b.start()
    try:
        assert None is produce_one({"bootstrap.servers": f"127.0.0.1:{ssl_port}", "security.protocol": "SSL",
                           "ssl.ca.location": str(ca_path)}, "encrypted-key", b"v")
        res = ConfigResource(ConfigResource.Type.BROKER, "1")
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        entries = admin.describe_configs([res])[res].result(10)
        assert entries["ssl.key.password"].is_sensitive and entries["ssl.key.password"].value is None
    finally:
        b.stop()
    wrong = BrokerProcess(str(tmp_path / "broker2"), extra_args=[
        "--override", f"listeners=SSL://127.0.0.1:{free_port()}", "--override", f"ssl.keystore.location={keystore}",
        "--override", "ssl.key.password=nope"])
    with pytest.raises(RuntimeError):
        wrong.start(timeout=20)
