"""Every partition of the broker, as API handlers and coordinators reach them.

The metadata (:mod:`oncelog.metadata`) says which partitions exist; the
:class:`~oncelog.storage.log_manager.LogManager` (storage) owns their logs. The PartitionManager
keeps a :class:`~oncelog.partition.Partition` over each log: opened, with its state rebuilt, at
start-up for every existing log and on first use for a log created later; discarded when its
topic is deleted. It is the metadata's :class:`~oncelog.metadata.topics.TopicLogs`: topic
changes reach the logs through it. A partition is looked up through the LogManager every time,
so a partition of a topic being deleted (or deleted and re-created) is never handed out.

It also runs what changes partition state in the background: retention (which moves log starts,
so the partitions trim their state) every ``log.retention.check.interval.ms``, and the expiry of
idle producers every ``producer.id.expiration.check.interval.ms``. Their settings are read from
the metadata's live configs (``settings``; ``producer.id.expiration.ms`` may be changed by
AlterConfigs, and is read at each check).

Producer ids are the state clients choose the size of (each idempotent or transactional
producer instance has its own). A partition keeps a producer's entry until it has written
nothing there for ``producer.id.expiration.ms`` (Kafka's 1 day) with no transaction open there,
so what a partition holds is bounded by the producers of the last day, as in Kafka. A restart
does not bring expired ones back: a partition's state is rebuilt from its newest snapshot and
the batches after it, which may name producers that expired meanwhile, so every partition is
expired once as it opens (Kafka's ``loadFromSnapshot`` skips expired entries the same way).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Callable, Protocol

from .. import errors
from ..cluster import Placement
from ..config.settings import LogConfig
from ..storage.log_manager import LogManager, background_failed, cancel_tasks
from ..storage.partition_log import PartitionLog
from .partition import Partition

log = logging.getLogger("oncelog.partition")


class Settings(Protocol):
    """The live settings read at each use (:class:`oncelog.metadata.configs.LiveConfigs`)."""
    producer_id_expiration_ms: int
    producer_id_expiration_check_interval_ms: int


class InternalTopics(Protocol):
    """Where internal topics come from (:class:`oncelog.metadata.Metadata`), wired by the broker."""
    internal_placement: str

    def ensure_internal(self, name: str, partitions: int, configs: Mapping[str, str]) -> int: ...


class PartitionManager:
    def __init__(self, logs: LogManager, settings: Settings, topics: InternalTopics | None = None, *,
                 node_id: int = 1, placement: Placement | None = None) -> None:
        self.logs = logs
        self.node_id = node_id
        # In a cluster this node keeps only the partitions it leads (oncelog.cluster).
        self.placement = placement or Placement(1, node_id)
        self.settings = settings
        self.topics = topics
        self.flusher = logs.flusher
        # Told a topic's name once its logs are deleted (the broker's metrics forget its series).
        self.on_topic_deleted: Callable[[str], None] | None = None
        self._partitions: dict[PartitionLog, Partition] = {}
        self._tasks: list[asyncio.Task] = []

    def open(self) -> None:
        """Rebuild the state of every partition the LogManager opened."""
        for plog in self.logs.all_logs():
            self._open(plog)

    def get(self, topic: str, index: int) -> Partition:
        """The partition, or :class:`~oncelog.errors.UnknownTopicOrPartition`."""
        plog = self.logs.get_log(topic, index)
        if plog is None:
            if not self.placement.leads(topic, index) and self._exists(topic, index):
                raise errors.NotLeaderOrFollower(
                    f"{topic}-{index} is led by node {self.placement.leader(topic, index)}, not node {self.node_id}")
            raise errors.UnknownTopicOrPartition(f"{topic}-{index} does not exist")
        partition = self._partitions.get(plog)
        return partition if partition is not None else self._open(plog)

    def here(self, topic: str, index: int) -> bool:
        """Whether this node keeps (leads) the partition: always on one node."""
        return self.placement.leads(topic, index)

    def _exists(self, topic: str, index: int) -> bool:
        registry = getattr(self.topics, "topics", None)
        t = registry.get(topic) if registry is not None else None
        return t is not None and 0 <= index < t.partitions

    def all(self) -> list[Partition]:
        return [self._partitions.get(plog) or self._open(plog) for plog in self.logs.all_logs()]

    def _open(self, plog: PartitionLog) -> Partition:
        partition = Partition.open(plog, internal=self.logs.is_internal(plog.topic), node_id=self.node_id)
        # Producers the snapshot or the replayed batches name but that expired meanwhile stay expired.
        partition.expire_producers(self.logs.clock(), self.settings.producer_id_expiration_ms)
        self._partitions[plog] = partition
        return partition

    def after_append(self, plog: PartitionLog, now_ms: int) -> None:
        """flush.messages: see :meth:`oncelog.storage.log_manager.LogManager.after_append`."""
        self.logs.after_append(plog, now_ms)

    # ------------------------------------------------------------------ the metadata's TopicLogs

    def create_logs(self, name: str, partitions: range, config: LogConfig, *, internal: bool) -> None:
        self.logs.create_logs(name, partitions, config, internal=internal)

    def remove_logs(self, name: str, start: int) -> None:
        topic = self.logs.topics.get(name)
        for plog in [plog for p, plog in topic.by_partition.items() if p >= start] if topic is not None else []:
            partition = self._partitions.pop(plog, None)
            if partition is not None:
                partition.discard()
        self.logs.remove_logs(name, start)

    async def delete_logs(self, name: str) -> None:
        for plog in await self.logs.delete_logs(name):
            partition = self._partitions.pop(plog, None)
            if partition is not None:
                partition.discard()
        if self.on_topic_deleted is not None:
            self.on_topic_deleted(name)

    def update_config(self, name: str, config: LogConfig) -> None:
        self.logs.update_config(name, config)

    # ------------------------------------------------------------------ background work

    def start_background(self) -> None:
        self.logs.start_background()
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._retention_task()))
        self._tasks.append(loop.create_task(self._producer_expiration_task()))

    async def _retention_task(self) -> None:
        while True:
            await asyncio.sleep(self.logs.retention_check_interval_ms / 1000)
            try:
                await self.apply_retention()
            except OSError as exc:  # a full disk: the next run tries again
                background_failed("retention", exc)

    async def _producer_expiration_task(self) -> None:
        interval_ms = self.settings.producer_id_expiration_check_interval_ms
        while True:
            await asyncio.sleep(interval_ms / 1000)
            self.expire_producers()

    async def apply_retention(self) -> int:
        """Retention of segments. Returns how many segments were deleted."""
        now = self.logs.clock()
        removed = 0
        async with self.flusher.lock:
            for partition in self.all():
                segments = len(partition.log.segments)
                partition.apply_retention(now)
                removed += segments - len(partition.log.segments)
        if removed:
            log.info("retention deleted %d segment(s)", removed)
        return removed

    def expire_producers(self) -> int:
        """Kafka's periodic ``removeExpiredProducers`` of every partition: drop the producers idle
        for ``producer.id.expiration.ms`` (read now: AlterConfigs may change it). Returns how many."""
        now, expiration_ms = self.logs.clock(), self.settings.producer_id_expiration_ms
        expired = sum(partition.expire_producers(now, expiration_ms) for partition in self._partitions.values())
        if expired:
            log.info("expired %d producer id(s) idle for producer.id.expiration.ms=%d", expired, expiration_ms)
        return expired

    async def close(self) -> None:
        """Clean shutdown: every partition's state snapshotted, then the logs flushed and closed."""
        await cancel_tasks(self._tasks)
        for partition in self._partitions.values():
            partition.close()
        await self.logs.close()
