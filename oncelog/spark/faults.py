"""Every fault the sink's tests inject, in one place: the only reader of the ``ONCELOG_SPARK_*``
environment variables and of the ``oncelog.test.*`` options.

Production code calls the functions here at named points; each does nothing unless a test
asked for it. Two channels, because the sink runs in three kinds of process (the driver, the
Python workers of the write tasks, Spark's commit runner):

* environment variables, inherited by every process a test starts (driver, workers and
  commit runner of a local Spark):
  - ``ONCELOG_SPARK_CRASH_POINT=<name>[,<name>...]`` SIGKILLs the Spark driver's whole process
    group (JVM and Python; ``ONCELOG_SPARK_CRASH_PGID``, else this process's group) at that
    point. With ``ONCELOG_SPARK_CRASH_ONCE=<path>`` each point fires once across restarts
    (marker ``<path>.<name>``), so a chain of restarts walks through the points.
    ``ONCELOG_SPARK_CRASH_AFTER_BATCH=N``: only batches after N crash. Points: ``task-write``
    (inside a write task, after its rows are sent; with ``atomicity=partition`` after its
    marker too, before its EndTxn), ``task-committed`` (``atomicity=partition``: inside a write
    task, after its EndTxn), ``before-commit``, ``after-decision``, ``between-commits``,
    ``after-endtxns`` (every EndTxn of the batch answered; not yet all CompleteCommit, not yet
    done, the barrier still up), ``after-commits`` (before Spark's commit log);
  - ``ONCELOG_SPARK_TASK_FAULT=raise|exit`` fails the first write task attempt (once, with
    ``ONCELOG_SPARK_TASK_FAULT_ONCE=<path>``) after it has sent its rows and left its
    transaction open (``atomicity=partition``: after it committed its transaction): ``raise``
    as an exception, ``exit`` by killing the Python worker;
  - ``ONCELOG_SPARK_COMMIT_PAUSE=<dir>`` with ``ONCELOG_SPARK_COMMIT_PAUSE_BATCHES=1,2`` pauses
    the commit of each listed batch once (across restarts), between its first and its second
    EndTxn (:func:`commit_pause`); with ``ONCELOG_SPARK_COMMIT_PAUSE_AT=<stage>[,<stage>]``
    instead (or as well) at a stage of step 5-6 of the commit protocol: ``before-endtxns``
    (decided, no EndTxn sent yet) or ``after-endtxns`` (every EndTxn answered, the wait for
    CompleteCommit and the barrier's end still to come) (:func:`commit_pause_at`);
* options (they reach the commit runner, which environment variables set after the JVM started
  do not): ``oncelog.test.barrier=false`` turns the visibility barrier off;
  ``oncelog.test.awaitComplete=false`` ends the barrier right after the batch's EndTxns, without
  waiting for its transactions to be CompleteCommit and before done (a control run: the order
  that once let a reader see part of a batch);
  ``oncelog.test.taskDelayMs`` and ``oncelog.test.taskFailure`` slow or fail write tasks
  (:func:`task_fault`: a SparkSession that is already running takes no new environment);
  ``oncelog.test.commitStaggerMs=N`` spaces the EndTxns of a batch so a reader can look between
  them (tests/spark/test_sink_atomicity.py).
"""

from __future__ import annotations

import json
import os
import signal
import time
from typing import Mapping

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


def crash_point_wanted(name: str) -> bool:
    """Whether ``ONCELOG_SPARK_CRASH_POINT`` names this point (whether or not it will fire)."""
    return name in os.environ.get("ONCELOG_SPARK_CRASH_POINT", "").split(",")


def crash_point(name: str, batch_id: int | None = None) -> None:
    """SIGKILL the driver's process group here if ``ONCELOG_SPARK_CRASH_POINT`` asks for it."""
    if not crash_point_wanted(name):
        return
    after = os.environ.get("ONCELOG_SPARK_CRASH_AFTER_BATCH")
    if after is not None and batch_id is not None and batch_id <= int(after):
        return
    once = os.environ.get("ONCELOG_SPARK_CRASH_ONCE")
    if _once(f"{once}.{name}" if once else None):
        # Spark's Python workers may sit in a process group of their own (the worker daemon's):
        # kill the driver's group, then this worker's group, so nothing runs past the point.
        os.killpg(int(os.environ.get("ONCELOG_SPARK_CRASH_PGID") or os.getpgid(0)), signal.SIGKILL)
        os.killpg(os.getpgid(0), signal.SIGKILL)


def task_fault(opts=None) -> None:
    """Fail or slow this write task here if a test asks for it: ``ONCELOG_SPARK_TASK_FAULT``
    (once, or on every attempt), or the options ``oncelog.test.taskDelayMs=N`` (sleep N ms with
    the task's transaction open: a stop or a kill lands in the middle of the batch) and
    ``oncelog.test.taskFailure=raise`` (every attempt raises: the query fails)."""
    mode = os.environ.get("ONCELOG_SPARK_TASK_FAULT")
    if mode and _once(os.environ.get("ONCELOG_SPARK_TASK_FAULT_ONCE")):
        if mode == "exit":
            os._exit(17)
        raise RuntimeError("injected task failure (ONCELOG_SPARK_TASK_FAULT)")
    if opts is None:
        return
    delay = int(_option(opts, "taskdelayms", "0"))
    if delay:
        time.sleep(delay / 1000)
    if _option(opts, "taskfailure", "") == "raise":
        raise RuntimeError("injected task failure (oncelog.test.taskFailure)")


def commit_pause_wanted(batch_id: int) -> bool:
    """Whether ``ONCELOG_SPARK_COMMIT_PAUSE`` asks to pause this batch's commit between its first
    and second EndTxn (not done yet): the default stage, or ``between-commits`` among
    ``ONCELOG_SPARK_COMMIT_PAUSE_AT``'s."""
    where = os.environ.get("ONCELOG_SPARK_COMMIT_PAUSE")
    batches = os.environ.get("ONCELOG_SPARK_COMMIT_PAUSE_BATCHES", "")
    stages = os.environ.get("ONCELOG_SPARK_COMMIT_PAUSE_AT", "between-commits").split(",")
    return bool(where) and "between-commits" in stages and str(batch_id) in batches.split(",") and not os.path.exists(
        os.path.join(where, f"paused.{batch_id}"))


def commit_pause(prefix: str, batch_id: int, committed: list[str], still_open: list[str],
                 timeout: float = 300.0) -> None:
    """The handshake of :func:`commit_pause_wanted`: the first task transaction of the decided
    batch is committed, the others are still open. Writes ``<dir>/paused.<batch>`` (JSON: the
    query's prefix, the committed and the still open transactional ids), then waits until the
    test creates ``<dir>/go.<batch>`` (it SIGKILLs brokers meanwhile), at most ``timeout``."""
    where = os.environ["ONCELOG_SPARK_COMMIT_PAUSE"]
    info = {"prefix": prefix, "batch": batch_id, "committed": committed, "open": still_open}
    tmp = os.path.join(where, f".paused.{batch_id}.tmp")
    with open(tmp, "w") as f:
        json.dump(info, f)
    os.replace(tmp, os.path.join(where, f"paused.{batch_id}"))  # whole or absent
    go = os.path.join(where, f"go.{batch_id}")
    deadline = time.monotonic() + timeout
    while not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.05)


def commit_pause_at(stage: str, prefix: str, batch_id: int, transactional_ids: list[str], timeout: float = 300.0) -> None:
    """Pause the commit of a batch listed in ``ONCELOG_SPARK_COMMIT_PAUSE_BATCHES`` at ``stage``
    if ``ONCELOG_SPARK_COMMIT_PAUSE_AT`` names it, once across restarts: writes
    ``<dir>/paused.<batch>.<stage>`` (JSON: prefix, batch, stage, the decided transactional ids),
    then waits until the test creates ``<dir>/go.<batch>.<stage>`` (it kills brokers meanwhile)."""
    if stage not in os.environ.get("ONCELOG_SPARK_COMMIT_PAUSE_AT", "").split(","):
        return
    where = os.environ.get("ONCELOG_SPARK_COMMIT_PAUSE")
    batches = os.environ.get("ONCELOG_SPARK_COMMIT_PAUSE_BATCHES", "")
    paused = os.path.join(where or "", f"paused.{batch_id}.{stage}")
    if not where or str(batch_id) not in batches.split(",") or os.path.exists(paused):
        return
    info = {"prefix": prefix, "batch": batch_id, "stage": stage, "transactions": transactional_ids}
    tmp = os.path.join(where, f".paused.{batch_id}.{stage}.tmp")
    with open(tmp, "w") as f:
        json.dump(info, f)
    os.replace(tmp, paused)  # whole or absent
    go = os.path.join(where, f"go.{batch_id}.{stage}")
    deadline = time.monotonic() + timeout
    while not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.05)
