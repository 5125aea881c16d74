"""``oncelog chaos --bootstrap-server`` against Apache Kafka, our reference: the workload and
checker on a real Kafka must find no anomaly (a checker that flags Kafka's own behaviour is
wrong), with the workers killed and paused (the broker is the session's, not faulted)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.apache_kafka, pytest.mark.e2e]


def test_chaos_workload_on_apache_kafka_finds_no_anomaly(apache_kafka, tmp_path):
    report = tmp_path / "run.json"
    proc = subprocess.run([sys.executable, "-m", "oncelog", "chaos", "--bootstrap-server", apache_kafka.bootstrap,
                           "--faults", "kill,pause", "--duration", "30", "--seed", "5", "--work-dir",
                           str(tmp_path / "work"), "--report", str(report)], capture_output=True, text=True,
                          timeout=600)
    out = proc.stdout + proc.stderr
    data = json.loads(report.read_text())
    failing = {n: c["count"] for n, c in data["result"]["classes"].items() if c["failing"] and c["count"]}
    assert failing == {} and proc.returncode == 0, out[-4000:]
    assert data["result"]["info"]["writes"]["committed"] > 100
    assert {w["kind"] for w in data["faults"]} == {"kill", "pause"}
