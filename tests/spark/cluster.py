"""A Spark standalone cluster on loopback for tests: one master and one worker, each a JVM
started with the ``spark-class`` launcher that pyspark ships, in a process group of its own.

Ports are chosen by the JVMs themselves (``--port 0``, ``--webui-port 0``) and read back from
the master's log and its JSON status page, so concurrent runs on a shared machine never race
for a port; the master's REST submission server (a fixed port, 6066) is switched off. The
worker's directories (``--work-dir``, ``SPARK_LOCAL_DIRS``) live under the test's tmp path, so
every process it launches (executor JVMs and their Python workers, which put themselves in
process groups of their own) can be found by its working directory and killed by pid.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pyspark

from oncelog.process import tail_file as _tail

SPARK_HOME = os.path.dirname(os.path.abspath(pyspark.__file__))
SPARK_CLASS = os.path.join(SPARK_HOME, "bin", "spark-class")
DAEMON_JAVA_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def java_missing() -> bool:
    return shutil.which("java") is None and not os.environ.get("JAVA_HOME")


def _wait_for(cond, timeout: float, what: str, diag=lambda: "", stop: threading.Event | None = None):
    deadline = time.monotonic() + timeout
    while True:
        if stop is not None and stop.is_set():
            raise RuntimeError(f"stopped while waiting for {what}")
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}\n{diag()}")
        time.sleep(0.25)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


class StandaloneCluster:
    def __init__(self, base: Path, *, cores: int = 2, memory: str = "1g", start_timeout: float = 120):
        self.base = base
        self.cores, self.memory, self.start_timeout = cores, memory, start_timeout
        self.work_dir = base / "work"
        self.master_log, self.worker_log = base / "master.log", base / "worker.log"
        self.procs: list[subprocess.Popen] = []
        self.master_url = self.master_ui = ""
        self._boot: Future | None = None
        self._pool = ThreadPoolExecutor(1)
        self._stopping = threading.Event()

    # -- start / stop ---------------------------------------------------------------------
    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        # Nothing from the source tree: executors must import the installed package.
        env.pop("PYTHONPATH", None)
        conf_dir = self.base / "conf"  # empty: no spark-defaults.conf or spark-env.sh from elsewhere
        conf_dir.mkdir(parents=True, exist_ok=True)
        env.update({
            "SPARK_HOME": SPARK_HOME, "SPARK_CONF_DIR": str(conf_dir), "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOCAL_DIRS": str(self.base / "local"), "SPARK_WORKER_DIR": str(self.work_dir),
            "SPARK_DAEMON_MEMORY": "256m", "SPARK_DAEMON_JAVA_OPTS": DAEMON_JAVA_OPTS,
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
            "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
        })
        return env

    def _spawn(self, args: list[str], log: Path) -> subprocess.Popen:
        if self._stopping.is_set():
            raise RuntimeError("the cluster is being stopped")
        with open(log, "ab") as f:
            p = subprocess.Popen([SPARK_CLASS, *args], cwd=self.base, env=self._env(), stdout=f, stderr=f,
                                 stdin=subprocess.DEVNULL, start_new_session=True)
        self.procs.append(p)
        return p

    def _log_match(self, log: Path, pattern: str, proc: subprocess.Popen):
        if proc.poll() is not None:
            raise AssertionError(f"{log.name}: the JVM exited with {proc.returncode}\n{_tail(log)}")
        try:
            return re.search(pattern, log.read_text(errors="replace"))
        except OSError:
            return None

    def _start(self) -> str:
        self.base.mkdir(parents=True, exist_ok=True)
        (self.base / "local").mkdir(exist_ok=True)
        self.work_dir.mkdir(exist_ok=True)
        t = self.start_timeout

        def _wait(cond, what, diag=self.diagnostics):
            return _wait_for(cond, t, what, diag, self._stopping)
        m = self._spawn(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", "0",
                         "--webui-port", "0"], self.master_log)
        url = _wait(lambda: self._log_match(self.master_log, r"Starting Spark master at (spark://\S+)", m),
                    "the master to start")
        ui = _wait(lambda: self._log_match(self.master_log, r"Bound MasterWebUI to \S+, and started at "
                                           r"http://[^:]+:(\d+)", m), "the master's web UI")
        _wait(lambda: self._log_match(self.master_log, r"elected leader", m), "the master to be ALIVE")
        self.master_url, self.master_ui = url.group(1), f"http://127.0.0.1:{ui.group(1)}"
        w = self._spawn(["org.apache.spark.deploy.worker.Worker", self.master_url, "--host", "127.0.0.1",
                         "--port", "0", "--webui-port", "0", "--cores", str(self.cores), "--memory", self.memory,
                         "--work-dir", str(self.work_dir)], self.worker_log)
        _wait(lambda: self._log_match(self.worker_log, r"Successfully registered with master", w)
              and self._log_match(self.master_log, rf"Registering worker 127\.0\.0\.1:\d+ with {self.cores} cores", m),
              "the worker to register with the master")
        _wait(lambda: self.master_state().get("aliveworkers") == 1, "the master to list the worker ALIVE")
        return self.master_url

    def start(self) -> "StandaloneCluster":
        """Boot in the background (master, then worker): the caller prepares its data meanwhile."""
        self._boot = self._pool.submit(self._start)
        return self

    def wait_ready(self) -> str:
        assert self._boot is not None, "start() first"
        return self._boot.result(self.start_timeout * 3)

    def stop(self) -> None:
        """SIGKILL the master's and the worker's process groups, then every process still
        working under the worker's directory (executors, their Python daemons and workers)."""
        self._stopping.set()
        if self._boot is not None:
            try:
                self._boot.result(self.start_timeout * 3)
            except BaseException:
                pass
        self._pool.shutdown(wait=False)
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for p in self.procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                pass
        deadline = time.monotonic() + 10  # until the groups' other members are gone too
        while time.monotonic() < deadline and any(_group_alive(p.pid) for p in self.procs):
            time.sleep(0.1)
        for pid in self.pids_under(self.work_dir):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    # -- status ---------------------------------------------------------------------------
    def _json(self, url: str) -> dict:
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                return json.load(r)
        except OSError:
            return {}

    def master_state(self) -> dict:
        """The master's /json/ page: workers, activeapps, completedapps (ids, state, cores)."""
        return self._json(f"{self.master_ui}/json/") if self.master_ui else {}

    def worker_state(self) -> dict:
        """The worker's /json/ page: executors (running) and finishedexecutors, each with appid."""
        workers = self.master_state().get("workers") or []
        return self._json(f"{workers[0]['webuiaddress']}/json/") if workers else {}

    @staticmethod
    def pids_under(directory: Path) -> list[int]:
        """Live processes whose working directory is inside ``directory`` (executor JVMs run in
        work/<app-id>/<executor-id>, and their Python daemons and workers inherit it)."""
        root = str(directory.resolve())
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                cwd = os.readlink(f"/proc/{entry}/cwd")
                with open(f"/proc/{entry}/stat", "rb") as f:
                    state = f.read().rsplit(b")", 1)[1].split()[0]
            except OSError:
                continue
            if state != b"Z" and (cwd == root or cwd.startswith(root + os.sep)):
                found.append(int(entry))
        return found

    def executor_logs(self, app_id: str) -> str:
        parts = []
        for f in sorted((self.work_dir / app_id).glob("*/stderr")):
            parts.append(f"--- {f.relative_to(self.work_dir)}\n{_tail(f, 25)}")
        return "\n".join(parts)

    def diagnostics(self) -> str:
        apps = sorted(p.name for p in self.work_dir.glob("app-*")) if self.work_dir.exists() else []
        return "\n".join([f"--- master.log\n{_tail(self.master_log)}", f"--- worker.log\n{_tail(self.worker_log)}",
                          *(self.executor_logs(a) for a in apps)])
