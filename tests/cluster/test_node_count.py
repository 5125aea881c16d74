"""The node count is part of a data directory: starting it with another ``--nodes`` is refused
with a clear message and exit code 2 (each partition lives on the node that leads it), and the
directory still starts, with its records, with the count it was written by. And a 3-node
cluster: Metadata, placement, produce/consume and a transaction over all three nodes.
"""

from __future__ import annotations

import collections
import subprocess
import sys

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


@pytest.mark.parametrize("written,asked", [(2, 3), (2, 1), (1, 2)])
def test_another_node_count_on_the_same_data_dir_is_refused(tmp_path, written, asked):
    data = str(tmp_path / "data")
    first = Cluster(data, written) if written > 1 else None
    if first is not None:
        first.start()
        topic = first.topic_spanning(written, "kept")
        bootstrap = first.bootstrap
    else:
        from oncelog.process import BrokerProcess

        single = BrokerProcess(data, fsync="never", extra_args=["--nodes", "1"]).start()
        topic, bootstrap = "kept", single.bootstrap
    create_topic(bootstrap, topic, written)
    produce_numbered(bootstrap, topic, written, 5)
    if first is not None:
        first.stop()
    else:
        single.stop()

    done = serve(data, "--nodes", str(asked))
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr[-2000:])
    message = done.stderr + done.stdout
    assert f"cluster of {written} node(s)" in message and f"asks for {asked}" in message, message[-2000:]
    assert f"--nodes {written}" in message, message[-2000:]
    assert "Traceback" not in message, message[-3000:]
    assert "oncelog listening on" not in done.stdout

    # the directory is unharmed: its own count starts it with every record
    if written > 1:
        again = Cluster(data, written).start()
        try:
            got = read_back(again.bootstrap, topic, written, 5 * written)
            assert {p: len(v) for p, v in got.items()} == {p: 5 for p in range(written)}
        finally:
            again.process.kill()


def test_without_nodes_an_existing_data_dir_starts_with_its_own_count(tmp_path):
    data = str(tmp_path / "data")
    first = Cluster(data, 2).start()
    topic = first.topic_spanning(2, "own")
    create_topic(first.bootstrap, topic, 2)
    produce_numbered(first.bootstrap, topic, 2, 5)
    first.stop()
    from oncelog.process import BrokerProcess

    import inspect

    no_nodes = {"nodes": None} if "nodes" in inspect.signature(BrokerProcess).parameters else {}
    again = BrokerProcess(data, fsync="never", **no_nodes).start()  # no --nodes
    try:
        md = raw_metadata(again.bootstrap)
        assert sorted(b.node_id for b in md.brokers) == [1, 2]
        got = read_back(again.bootstrap, topic, 2, 10)
        assert {p: len(v) for p, v in got.items()} == {0: 5, 1: 5}
    finally:
        again.kill()


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
