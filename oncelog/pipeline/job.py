"""The pipeline's Spark Structured Streaming job: one driver process, two streaming queries.

``python -m oncelog.pipeline.job JOB_JSON``: its one argument is a :class:`JobConfig` as JSON,
the pipeline's settings (:class:`~.config.PipelineConfig`) and what :class:`~.run.Pipeline`
decided for this run (bootstrap servers, topics, paths); the job declares no flags of its own.

* ``enrich``: parse each order (JSON), validate it (``valid``, ``reason``), add its amount
  class, and write one record per input record to ``enriched`` through the connector's
  streaming sink (``format("oncelog")``, exactly-once by default), with the header
  ``oncelog.source`` = ``topic:partition:offset`` of its input record, for the auditor.
* ``totals``: running totals of valid orders (count, amount) per customer and 5-minute
  event-time window, with a 10-minute watermark (events later than that are dropped by Spark,
  and windows the watermark has passed leave the state), on the RocksDB state store, Update
  mode, written to ``totals`` from ``foreachBatch`` through the connector's batch writer with
  ``txnAppId``/``txnVersion`` = the batch id: a replayed batch is not written twice.

Each aggregate record carries the batch id that wrote it, so duplicates can be counted.
``guarantee="at-least-once"`` writes everything with ``deliveryGuarantee=at-least-once``
instead (what Spark's own Kafka sink does). ``sink="spark-kafka"`` writes both outputs through
Spark's own Kafka connector instead (``format("kafka")``, its ``jars``; the same headers
column): at-least-once by design, whatever ``guarantee`` says. The source is the connector's
unless ``source="kafka"`` (:class:`JobConfig`), which reads with Spark's own Kafka source
(``format("kafka")``, read_committed): with ``sink="spark-kafka"`` that is the job on Spark's
JVM-only path, no Python worker at all (``python -m bench restart`` times its restart beside
ours). ``kafka_options`` (``kafka.KEY``: VALUE) go to every source and sink (security
settings for a secured cluster, in Kafka's client names).

Supervision: a query that fails (e.g. the broker went away under it) is restarted from its
checkpoint inside this driver after a short pause (at most :data:`MAX_RESTARTS` times). The
process exits 0 after the file named by ``drain`` appears and every query has processed all
available input (``processAllAvailable``). Progress (one JSON line per completed micro-batch,
plus lifecycle events) goes to ``progress``: ``jvm`` says whether the JVM mapped the class-data
archive it was given, ``archive`` that it wrote one (``archive``, after its first micro-batch
with input, :mod:`.jvmcache`).
The whole process group is meant to be SIGKILLed at any moment (see :mod:`.procs`).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from dataclasses import asdict, dataclass, field
from datetime import datetime

from .causes import explain
from .config import PipelineConfig
from .events import WATERMARK_DELAY_MS, WINDOW_MS

ORDER_SCHEMA = "order_id string, customer string, amount decimal(12,2), ts long, items int"
HEADER = "oncelog.source"
MAX_RESTARTS = 30  # query restarts in one driver run before it gives up (exit 3)


@dataclass
class JobConfig:
    """The job's one argument: the pipeline's settings and what :class:`~.run.Pipeline` (or the
    bench) decided for this run of the driver."""

    pipeline: PipelineConfig  # guarantee, trigger_ms, sink, kafka_options, master (as spark_master)
    bootstrap: str
    input: str  # topic of the orders
    enriched: str  # topic of the enriched orders
    totals: str  # topic of the per-customer, per-window totals
    checkpoint: str  # directory: one checkpoint per query below it
    app_id: str  # txnAppId prefix of the foreachBatch writes
    max_per_trigger: int  # the source's maxOffsetsPerTrigger
    progress: str | None = None  # append JSON lines here
    drain: str | None = None  # finish when this file exists
    jars: list[str] = field(default_factory=list)  # spark.jars (Spark's Kafka connector)
    run: int = 0  # run number, for the progress log (SparkDriver.start sets it)
    java_options: str = ""  # more JVM options for the driver (SparkDriver.start sets them)
    source: str = "oncelog"  # "kafka": Spark's own Kafka source (needs ``jars``), for bench restart
    archive: str = ""  # write the JVM's class-data archive here after the first batch (jvmcache)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> JobConfig:
        d = json.loads(text)
        return cls(**{**d, "pipeline": PipelineConfig(**d["pipeline"])})

    @classmethod
    def from_argv(cls, argv: list[str]) -> JobConfig:
        if len(argv) != 1 or argv[0].startswith("-"):
            raise SystemExit("usage: python -m oncelog.pipeline.job JOB_JSON (a JobConfig as JSON)")
        return cls.from_json(argv[0])


class ProgressLog:
    def __init__(self, path: str | None, run: int) -> None:
        self.path = path
        self.run = run
        self.lock = threading.Lock()

    def write(self, event: str, **fields) -> None:
        if not self.path:
            return
        line = json.dumps({"t": time.time(), "run": self.run, "event": event, **fields})
        with self.lock, open(self.path, "a") as f:
            f.write(line + "\n")


def build(spark, job: JobConfig):
    """The queries' start functions (each starts its query from its checkpoint)."""
    from pyspark.sql import functions as F

    cfg = job.pipeline
    eos = cfg.guarantee == "exactly-once" and cfg.sink == "oncelog"
    kafka_options = cfg.kafka_options

    def source():
        if job.source == "kafka":  # Spark's own Kafka source, reading what ours reads (read_committed)
            return (spark.readStream.format("kafka").options(**kafka_options)
                    .option("kafka.bootstrap.servers", job.bootstrap).option("subscribe", job.input)
                    .option("kafka.isolation.level", "read_committed")
                    .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", job.max_per_trigger).load())
        return (spark.readStream.format("oncelog").options(**kafka_options)
                .option("kafka.bootstrap.servers", job.bootstrap).option("subscribe", job.input)
                .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", job.max_per_trigger).load())

    def parsed():
        return (source().select("key", "topic", "partition", "offset", F.col("timestamp").alias("in_ts"),
                                F.from_json(F.col("value").cast("string"), ORDER_SCHEMA).alias("o"))
                .selectExpr("*", "o.order_id IS NOT NULL AND o.customer IS NOT NULL AND o.amount IS NOT NULL "
                                 "AND o.amount > 0 AND o.ts IS NOT NULL AS valid"))

    trigger = {"processingTime": f"{cfg.trigger_ms} milliseconds"}

    def ckpt(name):
        return os.path.join(job.checkpoint, name)

    def start_enrich():
        out = parsed().selectExpr(
            "key",
            "to_json(named_struct("
            "'order_id', o.order_id, 'customer', o.customer, 'amount', cast(o.amount as string), "
            "'event_time_ms', o.ts, 'items', o.items, "
            "'amount_class', CASE WHEN NOT valid THEN NULL WHEN o.amount < 20 THEN 'small' "
            "  WHEN o.amount < 200 THEN 'medium' ELSE 'large' END, "
            "'valid', valid, "
            "'reason', CASE WHEN valid THEN NULL WHEN o.order_id IS NULL THEN 'malformed' "
            "  WHEN o.customer IS NULL THEN 'no-customer' WHEN o.amount IS NULL OR o.amount <= 0 THEN 'bad-amount' "
            "  ELSE 'no-event-time' END, "
            "'in_ts_ms', unix_millis(in_ts))) AS value",
            f"array(named_struct('key', '{HEADER}', 'value', "
            "cast(concat(topic, ':', cast(partition as string), ':', cast(offset as string)) as binary))) AS headers")
        if cfg.sink == "spark-kafka":  # Spark's own Kafka sink: at-least-once, no option for more
            w = out.writeStream.queryName("enrich").format("kafka")
        else:
            w = out.writeStream.queryName("enrich").format("oncelog").option("deliveryGuarantee", cfg.guarantee)
        return (w.options(**kafka_options).option("kafka.bootstrap.servers", job.bootstrap)
                .option("topic", job.enriched).option("checkpointLocation", ckpt("enrich")).trigger(**trigger).start())

    def foreach_writer(topic: str, app_id: str, key_expr: str, value_fields: str):
        def write(batch_df, batch_id: int) -> None:
            w = (batch_df.selectExpr(f"{key_expr} AS key",
                                     f"to_json(named_struct({value_fields}, 'batch', {int(batch_id)})) AS value")
                 .write.format("kafka" if cfg.sink == "spark-kafka" else "oncelog").options(**kafka_options)
                 .option("kafka.bootstrap.servers", job.bootstrap).option("topic", topic))
            if cfg.sink == "spark-kafka":
                pass  # Spark's Kafka sink has no guarantee option: at-least-once
            elif eos:
                w = w.option("txnAppId", app_id).option("txnVersion", batch_id)
            else:
                w = w.option("deliveryGuarantee", "at-least-once")
            w.mode("append").save()
        return write

    def start_totals():
        agg = (parsed().where("valid")
               .selectExpr("o.customer AS customer", "timestamp_millis(o.ts) AS event_time", "o.amount AS amount")
               .withWatermark("event_time", f"{WATERMARK_DELAY_MS // 1000} seconds")
               .groupBy("customer", F.window("event_time", f"{WINDOW_MS // 1000} seconds"))
               .agg(F.count(F.lit(1)).alias("orders"), F.sum("amount").alias("amount")))
        write = foreach_writer(job.totals, f"{job.app_id}-totals",
                               "concat(customer, '|', cast(unix_millis(window.start) as string))",
                               "'customer', customer, 'window_start_ms', unix_millis(window.start), "
                               "'window_end_ms', unix_millis(window.end), 'orders', orders, "
                               "'amount', cast(amount as string)")
        return (agg.writeStream.queryName("totals").outputMode("update").foreachBatch(write)
                .option("checkpointLocation", ckpt("totals")).trigger(**trigger).start())

    return {"enrich": start_enrich, "totals": start_totals}


def save_archive(spark, job: JobConfig, plog: ProgressLog) -> None:
    """Write the JVM's class-data archive to ``job.archive`` (the JVM stands still meanwhile, ~7 s)."""
    from .jvmcache import dump_from_driver

    t = time.time()
    ok, detail = dump_from_driver(spark, job.archive)
    plog.write("archive", ok=ok, detail=detail, path=job.archive, seconds=round(time.time() - t, 2))


def check_archive(spark, job: JobConfig, plog: ProgressLog) -> None:
    """Say whether the JVM mapped the class-data archive it was started with (a JVM that cannot
    use it starts slowly, without a word on the screen)."""
    opt = next((o for o in job.java_options.split() if o.startswith("-XX:SharedArchiveFile=")), None)
    if opt is None:
        return
    from .jvmcache import archive_mapped

    plog.write("jvm", archive=opt.split("=", 1)[1], **archive_mapped(spark, opt.split("=", 1)[1]))


def main(argv: list[str] | None = None) -> int:
    job = JobConfig.from_argv(sys.argv[1:] if argv is None else argv)
    plog = ProgressLog(job.progress, job.run)
    t0 = time.time()
    plog.write("launch", pid=os.getpid(), pgid=os.getpgid(0))
    from ..spark.session import local_session

    extra = {}
    # The sink's test hook is read in the Python workers: on a cluster they run under executors,
    # which do not inherit this process's environment.
    for name in ("ONCELOG_SPARK_TASK_FAULT", "ONCELOG_SPARK_TASK_FAULT_ONCE"):
        if os.environ.get(name):
            extra[f"spark.executorEnv.{name}"] = os.environ[name]
    if job.jars:
        extra["spark.jars"] = ",".join(job.jars)
    spark = local_session(job.pipeline.spark_master, app_name=f"oncelog-pipeline-{job.run}", rocksdb=True,
                          java_options=job.java_options, extra=extra)
    try:
        jvm_pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    except Exception:  # noqa: BLE001 - only used to make the JVM class-data archive (jvmcache)
        jvm_pid = None
    plog.write("session", seconds=round(time.time() - t0, 2), jvm_pid=jvm_pid)
    if job.pipeline.metrics_port:  # oncelog demo --metrics-port: the queries' metrics, served by this driver
        try:
            from ..spark.metrics import serve_query_metrics

            metrics = serve_query_metrics(spark, port=job.pipeline.metrics_port, bootstrap=job.bootstrap,
                                          kafka=job.pipeline.kafka_options)
            plog.write("metrics", url=metrics.url)
        except Exception as exc:  # noqa: BLE001 - the job runs on without its metrics (e.g. the port is taken)
            print(f"job: no metrics endpoint on port {job.pipeline.metrics_port}: {exc}", file=sys.stderr, flush=True)
            plog.write("metrics", error=str(exc))
    starters = build(spark, job)
    queries = {}
    for name, start in starters.items():
        queries[name] = start()
    plog.write("started", seconds=round(time.time() - t0, 2))
    seen: dict[str, set] = {name: set() for name in queries}
    restarts = 0
    stop_reporting = threading.Event()
    first_batch = threading.Event()

    def report_pass() -> None:
        for name, q in list(queries.items()):
            try:
                progress = q.recentProgress
            except Exception:
                continue
            for p in progress:
                key = (p["batchId"], p["timestamp"])
                if key in seen[name]:
                    continue
                seen[name].add(key)
                rows = p.get("numInputRows", 0)
                ms = (p.get("durationMs") or {}).get("triggerExecution")
                if ms is None:
                    continue
                try:  # when the batch ended: its trigger's start plus its duration
                    end = datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp() + ms / 1000
                except (KeyError, ValueError):
                    end = time.time()
                plog.write("batch", query=name, batch=p["batchId"], rows=rows, ms=ms, end=round(end, 3),
                           watermark=(p.get("eventTime") or {}).get("watermark"),
                           durations={k: v for k, v in (p.get("durationMs") or {}).items() if k != "triggerExecution"})
                if name == "enrich" and rows > 0 and not first_batch.is_set():
                    # After the first batch (off the restart's critical path): did the JVM use the
                    # archive it was given; or, Spark's classes being loaded now, make the archive.
                    first_batch.set()
                    threading.Thread(target=check_archive if not job.archive else save_archive,
                                     args=(spark, job, plog), daemon=True, name="archive").start()

    def report() -> None:
        while not stop_reporting.is_set():
            report_pass()
            stop_reporting.wait(0.4)

    reporter = threading.Thread(target=report, daemon=True)
    reporter.start()

    def restart(name: str, exc) -> None:
        nonlocal restarts
        restarts += 1
        cause = explain(str(exc), bootstrap=job.bootstrap)
        plog.write("query-failed", query=name, kind=cause.kind, cause=cause.text, restarts=restarts)
        # The whole text (Spark's error, the Python and JVM stacks) for the log; the screen gets the cause.
        print(f"job: query {name} failed ({restarts}): {cause}\n{exc}", file=sys.stderr, flush=True)
        if restarts > MAX_RESTARTS:
            raise SystemExit(3)
        time.sleep(1.0)
        queries[name] = starters[name]()
        plog.write("query-restarted", query=name)

    try:
        while not (job.drain and os.path.exists(job.drain)):
            for name, q in list(queries.items()):
                if not q.isActive:
                    restart(name, q.exception())
            time.sleep(0.25)
        plog.write("draining")
        for name in list(queries):
            while True:
                try:
                    queries[name].processAllAvailable()
                    break
                except Exception as exc:  # noqa: BLE001 - a failed query is restarted, as above
                    restart(name, exc)
        stop_reporting.set()
        reporter.join(2)
        for name, q in queries.items():
            q.stop()
        report_pass()  # the last progress lines
        plog.write("drained", seconds=round(time.time() - t0, 2), restarts=restarts)
    except SystemExit:
        raise
    except BaseException:
        traceback.print_exc()
        plog.write("error", error=traceback.format_exc()[-800:])
        return 2
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
