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
import random
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


def _client_conf(job: dict) -> dict:
    """librdkafka settings to reach the job's broker: address, and security protocol, TLS trust
    and SASL credentials for a ``+<protocol>`` target (bench/security.py)."""
    return {"bootstrap.servers": job["bootstrap"], **job.get("security", {})}


# ------------------------------------------------------------------------------------- produce

def run_produce(job: dict, barrier) -> dict:
    import confluent_kafka as ck

    topic, size, duration = job["topic"], job["size"], job["duration"]
    rate = job.get("rate") or 0
    txn_ms = job.get("txn_commit_ms")
    payload = os.urandom(size)
    lats = array("d")
    commit_lats = array("d")
    endtxn_lats = array("d")
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
    conf = {**_client_conf(job), "client.id": f"bench-p{job['worker']}",
            **job["producer"], "on_delivery": on_delivery, "error_cb": error_cb, "logger": logger}
    if txn_ms:
        conf["transactional.id"] = f"{topic}-w{job['worker']}"
    p = ck.Producer(conf)
    p.list_topics(topic, timeout=30)  # connect + metadata before the clock starts
    if txn_ms:
        p.init_transactions(30)
    produce, poll = p.produce, p.poll
    sent = transactions = 0
    txn_first = 0  # value of ``sent`` when the open transaction began

    def commit(timeout: float = 30) -> float:
        """commit_transaction() flushes the transaction's queued records, then sends EndTxn and
        waits for it. The flush is done first, explicitly, so the two are timed apart: the whole
        is what a committing application waits, the second part is the EndTxn round trip (the
        coordinator's PrepareCommit, markers, CompleteCommit). An empty transaction is committed
        by librdkafka without a request, so it is left out of the figures."""
        nonlocal transactions, txn_first
        t0 = time.monotonic()
        p.flush(timeout)
        t1 = time.monotonic()
        p.commit_transaction(timeout)
        t2 = time.monotonic()
        if sent > txn_first:
            commit_lats.append(t2 - t0)
            endtxn_lats.append(t2 - t1)
            transactions += 1
        txn_first = sent
        return t2

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
            now = commit()
            p.begin_transaction()
            next_commit = now + txn_ms / 1000
    t_sent = time.monotonic()
    if txn_ms:
        commit(60)
    unflushed = p.flush(60)
    t_end = time.monotonic()
    step = max(1, len(lats) // LATENCY_SAMPLE)
    return {"sent": sent, "acked": counts["acked"], "acked_by_partition": by_partition, "failed": counts["failed"], "unflushed": unflushed,
            "transactions": transactions, "t_start": t_start, "t_sent": t_sent, "t_end": t_end,
            "latencies": list(lats[::step]), "commit_latencies": list(commit_lats), "endtxn_latencies": list(endtxn_lats), "delivery_errors": delivery_errors,
            "client_errors": client_errors, "client_log": log_handler.lines, "client_log_count": log_handler.count}


def run_wire_produce(job: dict, barrier) -> dict:
    """The protocol-level producer (bench/wireload.py) in one of the ``wire`` modes; reports in
    the shape of :func:`run_produce`."""
    import asyncio

    from .wireload import WireMode, WireProducer

    topic = job["topic"]
    mode = WireMode.from_dict({**job["wire"], "txn_commit_ms": job.get("txn_commit_ms")})

    async def main() -> dict:
        producer = await WireProducer.create(
            job["bootstrap"], topic, mode, batch_records=job["batch_records"], value=os.urandom(job["size"]),
            security=job.get("security"),
            client_id=f"bench-w{job['worker']}", transactional_id=f"{topic}-w{job['worker']}")
        try:
            # connection, Metadata and InitProducerId are done: start together
            await asyncio.get_running_loop().run_in_executor(None, barrier.wait, BARRIER_TIMEOUT)
            t_start, t_sent, t_end = await producer.run(job["duration"])
        finally:
            await producer.close()
        per_request = producer.batch_records
        step = max(1, len(producer.latencies) // LATENCY_SAMPLE)
        return {"sent": producer.acked, "acked": producer.acked,
                "acked_by_partition": dict(producer.acked_by_partition),
                "failed": 0, "unflushed": 0, "transactions": producer.transactions,
                "t_start": t_start, "t_sent": t_sent, "t_end": t_end,
                "latencies": producer.latencies[::step], "commit_latencies": producer.commit_latencies,
                "endtxn_latencies": producer.endtxn_latencies, "delivery_errors": [], "client_errors": [],
                "add_partitions_retries": producer.add_partitions_retries,
                "client_log": [f"wireload: {producer.requests} Produce requests of {len(producer.partitions)} "
                               f"batches x {per_request} records"
                               + (f" over {producer.nodes} leader nodes" if producer.nodes > 1 else "")
                               + (f", {producer.transactions} transactions, AddPartitionsToTxn answered "
                                  f"CONCURRENT_TRANSACTIONS {producer.add_partitions_retries} times"
                                  if producer.transactions else "")], "client_log_count": 1}

    return asyncio.run(main())


def run_wire_consume(job: dict, barrier) -> dict:
    """Read a cell back with the protocol-level fetch loop (bench/wireload.py); reports in the
    shape of :func:`run_consume`. ``bytes`` counts whole batches here (headers included)."""
    import asyncio

    from .wireload import WireFetcher

    expected = {int(p): n for p, n in job["expected"].items()}

    async def main() -> dict:
        f = await WireFetcher.create(job["bootstrap"], job["topic"], job["partitions"], job["isolation"],
                                     client_id=f"bench-f{job['worker']}", security=job.get("security"))
        try:
            await asyncio.get_running_loop().run_in_executor(None, barrier.wait, BARRIER_TIMEOUT)
            t_start, t_end, capped = await f.run(expected, job.get("max_seconds") or 0, job["timeout"])
        finally:
            await f.close()
        want = sum(expected.get(p, 0) for p in job["partitions"])
        return {"expected": want, "watermarks": {}, "received": f.records, "bytes": f.bytes, "errors": 0,
                "t_start": t_start, "t_end": t_end, "capped": capped,
                "timed_out": f.records < want and not capped, "consume_errors": [], "client_errors": [],
                "client_log": [f"wireload fetch: {f.fetches} Fetch requests"], "client_log_count": 1}

    return asyncio.run(main())


# ------------------------------------------------------------------------------------- consume

def run_consume(job: dict, barrier) -> dict:
    import confluent_kafka as ck

    topic, partitions = job["topic"], job["partitions"]
    logger, log_handler = _client_logger("consumer")
    client_errors, error_cb = _errors_collector()
    c = ck.Consumer({**_client_conf(job), "client.id": f"bench-c{job['worker']}",
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


# ------------------------------------------------------------------------------ groups: rebalance

class _Member:
    """One group member: a confluent_kafka Consumer polled by its own thread. It connects (and
    fetches metadata) before ``go`` is set, so the timed window starts at ``subscribe()``; every
    rebalance callback is recorded with its CLOCK_MONOTONIC instant."""

    def __init__(self, index: int, conf: dict, topic: str) -> None:
        import threading

        self.index = index
        self.conf = conf
        self.topic = topic
        self.ready = threading.Event()
        self.go = threading.Event()
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.current: frozenset[int] | None = None  # None until the first assignment
        self.assigned_at = 0.0
        self.events: list[tuple[float, str, list[int]]] = []
        self.t_subscribe = 0.0
        self.error: str | None = None
        self.thread = threading.Thread(target=self._run, name=f"member-{index}", daemon=True)

    def _on_assign(self, consumer, partitions) -> None:
        now = time.monotonic()
        parts = sorted(tp.partition for tp in partitions)
        with self.lock:
            self.current = frozenset(parts)
            self.assigned_at = now
            self.events.append((now, "assign", parts))

    def _on_revoke(self, consumer, partitions) -> None:
        now = time.monotonic()
        with self.lock:
            self.current = frozenset()
            self.events.append((now, "revoke", sorted(tp.partition for tp in partitions)))

    def _on_lost(self, consumer, partitions) -> None:
        now = time.monotonic()
        with self.lock:
            self.current = frozenset()
            self.events.append((now, "lost", sorted(tp.partition for tp in partitions)))

    def _run(self) -> None:
        import confluent_kafka as ck

        try:
            c = ck.Consumer(self.conf)
            c.list_topics(self.topic, timeout=30)
        except BaseException as exc:
            self.error = f"member {self.index}: {exc}"
            self.ready.set()
            return
        self.ready.set()
        try:
            while not self.go.wait(0.05):
                if self.stop.is_set():
                    return
            self.t_subscribe = time.monotonic()
            c.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost)
            while not self.stop.is_set():
                c.poll(0.02)
        except BaseException as exc:
            self.error = f"member {self.index}: {exc}"
        finally:
            c.close()

    def snapshot(self) -> tuple[frozenset[int] | None, float]:
        with self.lock:
            return self.current, self.assigned_at


def _group_state(admin, group: str) -> tuple[str | None, int | None, str | None]:
    """(state, member count, error) from DescribeGroups."""
    try:
        d = admin.describe_consumer_groups([group], request_timeout=5)[group].result(timeout=10)
        state = getattr(d.state, "name", str(d.state))
        return state, len(d.members or []), None
    except Exception as exc:
        return None, None, str(exc)[:200]


def run_rebalance(job: dict, barrier) -> dict:
    """A group growing 1 -> ``members`` consumers, one at a time, each a real confluent_kafka
    Consumer in its own thread (librdkafka does the protocol work in its own threads; Python only
    polls). For each step: the new member's ``subscribe()`` instant, and the instant the group
    had settled: every member holds a non-empty assignment, the assignments are disjoint and
    cover every partition (so all of them are of the new generation), and DescribeGroups says
    Stable (polled every 10 ms after the assignments are complete, if it did not say so at once)."""
    from confluent_kafka.admin import AdminClient

    topic, group, n, partitions = job["topic"], job["group"], job["members"], job["partitions"]
    logger, log_handler = _client_logger("group")
    client_errors, error_cb = _errors_collector()
    conf = {**_client_conf(job), "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", **job.get("consumer", {}), "error_cb": error_cb, "logger": logger}
    admin = AdminClient({**_client_conf(job), "logger": logger, "allow.auto.create.topics": False})
    admin.list_topics(topic, timeout=30)
    members = [_Member(i, {**conf, "client.id": f"bench-m{i}"}, topic) for i in range(n)]
    for m in members:
        m.thread.start()
    for m in members:
        m.ready.wait(30)
    steps: list[dict] = []
    errors = [m.error for m in members if m.error]
    barrier.wait(BARRIER_TIMEOUT)
    everything = frozenset(range(partitions))
    last_settled = float("inf")
    extra: list = []
    try:
        for k in range(n if not errors else 0):
            if k:
                # Let the group sit Stable first (right after a rebalance librdkafka's heartbeats
                # come at odd intervals), for a random while: in steady state librdkafka 2.16 sends
                # a member's Heartbeat only every ~0.5 s whatever heartbeat.interval.ms says
                # (below that), so a fixed pause would land at the same heartbeat phase each time.
                time.sleep(job["step_pause"] * (1 + random.random()))
            m = members[k]
            m.go.set()
            deadline = time.monotonic() + job["step_timeout"]
            settled_at = None
            while time.monotonic() < deadline:
                snaps = [x.snapshot() for x in members[:k + 1]]
                sets = [cur for cur, _ in snaps]
                if all(sets) and sum(len(x) for x in sets) == partitions and frozenset().union(*sets) == everything:
                    settled_at = max(at for _, at in snaps)
                    break
                time.sleep(0.002)
            t_sub = m.t_subscribe
            if settled_at is None:
                errors.append(f"step to {k + 1} member(s): no complete assignment within {job['step_timeout']:.0f}s")
                break
            state, count, derr = _group_state(admin, group)
            last_settled = settled_at
            stable_at = settled_at
            if derr is None and state != "STABLE":
                while time.monotonic() < deadline:
                    time.sleep(0.01)
                    state, count, derr = _group_state(admin, group)
                    if derr is not None or state == "STABLE":
                        stable_at = time.monotonic()
                        break
            # When did the last of the existing members learn of the rebalance (its revoke)? Before
            # that the wait is the clients' heartbeat cadence; after it, JoinGroup/SyncGroup work.
            noticed = [next((t for t, kind, _ in x.events if t >= t_sub and kind in ("revoke", "lost")), None)
                       for x in members[:k]]
            notice_at = max(noticed) if noticed and None not in noticed else None
            steps.append({"members": k + 1, "assigned_s": settled_at - t_sub, "seconds": stable_at - t_sub,
                          "notice_s": notice_at - t_sub if notice_at else None,
                          "rejoin_s": settled_at - notice_at if notice_at else None,
                          "state": state, "described_members": count, "describe_error": derr,
                          "assignment": [sorted(x.snapshot()[0] or ()) for x in members[:k + 1]]})
            if derr is None and state != "STABLE":
                errors.append(f"step to {k + 1} member(s): DescribeGroups says {state}, not Stable")
                break
        # A moment later: did any assignment move again? (Then the end instant was not final.)
        time.sleep(job.get("settle_check", 0.3))
        extra = [(x.index, e) for x in members for e in x.events if e[0] > last_settled]
    finally:
        for x in members:
            x.stop.set()
        for x in members:
            x.thread.join(30)
    errors += [x.error for x in members if x.error and x.error not in errors]
    return {"steps": steps, "errors": errors, "late_events": [f"member {i}: {e[1]} {e[2]}" for i, e in extra][:10],
            "events": {x.index: [(round(t - members[0].t_subscribe, 4), kind, parts) for t, kind, parts in x.events]
                       for x in members},
            "client_errors": client_errors, "client_log": log_handler.lines, "client_log_count": log_handler.count}


# ---------------------------------------------------------------------------- groups: commits

def run_commits(job: dict, barrier) -> dict:
    """Synchronous OffsetCommit round trips from one member of a group: join, wait (with the other
    members, at the barrier) until the group is complete, then ``commit(offsets, asynchronous=False)``
    of this member's partitions in a loop for ``duration`` seconds, an offset one higher each time."""
    import confluent_kafka as ck

    topic, share = job["topic"], job["share"]
    logger, log_handler = _client_logger("commit")
    client_errors, error_cb = _errors_collector()
    mine: list[int] = []
    c = ck.Consumer({**_client_conf(job), "group.id": job["group"],
                     "client.id": f"bench-oc{job['worker']}", "enable.auto.commit": False,
                     "auto.offset.reset": "earliest", **job.get("consumer", {}),
                     "error_cb": error_cb, "logger": logger})

    def on_assign(consumer, partitions) -> None:
        mine[:] = sorted(tp.partition for tp in partitions)

    def on_revoke(consumer, partitions) -> None:
        mine[:] = []

    c.list_topics(topic, timeout=30)
    c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    barrier.wait(BARRIER_TIMEOUT)  # every member has subscribed
    # With members x share partitions, a member holds exactly ``share`` only in the generation
    # that has every member (range assignor: with fewer members each gets more).
    deadline = time.monotonic() + job["join_timeout"]
    while len(mine) != share and time.monotonic() < deadline:
        c.poll(0.02)
    if len(mine) != share:
        c.close()
        raise RuntimeError(f"holds partitions {mine}, expected {share} of them, after {job['join_timeout']:.0f}s")
    barrier.wait(BARRIER_TIMEOUT)  # every member holds its share: the group is stable
    lats = array("d")
    errors: list[str] = []
    failed = 0
    offset = 0
    commit = c.commit
    t_start = time.monotonic()
    end = t_start + job["duration"]
    now = t_start
    while now < end:
        offset += 1
        offsets = [ck.TopicPartition(topic, p, offset) for p in mine]
        try:
            res = commit(offsets=offsets, asynchronous=False)
            bad = [tp for tp in res or [] if tp.error]
            if bad:
                failed += 1
                if len(errors) < 10:
                    errors.append(str(bad[0].error))
        except ck.KafkaException as exc:
            failed += 1
            if len(errors) < 10:
                errors.append(str(exc))
        t = time.monotonic()
        lats.append(t - now)
        now = t
        if offset % 200 == 0:
            c.poll(0)
    t_end = now
    held = list(mine)  # (close() revokes: ``mine`` empties)
    committed = c.committed([ck.TopicPartition(topic, p) for p in held], timeout=10)
    c.close()
    return {"commits": len(lats), "failed": failed, "t_start": t_start, "t_end": t_end,
            "partitions": held, "latencies": list(lats[::max(1, len(lats) // LATENCY_SAMPLE)]),
            "last_offset": offset, "committed": [tp.offset for tp in committed],
            "commit_errors": errors, "client_errors": client_errors, "client_log": log_handler.lines,
            "client_log_count": log_handler.count}


# ------------------------------------------------------------------ transactions: EndTxn probe

def run_endtxn(job: dict, barrier) -> dict:
    """EndTxn latency without load: ``count`` transactions of one record each. The record is
    flushed (so AddPartitionsToTxn and Produce are done) before ``commit_transaction()`` is timed,
    which leaves the EndTxn round trip: the coordinator's PrepareCommit, markers, CompleteCommit."""
    import confluent_kafka as ck

    topic = job["topic"]
    logger, log_handler = _client_logger("endtxn")
    client_errors, error_cb = _errors_collector()
    p = ck.Producer({**_client_conf(job), "client.id": f"bench-tx{job['worker']}",
                     "transactional.id": f"{topic}-probe-{job['worker']}", "linger.ms": 0,
                     "error_cb": error_cb, "logger": logger})
    p.list_topics(topic, timeout=30)
    p.init_transactions(30)
    payload = os.urandom(job["size"])
    barrier.wait(BARRIER_TIMEOUT)
    lats = array("d")
    t_start = time.monotonic()
    for i in range(job["warmup"] + job["count"]):
        p.begin_transaction()
        p.produce(topic, payload, partition=i % job["partitions"])
        p.flush(30)
        t0 = time.monotonic()
        p.commit_transaction(30)
        if i >= job["warmup"]:
            lats.append(time.monotonic() - t0)
    t_end = time.monotonic()
    return {"latencies": list(lats), "t_start": t_start, "t_end": t_end, "client_errors": client_errors,
            "client_log": log_handler.lines, "client_log_count": log_handler.count}


# ---------------------------------------------------------------------------------------- pool

def run_java_produce(job: dict, barrier) -> dict:
    from .kafka import run_java_produce as run

    return run(job, barrier)


def run_java_consume(job: dict, barrier) -> dict:
    from .kafka import run_java_consume as run

    return run(job, barrier)


JOBS = {"produce": run_produce, "wire-produce": run_wire_produce, "wire-consume": run_wire_consume,
        "consume": run_consume, "rebalance": run_rebalance, "commits": run_commits,
        "endtxn": run_endtxn, "java-produce": run_java_produce, "java-consume": run_java_consume}


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
