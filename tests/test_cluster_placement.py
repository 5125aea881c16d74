"""The pure parts of a cluster of nodes (oncelog.cluster): placement, each node's config and the
default node count, and producer ids that two nodes never share, across restarts."""

from __future__ import annotations

import json
import os

import pytest

from oncelog.cluster import Placement, default_nodes, logs_dir, node_config, write_registration
from oncelog.config.settings import BrokerConfig, ListenerConfig
from oncelog.metadata.producer_ids import ProducerIdManager


def test_every_partition_has_one_leader_and_the_nodes_share_them():
    counts = {1: 0, 2: 0, 3: 0}
    for topic in ("orders", "payments", "__consumer_offsets", "t-1"):
        for p in range(30):
            leaders = {k for k in (1, 2, 3) if Placement(3, k).leads(topic, p)}
            assert leaders == {Placement(3, 1).leader(topic, p)}
            counts[leaders.pop()] += 1
    assert all(c == 40 for c in counts.values()), counts  # consecutive partitions go round the nodes


def test_one_node_leads_everything_and_keeps_its_layout(tmp_path):
    one = Placement(1, 1)
    assert not one.clustered and one.leads("x", 7) and one.leader("x", 7) == 1
    assert logs_dir(str(tmp_path), one) == str(tmp_path)
    assert logs_dir(str(tmp_path), Placement(2, 2)) == os.path.join(str(tmp_path), "nodes", "2")


def test_node_ports_are_the_given_ones_plus_k_minus_1_and_0_stays_free(tmp_path):
    base = BrokerConfig(data_dir=str(tmp_path), port=9092, advertise="example.com:19092")
    second = node_config(base, 3, 2)
    assert (second.port, second.advertise, second.node_id, second.nodes) == (9093, "example.com:19093", 2, 3)
    listeners = BrokerConfig(data_dir=str(tmp_path), listeners=(
        ListenerConfig("SASL_SSL", "SASL_SSL", "127.0.0.1", 9094, ("h", 29094)),
        ListenerConfig("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 0)))
    third = node_config(listeners, 3, 3)
    assert [(lc.port, lc.advertised) for lc in third.listeners] == [(9096, ("h", 29096)), (0, None)]


def test_a_restarted_node_asks_for_the_port_it_had(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    write_registration(str(tmp_path), 2, {"node_id": 2, "pid": 1, "listeners": {}, "bound": {"PLAINTEXT": port}})
    assert node_config(BrokerConfig(data_dir=str(tmp_path), port=0), 2, 2).port == port
    with socket.socket() as busy:  # taken meanwhile: a free one is asked for instead
        busy.bind(("127.0.0.1", port))
        busy.listen()
        assert node_config(BrokerConfig(data_dir=str(tmp_path), port=0), 2, 2).port == 0


def test_the_default_count_is_the_recorded_one_else_a_node_per_core(tmp_path):
    assert default_nodes(str(tmp_path / "new")) == max(1, min(len(os.sched_getaffinity(0)), 16))
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "meta.json").write_text(json.dumps({"format": 1, "cluster_id": "c", "node_id": 1}))
    assert default_nodes(str(tmp_path / "old")) == 1  # made before clusters: one node
    (tmp_path / "three").mkdir()
    (tmp_path / "three" / "meta.json").write_text(json.dumps({"node_id": 1, "nodes": 3}))
    assert default_nodes(str(tmp_path / "three")) == 3


@pytest.mark.parametrize("nodes", [2, 3, 5])
def test_nodes_never_hand_out_one_producer_id_even_across_restarts(tmp_path, nodes):
    seen: dict[int, int] = {}
    for restart in range(3):
        for k in range(1, nodes + 1):
            ids = ProducerIdManager(str(tmp_path / f"n{k}"), stride=nodes, offset=k - 1)
            for _ in range(1500 if restart == 0 else 10):  # past a block, then a few after each restart
                pid = ids.allocate()
                assert pid not in seen, f"node {k} handed out {pid}, already handed out by node {seen.get(pid)}"
                assert pid % nodes == k - 1 and ids.was_issued(pid)
                seen[pid] = k
            assert not ids.was_issued(pid + nodes)


def test_one_node_producer_ids_are_unchanged(tmp_path):
    ids = ProducerIdManager(str(tmp_path))
    assert [ids.allocate() for _ in range(3)] == [0, 1, 2]
