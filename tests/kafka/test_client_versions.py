"""The client versions applications run, on both brokers: kafka-clients 2.8 to 4.4, and
confluent-kafka (librdkafka) 1.9, 2.3 and the newest, kafka-python 2.0.2 and the newest, aiokafka 0.8
and the newest.

Each version's jars are fetched with Maven into the user's cache (``oncelog.ak.fetch_client``)
and tests/kafka/compat/ClientCell.java is compiled against that version's own jar and run on its
classpath alone, as an application built on that client would: admin basics, an idempotent
producer, a transactional producer with a read_committed consumer, a consumer group (classic, and
KIP-848's ``group.protocol=consumer`` from 4.0) with committed offsets. Every check is run against a
fresh oncelog broker and against the session's one-node Apache Kafka 4.4; a cell passes when both
answer alike and the check succeeded on Kafka (a client Kafka 4.4 refused would be listed in
:data:`REFUSED_BY_KAFKA` and must be refused by oncelog the same way).

Before the ApiVersions fix (8abb371), kafka-clients 3.0-3.6 could not talk to oncelog at all: oncelog's ApiVersions
answer carried ``transaction.version`` with minimum 0 below ApiVersions v4, which those clients
reject (``IllegalArgumentException: Expected minValue >= 1``) on every connection (KAFKA-17492).

The Python clients run tests/kafka/compat/client_cell.py in a throwaway venv holding only that
version (tests/kafka/pyclients.py), with the same checks where the client has the feature (a check
the version lacks, e.g. transactions in kafka-python 2.0.2, says so, alike on both brokers).

The results are written to ``build/compat.json`` for the compatibility table (docs/COMPATIBILITY.md,
``python -m tests.kafka.compat_report``).
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from oncelog.tools import apache_kafka as ak

from ..helpers import create_topic, need_apache_kafka, unique
from .pyclients import PY_CLIENTS, PyClient, Unavailable, python_for

pytestmark = [pytest.mark.e2e, pytest.mark.apache_kafka]

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "compat", "ClientCell.java")
PY_CELL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "compat", "client_cell.py")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECKS = ["admin", "idempotent", "transactional", "group-classic"]
CONSUMER_PROTOCOL_SINCE = (4, 0)  # group.protocol=consumer is GA (and on by default in brokers) from 4.0
REFUSED_BY_KAFKA: dict[str, str] = {}  # version -> why Kafka 4.4 refuses it (none of the matrix so far)

_results: dict = {}


def _version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def _run_cell(client_version: str, bootstrap: str) -> dict[str, dict]:
    jars = need_apache_kafka(f"kafka-clients {client_version}", lambda: ak.fetch_client(client_version))
    classes = ak.compile_java([SOURCE], installation=jars)
    args = ["--bootstrap", bootstrap, "--prefix", unique("cv") + "-"]
    if _version_tuple(client_version)[:2] >= CONSUMER_PROTOCOL_SINCE:
        args += ["--consumer-protocol", "true"]
    cmd = ak.client_command(jars, classes, "ClientCell", args)
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=400, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"kafka-clients {client_version} against {bootstrap} did not finish in 400 s:\n"
                    f"{(exc.stderr or b'')[-3000:]!r}")
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    got = {line["check"]: {"ok": line["ok"], "detail": line["detail"]} for line in lines}
    assert done.returncode == 0 and got, (f"kafka-clients {client_version} exited {done.returncode}:\n"
                                          f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    got["_stderr"] = {"ok": True, "detail": done.stderr[-3000:]}
    return got


@pytest.mark.parametrize("client_version", ak.JAVA_CLIENT_VERSIONS)
def test_java_client_version(client_version, broker_factory, apache_kafka):
    on_kafka = _run_cell(client_version, apache_kafka.bootstrap)
    on_oncelog = _run_cell(client_version, broker_factory().bootstrap)
    kafka_err, oncelog_err = on_kafka.pop("_stderr")["detail"], on_oncelog.pop("_stderr")["detail"]
    _results[f"kafka-clients (Java)|{client_version}"] = {"apache-kafka": on_kafka, "oncelog": on_oncelog}
    _write_results()
    expected = CHECKS + (["group-consumer"] if _version_tuple(client_version)[:2] >= CONSUMER_PROTOCOL_SINCE else [])
    assert sorted(on_kafka) == sorted(expected), on_kafka
    if client_version in REFUSED_BY_KAFKA:
        assert not any(c["ok"] for c in on_kafka.values()), f"Kafka 4.4 no longer refuses {client_version}: {on_kafka}"
    else:
        failed = {k: v["detail"] for k, v in on_kafka.items() if not v["ok"]}
        assert not failed, f"kafka-clients {client_version} failed on Apache Kafka 4.4: {failed}\n{kafka_err}"
    differ = {k: (on_kafka[k], on_oncelog.get(k)) for k in expected
              if on_oncelog.get(k, {}).get("ok") != on_kafka[k]["ok"]}
    assert not differ, (f"kafka-clients {client_version}: oncelog answers differently from Apache Kafka 4.4 "
                        f"(kafka, oncelog): {differ}\n--- client's stderr on oncelog:\n{oncelog_err}")


def _write_results() -> None:
    out = os.path.join(REPO, "build")
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "compat.json")
    try:
        with open(path) as f:
            known = json.load(f)
    except (OSError, ValueError):
        known = {}
    known.update(_results)
    with open(path, "w") as f:
        json.dump(known, f, indent=1, sort_keys=True)


def _run_py_cell(client: PyClient, python: str, bootstrap: str) -> dict[str, dict]:
    prefix = unique("pv") + "-"
    for base in ("idem", "txn", "zip"):
        create_topic(bootstrap, prefix + base, partitions=2)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    try:
        done = subprocess.run([python, PY_CELL, client.library, bootstrap, prefix], capture_output=True, text=True,
                              timeout=400, stdin=subprocess.DEVNULL, env=env, cwd=os.path.dirname(PY_CELL))
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{client.label} against {bootstrap} did not finish in 400 s: {(exc.stderr or b'')[-3000:]!r}")
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    got = {line["check"]: {"ok": line["ok"], "detail": line["detail"]} for line in lines}
    assert done.returncode == 0 and got, f"{client.label} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    got["_stderr"] = {"ok": True, "detail": done.stderr[-3000:]}
    if got.get("compressed", {}).get("ok"):
        # the codecs really on the wire: a client that had turned compression off would pass the read-back
        from .java.harness import fetch_batches

        codecs = sorted({h.compression for p in range(2) for h, _ in fetch_batches(bootstrap, prefix + "zip", p)})
        got["compressed"]["detail"] += f" (batch codecs on the log: {codecs})"
        if codecs != [1, 2, 3, 4]:
            got["compressed"]["ok"] = False
    return got


@pytest.mark.parametrize("client", PY_CLIENTS, ids=lambda c: f"{c.library}-{c.version or 'env'}")
def test_python_client_version(client, broker_factory, apache_kafka):
    try:
        python = python_for(client)
    except Unavailable as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{client.library} {client.version}: {exc}", pytrace=False)
        pytest.skip(str(exc))
    on_kafka = _run_py_cell(client, python, apache_kafka.bootstrap)
    on_oncelog = _run_py_cell(client, python, broker_factory().bootstrap)
    kafka_err, oncelog_err = on_kafka.pop("_stderr")["detail"], on_oncelog.pop("_stderr")["detail"]
    _results[f"{client.library}|{client.resolved_version}"] = {"apache-kafka": on_kafka, "oncelog": on_oncelog}
    _write_results()
    failed = {k: v["detail"] for k, v in on_kafka.items() if v["ok"] is False}
    assert not failed, f"{client.label} failed on Apache Kafka 4.4: {failed}\n{kafka_err}"
    differ = {k: (on_kafka[k], on_oncelog.get(k)) for k in on_kafka
              if on_oncelog.get(k, {}).get("ok") != on_kafka[k]["ok"]}
    assert not differ, (f"{client.label}: oncelog answers differently from Apache Kafka 4.4 (kafka, oncelog): "
                        f"{differ}\n--- client's stderr on oncelog:\n{oncelog_err}")
