"""``oncelog demo`` beyond oncelog: on Apache Kafka fetched from Maven Central, and with
Spark's own Kafka sink in place of the connector's. Run as a user runs it (a subprocess, no
PYSPARK_* variables), with small settings: a few thousand events, one driver SIGKILL, and on
Apache Kafka one SIGKILL of the Kafka node leading an output partition.

Without Java 17+ or Maven (or when Maven Central does not resolve what is needed) they skip with
the reason, except under CI=true, where that fails: CI must really run them.
"""

from __future__ import annotations

import json
import os

import pytest

from tests.helpers import need_apache_kafka as _need
from tests.test_demo import run_demo

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _context(r: dict, out: str) -> str:
    return f"{json.dumps({k: v for k, v in r.items() if k not in ('timeline', 'samples')}, indent=1)[:4000]}\n{out[-2500:]}"


@pytest.mark.apache_kafka
def test_demo_on_apache_kafka_through_a_leader_kill(tmp_path):
    from oncelog.tools.apache_kafka import fetch

    _need("Apache Kafka", fetch)
    rc, out, r = run_demo(tmp_path, "--broker", "apache-kafka", "--records", "5000", "--driver-kills", "1",
                          "--broker-kills", "1", "--produce-seconds", "10", timeout=600)
    context = _context(r, out)
    assert rc == 0, context
    assert r["exactly_once"] is True and r["cluster"]["kind"] == "apache-kafka", context
    assert (r["lost"], r["duplicated"], r["aborted_reads"], r["phantom"]) == (0, 0, 0, 0), context
    assert r["input_records"] == r["output_records"] == r["generator"]["committed"] > 0, context
    assert r["aborted_input_records"] >= r["generator"]["aborted_on_purpose"] > 0, context
    assert r["aggregates_match"] is True and r["aggregate_duplicate_writes"] == 0, context
    assert (r["driver_kills"], r["broker_kills"], r["task_failures"]) == (1, 1, 1), context
    # The broker kill was a SIGKILL of the Kafka node leading a partition of the enriched output,
    # and the pipeline made progress again after it.
    kills = [e["text"] for e in r["timeline"] if e["kind"] == "broker-kill"]
    assert len(kills) == 1 and "Apache Kafka node" in kills[0] and "leader of orders-enriched-" in kills[0], context
    assert any(e["kind"] == "recovered" and e.get("what") == "broker SIGKILL" for e in r["timeline"]), context
    assert "exactly once" in out and "Apache Kafka" in out


@pytest.mark.skipif(os.environ.get("ONCELOG_SOAK") != "full",
                    reason="builds a PySpark 4.2.0 virtualenv (~450 MB, Maven Central has no spark-sql-kafka for "
                           "4.3.0) per environment: ONCELOG_SOAK=full")
def test_demo_with_sparks_kafka_sink_reports_its_guarantee(tmp_path):
    """Spark's own Kafka sink under a driver SIGKILL: at-least-once. The audit counts what it wrote
    again after the restart (nothing lost, nothing from an aborted transaction), and the demo
    passes only if that happened to be nothing."""
    from oncelog.spark_kafka_jars import runtime

    rt = _need("Spark's Kafka connector", runtime)
    rc, out, r = run_demo(tmp_path, "--sink", "spark-kafka", "--records", "5000", "--driver-kills", "1",
                          "--broker-kills", "0", "--produce-seconds", "10", timeout=600)
    context = _context(r, out)
    assert r["sink"] == "spark-kafka" and r["delivery_guarantee"] == "at-least-once", context
    assert r["spark_kafka"]["spark_version"] == rt.spark_version, context
    assert any(j.endswith(f"spark-sql-kafka-0-10_2.13-{rt.spark_version}.jar") for j in r["spark_kafka"]["jars"]), context
    assert r["driver_kills"] == 1 and r["task_failures"] == 0, context
    # At-least-once: every committed input is there, each extra copy is counted as duplicated.
    assert (r["lost"], r["aborted_reads"], r["phantom"]) == (0, 0, 0), context
    assert r["output_records"] == r["input_records"] + r["duplicated"], context
    assert r["aggregates_match"] is True, context  # a replayed totals batch rewrites the same values
    held = r["duplicated"] == 0 and r["aggregate_duplicate_writes"] == 0
    assert r["exactly_once"] is held and rc == (0 if held else 1), context
    if not held:
        assert "NOT exactly once" in out and "Spark's own Kafka sink" in out, context


@pytest.mark.apache_kafka
def test_demo_on_an_existing_sasl_ssl_cluster(tmp_path):
    """``--bootstrap-server`` with ``--kafka.*`` settings: an Apache Kafka node that only speaks
    SASL_SSL (SCRAM-SHA-512, a CA made by the test) stands for a cluster the demo does not own. Every
    client of the run (Spark's source and sinks, the generator, the observer, the auditor) gets
    through with the settings a Java client takes; no broker is killed, and the run's topics carry
    its id."""
    pytest.importorskip("trustme")
    from tests.kafka.test_secure_client import PASSWORD, SCRAM, USER, Certs, _secure_cluster

    (tmp_path / "certs").mkdir()
    certs = Certs(str(tmp_path / "certs"))
    cluster = _secure_cluster(certs)
    _need("Apache Kafka", cluster.start)
    try:
        rc, out, r = run_demo(
            tmp_path, "--bootstrap-server", cluster.bootstrap, "--kafka.security.protocol", "SASL_SSL",
            "--kafka.sasl.mechanism", "SCRAM-SHA-512",
            f'--kafka.sasl.jaas.config={SCRAM} required username="{USER}" password="{PASSWORD}";',
            "--kafka.ssl.truststore.type", "PEM", "--kafka.ssl.truststore.location", certs.ca,
            "--records", "3000", "--driver-kills", "1", "--broker-kills", "1", "--no-task-fault",
            "--produce-seconds", "5", timeout=600)
    finally:
        cluster.stop(graceful=False)
    context = _context(r, out)
    assert rc == 0 and r["exactly_once"] is True, context
    assert (r["lost"], r["duplicated"], r["aborted_reads"], r["phantom"]) == (0, 0, 0, 0), context
    assert r["input_records"] == r["output_records"] == r["generator"]["committed"] > 0, context
    assert r["cluster"]["kind"] == "external" and r["broker_kills"] == 0 and r["driver_kills"] == 1, context
    assert all(t.startswith("oncelog-demo-") for t in r["cluster"]["topics"].values()), context
    assert "no broker kills" in out, context


def test_demo_on_an_oncelog_sasl_ssl_listener(tmp_path):
    """The same run against oncelog's own broker speaking only SASL_SSL to the
    demo (SCRAM-SHA-512; the credential made with AlterUserScramCredentials over a loopback
    PLAINTEXT listener, as an operator would), with the settings a Java client takes."""
    import socket

    trustme = pytest.importorskip("trustme")
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    from oncelog.process import BrokerProcess

    ca = trustme.CA()
    ca_path, keystore = str(tmp_path / "ca.pem"), str(tmp_path / "broker.pem")
    ca.cert_pem.write_to_path(ca_path)
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(keystore)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    broker = BrokerProcess(str(tmp_path / "broker"), extra_args=[
        "--override", f"listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:{port}",
        "--override", f"ssl.keystore.location={keystore}",
        "--override", "listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-512"]).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for f in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
                "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"alice-secret")]).values():
            f.result(10)
        rc, out, r = run_demo(
            tmp_path, "--bootstrap-server", f"127.0.0.1:{port}", "--kafka.security.protocol", "SASL_SSL",
            "--kafka.sasl.mechanism", "SCRAM-SHA-512",
            '--kafka.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required '
            'username="alice" password="alice-secret";',
            "--kafka.ssl.truststore.type", "PEM", "--kafka.ssl.truststore.location", ca_path,
            "--records", "3000", "--driver-kills", "1", "--broker-kills", "1", "--no-task-fault",
            "--produce-seconds", "5", timeout=600)
    finally:
        broker.kill()
    context = _context(r, out)
    assert rc == 0 and r["exactly_once"] is True, context
    assert (r["lost"], r["duplicated"], r["aborted_reads"], r["phantom"]) == (0, 0, 0, 0), context
    assert r["input_records"] == r["output_records"] == r["generator"]["committed"] > 0, context
    assert r["cluster"]["kind"] == "external" and r["driver_kills"] == 1, context
    with open(broker.log_path) as f:
        assert "User:alice authenticated with SASL SCRAM-SHA-512" in f.read()
