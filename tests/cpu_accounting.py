"""CPU seconds a test cost, its processes' included: what a CI run on two busy cores is made of.

The CI run is CPU-bound (both cores ~91% busy throughout, docs/testing.md), so its length is the
CPU its tests spend, not their wall time: a test that sleeps costs nothing, a broker start ~0.45
CPU-s, a JVM several. Each test's figure is recorded as the junit property ``cpu_s`` (pytest
``--junitxml``; ``python -m tests.cpu_accounting JUNIT.xml`` sums them by file).

What a test costs: this process's own CPU, plus every descendant's. A child reaped during the test
is counted by ``RUSAGE_CHILDREN`` (its whole life, its reaped children's too); one still alive (a
session's Spark JVM, a session's Apache Kafka, a broker a fixture keeps) is read from
``/proc/PID/stat`` (utime + stime + its reaped children's cutime + cstime) at both ends, and only
the difference counts. A descendant alive at the start and reaped during the test is counted whole
by ``RUSAGE_CHILDREN``, so its CPU before the start is taken off again. Not counted: a process that
left the tree (daemonised, re-parented to init) before it was read. Descendants are found through
``/proc/PID/task/TID/children`` (no walk over every process of the machine: ~0.1 ms a test)."""

from __future__ import annotations

import os
import resource
import sys

import pytest

TICK = os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(c) for c in f.read().split()]
        except (OSError, ValueError):
            continue
    return out


def stat_fields(pid: int | str) -> list[str] | None:
    """``/proc/PID/stat`` from its third field on (after the command name, which may hold spaces
    and parentheses), or None if the process is gone: [0] is the state, [1] the ppid, [11:15]
    utime, stime, cutime, cstime in clock ticks (:data:`TICK` a second)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _cpu_of(pid: int) -> float | None:
    """utime + stime + cutime + cstime of ``pid``, in seconds; None if it is gone."""
    fields = stat_fields(pid)
    return None if fields is None else sum(int(x) for x in fields[11:15]) / TICK


def descendants_cpu() -> dict[int, float]:
    """CPU seconds of each live descendant of this process, by pid."""
    out: dict[int, float] = {}
    todo = _children(os.getpid())
    while todo:
        pid = todo.pop()
        if pid in out:
            continue
        cpu = _cpu_of(pid)
        if cpu is None:
            continue
        out[pid] = cpu
        todo += _children(pid)
    return out


class Meter:
    """``Meter()`` at a test's start, ``.stop()`` at its end: the CPU seconds spent meanwhile."""

    def __init__(self) -> None:
        self.own = self._rusage()
        self.live = descendants_cpu()

    @staticmethod
    def _rusage() -> float:
        me = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime

    def stop(self) -> float:
        own = self._rusage() - self.own
        live = descendants_cpu()
        return own + sum(live.values()) - sum(self.live.values())


class Plugin:
    """Records each test's CPU (setup, call and teardown) as its ``cpu_s`` junit property."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item) -> None:
        item.stash[_METER] = Meter()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item):
        # around every teardown hook (fixtures' finalizers included), before its report is made:
        # the report carries the properties junit writes
        try:
            return (yield)
        finally:
            meter = item.stash.get(_METER, None)
            if meter is not None:
                item.user_properties.append(("cpu_s", round(meter.stop(), 3)))


_METER = pytest.StashKey[Meter]()


def by_file(junit_path: str) -> list[tuple[str, float, float, int]]:
    """(file, CPU seconds, wall seconds, tests) from a junit XML with ``cpu_s``, most CPU first."""
    import xml.etree.ElementTree as ET

    totals: dict[str, list[float]] = {}
    for case in ET.parse(junit_path).getroot().iter("testcase"):
        path = case.get("classname", "").replace(".", "/") + ".py"
        cpu = next((float(p.get("value")) for p in case.iter("property") if p.get("name") == "cpu_s"), 0.0)
        row = totals.setdefault(path, [0.0, 0.0, 0])
        row[0] += cpu
        row[1] += float(case.get("time") or 0)
        row[2] += 1
    return sorted(((k, *v) for k, v in totals.items()), key=lambda r: -r[1])


if __name__ == "__main__":
    rows = by_file(sys.argv[1])
    print(f"{sum(r[1] for r in rows):9.0f} CPU-s {sum(r[2] for r in rows):9.0f} s  in all")
    for path, cpu, wall, n in rows[: int(sys.argv[2]) if len(sys.argv) > 2 else 40]:
        print(f"{cpu:9.1f} CPU-s {wall:9.1f} s {n:5d}  {path}")
