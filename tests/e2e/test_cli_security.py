"""``oncelog acls`` and ``oncelog users`` as subprocesses against a real broker
with a SASL_PLAINTEXT listener and the authorizer on (``super.users=User:admin``), connecting as
Kafka's tools do with ``--command-config`` files naming the admin's PLAIN or SCRAM credentials:
a credential added by the CLI logs in; an ACL added by the CLI lets a normal user produce and
removing it refuses them again; a wrong admin password is a one-line error, exit status 1."""

from __future__ import annotations

import subprocess
import sys

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from oncelog.process import BrokerProcess
from tests.helpers import free_port

trustme = pytest.importorskip("trustme")

pytestmark = pytest.mark.e2e  # starts processes

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret";')
TOPIC = "orders"




def _properties(path, mechanism: str, user: str, password: str) -> str:
    module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if mechanism == "PLAIN"
              else "org.apache.kafka.common.security.scram.ScramLoginModule")
    path.write_text("# an admin client's settings, as for kafka-acls.sh --command-config\n"
                    "security.protocol=SASL_PLAINTEXT\n"
                    f"sasl.mechanism={mechanism}\n"
                    f'sasl.jaas.config={module} required \\\n    username="{user}" password="{password}";\n')
    return str(path)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli-security")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(str(d / "broker.pem"))
    port, tls_port = free_port(), free_port()
    b = BrokerProcess(str(d / "broker"), extra_args=[
        "--override", f"listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{port},"
                      f"SASL_SSL://127.0.0.1:{tls_port}",
        "--override", f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}",
        "--override", f"listener.name.sasl_ssl.plain.sasl.jaas.config={JAAS}",
        "--override", f"ssl.keystore.location={d / 'broker.pem'}",
        "--override", f"authorizer.class.name={STANDARD_AUTHORIZER}",
        "--override", "super.users=User:admin"])
    b.start()
    b.sasl, b.sasl_ssl = f"127.0.0.1:{port}", f"127.0.0.1:{tls_port}"
    b.dir = d
    yield b
    b.kill()


def oncelog(*args, stdin: str | None = None):
    return subprocess.run([sys.executable, "-m", "oncelog", *args], capture_output=True, text=True, timeout=90,
                          input=stdin)


def _ok(proc) -> str:
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _client(b, mechanism: str, user: str, password: str) -> dict:
    return {"bootstrap.servers": b.sasl, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password, "log_level": 0}


def _produce(conf: dict) -> str | None:
    """None when the record was written, else the delivery error's name."""
    results = []
    p = Producer({**conf, "message.timeout.ms": 6000})
    p.produce(TOPIC, b"v", on_delivery=lambda err, msg: results.append(err))
    p.flush(20)
    assert len(results) == 1
    return None if results[0] is None else results[0].name()


def _logs_in(conf: dict) -> bool:
    admin = AdminClient(conf)
    try:
        admin.list_topics(timeout=8)
        return True
    except KafkaException:
        return False


def test_users_and_acls_through_the_cli(broker, tmp_path):
    plain_admin = _properties(tmp_path / "admin-plain.properties", "PLAIN", "admin", "admin-secret")
    scram_admin = _properties(tmp_path / "admin-scram.properties", "SCRAM-SHA-512", "admin", "admin-scram")
    srv = ["--bootstrap-server", broker.sasl]

    # Credentials: the admin's SCRAM one through a PLAIN admin login, then carol's through SCRAM.
    out = _ok(oncelog("users", "add", "admin", "--mechanism", "SCRAM-SHA-512", "--iterations", "4096",
                      "--password-stdin", *srv, "--command-config", plain_admin, stdin="admin-scram\n"))
    assert "SCRAM-SHA-512" in out and "admin" in out
    _ok(oncelog("users", *srv, "--command-config", scram_admin, "add", "carol", "--iterations", "8192",
                "--password", "carol-secret"))
    listed = _ok(oncelog("users", "list", *srv, "--command-config", scram_admin))
    assert "carol" in listed and "SCRAM-SHA-256" in listed and "8192" in listed
    assert "admin" in listed and "SCRAM-SHA-512" in listed and "4096" in listed
    assert "secret" not in listed
    carol = _client(broker, "SCRAM-SHA-256", "carol", "carol-secret")
    assert _logs_in(carol)
    assert not _logs_in(_client(broker, "SCRAM-SHA-256", "carol", "wrong"))

    # ACLs: carol may not write to the topic until the CLI allows it, and not after it is removed.
    admin = AdminClient(_client(broker, "PLAIN", "admin", "admin-secret"))
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(15)
    assert _produce(carol) == "TOPIC_AUTHORIZATION_FAILED"
    out = _ok(oncelog("acls", "add", "--allow-principal", "User:carol", "--operation", "Write",
                      "--operation", "Describe", "--topic", TOPIC, *srv, "--command-config", scram_admin))
    assert "added 2 ACL(s)" in out
    assert _produce(carol) is None
    listed = _ok(oncelog("acls", "list", "--topic", TOPIC, *srv, "--command-config", scram_admin))
    assert "User:carol" in listed and "Write" in listed and "Describe" in listed and "Allow" in listed
    assert "User:carol" in _ok(oncelog("acls", "list", "--principal", "User:carol", *srv,
                                       "--command-config", scram_admin))
    assert "no ACLs match" in _ok(oncelog("acls", "list", "--group", "nobody", *srv,
                                          "--command-config", scram_admin))
    out = _ok(oncelog("acls", "remove", "--allow-principal", "User:carol", "--topic", TOPIC, *srv,
                      "--command-config", scram_admin))
    assert "removed 2 ACL(s)" in out
    assert _produce(carol) == "TOPIC_AUTHORIZATION_FAILED"

    # Deleting carol's credential ends her logins.
    assert "SCRAM-SHA-256" in _ok(oncelog("users", "delete", "carol", *srv, "--command-config", scram_admin))
    proc = oncelog("users", "delete", "carol", *srv, "--command-config", scram_admin)
    assert proc.returncode == 1 and "carol has no SCRAM credential" in proc.stderr
    assert "carol" not in _ok(oncelog("users", "list", *srv, "--command-config", scram_admin))
    assert not _logs_in(carol)


@pytest.mark.parametrize("command", [["acls", "list"], ["users", "list"],
                                     ["acls", "add", "--allow-principal", "User:x", "--topic", "t"]])
def test_a_wrong_admin_password_is_a_clear_error(broker, tmp_path, command):
    wrong = _properties(tmp_path / "wrong.properties", "PLAIN", "admin", "not-the-password")
    proc = oncelog(*command, "--bootstrap-server", broker.sasl, "--command-config", wrong)
    assert proc.returncode == 1, proc
    assert "cannot log in" in proc.stderr and "Authentication failed" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_a_missing_command_config_and_bad_arguments(broker, tmp_path):
    proc = oncelog("acls", "list", "--bootstrap-server", broker.sasl, "--command-config", str(tmp_path / "none"))
    assert proc.returncode == 1 and "no such file" in proc.stderr and "Traceback" not in proc.stderr
    proc = oncelog("acls", "add", "--topic", "t", "--bootstrap-server", broker.sasl)
    assert proc.returncode == 1 and "--allow-principal" in proc.stderr
    proc = oncelog("acls", "add", "--allow-principal", "carol", "--topic", "t")
    assert proc.returncode == 1 and "User:alice" in proc.stderr
    proc = oncelog("acls", "add", "--allow-principal", "User:c", "--topic", "t", "--operation", "Fly")
    assert proc.returncode == 1 and "unknown operation" in proc.stderr
    proc = oncelog("users", "add", "dave", "--password-stdin", "--bootstrap-server", broker.sasl, stdin="")
    assert proc.returncode == 1 and "password is empty" in proc.stderr


def test_without_an_authorizer_acls_say_security_disabled(broker_factory):
    plain = broker_factory()  # PLAINTEXT, no authorizer.class.name
    proc = oncelog("acls", "list", "--bootstrap-server", plain.bootstrap)
    assert proc.returncode == 1 and "SECURITY_DISABLED" in proc.stderr and "No Authorizer" in proc.stderr, proc
    proc = oncelog("acls", "add", "--allow-principal", "User:x", "--topic", "t", "--bootstrap-server", plain.bootstrap)
    assert proc.returncode == 1 and "No Authorizer" in proc.stderr, proc


def test_over_sasl_ssl_with_a_pem_truststore(broker, tmp_path):
    config = tmp_path / "admin-ssl.properties"
    config.write_text("security.protocol=SASL_SSL\n"
                      f"ssl.truststore.type=PEM\nssl.truststore.location={broker.dir / 'ca.pem'}\n"
                      "sasl.mechanism=PLAIN\n"
                      "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                      'username="admin" password="admin-secret";\n')
    tls = ["--bootstrap-server", broker.sasl_ssl, "--command-config", str(config)]
    _ok(oncelog("users", "add", "erin", "--password-stdin", *tls, stdin="erin-secret\n"))
    assert "erin" in _ok(oncelog("users", "list", "erin", *tls))
    assert "added 1 ACL(s)" in _ok(oncelog("acls", "add", "--allow-principal", "User:erin", "--group", "g", *tls))
    assert "User:erin" in _ok(oncelog("acls", "list", "--group", "g", *tls))
    assert "removed 1 ACL(s)" in _ok(oncelog("acls", "remove", "--group", "g", *tls))
    _ok(oncelog("users", "delete", "erin", *tls))
    # A client that does not trust the broker's certificate: a clear error.
    config.write_text(config.read_text().replace("ssl.truststore.type=PEM\n", "").replace(
        f"ssl.truststore.location={broker.dir / 'ca.pem'}\n", ""))
    proc = oncelog("acls", "list", *tls)
    assert proc.returncode == 1 and "cannot log in" in proc.stderr and "Traceback" not in proc.stderr, proc


def test_every_admin_verb_takes_command_config(broker, tmp_path):
    """topics, producers and transactions connect with --command-config as acls/users/groups do:
    over SASL_PLAINTEXT as the admin, the same answers as a plaintext broker gives."""
    props = _properties(tmp_path / "admin.properties", "PLAIN", "admin", "admin-secret")
    common = ["--bootstrap-server", broker.sasl, "--command-config", props]
    _ok(oncelog("topics", "create", "cc-topic", "--partitions", "2", *common))
    assert "cc-topic" in _ok(oncelog("topics", "list", *common))
    described = _ok(oncelog("topics", "describe", "cc-topic", *common))
    assert "high watermark" in described and "cleanup.policy" in described
    assert "cc-topic" in _ok(oncelog("producers", "describe", "cc-topic", *common))
    assert "transactional id" in _ok(oncelog("transactions", "list", *common))


@pytest.mark.parametrize("listener, says", [("sasl", "SASL_PLAINTEXT or SASL_SSL"), ("sasl_ssl", "TLS")])
def test_a_plaintext_client_on_a_secured_listener_is_told_why(broker, listener, says):
    """No --command-config against a SASL or TLS listener: one line naming the mismatch, exit 1."""
    address = getattr(broker, listener)
    for verb in (["topics", "list"], ["transactions", "list"], ["producers", "describe", "x"]):
        proc = oncelog(*verb, "--bootstrap-server", address)
        assert proc.returncode == 1, proc
        assert says in proc.stderr and "security.protocol" in proc.stderr, (verb, proc.stderr)
        assert "Traceback" not in proc.stderr, proc.stderr
