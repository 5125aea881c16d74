"""Every partition of the broker, as API handlers and coordinators reach them.

The :class:`~oncelog.storage.log_manager.LogManager` (storage) says which partitions exist —
topics are created, grown and deleted there — and owns their logs. The PartitionManager keeps a
:class:`~oncelog.partition.Partition` over each log: opened, with its state rebuilt, at start-up
for every existing log and on first use for a log created later; discarded when its topic is
deleted. A partition is looked up through the LogManager every time, so a partition of a topic
being deleted (or deleted and re-created) is never handed out.

It also runs what changes partition state in the background: retention (which moves log starts,
so the partitions trim their state) every ``log.retention.check.interval.ms``, and the expiry of
idle producers every ``producer.id.expiration.check.interval.ms``. Their settings are held with
the other broker configs by the LogManager and read from it (``producer.id.expiration.ms`` may be
changed by AlterConfigs, and is read at each check).

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

from ..storage.log_manager import LogManager, background_failed, cancel_tasks
from ..storage.partition_log import PartitionLog
from .partition import Partition

log = logging.getLogger("oncelog.partition")


class PartitionManager:
    def __init__(self, logs: LogManager) -> None:
        self.logs = logs
        self.flusher = logs.flusher
        self._partitions: dict[PartitionLog, Partition] = {}
        self._tasks: list[asyncio.Task] = []

    def open(self) -> None:
        """Rebuild the state of every partition the LogManager opened."""
        for plog in self.logs.all_logs():
            self._open(plog)

    def get(self, topic: str, index: int) -> Partition:
        """The partition, or :class:`~oncelog.errors.UnknownTopicOrPartition`."""
        plog = self.logs.get_log(topic, index)
        partition = self._partitions.get(plog)
        return partition if partition is not None else self._open(plog)

    def all(self) -> list[Partition]:
        return [self._partitions.get(plog) or self._open(plog) for plog in self.logs.all_logs()]

    def _open(self, plog: PartitionLog) -> Partition:
        partition = Partition.open(plog, internal=self.logs.topics[plog.topic].internal, node_id=self.logs.node_id)
        # Producers the snapshot or the replayed batches name but that expired meanwhile stay expired.
        partition.expire_producers(self.logs.clock(), self.logs.producer_id_expiration_ms)
        self._partitions[plog] = partition
        return partition

    async def delete_topic(self, name: str) -> None:
        topic = self.logs.topics.get(name)
        plogs = list(topic.logs) if topic is not None else []
        await self.logs.delete_topic(name)
        for plog in plogs:
            partition = self._partitions.pop(plog, None)
            if partition is not None:
                partition.discard()

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
        interval_ms = int(self.logs.layers.value("producer.id.expiration.check.interval.ms"))
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
        now, expiration_ms = self.logs.clock(), self.logs.producer_id_expiration_ms
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
