"""``oncelog chaos --nodes N``: the run against a cluster of broker node processes.

* The schedule: on one node a seed's schedule is what it was before clusters (``kill-node`` left
  out before any draw); ``kill-node`` needs ``--nodes`` 2 or more and targets nodes 1..N.
* A 45-second run on 2 nodes with ``kill-node`` (SIGKILL of one node's process; its supervisor
  restarts it) and ``net`` faults through one proxy per node: no anomaly, both nodes killed, no
  node exiting by itself, the final reader at the end of every partition.
* Sensitivity, on 2 nodes: a node that dies by itself (a crash point; the supervisor restarts
  it silently) fails the run; a broker that drops one partition's marker in every third
  transaction fails the run with the anomalies named.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from oncelog.chaos import nemesis
from oncelog.chaos.cli import parse_faults
from oncelog.chaos.run import ChaosOptions, ChaosRun

WORKERS = ["ctp-0", "ctp-1", "group-0", "group-1", "producer-0", "producer-1", "reader-0", "txn-0", "txn-1"]
SINGLE_NODE_KINDS = [k for k in nemesis.KINDS if k not in nemesis.CLUSTER_KINDS]
# on 2 nodes for 45 s with kill-node,net: node 1 killed twice and node 2 once, 3 network faults
# (when each node is back within ~3 s: the faults after a kill-node wait for its return)
CLUSTER_SEED = 11


def _failing(report: dict) -> dict[str, int]:
    return {name: c["count"] for name, c in report["result"]["classes"].items() if c["failing"] and c["count"]}


def test_kill_node_needs_a_cluster_and_leaves_one_node_schedules_unchanged():
    for seed in range(1, 40):
        for broker in (True, False):
            assert nemesis.schedule(seed, list(nemesis.KINDS), 60, WORKERS, broker=broker) == \
                nemesis.schedule(seed, SINGLE_NODE_KINDS, 60, WORKERS, broker=broker)
    plan = nemesis.schedule(CLUSTER_SEED, ["kill-node", "net"], 45, WORKERS, nodes=2)
    kills = [f.target for f in plan if f.kind == "kill-node"]
    assert kills[:3] == ["node-1", "node-2", "node-1"], plan
    assert all(f.duration_s == 0 for f in plan if f.kind == "kill-node")  # the window lasts until it is back
    assert {f.target for f in nemesis.schedule(3, ["kill-node"], 300, WORKERS, nodes=5)} == \
        {f"node-{k}" for k in range(1, 6)}
    assert nemesis.available(["kill", "kill-node"], local=False, nodes=3) == ["kill"]
    assert parse_faults(None) == tuple(SINGLE_NODE_KINDS)
    assert parse_faults(None, nodes=2) == nemesis.KINDS
    with pytest.raises(ValueError, match="--nodes 2 or more"):
        parse_faults("kill,kill-node", nodes=1)


class _SlowNodes(nemesis.Targets):
    """Nodes that take 0.4 s to come back; records when each fault began and ended."""

    def __init__(self) -> None:
        self.events: list[tuple[str, float]] = []

    def kill_node(self, target: str) -> None:
        self.events.append(("kill", time.monotonic()))

    def revive_node(self, target: str) -> None:
        time.sleep(0.4)
        self.events.append(("back", time.monotonic()))

    def net(self, detail: dict) -> None:
        self.events.append(("net", time.monotonic()))


def test_the_faults_after_a_kill_node_keep_their_quiet_gap_after_the_node_is_back():
    # a schedule's shape: each fault 0.2 s after the previous one's scheduled end (kill-node: 0 s)
    plan = [nemesis.Fault(0.1, "kill-node", "node-1", 0.0), nemesis.Fault(0.3, "net", "proxy", 0.1, {"mode": "delay"}),
            nemesis.Fault(0.6, "kill-node", "node-2", 0.0), nemesis.Fault(0.8, "kill-node", "node-1", 0.0),
            nemesis.Fault(1.0, "net", "proxy", 0.1, {"mode": "delay"})]
    targets = _SlowNodes()
    n = nemesis.Nemesis(plan, targets).start()
    n._thread.join(20)  # the whole schedule, with every node's return
    assert not n.errors and len(n.windows) == len(plan)
    for (what, t), (_next, t_next) in zip(targets.events, targets.events[1:]):
        if what == "back":  # the next fault comes a quiet gap after the node's return
            assert t_next - t >= 0.19, targets.events


@pytest.mark.e2e
def test_two_nodes_with_one_node_killed_at_a_time_find_no_anomaly(tmp_path):
    report_path = tmp_path / "run.json"
    proc = subprocess.run([sys.executable, "-m", "oncelog", "chaos", "--nodes", "2", "--faults", "kill-node,net",
                           "--duration", "45", "--seed", str(CLUSTER_SEED), "--work-dir", str(tmp_path / "work"),
                           "--report", str(report_path)], capture_output=True, text=True, timeout=400)
    out = proc.stdout + proc.stderr
    assert report_path.exists(), f"no report (exit {proc.returncode}):\n{out[-3000:]}"
    report = json.loads(report_path.read_text())
    assert _failing(report) == {}, out[-4000:]
    assert proc.returncode == 0 and report["ok"], out[-4000:]
    assert report["nodes"] == 2 and report["nemesis_errors"] == [] and report["broker_exits"] == []
    killed = [w["target"] for w in report["faults"] if w["kind"] == "kill-node"]
    assert len(killed) >= 3 and set(killed) == {"node-1", "node-2"}, report["faults"]
    assert sum(w["kind"] == "net" for w in report["faults"]) >= 2, report["faults"]
    # every node's clients came through its own proxy (node k advertises proxy k)
    assert all(n > 0 for n in report["proxy"]["connections_per_node"]), report["proxy"]
    log = (tmp_path / "work" / "broker.log").read_text()
    assert log.count("exited with code -9") == len(killed), log[-3000:]  # the supervisor restarted each
    writes = report["result"]["info"]["writes"]
    assert writes["committed"] > 1000 and writes["unseen"] == 0 and writes["read"] == writes["committed"], writes
    assert "no anomalies" in out


@pytest.mark.e2e
@pytest.mark.oncelog_only("oncelog's crash points (ONCELOG_CRASH_POINT) make a node SIGKILL itself")
def test_a_cluster_node_that_dies_by_itself_fails_the_run(tmp_path):
    run = ChaosRun(ChaosOptions(duration_s=8, faults=(), seed=2, work_dir=str(tmp_path / "work"), nodes=2,
                                broker_env={"ONCELOG_CRASH_POINT": "txn-durable:PrepareCommit"},
                                final_deadline_s=10, stop_timeout_s=10), say=lambda text: None)
    report = run.execute()
    # the cluster's supervisor restarted the node at once: only the chaos run's watch saw it go
    assert report["broker_exits"] and all(e.get("node") in (1, 2) for e in report["broker_exits"])
    assert "crash point txn-durable:PrepareCommit reached" in open(os.path.join(run.work_dir, "broker.log")).read()
    assert not report["ok"]


@pytest.mark.e2e
@pytest.mark.oncelog_only("the broker's fault switch ONCELOG_FAULT drops a marker on purpose")
def test_a_cluster_that_drops_a_marker_fails_the_run(tmp_path):
    run = ChaosRun(ChaosOptions(duration_s=15, faults=(), seed=2, work_dir=str(tmp_path / "work"), nodes=2,
                                broker_env={"ONCELOG_FAULT": "markers:drop:3"}, final_deadline_s=20),
                   say=lambda text: None)
    report = run.execute()
    assert "fault markers:drop fires" in open(os.path.join(run.work_dir, "broker.log")).read()
    assert not report["ok"] and report["broker_exits"] == []
    assert _failing(report).keys() & {"lost-write", "partial-read", "aborted-read"}, _failing(report)
