"""The pipeline's Spark Structured Streaming job: one driver process, two streaming queries.

``python -m oncelog.pipeline.job --bootstrap ... --input orders --checkpoint DIR ...``

* ``enrich``: parse each order (JSON), validate it (``valid``, ``reason``), add its amount
  class, and write one record per input record to ``--enriched`` through the connector's
  streaming sink (``format("oncelog")``, exactly-once by default), with the header
  ``oncelog.source`` = ``topic:partition:offset`` of its input record, for the auditor.
* ``totals``: running totals of valid orders (count, amount) per customer and 5-minute
  event-time window, with a 10-minute watermark (events later than that are dropped by Spark,
  and windows the watermark has passed leave the state), on the RocksDB state store, Update
  mode, written to ``--totals`` from ``foreachBatch`` through the connector's batch writer with
  ``txnAppId``/``txnVersion`` = the batch id: a replayed batch is not written twice.

Each aggregate record carries the batch id that wrote it, so duplicates can be counted.
``--guarantee at-least-once`` writes everything with ``deliveryGuarantee=at-least-once``
instead (what Spark's own Kafka sink does). ``--sink spark-kafka`` writes both outputs through
Spark's own Kafka connector instead (``format("kafka")``, its jars given with ``--jars``; the
same headers column): at-least-once by design, whatever ``--guarantee`` says. The source is
the connector's in every case. ``--kafka-option kafka.KEY=VALUE`` (repeatable) goes to every
source and sink (security settings for a secured cluster, in Kafka's client names).

Supervision: a query that fails (e.g. the broker went away under it) is restarted from its
checkpoint inside this driver after a short pause. The process exits 0 after the file named by
``--drain`` appears and every query has processed all available input (``processAllAvailable``).
Progress (one JSON line per completed micro-batch, plus lifecycle events) goes to ``--progress``.
The whole process group is meant to be SIGKILLed at any moment (see :mod:`.procs`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import traceback
from datetime import datetime

from .events import WATERMARK_DELAY_MS, WINDOW_MS

ORDER_SCHEMA = "order_id string, customer string, amount decimal(12,2), ts long, items int"
HEADER = "oncelog.source"


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


def parse_args(argv=None):
    ap = argparse.ArgumentParser(prog="python -m oncelog.pipeline.job")
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--enriched", required=True)
    ap.add_argument("--totals", required=True, help="topic of the per-customer, per-window totals")
    ap.add_argument("--checkpoint", required=True, help="directory: one checkpoint per query below it")
    ap.add_argument("--app-id", required=True, help="txnAppId prefix of the foreachBatch writes")
    ap.add_argument("--master", default="local[2,3]")
    ap.add_argument("--guarantee", default="exactly-once", choices=["exactly-once", "at-least-once"])
    ap.add_argument("--trigger-ms", type=int, default=1000)
    ap.add_argument("--max-per-trigger", type=int, default=20_000)
    ap.add_argument("--progress", default=None, help="append JSON lines here")
    ap.add_argument("--drain", default=None, help="finish when this file exists")
    ap.add_argument("--run", type=int, default=0, help="run number, for the progress log")
    ap.add_argument("--queries", default="enrich,totals")
    ap.add_argument("--max-restarts", type=int, default=30)
    ap.add_argument("--java-options", default="", help="more JVM options for the driver (--java-options=-XX:...)")
    ap.add_argument("--sink", default="oncelog", choices=["oncelog", "spark-kafka"],
                    help="oncelog: the connector's sinks; spark-kafka: Spark's own format(\"kafka\")")
    ap.add_argument("--jars", default="", help="comma-separated jars for spark.jars (Spark's Kafka connector)")
    ap.add_argument("--kafka-option", action="append", default=[], metavar="kafka.KEY=VALUE",
                    help="a Kafka client setting for every source and sink (repeatable)")
    return ap.parse_args(argv)


def build(spark, a):
    """The queries' start functions (each starts its query from its checkpoint)."""
    from pyspark.sql import functions as F

    eos = a.guarantee == "exactly-once" and a.sink == "oncelog"
    kafka_options = dict(kv.split("=", 1) for kv in a.kafka_option)

    def source():
        return (spark.readStream.format("oncelog").options(**kafka_options).option("kafka.bootstrap.servers", a.bootstrap)
                .option("subscribe", a.input).option("startingOffsets", "earliest")
                .option("maxOffsetsPerTrigger", a.max_per_trigger).load())

    def parsed():
        return (source().select("key", "topic", "partition", "offset", F.col("timestamp").alias("in_ts"),
                                F.from_json(F.col("value").cast("string"), ORDER_SCHEMA).alias("o"))
                .selectExpr("*", "o.order_id IS NOT NULL AND o.customer IS NOT NULL AND o.amount IS NOT NULL "
                                 "AND o.amount > 0 AND o.ts IS NOT NULL AS valid"))

    trigger = {"processingTime": f"{a.trigger_ms} milliseconds"}

    def ckpt(name):
        return os.path.join(a.checkpoint, name)

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
        if a.sink == "spark-kafka":  # Spark's own Kafka sink: at-least-once, no option for more
            w = out.writeStream.queryName("enrich").format("kafka")
        else:
            w = out.writeStream.queryName("enrich").format("oncelog").option("deliveryGuarantee", a.guarantee)
        return (w.options(**kafka_options).option("kafka.bootstrap.servers", a.bootstrap).option("topic", a.enriched)
                .option("checkpointLocation", ckpt("enrich")).trigger(**trigger).start())

    def foreach_writer(topic: str, app_id: str, key_expr: str, value_fields: str):
        def write(batch_df, batch_id: int) -> None:
            w = (batch_df.selectExpr(f"{key_expr} AS key",
                                     f"to_json(named_struct({value_fields}, 'batch', {int(batch_id)})) AS value")
                 .write.format("kafka" if a.sink == "spark-kafka" else "oncelog").options(**kafka_options)
                 .option("kafka.bootstrap.servers", a.bootstrap).option("topic", topic))
            if a.sink == "spark-kafka":
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
        write = foreach_writer(a.totals, f"{a.app_id}-totals",
                               "concat(customer, '|', cast(unix_millis(window.start) as string))",
                               "'customer', customer, 'window_start_ms', unix_millis(window.start), "
                               "'window_end_ms', unix_millis(window.end), 'orders', orders, "
                               "'amount', cast(amount as string)")
        return (agg.writeStream.queryName("totals").outputMode("update").foreachBatch(write)
                .option("checkpointLocation", ckpt("totals")).trigger(**trigger).start())

    starters = {"enrich": start_enrich, "totals": start_totals}
    return {name: starters[name] for name in a.queries.split(",")}


def _short(exc) -> str:
    text = str(exc)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return " | ".join(lines[:3])[:600]


def main(argv=None) -> int:
    a = parse_args(argv)
    plog = ProgressLog(a.progress, a.run)
    t0 = time.time()
    plog.write("launch", pid=os.getpid(), pgid=os.getpgid(0))
    from ..spark.session import local_session

    extra = {}
    # The sink's test hook is read in the Python workers: on a cluster they run under executors,
    # which do not inherit this process's environment.
    for name in ("ONCELOG_SPARK_TASK_FAULT", "ONCELOG_SPARK_TASK_FAULT_ONCE"):
        if os.environ.get(name):
            extra[f"spark.executorEnv.{name}"] = os.environ[name]
    if a.jars:
        extra["spark.jars"] = a.jars
    spark = local_session(a.master, app_name=f"oncelog-pipeline-{a.run}", rocksdb=True, java_options=a.java_options,
                          extra=extra)
    try:
        jvm_pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    except Exception:  # noqa: BLE001 - only used to make the JVM class-data archive (jvmcache)
        jvm_pid = None
    plog.write("session", seconds=round(time.time() - t0, 2), jvm_pid=jvm_pid)
    starters = build(spark, a)
    queries = {}
    for name, start in starters.items():
        queries[name] = start()
    plog.write("started", seconds=round(time.time() - t0, 2))
    seen: dict[str, set] = {name: set() for name in queries}
    restarts = 0
    stop_reporting = threading.Event()

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

    def report() -> None:
        while not stop_reporting.is_set():
            report_pass()
            stop_reporting.wait(0.4)

    reporter = threading.Thread(target=report, daemon=True)
    reporter.start()

    def restart(name: str, exc) -> None:
        nonlocal restarts
        restarts += 1
        plog.write("query-failed", query=name, error=_short(exc), restarts=restarts)
        print(f"job: query {name} failed ({restarts}): {_short(exc)}", file=sys.stderr, flush=True)
        if restarts > a.max_restarts:
            raise SystemExit(3)
        time.sleep(1.0)
        queries[name] = starters[name]()
        plog.write("query-restarted", query=name)

    try:
        while not (a.drain and os.path.exists(a.drain)):
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
