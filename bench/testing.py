"""``python -m bench testing``: what a Kafka test suite costs with ``oncelog.testing`` and with the
alternatives: a broker's start-to-ready time, and the sample suite's wall time on each broker.

1. Start to ready. ``oncelog.testing.Broker(kind="thread")`` (in this process) and
   ``Broker(kind="process")`` (a child forked from the warm fork server; the first start of a
   process also starts that server, so it is reported on its own): ``--ready-n`` starts each,
   from ``Broker(...)`` to ``start()`` returning (it accepts connections), then ``stop()``
   (not timed). A one-node Apache Kafka 4.4 (``oncelog.tools.apache_kafka.KafkaCluster``, the
   project's Kafka tooling: storage format, JVM start, a Metadata answer) ``--kafka-n`` times.
2. The sample suite (tests/sample_suite, its ``any_kafka`` tests; its one Spark test left out,
   Spark's start is not a broker's cost) in a pytest process of its own (``-n 0``), timed from
   the process's start to its end (``wall``), with the sum of its tests' times (junit) beside:
   ``session`` — the plugin's session broker (``oncelog_broker``, the default);
   ``fresh`` — a new broker process per test (``ONCELOG_SAMPLE_FRESH=1``, the suite's switch);
   ``kafka`` — a one-node Apache Kafka started for the run (its start time is added) and passed
   as ``--kafka-bootstrap``;
   ``mock`` — librdkafka's mock cluster (``test.mock.num.brokers=1``) in a helper process, passed
   as ``--kafka-bootstrap``: how many of the suite's tests pass on it (the suite's waits lowered
   to ``--mock-timeout`` seconds, ``ONCELOG_SAMPLE_TIMEOUT``, and each test stopped after twice
   that, ``ONCELOG_SAMPLE_TEST_LIMIT``, so that its failures end: calls the mock cluster does not
   answer would otherwise wait out the clients' own 30 s timeouts, test after test).

Targets: ready in ≤ 0.5 s in-process and ≤ 1 s as a subprocess; the suite ≥ 5× faster than on
Apache Kafka. Compare within one run: the machine is shared.

The session run also reads the CPU of its pytest process's threads before its last teardown
(bench/testing_probe.py): the broker's threads' CPU bounds what the broker added to the wall, so
``wall - broker CPU`` is what a broker taking no time at all would still leave, and Kafka's total
over it is the most any broker could reach with this suite (printed beside the target).
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
import xml.etree.ElementTree as ET

from rich.console import Console
from rich.table import Table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUITE = "tests/sample_suite"
SPARK_TEST = "tests/sample_suite/test_spark_read.py::test_spark_reads_the_committed_records"
TARGETS = ("session", "fresh", "kafka", "mock")
READY_TARGET = {"thread": 0.5, "process": 1.0}
SUITE_TARGET = 5.0  # the suite on oncelog's session broker, this many times faster than on Apache Kafka


def p90(values: list[float]) -> float:
    if len(values) < 2:
        return values[0]
    return statistics.quantiles(values, n=10, method="inclusive")[8]


# ---------------------------------------------------------------------------------------------
# 1. Start to ready


def ready_times(kind: str, n: int) -> list[float]:
    """Seconds from ``Broker(kind=...)`` to ``start()`` returning, ``n`` times (stop not timed)."""
    from oncelog.testing import Broker

    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        broker = Broker(kind=kind).start()
        times.append(time.perf_counter() - t0)
        broker.stop()
        broker.close()
    return times


def kafka_ready_times(n: int) -> list[float]:
    """Seconds from ``KafkaCluster(nodes=1)`` to ``start()`` returning (Kafka fetched beforehand)."""
    from oncelog.tools.apache_kafka import KafkaCluster, fetch

    fetch()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        cluster = KafkaCluster(nodes=1).start()
        times.append(time.perf_counter() - t0)
        cluster.stop(graceful=False)
    return times


# ---------------------------------------------------------------------------------------------
# 2. The sample suite


def run_suite(label: str, work: str, *, bootstrap: str | None = None, env: dict | None = None,
              select: str | None = None, timeout: float = 900.0, probe: bool = False) -> dict:
    """The sample suite's ``any_kafka`` tests in a pytest process of its own: wall seconds, the
    junit counts and the sum of the tests' times; with ``probe``, the CPU of the pytest process's
    threads before the last teardown (bench/testing_probe.py), under ``probe``."""
    junit = os.path.join(work, f"junit-{label}.xml")
    cmd = [sys.executable, "-m", "pytest", SUITE, "-m", "any_kafka", "-o", "addopts=", "-n", "0",
           "-p", "no:cacheprovider", "-q", "--deselect", SPARK_TEST, f"--junitxml={junit}"]
    probe_out = os.path.join(work, f"probe-{label}.json") if probe else None
    if probe:
        cmd += ["-p", "bench.testing_probe"]
    if bootstrap:
        cmd.append(f"--kafka-bootstrap={bootstrap}")
    if select:
        cmd += ["-k", select]
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    child_env.update(env or {})
    if probe:
        child_env["ONCELOG_PROBE_OUT"] = probe_out
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=child_env, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - t0
    result = {"label": label, "wall": wall, "returncode": proc.returncode, "tests": 0, "failures": 0, "errors": 0,
              "skipped": 0, "tests_time": None, "failed": []}
    if os.path.exists(junit):
        root = ET.parse(junit).getroot()
        suite = root if root.tag == "testsuite" else root.find("testsuite")
        for k in ("tests", "failures", "errors", "skipped"):
            result[k] = int(suite.get(k))
        cases = suite.findall("testcase")
        result["tests_time"] = sum(float(c.get("time", 0)) for c in cases)
        result["cases"] = {f"{c.get('classname').rsplit('.', 1)[-1]}::{c.get('name')}": float(c.get("time", 0))
                           for c in cases}
        result["failed"] = [f"{c.get('classname').rsplit('.', 1)[-1]}::{c.get('name')}" for c in cases
                            if c.find("failure") is not None or c.find("error") is not None]
        causes: dict[str, int] = {}
        for c in cases:
            bad = c.find("failure") if c.find("failure") is not None else c.find("error")
            if bad is not None:
                cause = (bad.get("message") or "").splitlines()[0][:160] if bad.get("message") else "?"
                causes[cause] = causes.get(cause, 0) + 1
        result["causes"] = dict(sorted(causes.items(), key=lambda kv: -kv[1]))
    else:
        result["output"] = (proc.stdout + proc.stderr)[-3000:]
    result["passed"] = result["tests"] - result["failures"] - result["errors"] - result["skipped"]
    if probe_out and os.path.exists(probe_out):
        with open(probe_out) as f:
            result["probe"] = json.load(f)
    return result


def broker_cpu(probe: dict) -> float:
    """CPU seconds of every thread that may be the session broker's: all but pytest's main thread
    and librdkafka's (``rdk:…``). Its event loop's thread is ``oncelog-broker-…``; uvloop's and
    libuv's workers, executors and any thread without a Python name count too, so the bound this
    gives errs on the broker's side (a broker taking no time would save at most this much)."""
    return sum(cpu for name, cpu in probe["threads"].items() if name != "main" and not name.startswith("rdk:"))


class MockCluster:
    """librdkafka's mock cluster in a helper process (``python -m bench.testing --mock-cluster``):
    its broker's address, until the process is stopped."""

    def __enter__(self) -> str:
        self.proc = subprocess.Popen([sys.executable, "-m", "bench.testing", "--mock-cluster"], cwd=ROOT,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline().strip()
        if not line.startswith("bootstrap "):
            self.proc.kill()
            raise RuntimeError(f"the mock cluster did not start: {line!r}")
        return line.split()[1]

    def __exit__(self, *exc) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def serve_mock_cluster() -> int:
    """The helper: a Producer with ``test.mock.num.brokers=1`` holds the mock cluster; print its
    broker's address and stay alive until stdin closes or a signal ends the process."""
    import signal

    import confluent_kafka as ck

    producer = ck.Producer({"test.mock.num.brokers": 1, "log_level": 0})
    brokers = producer.list_topics(timeout=10).brokers
    address = ",".join(f"{b.host}:{b.port}" for b in brokers.values())
    print(f"bootstrap {address}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        producer.poll(1.0)


def suite_target(target: str, work: str, args) -> dict:
    if target == "session":
        return run_suite("session", work, select=args.select, probe=True)
    if target == "fresh":
        return run_suite("fresh", work, env={"ONCELOG_SAMPLE_FRESH": "1"}, select=args.select)
    if target == "kafka":
        from oncelog.tools.apache_kafka import KafkaCluster, fetch

        fetch()
        t0 = time.perf_counter()
        cluster = KafkaCluster(nodes=1).start()
        start = time.perf_counter() - t0
        try:
            res = run_suite("kafka", work, bootstrap=cluster.bootstrap, select=args.select)
        finally:
            cluster.stop(graceful=False)
        res["start"] = start
        return res
    if target == "mock":
        with MockCluster() as bootstrap:
            return run_suite("mock", work, bootstrap=bootstrap, select=args.select,
                             env={"ONCELOG_SAMPLE_TIMEOUT": str(args.mock_timeout),
                                  "ONCELOG_SAMPLE_TEST_LIMIT": str(2 * args.mock_timeout)})
    raise ValueError(target)


# ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[2:] if argv is None else argv
    if argv[:1] == ["--mock-cluster"]:
        return serve_mock_cluster()
    ap = argparse.ArgumentParser(prog="python -m bench testing", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--parts", default="ready,suite", help="comma-separated: ready, suite")
    ap.add_argument("--kinds", default="thread,process,kafka",
                    help="start-to-ready of: thread, process (oncelog.testing.Broker), kafka (Apache Kafka, 1 node)")
    ap.add_argument("--ready-n", type=int, default=10, help="starts per oncelog kind")
    ap.add_argument("--kafka-n", type=int, default=3, help="starts of Apache Kafka")
    ap.add_argument("--targets", default=",".join(TARGETS), help=f"the suite's runs: {', '.join(TARGETS)}")
    ap.add_argument("--select", default=None, help="only the sample tests matching this -k expression")
    ap.add_argument("--mock-timeout", type=float, default=3.0,
                    help="the suite's waits on the mock cluster (ONCELOG_SAMPLE_TIMEOUT), seconds; a test is "
                         "stopped after twice that")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 3 starts per oncelog kind, 1 of Kafka, the suite on session and fresh only")
    ap.add_argument("--json", default=None, help="write the results here")
    args = ap.parse_args(argv)
    if args.quick:
        args.ready_n, args.kafka_n = 3, 1
        if args.targets == ",".join(TARGETS):
            args.targets = "session,fresh"
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    unknown = ((set(targets) - set(TARGETS)) | (set(kinds) - {"thread", "process", "kafka"})
               | (parts - {"ready", "suite"}))
    if unknown:
        ap.error(f"unknown: {sorted(unknown)}")
    console = Console() if sys.stdout.isatty() else Console(width=150)
    console.print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} cores")
    results: dict = {"ready": {}, "suite": {}, "load_start": os.getloadavg()}
    ok = True

    if "ready" in parts:
        for kind in kinds:
            times = kafka_ready_times(args.kafka_n) if kind == "kafka" else ready_times(kind, args.ready_n)
            results["ready"][kind] = times
            console.print(f"ready {kind}: " + " ".join(f"{t:.3f}" for t in times))
        table = Table(title="Start to ready (seconds)")
        for col in ("broker", "N", "first", "median", "p90", "max", "target (median)", "median / Kafka's"):
            table.add_column(col, justify="left" if col == "broker" else "right")
        kafka_median = statistics.median(results["ready"]["kafka"]) if "kafka" in results["ready"] else None
        names = {"thread": 'Broker(kind="thread")', "process": 'Broker(kind="process")',
                 "kafka": "Apache Kafka 4.4, 1 node"}
        for kind, times in results["ready"].items():
            med = statistics.median(times)
            target = READY_TARGET.get(kind)
            met = "" if target is None else (f"≤ {target:g} s: met" if med <= target else f"≤ {target:g} s: NOT met")
            ratio = f"{med / kafka_median:.3f}×" if kafka_median and kind != "kafka" else ""
            table.add_row(names[kind], str(len(times)), f"{times[0]:.3f}", f"{med:.3f}", f"{p90(times):.3f}",
                          f"{max(times):.3f}", met, ratio)
        console.print(table)

    if "suite" in parts:
        work = tempfile.mkdtemp(prefix="bench-testing-")
        try:
            for target in targets:
                res = suite_target(target, work, args)
                results["suite"][target] = res
                console.print(f"suite {target}: wall {res['wall']:.1f} s"
                              + (f" + Kafka's start {res['start']:.1f} s" if "start" in res else "")
                              + f"; {res['passed']} passed, {res['failures']} failed, {res['errors']} errors, "
                                f"{res['skipped']} skipped of {res['tests']}")
                if target != "mock" and (res["tests"] == 0 or res["passed"] != res["tests"]):
                    ok = False
                    console.print(f"  failed: {res['failed'] or res.get('output', '')}")
        finally:
            shutil.rmtree(work, ignore_errors=True)
        table = Table(title=f"The sample suite ({SUITE}, -m any_kafka, Spark's test left out, pytest -n 0)")
        for col in ("broker", "tests", "passed", "failed", "broker start s", "wall s", "tests' time s",
                    "median test s", "total s", "Kafka's total / this"):
            table.add_column(col, justify="left" if col == "broker" else "right")
        names = {"session": "oncelog, session broker (oncelog_broker)", "fresh": "oncelog, a broker process per test",
                 "kafka": "Apache Kafka 4.4, 1 node per session", "mock": "librdkafka mock cluster"}
        total = {t: r["wall"] + r.get("start", 0.0) for t, r in results["suite"].items()}
        for target, res in results["suite"].items():
            ratio = f"{total['kafka'] / total[target]:.2f}×" if "kafka" in total and target != "kafka" else ""
            tt = f"{res['tests_time']:.1f}" if res["tests_time"] is not None else ""
            med = f"{statistics.median(res['cases'].values()):.3f}" if res.get("cases") else ""
            table.add_row(names[target], str(res["tests"]), str(res["passed"]), str(res["failures"] + res["errors"]),
                          f"{res['start']:.1f}" if "start" in res else "", f"{res['wall']:.1f}", tt, med,
                          f"{total[target]:.1f}", ratio)
        console.print(table)
        for target, res in results["suite"].items():
            if res.get("causes"):
                console.print(f"why tests failed on {names[target]}:")
                for cause, n in res["causes"].items():
                    console.print(f"  {n:3d} × {cause}")
        if "kafka" in total and "session" in total:
            r = total["kafka"] / total["session"]
            console.print(f"the suite on the session broker vs Apache Kafka (its start included): {r:.2f}× "
                          f"(target ≥ {SUITE_TARGET:g}×: {'met' if r >= SUITE_TARGET else 'NOT met'})")
            s_cases, k_cases = results["suite"]["session"].get("cases", {}), results["suite"]["kafka"].get("cases", {})
            both = sorted(set(s_cases) & set(k_cases), key=lambda n: k_cases[n] - s_cases[n], reverse=True)
            probe = results["suite"]["session"].get("probe")
            if probe:
                wall = results["suite"]["session"]["wall"]
                bcpu = broker_cpu(probe)
                floor = wall - bcpu
                results["suite"]["session"]["bound"] = {"broker_cpu": bcpu, "floor": floor,
                                                        "best_ratio": total["kafka"] / floor}
                console.print(f"where the session run's {wall:.1f} s went: the pytest process used {probe['process_cpu']:.1f} "
                              f"CPU-s ({probe['threads'].get('main', 0.0):.1f} in its main thread: pytest and the "
                              f"clients), the threads that may be the broker's {bcpu:.2f}; the rest is waiting, mostly the clients' "
                              f"own timers. A broker that took no time at all would leave ≥ {floor:.1f} s: "
                              f"at most {total['kafka'] / floor:.2f}× Kafka's total with this suite")
            if both:
                console.print("the tests where Apache Kafka took longest beside oncelog (seconds, oncelog / Kafka):")
                for name in both[:5]:
                    console.print(f"  {name}: {s_cases[name]:.2f} / {k_cases[name]:.2f}")
    results["load_end"] = os.getloadavg()
    console.print(f"load average at end: {' '.join(f'{x:.2f}' for x in results['load_end'])}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
