"""The Java client versions applications run, on both brokers (issue 33): kafka-clients 2.8 to 4.4.

Each version's jars are fetched with Maven into the user's cache (``oncelog.ak.fetch_client``)
and tests/kafka/compat/ClientCell.java is compiled against that version's own jar and run on its
classpath alone, as an application built on that client would: admin basics, an idempotent
producer, a transactional producer with a read_committed consumer, a consumer group (classic, and
KIP-848's ``group.protocol=consumer`` from 4.0) with committed offsets. Every check is run against a
fresh oncelog broker and against the session's one-node Apache Kafka 4.4; a cell passes when both
answer alike and the check succeeded on Kafka (a client Kafka 4.4 refused would be listed in
:data:`REFUSED_BY_KAFKA` and must be refused by oncelog the same way).

Before issue 33, kafka-clients 3.0-3.6 could not talk to oncelog at all: oncelog's ApiVersions
answer carried ``transaction.version`` with minimum 0 below ApiVersions v4, which those clients
reject (``IllegalArgumentException: Expected minValue >= 1``) on every connection (KAFKA-17492).

The results are written to ``build/compat-java.json`` for the compatibility table (docs/COMPATIBILITY.md).
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from oncelog import apache_kafka as ak

from ..helpers import need_apache_kafka, unique

pytestmark = [pytest.mark.e2e, pytest.mark.apache_kafka]

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "compat", "ClientCell.java")
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
    _results[client_version] = {"apache-kafka": on_kafka, "oncelog": on_oncelog}
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
    path = os.path.join(out, "compat-java.json")
    try:
        with open(path) as f:
            known = json.load(f)
    except (OSError, ValueError):
        known = {}
    known.update(_results)
    with open(path, "w") as f:
        json.dump(known, f, indent=1, sort_keys=True)
