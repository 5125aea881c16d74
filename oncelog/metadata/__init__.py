"""The broker's metadata: what the cluster is, as opposed to the bytes of its logs.

Kafka keeps all of this as one thing — records in ``__cluster_metadata`` applied to a metadata
image that the request handlers read — and its ``LogManager`` holds logs only. oncelog keeps it
as documents in the data directory behind one store, and one object, :class:`Metadata`, that
handlers read (``ctx.broker.metadata``):

=====================  =================================  ==========================================
``Metadata.``          what                               document (module)
=====================  =================================  ==========================================
``cluster_id``,        the data directory's identity and  ``meta.json`` (here)
``node_id``,           where internal topics place keys
``internal_placement``
``topics``             the topic registry: ids, counts,   ``topics.json`` (:mod:`.topics`)
                       overrides; create/delete/grow
``configs``            the live broker config layers;     ``broker-configs.json`` (:mod:`.configs`)
                       every dynamic setting is read here
``group_configs``      each group's own configs           ``group-configs.json`` (:mod:`.configs`)
``producer_ids``       producer-id blocks                 ``producer-ids.json`` (:mod:`.producer_ids`)
``store``              ACLs and SCRAM credentials, as     ``acls.json``, ``scram-credentials.json``
                       data (their rules: ``security/``)  (:mod:`oncelog.security.acls`, ``.scram``)
=====================  =================================  ==========================================

Every document is written through :class:`~.store.MetadataStore` (atomic, fsynced, secrets
0600). The floors: ``metadata`` sits above ``storage`` and ``partition`` and below the
coordinators; it reaches the logs only through :class:`~.topics.TopicLogs`, wired by the broker.

**A second process can follow it**: :meth:`Metadata.follower` opens the documents read-only and
:meth:`Metadata.refresh` reloads those that changed since (each write replaces a whole document,
so a follower never sees half a change). This is the base a broker of several processes needs.

``meta.json``: ``{"format": 1, "cluster_id": ..., "node_id": N, "internal_placement": "kafka"}``.
The placement (:func:`oncelog.partition.internal_topic.partition_for`): ``kafka`` for a data
directory that has no internal topic yet, ``legacy`` for one whose internal topics an oncelog
wrote before it placed keys as Kafka does (its meta.json has no placement) — its records stay
where they are, so a group's or transaction's new records join its old ones. Recorded in
meta.json, so the choice is made once.
"""

from __future__ import annotations

import base64
import logging
import os
import uuid
from collections.abc import Mapping
from typing import Protocol

from ..config.settings import GroupConfig, LogConfig
from ..storage.files import FileSystem
from .configs import GroupConfigs, LiveConfigs
from .producer_ids import ProducerIdManager
from .store import BROKER_CONFIGS, GROUP_CONFIGS, META, TOPICS, MetadataStore
from .topics import INTERNAL_TOPICS, Topic, TopicRegistry

log = logging.getLogger("oncelog.metadata")

PLACEMENTS = ("kafka", "legacy")

__all__ = ["DataDirMismatch", "INTERNAL_TOPICS", "Metadata", "MetadataStore", "Topic"]


class DataDirMismatch(RuntimeError):
    """The data directory belongs to another node (Kafka refuses to start likewise), or says
    something this oncelog does not know."""


class LogOpener(Protocol):
    """The storage side of a start (:class:`oncelog.storage.log_manager.LogManager`)."""

    def open(self, topics, *, fresh: bool) -> None: ...


class Metadata:
    """The metadata image handlers read (see the module docstring)."""

    def __init__(self, data_dir: str, *, node_id: int, default_config: LogConfig = LogConfig(),
                 static: Mapping[str, str] | None = None, group: GroupConfig = GroupConfig(),
                 follower: bool = False, fs: FileSystem | None = None, nodes: int = 1) -> None:
        """``fs``: the files' seam (default: the real filesystem; tests: a MemoryFileSystem).
        ``nodes``: the node count of a cluster (:mod:`oncelog.cluster`); recorded in meta.json
        when above 1, and a data directory recorded with another count is refused."""
        self.store = MetadataStore(data_dir, create=not follower, fs=fs)
        self.data_dir = self.store.data_dir
        self.node_id = node_id
        self.nodes = nodes
        self.cluster_id = ""
        self.internal_placement = "kafka"
        self.configs = LiveConfigs(self.store, default_config, static=static)
        self.topics = TopicRegistry(self.store, self.configs)
        self._group = group
        self.group_configs: GroupConfigs | None = None
        self.producer_ids: ProducerIdManager | None = None
        self._stamps: dict[str, tuple[int, int] | None] = {}

    # ------------------------------------------------------------------ start

    def open(self, logs: LogOpener | None = None) -> None:
        """Read every document and open the logs of the registered topics (``logs.open``),
        then settle the internal placement."""
        meta_path = self.store.path(META)
        fresh = not self.store.exists(META)
        if not fresh:
            meta = self.store.read(META)
            self._check_nodes(meta)
            if meta["node_id"] != self.node_id:
                raise DataDirMismatch(f"{meta_path} says node.id {meta['node_id']}, but this broker is configured "
                                      f"with node.id {self.node_id}: refusing to serve another node's data")
        else:
            meta = {"format": 1, "cluster_id": _cluster_id(), "node_id": self.node_id, "internal_placement": "kafka"}
            if self.nodes > 1:
                meta["nodes"] = self.nodes
            self.store.write(META, meta, indent=None, sort_keys=False)
        self.cluster_id, self.node_id = meta["cluster_id"], meta["node_id"]
        self.configs.load()
        self.topics.load()
        if logs is not None:
            logs.open([(t.name, t.partitions, t.config, t.internal) for t in self.topics.values()], fresh=fresh)
        self._settle_internal_placement(meta)
        self.group_configs = GroupConfigs(self.store, self._group)
        self.producer_ids = ProducerIdManager(self.store)
        self._stamps = {name: self.store.stamp(name) for name in (TOPICS, BROKER_CONFIGS, GROUP_CONFIGS)}

    def _check_nodes(self, meta: dict) -> None:
        recorded = meta.get("nodes", 1)
        if recorded != self.nodes:
            raise DataDirMismatch(
                f"{self.store.path(META)} was written by a cluster of {recorded} node(s); this start asks for "
                f"{self.nodes}: refusing, since each partition lives on the node that leads it (start with "
                f"--nodes {recorded}, or a new data directory)")

    def open_follower(self, logs: LogOpener | None = None) -> None:
        """A cluster node other than the controller (:mod:`oncelog.cluster`): read the documents
        the controller writes (it has started first), never write them, and open the logs of
        the registered topics; :meth:`refresh` then follows the controller's changes."""
        meta = self.store.read(META)
        if meta is None:
            raise DataDirMismatch(f"{self.store.path(META)} does not exist: the controller has not started")
        self._check_nodes(meta)
        self.cluster_id = meta["cluster_id"]
        self.internal_placement = meta.get("internal_placement") or "kafka"
        self._stamps = {name: self.store.stamp(name) for name in (TOPICS, BROKER_CONFIGS, GROUP_CONFIGS)}
        self.configs.reload()
        self.topics.load()
        if logs is not None:
            found = os.listdir(logs.data_dir) if os.path.isdir(getattr(logs, "data_dir", "")) else []
            fresh = not [name for name in found if name != ".lock"]
            logs.open([(t.name, t.partitions, t.config, t.internal) for t in self.topics.values()], fresh=fresh)
        self.group_configs = GroupConfigs(self.store, self._group)

    def _settle_internal_placement(self, meta: dict) -> None:
        placement = meta.get("internal_placement")
        if placement is None:
            placement = "legacy" if INTERNAL_TOPICS & set(self.topics) else "kafka"
            meta = {**meta, "internal_placement": placement}
            self.store.write(META, meta, indent=None, sort_keys=False)
        if placement not in PLACEMENTS:
            raise DataDirMismatch(f"{self.store.path(META)} says internal_placement {placement!r}; this oncelog "
                                  f"knows {', '.join(PLACEMENTS)}: refusing to place records where no reader would "
                                  "look")
        self.internal_placement = placement

    def ensure_internal(self, name: str, partitions: int, configs: Mapping[str, str]) -> int:
        """An internal topic, created if missing: its partition count (the partition layer's hook)."""
        return self.topics.ensure_internal(name, partitions, configs)

    # ------------------------------------------------------------------ a second process

    @classmethod
    def follower(cls, data_dir: str, *, default_config: LogConfig = LogConfig(),
                 static: Mapping[str, str] | None = None, group: GroupConfig = GroupConfig(),
                 fs: FileSystem | None = None) -> "Metadata":
        """The metadata of a data directory another process (the broker) writes, read-only:
        nothing is created or written; :meth:`refresh` follows the writer's changes."""
        store = MetadataStore(data_dir, create=False, fs=fs)
        meta = store.read(META)
        if meta is None:
            raise DataDirMismatch(f"{store.path(META)} does not exist: no broker has opened {data_dir}")
        follower = cls(data_dir, node_id=meta["node_id"], default_config=default_config, static=static,
                       group=group, follower=True, fs=fs)
        follower.cluster_id = meta["cluster_id"]
        follower.internal_placement = meta.get("internal_placement") or "kafka"
        follower.configs.reload()
        follower.topics.load()
        follower.group_configs = GroupConfigs(follower.store, group)
        follower._stamps = {name: store.stamp(name) for name in (TOPICS, BROKER_CONFIGS, GROUP_CONFIGS)}
        return follower

    def refresh(self) -> list[str]:
        """Reload the documents another process changed since the last look; their names.
        Each is reloaded whole, the broker configs first (topics resolve their configs
        over them)."""
        changed = []
        for name in (BROKER_CONFIGS, TOPICS, GROUP_CONFIGS):
            stamp = self.store.stamp(name)
            if stamp != self._stamps.get(name):
                self._stamps[name] = stamp
                changed.append(name)
        if BROKER_CONFIGS in changed:
            self.configs.reload()
        if TOPICS in changed:
            self.topics.load()
        if GROUP_CONFIGS in changed and self.group_configs is not None:
            self.group_configs.load()
        return changed


def _cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
