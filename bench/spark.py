"""``python -m bench spark``: rows/s through the Spark connector, every mode side by side in one run.

Cells (each a streaming query over the same pre-filled topic, ``Trigger.AvailableNow`` with
``maxOffsetsPerTrigger``, one SparkSession ``local[2]`` for all):

* ``synthetic → noop``: a Python data source that yields ready Arrow batches: the ceiling of
  PySpark's Python data sources on this machine;
* ``oncelog → noop``: the source alone (Fetch, bulk decode to Arrow);
* ``oncelog → exactly-once``: source and the transactional, batch-atomic sink;
* ``oncelog → eos-partition``: source and the exactly-once sink with ``atomicity=partition``
  (each write task commits its own transaction with a progress marker);
* ``oncelog → at-least-once``: source and the plain sink (what Spark's own Kafka sink does);
* ``Spark's Kafka source → noop``: Spark's own connector (``format("kafka")``,
  ``kafka.isolation.level=read_committed`` as ours), on the same topic;
* ``oncelog → Spark's Kafka sink``: our source, then Spark's own at-least-once sink.

Targets (``--targets``): the cells run against an oncelog broker and against Apache Kafka (one
node from the user's cache, full JIT), each filled with the same records, in the same run and
the same SparkSession. Spark's connector (spark-sql-kafka-0-10, fetched with mvn) must match
Spark's version: when Maven Central lacks the installed PySpark's, the whole benchmark re-runs
itself under the nearest served pair's interpreter (:mod:`oncelog.spark_kafka_jars`), so that
every cell shares one Spark; ``--no-spark-kafka`` keeps the installed PySpark and drops those
cells.

A cell's rate is rows / sum of ``triggerExecution`` over its micro-batches after the first (the
first pays Python worker start-up and planning). Cells are interleaved over ``--rounds`` rounds
and the median is reported. Ratios between cells are given as the ratio of the medians and as
the median of each round's ratio (a round's cells of one cluster and trigger run seconds apart,
so a change in a shared machine's load weighs on both sides alike); a target is met when both
are. The commit's added latency per micro-batch is measured with small
batches (``--small-rows`` per trigger): median ``triggerExecution`` of each exactly-once mode
minus at-least-once, and Spark's Kafka sink's beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
from rich.console import Console
from rich.table import Table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fill(bootstrap: str, topic: str, n: int, partitions: int, value_size: int) -> None:
    """Write n records (10-byte keys, ``value_size``-byte values) with the protocol client."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from oncelog.client.kafka import KafkaClient, TransactionalProducer
    from oncelog.client.recordcodec import encode_batch, encode_records

    create_topic(bootstrap, topic, partitions)
    client = KafkaClient(bootstrap)
    prod = TransactionalProducer(client, "", 60000)
    value = b"x" * value_size
    per_batch = 5000
    for p in range(partitions):
        for start in range(0, n // partitions, per_batch):
            count = min(per_batch, n // partitions - start)
            keys = pa.array([b"key-%06d" % i for i in range(start, start + count)], pa.binary())
            vals = pa.array([value] * count, pa.binary())
            prod.send(topic, p, encode_batch(encode_records(keys, vals, None), count,
                                             timestamp_ms=int(time.time() * 1000)), count)
        prod.flush()
    prod.close()
    client.close()


def synthetic_source():
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow

    class _Part(InputPartition):
        def __init__(self, start, end):
            self.start, self.end = start, end

    class SyntheticReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
        def __init__(self, options):
            self.total = int(options["rows"])
            self.limit = int(options["maxrows"])

        def initialOffset(self):
            return {"0": 0}

        def getDefaultReadLimit(self):
            return ReadMaxRows(self.limit)

        def prepareForTriggerAvailableNow(self):
            pass

        def latestOffset(self, start, limit):
            return {"0": min(self.total, start["0"] + self.limit)}

        def partitions(self, start, end):
            s, e = start["0"], end["0"]
            mid = (s + e) // 2
            return [_Part(s, mid), _Part(mid, e)]

        def read(self, part):
            from oncelog.spark.source import arrow_schema

            schema = arrow_schema(False)
            chunk = 65536
            for s in range(part.start, part.end, chunk):
                n = min(chunk, part.end - s)
                yield pa.RecordBatch.from_arrays([
                    pa.array([b"key-000000"] * n, pa.binary()), pa.array([b"x" * 100] * n, pa.binary()),
                    pa.array(["t"] * n), pa.array(np.zeros(n, np.int32)), pa.array(np.arange(s, s + n)),
                    pa.array(np.zeros(n, np.int64), pa.timestamp("us", tz="UTC")), pa.array(np.zeros(n, np.int32))],
                    schema=schema)

    class SyntheticSource(DataSource):
        @classmethod
        def name(cls):
            return "oncelog_bench_synthetic"

        def schema(self):
            from oncelog.spark.options import SCHEMA

            return SCHEMA

        def streamReader(self, schema):
            return SyntheticReader(self.options)

    return SyntheticSource


def create_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 30.0) -> None:
    """Create ``topic`` and wait until every partition has a leader that knows it: Apache Kafka
    answers CreateTopics before its brokers have the new partitions' metadata (a Produce then
    gets NOT_LEADER_OR_FOLLOWER)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout)
    deadline = time.monotonic() + timeout
    while True:
        t = admin.list_topics(topic, timeout=timeout).topics.get(topic)
        if (t is not None and t.error is None and len(t.partitions) == partitions
                and all(p.leader >= 0 and p.error is None for p in t.partitions.values())):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic}: partitions without a leader after {timeout:.0f} s")
        time.sleep(0.05)


def run_cell(spark, kind: str, bootstrap: str, topic: str, rows: int, per_trigger: int, work: str, tag: str,
             partitions: int = 4) -> dict:
    ckpt = os.path.join(work, f"ckpt-{tag}")
    if kind == "synthetic":
        df = (spark.readStream.format("oncelog_bench_synthetic").option("rows", rows)
              .option("maxRows", per_trigger).load())
    elif kind == "spark-source":
        df = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest")
              .option("kafka.isolation.level", "read_committed").option("maxOffsetsPerTrigger", per_trigger).load())
    else:
        df = (spark.readStream.format("oncelog").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", per_trigger).load())
    if kind in ("synthetic", "source", "spark-source"):
        w = df.writeStream.format("noop")
    else:
        out = f"{topic}-out-{tag}"
        create_topic(bootstrap, out, partitions)  # the same partitions on both targets (not auto-created)
        if kind == "spark-sink":
            w = df.selectExpr("key", "value").writeStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
        else:
            w = (df.selectExpr("key", "value").writeStream.format("oncelog")
                 .option("kafka.bootstrap.servers", bootstrap))
            if kind == "eos-partition":
                w = w.option("deliveryGuarantee", "exactly-once").option("atomicity", "partition")
            else:
                w = w.option("deliveryGuarantee", kind)
        w = w.option("topic", out)
    q = w.option("checkpointLocation", ckpt).trigger(availableNow=True).start()
    q.awaitTermination(1800)
    if q.exception() is not None:
        raise RuntimeError(f"{kind}: {q.exception()}")
    progress = [p for p in q.recentProgress if p["numInputRows"] > 0]
    steady = progress[1:] or progress
    n = sum(p["numInputRows"] for p in steady)
    ms = sum(p["durationMs"]["triggerExecution"] for p in steady)
    add_batch = [p["durationMs"].get("addBatch", 0) for p in steady]
    return {"kind": kind, "rows": n, "seconds": ms / 1000, "rows_per_s": n / (ms / 1000) if ms else 0.0,
            "batches": len(progress), "batch_ms": [p["durationMs"]["triggerExecution"] for p in steady],
            "add_batch_ms": add_batch}


LABELS = {"synthetic": "synthetic Arrow → noop (ceiling)", "source": "oncelog source → noop",
          "spark-source": "Spark's Kafka source → noop",
          "exactly-once": "oncelog → exactly-once sink", "eos-partition": "oncelog → exactly-once, atomicity=partition",
          "at-least-once": "oncelog → at-least-once sink",
          "spark-sink": "oncelog → Spark's Kafka sink (at-least-once)"}
SPARK_KAFKA_KINDS = {"spark-source", "spark-sink"}
LATENCY_KINDS = ("exactly-once", "eos-partition", "at-least-once", "spark-sink")
TARGET_NAMES = {"oncelog": "oncelog broker", "apache-kafka": "Apache Kafka (1 node)"}
REEXEC_ENV = "ONCELOG_BENCH_SPARK_PAIRED"


def _paired_runtime(console, use_spark_kafka: bool, argv: list[str]):
    """Spark's Kafka connector's jars for this interpreter's Spark; re-executes the benchmark under
    the paired PySpark's interpreter when this one's has no connector on Maven Central."""
    if not use_spark_kafka:
        return None
    from oncelog.spark_kafka_jars import runtime

    rt = runtime(quiet=False)
    if rt.python != sys.executable:
        if os.environ.get(REEXEC_ENV):
            raise RuntimeError(f"re-executed under {rt.python}, which still is not PySpark {rt.spark_version}")
        console.print(f"[yellow]{rt.note}[/]: the whole benchmark runs there, our cells included")
        env = {**os.environ, REEXEC_ENV: "1", "PYSPARK_PYTHON": rt.python, "PYSPARK_DRIVER_PYTHON": rt.python,
               "PYTHONPATH": os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
        sys.stdout.flush()
        os.execve(rt.python, [rt.python, "-m", "bench", "spark", *argv], env)
    return rt


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench spark", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000, help="input records (100 B values)")
    ap.add_argument("--per-trigger", default="250000,1000000",
                    help="maxOffsetsPerTrigger of the throughput cells; a comma list runs every cell at each "
                         "(Spark's fixed cost per micro-batch, ~0.5 s here, weighs on small triggers)")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--small-rows", type=int, default=1000, help="rows per trigger of the commit-latency cells")
    ap.add_argument("--small-batches", type=int, default=15)
    ap.add_argument("--fsync", default="never", help="oncelog broker --fsync policy")
    ap.add_argument("--targets", default="oncelog,apache-kafka",
                    help="clusters to run every cell against: oncelog, apache-kafka (one node, from the cache)")
    ap.add_argument("--no-spark-kafka", dest="spark_kafka", action="store_false",
                    help="no cells of Spark's own Kafka connector (and no change of PySpark to pair with it)")
    ap.add_argument("--json", help="write the figures here")
    argv = sys.argv[2:] if argv is None else list(argv)
    args = ap.parse_args(argv)
    console = Console() if sys.stdout.isatty() else Console(width=160)  # the tables whole in a log
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    unknown = set(targets) - set(TARGET_NAMES)
    if unknown or not targets:
        ap.error(f"--targets: unknown {', '.join(sorted(unknown)) or '(none)'}; choose from {', '.join(TARGET_NAMES)}")
    rt = _paired_runtime(console, args.spark_kafka, argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import pyspark

    from oncelog.process import BrokerProcess
    from oncelog.spark.session import local_session

    kinds = [k for k in LABELS if rt is not None or k not in SPARK_KAFKA_KINDS]
    lat_kinds = [k for k in LATENCY_KINDS if k in kinds]
    work = tempfile.mkdtemp(prefix="oncelog-bench-spark-")
    clusters: dict[str, object] = {}
    boot: dict[str, str] = {}
    try:
        for target in targets:
            t0 = time.monotonic()
            if target == "oncelog":
                b = BrokerProcess(os.path.join(work, "broker"), fsync=args.fsync).start()
                clusters[target], boot[target] = b, b.bootstrap
            else:
                from oncelog.tools.apache_kafka import KafkaCluster

                # Full JIT and a bigger heap than the tests' quick-start nodes: this is a benchmark.
                k = KafkaCluster(nodes=1, workdir=os.path.join(work, "apache-kafka"), quick_start=False,
                                 heap="1g").start()
                clusters[target], boot[target] = k, k.bootstrap
            fill(boot[target], "bench-in", args.records, args.partitions, 100)
            small = args.small_rows * args.small_batches
            fill(boot[target], "bench-small", small, args.partitions, 100)
            console.print(f"{TARGET_NAMES[target]}: up and filled with {args.records:,} + {small:,} records in "
                          f"{time.monotonic() - t0:.1f} s")
        extra = {"spark.jars": ",".join(rt.jars)} if rt is not None else {}
        spark = local_session("local[2]", app_name="oncelog-bench", extra=extra)
        spark.dataSource.register(synthetic_source())
        console.print(f"Spark {spark.version} (PySpark {pyspark.__version__}), "
                      f"{'spark-sql-kafka-0-10 ' + rt.spark_version if rt else 'without Spark’s Kafka connector'}")
        triggers = [int(x) for x in str(args.per_trigger).split(",")]
        cells = [(tg, t, k) for tg in targets for t in triggers for k in kinds
                 if k != "synthetic" or tg == targets[0]]  # the ceiling has no broker: once
        results: dict[tuple[str, int, str], list[dict]] = {c: [] for c in cells}
        for rnd in range(args.rounds):
            for tg, t, kind in cells:
                r = run_cell(spark, kind, boot[tg], "bench-in", args.records, t, work, f"{tg}-{kind}-{t}-{rnd}",
                             args.partitions)
                console.print(f"round {rnd + 1} {TARGET_NAMES[tg]} {t:,}/trigger {LABELS[kind]}: "
                              f"{r['rows_per_s']:,.0f} rows/s ({r['rows']:,} rows in {r['seconds']:.2f} s, "
                              f"{r['batches']} batches)")
                results[(tg, t, kind)].append(r)
        # Commit latency: small batches of every sink, interleaved.
        lat: dict[tuple[str, str], list[float]] = {(tg, k): [] for tg in targets for k in lat_kinds}
        for rnd in range(args.rounds):
            for tg, kind in lat:
                r = run_cell(spark, kind, boot[tg], "bench-small", args.small_rows * args.small_batches,
                             args.small_rows, work, f"small-{tg}-{kind}-{rnd}", args.partitions)
                lat[(tg, kind)] += r["batch_ms"][: args.small_batches]
        spark_version = spark.version
        spark.stop()
    finally:
        for c in clusters.values():
            if isinstance(c, BrokerProcess):
                c.kill()
            else:
                c.stop(graceful=False)
        shutil.rmtree(work, ignore_errors=True)
    med = {c: statistics.median(x["rows_per_s"] for x in v) for c, v in results.items()}
    table = Table(title=f"Spark {spark_version} connectors, {args.records:,} records of 100 B, local[2], "
                        f"oncelog fsync {args.fsync}")
    table.add_column("cluster")
    table.add_column("rows/trigger", justify="right")
    table.add_column("cell")
    table.add_column("rows/s (median)", justify="right")
    table.add_column("rounds", justify="right")
    for c in cells:
        tg, t, k = c
        table.add_row(TARGET_NAMES[tg] if k != "synthetic" else "(none)", f"{t:,}", LABELS[k], f"{med[c]:,.0f}",
                      " / ".join(f"{x['rows_per_s']:,.0f}" for x in results[c]))
    console.print(table)
    rt_table = Table(title="ratios")
    rt_table.add_column("cluster")
    rt_table.add_column("rows/trigger", justify="right")
    rt_table.add_column("what")
    rt_table.add_column("ratio of medians", justify="right")
    rt_table.add_column("median of per-round ratios", justify="right")
    rt_table.add_column("target met")
    ratios = {}
    for tg in targets:
        for t in triggers:
            def cell(k):
                return (targets[0], t, "synthetic") if k == "synthetic" else (tg, t, k)

            def ratio(a, b):
                """Ratio of the medians, and the median of the ratios of each round's cells (run
                seconds apart, so a shift in the machine's load weighs on both alike)."""
                per_round = [x["rows_per_s"] / y["rows_per_s"] for x, y in zip(results[cell(a)], results[cell(b)])
                             if y["rows_per_s"]]
                return med[cell(a)] / med[cell(b)], statistics.median(per_round) if per_round else float("nan")

            checks = [("source alone ≥ 300k rows/s", (med[cell("source")] / 300_000,) * 2, 1.0),
                      ("exactly-once / at-least-once ≥ 0.9", ratio("exactly-once", "at-least-once"), 0.9),
                      ("eos-partition / at-least-once", ratio("eos-partition", "at-least-once"), None),
                      ("exactly-once / source alone ≥ 0.5", ratio("exactly-once", "source"), 0.5),
                      ("source / synthetic ceiling", ratio("source", "synthetic"), None)]
            if rt is not None:
                checks += [("our source / Spark's Kafka source ≥ 0.8", ratio("source", "spark-source"), 0.8),
                           ("our exactly-once sink / Spark's Kafka sink ≥ 0.8", ratio("exactly-once", "spark-sink"),
                            0.8),
                           ("our at-least-once sink / Spark's Kafka sink", ratio("at-least-once", "spark-sink"), None)]
            for what, (value, per_round), target in checks:
                ratios[f"{tg}/{t}/{what}"] = {"of_medians": value, "per_round_median": per_round}
                rt_table.add_row(TARGET_NAMES[tg], f"{t:,}", what, f"{value:.2f}", f"{per_round:.2f}",
                                 "" if target is None else ("yes" if min(value, per_round) >= target else "NO"))
    console.print(rt_table)
    lat_med = {c: statistics.median(v) for c, v in lat.items()}
    for tg in targets:
        alo = lat_med[(tg, "at-least-once")]
        parts = [f"{LABELS[k].removeprefix('oncelog → ')} {lat_med[(tg, k)]:.0f} ms" for k in lat_kinds]
        console.print(f"{TARGET_NAMES[tg]}, per micro-batch of {args.small_rows} rows (median triggerExecution): "
                      + ", ".join(parts) + f"; our exactly-once commit adds {lat_med[(tg, 'exactly-once')] - alo:.0f} ms "
                      f"(batch), {lat_med[(tg, 'eos-partition')] - alo:.0f} ms (partition) to our at-least-once sink"
                      + (f", {lat_med[(tg, 'exactly-once')] - lat_med[(tg, 'spark-sink')]:.0f} ms to Spark's Kafka sink"
                         if (tg, "spark-sink") in lat_med else ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "spark": spark_version,
                       "spark_kafka": None if rt is None else {"version": rt.spark_version, "note": rt.note},
                       "cells": {"/".join(map(str, c)): v for c, v in results.items()},
                       "median_rows_per_s": {"/".join(map(str, c)): v for c, v in med.items()},
                       "ratios": ratios,
                       "small_batch_ms": {"/".join(c): v for c, v in lat.items()},
                       "small_batch_median_ms": {"/".join(c): v for c, v in lat_med.items()}}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
