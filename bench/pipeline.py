"""``python -m bench pipeline``: the demo's pipeline end to end, exactly-once against at-least-once.

The job is ``oncelog demo``'s (:mod:`oncelog.pipeline.job`: enrichment through the streaming
sink, per-customer/per-window totals on RocksDB through ``foreachBatch``), the same trigger and
``maxOffsetsPerTrigger`` for both guarantees, one broker (``--fsync always``, as the demo), no
chaos. Per guarantee, a fresh driver process and fresh topics:

1. warm-up: a few thousand events, until their output is visible (JVM, Python workers, first
   micro-batches: not measured);
2. throughput: ``--records`` events written as fast as the transactional producer goes; input
   rows/s = committed events / (last micro-batch of both queries done - first event sent). Both
   queries must have read everything: the slower one decides;
3. latency (freshness): events at a steady ``--rate`` for ``--latency-seconds``; for each
   enriched output, the time from its input's produce call (the record's CreateTime, carried in
   the output as ``in_ts_ms``) to the moment a read_committed consumer got it; p50, p95, p99.

Rounds alternate the order of the two guarantees; medians across rounds are reported. Targets:
exactly-once throughput at least 0.85x at-least-once; exactly-once latency p95 at most 2 trigger
intervals, and at most 1.3x the at-least-once p95 of the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

from rich.console import Console
from rich.table import Table

GUARANTEES = ("exactly-once", "at-least-once")
LATENCY = ("latency_p50_ms", "latency_p95_ms", "latency_p99_ms")


def _progress(path: str) -> list[dict]:
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


def wait_archive(progress: str, driver, timeout: float = 180.0) -> dict | None:
    """The current driver run's ``archive`` line: started with ``archive=``, it writes its JVM's
    class-data archive after its first batch with input (:mod:`oncelog.pipeline.jvmcache`)."""
    deadline = time.time() + timeout
    while time.time() < deadline and driver.alive():
        for e in _progress(progress):
            if e.get("run") == driver.runs and e.get("event") == "archive":
                return e
        time.sleep(0.2)
    return None


def _rows_done(events: list[dict], query: str) -> tuple[int, float]:
    """Rows read by ``query`` so far and when its last batch with input finished."""
    rows, last = 0, 0.0
    for e in events:
        if e.get("event") == "batch" and e.get("query") == query:
            rows += e.get("rows", 0)
            if e.get("rows", 0):
                last = max(last, e.get("end", e["t"]))
    return rows, last


class Cell:
    """One guarantee: a driver, its topics, an observer of its enriched output."""

    def __init__(self, root: str, bootstrap: str, guarantee: str, args) -> None:
        from oncelog.pipeline.config import PipelineConfig
        from oncelog.pipeline.events import create_topics
        from oncelog.pipeline.job import JobConfig
        from oncelog.pipeline.jvmcache import JvmCache
        from oncelog.pipeline.observe import OutputObserver
        from oncelog.pipeline.procs import SparkDriver

        self.guarantee = guarantee
        self.bootstrap = bootstrap
        tag = "eos" if guarantee == "exactly-once" else "alo"
        stamp = int(time.time() * 1000)
        self.dir = os.path.join(root, f"{tag}-{stamp}")
        os.makedirs(self.dir)
        # Fresh topics and a fresh txnAppId per cell: a new checkpoint's batch ids start at 0 again,
        # and the commit log would rightly call batch 0 of a reused txnAppId stale.
        self.input, self.enriched, self.totals = f"orders-{tag}-{stamp}", f"enriched-{tag}-{stamp}", f"totals-{tag}-{stamp}"
        create_topics(bootstrap, {self.input: 4, self.enriched: 4, self.totals: 2})
        self.progress = os.path.join(self.dir, "progress.jsonl")
        self.drain = os.path.join(self.dir, "drain")
        self.driver = SparkDriver(
            JobConfig(PipelineConfig(master=args.master, guarantee=guarantee, trigger_ms=args.trigger_ms),
                      bootstrap=bootstrap, input=self.input, enriched=self.enriched, totals=self.totals,
                      checkpoint=os.path.join(self.dir, "ck"), app_id=f"bench-{tag}-{stamp}",
                      max_per_trigger=args.per_trigger, progress=self.progress, drain=self.drain),
            env={**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable},
            log_path=os.path.join(self.dir, "driver.log"))
        # The demo's JVM class-data archive, if there is one (start-up is not measured here).
        self.jvm_cache = JvmCache.locate(not args.no_jvm_cache)
        self.java_options = self.jvm_cache.java_options()
        self.observer = OutputObserver(bootstrap, self.enriched, 4, latency=True)
        self.committed = 0

    def produce(self, records: int, rate: float | None, txn_size: int, seed: int) -> float:
        """Write events; returns when the first was sent (time.time())."""
        from oncelog.pipeline.events import Generator, GeneratorConfig

        gen = Generator(self.bootstrap, self.input,
                        GeneratorConfig(records=records, txn_size=txn_size, rate=rate, seed=seed,
                                        transactional_id=f"bench-gen-{self.input}"))
        t0 = time.time()
        stats = gen.run()
        self.committed += stats.committed
        return t0

    def wait_caught_up(self, timeout: float) -> float:
        """Until both queries read every committed input; returns when the later one finished."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.driver.poll() is not None:
                raise RuntimeError(f"{self.guarantee}: the driver exited ({self.driver.poll()}); see {self.dir}/driver.log")
            events = _progress(self.progress)
            done = [_rows_done(events, q) for q in ("enrich", "totals")]
            if all(rows >= self.committed for rows, _t in done) and self.observer.count >= self.committed:
                return max(t for _rows, t in done)
            time.sleep(0.2)
        raise RuntimeError(f"{self.guarantee}: the pipeline did not catch up in {timeout:.0f}s; see {self.dir}")

    def run(self, args, console) -> dict:
        from oncelog.pipeline.observe import percentiles

        self.observer.start()
        self.driver.start(java_options=self.java_options,
                          archive=self.jvm_cache.path if self.jvm_cache.recording(self.java_options) else "")
        try:
            t = time.time()
            self.produce(args.warmup, None, 500, args.seed)
            self.wait_caught_up(300)
            console.print(f"  {self.guarantee}: warm after {time.time() - t:.0f}s (driver start, first batches)")
            if self.jvm_cache.recording(self.java_options):
                made = wait_archive(self.progress, self.driver)
                if made and made.get("ok"):
                    self.jvm_cache.saved()
                console.print("  JVM class-data archive for the next starts: "
                              + (f"{'saved, ' if made.get('ok') else 'failed: '}{made.get('detail')}" if made else "none"))
            # Throughput: a burst, read at the pipeline's own pace.
            before = self.committed
            start = self.produce(args.records, None, 1000, args.seed + 1)
            end = self.wait_caught_up(900)
            rows = self.committed - before
            seconds = end - start
            console.print(f"  {self.guarantee}: {rows:,} rows in {seconds:.1f}s")
            # Latency: a steady stream below capacity, small transactions (10 per second).
            lat_from = time.time()
            self.produce(int(args.rate * args.latency_seconds), args.rate, max(1, int(args.rate / 10)),
                         args.seed + 2)
            self.wait_caught_up(300)
            lats = [ms for ms, at in zip(self.observer.latencies_ms, self.observer.latency_times) if at >= lat_from]
            pct = percentiles(lats, (50, 95, 99))
            # The enrichment query's micro-batches of the latency phase: where the time goes.
            steady = [e for e in _progress(self.progress) if e.get("event") == "batch" and e.get("query") == "enrich"
                      and e.get("rows") and e.get("end", 0) - e.get("ms", 0) / 1000 >= lat_from]
            phases = {k: statistics.median((e.get("durations") or {}).get(k, 0) for e in steady) if steady else None
                      for k in ("addBatch", "walCommit", "commitOffsets", "latestOffset", "queryPlanning")}
            return {"guarantee": self.guarantee, "rows": rows, "seconds": round(seconds, 2),
                    "rows_per_s": rows / seconds if seconds > 0 else 0.0,
                    "latency_p50_ms": pct["p50"], "latency_p95_ms": pct["p95"], "latency_p99_ms": pct["p99"],
                    "latency_samples": len(lats),
                    "batch_ms_p50": statistics.median(e["ms"] for e in steady) if steady else None,
                    "batch_phases_ms_p50": phases}
        finally:
            open(self.drain, "w").close()
            if self.driver.wait(90) is None:
                self.driver.kill()
            self.observer.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench pipeline", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000, help="events of the throughput burst")
    ap.add_argument("--warmup", type=int, default=5_000, help="events before measuring")
    ap.add_argument("--rate", type=float, default=2_000, help="events/s of the latency phase")
    ap.add_argument("--latency-seconds", type=float, default=20)
    ap.add_argument("--trigger-ms", type=int, default=1000, help="micro-batch trigger, both guarantees")
    ap.add_argument("--per-trigger", type=int, default=20_000, help="maxOffsetsPerTrigger, both guarantees")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--rounds", type=int, default=2, help="rounds (the order of the guarantees alternates)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-jvm-cache", action="store_true", help="do not use the demo's JVM class-data archive")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)

    from oncelog.process import BrokerProcess

    console = Console()
    root = tempfile.mkdtemp(prefix="oncelog-bench-pipeline-")
    broker = BrokerProcess(os.path.join(root, "broker"), fsync="always", log_path=os.path.join(root, "broker.log"))
    broker.start()
    results: dict[str, list[dict]] = {g: [] for g in GUARANTEES}
    t0 = time.time()
    ok = False
    try:
        for rnd in range(args.rounds):
            order = GUARANTEES if rnd % 2 == 0 else tuple(reversed(GUARANTEES))
            for g in order:
                console.print(f"round {rnd + 1}, {g}")
                results[g].append(Cell(root, broker.bootstrap, g, args).run(args, console))
        ok = True
    finally:
        broker.stop()
        if ok:
            shutil.rmtree(root, ignore_errors=True)
        else:
            console.print(f"[red]failed[/]: logs kept in {root}")

    def med(g: str, key: str) -> float:
        return statistics.median(r[key] for r in results[g])

    summary = {g: {k: med(g, k) for k in ("rows_per_s",) + LATENCY} for g in GUARANTEES}
    eos, alo = summary["exactly-once"], summary["at-least-once"]
    ratio = eos["rows_per_s"] / alo["rows_per_s"] if alo["rows_per_s"] else float("nan")
    table = Table(title=f"pipeline end to end ({args.records:,}-event burst; latency at {args.rate:,.0f} events/s), "
                        f"{args.master}, trigger {args.trigger_ms} ms, fsync always, {args.rounds} round(s)")
    table.add_column("sinks")
    table.add_column("input rows/s", justify="right")
    for key in LATENCY:
        table.add_column(f"latency {key.split('_')[1]}", justify="right")
    for g in GUARANTEES:
        s = summary[g]
        table.add_row(g, f"{s['rows_per_s']:,.0f}", *[f"{s[k]:,.0f} ms" for k in LATENCY])
    table.add_row("exactly-once / at-least-once", f"{ratio:.2f}x",
                  *[f"{eos[k] / alo[k]:.2f}x" if alo[k] else "" for k in LATENCY])
    console.print(table)

    def verdict(ok: bool) -> str:
        return "[green]meets[/]" if ok else "[red]misses[/]"

    p95, bound = eos["latency_p95_ms"], 2 * args.trigger_ms
    console.print(f"exactly-once throughput is {ratio:.2f}x at-least-once: {verdict(ratio >= 0.85)} the 0.85x target")
    console.print(f"exactly-once freshness: p95 {p95:,.0f} ms from produce to read_committed visibility, "
                  f"{verdict(p95 <= bound)} <= 2 triggers ({bound:,} ms); "
                  f"{p95 / alo['latency_p95_ms']:.2f}x the at-least-once p95, "
                  f"{verdict(p95 <= 1.3 * alo['latency_p95_ms'])} <= 1.3x ({time.time() - t0:.0f}s in all)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"config": vars(args), "summary": summary, "throughput_ratio": ratio, "runs": results}, f,
                      indent=2)
    return 0
