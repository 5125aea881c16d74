"""The benches against ``oncelog serve --nodes 2``: bench.scaling's part (C) cell on the real
cluster (its counts checked against every leader's log), and the kafka suite's
``oncelog-<fsync>:nodes<N>`` targets (bench/modes.py, bench/brokers.py)."""

from __future__ import annotations

import os

import pytest

from bench import scaling
from bench.modes import Target


def test_a_nodes_suffix_makes_a_cluster_target():
    t = Target.parse("oncelog-never:nodes2")
    assert (t.kind, t.fsync, t.nodes, t.security) == ("oncelog", "never", 2, "plaintext")
    assert t.label == "oncelog fsync never 2 nodes"
    assert Target.parse("oncelog-interval:5:nodes3").fsync == "interval:5"
    s = Target.parse("oncelog-always:nodes2+ssl")
    assert (s.nodes, s.security, s.plaintext_name) == (2, "ssl", "oncelog-always:nodes2")
    assert Target.parse("oncelog-never").nodes == 1
    with pytest.raises(ValueError):
        Target.parse("oncelog-never:nodes0")


def test_the_cluster_targets_pair_with_kafka():
    from bench.kafka import PAIRS

    assert PAIRS["oncelog-never:nodes2"] == "kafka" and PAIRS["oncelog-always:nodes2"] == "kafka+flush1"


@pytest.mark.e2e
@pytest.mark.parametrize("load", ["wire", "rdkafka"])
def test_a_cluster_cell_counts_only_what_every_leader_holds(tmp_path, load):
    from bench.workers import WorkerPool

    broker = scaling.ClusterBroker(str(tmp_path), 2, partitions=4).start()
    pool = WorkerPool(2).start()
    try:
        assert len(broker.node_pids) == 2 and broker.proc.pid not in broker.node_pids
        cell = scaling.ClusterCell("one", "nodes-2", [{0}, None], load)
        run = scaling.run_cluster_cell(cell, {"nodes-2": broker}, pool, 2, 0.5, "t", os.sched_getaffinity(0), None, 4)
        assert run["records"] > 0 and sorted(run["partitions_by_node"]) == [1, 2]
        assert all(c > 0 for c in run["per_node_cpu"])  # both nodes worked
        assert os.sched_getaffinity(broker.node_pids[0]) == {0}
        p = cell.pooled()
        assert p["records_per_s"] > 0 and len(p["per_node_cores"]) == 2
    finally:
        pool.close()
        broker.stop()


@pytest.mark.e2e
def test_a_cluster_target_sums_the_cpu_of_its_node_processes(tmp_path):
    from bench.brokers import RunningBroker

    b = RunningBroker(Target.parse("oncelog-never:nodes2"), str(tmp_path), 4).start()
    try:
        assert len(b.pids()) == 3  # the supervisor and two nodes
        b.create_topic("led")  # returns once both nodes serve their partitions
        from bench.wireload import leader_offsets

        assert sorted({node for node, _ in leader_offsets(b.bootstrap, "led").values()}) == [1, 2]
        assert b.cpu_seconds() > 0 and b.rss_mb() > 0
    finally:
        b.stop()
