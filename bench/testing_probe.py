"""A pytest plugin of ``python -m bench testing`` (``-p bench.testing_probe``): where the sample
suite's process spent its CPU, read just before the last test's teardown (the session's broker
still running), written as JSON to ``$ONCELOG_PROBE_OUT``.

Why: the suite's time on the session broker is the broker's share plus everything else — pytest,
the clients' own work and their timers (a librdkafka producer's 500 ms wait for a connected broker
before InitProducerId, a group's join and rebalance, a transactional id's retry after
CONCURRENT_TRANSACTIONS). The broker's threads' CPU is an upper bound of what the broker could have
added to the wall: a broker that took no time at all would leave at least ``wall - broker CPU``,
which bounds the ratio to Apache Kafka that any broker could reach with this suite.

Threads are read from ``/proc/self/task``: Python threads are named through ``threading``
(the session broker's is ``oncelog-broker-…``; its executors' and helpers' names are kept as they
are), others by their kernel name (librdkafka's ``rdk:…``); the main thread is pytest and the
clients it drives.
"""

from __future__ import annotations

import json
import os
import threading

import pytest


def _cpu_seconds(tid: int) -> float | None:
    try:
        with open(f"/proc/self/task/{tid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None  # the thread ended meanwhile
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def _kernel_name(tid: int) -> str:
    try:
        with open(f"/proc/self/task/{tid}/comm") as f:
            return f.read().strip()
    except OSError:
        return "?"


def snapshot() -> dict:
    """CPU seconds by thread (name → seconds, summed over threads of one name) and the process's
    total so far (threads that ended included)."""
    python_names = {t.native_id: t.name for t in threading.enumerate() if t.native_id is not None}
    threads: dict[str, float] = {}
    for entry in os.listdir("/proc/self/task"):
        tid = int(entry)
        cpu = _cpu_seconds(tid)
        if cpu is None:
            continue
        name = "main" if tid == os.getpid() else python_names.get(tid) or _kernel_name(tid)
        threads[name] = threads.get(name, 0.0) + cpu
    t = os.times()
    return {"process_cpu": t.user + t.system, "threads": threads}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    if nextitem is None and os.environ.get("ONCELOG_PROBE_OUT"):
        with open(os.environ["ONCELOG_PROBE_OUT"], "w") as f:
            json.dump(snapshot(), f)
    yield
