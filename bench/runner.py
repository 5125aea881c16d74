"""Run the cells: every broker up for the whole run, cells interleaved round by round; then the
EndTxn probe (txn suite) and the group measurements (groups suite).

Order within a round: for each (record size, mode) pair of the matrix (in reverse order every
other round), every target in turn (the target order rotates each round), produce for
``duration`` seconds into a fresh topic, then consume that topic back (once per isolation level
of the mode), then delete it. Interleaving keeps slow drifts of a noisy 2-core machine (other
tenants, thermal, page cache) from landing on one broker or one mode only; rounds give a spread.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from . import kafka, stats
from .brokers import RunningBroker
from .modes import BASE_PRODUCER, Mode, Target
from .workers import WorkerPool


@dataclass
class GroupOptions:
    """The groups suite. Rebalance: a group grows 1 -> ``members`` consumers on a topic
    of ``members`` partitions, ``repetitions`` times per broker. Commits: ``commit_consumers``
    members (one process each) of one group commit synchronously for ``commit_seconds``, once per
    round."""

    repetitions: int = 3
    members: int = 4
    heartbeat_ms: int = 100
    session_timeout_ms: int = 6000
    fetch_wait_ms: int | None = None  # None: librdkafka's default
    commit_consumers: int = 2
    commit_seconds: float = 3.0
    step_timeout: float = 60.0
    step_pause: float = 1.0  # seconds the group stays Stable before the next member subscribes


@dataclass
class TxnProbeOptions:
    """The EndTxn probe of the txn suite: ``count`` one-record transactions per broker per round."""

    count: int = 200
    warmup: int = 10


@dataclass
class Options:
    targets: list[Target]
    modes: list[Mode]
    sizes: list[int]
    duration: float
    rounds: int
    processes: int
    consumer_processes: int
    partitions: int
    consume_split: str
    rate: int
    warmup: float
    consume_seconds: float
    producer_config: dict = field(default_factory=dict)
    java_config: dict = field(default_factory=dict)  # extra Java producer properties of the java-* modes
    wire_batch_records: int = 960  # records per partition batch of the protocol-level producer
    keep_topics: bool = False
    # The produce/consume cells as (record size, mode) pairs, in table order; empty = sizes x modes.
    matrix: list[tuple[int, Mode]] = field(default_factory=list)
    suites: list[str] = field(default_factory=lambda: ["produce"])
    groups: GroupOptions | None = None  # None: no groups suite
    txn_probe: TxnProbeOptions | None = None  # None: no EndTxn probe

    def __post_init__(self) -> None:
        if not self.matrix:
            self.matrix = [(size, mode) for size in self.sizes for mode in self.modes]


@dataclass
class Cell:
    round: int
    target: str
    size: int
    mode: str
    topic: str
    produce: dict | None = None
    consume: dict | None = None  # the read-back with the mode's own isolation level
    reads: dict[str, dict] = field(default_factory=dict)  # every read-back, by isolation level
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # oddities that do not invalidate the figures
    wall_seconds: float = 0.0
    client_log: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        produce = dict(self.produce) if self.produce else None
        if produce:
            produce.pop("latency_samples", None)
        return {"round": self.round, "target": self.target, "size": self.size, "mode": self.mode,
                "topic": self.topic, "produce": produce, "consume": self.consume,
                "reads": {iso: f for iso, f in self.reads.items() if f is not self.consume} or None,
                "errors": self.errors,
                "notes": self.notes, "wall_seconds": self.wall_seconds,
                "client_log": self.client_log}


def _topic_name(*parts) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "-", "bench-" + "-".join(str(p) for p in parts))


def _client(broker: RunningBroker) -> dict:
    """The job fields that say how a client reaches ``broker``: address and security settings."""
    return {"bootstrap": broker.bootstrap, "security": broker.client_config}


def size_label(size: int) -> str:
    return f"{size // 1024} KB" if size % 1024 == 0 else f"{size} B"


class Runner:
    def __init__(self, opts: Options, brokers: dict[str, RunningBroker], console: Console) -> None:
        self.opts = opts
        self.brokers = brokers
        self.console = console
        self.pool: WorkerPool | None = None
        self.cells: list[Cell] = []
        self.restarts: list[dict] = []
        self.txn_probe_results: list[dict] = []
        self.group_results: list[dict] = []
        self.java_rates: dict[tuple[str, int, str], float] = {}  # records/s of one perf-tool process

    # ------------------------------------------------------------------ one cell

    def _java_records(self, target: str, size: int, mode: Mode, duration: float) -> int:
        """Records per ProducerPerformance process for about ``duration`` seconds: the rate last
        measured for this target, size and mode, else a first guess (bench/kafka.py)."""
        rate = self.java_rates.get((target, size, mode.name))
        if rate is None:
            rate = kafka.FIRST_GUESS_RECORDS_PER_S * min(4.0, 1024 / size)
        return max(5000, int(rate * duration))

    def _producer_jobs(self, broker: RunningBroker, topic: str, size: int, mode: Mode, duration: float) -> list[dict]:
        if mode.java is not None:
            job = {"kind": "java-produce", **_client(broker), "topic": topic, "size": size,
                   "records": self._java_records(broker.target.name, size, mode, duration),
                   "producer": {**mode.java, **self.opts.java_config}, "txn_commit_ms": mode.txn_commit_ms,
                   "timeout": duration * 20 + 120}
            return [job] * self.opts.processes
        if mode.wire is not None:
            job = {"kind": "wire-produce", **_client(broker), "topic": topic, "size": size,
                   "duration": duration, "wire": mode.wire, "txn_commit_ms": mode.txn_commit_ms,
                   "batch_records": self.opts.wire_batch_records}
            return [job] * self.opts.processes
        producer = {**BASE_PRODUCER, **mode.producer, **self.opts.producer_config}
        job = {"kind": "produce", **_client(broker), "topic": topic, "size": size,
               "duration": duration, "rate": self.opts.rate, "producer": producer,
               "txn_commit_ms": mode.txn_commit_ms}
        return [job] * self.opts.processes

    def _consumer_jobs(self, broker: RunningBroker, topic: str, isolation: str, timeout: float,
                       acked: dict[int, int], mode: Mode, total: int = 0) -> list[dict]:
        parts = list(range(self.opts.partitions))
        if self.opts.consume_split == "all":
            shares = [parts] * self.opts.consumer_processes
        else:  # partitions round-robin over the processes; a process with none is not used
            n = min(self.opts.consumer_processes, len(parts))
            shares = [parts[i::n] for i in range(n)]
        # wire modes are read back by the protocol-level fetch loop, the others by librdkafka
        kind = "wire-consume" if mode.wire is not None else "consume"
        if mode.java is not None:  # ConsumerPerformance: a group of its own per process, every partition
            return [{"kind": "java-consume", **_client(broker), "topic": topic, "isolation": isolation,
                     "expected_total": total, "timeout": timeout}
                    for _ in range(self.opts.consumer_processes)]
        return [{"kind": kind, **_client(broker), "topic": topic, "partitions": share,
                 "isolation": isolation, "timeout": timeout, "expected": acked,
                 "max_seconds": self.opts.consume_seconds} for share in shares]

    def _run_jobs(self, jobs: list[dict], timeout: float):
        try:
            return self.pool.run(jobs, timeout)
        except TimeoutError:
            # a client hung: replace the pool so later cells start clean
            self.pool.terminate()
            self.pool = WorkerPool(self._pool_size()).start()
            raise

    def _pool_size(self) -> int:
        g = self.opts.groups
        return max(self.opts.processes, self.opts.consumer_processes, g.commit_consumers if g else 1)

    def run_cell(self, cell: Cell, mode: Mode, *, duration: float) -> Cell:
        t0 = time.monotonic()
        try:
            return self._run_cell(cell, mode, duration)
        finally:
            cell.wall_seconds = time.monotonic() - t0

    def _ensure_running(self, target: str, before: str, errors: list[str]) -> bool:
        """If the broker is not running (a crash, or a signal from outside the bench), note it,
        start it again on the same port and data, and go on: what follows is measured on the new
        process. False if it could not be restarted."""
        broker = self.brokers[target]
        if broker.alive():
            return True
        note = f"broker {target} was not running (exit {broker.proc.returncode}); restarted"
        errors.append(note)
        self.restarts.append({"before": before, "exit": broker.proc.returncode})
        self.console.print(f"[red]{escape(note)}; see {escape(broker.log_path)}")
        try:
            broker.start()
            return True
        except Exception as exc:
            errors.append(f"restart failed: {exc}")
            return False

    def _run_cell(self, cell: Cell, mode: Mode, duration: float) -> Cell:
        broker = self.brokers[cell.target]
        if not self._ensure_running(cell.target, cell.topic, cell.errors):
            return cell
        try:
            broker.create_topic(cell.topic)
        except Exception as exc:
            cell.errors.append(f"create topic: {exc}")
            return cell
        # produce
        cpu0 = broker.cpu_seconds()
        try:
            results = self._run_jobs(self._producer_jobs(broker, cell.topic, cell.size, mode, duration),
                                     timeout=duration + 180)
        except TimeoutError as exc:
            cell.errors.append(f"produce: {exc}")
            return cell
        cpu = broker.cpu_seconds() - cpu0
        reports = self._collect(cell, "produce", results)
        if reports:
            cell.produce = stats.produce_figures(reports, cell.size, cpu)
            if mode.java is not None and cell.produce["records"]:  # the whole run's rate, warm-up included
                self.java_rates[(cell.target, cell.size, mode.name)] = max(
                    r["records_total"] / r["seconds_total"] for r in reports)
            if cell.produce["failed"] or cell.produce["unflushed"]:
                cell.errors.append(f"produce: {cell.produce['failed']} failed deliveries, "
                                   f"{cell.produce['unflushed']} not flushed")
        if not cell.produce or not cell.produce["records"]:
            self._drop_topic(cell, broker)
            return cell
        # consume it back, once per isolation level of the mode; with two, the order alternates
        # by round so neither pass is always the first to read the topic
        isolations = list(mode.isolations)
        if cell.round % 2:
            isolations.reverse()
        for isolation in isolations:
            self._read_back(cell, mode, broker, isolation, duration)
        cell.consume = cell.reads.get(mode.isolation)
        self._drop_topic(cell, broker)
        if not broker.alive():
            cell.errors.append(f"broker {cell.target} died (exit {broker.proc.returncode})")
        return cell

    def _read_back(self, cell: Cell, mode: Mode, broker: RunningBroker, isolation: str, duration: float) -> None:
        consume_timeout = max(60.0, 10 * duration)
        phase = "consume" if len(mode.isolations) == 1 else f"consume {isolation}"
        cpu0 = broker.cpu_seconds()
        try:
            jobs = self._consumer_jobs(broker, cell.topic, isolation, consume_timeout, cell.produce["acked_by_partition"],
                                       mode, cell.produce.get("written", cell.produce["records"]))
            results = self._run_jobs(jobs, timeout=consume_timeout + 120)
        except TimeoutError as exc:
            cell.errors.append(f"{phase}: {exc}")
            results = None
        cpu = broker.cpu_seconds() - cpu0
        reports = self._collect(cell, phase, results) if results else None
        if not reports:
            return
        c = cell.reads[isolation] = stats.consume_figures(reports, cpu)
        if (c["records"] != c["expected"] and not c["capped"]) or c["errors"]:
            cell.errors.append(f"{phase}: read {c['records']} of {c['expected']} acknowledged records, "
                               f"{c['errors']} errors{' (timed out)' if c['timed_out'] else ''}")
        acked = cell.produce["acked_by_partition"]
        seen = {n.split(":")[0] for n in cell.notes}
        # (transaction markers take offsets, so for transactional modes the two differ anyway)
        for marks in (c["watermarks"] if not mode.txn_commit_ms else []):
            for part, (low, high) in marks.items():
                if high - low != acked.get(int(part), 0) and f"partition {part}" not in seen:
                    seen.add(f"partition {part}")
                    cell.notes.append(f"partition {part}: ListOffsets says [{low}, {high}) after the "
                                      f"producers had {acked.get(int(part), 0)} records acknowledged")

    def _drop_topic(self, cell: Cell, broker: RunningBroker) -> None:
        if not self.opts.keep_topics and broker.alive():
            err = broker.delete_topic(cell.topic)
            if err:
                cell.errors.append(f"delete topic: {err}")

    def _collect(self, cell: Cell, phase: str, results) -> list[dict] | None:
        reports = []
        for i, (err, res) in enumerate(results):
            if err:
                cell.errors.append(f"{phase} process {i}: {err}")
                continue
            reports.append(res)
            for key in ("delivery_errors", "consume_errors", "client_errors"):
                for text in res.get(key, []):
                    cell.errors.append(f"{phase} process {i}: {text}")
            cell.client_log.extend(f"{phase} process {i}: {line}" for line in res.get("client_log", []))
        # a cell with a failed process is not comparable to one without
        return reports if len(reports) == len(results) else None

    # ------------------------------------------------------------------ the run

    def plan(self) -> list[tuple[int, int, Mode, Target]]:
        """Round by round: (size, mode) pairs in matrix order, reversed every other round (so a
        steady drift of the machine does not favour the modes that come first: the EOS ratios
        compare modes within one broker), and within each pair every target, rotated by round."""
        out = []
        targets = self.opts.targets
        for r in range(self.opts.rounds):
            pairs = self.opts.matrix if r % 2 == 0 else self.opts.matrix[::-1]
            for size, mode in pairs:
                shift = r % len(targets)
                for target in targets[shift:] + targets[:shift]:
                    if not target.skips(mode):
                        out.append((r, size, mode, target))
        return out

    def run(self) -> list[Cell]:
        self.pool = WorkerPool(self._pool_size()).start()
        plan = self.plan()
        skipped = {(t.name, m.label, t.skips(m)) for _, m in self.opts.matrix for t in self.opts.targets if t.skips(m)}
        for name, label, why in sorted(skipped):
            self.console.print(f"[yellow]not run: {escape(name)} {escape(label)}: {escape(why)}")
        try:
            with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                          TimeElapsedColumn(), console=self.console, transient=False) as progress:
                if self.opts.warmup > 0 and plan:
                    size = max(s for s, _ in self.opts.matrix)
                    sized = list({m.name: m for s, m in self.opts.matrix if s == size}.values())
                    # A JVM broker compiles its hot paths during the first minutes of load (and that
                    # CPU is counted as the broker's): Apache Kafka warms up on every mode of the
                    # run (transactions, idempotence, both isolation levels, each client), the
                    # others on the first.
                    warm = [(t, m) for t in self.opts.targets
                            for m in [m for m in sized if not t.skips(m)][:None if t.kind == "kafka" else 1]]
                    task = progress.add_task("warm-up", total=len(warm))
                    for t, mode in warm:
                        progress.update(task, description=f"warm-up {t.name} {mode.label}")
                        cell = Cell(-1, t.name, size, mode.name, _topic_name("warmup", t.name, mode.name))
                        self.run_cell(cell, mode, duration=self.opts.warmup)
                        if cell.errors:
                            progress.console.print(f"[yellow]warm-up {t.name} {mode.label}: {escape(cell.errors[0])}")
                        progress.advance(task)
                if plan:
                    task = progress.add_task("cells", total=len(plan))
                for r, size, mode, target in plan:
                    progress.update(task, description=f"round {r + 1} {target.name} {size_label(size)} {mode.label}")
                    cell = Cell(r, target.name, size, mode.name, _topic_name(r, size, mode.name, target.name))
                    self.run_cell(cell, mode, duration=self.opts.duration)
                    self.cells.append(cell)
                    progress.console.print(self._line(cell, mode))
                    progress.advance(task)
                if self.opts.txn_probe:
                    self.run_txn_probe(progress)
                if self.opts.groups:
                    self.run_groups(progress)
        finally:
            self.pool.close()
        return self.cells

    # ------------------------------------------------------------------ txn suite: EndTxn probe

    def _rotated(self, r: int) -> list[Target]:
        shift = r % len(self.opts.targets)
        return self.opts.targets[shift:] + self.opts.targets[:shift]

    def run_txn_probe(self, progress: Progress) -> None:
        """One-record transactions, flushed before commit_transaction() is timed: EndTxn latency
        with the broker otherwise idle. Once per round per broker."""
        probe = self.opts.txn_probe
        task = progress.add_task("EndTxn probe", total=self.opts.rounds * len(self.opts.targets))
        for r in range(self.opts.rounds):
            for target in self._rotated(r):
                progress.update(task, description=f"EndTxn probe round {r + 1} {target.name}")
                row = {"round": r, "target": target.name, "errors": []}
                self.txn_probe_results.append(row)
                broker = self.brokers[target.name]
                topic = _topic_name("endtxn", r, target.name)
                if self._ensure_running(target.name, topic, row["errors"]):
                    try:
                        broker.create_topic(topic)
                        job = {"kind": "endtxn", **_client(broker), "topic": topic, "size": 1024,
                               "partitions": self.opts.partitions, "count": probe.count, "warmup": probe.warmup}
                        [(err, res)] = self._run_jobs([job], timeout=120 + probe.count)
                        if err:
                            row["errors"].append(err)
                        else:
                            row.update(stats.latency_figures(res["latencies"]))
                            row["latencies_ms"] = [x * 1000 for x in res["latencies"]]
                            row["errors"] += res["client_errors"]
                    except Exception as exc:
                        row["errors"].append(f"{type(exc).__name__}: {exc}")
                    if not self.opts.keep_topics and broker.alive():
                        broker.delete_topic(topic)
                progress.console.print(f"EndTxn probe r{r + 1} {target.name:<15} "
                                       + (f"{row['count']} txns p50 {row['p50_ms']:.2f} p99 {row['p99_ms']:.2f} ms"
                                          if row.get("count") else "")
                                       + (f" [red]{escape(row['errors'][0][:120])}[/red]" if row["errors"] else ""))
                progress.advance(task)

    # ------------------------------------------------------------------ groups suite

    def run_groups(self, progress: Progress) -> None:
        g = self.opts.groups
        hb = {"heartbeat.interval.ms": g.heartbeat_ms, "session.timeout.ms": g.session_timeout_ms}
        if g.fetch_wait_ms is not None:
            hb["fetch.wait.max.ms"] = g.fetch_wait_ms
        topics: dict[str, tuple[str, str]] = {}
        for target in self.opts.targets:
            errs: list[str] = []
            rebal, commits = _topic_name("group-rebalance", target.name), _topic_name("group-commits", target.name)
            try:
                if self._ensure_running(target.name, rebal, errs):
                    self.brokers[target.name].create_topic(rebal, partitions=g.members)
                    self.brokers[target.name].create_topic(commits, partitions=g.commit_consumers ** 2)
                    topics[target.name] = (rebal, commits)
            except Exception as exc:
                errs.append(f"create topic: {exc}")
            if errs:
                self.group_results.append({"kind": "setup", "target": target.name, "errors": errs})
        task = progress.add_task("groups", total=(g.repetitions + self.opts.rounds) * len(self.opts.targets))
        # Rebalance: a fresh group each repetition; brokers rotated by repetition.
        for rep in range(g.repetitions):
            for target in self._rotated(rep):
                progress.update(task, description=f"rebalance 1→{g.members} rep {rep + 1} {target.name}")
                row = {"kind": "rebalance", "target": target.name, "repetition": rep, "errors": [], "steps": []}
                self.group_results.append(row)
                if target.name in topics and self._ensure_running(target.name, "rebalance", row["errors"]):
                    broker = self.brokers[target.name]
                    job = {"kind": "rebalance", **_client(broker), "topic": topics[target.name][0],
                           "group": _topic_name("rebalance", rep, target.name), "members": g.members,
                           "partitions": g.members, "consumer": hb, "step_timeout": g.step_timeout,
                           "step_pause": g.step_pause}
                    cpu0 = broker.cpu_seconds()
                    try:
                        [(err, res)] = self._run_jobs([job], timeout=g.members * (g.step_timeout + g.step_pause) + 90)
                    except TimeoutError as exc:
                        err, res = str(exc), None
                    row["broker_cpu_s"] = broker.cpu_seconds() - cpu0
                    if err:
                        row["errors"].append(err)
                    if res:
                        row.update({k: res[k] for k in ("steps", "late_events", "events", "client_log")})
                        row["errors"] += res["errors"] + res["client_errors"]
                progress.console.print(self._group_line(row))
                progress.advance(task)
        # Commits: C members of one group, synchronous commits; once per round per broker.
        for r in range(self.opts.rounds):
            for target in self._rotated(r):
                progress.update(task, description=f"offset commits round {r + 1} {target.name}")
                row = {"kind": "commits", "target": target.name, "round": r, "errors": []}
                self.group_results.append(row)
                if target.name in topics and self._ensure_running(target.name, "commits", row["errors"]):
                    broker = self.brokers[target.name]
                    job = {"kind": "commits", **_client(broker), "topic": topics[target.name][1],
                           "group": _topic_name("commits", r, target.name), "share": g.commit_consumers,
                           "consumer": hb, "duration": g.commit_seconds, "join_timeout": g.step_timeout}
                    cpu0 = broker.cpu_seconds()
                    try:
                        results = self._run_jobs([job] * g.commit_consumers, timeout=g.step_timeout + g.commit_seconds + 90)
                    except TimeoutError as exc:
                        results = [(str(exc), None)]
                    cpu = broker.cpu_seconds() - cpu0
                    reports = []
                    for i, (err, res) in enumerate(results):
                        if err:
                            row["errors"].append(f"member {i}: {err}")
                        elif res:
                            reports.append(res)
                            row["errors"] += [f"member {i}: {e}" for e in res["commit_errors"] + res["client_errors"]]
                    if reports and len(reports) == len(results):
                        row.update(stats.commit_rate_figures(reports, cpu))
                progress.console.print(self._group_line(row))
                progress.advance(task)
        for target, names in topics.items():
            if not self.opts.keep_topics and self.brokers[target].alive():
                for name in names:
                    self.brokers[target].delete_topic(name)

    @staticmethod
    def _group_line(row: dict) -> str:
        if row["kind"] == "rebalance":
            head = f"rebalance rep {row['repetition'] + 1} {row['target']:<15}"
            text = head + " " + "  ".join(f"→{s['members']}: {s['seconds'] * 1000:7.1f} ms" for s in row["steps"])
        else:
            head = f"offset commits r{row['round'] + 1} {row['target']:<15}"
            text = head + (f" {row['commits_per_s']:>8,.0f} commits/s p50 {row['p50_ms']:.2f} p99 {row['p99_ms']:.2f} ms"
                           f" broker CPU {row['broker_cpu_pct']:.0f}%" if "commits_per_s" in row else "")
        if row["errors"]:
            text += f" [red]{len(row['errors'])} error(s): {escape(row['errors'][0][:120])}[/red]"
        return text

    @staticmethod
    def _line(cell: Cell, mode: Mode) -> str:
        head = f"r{cell.round + 1} {cell.target:<15} {size_label(cell.size):>5} {mode.label:<10}"
        p, c = cell.produce, cell.consume
        text = head
        if p:
            text += (f" produce {p['records_per_s']:>9,.0f} rec/s {p['mb_per_s']:7.1f} MB/s"
                     f" p50 {p['latency_p50_ms']:6.1f} p99 {p['latency_p99_ms']:6.1f} ms"
                     f" in {p['seconds']:.1f} s, broker CPU {p['broker_cpu_pct']:.0f}%")
        for iso in mode.isolations:
            c = cell.reads.get(iso)
            if not c:
                continue
            tag = "consume" if len(mode.isolations) == 1 else {"read_committed": "rc", "read_uncommitted": "ru"}[iso]
            text += (f" | {tag} {c['records_per_s']:>9,.0f} rec/s {c['mb_per_s']:7.1f} MB/s"
                     f" in {c['seconds']:.1f} s, broker CPU {c['broker_cpu_pct']:.0f}%")
        if p and p.get("commits"):
            text += f" | {p['commits']} txns, EndTxn p50 {p['endtxn_p50_ms']:.1f} ms"
        if cell.errors:
            text += f" [red]{len(cell.errors)} error(s): {escape(cell.errors[0][:100])}[/red]"
        return text
