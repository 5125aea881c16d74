"""Every fault the sink's tests inject, in one place: the only reader of the ``ONCELOG_SPARK_*``
environment variables and of the ``oncelog.test.*`` options.

The seam is a hooks object (:class:`SinkHooks`): the sink reports named points to it
(:meth:`SinkHooks.at`, :meth:`SinkHooks.task_written`) and goes on; the base class does nothing
(production). A test in-process passes its own hooks to :class:`~.batch_commit.CommitProtocol`
or installs them (:func:`install`); a test that starts a Spark job sets the environment, which
:class:`EnvHooks` reads once, at the first point each process reaches. That is this process's
edge: the sink runs in processes Spark starts itself (the driver script's, the Python workers of
the write tasks, Spark's commit runner and planner), with no entry point of the connector's in
which to install anything. The test-only control flow lives here, never in the sink: e.g. at
``after-decision`` :class:`EnvHooks` may commit a batch's first transaction alone and stop there
(``between-commits``), which the commit protocol itself never does.

Two channels, because the sink runs in three kinds of process (the driver, the Python workers
of the write tasks, Spark's commit runner):

* environment variables, inherited by every process a test starts (driver, workers and
  commit runner of a local Spark):
  - ``ONCELOG_SPARK_CRASH_POINT=<name>[,<name>...]`` SIGKILLs the Spark driver's whole process
    group (JVM and Python; ``ONCELOG_SPARK_CRASH_PGID``, else this process's group) at that
    point. With ``ONCELOG_SPARK_CRASH_ONCE=<path>`` each point fires once across restarts
    (marker ``<path>.<name>``), so a chain of restarts walks through the points.
    ``ONCELOG_SPARK_CRASH_AFTER_BATCH=N``: only batches after N crash. Points: ``task-write``
    (inside a write task, after its rows are sent; with ``atomicity=partition`` after its
    marker too, before its EndTxn), ``task-committed`` (``atomicity=partition``: inside a write
    task, after its EndTxn), ``before-commit``, ``after-decision``, ``between-commits`` (not a
    point of the sink's: at ``after-decision`` the hooks commit the batch's first transaction
    alone, then crash), ``after-endtxns`` (every EndTxn of the batch answered; not yet all
    CompleteCommit, not yet done, the barrier still up), ``after-commits`` (before Spark's
    commit log);
  - ``ONCELOG_SPARK_TASK_FAULT=raise|exit`` fails the first write task attempt (once, with
    ``ONCELOG_SPARK_TASK_FAULT_ONCE=<path>``) after it has sent its rows and left its
    transaction open (``atomicity=partition``: after it committed its transaction): ``raise``
    as an exception, ``exit`` by killing the Python worker;
  - ``ONCELOG_SPARK_COMMIT_PAUSE=<dir>`` with ``ONCELOG_SPARK_COMMIT_PAUSE_BATCHES=1,2`` pauses
    the commit of each listed batch once (across restarts), between its first and its second
    EndTxn (at ``after-decision``, as ``between-commits``); with ``ONCELOG_SPARK_COMMIT_PAUSE_AT=<stage>[,<stage>]``
    instead (or as well) at a stage of step 5-6 of the commit protocol: ``before-endtxns``
    (decided, no EndTxn sent yet) or ``after-endtxns`` (every EndTxn answered, the wait for
    CompleteCommit and the barrier's end still to come) (the points of the same names);
* options (they reach the commit runner, which environment variables set after the JVM started
  do not): ``oncelog.test.barrier=false`` turns the visibility barrier off;
  ``oncelog.test.awaitComplete=false`` ends the barrier right after the batch's EndTxns, without
  waiting for its transactions to be CompleteCommit and before done (a control run: the order
  that once let a reader see part of a batch);
  ``oncelog.test.taskDelayMs`` and ``oncelog.test.taskFailure`` slow or fail write tasks
  (:meth:`SinkHooks.task_written`: a SparkSession that is already running takes no new
  environment);
  ``oncelog.test.commitStaggerMs=N`` spaces the EndTxns of a batch so a reader can look between
  them (tests/spark/test_sink_atomicity.py).
"""

from __future__ import annotations

import json
import os
import signal
import time
from typing import Any, Mapping

TEST_OPTION_PREFIX = "oncelog.test."


def test_options(options: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The ``oncelog.test.*`` options, prefix removed (lower-case names, as Spark hands them over)."""
    return tuple(sorted((k[len(TEST_OPTION_PREFIX):], str(v)) for k, v in options.items()
                        if k.startswith(TEST_OPTION_PREFIX)))


def _option(opts, name: str, default: str) -> str:
    """The ``oncelog.test.<name>`` option of ``opts`` (SinkOptions, whose ``test_hooks`` holds
    what :func:`test_options` collected)."""
    return dict(opts.test_hooks).get(name, default)


def barrier_off(opts) -> bool:
    """``oncelog.test.barrier=false``: no visibility barrier."""
    return _option(opts, "barrier", "") == "false"


def await_complete_off(opts) -> bool:
    """``oncelog.test.awaitComplete=false``: end the barrier right after the EndTxns (a control)."""
    return _option(opts, "awaitcomplete", "") == "false"


def commit_stagger_ms(opts) -> int:
    """``oncelog.test.commitStaggerMs``: milliseconds between the EndTxns of a batch (0: none)."""
    return int(_option(opts, "commitstaggerms", "0"))


def _once(marker: str | None) -> bool:
    """True the first time across processes and restarts for a marker file (always if None)."""
    if not marker:
        return True
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
        return True
    except FileExistsError:
        return False


def _wait_for(path: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)


def _write_json(where: str, name: str, info: dict) -> None:
    tmp = os.path.join(where, f".{name}.tmp")
    with open(tmp, "w") as f:
        json.dump(info, f)
    os.replace(tmp, os.path.join(where, name))  # whole or absent


class SinkHooks:
    """The sink's seam for tests: the points it reaches, in order. This one does nothing.

    ``at(point, batch_id, protocol, decision)``: the driver's commit protocol
    (:class:`~.batch_commit.CommitProtocol`, ``protocol``) reached ``point`` of batch
    ``batch_id``: ``before-commit`` (the sink's), ``after-decision`` (the decision is written, no
    EndTxn sent), ``before-endtxns`` and ``after-endtxns`` (around the batch's EndTxns, with the
    decision), ``after-commits``; a write task reached ``task-write`` or ``task-committed``. A
    hook may stop there (raise, or kill the process), wait, or act through ``protocol`` (its
    ``client``) on the decided transactions, as a crash or a slow broker in the middle would.
    ``task_written(opts)``: a write task has sent its rows (its transaction is open, or with
    ``atomicity=partition`` committed)."""

    def at(self, point: str, batch_id: int | None = None, protocol: Any = None, decision: Any = None) -> None:
        pass

    def task_written(self, opts=None) -> None:
        pass


class EnvHooks(SinkHooks):
    """The hooks the ``ONCELOG_SPARK_*`` environment asks for (see the module docstring)."""

    def __init__(self, environ: Mapping[str, str] = os.environ) -> None:
        self.crash_points = set(filter(None, environ.get("ONCELOG_SPARK_CRASH_POINT", "").split(",")))
        after = environ.get("ONCELOG_SPARK_CRASH_AFTER_BATCH")
        self.crash_after = int(after) if after is not None else None
        self.crash_once = environ.get("ONCELOG_SPARK_CRASH_ONCE")
        self.crash_pgid = environ.get("ONCELOG_SPARK_CRASH_PGID")
        self.task_fault = environ.get("ONCELOG_SPARK_TASK_FAULT")
        self.task_fault_once = environ.get("ONCELOG_SPARK_TASK_FAULT_ONCE")
        self.pause_dir = environ.get("ONCELOG_SPARK_COMMIT_PAUSE")
        self.pause_batches = environ.get("ONCELOG_SPARK_COMMIT_PAUSE_BATCHES", "").split(",")
        self.pause_at = environ.get("ONCELOG_SPARK_COMMIT_PAUSE_AT")
        self.pause_timeout = 300.0

    @classmethod
    def wanted(cls, environ: Mapping[str, str] = os.environ) -> bool:
        return any(k.startswith("ONCELOG_SPARK_") for k in environ)

    # ------------------------------------------------------------ points

    def at(self, point: str, batch_id: int | None = None, protocol: Any = None, decision: Any = None) -> None:
        if point in ("before-endtxns", "after-endtxns") and decision is not None:
            self._pause_at(point, protocol.prefix, decision)
        self._crash(point, batch_id)
        if point == "after-decision" and decision is not None:
            self._between_commits(protocol, decision)

    def task_written(self, opts=None) -> None:
        """``ONCELOG_SPARK_TASK_FAULT`` (once, or on every attempt), or the options
        ``oncelog.test.taskDelayMs=N`` (sleep N ms with the task's transaction open: a stop or a
        kill lands in the middle of the batch) and ``oncelog.test.taskFailure=raise`` (every
        attempt raises: the query fails)."""
        if self.task_fault and _once(self.task_fault_once):
            if self.task_fault == "exit":
                os._exit(17)
            raise RuntimeError("injected task failure (ONCELOG_SPARK_TASK_FAULT)")
        _option_faults(opts)

    # ------------------------------------------------------------ crash points

    def crash_wanted(self, name: str) -> bool:
        return name in self.crash_points

    def _crash(self, name: str, batch_id: int | None) -> None:
        """SIGKILL the driver's process group here if ``ONCELOG_SPARK_CRASH_POINT`` names it."""
        if name not in self.crash_points:
            return
        if self.crash_after is not None and batch_id is not None and batch_id <= self.crash_after:
            return
        if _once(f"{self.crash_once}.{name}" if self.crash_once else None):
            # Spark's Python workers may sit in a process group of their own (the worker daemon's):
            # kill the driver's group, then this worker's group, so nothing runs past the point.
            os.killpg(int(self.crash_pgid or os.getpgid(0)), signal.SIGKILL)
            os.killpg(os.getpgid(0), signal.SIGKILL)

    # ------------------------------------------------------------ pauses

    def _pause_stages(self) -> list[str]:
        return (self.pause_at or "between-commits").split(",")

    def _pause_wanted(self, batch_id: int, stage: str, marker: str) -> bool:
        return (bool(self.pause_dir) and stage in self._pause_stages() and str(batch_id) in self.pause_batches
                and not os.path.exists(os.path.join(self.pause_dir, marker)))

    def _between_commits(self, protocol, decision) -> None:
        """Test-only control flow at ``after-decision``: for the crash point ``between-commits``
        or a pause of this batch's commit, EndTxn the batch's first transaction alone and stop
        there (SIGKILL; or write ``<dir>/paused.<batch>``, JSON: the query's prefix, the committed
        and the still open transactional ids, and wait for the test's ``<dir>/go.<batch>``, it
        kills brokers meanwhile). The commit protocol then commits them all, as it always does."""
        batch_id = decision.batch_id
        between = self.crash_wanted("between-commits")
        pause = self._pause_wanted(batch_id, "between-commits", f"paused.{batch_id}")
        if not (between or pause) or len(decision.txns) < 2:
            return
        first = decision.txns[0]
        protocol.client.end_txn(first.transactional_id, first.producer_id, first.producer_epoch, commit=True)
        if pause:
            _write_json(self.pause_dir, f"paused.{batch_id}", {
                "prefix": protocol.prefix, "batch": batch_id, "committed": [first.transactional_id],
                "open": [t.transactional_id for t in decision.txns[1:]]})
            _wait_for(os.path.join(self.pause_dir, f"go.{batch_id}"), self.pause_timeout)
        self._crash("between-commits", batch_id)

    def _pause_at(self, stage: str, prefix: str, decision) -> None:
        """A pause at ``stage`` (``ONCELOG_SPARK_COMMIT_PAUSE_AT``) of a listed batch, once across
        restarts: writes ``<dir>/paused.<batch>.<stage>`` (JSON: prefix, batch, stage, the decided
        transactional ids), then waits for ``<dir>/go.<batch>.<stage>``."""
        batch_id = decision.batch_id
        if stage not in (self.pause_at or "").split(",") or not self._pause_wanted(
                batch_id, stage, f"paused.{batch_id}.{stage}"):
            return
        _write_json(self.pause_dir, f"paused.{batch_id}.{stage}", {
            "prefix": prefix, "batch": batch_id, "stage": stage,
            "transactions": [t.transactional_id for t in decision.txns]})
        _wait_for(os.path.join(self.pause_dir, f"go.{batch_id}.{stage}"), self.pause_timeout)


def _option_faults(opts) -> None:
    if opts is None:
        return
    delay = int(_option(opts, "taskdelayms", "0"))
    if delay:
        time.sleep(delay / 1000)
    if _option(opts, "taskfailure", "") == "raise":
        raise RuntimeError("injected task failure (oncelog.test.taskFailure)")


class _OptionHooks(SinkHooks):
    """No environment: only the ``oncelog.test.*`` options of the task (production: none)."""

    def task_written(self, opts=None) -> None:
        _option_faults(opts)


_hooks: SinkHooks | None = None


def hooks() -> SinkHooks:
    """This process's hooks: those :func:`install` put in place, else, read once at the first
    point, those the environment asks for."""
    global _hooks
    if _hooks is None:
        _hooks = EnvHooks() if EnvHooks.wanted() else _OptionHooks()
    return _hooks


def install(new: SinkHooks | None) -> SinkHooks | None:
    """Put ``new`` in place as this process's hooks (None: read the environment again at the
    next point); returns the hooks it replaces."""
    global _hooks
    old, _hooks = _hooks, new
    return old


# The sink's points, as its write tasks and its driver side call them.

def crash_point(name: str, batch_id: int | None = None) -> None:
    """The sink reached ``name`` (a crash point, if a test asks for one there)."""
    hooks().at(name, batch_id)


def task_fault(opts=None) -> None:
    """A write task has sent its rows: fail or slow it here if a test asks for it."""
    hooks().task_written(opts)
