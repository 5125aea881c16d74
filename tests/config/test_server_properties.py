"""``oncelog serve --config server.properties`` and ``--override``: Kafka's broker config names
mean the same here; what one broker cannot honour is accepted with a reason, anything else
stops the start naming the line."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource

from oncelog.cli import build_parser
from oncelog.config.serve_options import ServeConfigError, build_broker_config, read_properties, settings_from_args
from oncelog.process import BrokerProcess

KAFKA_FILE = os.path.join(os.path.dirname(__file__), "kafka_server.properties")


def build(*argv: str):
    return build_broker_config(settings_from_args(build_parser().parse_args(["serve", *argv])))


def write(tmp_path, text: str) -> str:
    path = tmp_path / "server.properties"
    path.write_text(text)
    return str(path)


def test_kafkas_own_server_properties_means_the_same():
    # Kafka's file listens on every interface without authentication: oncelog asks for consent.
    with pytest.raises(ServeConfigError, match=r"listener PLAINTEXT on 0.0.0.0:9092 has no authentication: any "
                                               r"client that can reach it acts as User:ANONYMOUS and, with no "
                                               r"authorizer .*oncelog.allow.unauthenticated.listeners=true"):
        build("--config", KAFKA_FILE)
    config, notes = build("--config", KAFKA_FILE, "--override", "oncelog.allow.unauthenticated.listeners=true")
    assert any(n.startswith("WARNING: listener PLAINTEXT on 0.0.0.0:9092 has no authentication") for n in notes)
    notes = [n for n in notes if not n.startswith("WARNING: ")]
    assert config.data_dir == "/tmp/kraft-combined-logs"
    assert (config.host, config.port) == ("0.0.0.0", 9092)  # an empty host: every interface, as in Kafka
    assert config.advertise == "localhost:9092"  # the PLAINTEXT entry, not the controller's
    assert config.node_id == 1 and config.num_partitions == 3
    assert config.log.retention_ms == 168 * 3_600_000 and config.log.segment_bytes == 1 << 30
    assert config.log_retention_check_interval_ms == 300_000 and config.socket_request_max_bytes == 104857600
    assert config.group.initial_rebalance_delay_ms == 0
    said = "\n".join(notes)
    for name in ("process.roles", "controller.quorum.bootstrap.servers", "inter.broker.listener.name",
                 "controller.listener.names", "num.network.threads", "num.io.threads", "socket.send.buffer.bytes",
                 "num.recovery.threads.per.data.dir", "share.coordinator.state.topic.min.isr",
                 "transaction.state.log.min.isr"):
        assert f"{name}=" in said, name
    assert "CONTROLLER://:9093 not opened" in said
    assert all("kafka_server.properties:" in n for n in notes)  # each note names its line
    # What was given is the static layer, under the names given.
    assert config.given["log.retention.hours"] == "168" and "log.retention.ms" not in config.static_layer()


def test_properties_syntax_as_java_reads_it(tmp_path):
    path = write(tmp_path, "# comment\n! also a comment\n  num.partitions = 4\nlog.retention.ms: 1000\n"
                           "node.id 7\nadvertised.listeners=PLAINTEXT://host\\\n    .example:9000\n"
                           "log.dirs=/data/a\\u0062c\n")
    got = {s.name: (s.value, s.origin.rsplit(":", 1)[1]) for s in read_properties(path)}
    assert got == {"num.partitions": ("4", "3"), "log.retention.ms": ("1000", "4"), "node.id": ("7", "5"),
                   "advertised.listeners": ("PLAINTEXT://host.example:9000", "6"), "log.dirs": ("/data/abc", "8")}


def test_precedence_file_then_options_then_overrides(tmp_path):
    path = write(tmp_path, "log.dirs=/from/file\nnum.partitions=4\nlisteners=PLAINTEXT://127.0.0.2:9000\n"
                           "log.cleaner.backoff.ms=1000\n")
    config, _ = build("--config", path, "--num-partitions", "5", "--port", "0", "--override", "num.partitions=6")
    assert config.data_dir == "/from/file" and config.num_partitions == 6
    assert (config.host, config.port) == ("127.0.0.2", 0)  # --port changes the file's listener's port only
    assert config.log_cleaner_backoff_ms == 1000
    assert config.given["num.partitions"] == "6"


@pytest.mark.parametrize("line, message", [
    ("num.io.thread=8", r"server.properties:2: oncelog has no broker config num.io.thread"),
    ("retention.ms=1000", r"server.properties:2: oncelog has no broker config retention.ms.*a topic config"),
    ("num.partitions=zero", r"server.properties:2: Invalid value zero for configuration num.partitions: "
                            r"Not a number of type INT"),
    ("num.partitions=0", r"server.properties:2: Invalid value 0 for configuration num.partitions: "
                         r"Value must be at least 1"),
    # Kafka validates the topic config the hours make (its LogConfig), in ms.
    ("log.retention.hours=-2", r"server.properties:2: Invalid value -7200000 for configuration retention.ms: "
                               r"Value must be at least -1"),
    ("listeners=SASL_SSL://:9093", r"listener SASL_SSL is TLS: give ssl.keystore.location"),
    ("listeners=SASL_PLAINTEXT://:9093", r"listener SASL_PLAINTEXT: PLAIN is enabled: give its users in "
                                         r"listener.name.sasl_plaintext.plain.sasl.jaas.config"),
    ("listeners=SSL://:9093", r"listener SSL is TLS: give ssl.keystore.location"),
    ("listeners=PLAINTEXT://:9092,PLAINTEXT://:9093", r"listener PLAINTEXT is named twice"),
    ("listener.name.other.ssl.keystore.location=/k.pem", r"there is no listener OTHER in listeners"),
    ("listener.name.plaintext.num.partitions=3", r"oncelog knows per-listener ssl.\*, sasl.enabled.mechanisms"),
    ("listeners=PLAINTEXT://:9092,OTHER://:9094", r"no security protocol for OTHER"),
    ("listeners=localhost:9092", r"'localhost:9092' is not NAME://HOST:PORT"),
    ("log.dirs=/a,/b", r"server.properties:2: log.dirs=/a,/b: oncelog keeps its data in one directory"),
    ("oncelog.fsync=sometimes", r"server.properties:2: --fsync must be always, never or interval:MS"),
])
def test_a_bad_line_stops_the_start_naming_it(tmp_path, line, message):
    path = write(tmp_path, f"log.dirs=/data\n{line}\n")
    with pytest.raises(ServeConfigError, match=message):
        build("--config", path)


def test_bad_override_and_missing_file(tmp_path):
    with pytest.raises(ServeConfigError, match=r"--override 'num.partitions': expected NAME=VALUE"):
        build("--data-dir", "d", "--override", "num.partitions")
    with pytest.raises(ServeConfigError, match=r"--override: oncelog has no broker config no.such"):
        build("--data-dir", "d", "--override", "no.such=1")
    with pytest.raises(ServeConfigError, match=r"--config .*missing.properties: No such file"):
        build("--config", str(tmp_path / "missing.properties"))


def test_replication_factors_are_accepted_with_a_reason():
    config, notes = build("--data-dir", "d", "--override", "default.replication.factor=3")
    assert any("default.replication.factor=3 accepted, no effect: one broker" in n for n in notes)
    assert config.describe()["default.replication.factor"] == "1"


@pytest.mark.e2e
def test_serve_with_kafkas_server_properties_over_the_wire(tmp_path):
    """A real broker started from Kafka's file: clients see its settings, DescribeConfigs reports
    them as STATIC_BROKER_CONFIG (under the names the file used), the INFO lines are logged."""
    with socket.socket() as s:  # the file advertises localhost:9092; the test needs a free port
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    b = BrokerProcess(str(tmp_path / "broker"), port=port,
                      extra_args=["--config", KAFKA_FILE, "--host", "127.0.0.1", "--advertise", f"localhost:{port}"])
    b.start()
    try:
        p = Producer({"bootstrap.servers": b.bootstrap})
        p.produce("auto-created", b"v")
        assert p.flush(10) == 0
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        assert len(admin.list_topics(timeout=10).topics["auto-created"].partitions) == 3  # num.partitions=3
        res = ConfigResource(ConfigResource.Type.BROKER, "1")
        entries = admin.describe_configs([res])[res].result(10)
        assert entries["num.partitions"].value == "3"
        assert entries["num.partitions"].source == ConfigSource.STATIC_BROKER_CONFIG.value
        assert entries["log.retention.hours"].value == "168"
        assert entries["log.retention.hours"].source == ConfigSource.STATIC_BROKER_CONFIG.value
        assert entries["log.retention.ms"].value is None  # Kafka: derived from the hours, reported null
        assert entries["log.cleaner.backoff.ms"].source == ConfigSource.DEFAULT_CONFIG.value
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "g", "auto.offset.reset": "earliest"})
        c.subscribe(["auto-created"])
        got = None
        for _ in range(50):
            m = c.poll(0.5)
            if m is not None and not m.error():
                got = m.value()
                break
        c.close()
        assert got == b"v"
    finally:
        b.stop()
    log_text = open(b.log_path).read()
    assert "process.roles=broker,controller accepted, no effect" in log_text


@pytest.mark.e2e
def test_serve_refuses_to_start_on_an_unknown_line(tmp_path):
    path = write(tmp_path, "log.dirs=" + str(tmp_path / "data") + "\nnum.io.thread=8\n")
    done = subprocess.run([sys.executable, "-m", "oncelog", "serve", "--config", path], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert f"oncelog serve: {path}:2: oncelog has no broker config num.io.thread" in done.stderr
    assert not os.path.exists(tmp_path / "data")  # nothing was created


@pytest.mark.e2e
def test_transaction_max_timeout_from_an_override(broker_factory):
    """transaction.max.timeout.ms (added as one registry entry): InitProducerId asking for more
    is refused with INVALID_TRANSACTION_TIMEOUT, as Kafka does."""
    from confluent_kafka import KafkaError, KafkaException

    b = broker_factory(extra_args=["--override", "transaction.max.timeout.ms=60000"])
    ok = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "t-ok", "transaction.timeout.ms": 60000})
    ok.init_transactions(30)
    too_long = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "t-long",
                         "transaction.timeout.ms": 120000})
    with pytest.raises(KafkaException) as caught:
        too_long.init_transactions(30)
    assert caught.value.args[0].code() == KafkaError.INVALID_TRANSACTION_TIMEOUT


@pytest.mark.parametrize("overrides, refused", [
    (["listeners=PLAINTEXT://0.0.0.0:9092"], True),
    (["listeners=PLAINTEXT://broker.example.com:9092"], True),  # a name may resolve anywhere
    (["listeners=PLAINTEXT://localhost:9092"], False),
    (["listeners=PLAINTEXT://[::1]:9092"], False),
    (["listeners=SSL://0.0.0.0:9093", "ssl.keystore.location=/k.pem"], True),  # TLS alone names no client
    (["listeners=SSL://0.0.0.0:9093", "ssl.keystore.location=/k.pem", "ssl.client.auth=required",
      "ssl.truststore.location=/ca.pem"], False),
    (["listeners=SASL_PLAINTEXT://0.0.0.0:9094", "sasl.enabled.mechanisms=SCRAM-SHA-512"], False),
])
def test_no_unauthenticated_listener_beyond_loopback_unless_asked(overrides, refused):
    args = ["--data-dir", "d"] + [a for o in overrides for a in ("--override", o)]
    if refused:
        with pytest.raises(ServeConfigError, match="has no authentication: any client that can reach it acts as "
                                                   "User:ANONYMOUS"):
            build(*args)
        _, notes = build(*args, "--override", "oncelog.allow.unauthenticated.listeners=true")
        assert any(n.startswith("WARNING: listener") for n in notes)
    else:
        _, notes = build(*args)
        assert not any(n.startswith("WARNING:") for n in notes)


def test_the_security_docs_example_means_what_it_says(tmp_path):
    """The server.properties of docs/security.md, as written there."""
    readme = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "security.md")).read()
    block = readme.split("```properties\n# server.properties\n", 1)[1].split("```", 1)[0]
    path = write(tmp_path, block)
    config, notes = build("--config", path)
    plaintext, sasl_ssl = config.listeners
    assert (plaintext.name, plaintext.host, plaintext.port) == ("PLAINTEXT", "127.0.0.1", 9092)
    assert (sasl_ssl.security_protocol, sasl_ssl.host, sasl_ssl.advertised) == (
        "SASL_SSL", "0.0.0.0", ("broker.example.com", 9094))
    assert sasl_ssl.ssl.keystore_location == "/etc/oncelog/broker.pem"
    assert sasl_ssl.sasl_mechanisms == ("SCRAM-SHA-512", "PLAIN")
    assert 'user_admin="admin-secret"' in dict(sasl_ssl.jaas)["PLAIN"]
    assert config.connections_max_reauth_ms == 3_600_000 and config.super_users == "User:admin"
    assert config.authorizer_class_name.endswith("StandardAuthorizer")
    assert not any(n.startswith("WARNING") for n in notes)  # SASL_SSL on 0.0.0.0 is authenticated
