"""A cluster of broker processes on one machine: a process per core (docs/multicore.md).

``oncelog serve --nodes N`` starts N node processes (:mod:`.supervisor`), node ids 1..N, each
with its own listeners and event loop, each the leader of a share of the partitions. Clients
learn the share from Metadata and route by themselves, as against any Kafka cluster: no node
forwards records. What crosses between nodes is per transaction or per metadata change, never
per record.

Roles and what each owns:

==================  ===========================================================================
node 1, controller  the metadata documents (topics, configs, ACLs, SCRAM, group configs) in the
                    data directory: it alone writes them, as KRaft's controller writes
                    ``__cluster_metadata``. Metadata-changing requests sent to another node are
                    answered NOT_CONTROLLER (Metadata names node 1 the controller; clients send
                    them there).
every node          its partitions' logs (``<data dir>/nodes/<id>/``), with their producer state
                    and aborted-transaction index; the group coordinator of the groups whose
                    ``__consumer_offsets`` partition it leads and the transaction coordinator of
                    the transactional ids whose ``__transaction_state`` partition it leads
                    (Kafka's placement: FindCoordinator answers that node).
followers (2..N)    follow the controller's documents (:meth:`oncelog.metadata.Metadata.refresh`,
                    polled, and on a miss), making and deleting the logs of the partitions they
                    lead as topics come and go.
==================  ===========================================================================

Placement (:class:`Placement`, pure): partition ``p`` of a topic is led by node
``(crc32(topic) + p) % N + 1``. It never moves (no replication: while a node restarts its
partitions are unavailable, as on a Kafka cluster with replication factor 1), so it is computed,
not recorded; the node count is recorded in ``meta.json`` and a data directory refuses another.

Between nodes (:mod:`.link`): a Unix socket per node in the data directory (or a private
directory when that path is too long), served as the ``CONTROL`` listener whose principal,
``Node:cluster``, only that socket can give; its file permissions keep other users out. Over it:

* WriteTxnMarkers from a transaction coordinator to each other leader of the transaction's
  partitions (:class:`.markers.ClusterMarkerWriter`), retried until answered;
* AddPartitionsToTxn v4 ``verify_only`` from a partition leader to the transaction coordinator
  of a transactional batch (KIP-890 part 1) and of a TxnOffsetCommit;
* CreateTopics from a node to the controller for a topic that node needs created (Metadata's
  auto-creation, a streams group's internal topics), in the background, one in flight per topic;
* producer ids need no traffic: node ``k`` hands out ids ``≡ k-1 (mod N)`` from its own blocks
  (:class:`oncelog.metadata.producer_ids.ProducerIdManager`), so two nodes never hand out one id.

Files in the data directory of a cluster: the metadata documents, ``nodes/<id>.json`` (each
node's listeners and control socket, written as it starts: what Metadata lists), and
``nodes/<id>/`` (its logs).
"""

from __future__ import annotations

import dataclasses
import json
import os
import zlib

from ..config.settings import metrics_address

NODE_PRINCIPAL = "Node:cluster"  # the CONTROL listener's principal; no SASL or TLS login yields a "Node:" one
CONTROL_LISTENER = "CONTROL"
CONTROLLER_ID = 1


@dataclasses.dataclass(frozen=True)
class Placement:
    """Which node leads what, for ``nodes`` nodes; this process is ``node_id``."""

    nodes: int = 1
    node_id: int = 1

    @property
    def clustered(self) -> bool:
        return self.nodes > 1

    @property
    def is_controller(self) -> bool:
        return self.node_id == CONTROLLER_ID

    def leader(self, topic: str, partition: int) -> int:
        if self.nodes == 1:
            return self.node_id
        return (zlib.crc32(topic.encode()) + partition) % self.nodes + 1

    def leads(self, topic: str, partition: int) -> bool:
        return self.nodes == 1 or self.leader(topic, partition) == self.node_id

    def node_ids(self) -> range:
        return range(1, self.nodes + 1) if self.nodes > 1 else range(self.node_id, self.node_id + 1)


MAX_DEFAULT_NODES = 16


def default_nodes(data_dir: str) -> int:
    """``serve`` without ``--nodes``: the count a data directory was made with (1 for one made
    before clusters, whose meta.json names none), else a node per core this process may use
    (at most :data:`MAX_DEFAULT_NODES`)."""
    try:
        with open(os.path.join(data_dir, "meta.json")) as f:
            recorded = json.load(f).get("nodes", 1)
        return recorded if isinstance(recorded, int) and recorded >= 1 else 1
    except FileNotFoundError:
        pass
    except (OSError, ValueError, AttributeError):
        return 1  # the start reads it again and says what is wrong with it
    return max(1, min(len(os.sched_getaffinity(0)), MAX_DEFAULT_NODES))


def node_config(config, nodes: int, node_id: int):
    """Node ``node_id``'s BrokerConfig from the one given to ``serve --nodes``: its ports are
    the given ones plus ``node_id - 1`` (0 stays 0), its node id and count set."""
    previous = (read_registration(config.data_dir, node_id) or {}).get("bound", {})

    def shift(port: int, listener: str = "", host: str = config.host) -> int:
        if port:
            return port + node_id - 1
        # A free port asked for (0): the one this node had before, if it is free, so that a
        # node restarted by the supervisor keeps its address (clients hold it), as a Kafka
        # broker keeps its port.
        return _still_free(previous.get(listener), host) or 0

    listeners = tuple(dataclasses.replace(
        lc, port=shift(lc.port, lc.name, lc.host),
        advertised=(lc.advertised[0], shift(lc.advertised[1])) if lc.advertised else None)
        for lc in config.listeners)
    advertise = config.advertise
    if advertise:
        host, _, port = advertise.rpartition(":")
        advertise = f"{host}:{shift(int(port))}"
    metrics = config.metrics_listener
    address = metrics_address(metrics)
    if address is not None:
        host, port = address
        metrics = f"{'[' + host + ']' if ':' in host else host}:{port + node_id - 1 if port else 0}"
    return dataclasses.replace(config, nodes=nodes, node_id=node_id, port=shift(config.port, "PLAINTEXT"),
                               listeners=listeners, advertise=advertise, metrics_listener=metrics)


def _still_free(port, host: str) -> int | None:
    if not isinstance(port, int) or not 0 < port < 65536:
        return None
    import socket

    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError:
        return None
    return port


def logs_dir(data_dir: str, placement: Placement) -> str:
    """Where this node's partition logs live: the data directory itself for one node (its
    layout unchanged), ``nodes/<id>`` in a cluster."""
    if not placement.clustered:
        return data_dir
    return os.path.join(data_dir, "nodes", str(placement.node_id))


def registration_path(data_dir: str, node_id: int) -> str:
    return os.path.join(data_dir, "nodes", f"{node_id}.json")


def write_registration(data_dir: str, node_id: int, doc: dict) -> None:
    """This node's listeners and control socket, replaced atomically (read by the others)."""
    path = registration_path(data_dir, node_id)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f)
    os.replace(tmp, path)


def read_registration(data_dir: str, node_id: int) -> dict | None:
    try:
        with open(registration_path(data_dir, node_id)) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None
