"""``python -m bench endurance``: a long run of the demo's two output paths, and what it leaves behind.

Users run a streaming query for months; a month at a one-second trigger is
~2.6 million micro-batches. Whatever the sink or the broker keeps per micro-batch (transactional
ids, their records in ``__transaction_state``, decisions in the commit log, checkpoint files,
memory) must stop growing once the query is warm. This benchmark runs many micro-batches at a
short trigger and samples those quantities every ``--every`` batches.

The job is the demo's (:mod:`oncelog.pipeline.job`, one Spark driver process in its own process
group, :class:`oncelog.pipeline.procs.SparkDriver`), both of its output paths side by side:

* ``enrich``: a streaming query writing through the sink, ``writeStream.format("oncelog")``
  (exactly-once, ``atomicity=batch``: each write task leaves a transaction open, the driver
  commits them all, a visibility barrier ``<prefix>.barrier``, decisions in the compacted
  commit-log topic ``oncelog-spark-commits``);
* ``totals``: a ``foreachBatch`` query (RocksDB state) writing each micro-batch with
  ``df.write.format("oncelog")`` and ``txnAppId``/``txnVersion`` = the batch id (the batch writer).

Input: a steady trickle, so every micro-batch of both queries has some. The demo's generator
(:class:`oncelog.pipeline.events.Generator`, in a thread of this process) writes
``--records-per-txn`` events per transaction every ``--txn-every-ms`` (by default half the
trigger), one transactional id for the whole run; one transaction in eight is aborted on purpose,
as in the demo.

Brokers (``--broker``): an oncelog broker (``oncelog serve``, ``--fsync always`` as the demo) and
Apache Kafka 4.4, one KRaft node (:class:`oncelog.tools.apache_kafka.KafkaCluster`, full JIT, 1 GB
heap, Kafka's defaults otherwise), one after the other, each with a fresh driver and checkpoints.
The driver's JVM runs with the full JIT (``--driver-java-options``): the demo's session stops it
at C1 for a fast start, which costs ~10% more CPU per micro-batch in a long run.

Every ``--every`` micro-batches (a *window*: both queries have completed that many more) one
sample:

* ``txn_ids``: transactional ids the broker holds, in every state (ListTransactions through
  :class:`oncelog.client.kafka.KafkaClient`; Empty and CompleteCommit/CompleteAbort included),
  split by owner (streaming sink, foreachBatch writer, generator);
* ``broker_rss_mib``: the broker process's VmRSS (for Kafka's JVM informational: it grows to its
  heap); ``broker_heap_after_gc_mib``: Kafka's heap in use right after a full GC (``jcmd <pid>
  GC.run``, then ``GC.heap_info``), its live set: the least of ``--heap-probes`` probes spread
  over the window (a single probe also holds whatever the work in flight holds then);
* ``txn_state_bytes`` / ``commit_log_bytes``: bytes of the segments (``.log`` files, what
  DescribeLogDirs reports; not the preallocated index files) of ``__transaction_state`` and of
  the commit-log topic, on disk under the broker's data directory;
* ``checkpoint_bytes``: every file under both queries' checkpoint directories.
  These three are a saw-tooth once they are bounded (compaction rewrites closed segments; Spark
  deletes old batches' files every micro-batch and RocksDB's old versions every minute), so they
  are looked at every ``--disk-every`` seconds and a window reports its peak (``*_end``: the
  size at the window's end). Compaction only works on closed segments: with the defaults
  (``__transaction_state`` segments of 100 MiB on Kafka, 16 MiB on oncelog; the sink's commit
  log in 1 MiB segments) a topic grows for a long time before its first compaction;
  ``--segment-bytes`` sets both smaller so that a run shows the level compaction keeps them at.
  The commit log's level also holds the COMMIT markers of the last ``delete.retention.ms`` (the
  sink's: 1 hour; ``--marker-retention-ms``);
* per query, over the window's batches: ``durationMs.addBatch`` p50/p99 (for ``enrich`` the
  write tasks plus the driver's two-phase commit; for ``totals`` the whole ``foreachBatch``, i.e.
  the batch write and its commit) and ``triggerExecution`` p50/p99, from the queries' progress;
* ``driver_rss_mib``: the driver's JVM plus its Python process (VmRSS);
  ``driver_heap_after_gc_mib``: the driver JVM's heap after a full GC (``jcmd``, probed as Kafka's);
  the PySpark worker processes' proportional set size (PSS: they are forks sharing pages) as
  ``workers_pss_mib``.

Verdict, per series (the issue's rule): after ``--warmup`` windows, the last window is within
``--tolerance`` (10%) of the first window after warm-up: ``flat``; below it, ``shrinks`` (also a
pass: nothing grows); above it, ``GROWS``. Transactional ids pass when they stay at or below
``--max-ids`` in every window after warm-up (their change is shown too); by default a bound
derived from the job's shape (:func:`derived_id_bound`), which a pooled naming must not exceed.
Series marked ``info`` are reported without a verdict. A window is sampled once both queries
have completed its micro-batches; the faster query (``enrich``) is further on by then, and each
query's latencies are those of its own batches of the window.

At the end the generator stops, the driver drains (every query processes what is left and
stops), the broker's transactions are listed once more (anything still Ongoing after a clean
stop holds back a partition's last stable offset) and oncelog's auditor (:mod:`oncelog.audit`)
checks the streaming path's output against its input: every committed input exactly once.

Output: a table per broker (one row per window), a verdict table, ``--report`` (JSON, every
sample), ``--plot`` (PNG, one panel per series, both brokers).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from .stats import percentile

QUERIES = ("enrich", "totals")
BROKERS = ("oncelog", "apache-kafka")
APP_ID = "bench-endurance"  # the job's txnAppId prefix: totals write as oncelog-<APP_ID>-totals-*
GENERATOR_ID = "bench-endurance-generator"
MIB = 1 << 20
TXN_SEGMENT_CONFIG = "transaction.state.log.segment.bytes"
DISK_SERIES = ("txn_state_bytes", "commit_log_bytes", "checkpoint_bytes")


@dataclass(frozen=True)
class Series:
    key: str
    label: str
    unit: str
    rule: str  # "ids" | "flat" | "info"
    brokers: tuple[str, ...] = BROKERS  # where the rule applies (elsewhere: info)


SERIES = (
    Series("txn_ids", "transactional ids held by the broker", "ids", "ids"),
    Series("broker_rss_mib", "broker RSS", "MiB", "flat", ("oncelog",)),
    Series("broker_heap_after_gc_mib", "broker heap after a full GC", "MiB", "flat", ("apache-kafka",)),
    Series("txn_state_bytes", "__transaction_state segments", "bytes", "flat"),
    Series("commit_log_bytes", "commit-log topic segments", "bytes", "flat"),
    Series("checkpoint_bytes", "checkpoints of both queries", "bytes", "flat"),
    Series("enrich_add_batch_p50_ms", "enrich (streaming sink) addBatch p50", "ms", "flat"),
    Series("enrich_add_batch_p99_ms", "enrich (streaming sink) addBatch p99", "ms", "flat"),
    Series("totals_add_batch_p50_ms", "totals (foreachBatch) addBatch p50", "ms", "flat"),
    Series("totals_add_batch_p99_ms", "totals (foreachBatch) addBatch p99", "ms", "flat"),
    Series("enrich_trigger_p50_ms", "enrich triggerExecution p50", "ms", "info"),
    Series("enrich_trigger_p99_ms", "enrich triggerExecution p99", "ms", "info"),
    Series("totals_trigger_p50_ms", "totals triggerExecution p50", "ms", "info"),
    Series("totals_trigger_p99_ms", "totals triggerExecution p99", "ms", "info"),
    Series("driver_rss_mib", "driver RSS (JVM + Python)", "MiB", "flat"),
    Series("driver_heap_after_gc_mib", "driver JVM heap after a full GC", "MiB", "flat"),
    Series("workers_pss_mib", "PySpark workers PSS", "MiB", "info"),
)
SERIES_BY_KEY = {s.key: s for s in SERIES}


# ---------------------------------------------------------------------------------------------
# Measuring processes and files


def _status_kib(pid: int, field: str, path: str = "status") -> int | None:
    try:
        with open(f"/proc/{pid}/{path}") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def rss_mib(pid: int) -> float | None:
    kib = _status_kib(pid, "VmRSS")
    return None if kib is None else kib / 1024


def pss_mib(pid: int) -> float | None:
    kib = _status_kib(pid, "Pss", "smaps_rollup")
    return None if kib is None else kib / 1024


def jcmd_path() -> str | None:
    from oncelog.tools.apache_kafka import ApacheKafkaUnavailable, java

    try:
        candidate = os.path.join(os.path.dirname(os.path.realpath(java())), "jcmd")
    except ApacheKafkaUnavailable:
        candidate = ""
    return candidate if os.path.exists(candidate) else shutil.which("jcmd")


_HEAP_LINE = re.compile(r"^\s*(\S[^\n]*?)\s+total (\d+)K, used (\d+)K", re.M)


def heap_after_gc_mib(pid: int | None, jcmd: str | None) -> float | None:
    """The JVM's heap in use right after a full collection (``jcmd GC.run``, then the used
    figures of every generation in ``GC.heap_info``: Metaspace is not heap and has no "total")."""
    if not pid or not jcmd:
        return None
    try:
        subprocess.run([jcmd, str(pid), "GC.run"], capture_output=True, timeout=120, check=True)
        out = subprocess.run([jcmd, str(pid), "GC.heap_info"], capture_output=True, text=True, timeout=60,
                             check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    used = [int(m.group(3)) for m in _HEAP_LINE.finditer(out)]
    return sum(used) / 1024 if used else None


def segment_bytes(data_dir: str, topic: str) -> int:
    """Bytes of ``topic``'s segment files (``<topic>-<partition>/*.log``) under ``data_dir``:
    the same layout on oncelog and on Kafka."""
    total = 0
    pattern = re.compile(re.escape(topic) + r"-\d+")
    try:
        names = os.listdir(data_dir)
    except OSError:
        return 0
    for name in names:
        if not pattern.fullmatch(name):
            continue
        folder = os.path.join(data_dir, name)
        try:
            for entry in os.scandir(folder):
                if entry.name.endswith(".log"):
                    total += entry.stat().st_size
        except OSError:
            continue
    return total


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def tree_bytes(path: str) -> int:
    """Bytes of the files under ``path`` (or of the file ``path``)."""
    if os.path.isfile(path):
        return os.lstat(path).st_size
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def cpu_seconds(pid: int, children: bool = True) -> float:
    """utime + stime of ``pid`` (every thread), plus its reaped children's (cutime + cstime):
    summed over the live processes of a group, each CPU second is counted once, also those of
    PySpark workers that already exited."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return 0.0
    fields = stat[stat.rfind(b")") + 2:].split()
    ticks = int(fields[11]) + int(fields[12]) + ((int(fields[13]) + int(fields[14])) if children else 0)
    return ticks / os.sysconf("SC_CLK_TCK")


def process_kind(pid: int) -> str | None:
    """``jvm``, ``driver python`` or ``workers`` for a process of the driver's session."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return None
    if args and args[0].endswith("/java"):
        return "jvm"
    if "oncelog.pipeline.job" in args:
        return "driver python"
    return "workers"


def driver_cpu(sid: int | None) -> dict[str, float]:
    from oncelog.pipeline.procs import session_members

    out = {"jvm": 0.0, "driver python": 0.0, "workers": 0.0}
    for pid in session_members(sid) if sid is not None else ():
        kind = process_kind(pid)
        if kind is not None:
            out[kind] += cpu_seconds(pid)
    return out


def driver_memory(sid: int | None) -> dict:
    """RSS of the driver's JVM and Python process, PSS of the PySpark worker processes (forks of
    a daemon sharing pages: their RSS would count the shared pages once per fork)."""
    from oncelog.pipeline.procs import session_members

    out = {"driver_jvm_rss_mib": 0.0, "driver_python_rss_mib": 0.0, "workers_pss_mib": 0.0, "workers": 0}
    if sid is None:
        return out
    for pid in session_members(sid):
        kind = process_kind(pid)
        if kind == "jvm":
            out["driver_jvm_rss_mib"] += rss_mib(pid) or 0.0
        elif kind == "driver python":
            out["driver_python_rss_mib"] += rss_mib(pid) or 0.0
        elif kind == "workers":
            out["workers_pss_mib"] += pss_mib(pid) or 0.0
            out["workers"] += 1
    out["driver_rss_mib"] = out["driver_jvm_rss_mib"] + out["driver_python_rss_mib"]
    return {k: round(v, 1) if isinstance(v, float) else v for k, v in out.items()}


# ---------------------------------------------------------------------------------------------
# The brokers


class OncelogTarget:
    name = "oncelog"

    def __init__(self, root: str, args) -> None:
        from oncelog.process import BrokerProcess

        self.data_dir = os.path.join(root, "broker")
        extra = ["--override", f"{TXN_SEGMENT_CONFIG}={args.segment_bytes}"] if args.segment_bytes else []
        self.broker = BrokerProcess(self.data_dir, fsync=args.fsync, log_path=os.path.join(root, "broker.log"),
                                    extra_args=extra)
        self.settings = (f"oncelog serve --fsync {args.fsync}"
                         + (f" {' '.join(extra)}" if extra else "") + " (defaults otherwise)")

    def start(self) -> None:
        self.broker.start()

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    @property
    def pid(self) -> int:
        return self.broker.proc.pid

    def alive(self) -> bool:
        return self.broker.proc is not None and self.broker.proc.poll() is None

    def rss(self) -> dict:
        return {"broker_rss_mib": round(rss_mib(self.pid) or 0.0, 1)}

    def heap_after_gc(self, jcmd: str | None) -> float | None:
        return None  # not a JVM

    def stop(self) -> None:
        self.broker.stop()


class KafkaTarget:
    name = "apache-kafka"

    def __init__(self, root: str, args) -> None:
        from oncelog.tools.apache_kafka import KafkaCluster

        # Kafka cannot make __transaction_state with segments below 1 MiB (its coordinator never loads).
        self.config = {TXN_SEGMENT_CONFIG: str(max(MIB, args.segment_bytes))} if args.segment_bytes else {}
        self.cluster = KafkaCluster(nodes=1, heap=args.kafka_heap, quick_start=False,
                                    workdir=os.path.join(root, "apache-kafka"), config=self.config)
        self.settings = ""

    def start(self) -> None:
        os.makedirs(self.cluster.workdir, exist_ok=True)
        self.cluster.start()
        # The first FindCoordinator makes __transaction_state (50 partitions): before the run.
        self.cluster.coordinator_of("bench-endurance-prime", key_type=1, timeout=120)
        self.settings = (f"Apache Kafka {self.cluster.installation.version}, 1 KRaft node, -Xmx{self.cluster.heap} "
                         "SerialGC full JIT" + "".join(f", {k}={v}" for k, v in self.config.items())
                         + " (Kafka's defaults otherwise)")

    @property
    def node(self):
        return self.cluster.members[1]

    @property
    def data_dir(self) -> str:
        return os.path.join(self.node.dir, "data")

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    @property
    def pid(self) -> int:
        return self.node.proc.pid

    def alive(self) -> bool:
        return self.node.alive

    def rss(self) -> dict:
        return {"broker_rss_mib": round(rss_mib(self.pid) or 0.0, 1)}

    def heap_after_gc(self, jcmd: str | None) -> float | None:
        return heap_after_gc_mib(self.pid, jcmd)

    def stop(self) -> None:
        self.cluster.stop(graceful=False)


def _round(x: float | None, digits: int = 1) -> float | None:
    return None if x is None else round(x, digits)


# ---------------------------------------------------------------------------------------------
# The job's progress


def create_compacted_topic(bootstrap: str, topic: str, segment: int, marker_retention_ms: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    from oncelog.pipeline.events import quiet_logger

    admin = AdminClient({"bootstrap.servers": bootstrap, "logger": quiet_logger()})
    # Below Kafka 4's 1 MiB minimum of segment.bytes: its testing-only internal.segment.bytes,
    # which both brokers honour.
    config = {"cleanup.policy": "compact", "segment.bytes" if segment >= MIB else "internal.segment.bytes": str(segment),
              "delete.retention.ms": str(marker_retention_ms)}
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(30)


class ProgressTail:
    """The job's progress file (:class:`oncelog.pipeline.job.ProgressLog`), read incrementally."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.position = 0
        self.partial = ""

    def read(self) -> list[dict]:
        try:
            with open(self.path) as f:
                f.seek(self.position)
                data = f.read()
                self.position = f.tell()
        except FileNotFoundError:
            return []
        lines = (self.partial + data).split("\n")
        self.partial = lines.pop()
        return [json.loads(line) for line in lines if line.strip()]


def derived_id_bound(input_partitions: int, shuffle_partitions: int, attempts: int, in_flight: int = 2) -> int:
    """An upper bound for a pooled naming on this job: per output path, one id per write task,
    task attempt and batch in flight, plus the barrier and the decider (``.commits``); plus the
    generator's one id. The streaming path has one write task per input partition (no shuffle),
    the foreachBatch path one per shuffle partition (``spark.sql.shuffle.partitions``)."""
    per_path = [2 + tasks * attempts * in_flight for tasks in (input_partitions, shuffle_partitions)]
    return 1 + sum(per_path)


def owner_of(transactional_id: str, stream_prefix: str | None) -> str:
    if transactional_id == GENERATOR_ID:
        return "generator"
    if transactional_id.startswith(f"oncelog-{APP_ID}-totals"):
        return "totals"
    if stream_prefix and transactional_id.startswith(stream_prefix):
        return "enrich"
    if transactional_id.startswith("oncelog-"):
        return "enrich"  # before the checkpoint's metadata was read: the stream's default prefix
    return "other"


# ---------------------------------------------------------------------------------------------
# One run on one broker


class Run:
    def __init__(self, target, root: str, args, console: Console) -> None:
        self.target = target
        self.root = root
        self.args = args
        self.console = console
        self.progress_path = os.path.join(root, "progress.jsonl")
        self.checkpoint = os.path.join(root, "checkpoints")
        self.drain = os.path.join(root, "drain")
        self.topics = {"input": "orders", "enriched": "orders-enriched", "totals": "customer-window-totals"}
        self.batches: dict[str, dict[int, dict]] = {q: {} for q in QUERIES}
        self.windows: list[dict] = []
        self.events: list[dict] = []  # query failures, restarts, errors of the job
        self.jvm_pid: int | None = None
        self.stream_prefix: str | None = None
        self.jcmd = jcmd_path()
        self.t0 = 0.0
        self.cpu_mark: dict[str, float] = {}  # cumulative CPU seconds by process at the last sample
        self.disk_peak: dict[str, int] = {}  # the largest size of each DISK_SERIES in this window so far
        self.heap_probes: dict[str, list[float]] = {}  # heaps after a full GC in this window so far
        self.probed_at = 0  # micro-batches at the last heap probe
        self.disk_at = 0.0

    # -- set-up ---------------------------------------------------------------------------------
    def start(self) -> None:
        from oncelog.pipeline.config import PipelineConfig
        from oncelog.pipeline.events import Generator, GeneratorConfig, create_topics
        from oncelog.pipeline.job import JobConfig
        from oncelog.pipeline.jvmcache import JvmCache
        from oncelog.pipeline.procs import SparkDriver

        a = self.args
        self.target.start()
        bootstrap = self.target.bootstrap
        create_topics(bootstrap, {self.topics["input"]: a.input_partitions, self.topics["enriched"]: a.enriched_partitions,
                                  self.topics["totals"]: a.totals_partitions})
        if a.segment_bytes:
            # The sink makes its commit log (cleanup.policy=compact, 1 MiB segments, markers kept
            # an hour) when it is missing and uses it as it finds it: made here first, as a user may.
            create_compacted_topic(bootstrap, a.commit_log_topic, a.segment_bytes, a.marker_retention_ms)
        every_ms = a.txn_every_ms or max(10, a.trigger_ms // 2)
        rate = a.records_per_txn * 1000 / every_ms
        self.generator = Generator(bootstrap, self.topics["input"], GeneratorConfig(
            records=10**12, partitions=a.input_partitions, txn_size=a.records_per_txn, rate=rate, seed=1,
            transactional_id=GENERATOR_ID))
        self.generator_thread = threading.Thread(target=self._generate, daemon=True, name="generator")
        self.generator_error: str | None = None
        self.generator_thread.start()
        job = JobConfig(PipelineConfig(master=a.master, trigger_ms=a.trigger_ms), bootstrap=bootstrap,
                        input=self.topics["input"], enriched=self.topics["enriched"], totals=self.topics["totals"],
                        checkpoint=self.checkpoint, app_id=APP_ID, max_per_trigger=a.max_per_trigger,
                        progress=self.progress_path, drain=self.drain)
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
        if a.spark_conf:
            # Settings the job's session does not make itself reach it through spark-submit's arguments.
            env["PYSPARK_SUBMIT_ARGS"] = " ".join(f"--conf {kv}" for kv in a.spark_conf) + " pyspark-shell"
        self.driver = SparkDriver(job, env=env, log_path=os.path.join(self.root, "driver.log"))
        cache = JvmCache.locate(not a.no_jvm_cache)
        # Only map an archive that exists (making one is the demo's and bench restart's business).
        # Options given later win: --driver-java-options can undo the session's C1-only JIT.
        java_options = " ".join(o for o in (cache.java_options() if cache.ready() else "", a.driver_java_options) if o)
        self.driver.start(java_options=java_options)
        self.t0 = time.time()
        self.tail = ProgressTail(self.progress_path)

    def ask(self, what):
        """``what(client)`` on a new client (a window can outlast the broker's
        connections.max.idle.ms, 10 minutes, so no connection is kept between samples), tried
        three times: a probe's hiccup must not end a run of hours."""
        from oncelog.client.kafka import KafkaClient

        for attempt in range(3):
            client = KafkaClient(self.target.bootstrap, client_id="bench-endurance")
            try:
                return what(client)
            except (OSError, ConnectionError):
                if attempt == 2:
                    raise
                time.sleep(1.0)
            finally:
                client.close()

    def _generate(self) -> None:
        try:
            self.generator.run()
        except Exception as exc:  # noqa: BLE001 - reported by the main loop
            self.generator_error = f"{type(exc).__name__}: {exc}"

    # -- the loop -------------------------------------------------------------------------------
    def done(self, query: str) -> int:
        """Micro-batches of ``query`` completed so far (its batch ids are 0, 1, 2, ...)."""
        ids = self.batches[query]
        return (max(ids) + 1) if ids else 0

    def _absorb(self) -> None:
        for e in self.tail.read():
            kind = e.get("event")
            if kind == "batch":
                durations = e.get("durations") or {}
                self.batches[e["query"]][e["batch"]] = {"add": durations.get("addBatch"), "trigger": e.get("ms"),
                                                        "rows": e.get("rows", 0), "end": e.get("end", e["t"])}
            elif kind == "session":
                self.jvm_pid = e.get("jvm_pid")
            elif kind in ("query-failed", "query-restarted", "error"):
                self.events.append(e)
                self.console.print(f"[yellow]{self.target.name}: job event {kind}: "
                                   f"{e.get('query', '')} {e.get('kind', '')} {e.get('cause', e.get('error', ''))}"[:400])
        if self.stream_prefix is None:
            try:
                with open(os.path.join(self.checkpoint, "enrich", "metadata")) as f:
                    self.stream_prefix = f"oncelog-{json.loads(f.readline())['id']}"
            except (OSError, ValueError, KeyError):
                pass

    def disk(self) -> dict[str, int]:
        """Bytes on disk now; each window reports the largest seen in it (see :meth:`loop`)."""
        a = self.args
        now = {"txn_state_bytes": segment_bytes(self.target.data_dir, "__transaction_state"),
               "commit_log_bytes": segment_bytes(self.target.data_dir, a.commit_log_topic)}
        by_query = {f"{q}/{part}": tree_bytes(os.path.join(self.checkpoint, q, part))
                    for q in QUERIES for part in _listdir(os.path.join(self.checkpoint, q))}
        now["checkpoint_bytes"] = sum(by_query.values())
        for k, v in now.items():
            self.disk_peak[k] = max(v, self.disk_peak.get(k, 0))
        self.disk_at = time.monotonic()
        return {**now, "checkpoint_bytes_by_query": by_query}  # by query/part: offsets, commits, state, ...

    def probe_heaps(self) -> None:
        """Heaps after a forced full GC (``jcmd GC.run``): what is live then depends on the work
        in flight (a micro-batch's buffers), so each window takes the least of ``--heap-probes``
        probes spread over it, its steady live set."""
        for key, pid_heap in (("driver_heap_after_gc_mib", lambda: heap_after_gc_mib(self.jvm_pid, self.jcmd)),
                              ("broker_heap_after_gc_mib", lambda: self.target.heap_after_gc(self.jcmd))):
            value = pid_heap()
            if value is not None:
                self.heap_probes.setdefault(key, []).append(value)

    def loop(self) -> None:
        """Follow the job; sample at each window's end. Sizes on disk are also looked at every
        ``--disk-every`` seconds in between: compaction (topics) and Spark's clean-up of old
        batches (checkpoints) make them a saw-tooth, whose peak per window is what can grow."""
        a = self.args
        last_progress, last_count = time.monotonic(), -1
        while True:
            self._absorb()
            if time.monotonic() - self.disk_at >= a.disk_every:
                self.disk()
            count = min(self.done(q) for q in QUERIES)
            # Heap probes in the window (its last one is the sample's own).
            if a.heap_probes > 1 and count - self.probed_at >= a.every // a.heap_probes \
                    and count < (len(self.windows) + 1) * a.every:
                self.probed_at = count
                self.probe_heaps()
            now = time.monotonic()
            if count != last_count:
                last_progress, last_count = now, count
            while count >= (len(self.windows) + 1) * a.every and len(self.windows) * a.every < a.batches:
                self.sample()
            if count >= a.batches and len(self.windows) * a.every >= a.batches:
                return
            if not self.driver.alive():
                raise RuntimeError(f"the driver exited ({self.driver.poll()}) after {count} micro-batches; "
                                   f"see {self.root}/driver.log")
            if not self.target.alive():
                raise RuntimeError(f"the broker exited after {count} micro-batches; see {self.root}")
            if self.generator_error:
                raise RuntimeError(f"the generator failed: {self.generator_error}")
            if now - last_progress > a.stall_seconds:
                raise RuntimeError(f"no micro-batch completed in {a.stall_seconds:.0f}s (at {count}); see {self.root}")
            if a.max_seconds and time.time() - self.t0 > a.max_seconds:
                raise RuntimeError(f"{count} of {a.batches} micro-batches after {a.max_seconds:.0f}s (--max-seconds)")
            time.sleep(0.2)

    # -- a sample -------------------------------------------------------------------------------
    def sample(self) -> None:
        a = self.args
        k = len(self.windows)
        lo, hi = k * a.every, (k + 1) * a.every
        w: dict = {"window": k, "batches": hi, "t": round(time.time() - self.t0, 1)}
        for q in QUERIES:
            rows = [self.batches[q][b] for b in range(lo, hi) if b in self.batches[q]]
            adds = sorted(r["add"] for r in rows if r["add"] is not None)
            triggers = sorted(r["trigger"] for r in rows if r["trigger"] is not None)
            w[f"{q}_add_batch_p50_ms"] = percentile(adds, 50) if adds else None
            w[f"{q}_add_batch_p99_ms"] = percentile(adds, 99) if adds else None
            w[f"{q}_trigger_p50_ms"] = percentile(triggers, 50) if triggers else None
            w[f"{q}_trigger_p99_ms"] = percentile(triggers, 99) if triggers else None
            w[f"{q}_input_rows"] = sum(r["rows"] for r in rows)
            ends = [r["end"] for r in rows]
            prev = [self.batches[q][lo - 1]["end"]] if lo and (lo - 1) in self.batches[q] else []
            span = (max(ends) - min(prev + ends)) if ends else 0
            w[f"{q}_batches_per_s"] = round(len(rows) / span, 2) if span > 0 else None
        listed = self.ask(lambda c: c.list_transactions())
        w["txn_ids"] = len(listed)
        owners: dict[str, int] = {}
        states: dict[str, int] = {}
        for txn_id, _pid, state in listed:
            owner = owner_of(txn_id, self.stream_prefix)
            owners[owner] = owners.get(owner, 0) + 1
            states[state] = states.get(state, 0) + 1
        w["txn_ids_by_owner"] = dict(sorted(owners.items()))
        w["txn_states"] = dict(sorted(states.items()))
        w.update(self.target.rss())
        now = self.disk()
        w["checkpoint_bytes_by_part"] = now.pop("checkpoint_bytes_by_query")
        for k in DISK_SERIES:
            w[k] = self.disk_peak[k]  # the window's peak (the saw-tooth's top)
            w[f"{k}_end"] = now[k]
        self.disk_peak = {}
        w.update(driver_memory(self.driver.pgid))
        self.probe_heaps()
        self.probed_at = hi
        w["broker_heap_after_gc_mib"] = w["driver_heap_after_gc_mib"] = None
        for key, probes in self.heap_probes.items():
            w[key] = _round(min(probes)) if probes else None
            w[f"{key}_probes"] = [_round(p) for p in probes]
        self.heap_probes = {}
        w["generator_transactions"] = self.generator.stats.transactions
        # CPU per micro-batch over the window, by process (the probes' full GCs above included).
        cpu = {**driver_cpu(self.driver.pgid), "broker": cpu_seconds(self.target.pid),
               "bench (generator)": sum(os.times()[:2])}
        prev = self.cpu_mark
        self.cpu_mark = cpu
        w["cpu_ms_per_batch"] = {k: round((v - prev.get(k, 0.0)) * 1000 / a.every, 1) for k, v in cpu.items()}
        w["sample_seconds"] = round(time.time() - self.t0 - w["t"], 2)
        self.windows.append(w)
        self.console.print(
            f"{self.target.name}: {hi:,} micro-batches in {w['t']:.0f}s: {w['txn_ids']:,} transactional ids "
            f"{w['txn_ids_by_owner']}, broker {w['broker_rss_mib']} MiB RSS"
            + (f" / {w['broker_heap_after_gc_mib']} MiB heap after GC" if w["broker_heap_after_gc_mib"] else "")
            + f", __transaction_state {w['txn_state_bytes'] / 1024:,.0f} KiB, commit log "
            f"{w['commit_log_bytes'] / 1024:,.0f} KiB, checkpoints {w['checkpoint_bytes'] / 1024:,.0f} KiB, driver "
            f"{w['driver_rss_mib']} MiB; addBatch p50 enrich {w['enrich_add_batch_p50_ms']} / totals "
            f"{w['totals_add_batch_p50_ms']} ms; CPU ms per micro-batch {w['cpu_ms_per_batch']}")

    # -- the end --------------------------------------------------------------------------------
    def finish(self) -> dict:
        """Stop the input, drain and stop the driver, list what the broker still holds, audit."""
        from oncelog.audit import AuditError, audit
        from oncelog.client.kafka import READ_COMMITTED, READ_UNCOMMITTED

        out: dict = {}
        self.generator.stop.set()
        self.generator_thread.join(60)
        t = time.monotonic()
        open(self.drain, "w").close()
        rc = self.driver.wait(self.args.drain_timeout)
        if rc is None:
            self.driver.kill()
            out["driver_exit"] = f"killed: not drained within {self.args.drain_timeout:.0f}s"
        else:
            out["driver_exit"] = rc
        out["drain_seconds"] = round(time.monotonic() - t, 1)
        self._absorb()
        out["batches"] = {q: self.done(q) for q in QUERIES}
        out["generator"] = {"transactions": self.generator.stats.transactions,
                            "committed_events": self.generator.stats.committed,
                            "aborted_events": self.generator.stats.aborted}
        listed = self.ask(lambda c: c.list_transactions())
        ongoing = sorted(txn_id for txn_id, _pid, state in listed if state == "Ongoing")
        out["after_stop"] = {"txn_ids": len(listed), "ongoing": ongoing}
        held: list[str] = []
        for topic, n in ((self.topics["enriched"], self.args.enriched_partitions),
                         (self.topics["totals"], self.args.totals_partitions)):
            tps = {(topic, p): -1 for p in range(n)}
            stable = self.ask(lambda c: c.list_offsets(tps, READ_COMMITTED))
            high = self.ask(lambda c: c.list_offsets(tps, READ_UNCOMMITTED))
            held += [f"{t}:{p}" for (t, p) in tps if stable[(t, p)][0] < high[(t, p)][0]]
        out["after_stop"]["partitions_held_back"] = held
        try:
            result = audit(self.target.bootstrap, self.topics["input"], self.topics["enriched"], timeout=60,
                           wait_stable=self.args.audit_wait)
            out["audit"] = result.to_dict()
        except AuditError as exc:
            out["audit"] = {"ok": False, "error": str(exc)}
        return out

    def close(self) -> None:
        try:
            if getattr(self, "generator", None) is not None:
                self.generator.stop.set()
            if getattr(self, "driver", None) is not None and self.driver.alive():
                self.driver.kill()
        finally:
            self.target.stop()


# ---------------------------------------------------------------------------------------------
# Verdicts


def verdict(values: list[float | None], warmup: int, tolerance: float, rule: str, bound: float | None = None) -> dict:
    """The issue's rule on one series: the last window against the first window after warm-up."""
    after = [v for v in values[warmup:]]
    if rule == "info":
        return {"verdict": "info", "ok": None}
    if len(after) < 2 or after[0] is None or after[-1] is None:
        return {"verdict": "n/a (too few windows after warm-up)", "ok": None}
    first, last = after[0], after[-1]
    change = (last - first) / first if first else (0.0 if last == first else math.inf)
    out = {"first": first, "last": last, "change": round(change, 4) if math.isfinite(change) else None}
    if change > tolerance:
        out.update(verdict=f"GROWS {_pct(change)}", ok=False)
    elif change < -tolerance:
        out.update(verdict=f"shrinks {_pct(change)}", ok=True)
    else:
        out.update(verdict=f"flat {_pct(change)}", ok=True)
    if rule == "ids" and bound is not None:
        # A pool may hand out another id now and then (a retried task attempt): what must hold
        # is the bound, in every window after warm-up.
        worst = max(v for v in after if v is not None)
        out.update(max=worst, bound=bound, ok=worst <= bound)
        out["verdict"] = (f"{out['verdict'].split(' ')[0].lower()} {_pct(change)}, at most {worst:,.0f} "
                          + (f"<= the bound {bound:,.0f}" if worst <= bound else f"ABOVE the bound {bound:,.0f}"))
    return out


def _pct(change: float) -> str:
    return "(+inf)" if not math.isfinite(change) else f"({change * 100:+.1f}%)"


def verdicts(windows: list[dict], broker: str, args) -> dict:
    out = {}
    for s in SERIES:
        values = [w.get(s.key) for w in windows]
        if all(v is None for v in values):
            continue
        rule = s.rule if broker in s.brokers else "info"
        out[s.key] = verdict(values, args.warmup, args.tolerance, rule, args.max_ids if rule == "ids" else None)
    return out


# ---------------------------------------------------------------------------------------------
# Printing and plotting


def _fmt(key: str, v) -> str:
    if v is None:
        return "-"
    unit = SERIES_BY_KEY[key].unit if key in SERIES_BY_KEY else ""
    if unit == "bytes":
        return f"{v / 1024:,.0f}"
    if unit == "ids":
        return f"{v:,}"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:,.1f}"


TABLE_COLUMNS = (
    ("txn_ids", "txn ids"),
    ("broker_rss_mib", "broker RSS MiB"),
    ("broker_heap_after_gc_mib", "heap after GC MiB"),
    ("txn_state_bytes", "__txn_state KiB"),
    ("commit_log_bytes", "commit log KiB"),
    ("checkpoint_bytes", "checkpoints KiB"),
    ("enrich_add_batch_p50_ms", "enrich addBatch p50"),
    ("enrich_add_batch_p99_ms", "p99"),
    ("totals_add_batch_p50_ms", "totals addBatch p50"),
    ("totals_add_batch_p99_ms", "p99"),
    ("driver_rss_mib", "driver RSS MiB"),
    ("driver_heap_after_gc_mib", "driver heap MiB"),
)


def window_table(broker: str, windows: list[dict], settings: str, args) -> Table:
    table = Table(title=f"{broker}: one row per {args.every:,} micro-batches of both queries (trigger "
                        f"{args.trigger_ms} ms; first {args.warmup} window(s) warm-up); {settings}")
    table.add_column("batches", justify="right")
    table.add_column("s", justify="right")
    table.add_column("batch/s", justify="right")
    for _key, label in TABLE_COLUMNS:
        table.add_column(label, justify="right")
    for w in windows:
        rate = min((w[f"{q}_batches_per_s"] for q in QUERIES if w.get(f"{q}_batches_per_s")), default=None)
        table.add_row(f"{w['batches']:,}" + (" (warm-up)" if w["window"] < args.warmup else ""), f"{w['t']:.0f}",
                      "-" if rate is None else f"{rate:.2f}", *[_fmt(k, w.get(k)) for k, _ in TABLE_COLUMNS])
    return table


def verdict_table(results: dict) -> Table:
    table = Table(title="every series after warm-up: last window against the first (flat: within the tolerance)")
    table.add_column("series")
    for broker in results:
        table.add_column(broker)
    for s in SERIES:
        cells = []
        for broker, r in results.items():
            v = r.get("verdicts", {}).get(s.key)
            if v is None:
                cells.append("-")
                continue
            text = v["verdict"]
            if "first" in v:
                text = f"{_fmt(s.key, v['first'])} → {_fmt(s.key, v['last'])} {s.unit if s.unit != 'bytes' else 'KiB'}: {text}"
            color = {True: "green", False: "red"}.get(v.get("ok"), "dim")
            cells.append(f"[{color}]{text}[/]")
        if any(c != "-" for c in cells):
            table.add_row(s.label, *cells)
    return table


PLOT_SERIES = ("txn_ids", "broker_rss_mib", "broker_heap_after_gc_mib", "txn_state_bytes", "commit_log_bytes",
               "checkpoint_bytes", "enrich_add_batch_p50_ms", "enrich_add_batch_p99_ms", "totals_add_batch_p50_ms",
               "totals_add_batch_p99_ms", "driver_rss_mib", "driver_heap_after_gc_mib")


def plot(path: str, results: dict, args) -> None:
    """One panel per series, one line per broker, x = micro-batches; warm-up shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [k for k in PLOT_SERIES if any(w.get(k) is not None for r in results.values() for w in r["windows"])]
    if not keys:
        return  # no window was sampled
    cols = 3
    rows = math.ceil(len(keys) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.0 * rows), dpi=100, squeeze=False)
    colors = {"oncelog": "tab:blue", "apache-kafka": "tab:orange"}
    for ax, key in zip(axes.flat, keys):
        s = SERIES_BY_KEY[key]
        scale, unit = (1 / MIB, "MiB") if s.unit == "bytes" else (1, s.unit)
        for broker, r in results.items():
            pts = [(w["batches"], w[key] * scale) for w in r["windows"] if w.get(key) is not None]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, lw=1.4,
                        color=colors.get(broker), label=broker)
        ax.axvspan(0, args.warmup * args.every, color="0.9", zorder=0)
        ax.set_title(s.label, fontsize=9)
        ax.set_ylabel(unit, fontsize=8)
        ax.set_ylim(bottom=0)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(keys):]:
        ax.axis("off")
    for ax in axes[-1]:
        ax.set_xlabel("micro-batches of both queries", fontsize=8)
    fig.suptitle(f"bench endurance: the demo's two output paths, trigger {args.trigger_ms} ms, "
                 f"a sample every {args.every:,} micro-batches (grey: warm-up)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------


def run_broker(name: str, args, console: Console) -> dict:
    root = tempfile.mkdtemp(prefix=f"oncelog-bench-endurance-{name}-", dir=args.work_dir)
    target = OncelogTarget(root, args) if name == "oncelog" else KafkaTarget(root, args)
    run = Run(target, root, args, console)
    result: dict = {"broker": name, "dir": root}
    ok = False
    t0 = time.time()
    try:
        run.start()
        result["settings"] = target.settings
        console.print(f"{name}: {target.settings} on {target.bootstrap}; driver started, work dir {root}")
        run.loop()
        result.update(run.finish())
        ok = True
    except Exception as exc:
        result["error"] = f"{type(exc).__name__}: {exc}"
        console.print(f"[red]{name}: {result['error']}[/]")
    finally:
        run.close()
        result["windows"] = run.windows
        result["job_events"] = run.events
        result["seconds"] = round(time.time() - t0, 1)
        if ok and not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            console.print(f"{name}: logs and data kept in {root}")
    result["verdicts"] = verdicts(run.windows, name, args)
    return result


def parse_args(argv: list[str] | None):
    ap = argparse.ArgumentParser(prog="python -m bench endurance", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--broker", choices=[*BROKERS, "both"], default="both")
    ap.add_argument("--batches", type=int, default=20_000, help="micro-batches of each query (default %(default)s)")
    ap.add_argument("--every", type=int, default=1_000, help="a sample every this many micro-batches")
    ap.add_argument("--warmup", type=int, default=1, help="windows of warm-up before the verdict's first window")
    ap.add_argument("--tolerance", type=float, default=0.10, help="flat: last within this share of the first")
    ap.add_argument("--max-ids", type=int, default=None,
                    help="the bound of transactional ids (default: derived from the job's shape, see derived_id_bound)")
    ap.add_argument("--trigger-ms", type=int, default=100)
    ap.add_argument("--records-per-txn", type=int, default=4, help="input events per generator transaction")
    ap.add_argument("--txn-every-ms", type=int, default=0, help="a generator transaction this often (0: trigger / 2)")
    ap.add_argument("--max-per-trigger", type=int, default=1000, help="the source's maxOffsetsPerTrigger")
    ap.add_argument("--input-partitions", type=int, default=4)
    ap.add_argument("--enriched-partitions", type=int, default=4)
    ap.add_argument("--totals-partitions", type=int, default=2)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--fsync", default="always", choices=["always", "never"], help="the oncelog broker's (the demo's)")
    ap.add_argument("--kafka-heap", default="1g")
    ap.add_argument("--commit-log-topic", default="oncelog-spark-commits")
    ap.add_argument("--segment-bytes", type=int, default=None,
                    help="segment size of __transaction_state (transaction.state.log.segment.bytes; Kafka: at least "
                         "1 MiB) and of the commit-log topic (the bench creates it compacted with this segment.bytes, "
                         "below 1 MiB as internal.segment.bytes): compaction only works on closed segments. Default: "
                         "the brokers' and the sink's own (100 MiB on Kafka and 16 MiB on oncelog for "
                         "__transaction_state, 1 MiB for the commit log)")
    ap.add_argument("--marker-retention-ms", type=int, default=3_600_000,
                    help="delete.retention.ms of the commit-log topic the bench creates (with --segment-bytes): "
                         "how long a cleaner keeps a decision's COMMIT marker after its record was compacted away, "
                         "so the level the commit log reaches after this long (default: the sink's own, 1 hour; "
                         "a short run sets it shorter to reach that level within the run)")
    ap.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark setting for the driver that the job's session does not set itself, e.g. "
                         "spark.sql.streaming.minBatchesToRetain=10 (repeatable)")
    ap.add_argument("--disk-every", type=float, default=5.0, help="seconds between looks at the sizes on disk")
    ap.add_argument("--heap-probes", type=int, default=8,
                    help="full-GC heap probes of the JVMs per window (each window reports the least)")
    ap.add_argument("--no-jvm-cache", action="store_true", help="do not map the demo's class-data archive")
    ap.add_argument("--driver-java-options", default="-XX:TieredStopAtLevel=4",
                    help="more options for the driver's JVM, after the session's, which stop the JIT at C1 for a "
                         "fast start (default %(default)s: the full JIT, as a long-running driver has it)")
    ap.add_argument("--stall-seconds", type=float, default=300.0, help="fail when no micro-batch completes this long")
    ap.add_argument("--max-seconds", type=float, default=0.0, help="fail a broker's run after this long (0: never)")
    ap.add_argument("--drain-timeout", type=float, default=300.0)
    ap.add_argument("--audit-wait", type=float, default=60.0, help="seconds the auditor waits for open transactions")
    ap.add_argument("--report", help="write every sample and verdict here (JSON)")
    ap.add_argument("--from-report", action="append", default=[], metavar="JSON",
                    help="run nothing: judge, print and plot the samples of earlier --report files (repeatable: "
                         "e.g. one per broker) with this run's --warmup, --tolerance and --max-ids")
    ap.add_argument("--plot", help="write the plot here (PNG)")
    ap.add_argument("--work-dir", default=None, help="where the runs' folders go (default: the temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep each run's folder (broker data, logs, progress)")
    args = ap.parse_args(argv)
    if args.every < 1 or args.batches < args.every:
        ap.error("--batches must be at least --every (>= 1)")
    if args.segment_bytes is not None and args.segment_bytes < 1024:
        ap.error("--segment-bytes: at least 1024")
    if any("=" not in kv for kv in args.spark_conf):
        ap.error("--spark-conf takes KEY=VALUE")
    args.max_ids_given = args.max_ids is not None
    if args.max_ids is None:
        from oncelog.pipeline.config import PipelineConfig

        m = re.search(r",(\d+)\]$", PipelineConfig(master=args.master).spark_master)
        attempts = int(m.group(1)) if m else 4  # local[N,F]: F attempts per task; a cluster: spark.task.maxFailures
        args.max_ids = derived_id_bound(args.input_partitions, 2, attempts)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if threading.current_thread() is not threading.main_thread():
        return _main(args)
    # SIGTERM ends a run as Ctrl-C does: the driver's process group and the broker are stopped.
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        return _main(args)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _main(args) -> int:
    # The window table is wide: a file or a pipe gets it whole instead of rich's 80 columns.
    console = Console() if sys.stdout.isatty() else Console(width=200)
    brokers = BROKERS if args.broker == "both" else (args.broker,)
    results: dict[str, dict] = {}
    started = time.time()
    if args.from_report:
        # Earlier runs (e.g. one per broker, taken apart): their samples, judged and drawn again.
        for path in args.from_report:
            with open(path) as f:
                doc = json.load(f)
            for key in ("every", "trigger_ms", "batches") + (() if args.max_ids_given else ("max_ids",)):
                setattr(args, key, doc["config"][key])
            for name, r in doc["results"].items():
                r["verdicts"] = verdicts(r["windows"], name, args)
                console.print(window_table(name, r["windows"], r.get("settings", ""), args))
                results[name] = r
    for name in brokers if not args.from_report else ():
        results[name] = run_broker(name, args, console)
        r = results[name]
        console.print(window_table(name, r["windows"], r.get("settings", ""), args))
    console.print(verdict_table(results))
    failed = False
    for name, r in results.items():
        for key, v in r["verdicts"].items():
            if v.get("ok") is False:
                failed = True
            if v.get("ok") is not None:
                console.print(f"{name}: {SERIES_BY_KEY[key].label}: {v['verdict']}")
        if "error" in r:
            failed = True
            console.print(f"[red]{name}: run failed: {r['error']}[/]")
            continue
        au = r.get("audit", {})
        after = r.get("after_stop", {})
        console.print(f"{name}: {r['batches']} micro-batches; after the driver's stop: {after.get('txn_ids')} "
                      f"transactional ids, Ongoing {after.get('ongoing')}, output partitions held back "
                      f"{after.get('partitions_held_back')}")
        audit_text = (f"{au.get('input_records'):,} inputs, {au.get('output_records'):,} outputs, lost {au.get('lost')}, "
                      f"duplicated {au.get('duplicated')}, aborted reads {au.get('aborted_reads')}, phantom "
                      f"{au.get('phantom')}" if "error" not in au else au["error"])
        console.print(f"{name}: audit of the streaming path: {'[green]exactly once[/]' if au.get('ok') else '[red]FAILED[/]'}"
                      f" ({audit_text})")
        failed |= not au.get("ok")
    console.print(f"{time.time() - started:.0f}s in all")
    if args.report:
        with open(args.report, "w") as f:
            json.dump({"config": vars(args), "results": results}, f, indent=1, default=str)
    if args.plot:
        plot(args.plot, results, args)
    return 1 if failed else 0
