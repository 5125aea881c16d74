"""The node count is part of a data directory: starting it with another ``--nodes`` is refused
with a clear message and exit code 2 (each partition lives on the node that leads it), and the
directory still starts, with its records, with the count it was written by. And a 3-node
cluster: Metadata, placement, produce/consume and a transaction over all three nodes.
"""

from __future__ import annotations

import collections
import inspect
import subprocess
import sys
import time

import confluent_kafka as ck
import pytest

from ..helpers import create_topic, read_committed_to_end
from .conftest import Cluster
from .test_transactions import find_coordinator, txn_producer
from .test_two_nodes import latest_offsets, produce_numbered, raw_metadata, read_back, topic_view, wait_until

pytestmark = pytest.mark.e2e


def serve(data_dir: str, *nodes_args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "oncelog", "serve", "--data-dir", data_dir, "--port", "0",
                           "--fsync", "never", *nodes_args], capture_output=True, text=True, timeout=timeout)


def assert_refused(data: str, written: int, asked: int) -> None:
    started = time.monotonic()
    done = serve(data, "--nodes", str(asked))
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr[-2000:])
    message = done.stderr + done.stdout
    assert f"cluster of {written} node(s)" in message and f"asks for {asked}" in message, message[-2000:]
    assert f"--nodes {written}" in message, message[-2000:]
    assert "Traceback" not in message, message[-3000:]
    assert "oncelog listening on" not in done.stdout
    print(f"--nodes {asked} on a {written}-node data dir refused in {time.monotonic() - started:.1f} s")


def test_another_node_count_on_a_cluster_data_dir_is_refused(tmp_path):
    data = str(tmp_path / "data")
    first = Cluster(data, 2).start()
    topic = first.topic_spanning(2, "kept")
    create_topic(first.bootstrap, topic, 2)
    produce_numbered(first.bootstrap, topic, 2, 5)
    first.stop()

    assert_refused(data, 2, 3)
    assert_refused(data, 2, 1)

    # the directory is unharmed, and serve without --nodes starts it with its own count
    from oncelog.process import BrokerProcess

    no_nodes = {"nodes": None} if "nodes" in inspect.signature(BrokerProcess).parameters else {}
    again = BrokerProcess(data, fsync="never", **no_nodes).start()  # no --nodes
    try:
        md = raw_metadata(again.bootstrap)
        assert sorted(b.node_id for b in md.brokers) == [1, 2]
        got = read_back(again.bootstrap, topic, 2, 10)
        assert {p: [v for _o, v in got[p]] for p in range(2)} == {p: [b"%d-%d" % (p, i) for i in range(5)]
                                                                  for p in range(2)}
    finally:
        again.kill()


def test_serve_without_nodes_on_a_new_data_dir_starts_a_node_per_core_and_records_it(tmp_path):
    """``oncelog serve`` as a user types it: a node per core this process may use (at most 16),
    recorded in meta.json, and the same count again on the next start without --nodes. (Each
    node is pinned to one core: a node counting its own cores would find one.)"""
    import json
    import os

    from oncelog.cluster import MAX_DEFAULT_NODES
    from oncelog.process import BrokerProcess

    expected = max(1, min(len(os.sched_getaffinity(0)), MAX_DEFAULT_NODES))
    data = str(tmp_path / "data")
    b = BrokerProcess(data, fsync="never", nodes=None).start()
    try:
        assert sorted(x.node_id for x in raw_metadata(b.bootstrap).brokers) == list(range(1, expected + 1))
        create_topic(b.bootstrap, "kept", 2)
        produce_numbered(b.bootstrap, "kept", 2, 3)
    finally:
        b.stop()
    with open(os.path.join(data, "meta.json")) as f:
        assert json.load(f).get("nodes", 1) == expected
    again = BrokerProcess(data, fsync="never", nodes=None).start()
    try:
        assert sorted(x.node_id for x in raw_metadata(again.bootstrap).brokers) == list(range(1, expected + 1))
        got = read_back(again.bootstrap, "kept", 2, 6)
        assert {p: [v for _o, v in got[p]] for p in range(2)} == {p: [b"%d-%d" % (p, i) for i in range(3)]
                                                                  for p in range(2)}
    finally:
        again.kill()


def test_a_one_node_data_dir_refuses_a_cluster(tmp_path):
    from oncelog.process import BrokerProcess

    data = str(tmp_path / "data")
    single = BrokerProcess(data, fsync="never", extra_args=["--nodes", "1"]).start()
    create_topic(single.bootstrap, "kept", 1)
    produce_numbered(single.bootstrap, "kept", 1, 5)
    single.stop()
    assert_refused(data, 1, 2)


@pytest.fixture(scope="module")
def cluster3(tmp_path_factory):
    c = Cluster(str(tmp_path_factory.mktemp("cluster3") / "data"), 3).start()
    yield c
    c.kill()


def test_three_nodes_metadata_placement_produce_and_consume(cluster3):
    addresses = {k: cluster3.address(k) for k in (1, 2, 3)}
    for via in (1, 2, 3):
        md = raw_metadata(addresses[via])
        assert {b.node_id: f"{b.host}:{b.port}" for b in md.brokers} == addresses
        assert md.controller_id == 1
    topic = cluster3.topic_spanning(6, "three")
    create_topic(addresses[3], topic, 6)  # forwarded by node 3
    leaders = {p: cluster3.leader(topic, p) for p in range(6)}
    assert set(leaders.values()) == {1, 2, 3}
    for via in (1, 2, 3):
        wait_until(f"node {via} sees {topic}", lambda: topic_view(addresses[via], topic) == (0, leaders), 2.0)
    produce_numbered(addresses[2], topic, 6, 300)
    assert latest_offsets(cluster3, topic, 6) == {p: 300 for p in range(6)}
    got = read_back(addresses[3], topic, 6, 1800)
    for p in range(6):
        assert [v for _o, v in got[p]] == [b"%d-%d" % (p, i) for i in range(300)], p


@pytest.mark.parametrize("coordinator", [3])
def test_three_nodes_transactions_over_every_node(cluster3, coordinator):
    txn_id = cluster3.txn_id_on(coordinator, "t3")
    assert find_coordinator(cluster3.address(1), txn_id, 1) == coordinator
    topic = cluster3.topic_spanning(6, "t3")
    create_topic(cluster3.bootstrap, topic, 6)
    producer = txn_producer(cluster3.address(1), txn_id)
    committed, aborted = [], []
    for t in range(10):
        producer.begin_transaction()
        values = [b"t%d-p%d" % (t, p) for p in range(6)]
        for p, v in enumerate(values):
            producer.produce(topic, value=v, partition=p)
        if t % 3 == 2:
            assert producer.flush(30) == 0
            producer.abort_transaction(30)
            aborted += values
        else:
            producer.commit_transaction(30)
            committed += values
    values, at_end = read_committed_to_end(cluster3.address(2), topic, 6)
    assert all(at_end.values()), at_end
    assert collections.Counter(values) == collections.Counter(committed)
    assert not set(values) & set(aborted)
