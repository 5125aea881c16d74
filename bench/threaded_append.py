"""Prototype, bench only: the broker with each partition's append on a thread of a small pool.

The "one process, more threads" candidate of docs/multicore.md, as little as it takes to measure
it: the Produce handler's per-partition :meth:`oncelog.partition.Partition.append` — validation
(CRC-32C, the record walk), the producer-state check, the ``pwritev`` — runs on one of
``threads`` single-thread executors, a partition always on the same one (partitions pinned to
threads, so a partition's appends keep their request order: idempotent sequences stay in
order). The event loop decodes, dispatches and answers; while a worker is in ``pwritev`` or in
the crc32c package's C loop (both release the GIL) the loop thread runs Python. What holds the
GIL — the record walk, producer state, decode, encode — still runs one thread at a time.

Not production code and not safe beyond the bench: it takes only Produce requests that are
plain or idempotent (no transactional id, no ACL denial, acks 1/-1) and at least ``min_bytes``
large (a smaller one stays on the loop unless a partition of it has work queued on a thread:
then it follows that work there, so the order holds); everything else goes the normal way. The
high-watermark wake-up (asyncio futures of waiting fetches) is handed back to the loop thread.
Segment rolls, retention and compaction racing with a worker are not handled (the bench runs
with 1 GiB segments and no retention).

Run a broker with it (what :mod:`bench.scaling` does)::

    python -m bench.threaded_append --threads 2 --min-bytes 65536 -- serve --data-dir /tmp/d --fsync never
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import threading
from concurrent.futures import ThreadPoolExecutor


def install(threads: int = 2, min_bytes: int = 64 * 1024) -> None:
    """Patch oncelog's Produce handler in this process (see the module docstring)."""
    from oncelog import errors
    from oncelog.apis import produce
    from oncelog.apis._base import Applied
    from oncelog.storage.partition_log import PartitionLog

    executors = [ThreadPoolExecutor(1, thread_name_prefix=f"append-{i}") for i in range(threads)]
    queued: dict[tuple[str, int], int] = {}  # partition -> appends submitted and not finished
    loop_thread = threading.main_thread()
    original_append_all = produce._append_all
    original_wake = PartitionLog.wake

    loops: list[asyncio.AbstractEventLoop] = []  # the broker's loop, once a request came

    def wake(self) -> None:  # asyncio futures are set on the loop's thread only
        if threading.current_thread() is loop_thread:
            original_wake(self)
        else:
            loops[0].call_soon_threadsafe(original_wake, self)

    PartitionLog.wake = wake

    def _append_all(ctx, request, denied=None):
        if denied is not None or request.acks not in (1, -1) or request.transactional_id is not None:
            return original_append_all(ctx, request, denied)
        size = sum(len(pd.records or b"") for t in request.topic_data for pd in t.partition_data)
        names = [(t.name, pd.index) for t in request.topic_data for pd in t.partition_data]
        if size < min_bytes and not any(queued.get(n) for n in names):
            return original_append_all(ctx, request, denied)
        if not loops:
            loops.append(asyncio.get_running_loop())
        now_ms = ctx.broker.clock()
        verify_txn = produce._txn_verifier(ctx.broker.txn, request.transactional_id, ctx.api_version)
        outcome, jobs = [], []
        for topic_data in request.topic_data:
            parts = []
            for pd in topic_data.partition_data:
                entry = produce._PartitionAnswer(pd.index)
                try:
                    if topic_data.name is None:
                        raise errors.UnknownTopicId(f"no topic with id {topic_data.topic_id}")
                    if ctx.broker.partition_exists(topic_data.name, pd.index):
                        produce.check_one_batch(ctx.api_version, pd.records)
                    part = ctx.broker.partitions.get(topic_data.name, pd.index)
                    key = (topic_data.name, pd.index)
                    queued[key] = queued.get(key, 0) + 1
                    fut = executors[hash(key) % threads].submit(part.append, pd.records, now_ms=now_ms,
                                                               acks=request.acks, verify_txn=verify_txn)
                    jobs.append((entry, part, key, asyncio.wrap_future(fut)))
                except errors.KafkaError as exc:
                    _fail(entry, exc, ctx)
                parts.append(entry)
            outcome.append((topic_data, parts))
        return Applied(_finish(ctx, request, outcome, jobs, now_ms))

    async def _finish(ctx, request, outcome, jobs, now_ms):
        partitions = ctx.broker.partitions
        pending = []
        for entry, part, key, fut in jobs:
            try:
                appended = await fut
                entry.base_offset, entry.log_start_offset = appended.first_offset, appended.log_start_offset
                entry.log_append_time = appended.log_append_time
                if not appended.duplicate or appended.last_offset >= part.log.flushed_offset:
                    durable = partitions.flusher.mark(part.log, wait=True)
                    if durable is not None:
                        pending.append(durable)
                if not appended.duplicate:
                    partitions.after_append(part.log, now_ms)
            except errors.KafkaError as exc:
                _fail(entry, exc, ctx)
            finally:
                queued[key] -= 1
        if pending:
            return await produce._respond_when_durable(ctx, outcome, pending, request.timeout.total_seconds())
        return produce._response(ctx, outcome)

    def _fail(entry, exc, ctx) -> None:
        entry.error_code = errors.error_code_for(exc)
        entry.log_start_offset = getattr(exc, "log_start_offset", -1)
        entry.error_message = str(exc) or None
        entry.record_errors = exc.record_errors
        produce.log_rejection(ctx, exc, entry.error_code)

    produce._append_all = _append_all


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.threaded_append", description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2, help="append threads (partitions pinned to them)")
    parser.add_argument("--min-bytes", type=int, default=64 * 1024, help="smaller requests stay on the loop")
    parser.add_argument("--switch-interval-ms", type=float, default=None,
                        help="sys.setswitchinterval (CPython's GIL hand-over interval; default 5 ms)")
    parser.add_argument("oncelog_args", nargs=argparse.REMAINDER, help="-- then oncelog's arguments (serve ...)")
    args = parser.parse_args(argv)
    rest = args.oncelog_args[1:] if args.oncelog_args[:1] == ["--"] else args.oncelog_args
    if args.switch_interval_ms is not None:
        sys.setswitchinterval(args.switch_interval_ms / 1000)
    install(args.threads, args.min_bytes)
    from oncelog.cli import main as oncelog_main

    sys.exit(oncelog_main(rest))


if __name__ == "__main__":
    main()
