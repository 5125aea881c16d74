"""Where a CI run's CPU goes, by kind of process: what ``cpu_s`` (tests/cpu_accounting.py) cannot see.

A test's ``cpu_s`` misses the processes nobody in its tree reaps — a Spark driver's JVM when the test
SIGKILLs the driver's process group (its parent dies with it), a session's Apache Kafka between
tests — about two fifths of one run's CPU. This looks at the whole machine instead: every
``--every`` seconds it reads ``/proc/*/stat`` and keeps, per process, the last CPU seen (utime +
stime, its own only: a parent's cutime would count its children twice; less what a process had
spent before the census began), with the process's kind
told from its command line (:func:`kind`). A process that lives less than ``--every`` seconds is
seen in part or not at all; what those are (broker starts, short clients) is ``cpu_s``'s strength.

    python -m tests.cpu_census watch census.json [--every 2] [--until PID]   # beside a run
    python -m tests.cpu_census report census.json                            # CPU by kind

Reading ~500 stat files every 2 s costs ~0.5% of a core."""

from __future__ import annotations

import argparse
import json
import os
import signal
import time

from .cpu_accounting import TICK, stat_fields


def _stat(pid: str) -> tuple[int, float] | None:
    """(ppid, own CPU seconds) of ``pid``, or None if it is gone."""
    fields = stat_fields(pid)
    return None if fields is None else (int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK)


def _cmdline(pid: str) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def kind(argv: list[str], parent: list[str]) -> str:
    """A process's kind, from its command line and its parent's."""
    if not argv:
        return "kernel threads, or gone before a look"
    exe = os.path.basename(argv[0])
    joined = " ".join(argv)
    if exe.startswith("java"):
        if "SparkSubmit" in joined:
            # (not "pytest" anywhere in the parent's line: a driver's arguments name pytest's tmp dirs)
            in_worker = "exec(eval(sys.stdin.readline()))" in " ".join(parent) or parent[1:3] == ["-m", "pytest"]
            return "spark JVM: the tests' session" if in_worker else "spark JVM: a driver subprocess's"
        if "kafka.Kafka" in argv:
            return "apache kafka broker"
        for i, a in enumerate(argv[1:], 1):  # the main class: the first word not an option or its value
            if not a.startswith("-") and argv[i - 1] not in ("-cp", "-classpath", "--class-path"):
                return f"java: {a.rsplit('.', 1)[-1]}"
        return "java: ?"
    if exe.startswith("python"):
        if "-m" in argv:
            module = argv[argv.index("-m") + 1] if argv.index("-m") + 1 < len(argv) else "?"
            if module == "oncelog" and "serve" in argv:
                return "oncelog broker (serve)"
            if module.startswith(("pyspark", "oncelog.spark.workerdaemon")):
                return "spark python worker"
            if module == "pytest":
                return "pytest controller"
            return f"python -m {module}"
        if "exec(eval(sys.stdin.readline()))" in joined:
            return "pytest worker"
        return f"python {os.path.basename(argv[1]) if len(argv) > 1 else ''}"
    return exe


def watch(out: str, every: float, until: int | None) -> None:
    seen: dict[str, dict] = {}
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    me = str(os.getpid())
    started = time.monotonic()
    last_write = started
    first_sweep = True
    while not stop:
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or pid == me:
                continue
            st = _stat(pid)
            if st is None:
                continue
            ppid, cpu = st
            row = seen.get(pid)
            if row is None:  # a new process (a pid reused much later would merge: rare in a run)
                # what ran before the census is not the run's: the first sweep's figures are the base
                row = seen[pid] = {"kind": kind(_cmdline(pid), _cmdline(str(ppid))), "cpu": cpu,
                                   "base": cpu if first_sweep else 0.0}
            row["cpu"] = max(row["cpu"], cpu)
        first_sweep = False
        if time.monotonic() - last_write > 30:
            _write(out, seen, time.monotonic() - started)
            last_write = time.monotonic()
        if until is not None and _stat(str(until)) is None:
            break
        time.sleep(every)
    _write(out, seen, time.monotonic() - started)


def _write(out: str, seen: dict, seconds: float) -> None:
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"seconds": seconds, "processes": seen}, f)
    os.replace(tmp, out)


def report(path: str) -> None:
    with open(path) as f:
        doc = json.load(f)
    by: dict[str, list[float]] = {}
    for row in doc["processes"].values():
        k = by.setdefault(row["kind"], [0.0, 0])
        k[0] += row["cpu"] - row["base"]
        k[1] += 1
    total = sum(v[0] for v in by.values())
    print(f"{total:9.0f} CPU-s seen over {doc['seconds']:.0f} s ({total / doc['seconds']:.2f} cores)")
    for name, (cpu, n) in sorted(by.items(), key=lambda kv: -kv[1][0])[:50]:
        print(f"{cpu:9.1f} CPU-s {n:6d}  {name}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("watch")
    w.add_argument("out")
    w.add_argument("--every", type=float, default=2.0)
    w.add_argument("--until", type=int, help="stop when this pid is gone")
    r = sub.add_parser("report")
    r.add_argument("path")
    a = ap.parse_args()
    if a.cmd == "watch":
        watch(a.out, a.every, a.until)
    else:
        report(a.path)
