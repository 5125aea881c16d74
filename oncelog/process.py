"""Run an oncelog broker as a child process: used by the demo, the benchmarks and the tests.

The broker prints ``oncelog listening on HOST:PORT`` once it accepts connections; with
``port=0`` the OS picks a free port and we read it from that line. :meth:`kill` sends SIGKILL
(a real crash: no flush, no clean-shutdown marker); :meth:`stop` sends SIGTERM (graceful).
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time

_LISTENING = re.compile(r"oncelog listening on ([\d.]+):(\d+)")
_METRICS = re.compile(r"oncelog metrics on (http://\S+)")


def _proc_state(pid: int) -> tuple[str, int] | None:
    """(state letter, parent pid) of a process from /proc, None if there is none."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return fields[0], int(fields[1])
    except (OSError, IndexError, ValueError):
        return None


def _running(pid: int) -> bool:
    state = _proc_state(pid)
    return state is not None and state[0] not in ("Z", "X")


def tail_file(path, lines: int = 40) -> str:
    """The last ``lines`` lines of a child process's log (a broker's, a JVM's), for an error
    message; "" if it cannot be read. Reads from the end, so a long log costs what is shown."""
    try:
        with open(path, "rb") as f:
            end = f.seek(0, os.SEEK_END)
            size = 16384
            while True:
                start = f.seek(max(0, end - size))
                data = f.read()
                if start == 0 or data.count(b"\n") > lines:
                    break
                size *= 4
    except OSError:
        return ""
    return b"".join(data.splitlines(keepends=True)[-lines:]).decode(errors="replace") if lines > 0 else ""


def _read_from(path: str, offset: int, limit: int = 65536) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read(limit).decode(errors="replace")
    except OSError:
        return ""


def _ephemeral_range() -> tuple[int, int]:
    """The kernel's range for the local ports of outgoing connections (and of port 0)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = map(int, f.read().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def free_ports(count: int = 1, host: str = "127.0.0.1", attempts: int = 200) -> int:
    """The first of ``count`` consecutive TCP ports free at the moment of asking, outside the
    kernel's ephemeral range (so no outgoing connection takes one while its server is down for a
    restart): a cluster's node ``k`` listens on (and advertises) the given port plus ``k-1``."""
    low, high = _ephemeral_range()
    spans = [(lo, hi) for lo, hi in ((10000, low - count), (high + 1, 65535 - count)) if hi > lo]
    if not spans:  # an ephemeral range over nearly every port: draw from all of them
        spans = [(1024, 65535 - count)]
    rng = random.Random()
    for _ in range(attempts):
        lo, hi = rng.choices(spans, weights=[hi - lo for lo, hi in spans])[0]
        base = rng.randrange(lo, hi)
        socks = []
        try:
            for port in range(base, base + count):
                s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
                socks.append(s)
                s.bind((host, port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise OSError(f"no {count} consecutive free ports found")


class BrokerProcess:
    def __init__(self, data_dir: str, *, fsync: str = "always", port: int = 0, extra_args: list[str] = (),
                 log_path: str | None = None, env: dict[str, str] | None = None,
                 group_initial_rebalance_delay_ms: int = 0, group_min_session_timeout_ms: int | None = None,
                 group_max_session_timeout_ms: int | None = None, source_tree: str | None = None,
                 module: tuple[str, ...] = ("-m", "oncelog"), nodes: int | None = 1) -> None:
        """``module``: what the interpreter runs (``-m oncelog``; a benchmark's prototype broker
        module takes the same ``serve`` arguments). ``nodes``: ``serve --nodes`` — 1 (one
        process, what a test asks for unless it tests a cluster), N, or None for serve's own
        default (a node per core for a new data directory). With several nodes, :meth:`kill`
        kills the parent and with it every node; node 1's address is :attr:`bootstrap`."""
        self.data_dir = data_dir
        self.nodes = nodes
        self.module = list(module)
        self.fsync = fsync
        self.port = port
        self.requested_port = port  # what start() asks for again on a cluster (below)
        self.extra_args = list(extra_args)
        # The broker's default is Kafka's 3000 ms; child brokers (tests, demo, benchmarks) form
        # groups at once unless told otherwise, here or by --group-initial-rebalance-delay-ms
        # in extra_args (which wins: it comes later on the command line).
        self.group_initial_rebalance_delay_ms = group_initial_rebalance_delay_ms
        # group.min/max.session.timeout.ms: None keeps the broker's defaults (Kafka's 6000 / 1800000).
        self.group_session_timeout_args = [
            arg for flag, value in (("--group-min-session-timeout-ms", group_min_session_timeout_ms),
                                    ("--group-max-session-timeout-ms", group_max_session_timeout_ms))
            if value is not None for arg in (flag, str(value))]
        self.log_path = log_path or os.path.join(data_dir + ".log")
        self.proc: subprocess.Popen | None = None
        # The /metrics URLs the broker printed (``--metrics-listener``), node 1's first.
        self.metrics_urls: list[str] = []
        self.host = "127.0.0.1"
        self.env = dict(env or {})  # extra environment, e.g. ONCELOG_CRASH_POINT for crash tests
        # Run the broker from another checkout (benchmarks: old vs new commit in one run); it
        # is both the working directory and PYTHONPATH, so `-m oncelog` imports that tree.
        self.source_tree = source_tree
        if source_tree:
            self.env["PYTHONPATH"] = source_tree

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def metrics_url(self) -> str | None:
        """Node 1's ``/metrics`` URL, when started with ``--metrics-listener``."""
        return self.metrics_urls[0] if self.metrics_urls else None

    def start(self, timeout: float = 30.0) -> "BrokerProcess":
        os.makedirs(self.data_dir, exist_ok=True)
        # One process restarts on the port it had. A cluster asks again for what it was first
        # asked: with 0 every node, node 1 included, takes back the port its registration
        # records (oncelog.cluster.node_config), so every node keeps its address, as a Kafka
        # broker does; node 1's old port plus K-1 would give node K a new one, and a client
        # holding node K's address (its cached coordinator) would never find it again.
        clustered = os.path.exists(os.path.join(self.data_dir, "nodes", "1.json"))
        if self.port == 0 and not clustered:
            # A free port asked for: we choose it, outside the kernel's ephemeral range. A port
            # the OS hands out for port 0 comes from that range, which every outgoing connection
            # draws its local port from too; while the broker is down (a kill before a restart)
            # a client's connection could take it, and the restart would have to move to another
            # address, one no client knows (a CI run lost a cluster node's address so).
            for attempt in range(3):
                base = free_ports(self.nodes or os.cpu_count() or 1)
                self.port = self.requested_port = base
                if self._launch(base, timeout, last=attempt == 2):
                    return self
                self.port = self.requested_port = 0  # taken meanwhile by someone else: another
        port = self.requested_port if clustered else self.port
        self._launch(port, timeout, last=True)
        return self

    def _launch(self, port: int, timeout: float, last: bool) -> bool:
        """Start ``serve`` on ``port`` and wait for its listening line. False if the port was
        taken (and ``last`` is false: the caller tries another); other failures raise."""
        cmd = [sys.executable, *self.module, "serve", "--data-dir", self.data_dir, "--port", str(port),
               "--fsync", self.fsync,
               "--group-initial-rebalance-delay-ms", str(self.group_initial_rebalance_delay_ms),
               *self.group_session_timeout_args, *(["--nodes", str(self.nodes)] if self.nodes is not None else []),
               *self.extra_args]
        log_start = os.path.getsize(self.log_path) if os.path.exists(self.log_path) else 0
        log_file = open(self.log_path, "ab")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log_file, env={**os.environ, **self.env},
                                     cwd=self.source_tree)
        log_file.close()
        deadline = time.monotonic() + timeout
        line = b""
        self.metrics_urls = []
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            text = line.decode(errors="replace")
            metrics = _METRICS.search(text)
            if metrics:
                self.metrics_urls.append(metrics.group(1))
            m = _LISTENING.search(text)
            if m:
                self.host, self.port = m.group(1), int(m.group(2))
                # keep draining stdout so the child never blocks on a full pipe
                threading.Thread(target=self.proc.stdout.read, daemon=True).start()
                return True
        self.kill()
        if not last and "address already in use" in _read_from(self.log_path, log_start).lower():
            return False
        raise RuntimeError(f"broker did not start; see {self.log_path}:\n{self.tail_log()}")

    def tail_log(self, lines: int = 30) -> str:
        return tail_file(self.log_path, lines)

    def kill(self) -> None:
        """SIGKILL: the broker gets no chance to flush or mark a clean shutdown. A cluster's
        supervisor and every node die together: the nodes are SIGKILLed too and waited for, so
        a :meth:`restart` right after never meets a node of the old cluster still holding its
        port or the data directory's lock (the kernel's parent-death signal alone is not
        synchronous with the supervisor's end)."""
        if self.proc and self.proc.poll() is None:
            nodes = self._node_pids()
            self.proc.send_signal(signal.SIGKILL)
            for pid in nodes:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            self.proc.wait()
            deadline = time.monotonic() + 10
            while any(_running(pid) for pid in nodes) and time.monotonic() < deadline:
                time.sleep(0.02)

    def _node_pids(self) -> list[int]:
        """The pids of this cluster's node processes (children of the supervisor, as their
        registrations name them); [] for one process."""
        if self.nodes == 1 or self.proc is None:
            return []
        pids = []
        try:
            names = os.listdir(os.path.join(self.data_dir, "nodes"))
        except OSError:
            return []
        for name in names:
            if not name.endswith(".json"):
                continue
            try:
                with open(os.path.join(self.data_dir, "nodes", name)) as f:
                    pid = int(json.load(f)["pid"])
            except (OSError, ValueError, KeyError, TypeError):
                continue
            state = _proc_state(pid)
            if state is not None and state[1] == self.proc.pid:  # a stale registration's pid may be anyone's now
                pids.append(pid)
        return pids

    def stop(self, timeout: float = 30.0) -> int:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                return -9
        return self.proc.returncode if self.proc else 0

    def restart(self) -> "BrokerProcess":
        # same port, so clients reconnect to the address they know
        return self.start()

    def __enter__(self) -> "BrokerProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
