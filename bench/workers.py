"""Load generators: a pool of client processes, each with its own confluent_kafka client.

The pool is started once per run (``spawn``: no librdkafka threads are ever forked) and reused
for every cell. For each job every worker builds its client, fetches metadata (so connection
setup is outside the measured window), then waits on a shared barrier; all start together.
Each reports its own start/end instants on CLOCK_MONOTONIC, which is system-wide on Linux, so
the parent computes the cell's wall time as ``max(end) - min(start)`` across processes.

Nothing unpicklable crosses the process boundary: jobs and results are plain dicts.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import queue
import time
import traceback
from array import array
from threading import BrokenBarrierError

LATENCY_SAMPLE = 50_000  # latencies each worker sends back per cell (evenly strided)
BARRIER_TIMEOUT = 60.0


class _Collect(logging.Handler):
    """Keeps librdkafka's log lines instead of letting them hit the terminal."""

    def __init__(self, limit: int = 20) -> None:
        super().__init__()
        self.lines: list[str] = []
        self.count = 0
        self.limit = limit

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1
        if len(self.lines) < self.limit:
            self.lines.append(record.getMessage()[:300])


def _client_logger(name: str) -> tuple[logging.Logger, _Collect]:
    logger = logging.getLogger(f"bench.client.{name}")
    logger.propagate = False
    for h in list(logger.handlers):
        logger.removeHandler(h)
    handler = _Collect()
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    return logger, handler


def _errors_collector():
    errs: list[str] = []

    def error_cb(err) -> None:
        if len(errs) < 20:
            errs.append(str(err))

    return errs, error_cb


# ------------------------------------------------------------------------------------- produce

def run_produce(job: dict, barrier) -> dict:
    import confluent_kafka as ck

    topic, size, duration = job["topic"], job["size"], job["duration"]
    rate = job.get("rate") or 0
    txn_ms = job.get("txn_commit_ms")
    payload = os.urandom(size)
    lats = array("d")
    counts = {"acked": 0, "failed": 0}
    by_partition: dict[int, int] = {}
    delivery_errors: list[str] = []

    def on_delivery(err, msg) -> None:
        if err is None:
            counts["acked"] += 1
            lats.append(msg.latency())
            p = msg.partition()
            by_partition[p] = by_partition.get(p, 0) + 1
        else:
            counts["failed"] += 1
            if len(delivery_errors) < 10:
                delivery_errors.append(str(err))

    logger, log_handler = _client_logger("producer")
    client_errors, error_cb = _errors_collector()
    conf = {"bootstrap.servers": job["bootstrap"], "client.id": f"bench-p{job['worker']}",
            **job["producer"], "on_delivery": on_delivery, "error_cb": error_cb, "logger": logger}
    if txn_ms:
        conf["transactional.id"] = f"{topic}-w{job['worker']}"
    p = ck.Producer(conf)
    p.list_topics(topic, timeout=30)  # connect + metadata before the clock starts
    if txn_ms:
        p.init_transactions(30)
    produce, poll = p.produce, p.poll
    sent = transactions = 0

    barrier.wait(BARRIER_TIMEOUT)
    t_start = time.monotonic()
    deadline = t_start + duration
    next_commit = t_start + (txn_ms or 0) / 1000
    if txn_ms:
        p.begin_transaction()
    now = t_start
    while now < deadline:
        burst = 500
        if rate:
            burst = min(500, int(rate * (now - t_start)) - sent)
            if burst <= 0:
                poll(0.001)
                now = time.monotonic()
                continue
        for _ in range(burst):
            try:
                produce(topic, payload)
                sent += 1
            except BufferError:  # librdkafka's queue is full: serve delivery reports
                poll(0.005)
        poll(0)
        now = time.monotonic()
        if txn_ms and now >= next_commit:
            p.commit_transaction(30)
            transactions += 1
            p.begin_transaction()
            next_commit = now + txn_ms / 1000
    t_sent = time.monotonic()
    if txn_ms:
        p.commit_transaction(60)
        transactions += 1
    unflushed = p.flush(60)
    t_end = time.monotonic()
    step = max(1, len(lats) // LATENCY_SAMPLE)
    return {"sent": sent, "acked": counts["acked"], "acked_by_partition": by_partition, "failed": counts["failed"], "unflushed": unflushed,
            "transactions": transactions, "t_start": t_start, "t_sent": t_sent, "t_end": t_end,
            "latencies": list(lats[::step]), "delivery_errors": delivery_errors,
            "client_errors": client_errors, "client_log": log_handler.lines, "client_log_count": log_handler.count}


# ------------------------------------------------------------------------------------- consume

def run_consume(job: dict, barrier) -> dict:
    import confluent_kafka as ck

    topic, partitions = job["topic"], job["partitions"]
    logger, log_handler = _client_logger("consumer")
    client_errors, error_cb = _errors_collector()
    c = ck.Consumer({"bootstrap.servers": job["bootstrap"], "client.id": f"bench-c{job['worker']}",
                     # assign() only: the group id is never used for a join or an offset commit
                     "group.id": f"{topic}-w{job['worker']}", "enable.auto.commit": False,
                     "enable.auto.offset.store": False, "auto.offset.reset": "earliest",
                     "isolation.level": job["isolation"], **job.get("consumer", {}),
                     "error_cb": error_cb, "logger": logger})
    bounds = {}
    for p in partitions:
        bounds[p] = c.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=30)
    # Read what the producers had acknowledged (their delivery reports, per partition); the
    # watermarks are recorded too, as a cross-check of the broker's ListOffsets.
    expected = sum(job["expected"].get(p, 0) for p in partitions)
    c.assign([ck.TopicPartition(topic, p, low) for p, (low, high) in bounds.items()])
    consume = c.consume
    got = nbytes = errors = 0
    error_texts: list[str] = []

    barrier.wait(BARRIER_TIMEOUT)
    t_start = time.monotonic()
    deadline = t_start + job["timeout"]
    cap = t_start + job["max_seconds"] if job.get("max_seconds") else float("inf")
    capped = False
    # Acked counts are data records only (no transaction markers), so they hold for every mode.
    while got < expected:
        msgs = consume(10_000, 0.2)
        now = time.monotonic()
        if now > cap:
            capped = True
            break
        if now > deadline:
            break
        for m in msgs:
            if m.error():
                errors += 1
                if len(error_texts) < 10:
                    error_texts.append(str(m.error()))
                continue
            got += 1
            nbytes += len(m.value())
    t_end = time.monotonic()
    c.close()
    return {"expected": expected, "watermarks": {p: list(b) for p, b in bounds.items()}, "received": got,
            "bytes": nbytes, "errors": errors, "t_start": t_start, "t_end": t_end, "capped": capped,
            "timed_out": got < expected and not capped, "consume_errors": error_texts,
            "client_errors": client_errors, "client_log": log_handler.lines, "client_log_count": log_handler.count}


# ---------------------------------------------------------------------------------------- pool

JOBS = {"produce": run_produce, "consume": run_consume}


def _worker_main(index: int, jobs, results, barriers: dict) -> None:
    while True:
        job = jobs.get()
        if job is None:
            return
        barrier = barriers[job["participants"]]
        try:
            out = JOBS[job["kind"]](job, barrier)
            results.put((index, job["id"], None, out))
        except BaseException as exc:  # report it, and free the others waiting at the barrier
            barrier.abort()
            text = "barrier broken (another worker failed)" if isinstance(exc, BrokenBarrierError) \
                else "".join(traceback.format_exception_only(type(exc), exc)).strip()
            results.put((index, job["id"], text, None))
            if isinstance(exc, KeyboardInterrupt):
                return


class WorkerPool:
    """``size`` long-lived client processes; :meth:`run` hands one job each to the first
    ``len(jobs)`` of them. One barrier per participant count is created up front, because
    synchronisation primitives can only reach a spawned process as a start argument."""

    def __init__(self, size: int) -> None:
        ctx = mp.get_context("spawn")
        self.size = size
        self.barriers = {n: ctx.Barrier(n) for n in range(1, size + 1)}
        self.results = ctx.Queue()
        self.queues = [ctx.Queue() for _ in range(size)]
        self.procs = [ctx.Process(target=_worker_main, args=(i, self.queues[i], self.results, self.barriers),
                                  daemon=True, name=f"bench-worker-{i}") for i in range(size)]
        self._job_id = 0

    def start(self) -> "WorkerPool":
        for proc in self.procs:
            proc.start()
        return self

    def run(self, jobs: list[dict], timeout: float) -> list[tuple[str | None, dict | None]]:
        """Run ``jobs[i]`` on worker ``i``; returns ``(error, result)`` per job, in order."""
        n = len(jobs)
        self._job_id += 1
        for i, job in enumerate(jobs):
            self.queues[i].put({**job, "id": self._job_id, "worker": i, "participants": n})
        out: dict[int, tuple] = {}
        deadline = time.monotonic() + timeout
        while len(out) < n:
            try:
                index, job_id, err, res = self.results.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise TimeoutError(f"client processes did not report within {timeout:.0f}s") from None
            if job_id == self._job_id:
                out[index] = (err, res)
        if self.barriers[n].broken:
            self.barriers[n].reset()
        return [out[i] for i in range(n)]

    def close(self) -> None:
        for q in self.queues:
            q.put(None)
        for proc in self.procs:
            proc.join(5)
            if proc.is_alive():
                proc.terminate()

    def terminate(self) -> None:
        """Give up on the pool (a job hung): kill the client processes."""
        for proc in self.procs:
            if proc.is_alive():
                proc.kill()
        for proc in self.procs:
            proc.join(5)
