"""``python -m bench restart``: how long a SIGKILLed Spark driver takes to commit output again.

The demo's job (:mod:`oncelog.pipeline.job`: enrichment through the streaming sink, totals on
RocksDB through ``foreachBatch``), one broker (``--fsync always``, as the demo), the demo's
class-data archive of the driver JVM (made after the first run if missing). Each cycle:

1. a wave of ``--wave`` input events is written (transactional, committed) while no driver runs;
2. the driver is launched on the checkpoints of the runs before it;
3. timed from the launch: the SparkSession up (``session``), both queries started
   (``started``), the end of the first micro-batch with input of ``enrich`` (``first batch``:
   output visible to read_committed readers; the demo's "driver restart to first micro-batch")
   and of ``totals``;
4. the driver's process group is SIGKILLed one second later.

The first run (cold: new checkpoints, maybe no archive yet) is reported apart. Restarts alternate
between a quiet machine and one with a CPU hog (one busy Python process, as the demo's "with
other work on the machine"), so both columns come from the same run; medians are reported.
Target (issue 22): median first batch <= 8 s quiet, <= 20 s with the hog.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from rich.console import Console
from rich.table import Table

from .pipeline import _progress

PHASES = ("session", "started", "first batch", "totals first batch")
TARGETS = {"quiet": 8.0, "hog": 20.0}


def cpu_by_process(sid: int) -> dict[str, float]:
    """CPU seconds (user + system) used so far by the live processes of session ``sid``, by kind:
    the JVM, the driver's Python, and each PySpark worker module (daemon and its forks)."""
    from oncelog.pipeline.procs import session_members

    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for pid in session_members(sid):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        cpu = (int(fields[11]) + int(fields[12])) / tick
        args = [a.decode(errors="replace") for a in argv if a]
        if any(a.endswith("/java") for a in args[:1]):
            kind = "jvm"
        elif "oncelog.pipeline.job" in args:
            kind = "driver python"
        elif "pyspark.daemon" in args:
            kind = args[-1].rsplit(".", 1)[-1]
        elif len(args) > 2 and args[1] == "-m":
            kind = args[2].rsplit(".", 1)[-1]
        else:
            kind = "other"
        out[kind] = round(out.get(kind, 0.0) + cpu, 2)
    return out


def _events(path: str, run: int) -> list[dict]:
    """The progress lines of driver run ``run``."""
    return [e for e in _progress(path) if e.get("run") == run]


class Restarts:
    def __init__(self, root: str, bootstrap: str, args) -> None:
        from oncelog.pipeline.config import PipelineConfig
        from oncelog.pipeline.events import create_topics
        from oncelog.pipeline.job import JobConfig
        from oncelog.pipeline.jvmcache import JvmCache
        from oncelog.pipeline.procs import SparkDriver

        self.args = args
        self.bootstrap = bootstrap
        self.dir = root
        self.topics = {"input": "orders", "enriched": "orders-enriched", "totals": "customer-window-totals"}
        create_topics(bootstrap, {"orders": 4, "orders-enriched": 4, "customer-window-totals": 2})
        self.progress = os.path.join(root, "progress.jsonl")
        job = JobConfig(PipelineConfig(master=args.master, trigger_ms=args.trigger_ms), bootstrap=bootstrap,
                        input="orders", enriched="orders-enriched", totals="customer-window-totals",
                        checkpoint=os.path.join(root, "checkpoints"), app_id="bench-restart",
                        max_per_trigger=args.per_trigger, progress=self.progress, drain=os.path.join(root, "drain"))
        self.driver = SparkDriver(job, env={**os.environ, "PYSPARK_PYTHON": sys.executable,
                                            "PYSPARK_DRIVER_PYTHON": sys.executable},
                                  log_path=os.path.join(root, "driver.log"))
        self.jvm_cache = JvmCache.locate(not args.no_jvm_cache)
        self.waves = 0

    def produce_wave(self) -> None:
        from oncelog.pipeline.events import Generator, GeneratorConfig

        self.waves += 1
        gen = Generator(self.bootstrap, "orders",
                        GeneratorConfig(records=self.args.wave, txn_size=500, seed=self.waves,
                                        transactional_id=f"bench-restart-gen-{self.waves}"))
        stats = gen.run()
        if stats.error:
            raise RuntimeError(f"the generator failed: {stats.error}")

    def cycle(self, hog: bool, timeout: float = 300.0) -> dict:
        """One driver run: launch, time its phases, SIGKILL it."""
        self.produce_wave()
        java_options = self.jvm_cache.java_options()
        hog_proc = subprocess.Popen([sys.executable, "-c", "while 1: pass"]) if hog else None
        try:
            launched = time.time()
            self.driver.start(java_options=java_options)
            run = self.driver.runs
            out: dict = {"run": run, "hog": hog, "archive": "SharedArchiveFile" in java_options}
            deadline = launched + timeout
            while time.time() < deadline:
                if not self.driver.alive():
                    raise RuntimeError(f"driver run {run} exited ({self.driver.poll()}); see {self.dir}/driver.log")
                for e in _events(self.progress, run):
                    kind = e.get("event")
                    if kind == "session":
                        out.setdefault("session", e["seconds"])
                        out.setdefault("jvm_pid", e.get("jvm_pid"))
                    elif kind == "started":
                        out.setdefault("started", e["seconds"])
                    elif kind == "batch" and e.get("rows", 0) > 0:
                        name = "first batch" if e["query"] == "enrich" else "totals first batch"
                        if name == "first batch" and name not in out:
                            out["cpu"] = cpu_by_process(self.driver.pgid)
                        out.setdefault(name, round(e.get("end", e["t"]) - launched, 2))
                if all(p in out for p in PHASES):
                    break
                time.sleep(0.1)
            else:
                raise RuntimeError(f"driver run {run}: no first micro-batch in {timeout:.0f}s; see {self.dir}")
        finally:
            if hog_proc is not None:
                hog_proc.kill()
                hog_proc.wait()
        if not self.jvm_cache.ready() and "RecordDynamicDumpInfo" in java_options and out.get("jvm_pid"):
            ok, detail = self.jvm_cache.dump(out["jvm_pid"])
            out["archive_made"] = detail if ok else f"failed: {detail}"
        time.sleep(1.0)
        self.driver.kill()
        return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench restart", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--restarts", type=int, default=6, help="restarts after the first run, half of them with the hog")
    ap.add_argument("--wave", type=int, default=20_000, help="input events written before each run")
    ap.add_argument("--per-trigger", type=int, default=20_000, help="maxOffsetsPerTrigger (the demo's)")
    ap.add_argument("--trigger-ms", type=int, default=1000)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--no-hog", action="store_true", help="every restart on a quiet machine")
    ap.add_argument("--no-jvm-cache", action="store_true", help="do not use the demo's JVM class-data archive")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--keep", action="store_true", help="keep the run's directory (logs, progress.jsonl)")
    args = ap.parse_args(argv)

    from oncelog.process import BrokerProcess

    console = Console()
    root = tempfile.mkdtemp(prefix="oncelog-bench-restart-")
    broker = BrokerProcess(os.path.join(root, "broker"), fsync="always", log_path=os.path.join(root, "broker.log"))
    broker.start()
    runs: list[dict] = []
    ok = False
    t0 = time.time()
    try:
        bench = Restarts(root, broker.bootstrap, args)
        first = bench.cycle(hog=False)
        console.print(f"first run (cold): {json.dumps({k: first[k] for k in PHASES})}"
                      + (f"; JVM archive made: {first['archive_made']}" if "archive_made" in first else ""))
        for i in range(args.restarts):
            hog = not args.no_hog and i % 2 == 1
            r = bench.cycle(hog=hog)
            runs.append(r)
            console.print(f"restart {i + 1} ({'hog' if hog else 'quiet'}): "
                          + ", ".join(f"{p} {r[p]:.1f}s" for p in PHASES)
                          + f"; CPU seconds by process until the first batch: {r['cpu']}")
        ok = True
    finally:
        if "bench" in locals() and bench.driver.alive():
            bench.driver.kill()
        broker.stop()
        if ok and not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            console.print(f"[red]failed[/]: logs kept in {root}" if not ok else f"logs kept in {root}")

    cols = ["quiet"] + ([] if args.no_hog else ["hog"])
    med = {c: {p: statistics.median(r[p] for r in runs if r["hog"] == (c == "hog")) for p in PHASES} for c in cols}
    table = Table(title=f"driver restart (SIGKILL of the process group) to committed output: median of "
                        f"{args.restarts} restarts, {args.master}, {args.wave:,}-event waves, trigger {args.trigger_ms} ms")
    table.add_column("seconds after launch")
    for c in cols:
        table.add_column("quiet machine" if c == "quiet" else "one CPU hog", justify="right")
    for p in PHASES:
        table.add_row(p, *[f"{med[c][p]:.1f}" for c in cols])
    table.add_row("target for first batch", *[f"<= {TARGETS[c]:.0f}" for c in cols])
    console.print(table)
    verdicts = [f"{c}: {med[c]['first batch']:.1f}s "
                f"{'[green]meets[/]' if med[c]['first batch'] <= TARGETS[c] else '[red]misses[/]'} <= {TARGETS[c]:.0f}s"
                for c in cols]
    console.print("first committed micro-batch after a driver restart, " + "; ".join(verdicts)
                  + f" ({time.time() - t0:.0f}s in all)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"config": vars(args), "first_run": first, "restarts": runs, "medians": med}, f, indent=2)
    return 0
