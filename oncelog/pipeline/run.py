"""The whole pipeline run: broker, generator, Spark driver, chaos, drain, proof.

:class:`Pipeline` is used by ``oncelog demo`` (with chaos) and by ``python -m bench pipeline``
(without). It runs in the calling thread; the caller sees what happens through ``on_event``
(one call per thing that happened, for a log line) and ``on_tick`` (about four times a second,
for progress bars); :attr:`Pipeline.state` holds the live counts.

Chaos, when asked for: ``driver_kills`` SIGKILLs of the Spark driver's process group and
``broker_kills`` SIGKILLs of the broker (restarted on the same data directory and port), in a
seeded random order, each at a random moment (0.5-3 s) after the driver has made progress in its
current run (a micro-batch of the enrichment query committed, so output became visible), so
every run moves the pipeline forward and every kill has work in flight to recover.
After a driver kill the driver is started again at once from its checkpoints; a driver that exits
by itself (its queries failed more often than it restarts them) is started again too. One write
task fails on purpose (``ONCELOG_SPARK_TASK_FAULT=exit``: its Python worker dies after sending its
rows, its transaction left open) in the second run; Spark retries it (``local[N,3]``).

The generator writes its input in waves, one more after each driver SIGKILL (and one just before
the broker SIGKILL, so that the broker dies under the producer too): each run of the driver has
fresh input to work on, the last one included. One wave is kept for after the chaos: once the
last restarted driver has caught up with every committed input (:meth:`Pipeline.settle`), it is
written at the demo's rate with no crash in the way, so the run's freshness (produce to
read_committed visibility, :meth:`Pipeline.freshness`) is also measured in a steady state. When
the generator is done, the driver is asked to drain (a marker file): it processes all available
input, says "drained" and exits. Then :mod:`.verify` proves the result (the auditor and the
aggregates' check side by side).

Every failure a person sees is one line (:mod:`.causes`); the whole text goes to the run's logs
(``driver.log``, ``broker.log``, ``demo.log``, ``progress.jsonl``) in ``--data-dir``, or else in
``~/.cache/oncelog/demo-logs/<time>-<run>`` (:func:`run_log_dir`), which outlives the temporary
data directory.

The cluster (:mod:`.cluster`): an oncelog broker (default), Apache Kafka from the user's cache
(``broker="apache-kafka"``, 1 or 3 nodes; a broker kill SIGKILLs the node leading an output
partition, or the transaction coordinator, and restarts it), or an existing cluster
(``bootstrap_server``: no broker kills; topic names and transactional ids get a run id so that
nothing of an earlier run is audited). ``kafka_options`` (``kafka.*``, Kafka's client names) go to
the job's sources and sinks and, translated, to the generator's, the observer's and the auditor's
confluent-kafka clients. ``sink="spark-kafka"``: the job writes through Spark's own Kafka
connector (:mod:`oncelog.spark_kafka_jars`), possibly with another PySpark in its own virtualenv;
no task is failed on purpose then (Spark's sink has no hook for it).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field

from ..cachedir import user_cache
from .cluster import ApacheKafkaCluster, ExternalCluster, OncelogCluster
from .config import PipelineConfig
from .events import Generator, GeneratorConfig, WindowRule, create_topics, max_offsets_per_trigger, STEP_MS
from .job import JobConfig
from .jvmcache import JvmCache
from .observe import OutputObserver
from .procs import SparkDriver

INPUT, ENRICHED, TOTALS = "orders", "orders-enriched", "customer-window-totals"
PARTITIONS = {INPUT: 4, ENRICHED: 4, TOTALS: 2}


@dataclass
class State:
    phase: str = "starting"
    t0: float = field(default_factory=time.time)
    generator: object = None  # GeneratorStats
    output_rows: int = 0
    driver_kills: int = 0
    broker_kills: int = 0
    driver_exits: int = 0  # driver runs that ended by themselves (not killed by us)
    task_failures: int = 0
    query_restarts: int = 0  # in-driver restarts of failed queries
    runs: int = 0
    recovered: int = 0  # restarts (driver or broker) after which the pipeline made progress again
    timeline: list[dict] = field(default_factory=list)
    restarts: list[dict] = field(default_factory=list)  # per driver run: start-up timings
    batches: list[dict] = field(default_factory=list)
    samples: list[tuple[float, int, int]] = field(default_factory=list)  # (t, produced committed, output rows)


RUN_LOGS_KEPT = 10  # the demo's log directories kept in the user's cache


def run_log_dir(app_id: str) -> str | None:
    """A new directory for one run's logs under ``~/.cache/oncelog/demo-logs`` (the last
    :data:`RUN_LOGS_KEPT` runs are kept), or None if the cache is not writable."""
    root = user_cache("demo-logs")
    path = os.path.join(root, f"{time.strftime('%Y%m%d-%H%M%S')}-{app_id.rsplit('-', 1)[-1]}")
    try:
        os.makedirs(path)
        runs = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    except OSError:
        return None
    for old in runs[:-RUN_LOGS_KEPT]:
        shutil.rmtree(os.path.join(root, old), ignore_errors=True)
    return path


class Pipeline:
    MAX_DRIVER_EXITS = 5  # a driver that keeps failing on its own is a bug, not chaos

    def __init__(self, cfg: PipelineConfig, *, on_event=None, on_tick=None) -> None:
        self.cfg = cfg
        self.on_event = on_event or (lambda kind, text, **kw: None)
        self.on_tick = on_tick or (lambda state: None)
        self.state = State()
        self.master = cfg.spark_master
        if cfg.bootstrap_server:
            cfg.broker_kills = 0  # not our brokers
        self.spark_kafka = None  # oncelog.spark_kafka_jars.Runtime, with sink="spark-kafka"
        if cfg.sink == "spark-kafka":
            cfg.task_fault = False  # the fault hook is in the connector's sink
        self.rng = random.Random(cfg.seed * 7919 + 17)
        self.own_dir = cfg.data_dir is None
        self.dir = cfg.data_dir or tempfile.mkdtemp(prefix="oncelog-demo-")
        self.cluster = None  # OncelogCluster | ApacheKafkaCluster | ExternalCluster, made in setup()
        self.driver: SparkDriver | None = None
        self.generator: Generator | None = None
        self.observer: OutputObserver | None = None
        self._progress_pos = 0
        self._run_progress = False  # the current driver run completed a batch with input
        self._run_started_at = 0.0
        self._run_first_batch: float | None = None
        self._drained = False  # the current driver run wrote "drained": all output committed
        self._pending_recovery: list[dict] = []  # crashes not yet followed by progress
        self._progress_after = 0.0  # only batches completed after this (time.time()) count as progress
        self.jvm_cache = JvmCache.locate(cfg.jvm_cache)
        self.jvm_cache_state = "used" if self.jvm_cache.ready() else (self.jvm_cache.reason or "to be created")
        self._jvm_pid: int | None = None  # of the current run's driver JVM
        self._jvm_options = ""  # what the current run was started with
        self._archive_done = False  # the current run wrote (or failed to write) the archive
        # txnAppId of the foreachBatch writes: one per pipeline (its checkpoints), the same for all
        # its driver runs; a new checkpoint under an old txnAppId would be fenced as a stale run.
        self.app_id = f"oncelog-demo-{uuid.uuid4().hex[:8]}"
        # On a cluster that is not ours, names of this run only: no earlier run's data is audited.
        prefix = f"{self.app_id}-" if cfg.bootstrap_server else ""
        self.topics = {"input": prefix + INPUT, "enriched": prefix + ENRICHED, "totals": prefix + TOTALS}
        self.generator_txn_id = f"{self.app_id}-generator"
        # The run's logs outlive a temporary data directory: recovery lines on the screen are one
        # line each, the full tracebacks are in driver.log here.
        self.log_dir = self.dir if not self.own_dir else run_log_dir(self.app_id) or self.dir
        self.conf: dict | None = None  # the confluent-kafka clients' security settings
        self.max_per_trigger = max_offsets_per_trigger(cfg.records)
        self.rule = WindowRule(self.max_per_trigger * STEP_MS)

    # -- helpers ----------------------------------------------------------------------------------
    def path(self, *parts: str) -> str:
        return os.path.join(self.dir, *parts)

    def log(self, name: str) -> str:
        """A log file of the run (``driver.log``, ``broker.log``, ``demo.log``, ``progress.jsonl``)."""
        return os.path.join(self.log_dir, name)

    def now(self) -> float:
        return time.time() - self.state.t0

    def event(self, kind: str, text: str, **info) -> None:
        rec = {"t": round(self.now(), 2), "kind": kind, "text": text, **info}
        self.state.timeline.append(rec)
        try:
            with open(self.log("demo.log"), "a") as f:
                f.write(f"{time.strftime('%H:%M:%S')} {rec['t']:7.1f}s {kind:<16} {text}\n")
        except OSError:
            pass
        self.on_event(kind, text, **info)

    def tick(self) -> None:
        st = self.state
        if self.observer is not None:
            st.output_rows = self.observer.count
        if self.generator is not None:
            st.generator = self.generator.stats
        self._read_progress()
        if self.cfg.task_fault and not st.task_failures and os.path.exists(self.path("task-fault.once")):
            st.task_failures = 1
            self.event("task-fault", "a write task's Python worker died (injected); Spark retries the task")
        now = time.time()
        if not st.samples or now - st.samples[-1][0] >= 0.5:
            committed = self.generator.stats.committed if self.generator else 0
            st.samples.append((now, committed, st.output_rows))
        self.on_tick(st)

    def _read_progress(self) -> None:
        path = self.log("progress.jsonl")
        try:
            with open(path) as f:
                f.seek(self._progress_pos)
                data = f.read()
        except FileNotFoundError:
            return
        end = data.rfind("\n")
        if end < 0:
            return
        self._progress_pos += len(data[:end + 1].encode())
        for line in data[:end].splitlines():
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if self.driver is None or ev.get("run") != self.driver.runs:
                continue  # a line from a run killed before we read it
            kind = ev.get("event")
            if kind == "batch":
                self.state.batches.append({**ev, "t": ev["t"] - self.state.t0})
                # Progress: the enrichment query committed a batch with input (output became
                # visible), completed after the last restart of the driver or the broker.
                if ev.get("rows", 0) <= 0 or ev.get("query") != "enrich" or ev["t"] <= self._progress_after:
                    continue
                if not self._run_first_batch:
                    self._run_first_batch = time.time()
                    took = self._run_first_batch - self._run_started_at
                    if self.state.restarts:
                        self.state.restarts[-1]["first_batch_s"] = round(took, 2)
                    self.event("driver-progress", f"driver run {self.driver.runs}: first micro-batch with input "
                                                  f"committed {took:.1f}s after launch (batch {ev['batch']}, "
                                                  f"{ev['rows']:,} rows)")
                self._run_progress = True
                for rec in self._pending_recovery:
                    self.state.recovered += 1
                    self.event("recovered", f"recovered from the {rec['what']}: output again "
                                            f"{time.time() - rec['at']:.1f}s after it",
                               what=rec["what"], seconds=round(time.time() - rec["at"], 2))
                self._pending_recovery = []
            elif kind == "session":
                self._jvm_pid = ev.get("jvm_pid")
                if self.state.restarts:
                    self.state.restarts[-1]["session_s"] = ev.get("seconds")
            elif kind == "drained":
                self._drained = True
            elif kind == "archive":
                self._archive_done = True
                if ev.get("ok"):
                    self.jvm_cache.saved()
                    self.jvm_cache_state = "created"
                    self.event("jvm-cache", f"saved the driver JVM's classes for faster Spark start-ups: "
                                            f"{self.jvm_cache.path} ({ev.get('detail')})")
                else:
                    self.jvm_cache_state = f"not created: {ev.get('detail')}"
                    self.event("warning", f"could not save the driver JVM's classes ({ev.get('detail')}); "
                                          "restarts will load Spark's classes anew (~6 s slower)")
                    self.jvm_cache.path = None
            elif kind == "jvm" and ev.get("used") is False and self.jvm_cache_state != "not mapped":
                self.jvm_cache_state = "not mapped"
                self.event("warning", f"the driver JVM did not use its class-data archive {ev.get('archive')} "
                                      f"({ev.get('mapped_bytes', 0) / 1e6:.0f} MB of class data mapped); restarts "
                                      "load Spark's classes anew (~6 s slower). --no-jvm-cache turns it off")
            elif kind == "query-failed":
                self.state.query_restarts += 1
                self.event("query-failed", f"query {ev['query']} failed: {ev.get('cause', 'no cause given')}",
                           query=ev["query"], cause_kind=ev.get("kind"))

    def sleep(self, seconds: float) -> None:
        end = time.time() + seconds
        while True:
            self.tick()
            self._watch_driver()
            left = end - time.time()
            if left <= 0:
                return
            time.sleep(min(0.25, left))

    # -- processes --------------------------------------------------------------------------------
    def _start_driver(self) -> None:
        extra = {}
        if self.cfg.task_fault and (self.driver.runs >= 1 or self.cfg.driver_kills == 0):
            extra = {"ONCELOG_SPARK_TASK_FAULT": "exit", "ONCELOG_SPARK_TASK_FAULT_ONCE": self.path("task-fault.once")}
        self._run_progress = False
        self._run_first_batch = None
        self._run_started_at = time.time()
        self._jvm_pid = None
        self._jvm_options = self.jvm_cache.java_options()
        self._archive_done = False
        pid = self.driver.start(extra_env=extra, java_options=self._jvm_options,
                                archive=self.jvm_cache.path if self.jvm_cache.recording(self._jvm_options) else "")
        self.state.runs = self.driver.runs
        self.state.restarts.append({"run": self.driver.runs, "launched_at": round(self.now(), 2)})
        self.event("driver-start", f"driver run {self.driver.runs} launched (pid {pid}, its own process group)")

    def _watch_driver(self) -> None:
        """Start the driver again if it exited by itself (not during the final drain's exit)."""
        d = self.driver
        if d is None or d.proc is None or d.alive():
            return
        rc = d.poll()
        if self.state.phase == "draining" and rc == 0:
            return
        self.state.driver_exits += 1
        if self.state.driver_exits > self.MAX_DRIVER_EXITS:
            raise RuntimeError(f"the driver exited by itself {self.state.driver_exits} times (last code {rc}); "
                               f"see {self.log('driver.log')}")
        self.event("driver-exit", f"driver run {d.runs} exited by itself (code {rc}); starting it again",
                   code=rc)
        d.wait(1)
        self._pending_recovery.append({"what": "driver exit", "at": time.time()})
        self._start_driver()

    def _kill_driver(self) -> None:
        n = self.driver.kill()
        self.state.driver_kills += 1
        self.event("driver-kill", f"SIGKILL to the driver's process group (run {self.driver.runs}, {n} processes)",
                   run=self.driver.runs)
        self._pending_recovery.append({"what": "driver SIGKILL", "at": time.time()})
        self._start_driver()

    def _kill_broker(self) -> None:
        killed_at = time.time()
        what = self.cluster.kill(self.rng, self.topics, self.generator_txn_id, self.state.broker_kills)
        self.state.broker_kills += 1
        self.event("broker-kill", what)
        self.sleep(self.rng.uniform(0.5, 2.0))
        t = time.time()
        what = self.cluster.restart()
        self.event("broker-up", f"{what} in {time.time() - t:.1f}s")
        self._pending_recovery.append({"what": "broker SIGKILL", "at": killed_at})
        self._progress_after = time.time()
        self._run_progress = False  # the next crash waits until the pipeline moved on again

    def maybe_save_jvm_cache(self, timeout: float = 180.0) -> float:
        """Once, when no archive exists yet: the running driver writes its JVM's classes (its
        first micro-batch is done, so Spark's classes are loaded) for the restarts to come. Wait
        for it (a driver killed meanwhile would leave no archive); returns the seconds waited."""
        if not self.jvm_cache.recording(self._jvm_options) or self._archive_done:
            return 0.0
        t = time.time()
        deadline = t + timeout
        while not self._archive_done and self.driver.alive() and time.time() < deadline:
            self.sleep(0.1)
        return time.time() - t

    def _wait_for_progress(self, timeout: float = 240.0) -> bool:
        """Until the current driver run completed a micro-batch with input (or, with nothing left
        to read, has been up a while)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            self.sleep(0.25)
            if self._run_progress:
                return True
            gen = self.generator.stats if self.generator else None
            idle = gen is not None and gen.done and self.state.output_rows >= gen.committed
            if idle and time.time() - self._run_started_at > 20:
                return True
        return False

    # -- the run ----------------------------------------------------------------------------------
    def setup(self) -> None:
        cfg = self.cfg
        if not self.own_dir and os.path.exists(self.dir) and os.listdir(self.dir):
            raise ValueError(f"--data-dir {self.dir} is not empty: give a new or empty directory")
        os.makedirs(self.dir, exist_ok=True)
        self.state.phase = "broker"
        if cfg.kafka_options:
            from ..client.security import librdkafka_config

            bad = [k for k in cfg.kafka_options if not k.startswith("kafka.")]
            if bad:
                raise ValueError(f"Kafka client settings are given as kafka.NAME, not {', '.join(bad)}")
            self.conf = librdkafka_config({k[len("kafka."):]: v for k, v in cfg.kafka_options.items()})
        python, jars = sys.executable, []
        if cfg.sink == "spark-kafka":
            from ..spark_kafka_jars import runtime

            self.spark_kafka = rt = runtime()
            python, jars = rt.python, list(rt.jars)
            self.event("spark-kafka", f"Spark's own Kafka sink: spark-sql-kafka-0-10_2.13 {rt.spark_version} "
                                      f"({len(rt.jars)} jars) on PySpark {rt.spark_version}" +
                                      (f". {rt.note}" if rt.note else ""))
            if self.jvm_cache.enabled:  # an archive of that Spark's classes, with Spark's Kafka sink
                self.jvm_cache = JvmCache.locate(python=python, flavor="kafka-sink")
                self.jvm_cache_state = "used" if self.jvm_cache.ready() else (self.jvm_cache.reason or "to be created")
        if cfg.bootstrap_server:
            self.cluster = ExternalCluster(cfg.bootstrap_server)
        elif cfg.broker == "apache-kafka":
            self.cluster = ApacheKafkaCluster(self.dir, cfg.brokers)
        else:
            self.cluster = OncelogCluster(self.dir, self.log("broker.log"), nodes=cfg.nodes)
        self.event("broker-up", self.cluster.start())
        bootstrap = self.cluster.bootstrap
        create_topics(bootstrap, {self.topics[k]: PARTITIONS[v] for k, v in
                                  (("input", INPUT), ("enriched", ENRICHED), ("totals", TOTALS))},
                      replication_factor=self.cluster.replication_factor, conf=self.conf)
        job = JobConfig(cfg, bootstrap=bootstrap, input=self.topics["input"], enriched=self.topics["enriched"],
                        totals=self.topics["totals"], checkpoint=self.path("checkpoints"), app_id=self.app_id,
                        max_per_trigger=self.max_per_trigger, progress=self.log("progress.jsonl"),
                        drain=self.path("drain"), jars=jars)
        self.driver = SparkDriver(
            job, env={**os.environ, "PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python},
            log_path=self.log("driver.log"), python=python)
        # PYSPARK_PYTHON: Spark's Python workers must run the driver's interpreter (pyarrow,
        # oncelog, its PySpark), not whatever python3 is on the PATH.

    def start_generator(self, rate: float | None) -> threading.Thread:
        cfg = self.cfg
        gcfg = GeneratorConfig(records=cfg.records, partitions=PARTITIONS[INPUT], txn_size=cfg.txn_size, rate=rate,
                               seed=cfg.seed, waves=cfg.driver_kills + cfg.broker_kills + 2,
                               transactional_id=self.generator_txn_id)
        self.generator = Generator(self.cluster.bootstrap, self.topics["input"], gcfg, conf=self.conf)
        thread = threading.Thread(target=self._generate, daemon=True, name="generator")
        thread.start()
        return thread

    def _generate(self) -> None:
        try:
            self.generator.run()
        except Exception:  # recorded in stats.error
            pass

    def run_chaos(self) -> None:
        cfg = self.cfg
        plan = ["driver"] * cfg.driver_kills + ["broker"] * cfg.broker_kills
        self.rng.shuffle(plan)
        self.state.phase = "chaos"
        gen = self.generator
        for what in plan:
            if not self._wait_for_progress():
                self.event("warning", "the driver made no progress for 240s; injecting the fault anyway")
            # A driver writing its JVM's archive (a fresh machine's first run) stands still for
            # ~7 s: that wait counts towards the random moment below.
            waited = self.maybe_save_jvm_cache()
            if what == "broker" and gen is not None:
                # The next wave of input first, so that the broker dies under the producer too.
                produced = gen.stats.produced
                gen.release()
                deadline = time.time() + 5
                while gen.stats.produced == produced and not gen.stats.done and time.time() < deadline:
                    self.sleep(0.1)
            self.sleep(max(0.0, self.rng.uniform(0.5, 3.0) - waited))
            if what == "driver":
                self._kill_driver()
                if gen is not None:
                    gen.release()  # fresh input for the restarted driver
            else:
                self._kill_broker()

    def settle(self, timeout: float = 60.0) -> None:
        """After the last crash: once the pipeline made progress again and caught up with every
        committed input, the last wave is written at the demo's rate with no crash in the way;
        its records measure steady freshness (:meth:`freshness`)."""
        gen = self.generator
        if gen is None or gen.stats.done:
            return
        self.state.phase = "settling"
        self._wait_for_progress()
        deadline = time.time() + timeout
        while time.time() < deadline:
            self.sleep(0.25)
            if gen.stats.done or (gen.waiting and self.state.output_rows >= gen.stats.committed):
                break
        self.event("calm", f"caught up with {gen.stats.committed:,} committed events: the last wave goes in at "
                           f"{self.cfg.records / self.cfg.produce_seconds:,.0f} events/s with no crash"
                   if self.cfg.produce_seconds else "caught up: the last wave goes in with no crash")

    def drain(self) -> None:
        self.state.phase = "producing"
        if self.generator is not None:
            self.generator.release(self.generator.cfg.waves)  # whatever the chaos did not release yet
        while self.generator is not None and not self.generator.stats.done:
            self.sleep(0.25)
        if self.generator is not None and self.generator.stats.error:
            raise RuntimeError(f"the generator failed: {self.generator.stats.error}")
        self.state.phase = "draining"
        self.event("drain", "input complete: asking the driver to process everything available and stop")
        open(self.path("drain"), "w").close()
        deadline = time.time() + self.cfg.drain_timeout
        while time.time() < deadline:
            self.sleep(0.25)
            # Its "drained" line comes after every query processed all input and stopped: the
            # output is complete. The driver's own shutdown (SparkContext, JVM: ~2 s) goes on
            # while the proof runs; close() reaps it.
            if self._drained or self.driver.poll() == 0:
                self.event("drained", f"driver run {self.driver.runs} processed all input and stopped")
                return
        raise RuntimeError(f"the driver did not finish draining in {self.cfg.drain_timeout:.0f}s; "
                           f"see {self.log('driver.log')}")

    def close(self, *, remove: bool) -> None:
        if self.generator is not None:
            self.generator.stop.set()
        if self.observer is not None:
            self.observer.stop()
        if self.driver is not None and self.driver.alive():
            if not (self._drained and self.driver.wait(10) == 0):  # a drained driver exits by itself
                self.driver.kill()
        if self.cluster is not None:
            self.cluster.stop()
        if remove and self.own_dir and not self.cfg.keep_data:
            shutil.rmtree(self.dir, ignore_errors=True)

    def verify(self) -> dict:
        from ..audit import audit
        from .verify import check_aggregate, ground_truth, totals_key

        self.state.phase = "verifying"
        bootstrap = self.cluster.bootstrap
        topics, conf = self.topics, self.conf
        # The auditor and the aggregates' check read the topics each with clients of their own:
        # side by side (mostly waiting on the broker and in librdkafka).
        t = time.time()
        audited: dict = {}

        def run_audit() -> None:
            try:
                audited["result"] = audit(bootstrap, [topics["input"]], [topics["enriched"]], timeout=60, config=conf)
            except BaseException as exc:  # raised below, in this thread
                audited["error"] = exc
            audited["seconds"] = time.time() - t

        auditor = threading.Thread(target=run_audit, name="audit")
        auditor.start()
        truth = ground_truth(bootstrap, topics["input"], self.rule, conf=conf)
        totals = check_aggregate(bootstrap, topics["totals"], truth.totals,
                                 lambda d: totals_key(d["customer"], int(d["window_start_ms"])), conf=conf)
        checked = time.time() - t
        auditor.join()
        if "error" in audited:
            raise audited["error"]
        aud = audited["result"]
        self.event("audit", f"auditor: {aud.input_records:,} committed inputs, {aud.output_records:,} outputs, "
                            f"lost {aud.lost}, duplicated {aud.duplicated}, aborted reads {aud.aborted_reads}, "
                            f"phantom {aud.phantom} ({audited['seconds']:.1f}s)")
        match = totals.ok and truth.ambiguous == 0
        self.event("aggregates", f"aggregates vs ground truth: {totals.matching:,} of {totals.expected_keys:,} "
                                 f"(customer, window) totals equal "
                                 f"({'match' if match else 'MISMATCH'}; {checked:.1f}s)")
        st = self.state
        gen = self.generator.stats if self.generator else None
        return {
            "exactly_once": aud.ok and match,
            "delivery_guarantee": "at-least-once" if self.cfg.sink == "spark-kafka" else self.cfg.guarantee,
            "sink": self.cfg.sink,
            "spark_kafka": None if self.spark_kafka is None else {
                "spark_version": self.spark_kafka.spark_version, "python": self.spark_kafka.python,
                "jars": self.spark_kafka.jars, "note": self.spark_kafka.note},
            "cluster": {"kind": self.cluster.name, "bootstrap": bootstrap,
                        "nodes": getattr(self.cluster, "nodes", None), "topics": dict(topics)},
            "audit": aud.to_dict(),
            "input_records": aud.input_records,
            "output_records": aud.output_records,
            "lost": aud.lost, "duplicated": aud.duplicated, "aborted_reads": aud.aborted_reads, "phantom": aud.phantom,
            "aborted_input_records": aud.aborted_inputs,
            "open_transactions": aud.open_transactions,
            "audit_examples": aud.examples,
            "aggregates_match": match,
            "aggregates": totals.to_dict(),
            "aggregate_duplicate_writes": totals.duplicate_writes,
            "ground_truth": {"committed": truth.committed, "valid": truth.valid, "invalid": truth.invalid,
                             "customers": truth.customers, "windows": truth.windows, "keys": len(truth.totals),
                             "late_kept": truth.late_kept, "late_dropped_by_watermark": truth.late_dropped,
                             "ambiguous": truth.ambiguous},
            "driver_kills": st.driver_kills, "broker_kills": st.broker_kills, "task_failures": st.task_failures,
            "driver_exits": st.driver_exits, "query_restarts": st.query_restarts, "driver_runs": st.runs,
            "recoveries": st.recovered,
            "master": self.master, "master_requested": self.cfg.master,
            "jvm_class_cache": {"path": self.jvm_cache.path, "state": self.jvm_cache_state},
            "records_requested": self.cfg.records, "seed": self.cfg.seed,
            "generator": None if gen is None else {
                "produced": gen.produced, "committed": gen.committed, "aborted_on_purpose": gen.aborted,
                "aborted_after_errors": gen.failed, "transactions": gen.transactions,
                "aborted_transactions": gen.aborted_transactions, "retried_transactions": gen.retried_transactions,
                "invalid": gen.invalid, "late_within_watermark": gen.late_ok, "late_beyond_watermark": gen.too_late},
            "freshness": self.freshness(),
            "driver_restarts": st.restarts,
            "timeline": st.timeline,
            # every ~0.5 s: seconds since start, input events committed, output rows visible
            "samples": [[round(t - st.t0, 2), p, r] for t, p, r in st.samples],
        }

    CRASHES = ("driver-kill", "broker-kill", "driver-exit", "query-failed", "task-fault")

    def freshness(self) -> dict:
        """End-to-end visibility latency of the enriched output: for each record, from its input's
        produce call to the moment the read_committed observer got it. Percentiles over all
        records, and over the records that did not live through an outage: a record counts as
        between crashes when neither its produce time nor the moment it was seen falls in a window
        from a crash (or the first start) to the moment the (re)started pipeline had caught up
        with the input committed until it recovered. Plus a per-second series (p50, p95) for the plot."""
        from .observe import percentiles

        obs = self.observer
        if obs is None or not obs.latencies_ms:
            return {"samples": 0}
        import numpy as np

        st = self.state
        lat = np.asarray(obs.latencies_ms, dtype=float)
        seen = np.asarray(obs.latency_times, dtype=float) - st.t0
        produced = seen - lat / 1000
        samples = [(t - st.t0, committed, rows) for t, committed, rows in st.samples]
        # Each outage: when it began, and the event that ends it. The first start-up waits like a
        # restart and ends with the first progress; a crash ends with its recovery.
        outages = [(0.0, "driver-progress")] + [(e["t"], "recovered") for e in st.timeline if e["kind"] in self.CRASHES]
        windows = []
        for began, ending in outages:
            back = next((e["t"] for e in st.timeline if e["kind"] == ending and e["t"] >= began), None)
            if back is None:
                windows.append((began, float(seen.max())))
                continue
            backlog = max((c for t, c, _r in samples if t <= back), default=0)
            caught_up = next((t for t, _c, rows in samples if t >= back and rows >= backlog), float(seen.max()))
            windows.append((began, caught_up))
        calm = np.ones(len(lat), dtype=bool)
        for lo, hi in windows:  # [produced, seen] overlaps [lo, hi]
            calm &= ~((produced <= hi) & (seen >= lo))
        qs = (50, 95, 99)
        series = []
        for sec in range(int(seen.max()) + 1):
            sel = lat[(seen >= sec) & (seen < sec + 1)]
            if len(sel):
                p = percentiles(sel, (50, 95))
                series.append([sec, round(p["p50"]), round(p["p95"])])
        return {"samples": int(len(lat)), "trigger_ms": self.cfg.trigger_ms,
                "all_ms": {k: round(v) for k, v in percentiles(lat, qs).items()},
                "between_crashes_ms": {k: round(v) for k, v in percentiles(lat[calm], qs).items()}
                if calm.any() else None,
                "between_crashes_samples": int(calm.sum()),
                "outage_windows_s": [[round(lo, 1), round(hi, 1)] for lo, hi in windows],
                "series": series}

    def execute(self) -> dict:
        """Set up, run with chaos, drain and verify; returns the report (without ``seconds``)."""
        cfg = self.cfg
        self.setup()
        self.observer = OutputObserver(self.cluster.bootstrap, self.topics["enriched"], PARTITIONS[ENRICHED],
                                       conf=self.conf, latency=True)
        self.observer.start()
        if not self.jvm_cache.enabled and cfg.jvm_cache:
            self.event("warning", f"no class-data archive of the driver JVM ({self.jvm_cache.reason}): every driver "
                                  "start loads Spark's classes anew (~6 s slower)")
        self._start_driver()
        self.state.phase = "producing"
        self.start_generator(cfg.records / cfg.produce_seconds if cfg.produce_seconds else None)
        self.run_chaos()
        self.settle()
        self.drain()
        return self.verify()
