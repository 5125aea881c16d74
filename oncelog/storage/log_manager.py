"""The partition logs of one data directory: open, closed, checkpointed, compacted, flushed.

Logs only: which topics exist, their ids and configs are the metadata's
(:mod:`oncelog.metadata`), which tells this manager which logs to open (:meth:`LogManager.open`)
and make or delete (:meth:`create_logs`, :meth:`delete_logs`), each with its
:class:`~oncelog.config.settings.LogConfig`. What the broker derives from a log's batches
(producer state, aborted transactions) is kept by :class:`oncelog.partition.PartitionManager`,
which also runs retention. This module raises no request error: a caller asking for a log that
does not exist gets None.

Layout of ``--data-dir`` (the storage part; the metadata documents: :mod:`oncelog.metadata`)::

    recovery-checkpoint.json   {"topic/partition": [segment_base, position, next_offset]}
    .clean-shutdown            present only between a clean stop and the next start
    <topic>-<partition>/       segments (see :mod:`oncelog.storage.segment`), log-start-offset

The checkpoint is replaced atomically (write, fsync, rename). Directories of partitions the
metadata does not name are leftovers of an interrupted create or delete and are removed at
start-up (the metadata's order of steps, :mod:`oncelog.metadata.topics`, makes that safe).

A full disk: every write here can fail (ENOSPC) and none takes the broker down or leaves a
partial file (``atomic_write`` removes its temporary file). The background tasks (checkpoint,
compaction, flush.ms) log the failure (once a minute) and go on, so they work again as soon as
space returns; logs that cannot be made are removed again and the OSError raised; a clean
shutdown that cannot write its checkpoint leaves no ``.clean-shutdown`` marker, so the next
start validates the unflushed tail.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..config import settings
from ..config.settings import FsyncPolicy, LogConfig
from ..notices import notice
from .flusher import Flusher, checkpoint_points
from .files import atomic_write
from .partition_log import PartitionLog, RecoveryPoint

log = logging.getLogger("oncelog.storage")

LONG_MAX = (1 << 63) - 1  # a flush.ms / flush.messages of Long.MAX_VALUE: never by that measure


async def cancel_tasks(tasks: list[asyncio.Task]) -> None:
    """Cancel background tasks and wait until each has stopped (a task that failed earlier
    must not stop the shutdown)."""
    for task in tasks:
        task.cancel()
    for task in tasks:
        try:
            await task
        except (asyncio.CancelledError, Exception):
            pass


class DirectoryInUse(RuntimeError):
    """Another process holds the log directory's lock."""


@dataclass
class TopicLogs:
    """One topic's logs here, in partition order: all of its partitions on one node, those this
    node leads in a cluster (``by_partition``; ``count``: the topic's partitions)."""
    name: str
    config: LogConfig
    internal: bool = False
    logs: list[PartitionLog] = field(default_factory=list)
    by_partition: dict[int, PartitionLog] = field(default_factory=dict)
    count: int = 0

    def add(self, plog: PartitionLog) -> None:
        self.logs.append(plog)
        self.by_partition[plog.partition] = plog


class LogManager:
    def __init__(self, data_dir: str, policy: FsyncPolicy, *,
                 checkpoint_interval_ms: int = settings.default("log.flush.offset.checkpoint.interval.ms"),
                 retention_check_interval_ms: int = settings.default("log.retention.check.interval.ms"),
                 compaction_interval_ms: Callable[[], int] = lambda: settings.default("log.cleaner.backoff.ms"),
                 clock: Callable[[], int] | None = None,
                 here: Callable[[str, int], bool] | None = None) -> None:
        """``compaction_interval_ms``: read before every compaction pass (log.cleaner.backoff.ms,
        a dynamic broker config: the metadata's live configs). ``here(topic, partition)``: whether
        this node keeps that partition's log (a cluster node leads a share, :mod:`oncelog.cluster`;
        default: every partition)."""
        self.here = here or (lambda topic, partition: True)
        # Wall-clock milliseconds (the broker's injected clock): compaction and flush.ms deadlines.
        self.clock = clock or (lambda: int(time.time() * 1000))
        self.data_dir = os.path.abspath(data_dir)
        self.policy = policy
        self.flusher = Flusher(policy)
        self.topics: dict[str, TopicLogs] = {}
        self.checkpoint_interval_ms = checkpoint_interval_ms
        self.compaction_interval_ms = compaction_interval_ms
        # Retention is run by oncelog.partition.PartitionManager (it trims partition state too).
        self.retention_check_interval_ms = retention_check_interval_ms
        self._tasks: list[asyncio.Task] = []
        self._lock_fd: int | None = None

    # ------------------------------------------------------------------ start / stop

    def open(self, topics: Iterable[tuple[str, int, LogConfig, bool]], *, fresh: bool = False) -> None:
        """Open the logs of ``topics`` ((name, partitions, config, internal) each), recovering
        each from the checkpoint (all of the unflushed tail is validated after an unclean
        shutdown), and remove the partition directories no topic names."""
        os.makedirs(self.data_dir, mode=0o700, exist_ok=True)
        clean_marker = os.path.join(self.data_dir, ".clean-shutdown")
        clean = os.path.exists(clean_marker)
        points = self._read_checkpoint()
        started = time.monotonic()
        for name, partitions, config, internal in topics:
            topic = TopicLogs(name, config, internal, count=partitions)
            for p in range(partitions):
                if self.here(name, p):
                    topic.add(self._open_log(name, p, config, points.get(f"{name}/{p}"), clean))
            self.topics[name] = topic
        self._remove_leftovers()
        if clean:
            os.unlink(clean_marker)
        logs = self.all_logs()
        # A data directory this start created has no previous shutdown to report on.
        state = "new data directory" if fresh else ("clean shutdown" if clean else "unclean shutdown")
        log.info("opened %d topic(s) in %s (%s) in %.3fs: validated %d of %d bytes", len(self.topics),
                 self.data_dir, state, time.monotonic() - started,
                 sum(p.recovery_scanned_bytes for p in logs), sum(p.size_bytes for p in logs))

    def lock(self, wait_s: float = 15.0) -> None:
        """Kafka's ``.lock``: one serving process per log directory (taken by the server before
        it opens anything; released at close). A predecessor that was killed may take a moment
        to be gone (a cluster's nodes die with their parent, asynchronously), so the lock is
        waited for a while before the start is refused."""
        os.makedirs(self.data_dir, mode=0o700, exist_ok=True)
        path = os.path.join(self.data_dir, ".lock")
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self._lock_fd = fd
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise DirectoryInUse(f"{self.data_dir} is in use by another process (it holds {path})") from None
                time.sleep(0.05)

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the descriptor releases the flock
            self._lock_fd = None

    def _open_log(self, name: str, partition: int, config: LogConfig, point: RecoveryPoint | None,
                  clean: bool) -> PartitionLog:
        directory = os.path.join(self.data_dir, f"{name}-{partition}")
        return PartitionLog.open(directory, name, partition, config,
                                 sync_hw=self.policy.mode == "always", recovery_point=point, clean_shutdown=clean)

    def start_background(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._checkpoint_task()))
        self._tasks.append(loop.create_task(self._compaction_task()))
        self._tasks.append(loop.create_task(self._flush_policy_task()))
        if self.policy.mode == "interval":
            self._tasks.append(loop.create_task(self.flusher.interval_task()))

    async def close(self) -> None:
        await cancel_tasks(self._tasks)
        for plog in self.all_logs():
            self.flusher._dirty[plog] = None
        rounds = self.flusher.rounds
        await self.flusher.run_round(full=True)
        clean = self.flusher.rounds > rounds  # the final fsync round succeeded
        try:
            self.write_checkpoint()
        except OSError as exc:
            log.error("cannot write the recovery checkpoint at shutdown: %r; the next start validates the logs", exc)
            clean = False
        for plog in self.all_logs():
            plog.close()
        if clean:
            try:
                atomic_write(os.path.join(self.data_dir, ".clean-shutdown"), "")
            except OSError as exc:
                log.error("cannot mark a clean shutdown: %r; the next start validates the logs", exc)
        self._unlock()

    # ------------------------------------------------------------------ persistence

    def _read_checkpoint(self) -> dict[str, RecoveryPoint]:
        try:
            with open(os.path.join(self.data_dir, "recovery-checkpoint.json")) as f:
                raw = json.load(f)
        except (FileNotFoundError, ValueError):
            return {}
        return {k: RecoveryPoint(*v) for k, v in raw.items()}

    def write_checkpoint(self) -> None:
        points = checkpoint_points(self.all_logs())
        doc = {k: [p.segment_base, p.position, p.next_offset] for k, p in points.items()}
        atomic_write(os.path.join(self.data_dir, "recovery-checkpoint.json"), json.dumps(doc))

    def _remove_leftovers(self) -> None:
        expected = {f"{t.name}-{p}" for t in self.topics.values() for p in t.by_partition}
        for name in os.listdir(self.data_dir):
            path = os.path.join(self.data_dir, name)
            if os.path.isdir(path) and name not in expected:
                log.warning("removing %s: not a partition of any topic (interrupted create or delete)", path)
                shutil.rmtree(path, ignore_errors=True)

    async def _checkpoint_task(self) -> None:
        while True:
            await asyncio.sleep(self.checkpoint_interval_ms / 1000)
            try:
                await asyncio.get_running_loop().run_in_executor(None, self.write_checkpoint)
            except OSError as exc:
                background_failed("recovery checkpoint", exc)

    async def _compaction_task(self) -> None:
        while True:
            await asyncio.sleep(self.compaction_interval_ms() / 1000)
            try:
                await self.compact_now()
            except OSError as exc:
                background_failed("compaction", exc)

    async def compact_now(self) -> int:
        """Compact the partitions of compacted topics that need it: dirty share at least
        min.cleanable.dirty.ratio, or dirty data older than max.compaction.lag.ms. Runs on the
        event loop, under the flusher lock: closed segments are rewritten while nothing else
        touches them. One partition at a time, the loop serving requests in between (a pass
        over all of ``__transaction_state`` with a million ids in it is seconds of work)."""
        from .cleaner import compact, needs_compaction

        saved = 0
        now = self.clock()
        for topic in list(self.topics.values()):
            if not topic.config.compact:
                continue
            for plog in list(topic.logs):
                async with self.flusher.lock:
                    if not plog.deleted and needs_compaction(plog, now):
                        saved += compact(plog, now)
                await asyncio.sleep(0)
        if saved:
            log.info("compaction saved %d bytes", saved)
        return saved

    def after_append(self, plog: PartitionLog, now_ms: int) -> None:
        """flush.messages: under ``--fsync interval``/``never`` a partition that reached its
        limit is flushed now (``always`` flushes every append anyway)."""
        if self.policy.mode != "always" and plog.flush_due(now_ms):
            self.flusher.request_round(plog)

    async def _flush_policy_task(self) -> None:
        """flush.ms under ``--fsync interval``/``never``: partitions whose oldest unflushed
        append is older than their topic's flush.ms are flushed."""
        if self.policy.mode == "always":
            return
        while True:
            limits = [t.config.flush_ms for t in self.topics.values() if t.config.flush_ms < LONG_MAX]
            await asyncio.sleep(min(max(min(limits, default=1000), 10), 1000) / 1000)
            now = self.clock()
            for topic in list(self.topics.values()):
                if topic.config.flush_ms < LONG_MAX or topic.config.flush_messages < LONG_MAX:
                    for plog in topic.logs:
                        if plog.flush_due(now):
                            self.flusher.request_round(plog)

    # ------------------------------------------------------------------ logs

    def all_logs(self) -> list[PartitionLog]:
        return [plog for t in self.topics.values() for plog in t.logs]

    def get_log(self, topic: str, partition: int) -> PartitionLog | None:
        """The log, or None when the metadata has no such partition here."""
        t = self.topics.get(topic)
        return t.by_partition.get(partition) if t is not None else None

    def is_internal(self, topic: str) -> bool:
        t = self.topics.get(topic)
        return t is not None and t.internal

    def create_logs(self, name: str, partitions: range, config: LogConfig, *, internal: bool = False) -> None:
        """Make and open the logs of new partitions (a new topic's, or those a topic grows by).
        Undone whole when one fails (a full disk): their directories are removed and the OSError
        raised."""
        topic = self.topics.get(name)
        new = topic is None
        if new:
            topic = TopicLogs(name, config, internal)
        opened: list[PartitionLog] = []
        try:
            for p in partitions:
                if self.here(name, p):
                    opened.append(self._open_log(name, p, config, None, False))
        except OSError:
            for plog in opened:
                plog.close()
            for p in partitions:
                shutil.rmtree(os.path.join(self.data_dir, f"{name}-{p}"), ignore_errors=True)
            raise
        for plog in opened:
            topic.add(plog)
        topic.count = max(topic.count, partitions.stop)
        if new:
            self.topics[name] = topic

    def remove_logs(self, name: str, start: int) -> None:
        """Undo :meth:`create_logs` (its metadata could not be written): the logs of partitions
        ``start`` and up are closed and their directories removed."""
        topic = self.topics.get(name)
        if topic is None:
            return
        for p in [p for p in topic.by_partition if p >= start]:
            plog = topic.by_partition.pop(p)
            topic.logs.remove(plog)
            self.flusher._dirty.pop(plog, None)
            plog.close()
            shutil.rmtree(os.path.join(self.data_dir, f"{name}-{p}"), ignore_errors=True)
        topic.count = min(topic.count, start)
        if start == 0:
            del self.topics[name]

    async def delete_logs(self, name: str) -> list[PartitionLog]:
        """Delete a topic's logs (its metadata record is gone already); the deleted logs."""
        topic = self.topics.pop(name, None)
        if topic is None:
            return []
        async with self.flusher.lock:
            for plog in topic.logs:
                self.flusher._dirty.pop(plog, None)
                plog.delete_all()
        return topic.logs

    def update_config(self, name: str, config: LogConfig) -> None:
        """A topic's config changed (its overrides, or the broker's layers): applied to its live logs."""
        topic = self.topics.get(name)
        if topic is None:
            return
        topic.config = config
        for plog in topic.logs:
            plog.update_config(config)


def background_failed(what: str, exc: OSError) -> None:
    """A background write failed (a full disk): said once a minute; the task goes on."""
    notice(log, "%s failed: %r; retried on the next run", what, exc, level=logging.WARNING,
           key=("storage-background", what))
