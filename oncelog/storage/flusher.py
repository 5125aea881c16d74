"""Durability policy and group commit.

``--fsync always``   every append asks for a flush round; a produce with acks=all is answered
                     only once a round that started after its append has finished. Rounds run one
                     at a time in a worker thread; appends that arrive while a round runs all
                     share the next one (group commit), so N concurrent producers cost ~1 fsync
                     per round, not N.
``--fsync interval:MS``  a round every MS milliseconds if anything is dirty; acks do not wait.
``--fsync never``    no fsync on the produce path; rolled segments and a clean shutdown are still
                     flushed so the recovery checkpoint can advance.

State machine of the flusher (one instance, owned by the event loop)::

    idle --mark()--> running --(round done, nothing dirty)--> idle
                        \\--(round done, dirty again)--> running (next round)

Invariant: a future returned by :meth:`Flusher.mark` resolves only after an fsync that covered
the append that preceded the call.

A failed fsync fails the round's futures (acks=all produce requests answer KAFKA_STORAGE_ERROR,
coordinator writes are reported not durable) and advances nothing: no high watermark, no
recovery point. The rolled segments of the round go back to their logs' ``pending_closed``, so
the next round (started by the next append) fsyncs them again; the flusher stays usable. A full
disk is met earlier, by the write itself (see :mod:`oncelog.storage.segment`); an fsync failure
is rarer (EIO, ENOSPC on filesystems that allocate at writeback). Kafka takes the log directory
offline on any IOException (and halts with its only directory gone); oncelog keeps going and
retries. Known limit: Linux may drop the dirty pages of a failed writeback, so a later fsync can
succeed although the failed round's bytes (never acknowledged) are not on disk; the log is not
cut back to its last durable point here (that needs the appends made meanwhile refused too).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Callable

from ..config.settings import FsyncPolicy
from ..errors import KafkaStorageError
from .partition_log import PartitionLog, RecoveryPoint

log = logging.getLogger("oncelog.storage")


def _sync(work: list[tuple[list, bool]]) -> None:
    for segments, full in work:
        for seg in segments[:-1]:
            seg.flush()  # rolled segments: log and indexes, they will not be written again
        active = segments[-1]
        if full:
            active.flush()
        else:
            os.fdatasync(active.fd)


class Flusher:
    def __init__(self, policy: FsyncPolicy) -> None:
        self.policy = policy
        self.lock = asyncio.Lock()  # held while a round runs; structural changes take it too
        self._dirty: dict[PartitionLog, None] = {}
        self._next: asyncio.Future | None = None
        self._running = False
        self.rounds = 0
        self.failed: BaseException | None = None
        # Told of each successful round: (its fsyncs' wall time in seconds, logs it covered).
        # Set by the broker when it counts metrics (oncelog.metrics); None costs nothing.
        self.on_round: Callable[[float, int], None] | None = None

    def mark(self, plog: PartitionLog, *, wait: bool) -> asyncio.Future | None:
        """Note that ``plog`` has unflushed data. Returns a future for its durability when
        ``wait`` (acks=all under fsync always); otherwise None."""
        self._dirty[plog] = None
        if self.policy.mode != "always":
            if plog.pending_closed and not self._running:
                asyncio.get_running_loop().create_task(self.run_round())
            return None
        loop = asyncio.get_running_loop()
        if self._next is None:
            self._next = loop.create_future()
        fut = self._next
        if not self._running:
            self._running = True
            loop.create_task(self._loop())
        return fut if wait else None

    def request_round(self, plog: PartitionLog) -> None:
        """Start a flush round covering ``plog`` now (flush.messages / flush.ms under
        ``interval`` or ``never``; under ``always`` one is running or about to)."""
        self._dirty[plog] = None
        if not self._running:
            self._running = True
            asyncio.get_running_loop().create_task(self._loop())

    async def _loop(self) -> None:
        try:
            while self._dirty:
                await self.run_round()
        finally:
            self._running = False

    async def run_round(self, *, full: bool = False) -> None:
        """fsync every dirty log once; then advance flushed offsets and wake waiters.

        Offsets and recovery points are captured before the fsync, so they are lower bounds of
        what it made durable even if another round overlaps (the lock serialises the fsyncs).
        The segments are taken under the lock: the cleaner and retention, which hold it, may
        have rewritten or deleted the ones there were when the round began."""
        fut, self._next = self._next, None
        dirty = list(self._dirty)
        self._dirty.clear()
        work = []
        try:
            async with self.lock:
                for plog in dirty:
                    if plog.deleted:
                        continue
                    segments, offset = plog.take_flush_work()
                    point = plog.recovery_point()
                    work.append((plog, segments, offset, point))
                began = time.monotonic()
                await asyncio.get_running_loop().run_in_executor(
                    None, _sync, [(segs, full) for _, segs, _, _ in work]
                )
                took = time.monotonic() - began
        except Exception as exc:  # an fsync error: nothing in this round may be acked
            log.error("fsync failed: %r; acks=all produce requests will fail", exc)
            self.failed = exc
            for plog, segments, _, _ in work:
                # Rolled segments leave pending_closed when taken: give them back, so that no
                # later round counts anything durable before they are fsynced.
                retry = [seg for seg in segments[:-1] if seg.fd >= 0 and seg not in plog.pending_closed]
                plog.pending_closed[:0] = retry
            if fut is not None and not fut.done():
                # The broker answers KAFKA_STORAGE_ERROR and must not ack.
                fut.set_exception(KafkaStorageError(f"fsync failed: {exc}"))
                fut.exception()  # mark retrieved: produce handlers may have gone
            return
        self.rounds += 1
        if self.on_round is not None and work:
            self.on_round(took, len(work))
        for plog, _, offset, point in work:
            plog.durable_point = point
            plog.flushed(offset)
        if fut is not None and not fut.done():
            fut.set_result(None)

    async def interval_task(self) -> None:
        while True:
            await asyncio.sleep(self.policy.interval_ms / 1000)
            if self._dirty:
                await self.run_round()


def checkpoint_points(logs: list[PartitionLog]) -> dict[str, RecoveryPoint]:
    return {f"{p.topic}/{p.partition}": p.durable_point for p in logs if p.durable_point is not None}


def when_durable(flusher: Flusher, plogs: list[PartitionLog], callback) -> None:
    """Call ``callback(ok: bool)`` once what was appended to ``plogs`` so far is durable
    (at once when the policy does not wait for fsync)."""
    futures = [f for f in (flusher.mark(p, wait=True) for p in plogs) if f is not None]
    futures = list(dict.fromkeys(futures))
    if not futures:
        callback(True)
        return
    remaining = [len(futures)]
    failed = [False]

    def one(fut: asyncio.Future) -> None:
        if fut.cancelled() or fut.exception() is not None:
            failed[0] = True
        remaining[0] -= 1
        if remaining[0] == 0:
            callback(not failed[0])

    for fut in futures:
        fut.add_done_callback(one)
