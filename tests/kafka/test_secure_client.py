"""TLS and SASL in the connector's client layer (oncelog.client.security), held to Apache Kafka.

Certificates are made here with trustme: a CA, a broker certificate for 127.0.0.1/localhost, a
client certificate, another CA nobody trusts, and a certificate for another host name. One Apache
Kafka node (one JVM for the whole module) listens on:

- CLIENT, SASL_SSL with SCRAM-SHA-512 and SCRAM-SHA-256 (users made at format time with
  ``--add-scram``), PLAIN and OAUTHBEARER (Kafka's unsecured validator: development tokens);
- MTLS, SSL with ``ssl.client.auth=required``;
- OTHERNAME, SSL with a certificate for ``kafka.example.com`` only (a hostname mismatch);
- SASLPLAIN, SASL_PLAINTEXT with SCRAM-SHA-512 only, and 2-second sessions (KIP-368).

Over SASL_SSL and mTLS the protocol client writes transactionally and reads back read_committed
(as the sink and source do), and confluent-kafka, configured by ``librdkafka_config`` from the
same Java-style settings, reads and writes the same topics. Wrong credentials, an untrusted CA, a
hostname mismatch, a missing client certificate and a protocol mismatch each fail at connect time
with their reason, well inside the request timeout (no retry of what cannot succeed).

The unit tests at the top (config translation, jaas parsing) start nothing.
"""

from __future__ import annotations

import os
import time
import uuid

import pyarrow as pa
import pytest

from oncelog.client import security as sec
from oncelog.client.security import (
    SaslAuthenticationError,
    SecurityConfigError,
    SslAuthenticationError,
    librdkafka_config,
    parse_jaas_config,
    resolve,
)

from ..helpers import start_apache_kafka

trustme = pytest.importorskip("trustme")

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
USER, PASSWORD = "alice", "alice-secret"



def needs_kafka(test):
    """The marks of a test that uses this module's Apache Kafka node (the unit tests start nothing)."""
    return pytest.mark.e2e(pytest.mark.apache_kafka(test))


def _pkcs8(key_pem: bytes, password: bytes | None = None) -> bytes:
    """trustme writes traditional OpenSSL keys; Kafka's PEM stores (KIP-651) read PKCS#8 only."""
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(key_pem, None)
    enc = serialization.BestAvailableEncryption(password) if password else serialization.NoEncryption()
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc)


class Certs:
    """Everything TLS in this module, as PEM files in ``dir``."""

    def __init__(self, dir) -> None:
        self.dir = dir
        ca = trustme.CA()
        self.ca_pem = ca.cert_pem.bytes().decode()
        self.ca = self._write("ca.pem", ca.cert_pem.bytes())
        broker = ca.issue_cert("127.0.0.1", "localhost")
        self.broker_keystore = self._keystore("broker.pem", broker)
        other = ca.issue_cert("kafka.example.com")
        self.other_keystore = self._keystore("other.pem", other)
        client = ca.issue_cert("client.example.com")
        self.client_keystore = self._keystore("client.pem", client)  # KIP-651: key + chain in one file
        self.client_cert = self._write("client-cert.pem", b"".join(c.bytes() for c in client.cert_chain_pems))
        self.client_key = self._write("client-key.pem", client.private_key_pem.bytes())
        self.client_chain_pem = b"".join(c.bytes() for c in client.cert_chain_pems).decode()
        self.client_key_encrypted_pem = _pkcs8(client.private_key_pem.bytes(), b"key-secret").decode()
        self.rogue_ca = self._write("rogue-ca.pem", trustme.CA().cert_pem.bytes())

    def _write(self, name: str, data: bytes) -> str:
        path = os.path.join(self.dir, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def _keystore(self, name: str, cert) -> str:
        return self._write(name, _pkcs8(cert.private_key_pem.bytes()) + b"".join(c.bytes() for c in cert.cert_chain_pems))


# ---------------------------------------------------------------------------------------------
# Unit tests: config translation and jaas parsing (no broker)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return Certs(str(tmp_path_factory.mktemp("certs")))


def test_jaas_config_as_spark_users_write_it():
    e = parse_jaas_config(f'{SCRAM} required username="u" password="p";')
    assert (e.login_module, e.control_flag, e.options) == (SCRAM, "required", {"username": "u", "password": "p"})
    # Bare words, single quotes, escapes, comments, newlines and no space before the semicolon.
    e = parse_jaas_config(f"""kafkashaded.{PLAIN} REQUIRED
        username=svc-account_1 /* the service */ password='pa\\"ss word=;x' // trailing
        ;""")
    assert e.login_module == "kafkashaded." + PLAIN and e.control_flag == "required"
    assert e.options == {"username": "svc-account_1", "password": 'pa"ss word=;x'}
    assert parse_jaas_config(f'{OAUTH} required unsecuredLoginStringClaim_sub="bob";').options == {
        "unsecuredLoginStringClaim_sub": "bob"}
    for bad, reason in [
        (f'{SCRAM} required username="u" password="p"', "semicolon"),
        (f"{SCRAM};", "control flag"),
        (f'{SCRAM} mandatory username="u";', "invalid control flag"),
        (f'{SCRAM} required username=;', "value not specified"),
        (f'{SCRAM} required username="u"; {PLAIN} required username="v";', "2 login modules"),
        ("", "0 login modules"),
    ]:
        with pytest.raises(SecurityConfigError, match=reason):
            parse_jaas_config(bad)


def test_translation_to_librdkafka(certs):
    """One table from Java client names (what Spark users write) to librdkafka's."""
    conf = librdkafka_config({
        "security.protocol": "sasl_ssl", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": f'{SCRAM} required username="{USER}" password="{PASSWORD}";',
        "ssl.truststore.type": "PEM", "ssl.truststore.location": certs.ca,
        "ssl.keystore.type": "PEM", "ssl.keystore.location": certs.client_keystore,
        "ssl.endpoint.identification.algorithm": "", "client.id": "job-1",
        "max.partition.fetch.bytes": "1048576",  # not security: stays with the protocol client
    }, "h:9093")
    assert conf == {
        "bootstrap.servers": "h:9093", "client.id": "job-1", "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": USER, "sasl.password": PASSWORD,
        "ssl.ca.location": certs.ca, "ssl.certificate.location": certs.client_keystore,
        "ssl.key.location": certs.client_keystore, "ssl.endpoint.identification.algorithm": "none",
    }
    inline = librdkafka_config({
        "security.protocol": "SSL", "ssl.truststore.certificates": certs.ca_pem.replace("\n", " "),
        "ssl.keystore.certificate.chain": certs.client_chain_pem, "ssl.keystore.key": certs.client_key_encrypted_pem,
        "ssl.key.password": "key-secret"})
    assert inline["ssl.ca.pem"] == certs.ca_pem  # re-wrapped from one line
    assert inline["ssl.certificate.pem"] == certs.client_chain_pem and inline["ssl.key.password"] == "key-secret"
    assert inline["ssl.endpoint.identification.algorithm"] == "https"
    # confluent-kafka's own names pass through, and mean the same to the protocol client.
    native = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN", "sasl.username": "u",
              "sasl.password": "p"}
    assert librdkafka_config(native) == {**native, "security.protocol": "SASL_PLAINTEXT"}
    assert (resolve(native).mechanism, resolve(native).username) == ("PLAIN", "u")
    # OAUTHBEARER: Kafka's unsecured development login, and a static token through oauth_cb.
    unsecured = librdkafka_config({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
                                   "sasl.jaas.config": f'{OAUTH} required unsecuredLoginStringClaim_sub="bob";'})
    assert unsecured["enable.sasl.oauthbearer.unsecure.jwt"] is True
    assert unsecured["sasl.oauthbearer.config"] == "principalClaimName=sub principal=bob lifeSeconds=3600"
    token = sec.unsecured_jws({"unsecuredLoginStringClaim_sub": "carol"}, now=1000)
    static = librdkafka_config({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
                                "sasl.oauthbearer.token": token})
    assert static["oauth_cb"](None) == (token, 4600.0, "carol", {})
    assert sec.token_claims(token) == {"iat": 1000, "exp": 4600, "sub": "carol"}
    assert librdkafka_config({}) == {"security.protocol": "PLAINTEXT"}


def test_settings_refused_at_start_with_the_reason(certs, tmp_path):
    jks = tmp_path / "ts.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed binary")
    sasl = {"security.protocol": "SASL_SSL"}
    creds = {"sasl.username": "u", "sasl.password": "p"}
    for config, reason in [
        ({"security.protocol": "TLS"}, "not one of"),
        (sasl, "needs sasl.mechanism"),
        ({**sasl, "sasl.mechanism": "GSSAPI"}, "GSSAPI is not supported"),
        ({**sasl, "sasl.mechanism": "SCRAM-SHA-512"}, "needs a username and a password"),
        ({**sasl, "sasl.mechanism": "PLAIN", "sasl.mechanisms": "SCRAM-SHA-256", **creds}, "different values"),
        ({**sasl, "sasl.mechanism": "PLAIN", "sasl.jaas.config": f'{PLAIN} required username="x" password="p";', **creds},
         "different usernames"),
        ({**sasl, "sasl.mechanism": "OAUTHBEARER"}, "needs a token"),
        ({**sasl, "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.token.endpoint.url": "https://idp/token"},
         "only a file: URL"),
        ({**sasl, "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.token.file": str(tmp_path / "missing")},
         "cannot read"),
        ({**sasl, "sasl.mechanism": "PLAIN", **creds, "sasl.login.callback.handler.class": "a.B"}, "Java class"),
        ({"security.protocol": "SSL", "ssl.truststore.type": "JKS", "ssl.truststore.location": str(jks)}, "only PEM"),
        ({"security.protocol": "SSL", "ssl.truststore.location": str(jks)}, "not a PEM file"),
        ({"security.protocol": "SSL", "ssl.truststore.location": certs.ca, "ssl.truststore.password": "x"},
         "PEM trust store"),
        ({"security.protocol": "SSL", "ssl.truststore.location": str(tmp_path / "nope.pem")}, "No such file"),
        ({"security.protocol": "SSL", "ssl.enabled.protocols": "TLSv1.1,TLSv1.2"}, "only TLSv1.2 and TLSv1.3"),
        ({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "ldap"}, "use https"),
        ({"security.protocol": "SSL", "ssl.keystore.certificate.chain": certs.client_chain_pem}, "needs both"),
        ({"security.protocol": "SSL", "ssl.keystore.certificate.chain": certs.client_chain_pem,
          "ssl.keystore.key": certs.client_key_encrypted_pem, "ssl.key.password": "wrong"}, "do not load"),
    ]:
        with pytest.raises(SecurityConfigError, match=reason):
            resolve(config)
    # Settings a protocol does not use are not its business (Kafka's clients ignore them too).
    assert resolve({"security.protocol": "PLAINTEXT", "sasl.mechanism": "GSSAPI"}).protocol == "PLAINTEXT"
    # The protocol client refuses them when it is made (the query's start), not at first use.
    from oncelog.client.kafka import KafkaClient

    with pytest.raises(SecurityConfigError, match="needs sasl.mechanism"):
        KafkaClient("127.0.0.1:1", sasl)
    assert "p'" not in repr(resolve({**sasl, "sasl.mechanism": "PLAIN", **creds}))  # no secrets in reprs


# ---------------------------------------------------------------------------------------------
# Apache Kafka with SASL_SSL, mTLS, a mismatched name and SASL_PLAINTEXT


def _free_ports(n):
    from oncelog.tools.apache_kafka import _free_ports

    return _free_ports(n)


def _secure_cluster(certs: Certs):
    from oncelog.tools.apache_kafka import KafkaCluster

    class SecureCluster(KafkaCluster):
        """KafkaCluster's CLIENT listener as SASL_SSL, plus MTLS, OTHERNAME and SASLPLAIN listeners."""

        def _layout(self) -> None:
            super()._layout()
            self.extra = {}
            for node in self.members.values():
                mtls, other, saslplain = _free_ports(3)
                self.extra[node.node_id] = {"MTLS": mtls, "OTHERNAME": other, "SASLPLAIN": saslplain}
                extra = ",".join(f"{name}://127.0.0.1:{port}" for name, port in self.extra[node.node_id].items())
                with open(node.config_path, "a") as f:  # later keys win in a Java properties file
                    f.write(f"listeners=CLIENT://127.0.0.1:{node.client_port},INTERNAL://127.0.0.1:{node.internal_port},"
                            f"CONTROLLER://127.0.0.1:{node.controller_port},{extra}\n")
                    f.write(f"advertised.listeners=CLIENT://127.0.0.1:{node.client_port},"
                            f"INTERNAL://127.0.0.1:{node.internal_port},{extra}\n")
                    f.write("listener.security.protocol.map=CLIENT:SASL_SSL,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT,"
                                    "MTLS:SSL,OTHERNAME:SSL,SASLPLAIN:SASL_PLAINTEXT\n")

        def bootstrap_of(self, listener: str) -> str:
            return ",".join(f"127.0.0.1:{ports[listener]}" for ports in self.extra.values())

    def store(listener: str, keystore: str) -> dict[str, str]:
        return {f"listener.name.{listener}.ssl.keystore.type": "PEM",
                f"listener.name.{listener}.ssl.keystore.location": keystore}

    config = {
        **store("client", certs.broker_keystore), **store("mtls", certs.broker_keystore),
        **store("othername", certs.other_keystore),
        "listener.name.mtls.ssl.truststore.type": "PEM", "listener.name.mtls.ssl.truststore.location": certs.ca,
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.client.sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN,OAUTHBEARER",
        "listener.name.client.scram-sha-512.sasl.jaas.config": f"{SCRAM} required;",
        "listener.name.client.scram-sha-256.sasl.jaas.config": f"{SCRAM} required;",
        "listener.name.client.plain.sasl.jaas.config": f'{PLAIN} required user_{USER}="{PASSWORD}";',
        "listener.name.client.oauthbearer.sasl.jaas.config": f"{OAUTH} required;",
        "listener.name.saslplain.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.saslplain.scram-sha-512.sasl.jaas.config": f"{SCRAM} required;",
        # KIP-368 on this listener only: a session lasts 2 s, then the broker closes a connection
        # that sends anything but a new authentication.
        "listener.name.saslplain.scram-sha-512.connections.max.reauth.ms": "2000",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
    }
    scram = [arg for mech in ("SCRAM-SHA-512", "SCRAM-SHA-256")
             for arg in ("--add-scram", f"{mech}=[name={USER},password={PASSWORD}]")]
    return SecureCluster(nodes=1, client_protocol="SASL_SSL", config=config, format_args=scram)


@pytest.fixture(scope="module")
def kafka(certs):
    """One Apache Kafka node with the four listeners above, for this module only."""
    cluster = _secure_cluster(certs)
    start_apache_kafka(cluster)
    yield cluster
    cluster.stop(graceful=False)


def _scram(certs, mechanism="SCRAM-SHA-512", password=PASSWORD) -> dict[str, str]:
    """What a Spark user writes (``kafka.`` removed): Java client names, a PEM trust store."""
    return {"security.protocol": "SASL_SSL", "sasl.mechanism": mechanism,
            "sasl.jaas.config": f'{SCRAM} required username="{USER}" password="{password}";',
            "ssl.truststore.type": "PEM", "ssl.truststore.location": certs.ca, "request.timeout.ms": "60000"}


def _mtls(certs) -> dict[str, str]:
    return {"security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": certs.ca,
            "ssl.keystore.type": "PEM", "ssl.keystore.location": certs.client_keystore, "request.timeout.ms": "60000"}


def _create_topic(bootstrap: str, config: dict, name: str, partitions: int) -> None:
    """Through confluent-kafka's AdminClient configured by the translation (as the sink's commit log is)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(librdkafka_config(config, bootstrap))
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=60)


def _partitions_once_known(client, topic: str, timeout: float = 30.0) -> dict[int, int]:
    """The topic's partitions (index -> leader) from Metadata through ``client``, once a broker
    knows them: Kafka answers CreateTopics when its controller has the topic, and a broker's
    metadata follows a moment later (under load, later than the next request: CI saw the topic
    answered with no partitions). tests/helpers.wait_for_partitions speaks plaintext only."""
    deadline = time.monotonic() + timeout
    while True:
        known = client.metadata([topic])[topic]
        if known.partitions or time.monotonic() > deadline:
            return known.partitions
        time.sleep(0.1)


def _write_transactionally(client, topic: str, values: list[bytes], partitions: int, txn_id: str) -> None:
    """As the sink's tasks do: InitProducerId, AddPartitionsToTxn, pipelined Produce of encoded
    batches, EndTxn(commit)."""
    from kio.schema.errors import ErrorCode

    from oncelog.client.kafka import TransactionalProducer
    from oncelog.client.recordcodec import encode_batch, encode_records

    producer = TransactionalProducer(client, txn_id, 60000)
    producer.init()
    producer.add_partitions([(topic, p) for p in range(partitions)])
    for p in range(partitions):
        mine = values[p::partitions]
        records = encode_records(pa.array([str(i).encode() for i in range(len(mine))], pa.binary()),
                                 pa.array(mine, pa.binary()), None)
        batch = encode_batch(records, len(mine), timestamp_ms=int(time.time() * 1000), producer_id=producer.producer_id,
                             producer_epoch=producer.producer_epoch,
                             base_sequence=producer.next_sequence(topic, p, len(mine)), transactional=True)
        producer.send(topic, p, batch, len(mine))
    assert producer.commit() == ErrorCode.none
    producer.close()


def _read_committed(client, topic: str, partitions: int, expected: int) -> list[bytes]:
    """As the source's tasks do: ListOffsets (read_committed: the last stable offset), Fetch,
    decode with the aborted-transaction filter. EndTxn returns before Kafka has written the
    commit markers, so the last stable offset is polled until ``expected`` records are below it."""
    from oncelog.client.kafka import EARLIEST, LATEST, READ_COMMITTED
    from oncelog.client.recordcodec import decode_batches

    tps = [(topic, p) for p in range(partitions)]
    start = client.list_offsets({tp: EARLIEST for tp in tps}, READ_COMMITTED)
    deadline = time.monotonic() + 30
    while True:
        end = client.list_offsets({tp: LATEST for tp in tps}, READ_COMMITTED)
        out = []
        for tp in tps:
            pos, stop = start[tp][0], end[tp][0]
            while pos < stop:
                got = client.fetch({tp: pos})[tp]
                decoded = decode_batches(got.records, start_offset=pos, end_offset=stop, aborted=got.aborted)
                out += decoded.values.to_pylist()
                pos = decoded.next_offset
        if len(out) >= expected or time.monotonic() > deadline:
            return out
        time.sleep(0.05)


def _confluent_round_trip(bootstrap: str, config: dict, topic: str, partitions: int, expect: list[bytes]) -> None:
    """confluent-kafka, configured by the translation of the same settings: reads what the
    protocol client committed (read_committed), then commits records the protocol client reads."""
    import confluent_kafka as ck

    base = librdkafka_config(config, bootstrap)
    consumer = ck.Consumer({**base, "group.id": f"g-{uuid.uuid4().hex[:8]}", "isolation.level": "read_committed",
                            "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([ck.TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < len(expect) and time.monotonic() < deadline:
        for msg in consumer.consume(1000, 0.5):
            assert msg.error() is None, msg.error()
            got.append(msg.value())
    consumer.close()
    assert sorted(got) == sorted(expect)
    producer = ck.Producer({**base, "transactional.id": f"ck-{uuid.uuid4().hex[:8]}"})
    producer.init_transactions(60)
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic, f"ck-{i}".encode(), partition=i % partitions)
    producer.commit_transaction(60)


def _round_trip(kafka, certs, bootstrap: str, config: dict) -> None:
    from oncelog.client.kafka import KafkaClient

    topic = f"secure-{uuid.uuid4().hex[:8]}"
    _create_topic(bootstrap, config, topic, 2)
    client = KafkaClient(bootstrap, config)
    try:
        values = [f"v{i}".encode() for i in range(100)]
        _write_transactionally(client, topic, values, 2, f"txn-{topic}")
        assert sorted(_read_committed(client, topic, 2, len(values))) == sorted(values)
        _confluent_round_trip(bootstrap, config, topic, 2, values)
        after = _read_committed(client, topic, 2, len(values) + 10)
        assert sorted(after) == sorted(values + [f"ck-{i}".encode() for i in range(10)])
    finally:
        client.close()


@needs_kafka
@pytest.mark.parametrize("case", ["sasl_ssl_scram_sha_512", "mtls"])
def test_transactions_over_sasl_ssl_and_mtls(kafka, certs, case):
    """The protocol client writes transactionally and reads read_committed over SASL_SSL with
    SCRAM-SHA-512, and over SSL with a client certificate; confluent-kafka does the same with
    the translated settings."""
    if case == "mtls":
        _round_trip(kafka, certs, kafka.bootstrap_of("MTLS"), _mtls(certs))
    else:
        _round_trip(kafka, certs, kafka.bootstrap, _scram(certs))


@needs_kafka
def test_commit_log_topic_created_over_sasl_ssl(kafka, certs):
    """The sink's commit log topic is created with confluent-kafka's AdminClient: the settings
    reach it through the translation."""
    from oncelog.client.kafka import KafkaClient
    from oncelog.spark.batch_commit import CommitLog

    topic = f"commits-{uuid.uuid4().hex[:8]}"
    client = KafkaClient(kafka.bootstrap, _scram(certs))
    try:
        CommitLog(client, kafka.bootstrap, topic).ensure_topic()
        assert _partitions_once_known(client, topic) == {0: 1}
    finally:
        client.close()


def _oauth_configs(certs, tmp_path):
    token = sec.unsecured_jws({"unsecuredLoginStringClaim_sub": "bob"})
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")
    base = {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER", "ssl.ca.location": certs.ca}
    return {
        "oauthbearer-unsecured-jaas": {**base, "sasl.jaas.config": f'{OAUTH} required unsecuredLoginStringClaim_sub="bob";'},
        "oauthbearer-static-token": {**base, "sasl.oauthbearer.token": token},
        "oauthbearer-token-file": {**base, "sasl.oauthbearer.token.file": str(token_file)},
        "oauthbearer-file-url": {**base, "sasl.oauthbearer.token.endpoint.url": f"file://{token_file}"},
    }


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "PLAIN", "oauthbearer-unsecured-jaas", "oauthbearer-static-token",
                                       "oauthbearer-token-file", "oauthbearer-file-url", "SASL_PLAINTEXT"])
@needs_kafka
def test_every_mechanism(kafka, certs, tmp_path, mechanism):
    """Each SASL mechanism authenticates the protocol client (a Metadata and a transactional
    write read back) and confluent-kafka (a Metadata) with the same settings; confluent-kafka's
    own names (``ssl.ca.location``, ``sasl.username``) are understood too."""
    from oncelog.client.kafka import KafkaClient

    bootstrap = kafka.bootstrap
    if mechanism == "SCRAM-SHA-256":
        config = {"security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-256", "sasl.username": USER,
                  "sasl.password": PASSWORD, "ssl.ca.location": certs.ca}
    elif mechanism == "PLAIN":
        config = {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "ssl.truststore.location": certs.ca,
                  "sasl.jaas.config": f'{PLAIN} required username="{USER}" password="{PASSWORD}";'}
    elif mechanism == "SASL_PLAINTEXT":
        bootstrap = kafka.bootstrap_of("SASLPLAIN")
        config = {**_scram(certs), "security.protocol": "SASL_PLAINTEXT"}
    else:
        config = _oauth_configs(certs, tmp_path)[mechanism]
    topic = f"mech-{uuid.uuid4().hex[:8]}"
    _create_topic(bootstrap, config, topic, 1)
    client = KafkaClient(bootstrap, config)
    try:
        assert _partitions_once_known(client, topic) == {0: 1}
        _write_transactionally(client, topic, [b"a", b"b"], 1, f"txn-{topic}")
        assert _read_committed(client, topic, 1, 2) == [b"a", b"b"]
    finally:
        client.close()


@needs_kafka
def test_inline_pem_and_encrypted_key(kafka, certs):
    """A client certificate given inline (ssl.keystore.certificate.chain + ssl.keystore.key, KIP-651)
    with an encrypted key (ssl.key.password), trust inline with its newlines lost (as in a Spark
    option on one line); and confluent-kafka's file names (ssl.certificate.location + ssl.key.location)."""
    from oncelog.client.kafka import KafkaClient

    inline = {"security.protocol": "SSL", "ssl.truststore.certificates": certs.ca_pem.replace("\n", " "),
              "ssl.keystore.certificate.chain": certs.client_chain_pem, "ssl.keystore.key": certs.client_key_encrypted_pem,
              "ssl.key.password": "key-secret"}
    files = {"security.protocol": "SSL", "ssl.ca.location": certs.ca, "ssl.certificate.location": certs.client_cert,
             "ssl.key.location": certs.client_key}
    for config in (inline, files):
        _round_trip(kafka, certs, kafka.bootstrap_of("MTLS"), config)
    client = KafkaClient(kafka.bootstrap_of("MTLS"), inline)
    try:
        client.metadata([])
        assert list(client.brokers) == [1]
    finally:
        client.close()


def _fails_fast(bootstrap: str, config: dict, error: type, *reasons: str):
    """The first request raises ``error`` naming every reason, long before the request timeout
    (60 s): a handshake that cannot succeed is not retried."""
    from oncelog.client.kafka import KafkaClient

    client = KafkaClient(bootstrap, {**config, "request.timeout.ms": "60000"})
    started = time.monotonic()
    try:
        with pytest.raises(error) as info:
            client.metadata([])
    finally:
        client.close()
    elapsed = time.monotonic() - started
    for reason in reasons:
        assert reason in str(info.value), str(info.value)
    assert elapsed < 30, f"took {elapsed:.1f} s: retried until the timeout?"
    return info.value


@needs_kafka
def test_wrong_password_fails_with_the_brokers_message(kafka, certs):
    err = _fails_fast(kafka.bootstrap, _scram(certs, password="wrong"), SaslAuthenticationError,
                      "SASL_AUTHENTICATION_FAILED (58)", "invalid credentials", "SCRAM-SHA-512", "'alice'")
    assert int(err.code) == 58
    _fails_fast(kafka.bootstrap, {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
                                  "ssl.ca.location": certs.ca, "sasl.oauthbearer.token": "not-a-jwt"},
                SaslAuthenticationError, "SASL_AUTHENTICATION_FAILED", "invalid_token")
    _fails_fast(kafka.bootstrap_of("SASLPLAIN"), {**_scram(certs), "security.protocol": "SASL_PLAINTEXT",
                                                 "sasl.mechanism": "SCRAM-SHA-256"},
                SaslAuthenticationError, "does not enable SASL mechanism SCRAM-SHA-256", "SCRAM-SHA-512")
    # The sink's first call (InitProducerId through FindCoordinator) fails as fast: not an OSError.
    from oncelog.client.kafka import KafkaClient, TransactionalProducer

    client = KafkaClient(kafka.bootstrap, _scram(certs, password="wrong"))
    with pytest.raises(SaslAuthenticationError, match="SASL_AUTHENTICATION_FAILED"):
        TransactionalProducer(client, "t", 60000).init()
    client.close()


@needs_kafka
def test_untrusted_ca_fails(kafka, certs):
    _fails_fast(kafka.bootstrap, {**_scram(certs), "ssl.truststore.location": certs.rogue_ca}, SslAuthenticationError,
                "is not trusted", "unable to get local issuer certificate", certs.rogue_ca)
    # With no trust store configured the system's CAs are used: they do not know the test CA.
    _fails_fast(kafka.bootstrap_of("MTLS"), {k: v for k, v in _mtls(certs).items() if "truststore" not in k},
                SslAuthenticationError, "is not trusted", "the system's CAs")


@needs_kafka
def test_hostname_mismatch_fails_unless_the_check_is_off(kafka, certs):
    from oncelog.client.kafka import KafkaClient

    config = {"security.protocol": "SSL", "ssl.truststore.location": certs.ca}
    _fails_fast(kafka.bootstrap_of("OTHERNAME"), config, SslAuthenticationError, "hostname mismatch",
                "ssl.endpoint.identification.algorithm")
    client = KafkaClient(kafka.bootstrap_of("OTHERNAME"), {**config, "ssl.endpoint.identification.algorithm": ""})
    try:
        client.metadata([])
        assert list(client.brokers) == [1]
    finally:
        client.close()


@needs_kafka
def test_missing_client_certificate_and_protocol_mismatch_fail(kafka, certs):
    no_cert = {k: v for k, v in _mtls(certs).items() if "keystore" not in k}
    _fails_fast(kafka.bootstrap_of("MTLS"), no_cert, SslAuthenticationError, "requires a client certificate")
    # A plaintext client at a TLS listener (Kafka answers with a TLS alert), a SASL client at a
    # listener without SASL.
    _fails_fast(kafka.bootstrap_of("MTLS"), {}, SslAuthenticationError, "answered with TLS", "security.protocol")
    internal = f"127.0.0.1:{kafka.members[1].internal_port}"
    _fails_fast(internal, {**_scram(certs), "security.protocol": "SASL_PLAINTEXT"}, SaslAuthenticationError,
                "does not expect SASL")


@needs_kafka
def test_session_lifetime_is_honoured(kafka, certs):
    """A broker with connections.max.reauth.ms (KIP-368) grants a session lifetime and closes a
    connection used past it; the client replaces its connection before then, so a client idle
    longer than the session (a driver between batches) goes on."""
    from oncelog.client.kafka import KafkaClient

    client = KafkaClient(kafka.bootstrap_of("SASLPLAIN"), {**_scram(certs), "security.protocol": "SASL_PLAINTEXT"})
    try:
        client.metadata([])
        first = next(iter(client.conns.values()))
        assert first.expires_at is not None  # the broker granted a lifetime (SaslAuthenticate v1+)
        while not first.expired:
            time.sleep(0.1)
        time.sleep(0.5)  # now past the broker's 2 s as well
        client.metadata([])
        assert first not in client.conns.values()
        assert list(client.brokers) == [1]
    finally:
        client.close()
