"""``python -m bench metrics``: what the Prometheus metrics endpoint costs produce throughput.

Two oncelog broker processes from this tree, the same in all but one flag: "on" is started with
``--metrics-listener 127.0.0.1:0`` (the hot path counts: oncelog/metrics), "off" without it
(``broker.metrics`` is None: nothing is counted). Both get the same ``--fsync`` (``never`` by
default: the broker's CPU is then the produce path's bottleneck and a cost on it shows most; the
produce suite runs both ``never`` and ``always``) and the same ``--topics`` x
``--topic-partitions`` topics with one record in each partition, so a scrape of "on" has the
per-topic and per-partition series a real broker has.

The same confluent-kafka (librdkafka) producer workload is driven at each, interleaved: every
round runs each case once on each broker, the order of the two swapped from round to round (off
on, on off, ...), so that the drift of a shared 2-core machine falls on both alike; a case's
figure is the median of its rounds, and its ratio on/off is taken within each round (median,
min, max over the rounds). During "on"'s cells a Prometheus-like scraper (a thread of this
process: Prometheus's Accept and Accept-Encoding: gzip headers) GETs /metrics every
``--scrape-interval`` seconds: scrapes cost the broker too, on its own event loop, and are part
of what is measured. Each cell's topic is new and deleted after it.

Cases (``--cases``):

* ``batched``: 1 KB records, the produce suite's librdkafka settings (bench.modes.BASE_PRODUCER:
  linger.ms=5, queue.buffering.max.messages=10000) with acks=all;
* ``small``: 100 B records, linger.ms=0 and batch.num.messages=1: one record per Produce
  request, where the per-request cost of counting shows most.

Figures per cell: records/s (acknowledged records over the producers' wall time), broker CPU
µs per record (/proc), and for "on" the Produce requests counted by its own metrics (records
per request) and its messagesin counter, checked against the acknowledged records; every
cell's high watermarks are checked against them too. Scrapes: duration (client-side, GET to
last byte) and size (on the wire, gzip, and uncompressed), idle before the rounds and under
load during them, and the broker CPU of an idle scrape. ``--py-spy DIR`` adds one more round,
not counted, with py-spy recording each broker during its cells (raw collapsed stacks) and a
summary of the samples in oncelog/metrics.
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

from rich.console import Console
from rich.table import Table

from .brokers import RunningBroker
from .modes import BASE_PRODUCER, Target
from .workers import WorkerPool

MODES = ("off", "on")
CASES = {
    "batched": {"size": 1024, "producer": {**BASE_PRODUCER, "acks": "all"},
                "label": "1 KB, acks=all, linger.ms=5 (the produce suite's)"},
    "small": {"size": 100, "producer": {**BASE_PRODUCER, "acks": "all", "linger.ms": 0, "batch.num.messages": 1},
              "label": "100 B, acks=all, linger.ms=0, batch.num.messages=1"},
}
# What Prometheus 2.x/3.x sends (scrape_protocols' default order), and gzip.
PROMETHEUS_ACCEPT = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
                     "text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
_PRODUCE_REQUESTS = re.compile(r'^kafka_network_requestmetrics_requests_total\{request="Produce",[^}]*\} (\S+)', re.M)


# ----------------------------------------------------------------------------------- scraping

def scrape(url: str, timeout: float = 10.0, keep_text: bool = False) -> dict:
    """One GET of ``url`` as Prometheus makes it: seconds to the last byte, bytes on the wire and
    uncompressed, and the number of samples (lines that are not comments)."""
    u = urllib.parse.urlsplit(url)
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        conn.request("GET", u.path or "/metrics", headers={"Accept": PROMETHEUS_ACCEPT, "Accept-Encoding": "gzip",
                                                          "User-Agent": "Prometheus/3.0 (oncelog bench)"})
        resp = conn.getresponse()
        body = resp.read()
        status, encoding = resp.status, resp.getheader("Content-Encoding")
    finally:
        conn.close()
    seconds = time.perf_counter() - t0
    if status != 200:
        raise RuntimeError(f"GET {url}: HTTP {status}")
    text = (gzip.decompress(body) if encoding == "gzip" else body).decode()
    out = {"at": time.monotonic(), "seconds": seconds, "wire_bytes": len(body), "bytes": len(text),
           "samples": sum(1 for line in text.splitlines() if line and not line.startswith("#"))}
    if keep_text:
        out["text"] = text
    return out


def produce_requests(text: str) -> int:
    return int(sum(float(v) for v in _PRODUCE_REQUESTS.findall(text)))


def messages_in(text: str, topic: str) -> int:
    m = re.search(r'^kafka_server_brokertopicmetrics_messagesin_total\{topic="' + re.escape(topic) + r'"\} (\S+)',
                  text, re.M)
    return int(float(m.group(1))) if m else 0


class Scraper:
    """A thread scraping ``url`` every ``interval`` seconds (on a fixed schedule, as Prometheus
    does) until :meth:`stop`, which returns every scrape's figures (or its error)."""

    def __init__(self, url: str, interval: float) -> None:
        self.url, self.interval = url, interval
        self.samples: list[dict] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-scraper", daemon=True)

    def start(self) -> "Scraper":
        self._thread.start()
        return self

    def _run(self) -> None:
        due = time.monotonic()
        while not self._stop.wait(max(0.0, due - time.monotonic())):
            try:
                self.samples.append(scrape(self.url))
            except Exception as exc:  # noqa: BLE001 - reported with the cell
                self.samples.append({"error": str(exc)})
            due += self.interval
            while due < time.monotonic():  # a scrape longer than the interval: skip, as Prometheus does
                due += self.interval

    def stop(self) -> list[dict]:
        self._stop.set()
        self._thread.join(30)
        return self.samples


# ------------------------------------------------------------------------------------ brokers

class MetricsBroker(RunningBroker):
    """An oncelog broker of this tree, with or without the metrics endpoint."""

    def __init__(self, mode: str, work_dir: str, partitions: int, fsync: str) -> None:
        super().__init__(Target(f"oncelog-{fsync}-metrics-{mode}", "oncelog", fsync), work_dir, partitions)
        self.mode = mode
        self.metrics_url: str | None = None

    def start(self) -> "MetricsBroker":
        from oncelog.process import BrokerProcess

        extra = ["--num-partitions", str(self.partitions)]
        if self.mode == "on":
            extra += ["--metrics-listener", "127.0.0.1:0"]
        b = BrokerProcess(os.path.join(self.work_dir, f"broker-{self.mode}"), fsync=self.target.fsync,
                          extra_args=extra)
        b.start()
        self._oncelog, self.proc, self.bootstrap, self.log_path = b, b.proc, b.bootstrap, b.log_path
        self.metrics_url = b.metrics_url
        if (self.mode == "on") != (self.metrics_url is not None):
            raise RuntimeError(f"broker {self.mode}: metrics URL {self.metrics_url!r}")
        return self


def populate(broker: RunningBroker, topics: int, partitions: int) -> float:
    """``topics`` topics of ``partitions`` partitions with one record in each; returns seconds."""
    import confluent_kafka as ck
    from confluent_kafka.admin import NewTopic

    t0 = time.monotonic()
    names = [f"idle-{i:03d}" for i in range(topics)]
    if names:
        futures = broker._admin().create_topics([NewTopic(n, partitions, 1) for n in names], operation_timeout=120)
        for f in futures.values():
            f.result(timeout=180)
        p = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50})
        for n in names:
            for part in range(partitions):
                p.produce(n, b"x" * 100, partition=part)
        if p.flush(120):
            raise RuntimeError("populate: records not delivered")
    return time.monotonic() - t0


def high_watermarks(bootstrap: str, topic: str, partitions: int) -> int:
    import confluent_kafka as ck

    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-metrics-check", "enable.auto.commit": False})
    try:
        total = 0
        for p in range(partitions):
            low, high = c.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=30)
            total += high - low
        return total
    finally:
        c.close()


# ---------------------------------------------------------------------------------------- a cell

def run_cell(pool: WorkerPool, broker: MetricsBroker, case: str, topic: str, args, *, scrape_interval: float | None,
             duration: float, profile: str | None = None) -> dict:
    from .stats import produce_figures

    spec = CASES[case]
    cell: dict = {"case": case, "mode": broker.mode, "topic": topic, "errors": []}
    broker.create_topic(topic)
    on = broker.mode == "on"
    before = scrape(broker.metrics_url, keep_text=True) if on else None
    spy = None
    if profile:
        spy = subprocess.Popen([_py_spy(), "record", "--pid", str(broker.proc.pid), "--rate", "250", "--nonblocking",
                                "--format", "raw", "--duration", str(max(1, int(duration))), "-o", profile],
                               stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        time.sleep(0.5)  # attached before the producers start
    scraper = Scraper(broker.metrics_url, scrape_interval).start() if on and scrape_interval else None
    cpu0 = broker.cpu_seconds()
    job = {"kind": "produce", "bootstrap": broker.bootstrap, "topic": topic, "size": spec["size"],
           "duration": duration, "rate": 0, "producer": spec["producer"], "txn_commit_ms": None}
    results = pool.run([job] * args.processes, timeout=duration + 180)
    cpu = broker.cpu_seconds() - cpu0
    scrapes = scraper.stop() if scraper else []
    if spy is not None:
        spy.wait(60)
        cell["profile"] = profile
    reports = []
    for i, (err, res) in enumerate(results):
        if err:
            cell["errors"].append(f"producer {i}: {err}")
        else:
            reports.append(res)
    if reports:
        f = produce_figures(reports, spec["size"], cpu)
        cell.update({k: f[k] for k in ("records", "sent", "failed", "unflushed", "seconds", "records_per_s",
                                       "mb_per_s", "latency_p50_ms", "latency_p99_ms", "broker_cpu_s",
                                       "broker_cpu_pct", "broker_cpu_us_per_record")})
        if f["failed"] or f["unflushed"] or f["sent"] != f["records"]:
            cell["errors"].append(f"{f['sent']} sent, {f['records']} acknowledged, {f['failed']} failed, "
                                  f"{f['unflushed']} not flushed")
        cell["in_log"] = high_watermarks(broker.bootstrap, topic, broker.partitions)
        if cell["in_log"] != f["records"]:
            cell["errors"].append(f"the log holds {cell['in_log']} records, {f['records']} were acknowledged")
    if on:
        after = scrape(broker.metrics_url, keep_text=True)
        cell["produce_requests"] = produce_requests(after["text"]) - produce_requests(before["text"])
        cell["metrics_messages_in"] = messages_in(after["text"], topic)
        if cell.get("records"):
            cell["records_per_request"] = cell["records"] / max(cell["produce_requests"], 1)
            if cell["metrics_messages_in"] != cell["records"]:
                cell["errors"].append(f"messagesin says {cell['metrics_messages_in']}, {cell['records']} acknowledged")
        cell["scrapes"] = scrapes
        cell["scrape_errors"] = [s["error"] for s in scrapes if "error" in s]
    err = broker.delete_topic(topic)
    if err:
        cell["errors"].append(f"delete topic: {err}")
    return cell


def _py_spy() -> str:
    here = os.path.join(os.path.dirname(sys.executable), "py-spy")
    return here if os.path.exists(here) else (shutil.which("py-spy") or "py-spy")


def profile_summary(path: str, top: int = 12) -> dict:
    """Of py-spy's raw (collapsed) stacks: samples in all, those with a frame in oncelog/metrics
    (by the outermost such function), and those under a scrape (MetricsEndpoint._answer)."""
    total = in_metrics = scrape_samples = 0
    by_function: dict[str, int] = {}
    try:
        with open(path) as f:
            for line in f:
                stack, _, n = line.rstrip().rpartition(" ")
                if not n.isdigit():
                    continue
                n = int(n)
                total += n
                frames = stack.split(";")
                mine = [fr for fr in frames if "oncelog/metrics/" in fr]
                if mine:
                    in_metrics += n
                    name = mine[0].split(" (")[0]
                    by_function[name] = by_function.get(name, 0) + n
                    if any("MetricsEndpoint." in fr for fr in mine):  # _serve, _answer: a scrape
                        scrape_samples += n
    except OSError as exc:
        return {"error": str(exc)}
    ranked = sorted(by_function.items(), key=lambda kv: -kv[1])[:top]
    return {"samples": total, "in_metrics": in_metrics, "in_scrapes": scrape_samples,
            "metrics_share": in_metrics / total if total else None,
            "scrape_share": scrape_samples / total if total else None,
            "by_function": {k: v for k, v in ranked}}


# ------------------------------------------------------------------------------------ the report

def summarize(cells: list[dict], idle: dict, cases: list[str]) -> dict:
    out = {}
    for case in cases:
        rounds = sorted({c["round"] for c in cells if c["case"] == case})
        per = {m: [c for c in cells if c["case"] == case and c["mode"] == m and c.get("records_per_s")] for m in MODES}
        ratios, cpu_ratios = [], []
        for r in rounds:
            pair = {c["mode"]: c for c in cells if c["case"] == case and c["round"] == r and c.get("records_per_s")}
            if len(pair) == 2:
                ratios.append(pair["on"]["records_per_s"] / pair["off"]["records_per_s"])
                cpu_ratios.append(pair["on"]["broker_cpu_us_per_record"] / pair["off"]["broker_cpu_us_per_record"])
        s = {"label": CASES[case]["label"], "rounds": len(rounds), "ratios": ratios, "cpu_ratios": cpu_ratios}
        for m in MODES:
            v = per[m]
            s[m] = {"records_per_s": [c["records_per_s"] for c in v],
                    "median_records_per_s": statistics.median([c["records_per_s"] for c in v]) if v else None,
                    "median_cpu_us_per_record": statistics.median([c["broker_cpu_us_per_record"] for c in v]) if v else None,
                    "median_broker_cpu_pct": statistics.median([c["broker_cpu_pct"] for c in v]) if v else None,
                    "median_latency_p50_ms": statistics.median([c["latency_p50_ms"] for c in v]) if v else None}
        on = per["on"]
        if on:
            s["records_per_request"] = statistics.median([c["records_per_request"] for c in on])
        if ratios:
            s["ratio_median"], s["ratio_min"], s["ratio_max"] = statistics.median(ratios), min(ratios), max(ratios)
            s["cpu_ratio_median"] = statistics.median(cpu_ratios)
        loaded = [x for c in on for x in c.get("scrapes", []) if "seconds" in x]
        if loaded:
            secs = sorted(x["seconds"] for x in loaded)
            s["scrapes_under_load"] = {"count": len(secs), "median_ms": statistics.median(secs) * 1000,
                                       "max_ms": secs[-1] * 1000,
                                       "median_bytes": statistics.median(x["bytes"] for x in loaded),
                                       "median_wire_bytes": statistics.median(x["wire_bytes"] for x in loaded)}
        out[case] = s
    return out


def print_report(console: Console, doc: dict) -> None:
    a = doc["args"]
    console.print(f"[bold]Metrics on vs off[/bold]: oncelog --fsync {a['fsync']}, {a['processes']} producer processes, "
                  f"{a['partitions']} partitions per cell topic, {a['rounds']} interleaved rounds of "
                  f"{a['duration']:g} s cells, scrape every {a['scrape_interval']:g} s during 'on' cells; "
                  f"{a['topics']} x {a['topic_partitions']} idle topics on both brokers")
    t = Table(title="produce records/s, medians of the rounds (ratio taken within each round)")
    for col in ("case", "off rec/s", "on rec/s", "on/off median", "min", "max", "by round",
                "CPU µs/rec off / on", "on/off CPU/rec", "rec/request"):
        t.add_column(col, justify="left" if col in ("case", "by round") else "right")
    for case, s in doc["summary"].items():
        if "ratio_median" not in s:
            t.add_row(s["label"], "-", "-", "-", "-", "-", "-", "-", "-", "-")
            continue
        t.add_row(s["label"], f"{s['off']['median_records_per_s']:,.0f}", f"{s['on']['median_records_per_s']:,.0f}",
                  f"{s['ratio_median']:.3f}", f"{s['ratio_min']:.3f}", f"{s['ratio_max']:.3f}",
                  " ".join(f"{r:.2f}" for r in s["ratios"]),
                  f"{s['off']['median_cpu_us_per_record']:.2f} / {s['on']['median_cpu_us_per_record']:.2f}",
                  f"{s['cpu_ratio_median']:.3f}", f"{s.get('records_per_request', 0):.1f}")
    console.print(t)
    t = Table(title="scrapes of the 'on' broker (Prometheus headers: OpenMetrics, gzip)")
    for col in ("when", "scrapes", "median ms", "max ms", "bytes (uncompressed)", "bytes on the wire", "samples",
                "broker CPU ms/scrape"):
        t.add_column(col, justify="left" if col == "when" else "right")
    i = doc["idle_scrape"]
    if i.get("count"):
        t.add_row("idle", str(i["count"]), f"{i['median_ms']:.1f}", f"{i['max_ms']:.1f}", f"{i['bytes']:,}",
                  f"{i['wire_bytes']:,}", f"{i['samples']:,}", f"{i['broker_cpu_ms_per_scrape']:.1f}")
    for case, s in doc["summary"].items():
        u = s.get("scrapes_under_load")
        if u:
            t.add_row(f"under load ({case})", str(u["count"]), f"{u['median_ms']:.1f}", f"{u['max_ms']:.1f}",
                      f"{u['median_bytes']:,.0f}", f"{u['median_wire_bytes']:,.0f}", "", "")
    console.print(t)
    for cell in doc["cells"]:
        for e in cell["errors"] + cell.get("scrape_errors", []):
            console.print(f"[red]round {cell['round']} {cell['case']} {cell['mode']}: {e}")
    for name, p in doc.get("profiles", {}).items():
        if p.get("samples"):
            console.print(f"py-spy {name}: {p['samples']} samples, {100 * p['metrics_share']:.1f}% in oncelog/metrics "
                          f"({100 * p['scrape_share']:.1f}% scrapes); " +
                          ", ".join(f"{k} {100 * v / p['samples']:.1f}%" for k, v in p["by_function"].items()))


def _machine() -> dict:
    from .report import machine

    info = machine()
    try:
        info["loadavg_start"] = os.getloadavg()
    except OSError:
        pass
    return info


# ---------------------------------------------------------------------------------------- main

def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench metrics", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--cases", default=",".join(CASES), help=f"of: {', '.join(CASES)}")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds (each: every case on off and on)")
    p.add_argument("--duration", type=float, default=5.0, help="seconds of producing per cell")
    p.add_argument("--warmup", type=float, default=2.0, help="seconds of unrecorded producing per broker and case")
    p.add_argument("--processes", "-p", type=int, default=2, help="producer client processes")
    p.add_argument("--partitions", type=int, default=3, help="partitions of each cell's topic")
    p.add_argument("--fsync", default="never", help="both brokers' --fsync (the produce suite runs never and always)")
    p.add_argument("--topics", type=int, default=100, help="idle topics on both brokers (series a scrape holds)")
    p.add_argument("--topic-partitions", type=int, default=10, help="partitions of each idle topic")
    p.add_argument("--scrape-interval", type=float, default=1.0, help="seconds between scrapes of 'on' (0: none)")
    p.add_argument("--idle-scrapes", type=int, default=10, help="scrapes of the idle 'on' broker before the rounds")
    p.add_argument("--py-spy", metavar="DIR", help="one more round, not counted, with py-spy recording each broker")
    p.add_argument("--work-dir", help="broker data and logs (default: a new directory under $TMPDIR, removed)")
    p.add_argument("--json", metavar="PATH", help="write every figure here")
    return p


def idle_scrapes(broker: MetricsBroker, n: int) -> dict:
    if n <= 0:
        return {"count": 0}
    scrape(broker.metrics_url)  # the first builds the registry's imports
    cpu0 = broker.cpu_seconds()
    got = [scrape(broker.metrics_url) for _ in range(n)]
    cpu = broker.cpu_seconds() - cpu0
    secs = sorted(s["seconds"] for s in got)
    return {"count": n, "median_ms": statistics.median(secs) * 1000, "max_ms": secs[-1] * 1000,
            "bytes": got[-1]["bytes"], "wire_bytes": got[-1]["wire_bytes"], "samples": got[-1]["samples"],
            "broker_cpu_ms_per_scrape": cpu / n * 1000}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[2:] if argv is None else argv)
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    for c in cases:
        if c not in CASES:
            raise SystemExit(f"unknown case {c!r}; known: {', '.join(CASES)}")
    console = Console() if sys.stdout.isatty() else Console(width=160)
    work = args.work_dir or tempfile.mkdtemp(prefix="oncelog-bench-metrics-")
    os.makedirs(work, exist_ok=True)
    started = time.time()
    meta = _machine()
    brokers = {m: MetricsBroker(m, work, args.partitions, args.fsync) for m in MODES}
    pool = WorkerPool(args.processes).start()
    cells: list[dict] = []
    profiles: dict = {}
    try:
        for m, b in brokers.items():
            b.start()
            secs = populate(b, args.topics, args.topic_partitions)
            console.print(f"broker {m}: {b.bootstrap}{' metrics ' + b.metrics_url if b.metrics_url else ''}; "
                          f"{args.topics} x {args.topic_partitions} topics in {secs:.1f} s", highlight=False)
        idle = idle_scrapes(brokers["on"], args.idle_scrapes)
        seq = 0

        def cell(r: int, case: str, mode: str, duration: float, interval: float | None, profile=None) -> dict:
            nonlocal seq
            seq += 1
            c = run_cell(pool, brokers[mode], case, f"bench-metrics-{seq}-{case}-{mode}", args,
                         scrape_interval=interval, duration=duration, profile=profile)
            c["round"] = r
            return c

        if args.warmup > 0:
            for case in cases:
                for m in MODES:
                    cell(-1, case, m, args.warmup, None)
        for r in range(args.rounds):
            for case in cases:
                for m in (MODES if r % 2 == 0 else MODES[::-1]):
                    c = cell(r, case, m, args.duration, args.scrape_interval or None)
                    cells.append(c)
                    console.print(f"round {r + 1} {case:7} {m:3}: {c.get('records_per_s', 0):>10,.0f} rec/s, "
                                  f"broker {c.get('broker_cpu_pct', 0):.0f}% CPU, "
                                  f"{c.get('broker_cpu_us_per_record', 0):.2f} µs/rec"
                                  + (f", {len(c['scrapes'])} scrapes, {c.get('records_per_request', 0):.1f} rec/req"
                                     if m == "on" else "")
                                  + (f" [red]{c['errors']}" if c["errors"] else ""), highlight=False)
        if args.py_spy:
            os.makedirs(args.py_spy, exist_ok=True)
            for case in cases:
                for m in MODES:
                    path = os.path.join(os.path.abspath(args.py_spy), f"{case}-{m}.txt")
                    c = cell(args.rounds, case, m, args.duration, args.scrape_interval or None, profile=path)
                    profiles[f"{case}-{m}"] = {"path": path, "records_per_s": c.get("records_per_s"),
                                               **profile_summary(path)}
    finally:
        pool.close()
        for b in brokers.values():
            b.stop()
        if not args.work_dir:
            shutil.rmtree(work, ignore_errors=True)
    for c in cells:
        for s in c.get("scrapes", []):
            s.pop("text", None)
    try:
        meta["loadavg_end"] = os.getloadavg()
    except OSError:
        pass
    doc = {"command": "python -m bench metrics " + " ".join(sys.argv[2:] if argv is None else argv),
           "machine": meta, "started_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)),
           "seconds": time.time() - started, "args": vars(args), "cases": {c: CASES[c] for c in cases},
           "idle_scrape": idle, "summary": summarize(cells, idle, cases), "cells": cells, "profiles": profiles}
    print_report(console, doc)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1, default=str)
    return 1 if any(c["errors"] for c in cells) else 0


if __name__ == "__main__":
    sys.exit(main())
