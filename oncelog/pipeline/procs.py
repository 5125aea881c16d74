"""The Spark driver as a process group that can be SIGKILLed and started again.

The driver (``python -m oncelog.pipeline.job JOB_JSON``) starts in a new session, so it leads its
own process group: the Python driver, the JVM it launches, and the JVM's Python runners share it.
:meth:`SparkDriver.kill` sends SIGKILL to that group (``os.killpg``), which is what a crashed
machine does to a driver. PySpark's worker daemon moves itself and its Python workers into a
process group of their own (``os.setpgid(0, 0)`` in ``pyspark/daemon.py``) but stays in the
session, so the kill then sweeps the session too: every process whose session id is the
driver's pid, all of them descendants of the process started here.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .job import JobConfig


def session_members(sid: int) -> list[int]:
    """Pids of the processes in session ``sid`` (Linux /proc)."""
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        # fields: state ppid pgrp session ...
        if len(fields) > 3 and int(fields[3]) == sid:
            pids.append(int(name))
    return pids


class SparkDriver:
    """One run of the job at a time; ``start`` again after ``kill`` or an exit."""

    def __init__(self, job: JobConfig, *, env: dict[str, str], log_path: str, cwd: str | None = None,
                 python: str | None = None) -> None:
        self.job = job
        self.python = python or sys.executable  # another PySpark's virtualenv (Spark's Kafka sink)
        self.env = env
        self.log_path = log_path
        self.cwd = cwd
        self.proc: subprocess.Popen | None = None
        self.runs = 0
        self.started_at = 0.0

    def start(self, extra_env: dict[str, str] | None = None, java_options: str = "", archive: str = "") -> int:
        """Launch run ``runs + 1`` of the job, its :class:`~.job.JobConfig` as its one argument
        (``archive``: where it writes its JVM's class-data archive after its first batch)."""
        self.runs += 1
        job = replace(self.job, run=self.runs, java_options=java_options, archive=archive)
        cmd = [self.python, "-m", "oncelog.pipeline.job", job.to_json()]
        with open(self.log_path, "ab") as log:
            log.write(f"\n==== run {self.runs} at {time.strftime('%H:%M:%S')}: {' '.join(cmd)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(cmd, env={**self.env, **(extra_env or {})}, stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.cwd,
                                         start_new_session=True)
        self.started_at = time.monotonic()
        return self.proc.pid

    @property
    def pgid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def poll(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> int:
        """SIGKILL the driver's process group, then whatever is left of its session. Returns the
        number of processes killed."""
        if self.proc is None:
            return 0
        sid = self.proc.pid
        killed = len(session_members(sid))
        try:
            os.killpg(sid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self._sweep(sid)
        return killed

    def _sweep(self, sid: int) -> None:
        for _ in range(20):
            left = session_members(sid)
            if not left:
                return
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)

    def wait(self, timeout: float) -> int | None:
        if self.proc is None:
            return None
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        self._sweep(self.proc.pid)  # Python workers may outlive a driver that exited
        return rc
