"""The cluster the pipeline runs on, and what a "broker SIGKILL" means there.

* :class:`OncelogCluster`: ``oncelog serve`` as a child process (``fsync=always``) in the run's
  folder, with ``serve``'s own default shape unless told (a node process per core: a supervisor
  and its nodes); a kill is a SIGKILL of all of it, a restart starts it again on the same data,
  every node on its old port.
* :class:`ApacheKafkaCluster`: Apache Kafka from the user's cache (:mod:`oncelog.tools.apache_kafka`),
  1 or 3 KRaft nodes on loopback; a kill is a SIGKILL of one node's JVM, chosen as the node that
  matters most at that moment, in turn: the leader of a partition of the enriched output, the
  transaction coordinator of the generator's transactional id, the leader of an input partition.
  On 3 nodes (replication factor 3, ``min.insync.replicas=2``) the others go on while it is
  down; on 1 node everything waits for it. Its nodes die with the thread that started them
  (``PR_SET_PDEATHSIG``), so start, kill and restart them from one long-lived thread (the
  pipeline runs in the caller's thread: the demo's main thread).
* :class:`ExternalCluster`: any existing cluster at ``--bootstrap-server``; nothing to start,
  and nothing may be killed.

Each gives ``bootstrap``, ``replication_factor`` for the topics the pipeline creates (-1: the
cluster's default), ``can_kill``, ``kill()`` (returns what it killed, in words) and ``restart()``.
"""

from __future__ import annotations

import os
import random


class OncelogCluster:
    name = "oncelog"
    can_kill = True
    replication_factor = 1

    def __init__(self, folder: str, log_path: str, nodes: int | None = None) -> None:
        from ..process import BrokerProcess

        # nodes=None: what `oncelog serve` starts on this machine (the data directory is new)
        self.broker = BrokerProcess(os.path.join(folder, "broker"), fsync="always", log_path=log_path, nodes=nodes)
        self.nodes = nodes

    def start(self) -> str:
        from ..cluster import default_nodes

        self.broker.start()
        self.nodes = default_nodes(self.broker.data_dir)  # as its meta.json now records it
        shape = f"{self.nodes} node processes, node 1 " if self.nodes > 1 else ""
        return f"oncelog broker ({shape}listening on {self.broker.bootstrap}, data in {self.broker.data_dir})"

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    def kill(self, rng: random.Random, topics: dict[str, str], txn_id: str, k: int) -> str:
        pid = self.broker.proc.pid
        self.broker.kill()
        if self.nodes > 1:
            return f"SIGKILL to the broker: its supervisor (pid {pid}) and its {self.nodes} node processes"
        return f"SIGKILL to the broker (pid {pid})"

    def restart(self) -> str:
        self.broker.restart()
        return f"broker restarted on the same data and port {self.broker.port}"

    def stop(self) -> None:
        self.broker.stop()


class ApacheKafkaCluster:
    name = "apache-kafka"
    can_kill = True

    def __init__(self, folder: str, nodes: int) -> None:
        from ..tools.apache_kafka import KafkaCluster

        self.nodes = nodes
        self.cluster = KafkaCluster(nodes=nodes, workdir=os.path.join(folder, "apache-kafka"))
        self.replication_factor = min(3, nodes)
        self.down: int | None = None

    def start(self) -> str:
        os.makedirs(self.cluster.workdir, exist_ok=True)
        self.cluster.start()
        inst = self.cluster.installation
        rss = sum(self.cluster.rss_bytes().values()) / 2**20
        return (f"Apache Kafka {inst.version} ({self.nodes} KRaft node{'s' if self.nodes > 1 else ''}"
                f"{', replication factor 3, min.insync.replicas=2' if self.nodes >= 3 else ''}) on "
                f"{self.cluster.bootstrap}, ready in {self.cluster.start_seconds:.1f}s, {rss:.0f} MiB RSS "
                f"(jars in {inst.lib})")

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    def _victim(self, rng: random.Random, topics: dict[str, str], txn_id: str, k: int) -> tuple[int, str]:
        """The node to kill for the k-th broker kill, and why it matters."""
        kinds = ("leader", "coordinator", "input-leader")
        kind = kinds[k % len(kinds)]
        try:
            if kind == "coordinator":
                node = self.cluster.transaction_coordinator(txn_id, timeout=10)
                return node, f"the transaction coordinator of {txn_id!r}"
            topic = topics["enriched"] if kind == "leader" else topics["input"]
            p = rng.randrange(4)
            node = self.cluster.leader_of(topic, p)
            if node >= 0:
                return node, f"the leader of {topic}-{p}"
        except (ConnectionError, TimeoutError):
            pass
        node = rng.choice(self.cluster.live_node_ids())
        return node, "a node"

    def kill(self, rng: random.Random, topics: dict[str, str], txn_id: str, k: int) -> str:
        node, why = self._victim(rng, topics, txn_id, k)
        pid = self.cluster.members[node].proc.pid
        self.cluster.kill(node)
        self.down = node
        left = len(self.cluster.live_node_ids())
        return (f"SIGKILL to Apache Kafka node {node}, {why} (pid {pid}); "
                f"{left} of {self.nodes} node{'s' if self.nodes > 1 else ''} left")

    def restart(self) -> str:
        node, self.down = self.down, None
        self.cluster.restart(node)
        return f"Apache Kafka node {node} restarted on its data and ports, serving"

    def stop(self) -> None:
        self.cluster.stop(graceful=False)


class ExternalCluster:
    name = "external"
    can_kill = False
    replication_factor = -1  # the cluster's default.replication.factor

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def start(self) -> str:
        return f"existing cluster at {self.bootstrap} (no broker kills: this demo does not own its brokers)"

    def kill(self, *_args) -> str:
        raise RuntimeError("an existing cluster's brokers are not ours to kill")

    def restart(self) -> str:
        raise RuntimeError("an existing cluster's brokers are not ours to restart")

    def stop(self) -> None:
        pass
