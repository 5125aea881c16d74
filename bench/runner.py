"""Run the cells: every broker up for the whole run, cells interleaved round by round.

Order within a round: for each record size, for each mode, every target in turn (the target
order rotates each round), produce for ``duration`` seconds into a fresh topic, then consume
that topic back, then delete it. Interleaving keeps slow drifts of a noisy 2-core machine
(other tenants, thermal, page cache) from landing on one broker only; rounds give a spread.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from . import stats
from .brokers import RunningBroker
from .modes import BASE_PRODUCER, Mode, Target
from .workers import WorkerPool


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
    keep_topics: bool = False


@dataclass
class Cell:
    round: int
    target: str
    size: int
    mode: str
    topic: str
    produce: dict | None = None
    consume: dict | None = None
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # oddities that do not invalidate the figures
    wall_seconds: float = 0.0
    client_log: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        produce = dict(self.produce) if self.produce else None
        if produce:
            produce.pop("latency_samples", None)
        return {"round": self.round, "target": self.target, "size": self.size, "mode": self.mode,
                "topic": self.topic, "produce": produce, "consume": self.consume, "errors": self.errors,
                "notes": self.notes, "wall_seconds": self.wall_seconds,
                "client_log": self.client_log}


def _topic_name(*parts) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "-", "bench-" + "-".join(str(p) for p in parts))


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

    # ------------------------------------------------------------------ one cell

    def _producer_jobs(self, broker: RunningBroker, topic: str, size: int, mode: Mode, duration: float) -> list[dict]:
        producer = {**BASE_PRODUCER, **mode.producer, **self.opts.producer_config}
        job = {"kind": "produce", "bootstrap": broker.bootstrap, "topic": topic, "size": size,
               "duration": duration, "rate": self.opts.rate, "producer": producer,
               "txn_commit_ms": mode.txn_commit_ms}
        return [job] * self.opts.processes

    def _consumer_jobs(self, broker: RunningBroker, topic: str, mode: Mode, timeout: float,
                       acked: dict[int, int]) -> list[dict]:
        parts = list(range(self.opts.partitions))
        if self.opts.consume_split == "all":
            shares = [parts] * self.opts.consumer_processes
        else:  # partitions round-robin over the processes; a process with none is not used
            n = min(self.opts.consumer_processes, len(parts))
            shares = [parts[i::n] for i in range(n)]
        return [{"kind": "consume", "bootstrap": broker.bootstrap, "topic": topic, "partitions": share,
                 "isolation": mode.isolation, "timeout": timeout, "expected": acked,
                 "max_seconds": self.opts.consume_seconds} for share in shares]

    def _run_jobs(self, jobs: list[dict], timeout: float):
        try:
            return self.pool.run(jobs, timeout)
        except TimeoutError:
            # a client hung: replace the pool so later cells start clean
            self.pool.terminate()
            self.pool = WorkerPool(max(self.opts.processes, self.opts.consumer_processes)).start()
            raise

    def run_cell(self, cell: Cell, mode: Mode, *, duration: float) -> Cell:
        t0 = time.monotonic()
        try:
            return self._run_cell(cell, mode, duration)
        finally:
            cell.wall_seconds = time.monotonic() - t0

    def _run_cell(self, cell: Cell, mode: Mode, duration: float) -> Cell:
        broker = self.brokers[cell.target]
        if not broker.alive():
            # Something stopped it (a crash, or a signal from outside the bench): note it, start it
            # again on the same port and data, and go on; the cell is measured on the new process.
            note = f"broker {cell.target} was not running (exit {broker.proc.returncode}); restarted"
            cell.errors.append(note)
            self.restarts.append({"before_cell": cell.topic, "exit": broker.proc.returncode})
            self.console.print(f"[red]{escape(note)}; see {escape(broker.log_path)}")
            try:
                broker.start()
            except Exception as exc:
                cell.errors.append(f"restart failed: {exc}")
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
            if cell.produce["failed"] or cell.produce["unflushed"]:
                cell.errors.append(f"produce: {cell.produce['failed']} failed deliveries, "
                                   f"{cell.produce['unflushed']} not flushed")
        if not cell.produce or not cell.produce["records"]:
            self._drop_topic(cell, broker)
            return cell
        # consume it back
        consume_timeout = max(60.0, 10 * duration)
        cpu0 = broker.cpu_seconds()
        try:
            jobs = self._consumer_jobs(broker, cell.topic, mode, consume_timeout, cell.produce["acked_by_partition"])
            results = self._run_jobs(jobs,
                                     timeout=consume_timeout + 120)
        except TimeoutError as exc:
            cell.errors.append(f"consume: {exc}")
            results = None
        cpu = broker.cpu_seconds() - cpu0
        reports = self._collect(cell, "consume", results) if results else None
        if reports:
            cell.consume = stats.consume_figures(reports, cpu)
            c = cell.consume
            if (c["records"] != c["expected"] and not c["capped"]) or c["errors"]:
                cell.errors.append(f"consume: read {c['records']} of {c['expected']} acknowledged records, "
                                   f"{c['errors']} errors{' (timed out)' if c['timed_out'] else ''}")
            acked = cell.produce["acked_by_partition"]
            seen = set()
            # (transaction markers take offsets, so for transactional modes the two differ anyway)
            for marks in (c["watermarks"] if not mode.txn_commit_ms else []):
                for part, (low, high) in marks.items():
                    if high - low != acked.get(int(part), 0) and part not in seen:
                        seen.add(part)
                        cell.notes.append(f"partition {part}: ListOffsets says [{low}, {high}) after the "
                                           f"producers had {acked.get(int(part), 0)} records acknowledged")
        self._drop_topic(cell, broker)
        if not broker.alive():
            cell.errors.append(f"broker {cell.target} died (exit {broker.proc.returncode})")
        return cell

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
        out = []
        targets = self.opts.targets
        for r in range(self.opts.rounds):
            for size in self.opts.sizes:
                for mode in self.opts.modes:
                    shift = r % len(targets)
                    for target in targets[shift:] + targets[:shift]:
                        out.append((r, size, mode, target))
        return out

    def run(self) -> list[Cell]:
        self.pool = WorkerPool(max(self.opts.processes, self.opts.consumer_processes)).start()
        plan = self.plan()
        try:
            with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                          TimeElapsedColumn(), console=self.console, transient=False) as progress:
                if self.opts.warmup > 0:
                    task = progress.add_task("warm-up", total=len(self.opts.targets))
                    for t in self.opts.targets:
                        progress.update(task, description=f"warm-up {t.name}")
                        cell = Cell(-1, t.name, self.opts.sizes[-1], self.opts.modes[0].name,
                                    _topic_name("warmup", t.name))
                        self.run_cell(cell, self.opts.modes[0], duration=self.opts.warmup)
                        if cell.errors:
                            progress.console.print(f"[yellow]warm-up {t.name}: {cell.errors[0]}")
                        progress.advance(task)
                task = progress.add_task("cells", total=len(plan))
                for r, size, mode, target in plan:
                    progress.update(task, description=f"round {r + 1} {target.name} {size_label(size)} {mode.label}")
                    cell = Cell(r, target.name, size, mode.name, _topic_name(r, size, mode.name, target.name))
                    self.run_cell(cell, mode, duration=self.opts.duration)
                    self.cells.append(cell)
                    progress.console.print(self._line(cell, mode))
                    progress.advance(task)
        finally:
            self.pool.close()
        return self.cells

    @staticmethod
    def _line(cell: Cell, mode: Mode) -> str:
        head = f"r{cell.round + 1} {cell.target:<15} {size_label(cell.size):>5} {mode.label:<10}"
        p, c = cell.produce, cell.consume
        text = head
        if p:
            text += (f" produce {p['records_per_s']:>9,.0f} rec/s {p['mb_per_s']:7.1f} MB/s"
                     f" p50 {p['latency_p50_ms']:6.1f} p99 {p['latency_p99_ms']:6.1f} ms"
                     f" in {p['seconds']:.1f} s, broker CPU {p['broker_cpu_pct']:.0f}%")
        if c:
            text += (f" | consume {c['records_per_s']:>9,.0f} rec/s {c['mb_per_s']:7.1f} MB/s"
                     f" in {c['seconds']:.1f} s, broker CPU {c['broker_cpu_pct']:.0f}%")
        if cell.errors:
            text += f" [red]{len(cell.errors)} error(s): {escape(cell.errors[0][:100])}[/red]"
        return text
