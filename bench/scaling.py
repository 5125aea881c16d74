"""Prototype measurements for a broker that uses every core (docs/multicore.md).

``python -m bench.scaling`` runs both parts (~4 minutes, each under 3); ``--part a`` or ``--part b`` one;
``--part cluster`` the cluster of ``oncelog serve --nodes 2`` against one node (C, ~1.5 minutes).

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

**(C) The cluster itself** (``--part cluster``, not in the default run): the real ``oncelog serve
--nodes 1`` against ``--nodes 2`` (its supervisor pins node k to core k-1), ``--fsync never``, end
to end, with the same load: ``--clients`` wire-idempotent processes (bench/wireload.py, which
routes by Metadata: a connection per leader node, each with its own window of 5 requests) and
``--rdkafka-clients`` confluent-kafka processes (enable.idempotence, acks=all, 1 KiB records),
each client its own topic of max(``--partitions``, 4) partitions, so both nodes lead some of every
topic. Cells: ``1 node, core 0`` (every thread of the broker pinned: the broker with 1 core),
``2 nodes, cores 0|1`` (a node per core: the broker with 2 cores; their ratio is the issue's
"2 cores / 1 core >= 1.7x"), ``1 node, unpinned`` (today's broker on this machine), and for the
wire load ``2 nodes, both core 0`` (the split on one core). The clients are unpinned unless
``--client-cpus``; the tables say where they ran. Figures: records/s pooled over the rounds, the
node processes' CPU (utime+stime from /proc, summed over the nodes, each shown), the clients',
and the rest of the machine's busy CPU meanwhile (``others``, /proc/stat: on a shared machine,
what other processes took). After every cell each partition's log end offset, asked of its
leader, must equal what the clients counted acknowledged, both nodes must have led partitions,
and no node may have been restarted by the supervisor; otherwise the run stops with the cause.

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


def machine_cpu() -> tuple[float, float]:
    """(busy, steal) CPU seconds of the whole machine since boot, from /proc/stat: busy is user,
    nice, system, irq and softirq of every CPU; steal is time the hypervisor gave to others."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return (user + nice + system + irq + softirq) / _CLK_TCK, steal / _CLK_TCK


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


# ---------------------------------------------------------------------- (C): serve --nodes N


class ClusterBroker(BrokerProcess):
    """The real ``oncelog serve --nodes N --fsync never`` (N = 1: the broker process itself; N > 1:
    the supervisor and its N node processes, node k pinned by the supervisor to core k-1)."""

    def __init__(self, work_dir: str, nodes: int, *, partitions: int) -> None:
        name = f"nodes-{nodes}"
        super().__init__(os.path.join(work_dir, name), fsync="never",
                         extra_args=["--num-partitions", str(partitions), "--nodes", str(nodes)])
        self.name, self.nodes, self.partitions = name, nodes, partitions
        self._admin = None
        self.node_pids: list[int] = []

    def start(self, timeout: float = 60.0) -> "ClusterBroker":
        super().start(timeout)
        self.node_pids = self._find_node_pids()
        return self

    def _find_node_pids(self) -> list[int]:
        """The node processes, by node id: the broker itself for one node, else the supervisor's
        children started with ``--cluster-node K``."""
        if self.nodes == 1:
            return [self.proc.pid]
        deadline = time.monotonic() + 10
        while True:
            found = {}
            for child in _children(self.proc.pid):
                with contextlib.suppress(OSError):
                    with open(f"/proc/{child}/cmdline", "rb") as f:
                        argv = f.read().split(b"\0")
                    if b"--cluster-node" in argv:
                        found[int(argv[argv.index(b"--cluster-node") + 1])] = child
            if sorted(found) == list(range(1, self.nodes + 1)):
                return [found[k] for k in sorted(found)]
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name}: node processes not found (found {found})")
            time.sleep(0.1)

    def check_nodes(self) -> None:
        """Refuse a figure taken while a node restarted (the supervisor starts a dead node again)."""
        now = self._find_node_pids()
        if now != self.node_pids:
            raise RuntimeError(f"{self.name}: node processes changed {self.node_pids} -> {now} (a node died "
                               f"and was restarted); see {self.log_path}:\n{self.tail_log()}")

    admin = Broker.admin

    def create_topic(self, name: str) -> None:
        from .wireload import wait_until_led

        Broker.create_topic(self, name)
        wait_until_led(self.bootstrap, name, self.partitions)

    delete_topics = Broker.delete_topics

    def stop(self, timeout: float = 30.0) -> int:
        self._admin = None
        return super().stop(timeout)


def _children(pid: int) -> list[int]:
    out = []
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
    return out


def _affinity_text(pid: int) -> str:
    """The CPUs every thread of ``pid`` may run on (as ``taskset -a -p`` would show), e.g. "0" or "0-1"."""
    sets = set()
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError):
            sets.add(frozenset(os.sched_getaffinity(int(tid))))
    return " / ".join(_cpu_list(s) for s in sorted(sets, key=sorted))


def _cpu_list(cpus) -> str:
    cpus = sorted(cpus)
    if cpus and cpus == list(range(cpus[0], cpus[-1] + 1)) and len(cpus) > 1:
        return f"{cpus[0]}-{cpus[-1]}"
    return ",".join(map(str, cpus))


RDKAFKA_IDEMPOTENT = {"linger.ms": 5, "queue.buffering.max.messages": 10_000,  # bench.modes.BASE_PRODUCER
                      "enable.idempotence": True, "acks": "all"}


@dataclass
class ClusterCell:
    name: str
    broker: str  # "nodes-1" | "nodes-2"
    node_cpus: list[set[int] | None]  # per node (None: every CPU)
    load: str  # "wire" (wire-idempotent, bench/wireload.py) | "rdkafka" (confluent-kafka, idempotent)
    runs: list[dict] = field(default_factory=list)

    def pooled(self) -> dict:
        records = sum(r["records"] for r in self.runs)
        seconds = sum(r["seconds"] for r in self.runs)
        broker_cpu = sum(r["broker_cpu"] for r in self.runs)
        client_cpu = sum(r["client_cpu"] for r in self.runs)
        per_node = [sum(r["per_node_cpu"][k] for r in self.runs) / seconds for k in range(len(self.node_cpus))]
        others = sum(r["others_cores"] for r in self.runs) / len(self.runs)
        return {"records_per_s": records / seconds, "broker_cores": broker_cpu / seconds,
                "broker_us_per_record": broker_cpu * 1e6 / records, "client_cores": client_cpu / seconds,
                "client_us_per_record": client_cpu * 1e6 / records, "per_node_cores": per_node,
                "others_cores": others,
                "by_round": [r["records"] / r["seconds"] for r in self.runs]}


def run_cluster_cell(cell: ClusterCell, brokers: dict[str, ClusterBroker], pool, clients: int, duration: float,
                     tag: str, all_cpus: set[int], client_cpus: set[int] | None, partitions: int) -> dict:
    """One interleaved run: pin the cell's node processes (every thread) and the clients, a fresh
    topic per client, go; then check every partition's log end offset (asked of its leader)
    against what the clients counted acknowledged, and that no node restarted."""
    from .wireload import leader_offsets

    broker = brokers[cell.broker]
    for pid, cpus in zip(broker.node_pids, cell.node_cpus):
        pin(pid, cpus or all_cpus)
    for proc in pool.procs:
        pin(proc.pid, client_cpus or all_cpus)
    jobs, topics = [], []
    for i in range(clients):
        topic = f"cl-{tag}-c{i}"
        broker.create_topic(topic)
        topics.append(topic)
        if cell.load == "wire":
            jobs.append({"kind": "wire-produce", "topic": topic, "bootstrap": broker.bootstrap,
                         "wire": WIRE_IDEMPOTENT, "txn_commit_ms": None, "batch_records": 960, "size": 1024,
                         "duration": duration, "security": None})
        else:
            jobs.append({"kind": "produce", "topic": topic, "bootstrap": broker.bootstrap, "size": 1024,
                         "duration": duration, "rate": 0, "txn_commit_ms": None, "security": {},
                         "producer": RDKAFKA_IDEMPOTENT})
    n0 = [cpu_seconds(p) for p in broker.node_pids]
    s0 = cpu_seconds(broker.proc.pid) if broker.nodes > 1 else 0.0
    c0 = [cpu_seconds(p.pid) for p in pool.procs[:clients]]
    m0, t0 = machine_cpu(), time.monotonic()
    results = pool.run(jobs, timeout=duration + 180)
    m1, t1 = machine_cpu(), time.monotonic()
    n1 = [cpu_seconds(p) for p in broker.node_pids]
    s1 = cpu_seconds(broker.proc.pid) if broker.nodes > 1 else 0.0
    c1 = [cpu_seconds(p.pid) for p in pool.procs[:clients]]
    errors = [err for err, _ in results if err]
    if errors:
        raise RuntimeError(f"{cell.name}: {errors[0]}")
    outs = [res for _, res in results]
    for out in outs:
        if out.get("failed") or out.get("unflushed") or out.get("delivery_errors"):
            raise RuntimeError(f"{cell.name}: {out.get('failed')} failed, {out.get('unflushed')} unflushed: "
                               f"{out.get('delivery_errors')[:3]}")
    broker.check_nodes()
    leaders: dict[int, int] = {}
    for topic, out in zip(topics, outs):
        stored = leader_offsets(broker.bootstrap, topic)
        for node, _ in stored.values():
            leaders[node] = leaders.get(node, 0) + 1
        got = sum(off for _, off in stored.values())
        if got != out["acked"] or (cell.load == "wire" and {p: off for p, (_, off) in stored.items()}
                                   != {int(p): n for p, n in out["acked_by_partition"].items()}):
            raise RuntimeError(f"{cell.name}: {topic} holds {got} records ({stored}), the client counted "
                               f"{out['acked']} acknowledged ({out['acked_by_partition']})")
    if len(leaders) != broker.nodes:
        raise RuntimeError(f"{cell.name}: partitions led by nodes {sorted(leaders)}, not by all {broker.nodes}")
    broker.delete_topics(topics)
    seconds = max(o["t_end"] for o in outs) - min(o["t_start"] for o in outs)
    run = {"records": sum(o["acked"] for o in outs), "seconds": seconds, "topics": topics,
           "broker_cpu": sum(n1) - sum(n0), "per_node_cpu": [y - x for x, y in zip(n0, n1)],
           "supervisor_cpu": s1 - s0, "client_cpu": sum(c1) - sum(c0),
           "partitions_by_node": leaders,
           # what the rest of the machine used meanwhile (other processes: this machine is shared),
           # over the pool's whole run (connections and metadata included), in cores
           "others_cores": ((m1[0] - m0[0]) - (sum(n1) - sum(n0)) - (s1 - s0) - (sum(c1) - sum(c0))) / (t1 - t0),
           "steal_cores": (m1[1] - m0[1]) / (t1 - t0),
           "client_errors": sum(len(o.get("client_errors") or []) for o in outs),
           "client_log": [line for o in outs for line in (o.get("client_log") or [])][:10]}
    cell.runs.append(run)
    return run


def part_cluster(work_dir: str, args) -> dict:
    """(C) the real ``oncelog serve --nodes 1`` against ``--nodes 2``, end to end (module docstring)."""
    from .workers import WorkerPool

    all_cpus = os.sched_getaffinity(0)
    partitions = max(args.partitions, 4)  # >= 2 x nodes, so both nodes lead some of every topic
    m0 = machine_cpu()
    time.sleep(2.0)
    busy_before = (machine_cpu()[0] - m0[0]) / 2.0  # before any broker of ours starts: other processes'
    print(f"\n(C) the machine before the part: {busy_before:.2f} of {len(all_cpus)} cores busy with other processes "
          f"(/proc/stat over 2 s)", end="", flush=True)
    rd = args.rdkafka_clients
    client_text = _cpus_text(args.client_cpus)
    print(f"\n(C) serve --nodes 1 vs --nodes 2 (the real cluster), --fsync never, {partitions} partitions per "
          f"client topic, {args.duration:g} s cells, {args.rounds} rounds; loads: {args.clients} wire-idempotent "
          f"client processes (bench/wireload.py, 960 x 1 KiB batches, 5 in flight per connection, a connection "
          f"per leader node)" + (f", {rd} librdkafka processes (confluent-kafka Producer, enable.idempotence, "
                                 f"acks=all, 1 KiB records, linger.ms 5)" if rd else "")
          + f"; clients on {client_text}", flush=True)
    brokers = {}
    try:
        for n in (1, 2):
            b = ClusterBroker(work_dir, n, partitions=partitions).start()
            brokers[b.name] = b
        print(f"  nodes-2: node processes {brokers['nodes-2'].node_pids}, pinned by the supervisor to cores "
              + ", ".join(_affinity_text(p) for p in brokers['nodes-2'].node_pids), flush=True)
        cells = []
        for load, label in [("wire", "wire"), ("rdkafka", "rdkafka")] if rd else [("wire", "wire")]:
            cells += [ClusterCell(f"{label}: 1 node, core 0", "nodes-1", [{0}], load),
                      ClusterCell(f"{label}: 2 nodes, cores 0|1", "nodes-2", [{0}, {1}], load),
                      ClusterCell(f"{label}: 1 node, unpinned", "nodes-1", [None], load)]
            if load == "wire":
                cells.append(ClusterCell(f"{label}: 2 nodes, both core 0", "nodes-2", [{0}, {0}], load))
        pool = WorkerPool(max(args.clients, rd)).start()
        try:
            for name in brokers:  # warm-up: each broker with each load once
                for load in dict.fromkeys(c.load for c in cells):
                    cell = ClusterCell("warm-up", name, [None] * brokers[name].nodes, load)
                    run_cluster_cell(cell, brokers, pool, args.clients if load == "wire" else rd,
                                     min(1.0, args.duration), f"w{name[-1]}{load[0]}", all_cpus, args.client_cpus,
                                     partitions)
            for r in range(args.rounds):
                order = cells[r % len(cells):] + cells[:r % len(cells)]
                for cell in order:
                    run = run_cluster_cell(cell, brokers, pool, args.clients if cell.load == "wire" else rd,
                                           args.duration, f"{r}-{cells.index(cell)}", all_cpus, args.client_cpus,
                                           partitions)
                    per_node = " + ".join(f"{c / run['seconds']:.2f}" for c in run["per_node_cpu"])
                    print(f"  round {r + 1} {cell.name:<30} {run['records'] / run['seconds']:>12,.0f} rec/s  "
                          f"nodes {run['broker_cpu'] / run['seconds']:.2f} cores ({per_node})  "
                          f"clients {run['client_cpu'] / run['seconds']:.2f} cores  others {run['others_cores']:.2f}"
                          + (f"  client errors {run['client_errors']}: {run['client_log'][:2]}"
                             if run["client_errors"] else ""), flush=True)
        finally:
            pool.close()
    finally:
        for b in brokers.values():
            b.stop()
    out = {"busy_before_cores": busy_before}
    for load in dict.fromkeys(c.load for c in cells):
        group = [c for c in cells if c.load == load]
        n = args.clients if load == "wire" else rd
        print(f"\n(C) {'wire-idempotent' if load == 'wire' else 'librdkafka idempotent'}, {n} client processes on "
              f"{client_text}; node cores = utime+stime of the node processes (/proc), summed; others = the rest "
              f"of the machine's busy CPU meanwhile (/proc/stat; not ours), mean of the rounds")
        print(f"{'cell':<32}{'records/s':>12}{'/ base':>8}{'by round':>22}{'node cores':>18}"
              f"{'µs/rec':>8}{'client cores':>14}{'µs/rec':>8}{'others':>8}")
        b = group[0].pooled()["records_per_s"]
        for cell in group:
            p = cell.pooled()
            rounds = " ".join(f"{x / 1000:.0f}k" for x in p["by_round"])
            split = "+".join(f"{c:.2f}" for c in p["per_node_cores"])
            nodes = f"{p['broker_cores']:.2f}" + (f" ({split})" if len(p["per_node_cores"]) > 1 else "")
            print(f"{cell.name:<32}{p['records_per_s']:>12,.0f}{p['records_per_s'] / b:>8.2f}{rounds:>22}"
                  f"{nodes:>18}{p['broker_us_per_record']:>8.2f}{p['client_cores']:>14.2f}"
                  f"{p['client_us_per_record']:>8.2f}{p['others_cores']:>8.2f}")
        one, two, today = group[0].pooled(), group[1].pooled(), group[2].pooled()
        by_round = " ".join(f"{t / o:.2f}" for t, o in zip(two["by_round"], one["by_round"]))
        print(f"2 cores (--nodes 2, a node per core) / 1 core (--nodes 1 on core 0), clients on {client_text} "
              f"(the issue's target >= 1.7x): {two['records_per_s'] / one['records_per_s']:.2f}x (by round {by_round})")
        print(f"--nodes 2 / --nodes 1 unpinned (today's broker on this machine): "
              f"{two['records_per_s'] / today['records_per_s']:.2f}x")
        out[load] = {c.name: {**c.pooled(), "runs": c.runs} for c in group}
    return out


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
    p.add_argument("--part", default="ab",
                   help="a, b or ab (default): which prototypes to measure; cluster (or c): the real "
                        "serve --nodes 1 vs --nodes 2 (not part of the default)")
    p.add_argument("--clients", type=int, default=2, help="client processes (wire-idempotent producers)")
    p.add_argument("--client-cpus", type=parse_cpus, default=None, help="pin the clients, e.g. 1 or 0-1")
    p.add_argument("--partitions", type=int, default=3,
                   help="partitions of each client's topic ((C): at least 4, twice the nodes)")
    p.add_argument("--rdkafka-clients", type=int, default=3,
                   help="(C) librdkafka (confluent-kafka) producer processes of the rdkafka cells; 0: none")
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
        if args.part in ("c", "cluster"):
            args.part = "c"
            results["cluster"] = part_cluster(work_dir, args)
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
