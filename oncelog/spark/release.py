"""Stopping releases what the sink holds open: a stopped query must not hold back its output.

An open transaction holds back the last stable offset of every partition it wrote, so every
read_committed reader of those partitions waits until it ends. While a batch is being written
the sink holds some open on purpose: the visibility barrier (``<prefix>.barrier``, from before
the tasks until the batch is complete) and the task transactions (until the driver commits
them). A query stopped, or failed, in the middle of a batch leaves them open: Spark calls the
sink's ``abort()`` only for some of those ends (a streaming sink's micro-batch, when the abort
itself is not interrupted; not a ``foreachBatch`` write interrupted by ``query.stop()``, seen
here), and a task cancelled with its query may still open its transaction a moment after the
abort (Spark kills a cancelled Python task only after ``spark.python.task.killTimeout``).
Without a release they stay open until ``transaction.timeout.ms`` (the sink's default: 5 minutes).

How, in three parts:

* **Registry** (:class:`OpenWrites`): ``prepare()`` (on the driver's host, before the tasks)
  records each query's write in flight: the prefix, how to reach the cluster, the barrier
  ``(transactional id, producer id, epoch)`` and, for a streaming sink, the query id. One file
  per prefix, in a directory per driver JVM (``~/.cache/oncelog/open-writes/<jvm pid>-<start>``,
  0700; the files, 0600, hold the client settings, credentials included). A successful commit
  deletes its file; an abort keeps it (its run is ending: zombies may follow).
* **Release** (:func:`release`), from any process, by the public protocol only, bounded in time:
  (1) a PENDING decision of the prefix is rolled forward (EndTxn(commit) of its transactions,
  then the wait until they are CompleteCommit; the decision is left for the next run to mark
  done: no decider is fenced); (2) the barrier is aborted by its exact producer id and epoch
  (a newer run's barrier has a newer epoch and is not touched); (3) every Ongoing transaction
  of the prefix's task ids (:func:`oncelog.spark.txn_pool.sweep_pattern`, ``<prefix>.p<n>`` of
  ``atomicity=partition``) and its decider that *started before* the release's cut-off is
  aborted by its exact producer id and epoch (DescribeTransactions): a transaction of a run that
  started after the cut-off is never touched, nor one of the pending decision.
* **Hooks** (:func:`install`), in the driver's Python: a StreamingQueryListener whose
  ``onQueryTerminated`` (``query.stop()``, a failed query) releases what the terminated query
  owned, once at once and once more after the kill timeout (for tasks that opened a
  transaction after the first pass); ``SparkContext.stop()`` (``spark.stop()``) and a normal
  interpreter exit release everything this driver recorded (no query can run any more; the
  exit stops the SparkContext first, so that no task is left to open a transaction). They are
  installed when ``OncelogDataSource`` is registered on the driver
  (``spark.dataSource.register``, which :func:`oncelog.spark.session.local_session` does), or by
  :func:`release_on_stop`. Only a crash (the driver's process group SIGKILLed) leaves things
  open, for the next run (its ``prepare()``, commit and sweep) or ``transaction.timeout.ms``.

Which records a terminated query owns: none opened after it ended (the record of a prefix is
replaced by the next run's ``prepare()``, and the second pass comes seconds after the end), and
none while a new run of the same query is active (its own write may be in flight, and it cleans
up after the old one); else a streaming sink's, by query id; a ``df.write``'s (``foreachBatch``,
whose driver side cannot know the query), when the prefix's latest decision was made by the
terminated run, or when no query is active any more. Otherwise (another query still active that
may be writing the prefix) it is left to that query or to the timeout. (A restarted
``foreachBatch`` query once lost its first batch here: its prefix's latest decision was still
the old run's, so the old run's second pass took the new run's record for its own, and aborted
its barrier and its tasks' transactions.)
"""

from __future__ import annotations

import atexit
import hashlib
import json
import logging
import os
import re
import threading
import time
from dataclasses import asdict, dataclass

from ..cachedir import user_cache

log = logging.getLogger("oncelog.spark")

RELEASE_SECONDS = 15.0  # the most one release pass may take (client timeouts included)


# ---------------------------------------------------------------------------------------------
# Which driver: the JVM that runs the query (an ancestor of the Python workers that call the
# sink's driver-side steps, the child of the driver's Python).


def _proc_start(pid: int) -> str | None:
    """The process's start time (clock ticks since boot), which tells a pid reused from another."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return stat[stat.rfind(b")") + 2:].split()[19].decode()
    except (OSError, IndexError):
        return None


def _is_java(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv0 = f.read().split(b"\0", 1)[0]
    except OSError:
        return False
    return os.path.basename(argv0) == b"java"


def driver_key_from_worker() -> str | None:
    """``<jvm pid>-<start>`` of the JVM this Python worker descends from; None off Linux or
    outside Spark (then nothing is recorded: release stays with the next run and the timeout)."""
    pid = os.getppid()
    for _ in range(6):
        if pid <= 1:
            return None
        if _is_java(pid):
            start = _proc_start(pid)
            return f"{pid}-{start}" if start else None
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
            pid = int(stat[stat.rfind(b")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            return None
    return None


def driver_key_of(jvm_pid: int) -> str | None:
    start = _proc_start(jvm_pid)
    return f"{jvm_pid}-{start}" if start else None


# ---------------------------------------------------------------------------------------------
# The registry


@dataclass(frozen=True)
class OpenWrite:
    """A write in flight of one query (one transactional-id prefix)."""

    prefix: str
    bootstrap: str
    kafka: dict
    commit_log_topic: str
    atomicity: str  # "batch" | "partition"
    barrier: tuple | None  # (transactional id, producer id, epoch) of the open barrier
    query_id: str | None  # a streaming sink's query; None: a df.write (from foreachBatch or not)
    opened_ms: int


class OpenWrites:
    """The records of one driver: ``<dir>/<sha1(prefix)>.json``, written whole (rename)."""

    def __init__(self, driver_key: str) -> None:
        self.dir = user_cache("open-writes", driver_key)

    def _path(self, prefix: str) -> str:
        return os.path.join(self.dir, hashlib.sha1(prefix.encode()).hexdigest()[:20] + ".json")

    def record(self, write: OpenWrite) -> None:
        os.makedirs(self.dir, mode=0o700, exist_ok=True)
        path = self._path(write.prefix)
        tmp = f"{path}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(asdict(write), f)
        os.replace(tmp, path)

    def forget(self, prefix: str, barrier: tuple | None) -> None:
        """Drop ``prefix``'s record if it is the one of ``barrier`` (a later batch's record,
        with a newer barrier, stays)."""
        path = self._path(prefix)
        found = _load(path)
        if found is not None and (found.barrier is None or tuple(found.barrier) == tuple(barrier or ())):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def all(self) -> list[OpenWrite]:
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return []
        return [w for w in (_load(os.path.join(self.dir, n)) for n in sorted(names) if n.endswith(".json"))
                if w is not None]

    def drop(self, write: OpenWrite) -> None:
        """Drop ``write``'s record, unless a later write of the prefix has replaced it."""
        path = self._path(write.prefix)
        if _load(path) == write:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass


def _load(path: str) -> OpenWrite | None:
    try:
        with open(path) as f:
            d = json.load(f)
        d["barrier"] = tuple(d["barrier"]) if d.get("barrier") else None
        return OpenWrite(**d)
    except (OSError, ValueError, TypeError):
        return None


def record_open_write(opts, atomicity: str, barrier: tuple | None, query_id: str | None) -> None:
    """From ``prepare()`` on the driver's host: best effort (a failure only costs the release)."""
    key = driver_key_from_worker()
    if key is None or opts.transactional_id_prefix is None:
        return
    try:
        OpenWrites(key).record(OpenWrite(opts.transactional_id_prefix, opts.bootstrap, dict(opts.kafka),
                                         opts.commit_log_topic, atomicity, barrier, query_id,
                                         int(time.time() * 1000)))
    except OSError as exc:
        log.info("could not record the open write of %s (released then by the next run or the timeout): %s",
                 opts.transactional_id_prefix, exc)


def forget_open_write(prefix: str, barrier: tuple | None) -> None:
    """From a successful ``commit()``: the batch is complete, nothing of it is open."""
    key = driver_key_from_worker()
    if key is not None:
        OpenWrites(key).forget(prefix, barrier)


# ---------------------------------------------------------------------------------------------
# Releasing


def release(write: OpenWrite, before_ms: int) -> dict[str, int] | None:
    """Steps (1)-(3) of the module docstring for one record; returns what was done, None if the
    cluster could not be reached or refused. Never raises for the cluster's answers: a release is
    best effort, logged."""
    from ..client.kafka import KafkaClient, KafkaProtocolError
    from .barrier import close_barrier
    from .batch_commit import PENDING, CommitProtocol
    from .txn_pool import sweep_pattern

    done = {"rolled_forward": 0, "barrier": 0, "aborted": 0}
    client = KafkaClient(write.bootstrap, write.kafka, timeout=min(RELEASE_SECONDS, 10.0))
    try:
        # (1) A decided batch is finished first: never abort what a decision holds.
        keep: set[str] = set()
        protocol = CommitProtocol(client, write.bootstrap, write.commit_log_topic, write.prefix, 60_000)
        if protocol._log_exists():
            latest = protocol.log.latest(write.prefix)
            if latest is not None and latest.state == PENDING:
                keep = {t.transactional_id for t in latest.txns}
                codes = client.end_txns([(t.transactional_id, t.producer_id, t.producer_epoch) for t in latest.txns],
                                        commit=True)
                if all(c.value == 0 for c in codes.values()):
                    protocol._await_complete(latest)
                    done["rolled_forward"] = len(latest.txns)
        # (2) The barrier, by its exact epoch.
        if write.barrier is not None:
            close_barrier(client, tuple(write.barrier))
            done["barrier"] = 1
        # (3) Open transactions of the prefix that started before the cut-off.
        patterns = [sweep_pattern(write.prefix), _partition_pattern(write.prefix), _decider_pattern(write.prefix)]
        listed = client.list_transactions(states=("Ongoing",), pattern="|".join(f"(?:{p})" for p in patterns))
        ids = [tid for tid, _pid, _state in listed if tid not in keep]
        if ids:
            described = client.describe_transactions(ids)
            for tid, d in described.items():
                if d.state != "Ongoing" or d.start_ms < 0 or d.start_ms >= before_ms:
                    continue
                code = client.end_txn(tid, d.producer_id, d.producer_epoch, commit=False)
                if code.value == 0:
                    done["aborted"] += 1
    except (KafkaProtocolError, OSError, ValueError) as exc:
        log.warning("releasing what %s left open: %s (it ends by transaction.timeout.ms)", write.prefix, exc)
        return None
    finally:
        client.close()
    if any(done.values()):
        log.info("released what %s left open: %s", write.prefix, done)
    return done


def _partition_pattern(prefix: str) -> str:
    return re.escape(prefix) + r"\.p\d+"


def _decider_pattern(prefix: str) -> str:
    return re.escape(prefix) + r"\.commits"


# ---------------------------------------------------------------------------------------------
# The driver's hooks


def _owned(write: OpenWrite, query_id: str, run_id: str, active: set[str], ended_ms: int) -> bool:
    """Whether the terminated query (``query_id``, ``run_id``, seen ended at ``ended_ms``) owns
    ``write`` (module docstring). A record is one per prefix, so the next run's ``prepare()``
    replaces the old run's: a record opened after the query ended is another run's, whenever
    the pass looks (the second pass comes seconds later, when a restarted query may be writing).
    And while a new run of the same query is active, nothing is the old run's to release: the
    new run's own write may be in flight under the same prefix (a ``df.write`` record names no
    query, and the prefix's latest decision is still the old run's until the new run decides
    its first batch), and the new run cleans up after the old one (its barrier fences the old
    barrier, its commit sweeps the old tasks' transactions)."""
    if write.opened_ms >= ended_ms:
        return False
    if query_id in active:
        return False
    if write.query_id is not None:
        return write.query_id == query_id
    if not active:
        return True
    return _latest_run(write) == run_id[:8]


def _latest_run(write: OpenWrite) -> str | None:
    """The run that made the prefix's latest decision (None if none or unreachable)."""
    from ..client.kafka import KafkaClient, KafkaProtocolError
    from .batch_commit import CommitLog

    client = KafkaClient(write.bootstrap, write.kafka, timeout=5.0)
    try:
        meta = client.metadata([write.commit_log_topic]).get(write.commit_log_topic)
        if meta is None or meta.error.value != 0:
            return None
        decision = CommitLog(client, write.bootstrap, write.commit_log_topic).latest(write.prefix)
        return decision.run_id if decision is not None else None
    except (KafkaProtocolError, OSError, ValueError):
        return None
    finally:
        client.close()


class _Hooks:
    """One driver's hooks (one per SparkContext): the listener's passes, stop and exit."""

    def __init__(self, spark, jvm_pid: int) -> None:
        self.spark = spark
        self.sc = spark.sparkContext
        self.key = driver_key_of(jvm_pid)
        self.registry = OpenWrites(self.key) if self.key else None
        try:
            self.kill_timeout = float(str(self.sc.getConf().get("spark.python.task.killTimeout", "2s")).rstrip("s"))
        except ValueError:
            self.kill_timeout = 2.0
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []
        self.stopped = False

    def active(self) -> set[str]:
        try:
            return {q.id for q in self.spark.streams.active}
        except Exception:  # noqa: BLE001 - a stopped context: nothing is active any more
            return set()

    def release_owned(self, query_id: str, run_id: str, ended_ms: int) -> None:
        """Two passes: now, and once more after the kill timeout (a cancelled task may open its
        transaction a moment after the query ended). Which records the query owns is judged
        against ``ended_ms``, when its end was seen; which transactions are released, against
        each pass's own time (a zombie task's transaction started after the end)."""
        for last, delay in ((False, 0.0), (True, self.kill_timeout + 1.0)):
            if delay:
                time.sleep(delay)
            if self.registry is None:
                return
            cut = int(time.time() * 1000)
            active = self.active()
            for write in self.registry.all():
                if _owned(write, query_id, run_id, active, ended_ms) and release(write, cut) is not None and last:
                    self.registry.drop(write)  # nothing of it is open any more

    def release_all(self) -> None:
        """No query can be running any more (the context stopped, or the interpreter exits)."""
        if self.registry is None:
            return
        cut = int(time.time() * 1000)
        for write in self.registry.all():
            release(write, cut)
            self.registry.drop(write)

    def on_terminated(self, query_id: str, run_id: str) -> None:
        ended_ms = int(time.time() * 1000)
        t = threading.Thread(target=self.release_owned, args=(query_id, run_id, ended_ms), daemon=True,
                             name=f"oncelog-release-{query_id[:8]}")
        with self.lock:
            self.threads = [x for x in self.threads if x.is_alive()] + [t]
        t.start()

    def on_stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        self.release_all()

    def at_exit(self) -> None:
        if self.stopped or self.registry is None or not self.registry.all():
            return
        try:
            # Stop Spark first (the JVM would at its own exit, after this): its Python workers
            # die with it, so no task opens a transaction after the release below.
            self.sc.stop()
        except Exception:  # noqa: BLE001 - already stopped or never fully up
            pass
        self.on_stop()


_INSTALLED: dict[int, _Hooks] = {}


def install(spark) -> bool:
    """Install the release hooks on ``spark`` (a SparkSession, on the driver), once per
    SparkContext. Returns whether they are installed (not off Linux, nor without a JVM pid)."""
    from pyspark.sql.streaming import StreamingQueryListener

    if _is_spark_connect(spark):
        # A Spark Connect client has no SparkContext and no driver JVM of its own: the hooks
        # cannot run here (docs/connector.md, "Spark Connect"); a stopped query's transactions end with
        # the next run's prepare/commit/sweep or transaction.timeout.ms.
        log.info("Spark Connect session: the sink's release hooks are not installed on the client")
        return False
    sc = spark.sparkContext
    if id(sc) in _INSTALLED:
        return True
    try:
        jvm_pid = int(sc._jvm.java.lang.ProcessHandle.current().pid())
    except Exception:  # noqa: BLE001 - no JVM reachable from this Python
        return False
    hooks = _Hooks(spark, jvm_pid)
    if hooks.registry is None:
        return False
    _cleanup_dead_drivers()

    class ReleaseOnTermination(StreamingQueryListener):
        """oncelog: releases the transactions a terminated query left open."""

        def onQueryStarted(self, event) -> None:
            pass

        def onQueryProgress(self, event) -> None:
            pass

        def onQueryIdle(self, event) -> None:
            pass

        def onQueryTerminated(self, event) -> None:
            hooks.on_terminated(str(event.id), str(event.runId))

    spark.streams.addListener(ReleaseOnTermination())
    stop = sc.stop

    def stop_and_release(*args, **kwargs):
        try:
            return stop(*args, **kwargs)
        finally:
            # The workers are gone with the context: one pass over every record is final (a
            # listener pass still under way does the same steps; they are idempotent).
            hooks.on_stop()
            _INSTALLED.pop(id(sc), None)

    sc.stop = stop_and_release  # this SparkContext only: spark.stop() calls it
    atexit.register(hooks.at_exit)
    _INSTALLED[id(sc)] = hooks
    return True


def _is_spark_connect(spark) -> bool:
    try:
        from pyspark.sql.connect.session import SparkSession as ConnectSession
    except Exception:  # noqa: BLE001 - pyspark without the connect extra: no Connect session can exist
        return False
    return isinstance(spark, ConnectSession)


def release_on_stop(spark) -> bool:
    """Release what the sink leaves open when a query stops or fails, ``spark.stop()`` runs or
    the driver exits (module docstring). Installed by ``spark.dataSource.register(
    OncelogDataSource)``; call it when ``format("oncelog")`` is found without that (PySpark's
    lookup of ``pyspark_oncelog`` runs in a worker, not in your driver)."""
    return install(spark)


def install_on_active_session() -> None:
    """From ``OncelogDataSource.name()``: on the driver (a SparkSession here), install; in a
    Python worker (none), nothing."""
    try:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
    except Exception:  # noqa: BLE001
        return
    if spark is not None:
        try:
            install(spark)
        except Exception as exc:  # noqa: BLE001 - the hooks are best effort; registering must not fail
            log.warning("could not install the sink's release hooks: %s", exc)


def _cleanup_dead_drivers() -> None:
    """Registry directories of JVMs that are gone (crashed drivers): their writes are the next
    run's to clean up at the cluster; the files are only removed."""
    import shutil

    base = user_cache("open-writes")
    try:
        names = os.listdir(base)
    except FileNotFoundError:
        return
    for name in names:
        pid, _, start = name.partition("-")
        if pid.isdigit() and _proc_start(int(pid)) != start:
            shutil.rmtree(os.path.join(base, name), ignore_errors=True)
