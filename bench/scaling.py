"""Prototype measurements for a broker that uses every core (docs/multicore.md).

``python -m bench.scaling`` runs both parts (~4 minutes, each under 3); ``--part a`` or ``--part b`` one.

**(A) A process per core, the ceiling of a cluster of nodes.** N independent ``oncelog serve``
processes (``--fsync never``), each its own data directory, each the leader of the topics its
producers write: what a cluster of N nodes without any inter-node traffic would do — no
WriteTxnMarkers, no producer-id blocks from a controller, no metadata log to tail. The load is
the protocol-level idempotent producer (bench/wireload.py, the ``wire-idempotent`` mode:
pre-encoded 960-record batches of 1 KiB, 5 requests in flight, acks=all), a fixed number of
client processes (``--clients``, default 2), each with its own topic of ``--partitions``
partitions on broker ``i % N``. The brokers are pinned with ``sched_setaffinity`` on every
thread (what ``taskset -a -p`` does); the cells:

* ``all on core 0: 1 broker`` — a one-core machine: the broker and the clients on core 0;
* ``all on 0+1: 2 brokers 0|1`` — a two-core machine as a cluster: a broker pinned to each core,
  the clients unpinned (on both). Against the first: the issue's "2 cores / 1 core" ratio;
* ``1 broker core 0, cl. core 1`` — one broker with a core to itself, the clients on the other;
* ``2 brokers core 0, cl. 1`` — the cluster shape on that one broker core: the cost of the split;
* ``1 broker + clients unpinned`` — today's broker on the whole machine.

On this two-core machine the clients share the cores with the brokers (there is no third core
for them), so every cell reports the clients' CPU beside the brokers'; ``--client-cpus`` pins the
clients to given cores in every cell instead. Figures: records/s (pooled over ``--rounds`` rounds; the cells
interleaved, their order rotated each round), the brokers' CPU (utime+stime from /proc, in cores
and µs per record), the clients' CPU.

**(A2) The same without sockets or clients**: N child processes, each an in-process broker (as
bench/produce_path.py) appending the same plain 960 x 1 KiB batch through ``Broker.handle_frame``
to its own partition as fast as it can — decode, validate, append, answer: the broker's own
work per record, with the cores to itself. 1 process on core 0, 2 on core 0, 2 on cores 0 and
1: what N nodes on N cores give when the clients take nothing; with 1 MB requests, with the
same requests but the file writes replaced by no-ops (the kernel's page-cache writes taken out),
and with 16 KiB requests. Beside it, the machine itself: a pure-Python loop and 64 MiB memory
copies, one process on core 0 against one on each core.

**(B) One process, more threads.**

* B1, in process (no sockets, as bench/produce_path.py): µs per Produce request through
  ``Broker.handle_frame`` for one partition, next to the parts that release the GIL — the
  batch's CRC-32C (the crc32c package releases it above 32 KiB) and the ``pwritev`` of its
  bytes — and one that holds it, the record walk (``check_records``). Then each part run by
  1 and by 2 threads at once (disjoint partitions, disjoint files): the speed-up a second
  thread buys for it under the GIL.
* B2, end to end: the broker as it is against the prototype of bench/threaded_append.py (each
  partition's append on one of 2 threads), unpinned, with the (A) load.
* B3 (``--pyspy``): where the broker thread's time goes under the (A) load, by py-spy: the
  share of samples holding the GIL (``--gil``) against all samples (``--idle``), and the
  GIL-free samples by their native leaf (pwritev, epoll, sends, crc32c).

Nothing here is production code; the prototype of B2 is bench/threaded_append.py.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

from oncelog.process import BrokerProcess

_CLK_TCK = os.sysconf("SC_CLK_TCK")
WIRE_IDEMPOTENT = {"acks": -1, "max_in_flight": 5, "idempotent": True}


# ---------------------------------------------------------------------- processes and CPUs


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (every thread), from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def pin(pid: int, cpus: set[int]) -> None:
    """Every thread of ``pid`` onto ``cpus`` (``taskset -a -p``); threads made later inherit it."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(ProcessLookupError):
            os.sched_setaffinity(int(tid), cpus)


def parse_cpus(text: str | None) -> set[int] | None:
    """``0``, ``0,1``, ``0-3`` -> a set of CPUs; None / "" -> None (unpinned)."""
    if not text:
        return None
    cpus: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


class Broker(BrokerProcess):
    """One ``oncelog serve --fsync never`` child (or the threaded prototype's), on a free port,
    with the admin calls the cells need."""

    def __init__(self, work_dir: str, name: str, *, partitions: int, module: list[str] | None = None) -> None:
        super().__init__(os.path.join(work_dir, name), fsync="never",
                         extra_args=["--num-partitions", str(partitions)],
                         module=tuple(module or ("-m", "oncelog")))
        self.name = name
        self.partitions = partitions
        self._admin = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def admin(self):
        import logging

        from confluent_kafka.admin import AdminClient

        if self._admin is None:
            quiet = logging.getLogger("bench.scaling.admin")
            quiet.addHandler(logging.NullHandler())
            quiet.propagate = False
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap, "logger": quiet,
                                       "allow.auto.create.topics": False})
        return self._admin

    def create_topic(self, name: str) -> None:
        from confluent_kafka.admin import NewTopic

        self.admin().create_topics([NewTopic(name, self.partitions, 1)], operation_timeout=30)[name].result(30)

    def delete_topics(self, names: list[str]) -> None:
        if names:
            for fut in self.admin().delete_topics(names, operation_timeout=30).values():
                with contextlib.suppress(Exception):
                    fut.result(30)

    def stop(self, timeout: float = 30.0) -> int:
        self._admin = None
        return super().stop(timeout)


# ---------------------------------------------------------------------- (A) and (B2): load cells


@dataclass
class Cell:
    name: str
    brokers: list[str]  # names of the brokers it loads (client i -> brokers[i % len])
    cpus: list[set[int] | None]  # their CPUs, in the same order (None: every CPU)
    client_cpus: set[int] | None = None  # the clients' CPUs (None: every CPU, or --client-cpus)
    runs: list[dict] = field(default_factory=list)

    def pooled(self) -> dict:
        records = sum(r["records"] for r in self.runs)
        seconds = sum(r["seconds"] for r in self.runs)
        broker_cpu = sum(r["broker_cpu"] for r in self.runs)
        client_cpu = sum(r["client_cpu"] for r in self.runs)
        return {"records_per_s": records / seconds, "broker_cores": broker_cpu / seconds,
                "broker_us_per_record": broker_cpu * 1e6 / records, "client_cores": client_cpu / seconds,
                "client_us_per_record": client_cpu * 1e6 / records,
                "by_round": [r["records"] / r["seconds"] for r in self.runs]}


def run_cell(cell: Cell, brokers: dict[str, Broker], pool, clients: int, duration: float, tag: str,
             all_cpus: set[int], *, delete: bool = True) -> dict:
    """One interleaved run of a cell: pin its brokers and clients, one fresh topic per client,
    go; the topics are deleted afterwards (disk) unless ``delete`` is false."""
    for name, cpus in zip(cell.brokers, cell.cpus):
        pin(brokers[name].pid, cpus or all_cpus)
    for proc in pool.procs:
        pin(proc.pid, cell.client_cpus or pool.client_cpus or all_cpus)
    jobs, topics = [], {}
    for i in range(clients):
        broker = brokers[cell.brokers[i % len(cell.brokers)]]
        topic = f"scale-{tag}-c{i}"
        broker.create_topic(topic)
        topics.setdefault(broker.name, []).append(topic)
        jobs.append({"kind": "wire-produce", "topic": topic, "bootstrap": broker.bootstrap, "wire": WIRE_IDEMPOTENT,
                     "txn_commit_ms": None, "batch_records": 960, "size": 1024, "duration": duration,
                     "security": None})
    used = [brokers[n] for n in dict.fromkeys(cell.brokers)]
    b0 = [cpu_seconds(b.pid) for b in used]
    c0 = [cpu_seconds(p.pid) for p in pool.procs[:clients]]
    results = pool.run(jobs, timeout=duration + 120)
    b1 = [cpu_seconds(b.pid) for b in used]
    c1 = [cpu_seconds(p.pid) for p in pool.procs[:clients]]
    for name, names in topics.items():
        if delete:
            brokers[name].delete_topics(names)
    errors = [err for err, _ in results if err]
    if errors:
        raise RuntimeError(f"{cell.name}: {errors[0]}")
    outs = [res for _, res in results]
    seconds = max(o["t_end"] for o in outs) - min(o["t_start"] for o in outs)
    run = {"records": sum(o["acked"] for o in outs), "seconds": seconds, "topics": topics,
           "broker_cpu": sum(b1) - sum(b0), "client_cpu": sum(c1) - sum(c0),
           "per_broker_cpu": [y - x for x, y in zip(b0, b1)]}
    cell.runs.append(run)
    return run


def run_cells(cells: list[Cell], brokers: dict[str, Broker], *, clients: int, duration: float, rounds: int,
              client_cpus: set[int] | None, label: str) -> None:
    from .workers import WorkerPool

    all_cpus = os.sched_getaffinity(0)
    pool = WorkerPool(clients).start()
    pool.client_cpus = client_cpus
    try:
        # warm-up: each broker once (imports, first segment files, the clients' first connections)
        for name in brokers:
            run_cell(Cell("warm-up", [name], [None]), brokers, pool, clients, min(1.0, duration), f"{label}w-{name}",
                     all_cpus)
        for r in range(rounds):
            order = cells[r % len(cells):] + cells[:r % len(cells)]
            for cell in order:
                run = run_cell(cell, brokers, pool, clients, duration, f"{label}{r}-{cells.index(cell)}", all_cpus)
                print(f"  round {r + 1} {cell.name:<28} {run['records'] / run['seconds']:>12,.0f} rec/s  "
                      f"brokers {run['broker_cpu'] / run['seconds']:.2f} cores  "
                      f"clients {run['client_cpu'] / run['seconds']:.2f} cores", flush=True)
    finally:
        pool.close()


def print_cells(cells: list[Cell], base: Cell) -> None:
    print(f"{'cell':<28}{'records/s':>12}{'/ base':>8}{'by round':>22}{'broker cores':>14}"
          f"{'µs/rec':>8}{'client cores':>14}{'µs/rec':>8}")
    b = base.pooled()["records_per_s"]
    for cell in cells:
        p = cell.pooled()
        rounds = " ".join(f"{x / 1000:.0f}k" for x in p["by_round"])
        print(f"{cell.name:<28}{p['records_per_s']:>12,.0f}{p['records_per_s'] / b:>8.2f}{rounds:>22}"
              f"{p['broker_cores']:>14.2f}{p['broker_us_per_record']:>8.2f}{p['client_cores']:>14.2f}"
              f"{p['client_us_per_record']:>8.2f}")


def part_a(work_dir: str, args) -> dict:
    print(f"(A) a process per core: {args.clients} wire-idempotent client processes (clients on "
          f"{_cpus_text(args.client_cpus)}), {args.partitions} partitions per client topic, "
          f"{args.duration:g} s cells, {args.rounds} rounds", flush=True)
    brokers = {n: Broker(work_dir, n, partitions=args.partitions).start() for n in ("node-1", "node-2")}
    try:
        one_core = args.client_cpus is None  # the clients follow the cell unless --client-cpus pins them
        cells = [Cell("all on core 0: 1 broker", ["node-1"], [{0}], {0} if one_core else None),
                 Cell("all on 0+1: 2 brokers 0|1", ["node-1", "node-2"], [{0}, {1}]),
                 Cell("1 broker core 0, cl. core 1", ["node-1"], [{0}], {1} if one_core else None),
                 Cell("2 brokers core 0, cl. 1", ["node-1", "node-2"], [{0}, {0}], {1} if one_core else None),
                 Cell("1 broker + clients unpinned", ["node-1"], [None])]
        run_cells(cells, brokers, clients=args.clients, duration=args.duration, rounds=args.rounds,
                  client_cpus=args.client_cpus, label="a")
    finally:
        for b in brokers.values():
            b.stop()
    print_cells(cells, cells[0])
    rate = {c.name: c.pooled()["records_per_s"] for c in cells}
    one, two, broker_core, split, today = (rate[c.name] for c in cells)
    by_round = " ".join(f"{t / o:.2f}" for t, o in zip(cells[1].pooled()["by_round"], cells[0].pooled()["by_round"]))
    print(f"2 cores / 1 core, brokers and clients on them (the issue's target >= 1.7x): {two / one:.2f}x "
          f"(by round {by_round})")
    print(f"2 brokers on 0|1 / 1 broker unpinned (today on this machine): {two / today:.2f}x;  "
          f"2 brokers on 0|1 / 1 broker with core 0 to itself: {two / broker_core:.2f}x")
    print(f"the split itself, on one broker core (2 brokers / 1 broker, core 0, clients on core 1): {split / broker_core:.2f}x")
    return {c.name: {**c.pooled(), "runs": c.runs} for c in cells}


def _produce_loop(cpus: set[int], data_dir: str, seconds: float, records_per_batch: int, barrier, results,
                  write: bool = True) -> None:
    """(A2), in a child process pinned to ``cpus``: an in-process broker appending one plain batch
    per Produce request (the same frame again and again) to its own partition for ``seconds``.
    ``write=False`` replaces the segment's pwritev/pwrite by no-ops in this child: the same work
    without the kernel's page-cache writes."""
    os.sched_setaffinity(0, cpus)
    if not write:
        os.pwritev = lambda fd, buffers, offset: sum(map(len, buffers))
        os.pwrite = lambda fd, data, offset: len(data)
    from oncelog.broker import Broker as InProcessBroker
    from oncelog.client.wire import produce_request
    from oncelog.config.settings import BrokerConfig, FsyncPolicy
    from oncelog.protocol import records as rb

    import asyncio

    async def run() -> dict:
        b = InProcessBroker(BrokerConfig(data_dir=data_dir, fsync=FsyncPolicy("never")))
        b.open()
        b.metadata.topics.create_topic("loop", 1)
        value = os.urandom(512) + bytes(512)
        frame = _frame(produce_request("loop", 0, rb.build_batch([(b"k", value)] * records_per_batch), acks=1), 1)
        for _ in range(20):  # warm-up
            b.handle_frame(frame, "bench")
        barrier.wait()
        cpu0, t0 = time.process_time(), time.monotonic()
        n, deadline = 0, t0 + seconds
        while time.monotonic() < deadline:
            b.handle_frame(frame, "bench")
            n += 1
            if n % 32 == 0:
                await asyncio.sleep(0)  # the flusher's work at a segment roll runs on the loop
        t1, cpu1 = time.monotonic(), time.process_time()
        appended = b.partitions.get("loop", 0).log.log_end_offset
        return {"records": n * records_per_batch, "seconds": t1 - t0, "cpu": cpu1 - cpu0,
                "appended": appended == (n + 20) * records_per_batch}

    results.put(asyncio.run(run()))


def _probe(cpu: int, kind: str, seconds: float, results) -> None:
    """(A2) the machine: a pure-Python loop, or copies of 64 MiB, on ``cpu``; rate per second."""
    os.sched_setaffinity(0, {cpu})
    n, t = 0, time.monotonic()
    end = t + seconds
    if kind == "python":
        while time.monotonic() < end:
            for _ in range(10000):
                pass
            n += 1
    else:
        src, dst = bytearray(64 << 20), bytearray(64 << 20)
        while time.monotonic() < end:
            dst[:] = src
            n += 1
    results.put(n / (time.monotonic() - t))


def machine_probe(seconds: float = 2.0) -> dict:
    """How the two cores scale by themselves: Python code (no memory traffic) and memory copies,
    one process on core 0 against one on each of cores 0 and 1. The ratio of copies is the
    memory bandwidth's share of the story."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    out = {}
    for kind in ("python", "memcpy"):
        rates = []
        for cpus in ([0], [0, 1]):
            q = ctx.Queue()
            procs = [ctx.Process(target=_probe, args=(c, kind, seconds, q)) for c in cpus]
            for proc in procs:
                proc.start()
            rates.append(sum(q.get(timeout=seconds + 60) for _ in procs))
            for proc in procs:
                proc.join(30)
        out[kind] = {"one": rates[0], "two": rates[1], "ratio": rates[1] / rates[0]}
    gbs = [out["memcpy"][k] * 64 / 1024 for k in ("one", "two")]
    print(f"the machine: a Python loop 1 -> 2 cores {out['python']['ratio']:.2f}x; copies of 64 MiB "
          f"{out['memcpy']['ratio']:.2f}x ({gbs[0]:.1f} GB/s copied by one core, {gbs[1]:.1f} GB/s by two)")
    return out


def part_a2(work_dir: str, args, records_per_batch: int = 960, probe: bool = True, write: bool = True) -> dict:
    """(A2): the broker's own Produce path in N processes, no sockets and no clients (see the
    module docstring): what N nodes on N cores give when nothing else needs the cores."""
    import multiprocessing as mp

    print(f"\n(A2) in process, no sockets, no clients: N processes each appending {records_per_batch} x 1 KiB "
          f"plain batches through Broker.handle_frame to its own partition, {args.duration:g} s, {args.rounds} rounds"
          + ("" if write else "; the file writes replaced by no-ops"), flush=True)
    probe = machine_probe() if probe else None
    ctx = mp.get_context("spawn")
    cells = {"1 process, core 0": [{0}], "2 processes, core 0": [{0}, {0}], "2 processes, cores 0|1": [{0}, {1}]}
    runs: dict[str, list[dict]] = {name: [] for name in cells}
    for r in range(args.rounds):
        names = list(cells)
        for name in names[r % len(names):] + names[:r % len(names)]:
            barrier, results = ctx.Barrier(len(cells[name])), ctx.Queue()
            procs = []
            for k, cpus in enumerate(cells[name]):
                d = os.path.join(work_dir, f"a2-{r}-{k}-{len(runs[name])}")
                procs.append(ctx.Process(target=_produce_loop, args=(cpus, d, args.duration, records_per_batch,
                                                                      barrier, results, write)))
            for proc in procs:
                proc.start()
            outs = [results.get(timeout=args.duration + 120) for _ in procs]
            for proc in procs:
                proc.join(30)
            if not all(o["appended"] for o in outs):
                raise RuntimeError(f"(A2) {name}: not every request was appended")
            for k in range(len(procs)):
                shutil.rmtree(os.path.join(work_dir, f"a2-{r}-{k}-{len(runs[name])}"), ignore_errors=True)
            runs[name].append({"records": sum(o["records"] for o in outs),
                               "seconds": max(o["seconds"] for o in outs), "cpu": sum(o["cpu"] for o in outs)})
    base = None
    print(f"{'cell':<28}{'records/s':>12}{'/ base':>8}{'by round':>22}{'cores':>8}{'µs/rec':>8}")
    out = {}
    for name, rs in runs.items():
        records, seconds, cpu = (sum(x[k] for x in rs) for k in ("records", "seconds", "cpu"))
        rate = records / seconds
        base = base or rate
        by_round = " ".join(f"{x['records'] / x['seconds'] / 1000:.0f}k" for x in rs)
        print(f"{name:<28}{rate:>12,.0f}{rate / base:>8.2f}{by_round:>22}{cpu / seconds:>8.2f}{cpu * 1e6 / records:>8.2f}")
        out[name] = {"records_per_s": rate, "cores": cpu / seconds, "us_per_record": cpu * 1e6 / records, "runs": rs}
    two, one = out["2 processes, cores 0|1"]["records_per_s"], out["1 process, core 0"]["records_per_s"]
    print(f"2 processes on 2 cores / 1 on 1 core, nothing else running: {two / one:.2f}x")
    if probe:
        out["machine"] = probe
    return out


def part_b2(work_dir: str, args) -> dict:
    print(f"\n(B2) one process, more threads, end to end: the broker as it is vs bench/threaded_append.py "
          f"(appends on 2 threads), same load as (A)", flush=True)
    brokers = {"stock": Broker(work_dir, "stock", partitions=args.partitions).start(),
               "threaded": Broker(work_dir, "threaded", partitions=args.partitions,
                                  module=["-m", "bench.threaded_append", "--threads", "2", "--"]).start()}
    try:
        cells = [Cell("stock, core 0", ["stock"], [{0}]),
                 Cell("stock, unpinned", ["stock"], [None]),
                 Cell("threaded, core 0", ["threaded"], [{0}]),
                 Cell("threaded, unpinned", ["threaded"], [None])]
        run_cells(cells, brokers, clients=args.clients, duration=args.duration, rounds=args.rounds,
                  client_cpus=args.client_cpus, label="b")
    finally:
        for b in brokers.values():
            b.stop()
    print_cells(cells, cells[0])
    s, t = cells[1].pooled()["records_per_s"], cells[3].pooled()["records_per_s"]
    print(f"threaded / stock, unpinned: {t / s:.2f}x;  threaded unpinned / stock on core 0: "
          f"{t / cells[0].pooled()['records_per_s']:.2f}x")
    return {c.name: {**c.pooled(), "runs": c.runs} for c in cells}


def _cpus_text(cpus: set[int] | None) -> str:
    return "every core (unpinned)" if not cpus else "core(s) " + ",".join(map(str, sorted(cpus)))


# ---------------------------------------------------------------------- (B1): in process


def _frame(request, correlation_id: int) -> bytes:
    from oncelog.client.wire import write_request

    buf = io.BytesIO()
    write_request(buf, request, correlation_id, "bench")
    return buf.getvalue()


def _time_threads(fn, threads: int, reps: int) -> float:
    """Wall seconds for ``threads`` threads each calling ``fn(thread_index, i)`` for i < reps."""
    barrier = threading.Barrier(threads + 1)

    def body(k: int) -> None:
        barrier.wait()
        for i in range(reps):
            fn(k, i)

    workers = [threading.Thread(target=body, args=(k,)) for k in range(threads)]
    for w in workers:
        w.start()
    barrier.wait()
    t = time.perf_counter()
    for w in workers:
        w.join()
    return time.perf_counter() - t


def part_b1(work_dir: str, args, records_per_batch: int = 960, value_size: int = 1024) -> dict:
    """See the module docstring. Returns µs per request (1 thread) and the 2-thread speed-ups."""
    from oncelog.broker import Broker as InProcessBroker
    from oncelog.client.wire import produce_request
    from oncelog.config.settings import BrokerConfig, FsyncPolicy
    from oncelog.protocol import codec, records as rb

    print(f"\n(B1) in process: one Produce request of {records_per_batch} x {value_size} B (one idempotent batch, "
          f"one partition), --fsync never; best of {args.b1_loops} loops", flush=True)
    data_dir = tempfile.mkdtemp(dir=work_dir, prefix="inproc-")
    b = InProcessBroker(BrokerConfig(data_dir=data_dir, fsync=FsyncPolicy("never")))
    b.open()
    reps = max(10, 10000 // records_per_batch)
    value = os.urandom(value_size // 2) + bytes(value_size - value_size // 2)
    streams = []  # per thread: its topic and its frames (thread 0 runs in the 1- and the 2-thread loops)
    for k in range(2):
        topic = f"inproc-{records_per_batch}-{k}"
        b.metadata.topics.create_topic(topic, 1)
        pid = b.metadata.producer_ids.allocate()
        frames = [_frame(produce_request(topic, 0, rb.build_batch(
                      [(b"k", value)] * records_per_batch, producer_id=pid, producer_epoch=0,
                      base_sequence=i * records_per_batch), acks=1), i)
                  for i in range(reps * (args.b1_loops * (2 - k) + 1))]
        streams.append({"topic": topic, "frames": frames, "next": 0})
    batch = rb.build_batch([(b"k", value)] * records_per_batch, producer_id=1, producer_epoch=0, base_sequence=0)
    header = rb.scan_batches(batch)[0]
    limit = rb.decompressed_limit()
    view = memoryview(batch)
    files = [os.open(os.path.join(data_dir, f"write-{k}"), os.O_RDWR | os.O_CREAT) for k in range(2)]
    offsets = [0, 0]

    def handle(k: int, i: int) -> None:
        s = streams[k]
        out = b.handle_frame(s["frames"][s["next"]], "bench")
        s["next"] += 1
        if not isinstance(out, (list, bytes, bytearray, memoryview)):
            raise RuntimeError(f"the in-process Produce did not answer at once: {out!r}")

    def crc(k: int, i: int) -> None:
        rb.crc32c(view[21:])

    def write(k: int, i: int) -> None:
        if offsets[k] > 256 << 20:  # keep the files small: start again at 0 (still page-cache writes)
            os.ftruncate(files[k], 0)
            offsets[k] = 0
        offsets[k] += os.pwritev(files[k], [b"\0" * 8, view[8:]], offsets[k])

    def walk(k: int, i: int) -> None:
        rb.check_records(batch, header, limit=limit)

    first = streams[0]["frames"][0]
    version = codec.peek_header(first)[1]

    def decode(k: int, i: int) -> None:
        codec.decode_request(first, 0, version)

    parts = {"whole request (handle_frame)": handle, "  CRC-32C of the batch": crc,
             "  pwritev of the batch": write, "  record walk (check_records)": walk,
             "  request decode": decode}
    one: dict[str, float] = {}
    two: dict[str, float] = {}
    try:
        for name, fn in parts.items():
            _time_threads(fn, 1, reps)  # warm-up (first page faults, first segment writes)
            one[name] = min(_time_threads(fn, 1, reps) for _ in range(args.b1_loops)) / reps
            two[name] = min(_time_threads(fn, 2, reps) for _ in range(args.b1_loops)) / (2 * reps)
    finally:
        for fd in files:
            os.close(fd)
    for s in streams:  # every measured request appended (an error answer would be a faster path)
        if b.partitions.get(s["topic"], 0).log.log_end_offset != s["next"] * records_per_batch:
            raise RuntimeError(f"{s['topic']}: not every measured request was appended")
    total = one["whole request (handle_frame)"]
    print(f"{'part':<32}{'µs, 1 thread':>14}{'share':>8}{'µs/req, 2 threads':>20}{'speed-up':>10}")
    for name in parts:
        print(f"{name:<32}{one[name] * 1e6:>14.1f}{one[name] / total:>8.0%}{two[name] * 1e6:>20.1f}"
              f"{one[name] / two[name]:>10.2f}")
    released = one["  CRC-32C of the batch"] + one["  pwritev of the batch"]
    print(f"GIL released (CRC + pwritev) / whole request: {released / total:.0%}  -> Amdahl bound for "
          f"threads with the rest under one GIL: {1 / (1 - min(released / total, 0.5)):.2f}x")
    return {"us_one_thread": {k.strip(): v * 1e6 for k, v in one.items()},
            "us_two_threads": {k.strip(): v * 1e6 for k, v in two.items()},
            "gil_released_share": released / total}


# ---------------------------------------------------------------------- (B3): py-spy


def part_b3(work_dir: str, args) -> dict:
    """py-spy on a loaded, unpinned broker: GIL-holding samples against all samples."""
    pyspy = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
    print(f"\n(B3) py-spy on the broker under the (A) load ({args.clients} clients, unpinned), "
          f"{args.pyspy_seconds:g} s per recording at 100 Hz", flush=True)
    broker = Broker(work_dir, "profiled", partitions=args.partitions).start()
    from .workers import WorkerPool

    pool = WorkerPool(args.clients).start()
    pool.client_cpus = args.client_cpus
    try:
        cell = Cell("profiled", ["profiled"], [None])
        loader = threading.Thread(target=run_cell, args=(cell, {"profiled": broker}, pool, args.clients,
                                                          2 * args.pyspy_seconds + 4, "p", os.sched_getaffinity(0)))
        loader.start()
        time.sleep(2)
        counts = {}
        for flag in ("--idle", "--gil"):
            path = os.path.join(work_dir, f"pyspy{flag}.txt")
            extra = ["--idle", "--native"] if flag == "--idle" else ["--idle", "--gil"]
            proc = subprocess.run([pyspy, "record", "-p", str(broker.pid), "-r", "100", "-d", str(int(args.pyspy_seconds)),
                            "-f", "raw", "-o", path, "--threads", *extra], capture_output=True, text=True)
            if not os.path.exists(path):
                raise RuntimeError(f"py-spy failed: {proc.stderr.strip()[-500:]}")
            counts[flag] = _raw_counts(path, broker.pid)
        loader.join()
    finally:
        pool.close()
        broker.stop()
    total = sum(counts["--idle"].values())
    gil = sum(counts["--gil"].values())
    leaves: dict[tuple[str, bool], int] = {}
    for stack, n in counts["--idle"].items():
        key = _classify(stack)
        leaves[key] = leaves.get(key, 0) + n
    released = sum(n for (_, free), n in leaves.items() if free)
    print(f"main thread, recording 1 (--idle --native): {total} samples; GIL released (by the leaf) "
          f"{released / max(total, 1):.0%}, of which waiting in epoll "
          f"{leaves.get(('waiting (epoll)', True), 0) / max(total, 1):.0%}")
    print(f"main thread, recording 2 (--idle --gil): {gil} samples holding the GIL, against {total} of recording 1: "
          f"{gil / max(total, 1):.0%} of the thread's time")
    for (name, free), n in sorted(leaves.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<40}{'released' if free else 'held':>10}{n / max(total, 1):>6.0%}")
    return {"samples": total, "gil_samples": gil, "gil_share": gil / max(total, 1),
            "released_share": released / max(total, 1),
            "by_leaf": {name: v / max(total, 1) for (name, _), v in leaves.items()}}


def _raw_counts(path: str, pid: int) -> dict[str, int]:
    """py-spy's raw (collapsed) stacks of the main thread (thread id == pid): stack -> samples."""
    counts: dict[str, int] = {}
    with open(path) as f:
        for line in f:
            stack, _, n = line.rstrip("\n").rpartition(" ")
            if not stack or not n.isdigit():
                continue
            first = stack.split(";", 1)[0]
            m = re.search(r"0x[0-9a-f]+|\b(\d+)\b", first)
            if m and m.group(1) and int(m.group(1)) != pid:
                continue
            counts[stack] = counts.get(stack, 0) + int(n)
    return counts


# (name, GIL released?, keys of the innermost frame) — native leaves first, then the Python
# frame nearest the leaf that names the work; the first match wins.
_NATIVE = [("waiting (epoll)", True, r"epoll_p?wait"),
           ("socket read (kernel copy)", True, r"(__libc_)?read|recv\w*"),
           ("socket write (writev)", True, r"(__)?writev|sendmsg|send"),
           ("file write (pwritev / pwrite)", True, r"pwrite\w*"),
           ("CRC-32C (C, GIL released)", True, r"\w*crc32c\w*")]
_PYTHON = [("record walk (numpy, GIL held)", ("_walk_bulk", "check_records", "walk_records")),
           ("request decode (copy of the records)", ("decode_request",)),
           ("frame buffer (allocation, fill)", ("BufferedFrameReader",)),
           ("producer state", ("ProducerStateManager",)),
           ("response encode", ("encode_response", "_response", "write_entity")),
           ("partition append (Python)", ("Partition.append", "PartitionLog", "Segment")),
           ("server (dispatch, answers)", ("KafkaConnection", "server.py"))]


def _classify(stack: str) -> tuple[str, bool]:
    """(what, GIL released) of one sampled stack (see _NATIVE / _PYTHON)."""
    frames = [re.sub(r" \(.*", "", f) for f in stack.split(";")]
    for name, released, pattern in _NATIVE:  # the leaf, or its caller (a C library's helper)
        if any(re.fullmatch(pattern, f) for f in frames[-2:]):
            return name, released
    for frame in reversed(frames):
        for name, keys in _PYTHON:
            if any(k in frame for k in keys):
                return name, False
    return "other", False


# ---------------------------------------------------------------------- command line


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.scaling", description=__doc__.split("\n\n")[0])
    p.add_argument("--part", default="ab", help="a, b or ab (default): which prototypes to measure")
    p.add_argument("--clients", type=int, default=2, help="client processes (wire-idempotent producers)")
    p.add_argument("--client-cpus", type=parse_cpus, default=None, help="pin the clients, e.g. 1 or 0-1")
    p.add_argument("--partitions", type=int, default=3, help="partitions of each client's topic")
    p.add_argument("--duration", type=float, default=3.0, help="seconds per cell")
    p.add_argument("--rounds", type=int, default=3, help="rounds (cells interleaved, order rotated)")
    p.add_argument("--b1-loops", type=int, default=5, help="(B1) loops per part; the best is kept")
    p.add_argument("--pyspy", action="store_true", help="(B3) profile a loaded broker with py-spy")
    p.add_argument("--pyspy-seconds", type=float, default=5.0, help="(B3) seconds per recording")
    p.add_argument("--work-dir", default=None,
                   help="where the brokers' data directories go (default: a temporary directory; /dev/shm takes "
                        "the disk's writeback out of the figures)")
    p.add_argument("--json", help="write every figure to this file")
    p.add_argument("--quick", action="store_true", help="1 s cells, 1 round, 2 loops: does it work")
    return p


def main(argv: list[str] | None = None) -> dict:
    args = build_parser().parse_args(argv)
    if args.quick:
        args.duration, args.rounds, args.b1_loops, args.pyspy_seconds = 1.0, 1, 2, 2.0
    load = os.getloadavg()
    print(f"bench.scaling: {os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, "
          f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, data under {args.work_dir or tempfile.gettempdir()}",
          flush=True)
    results: dict = {"cpus": os.cpu_count(), "load_at_start": load, "options": vars(args) | {
        "client_cpus": sorted(args.client_cpus) if args.client_cpus else None}}
    t0 = time.monotonic()
    work_dir = tempfile.mkdtemp(prefix="oncelog-scaling-", dir=args.work_dir)
    try:
        if "a" in args.part:
            results["a"] = part_a(work_dir, args)
            results["a2"] = {"960 x 1 KiB": part_a2(work_dir, args, 960),
                             "960 x 1 KiB, no file writes": part_a2(work_dir, args, 960, probe=False, write=False),
                             "16 x 1 KiB": part_a2(work_dir, args, 16, probe=False)}
        if "b" in args.part:
            results["b1"] = {f"{n} x 1 KiB": part_b1(work_dir, args, n) for n in (960, 16)}
            results["b2"] = part_b2(work_dir, args)
            if args.pyspy:
                results["b3"] = part_b3(work_dir, args)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    results["load_at_end"] = os.getloadavg()
    results["seconds"] = time.monotonic() - t0
    print(f"done in {results['seconds']:.0f} s; load average at the end {results['load_at_end'][0]:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, default=str)
    return results


if __name__ == "__main__":
    main()
