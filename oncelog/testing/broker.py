"""A broker for a test: ``with Broker() as broker: ...`` — a temporary data directory, a free
loopback port, ready in well under a second, gone at the end.

Two kinds, the test's choice:

* ``kind="thread"`` (default) — the broker runs in the test's own process, on its own thread
  and event loop (uvloop when installed). Fastest to start; faults are added directly;
  :meth:`Broker.pause` blocks its loop. It cannot be SIGKILLed without the test.
* ``kind="process"`` — a child process (forked from a warm fork server, :mod:`._zygote`, and
  running ``serve``'s arguments through :mod:`._child`): :meth:`Broker.kill` is a real SIGKILL (what was not fsynced is lost, recovery runs
  at the restart), :meth:`Broker.pause` is SIGSTOP/SIGCONT, and faults travel over a Unix
  control socket only its user can open.

Lifecycle (both kinds): ``start`` -> running -> ``stop`` (clean) or ``kill`` (process) -> stopped
-> ``restart`` -> running again on the **same port and data** (a client's cached address stays
right). The temporary directory goes at ``__exit__``/``close`` unless ``keep=True``.

Configuration: ``config`` holds Kafka broker settings as a ``server.properties`` would (or
``serve --override``): listeners with SASL/SSL, ``log.retention.ms``, ``transaction.*`` ...;
``config_file`` is a properties file. The testing defaults differ from serve's in one place, as
Kafka's own test harness: ``group.initial.rebalance.delay.ms=0`` (a group forms at once).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from typing import Any, Mapping

from . import inspect as _inspect
from oncelog.process import _running as _process_runs

from .faults import FaultSpec


class NotSupported(Exception):
    """What this broker (or cluster) cannot do: ``kill()`` of the thread kind, faults on an
    external cluster. The message says what to use instead."""


# confluent-kafka's settings whose names have underscores of their own (callables, mostly).
_CALLBACKS = frozenset({"error_cb", "throttle_cb", "stats_cb", "oauth_cb", "on_delivery", "on_commit", "logger"})
_TESTING_DEFAULTS = {"group.initial.rebalance.delay.ms": "0"}
_LISTENING = re.compile(r"oncelog listening on ([\d.]+):(\d+) \(.*?; listener ([A-Za-z0-9_]+),")
_METRICS = re.compile(r"oncelog metrics on (http://\S+)")
_LISTENER = re.compile(r"(?P<name>[A-Za-z0-9_]+)://(?P<host>\[[^\]]*\]|[^:/]*):(?P<port>-?[0-9]+)")


class Fault:
    """A fault added to a broker (:meth:`Faults.add`): ``fired`` counts its firings, ``remove()``
    ends it (twice is harmless)."""

    def __init__(self, spec: FaultSpec, fired, remove, live) -> None:
        self.spec = spec
        self._fired, self._remove, self._live = fired, remove, live

    @property
    def fired(self) -> int:
        return self._fired()

    @property
    def live(self) -> bool:
        return self._live()

    def remove(self) -> None:
        self._remove()

    def __repr__(self) -> str:
        return f"Fault({self.spec}, fired={self.fired})"


class Faults:
    """The faults of one broker (``broker.faults``); see :mod:`oncelog.testing.faults` for what
    each argument does."""

    def __init__(self, owner: "Broker") -> None:
        self._owner = owner
        self._added: list[Fault] = []

    def add(self, api: str | int, *, error: str | int | None = None, delay: float | None = None,
            drop: str | None = None, count: int = 0, every: int = 1, topic: str | None = None,
            versions: range | None = None) -> Fault:
        spec = FaultSpec.make(api, error=error, delay=delay, drop=drop, count=count, every=every,
                              topic=topic, versions=versions)
        fault = self._owner._install(spec)
        self._added = [f for f in self._added if f.live] + [fault]  # spent ones go: bounded by the live ones
        return fault

    def clear(self) -> None:
        """Remove every fault added through this object."""
        for fault in self._added:
            fault.remove()
        self._added.clear()

    def __iter__(self):
        return iter([f for f in self._added if f.live])


class _Cluster:
    """The helpers every cluster offers a test (this broker, or an external Kafka cluster)."""

    bootstrap_servers: str
    _client_settings: dict

    def client_config(self, **extra: Any) -> dict:
        """confluent-kafka settings for this cluster (bootstrap, security) plus ``extra``
        (``group_id="g"`` becomes ``group.id``; callbacks keep their names: ``error_cb``...)."""
        return {"bootstrap.servers": self.bootstrap_servers, **self._client_settings,
                **{k if k in _CALLBACKS else k.replace("_", "."): v for k, v in extra.items()}}

    def create_topic(self, name: str, partitions: int = 1, config: Mapping | None = None) -> None:
        _inspect.create_topic(self.client_config(), name, partitions, config)

    def read_committed(self, topic: str, timeout: float = 30.0) -> list:
        return _inspect.read_committed(self.client_config(), topic, timeout)

    def transactions(self) -> list:
        return _inspect.transactions(self.bootstrap_servers, self._protocol_settings())

    def groups(self) -> list:
        return _inspect.groups(self.bootstrap_servers, self._protocol_settings())

    def audit(self, inputs, outputs, **kw):
        """``oncelog audit`` of a pipeline's input and output topics (:func:`oncelog.audit.audit`):
        lost, duplicated, aborted reads, phantoms."""
        from oncelog.audit import audit

        return audit(self.bootstrap_servers, inputs, outputs, config=self._client_settings or None, **kw)

    def _protocol_settings(self) -> dict:
        return {k: str(v) for k, v in self._client_settings.items() if k != "logger"}


class ExternalKafka(_Cluster):
    """Any Kafka cluster by its bootstrap address (Apache Kafka in CI, a user's cluster): the
    same helpers as :class:`Broker`; faults, kill, pause and restart raise :class:`NotSupported`."""

    kind = "external"
    metrics_url = None  # a cluster's own metrics are its operator's (JMX for Apache Kafka)

    def __init__(self, bootstrap_servers: str, client_config: Mapping[str, Any] | None = None) -> None:
        self.bootstrap_servers = bootstrap_servers
        self._client_settings = dict(client_config or {})
        self._client_settings.pop("bootstrap.servers", None)

    @property
    def faults(self):
        raise NotSupported(f"faults need the embedded broker; {self.bootstrap_servers} is an external cluster")

    def _refuse(self, what: str):
        raise NotSupported(f"{what} needs the embedded broker; {self.bootstrap_servers} is an external cluster")

    def kill(self) -> None:
        self._refuse("kill()")

    def restart(self):
        self._refuse("restart()")

    def pause(self, seconds: float) -> None:
        self._refuse("pause()")

    def __repr__(self) -> str:
        return f"ExternalKafka({self.bootstrap_servers!r})"


class Broker(_Cluster):
    """An oncelog broker for a test (see the module docstring)."""

    def __init__(self, *, kind: str = "thread", data_dir: str | None = None, port: int = 0,
                 host: str = "127.0.0.1", config: Mapping[str, Any] | None = None,
                 config_file: str | None = None, fsync: str = "always", keep: bool = False,
                 client_config: Mapping[str, Any] | None = None, metrics: bool = False) -> None:
        if kind not in ("thread", "process"):
            raise ValueError(f"kind must be 'thread' or 'process' (got {kind!r})")
        self.kind = kind
        self.keep = keep
        self._temp = data_dir is None
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="oncelog-test-")
        self.host, self.port = host, port
        self.fsync = fsync
        self.config_file = config_file
        self.settings = {**_TESTING_DEFAULTS, **{k: str(v) for k, v in (config or {}).items()}}
        if metrics:  # a /metrics endpoint on a free loopback port (docs/metrics.md)
            self.settings.setdefault("oncelog.metrics.listener", f"{_host(host)}:0")
        self.metrics_url: str | None = None  # http://HOST:PORT/metrics once started with metrics
        if "listeners" not in self.settings:
            from oncelog.config.serve_options import read_properties

            given = [s.value for s in read_properties(config_file) if s.name == "listeners"] if config_file else []
            self.settings["listeners"] = given[-1] if given else f"PLAINTEXT://{host}:{port}"
        self._client_settings = dict(client_config or {})
        self.faults = Faults(self)
        self._running = False
        self._handles: list[Any] = []  # thread kind: FaultHandles to re-install after a restart
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        self._inner = None  # the thread kind's oncelog.broker.Broker
        self._pid: int | None = None  # the process kind's broker (a child of the fork server, _zygote)
        self._control = None  # the process kind's control socket client

    # ------------------------------------------------------------------ lifecycle

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def addresses(self) -> dict[str, str]:
        """Every listener's bound address, ``{"PLAINTEXT": "127.0.0.1:PORT", "SASL_SSL": ...}``
        (the ports a restart binds again)."""
        return {m["name"]: f"{m['host']}:{m['port']}" for m in _LISTENER.finditer(self.settings["listeners"])}

    @property
    def running(self) -> bool:
        return self._running

    def __enter__(self) -> "Broker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self, timeout: float = 30.0) -> "Broker":
        if self._running:
            return self
        if self.kind == "thread":
            self._start_thread(timeout)
        else:
            self._start_process(timeout)
        self._running = True
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """A clean shutdown: logs flushed and checkpointed, as SIGTERM to ``oncelog serve``."""
        if not self._running:
            return
        self._running = False
        if self.kind == "thread":
            loop, event, thread = self._loop, self._stop_event, self._thread
            loop.call_soon_threadsafe(event.set)
            thread.join(timeout)
            if thread.is_alive():
                raise TimeoutError(f"the broker's thread did not stop within {timeout} s")
        else:
            self._close_control()
            self._end_process(signal.SIGTERM, timeout)

    def kill(self) -> None:
        """SIGKILL (process kind): no flush, no clean-shutdown marker; what was not fsynced is
        gone, as after a power cut with ``fsync never``. :meth:`restart` recovers the log."""
        if self.kind != "process":
            raise NotSupported("kill() needs Broker(kind='process'): a broker on the test's own thread "
                               "cannot be SIGKILLed without the test (stop() is a clean shutdown)")
        if self._running:
            self._running = False
            self._close_control()
            self._end_process(signal.SIGKILL, 10)

    def restart(self, timeout: float = 30.0) -> "Broker":
        """Start again on the same port with the same data (stopping it first if it runs).
        Faults added before survive a thread broker's restart; a process broker starts
        without them (the process that held them is gone)."""
        if self._running:
            self.stop()
        return self.start(timeout)

    def pause(self, seconds: float) -> None:
        """The broker answers nothing for ``seconds`` (a GC pause, a frozen VM); returns at once."""
        if not self._running:
            raise RuntimeError("the broker is not running")
        if seconds <= 0:
            return
        if self.kind == "thread":
            self._loop.call_soon_threadsafe(time.sleep, seconds)
            return
        pid = self._pid
        os.kill(pid, signal.SIGSTOP)
        timer = threading.Timer(seconds, _signal, (pid, signal.SIGCONT))
        timer.daemon = True
        timer.start()

    def close(self) -> None:
        """Stop (clean) and remove the temporary data directory unless ``keep``."""
        try:
            if self._running:
                self.stop()
        finally:
            if self._temp and not self.keep:
                shutil.rmtree(self.data_dir, ignore_errors=True)
                if os.path.exists(self.log_path):
                    os.unlink(self.log_path)

    def __repr__(self) -> str:
        return f"Broker(kind={self.kind!r}, bootstrap_servers={self.bootstrap_servers!r}, data_dir={self.data_dir!r})"

    # ------------------------------------------------------------------ the thread kind

    def _start_thread(self, timeout: float) -> None:
        from oncelog.broker import Broker as _Broker, wall_clock_ms
        from oncelog.config.serve_options import build_broker_config
        from oncelog.server import serve

        config, _notes = build_broker_config(self._settings())
        inner = _Broker(config, clock=wall_clock_ms)
        for handle in self._handles:  # a restart keeps the test's faults
            if handle.live:
                inner.faults.controls.setdefault(handle.point, []).append(handle)
                handle._owner = inner.faults
        ready = threading.Event()
        failure: list[BaseException] = []

        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop_event = asyncio.Event()
            up = asyncio.Event()
            task = asyncio.ensure_future(serve(inner, ready=up, stop=self._stop_event, announce=False))
            waiter = asyncio.ensure_future(up.wait())
            await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
            if task.done():
                waiter.cancel()
                task.result()  # raises what stopped it
                return
            ready.set()
            await task

        def run() -> None:
            try:
                _new_loop().run_until_complete(main())
            except BaseException as exc:  # noqa: BLE001 — handed to the starting thread
                failure.append(exc)
            finally:
                ready.set()

        thread = threading.Thread(target=run, name=f"oncelog-broker-{id(self):x}", daemon=True)
        thread.start()
        if not ready.wait(timeout):
            raise TimeoutError(f"the broker did not start within {timeout} s")
        if failure:
            raise RuntimeError(f"the broker did not start: {failure[0]}") from failure[0]
        self._thread, self._inner = thread, inner
        self.host, self.port = inner.listening
        if inner.metrics_address is not None:
            self._metrics_bound(*inner.metrics_address)
        # restart() binds the same ports: a client's cached addresses stay right
        self.settings["listeners"] = ",".join(f"{name}://{_host(addr[0])}:{addr[1]}"
                                              for name, (_proto, addr, _adv) in inner._bound.items())

    # ------------------------------------------------------------------ the process kind

    def _start_process(self, timeout: float) -> None:
        from oncelog.process import tail_file

        from ._child import CONTROL_ENV, ControlClient
        from ._zygote import Zygote

        control_path = os.path.join(tempfile.gettempdir(), f"oncelog-ctl-{os.getpid()}-{id(self):x}.sock")
        listeners = self.settings["listeners"]
        argv = ["--data-dir", self.data_dir, "--fsync", self.fsync,
                *(["--config", self.config_file] if self.config_file else []),
                *[arg for name, value in self.settings.items() for arg in ("--override", f"{name}={value}")]]
        log_path = self.log_path
        with open(log_path, "ab") as f:  # there before the broker writes it: read from its end
            seen = f.tell()
        pid = Zygote.get().fork(argv, {CONTROL_ENV: control_path}, log_path)
        deadline = time.monotonic() + timeout
        while True:
            with open(log_path, "rb") as f:
                f.seek(seen)
                text = f.read().decode(errors="replace")
            bound = _LISTENING.findall(text)
            if len(bound) >= len(list(_LISTENER.finditer(listeners))) and bound:
                break
            if not _process_runs(pid) or time.monotonic() > deadline:
                _signal(pid, signal.SIGKILL)
                raise RuntimeError(f"the broker did not start; see {log_path}:\n{tail_file(log_path)}")
            time.sleep(0.005)
        self._pid = pid
        self._control = ControlClient(control_path)
        by_name = {name: (host, int(port)) for host, port, name in bound}
        self.host, self.port = bound[0][0], int(bound[0][1])
        metrics = _METRICS.search(text)  # printed before the listening lines
        if metrics:
            host, _, port = metrics.group(1).removeprefix("http://").split("/")[0].rpartition(":")
            self._metrics_bound(host.strip("[]"), int(port))
        # restart() binds the same ports: a client's cached addresses stay right
        self.settings["listeners"] = _LISTENER.sub(
            lambda m: f"{m['name']}://{m['host']}:{by_name.get(m['name'], (None, m['port']))[1]}", listeners)

    def _metrics_bound(self, host: str, port: int) -> None:
        self.metrics_url = f"http://{_host(host)}:{port}/metrics"
        self.settings["oncelog.metrics.listener"] = f"{_host(host)}:{port}"  # a restart keeps the URL

    @property
    def log_path(self) -> str:
        """The process kind's log (its stdout and stderr), beside the data directory."""
        return self.data_dir.rstrip("/") + ".log"

    @property
    def pid(self) -> int | None:
        """The process kind's process id while it runs (None for the thread kind)."""
        return self._pid if self._running else None

    def _end_process(self, sig: int, timeout: float) -> None:
        pid = self._pid
        _signal(pid, signal.SIGCONT)  # a paused broker must run to end cleanly
        _signal(pid, sig)
        deadline = time.monotonic() + timeout
        while _process_runs(pid):  # a zombie is not: the fork server reaps it a moment later
            if time.monotonic() > deadline:
                _signal(pid, signal.SIGKILL)
                deadline = time.monotonic() + 10
            time.sleep(0.005)

    def _close_control(self) -> None:
        if self._control is not None:
            self._control.close()
            self._control = None

    # ------------------------------------------------------------------ faults

    def _install(self, spec: FaultSpec) -> Fault:
        if not self._running:
            raise RuntimeError("add faults to a running broker")
        if self.kind == "thread":
            from .faults import control_function

            handle = self._on_loop(lambda: self._inner.control(spec.api_key, control_function(spec), spec.count))
            self._handles = [h for h in self._handles if h.live] + [handle]  # kept for a restart while live
            return Fault(spec, handle.fired, lambda: self._on_loop(handle.remove) if self._running else handle.remove(),
                         lambda: handle.live)
        control = self._control
        fault_id = control.call("add", spec=spec.to_json())["id"]

        def ask(field):
            if self._control is not control:  # the process that held it is gone
                return 0 if field == "fired" else False
            return control.call("fired", id=fault_id)[field]

        def remove():
            if self._control is control:
                control.call("remove", id=fault_id)

        return Fault(spec, lambda: ask("fired"), remove, lambda: ask("live"))

    def _on_loop(self, fn):
        """Run ``fn`` on the broker's event loop and return its result (the broker's state is
        the loop's alone)."""
        done = threading.Event()
        box: list = []

        def call() -> None:
            try:
                box.append((True, fn()))
            except BaseException as exc:  # noqa: BLE001
                box.append((False, exc))
            done.set()

        self._loop.call_soon_threadsafe(call)
        if not done.wait(30):
            raise TimeoutError("the broker's event loop did not answer in 30 s (paused?)")
        ok, value = box[0]
        if not ok:
            raise value
        return value

    def _settings(self):
        from oncelog.config.serve_options import Setting, read_properties

        out = list(read_properties(self.config_file)) if self.config_file else []
        out.append(Setting("log.dirs", self.data_dir, "Broker(data_dir=...)"))
        out.append(Setting("oncelog.fsync", self.fsync, "Broker(fsync=...)"))
        out += [Setting(name, value, "Broker(config=...)") for name, value in self.settings.items()]
        return out


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _new_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop when installed (as ``serve`` runs), without changing the test's policy."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()
