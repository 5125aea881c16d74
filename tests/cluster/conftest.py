"""A cluster of oncelog nodes (``serve --nodes N``) as real processes, for the tests here.

:class:`Cluster` wraps :class:`oncelog.process.BrokerProcess` (the supervisor) and reads each
node's registration (``<data dir>/nodes/<k>.json``: its pid and listeners), so a test can talk
to one node alone, SIGKILL one node's process, and wait for the supervisor to start it again.
Placement helpers say which node leads a partition or coordinates a group / transactional id,
computed from :class:`oncelog.cluster.Placement` and Kafka's hash, independently of the broker.
"""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from oncelog.cluster import Placement
from oncelog.partition.internal_topic import OFFSETS_TOPIC, TXN_TOPIC, partition_for
from oncelog.process import BrokerProcess



class Cluster:
    def __init__(self, data_dir: str, nodes: int, *, fsync: str = "never", extra_args=()) -> None:
        self.data_dir = data_dir
        self.nodes = nodes
        self.placement = Placement(nodes)
        self.process = BrokerProcess(data_dir, fsync=fsync, extra_args=["--nodes", str(nodes), *extra_args])
        self._internal: dict[str, int] = {}

    # -------------------------------------------------------------- lifecycle

    def start(self, timeout: float = 60.0) -> "Cluster":
        self.process.start(timeout)
        for k in range(1, self.nodes + 1):
            self.wait_registered(k)
        return self

    def kill(self) -> None:
        """SIGKILL the supervisor: every node dies with it (PR_SET_PDEATHSIG)."""
        pids = [self.pid(k) for k in range(1, self.nodes + 1)]
        self.process.kill()
        deadline = time.monotonic() + 10
        while any(_alive(p) for p in pids if p):
            assert time.monotonic() < deadline, f"node processes {pids} outlived the supervisor's SIGKILL"
            time.sleep(0.05)

    def stop(self) -> None:
        self.process.stop()

    @property
    def bootstrap(self) -> str:
        return self.process.bootstrap

    def log(self, lines: int = 60) -> str:
        return self.process.tail_log(lines)

    # -------------------------------------------------------------- nodes

    def registration(self, node_id: int) -> dict:
        with open(os.path.join(self.data_dir, "nodes", f"{node_id}.json")) as f:
            return json.load(f)

    def pid(self, node_id: int) -> int | None:
        try:
            return int(self.registration(node_id)["pid"])
        except (OSError, ValueError, KeyError):
            return None

    def address(self, node_id: int) -> str:
        _proto, host, port = self.registration(node_id)["listeners"]["PLAINTEXT"]
        return f"{host}:{port}"

    def wait_registered(self, node_id: int, *, not_pid: int | None = None, timeout: float = 60.0) -> int:
        """Wait until node ``node_id`` is registered by a live process (another than ``not_pid``)
        that accepts connections; its pid."""
        import socket

        deadline = time.monotonic() + timeout
        while True:
            pid = self.pid(node_id)
            if pid and pid != not_pid and _alive(pid):
                try:
                    host, port = self.address(node_id).rsplit(":", 1)
                    socket.create_connection((host, int(port)), timeout=1).close()
                    return pid
                except OSError:
                    pass
            if time.monotonic() > deadline:
                raise AssertionError(f"node {node_id} not registered and listening after {timeout} s\n{self.log()}")
            time.sleep(0.05)

    def kill_node(self, node_id: int) -> int:
        """SIGKILL one node's process (not the supervisor); its old pid."""
        pid = self.pid(node_id)
        assert pid and pid != self.process.proc.pid
        os.kill(pid, signal.SIGKILL)
        return pid

    # -------------------------------------------------------------- placement

    def leader(self, topic: str, partition: int) -> int:
        return self.placement.leader(topic, partition)

    def internal_partitions(self, topic: str) -> int:
        """How many partitions the cluster gave an internal topic (Metadata of node 1)."""
        if topic not in self._internal:
            from oncelog.client.wire import RawClient, request_module

            m = request_module(3, 12)
            c = RawClient(self.address(1))
            try:
                r = c.request(m.MetadataRequest(topics=(m.MetadataRequestTopic(topic_id=None, name=topic),),
                                                allow_auto_topic_creation=False,
                                                include_topic_authorized_operations=False))
            finally:
                c.close()
            t = r.topics[0]
            assert t.error_code == 0 and t.partitions, t
            leaders = {p.partition_index: p.leader_id for p in t.partitions}
            assert leaders == {p: self.leader(topic, p) for p in range(len(leaders))}, leaders
            self._internal[topic] = len(leaders)
        return self._internal[topic]

    def group_coordinator(self, group_id: str) -> int:
        return self.leader(OFFSETS_TOPIC, partition_for(group_id, self.internal_partitions(OFFSETS_TOPIC)))

    def txn_coordinator(self, transactional_id: str) -> int:
        return self.leader(TXN_TOPIC, partition_for(transactional_id, self.internal_partitions(TXN_TOPIC)))

    def txn_id_on(self, node_id: int, prefix: str = "txn") -> str:
        return _first(lambda name: self.txn_coordinator(name) == node_id, prefix)

    def group_on(self, node_id: int, prefix: str = "group") -> str:
        return _first(lambda name: self.group_coordinator(name) == node_id, prefix)

    def topic_spanning(self, partitions: int, prefix: str = "topic") -> str:
        """A fresh topic name whose ``partitions`` partitions have leaders on every node."""
        return _first(lambda name: {self.leader(name, p) for p in range(partitions)} == set(range(1, self.nodes + 1)),
                      prefix)


def _first(ok, prefix: str) -> str:
    import uuid

    base = uuid.uuid4().hex[:6]
    for i in range(10000):
        name = f"{prefix}-{base}-{i}"
        if ok(name):
            return name
    raise AssertionError(f"no {prefix} name found")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (a child of the supervisor not yet reaped) is dead for us
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def start_cluster(data_dir: str, nodes: int, **kwargs) -> Cluster:
    return Cluster(data_dir, nodes, **kwargs).start()


@pytest.fixture(scope="module")
def cluster2(tmp_path_factory):
    """One 2-node cluster for the whole module."""
    c = start_cluster(str(tmp_path_factory.mktemp("cluster2") / "data"), 2)
    yield c
    c.kill()


@pytest.fixture
def cluster_factory(tmp_path):
    started: list[Cluster] = []

    def make(nodes: int = 2, name: str = "data", **kwargs) -> Cluster:
        c = Cluster(str(tmp_path / name), nodes, **kwargs)
        started.append(c)
        return c.start()

    yield make
    for c in started:
        c.process.kill()
