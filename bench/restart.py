"""``python -m bench restart``: how long a SIGKILLed Spark driver takes to commit output again,
the connector's job beside the same job on Spark's own Kafka source and sink, in one run.

The demo's job (:mod:`oncelog.pipeline.job`: enrichment through the streaming sink, totals on
RocksDB through ``foreachBatch``), one broker (``--fsync always``, as the demo), a class-data
archive of the driver JVM per job (made after its first run if missing; the demo's for ours).
Paths, each with its own topics and checkpoints, on the same broker:

* ``oncelog``: the connector's source and sinks (Python workers), the installed PySpark: what
  ``oncelog demo`` runs;
* ``spark-kafka``: the same queries on Spark's own Kafka source and sink (``format("kafka")``,
  read_committed; ``spark-sql-kafka-0-10`` fetched with mvn): the JVM-only path, no Python
  worker. Its connector must match Spark's version and Maven Central has none for every PySpark
  (none for 4.3.0): it then runs on the nearest pair served, in a PySpark virtualenv in the
  cache (:mod:`oncelog.spark_kafka_jars`);
* ``oncelog@<version>``: when that version is not the installed one, the connector's job on
  that same PySpark too, so that one ratio compares the two paths on one Spark.

Each cycle of a path:

1. a wave of ``--wave`` input events is written (transactional, committed) while no driver runs;
2. the driver is launched on the checkpoints of the path's runs before it;
3. timed from the launch: the SparkSession up (``session``), both queries started
   (``started``), the end of the first micro-batch with input of ``enrich`` (``first batch``:
   output visible to read_committed readers; the demo's "driver restart to first micro-batch")
   and of ``totals``; at the first batch, the CPU seconds of the driver's process group by
   process, and when each process started;
4. the driver's process group is SIGKILLed one second later.

The first run of each path (cold: new checkpoints, maybe no archive yet) is reported apart.
Rounds run every path once, in turn; rounds alternate between a quiet machine and one with a
CPU hog (one busy Python process, as the demo's "with other work on the machine"), so both
columns come from the same run; medians are reported. Targets: the connector's restart at most
1.2x Spark's own Kafka job's (the ratio of the medians and the median of the rounds'
ratios, a round's cells being seconds apart), and its median first batch <= 8 s quiet, <= 20 s
with the hog.
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

from .pipeline import _progress, wait_archive

PHASES = ("session", "started", "first batch", "totals first batch")
TARGETS = {"quiet": 8.0, "hog": 20.0}
RATIO_TARGET = 1.2  # the connector's restart / Spark's own Kafka job's
OURS, KAFKA = "oncelog", "spark-kafka"


def _boot_epoch() -> float:
    """time.time() of the kernel's clock-tick zero (for /proc/<pid>/stat start times)."""
    with open("/proc/uptime") as f:
        return time.time() - float(f.read().split()[0])


def _kind(args: list[str]) -> str:
    if any(a.endswith("/java") for a in args[:1]):
        return "jvm"
    if "oncelog.pipeline.job" in args:
        return "driver python"
    if len(args) > 3 and args[1] == "-m" and args[-1].startswith("pyspark."):
        # a worker daemon (pyspark.daemon, or the connector's oncelog.spark.workerdaemon) and its
        # forks: named by the worker module they run
        return args[-1].rsplit(".", 1)[-1]
    if len(args) > 2 and args[1] == "-m":
        return args[2].rsplit(".", 1)[-1]
    return "other"


def processes(sid: int) -> list[dict]:
    """The live processes of session ``sid``: kind (the JVM, the driver's Python, each PySpark
    worker module's daemon and its forks), start time (time.time()) and CPU seconds used so far."""
    from oncelog.pipeline.procs import session_members

    tick = os.sysconf("SC_CLK_TCK")
    boot = _boot_epoch()
    out = []
    for pid in session_members(sid):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        out.append({"pid": pid, "ppid": int(fields[1]), "kind": _kind([a.decode(errors="replace") for a in argv if a]),
                    "start": boot + int(fields[19]) / tick, "cpu": (int(fields[11]) + int(fields[12])) / tick})
    return out


def cpu_by_process(sid: int) -> dict[str, float]:
    """CPU seconds (user + system) used so far by the live processes of session ``sid``, by kind:
    the JVM, the driver's Python, and each PySpark worker module (daemon and its forks)."""
    out: dict[str, float] = {}
    for p in processes(sid):
        out[p["kind"]] = round(out.get(p["kind"], 0.0) + p["cpu"], 2)
    return out


def _events(path: str, run: int) -> list[dict]:
    """The progress lines of driver run ``run``."""
    return [e for e in _progress(path) if e.get("run") == run]


class Restarts:
    """One path: its topics, checkpoints, driver and JVM archive; :meth:`cycle` times one run."""

    def __init__(self, root: str, bootstrap: str, args, name: str = OURS, *, python: str | None = None,
                 jars: list[str] | None = None, spark_kafka: bool = False) -> None:
        from oncelog.pipeline.config import PipelineConfig
        from oncelog.pipeline.events import create_topics
        from oncelog.pipeline.job import JobConfig
        from oncelog.pipeline.jvmcache import JvmCache
        from oncelog.pipeline.procs import SparkDriver

        self.args = args
        self.name = name
        self.bootstrap = bootstrap
        self.dir = os.path.join(root, name.replace("@", "-"))
        os.makedirs(self.dir)
        tag = "" if name == OURS else f"{name.replace('@', '-')}-"
        self.input = f"{tag}orders"
        create_topics(bootstrap, {self.input: 4, f"{tag}orders-enriched": 4, f"{tag}customer-window-totals": 2})
        self.progress = os.path.join(self.dir, "progress.jsonl")
        python = python or sys.executable
        cfg = PipelineConfig(master=args.master, trigger_ms=args.trigger_ms, sink=KAFKA if spark_kafka else OURS)
        job = JobConfig(cfg, bootstrap=bootstrap, input=self.input, enriched=f"{tag}orders-enriched",
                        totals=f"{tag}customer-window-totals", checkpoint=os.path.join(self.dir, "checkpoints"),
                        app_id=f"bench-restart-{tag}x", max_per_trigger=args.per_trigger, progress=self.progress,
                        drain=os.path.join(self.dir, "drain"), jars=list(jars or []),
                        source="kafka" if spark_kafka else "oncelog")
        self.driver = SparkDriver(job, env={**os.environ, "PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python},
                                  log_path=os.path.join(self.dir, "driver.log"), python=python)
        # Each job its own archive: the classes a JVM loads differ between the two paths.
        self.jvm_cache = JvmCache.locate(not args.no_jvm_cache, python=python, flavor="kafka" if spark_kafka else "")
        self.waves = 0

    def produce_wave(self) -> None:
        from oncelog.pipeline.events import Generator, GeneratorConfig

        self.waves += 1
        gen = Generator(self.bootstrap, self.input,
                        GeneratorConfig(records=self.args.wave, txn_size=500, seed=self.waves,
                                        transactional_id=f"bench-restart-gen-{self.name}-{self.waves}"))
        stats = gen.run()
        if stats.error:
            raise RuntimeError(f"the generator failed: {stats.error}")

    def cycle(self, hog: bool, timeout: float = 300.0) -> dict:
        """One driver run: launch, time its phases, SIGKILL it."""
        self.produce_wave()
        java_options = self.jvm_cache.java_options()
        recording = self.jvm_cache.recording(java_options)
        hog_proc = subprocess.Popen([sys.executable, "-c", "while 1: pass"]) if hog else None
        try:
            launched = time.time()
            self.driver.start(java_options=java_options, archive=self.jvm_cache.path if recording else "")
            run = self.driver.runs
            out: dict = {"path": self.name, "run": run, "hog": hog, "archive": "SharedArchiveFile" in java_options}
            deadline = launched + timeout
            while time.time() < deadline:
                if not self.driver.alive():
                    raise RuntimeError(f"{self.name}: driver run {run} exited ({self.driver.poll()}); "
                                       f"see {self.dir}/driver.log")
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
                            procs = processes(self.driver.pgid)
                            out["cpu"] = {}
                            for p in procs:
                                out["cpu"][p["kind"]] = round(out["cpu"].get(p["kind"], 0.0) + p["cpu"], 2)
                            # When each process started (seconds after launch): the chain of
                            # Python worker starts a restart waits for.
                            out["processes"] = sorted(
                                ([round(p["start"] - launched, 2), p["kind"], round(p["cpu"], 2)] for p in procs),
                                key=lambda x: x[0])
                        out.setdefault(name, round(e.get("end", e["t"]) - launched, 2))
                if all(p in out for p in PHASES):
                    break
                time.sleep(0.1)
            else:
                raise RuntimeError(f"{self.name}: driver run {run}: no first micro-batch in {timeout:.0f}s; "
                                   f"see {self.dir}")
        finally:
            if hog_proc is not None:
                hog_proc.kill()
                hog_proc.wait()
        if recording:
            made = wait_archive(self.progress, self.driver)
            out["archive_made"] = (made["detail"] if made["ok"] else f"failed: {made['detail']}") if made else "none"
            if made and made["ok"]:
                self.jvm_cache.saved()
        time.sleep(1.0)
        if out.get("archive"):  # did the JVM map it (the driver says so after its first batch)
            deadline = time.time() + 20
            while "archive_used" not in out and time.time() < deadline and self.driver.alive():
                out.update({"archive_used": e.get("used") for e in _events(self.progress, run) if e.get("event") == "jvm"})
                time.sleep(0.1)
        self.driver.kill()
        return out


def _paths(args, console) -> list[tuple[str, dict]]:
    """(name, Restarts keyword arguments) of each path to run."""
    paths = [(OURS, {})]
    if args.no_spark_kafka:
        return paths
    from oncelog.spark_kafka_jars import runtime

    rt = runtime(quiet=False)
    if rt.note:
        console.print(f"Spark's Kafka connector: {rt.note}")
    import pyspark

    if rt.spark_version != pyspark.__version__:
        paths.append((f"{OURS}@{rt.spark_version}", {"python": rt.python}))
    paths.append((KAFKA, {"python": rt.python, "jars": rt.jars, "spark_kafka": True}))
    return paths


def _median(runs: list[dict], phase: str) -> float | None:
    vals = [r[phase] for r in runs if phase in r]
    return statistics.median(vals) if vals else None


def summarize(runs: list[dict], names: list[str], cols: list[str]) -> dict:
    """Medians by path and column, and the ratios of each of our paths to Spark's Kafka job:
    ratio of the medians and median of the rounds' ratios (first batch)."""
    med = {n: {c: {p: _median([r for r in runs if r["path"] == n and r["hog"] == (c == "hog")], p) for p in PHASES}
               for c in cols} for n in names}
    ratios: dict = {}
    if KAFKA in names:
        for n in names:
            if n == KAFKA:
                continue
            ratios[n] = {}
            for c in cols:
                theirs = med[KAFKA][c]["first batch"]
                rounds = [a["first batch"] / b["first batch"] for a in runs for b in runs
                          if a["path"] == n and b["path"] == KAFKA and a["round"] == b["round"]
                          and a["hog"] == b["hog"] == (c == "hog")]
                ratios[n][c] = {"of_medians": med[n][c]["first batch"] / theirs if theirs else None,
                                "median_of_rounds": statistics.median(rounds) if rounds else None}
    return {"medians": med, "ratios": ratios}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench restart", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--restarts", type=int, default=6, help="rounds of restarts after the first runs (every path "
                                                            "once a round), half of them with the hog")
    ap.add_argument("--wave", type=int, default=20_000, help="input events written before each run")
    ap.add_argument("--per-trigger", type=int, default=20_000, help="maxOffsetsPerTrigger (the demo's)")
    ap.add_argument("--trigger-ms", type=int, default=1000)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--no-hog", action="store_true", help="every restart on a quiet machine")
    ap.add_argument("--no-jvm-cache", action="store_true", help="no class-data archive of the driver JVM")
    ap.add_argument("--no-spark-kafka", action="store_true",
                    help="only the connector's job (no Spark Kafka connector from Maven Central, no PySpark "
                         "virtualenv for it)")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--keep", action="store_true", help="keep the run's directory (logs, progress.jsonl)")
    args = ap.parse_args(argv)

    from oncelog.process import BrokerProcess

    console = Console()
    paths = _paths(args, console)
    root = tempfile.mkdtemp(prefix="oncelog-bench-restart-")
    broker = BrokerProcess(os.path.join(root, "broker"), fsync="always", log_path=os.path.join(root, "broker.log"))
    broker.start()
    benches: dict[str, Restarts] = {}
    firsts: dict[str, dict] = {}
    runs: list[dict] = []
    ok = False
    t0 = time.time()
    try:
        for name, kw in paths:
            benches[name] = b = Restarts(root, broker.bootstrap, args, name, **kw)
            first = firsts[name] = b.cycle(hog=False)
            console.print(f"{name}: first run (cold): {json.dumps({k: first[k] for k in PHASES})}"
                          + (f"; JVM archive made: {first['archive_made']}" if "archive_made" in first else ""))
        for i in range(args.restarts):
            hog = not args.no_hog and i % 2 == 1
            for name, b in benches.items():
                r = b.cycle(hog=hog)
                r["round"] = i
                runs.append(r)
                console.print(f"restart {i + 1} {name} ({'hog' if hog else 'quiet'}): "
                              + ", ".join(f"{p} {r[p]:.1f}s" for p in PHASES)
                              + ("" if r.get("archive_used", True) else " [red](the JVM did not map its archive)[/]")
                              + f"; CPU seconds by process until the first batch: {r['cpu']}")
        ok = True
    finally:
        for b in benches.values():
            if b.driver.alive():
                b.driver.kill()
        broker.stop()
        if ok and not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            console.print(f"[red]failed[/]: logs kept in {root}" if not ok else f"logs kept in {root}")

    names = [n for n, _ in paths]
    cols = ["quiet"] + ([] if args.no_hog else ["hog"])
    summary = summarize(runs, names, cols)
    med, ratios = summary["medians"], summary["ratios"]
    table = Table(title=f"driver restart (SIGKILL of the process group) to committed output: median of "
                        f"{args.restarts} rounds, {args.master}, {args.wave:,}-event waves, trigger {args.trigger_ms} ms")
    table.add_column("seconds after launch")
    for n in names:
        for c in cols:
            table.add_column(f"{n}, {'quiet' if c == 'quiet' else 'one CPU hog'}", justify="right")
    for p in PHASES:
        table.add_row(p, *[f"{med[n][c][p]:.1f}" if med[n][c][p] is not None else "" for n in names for c in cols])
    for n, by_col in ratios.items():
        table.add_row(f"{n} / {KAFKA}, first batch", *[
            f"{by_col[c]['of_medians']:.2f}x ({by_col[c]['median_of_rounds']:.2f}x)" if n2 == n else ""
            for n2 in names for c in cols])
    console.print(table)

    def verdict(ok: bool) -> str:
        return "[green]meets[/]" if ok else "[red]misses[/]"

    ours = med[OURS]
    console.print("first committed micro-batch after a driver restart, " + "; ".join(
        f"{c}: {ours[c]['first batch']:.1f}s {verdict(ours[c]['first batch'] <= TARGETS[c])} <= {TARGETS[c]:.0f}s"
        for c in cols) + f" ({time.time() - t0:.0f}s in all)")
    for n, by_col in ratios.items():
        console.print(f"{n} restart / Spark's own Kafka job's ({KAFKA}, PySpark of {benches[KAFKA].driver.python}), "
                      "ratio of medians (median of the rounds' ratios): " + "; ".join(
                          f"{c} {r['of_medians']:.2f}x ({r['median_of_rounds']:.2f}x) "
                          f"{verdict(max(r['of_medians'], r['median_of_rounds']) <= RATIO_TARGET)} <= {RATIO_TARGET}x"
                          for c, r in by_col.items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"config": vars(args), "paths": names, "first_runs": firsts,
                       # the connector's path under its old keys (first_run, medians) too
                       "first_run": firsts[OURS], "restarts": runs, "medians": med[OURS],
                       "medians_by_path": med, "ratios": ratios}, f, indent=2)
    return 0
