"""``python -m bench spark``: rows/s through the Spark connector, every mode side by side in one run.

Cells (each a streaming query over the same pre-filled topic, ``Trigger.AvailableNow`` with
``maxOffsetsPerTrigger``, one SparkSession ``local[2]`` for all):

* ``synthetic → noop``: a Python data source that yields ready Arrow batches: the ceiling of
  PySpark's Python data sources on this machine;
* ``oncelog → noop``: the source alone (Fetch, bulk decode to Arrow);
* ``oncelog → exactly-once``: source and the transactional, batch-atomic sink;
* ``oncelog → eos-partition``: source and the exactly-once sink with ``atomicity=partition``
  (each write task commits its own transaction with a progress marker);
* ``oncelog → at-least-once``: source and the plain sink (what Spark's own Kafka sink does).

A cell's rate is rows / sum of ``triggerExecution`` over its micro-batches after the first (the
first pays Python worker start-up and planning). Cells are interleaved over ``--rounds`` rounds
and the median is reported. The commit's added latency per micro-batch is measured with small
batches (``--small-rows`` per trigger): median ``triggerExecution`` of each exactly-once mode
minus at-least-once.
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

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
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
            from oncelog.spark.source import SCHEMA

            return SCHEMA

        def streamReader(self, schema):
            return SyntheticReader(self.options)

    return SyntheticSource


def run_cell(spark, kind: str, bootstrap: str, topic: str, rows: int, per_trigger: int, work: str, tag: str) -> dict:
    ckpt = os.path.join(work, f"ckpt-{tag}")
    if kind == "synthetic":
        df = (spark.readStream.format("oncelog_bench_synthetic").option("rows", rows)
              .option("maxRows", per_trigger).load())
    else:
        df = (spark.readStream.format("oncelog").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", per_trigger).load())
    if kind in ("synthetic", "source"):
        w = df.writeStream.format("noop")
    else:
        out = f"{topic}-out-{tag}"
        w = (df.selectExpr("key", "value").writeStream.format("oncelog").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", out))
        if kind == "eos-partition":
            w = w.option("deliveryGuarantee", "exactly-once").option("atomicity", "partition")
        else:
            w = w.option("deliveryGuarantee", kind)
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
          "exactly-once": "oncelog → exactly-once sink", "eos-partition": "oncelog → exactly-once, atomicity=partition",
          "at-least-once": "oncelog → at-least-once sink"}


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
    ap.add_argument("--fsync", default="never", help="broker --fsync policy")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    console = Console()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from oncelog.process import BrokerProcess
    from oncelog.spark.session import local_session

    work = tempfile.mkdtemp(prefix="oncelog-bench-spark-")
    broker = BrokerProcess(os.path.join(work, "broker"), fsync=args.fsync).start()
    try:
        t0 = time.monotonic()
        fill(broker.bootstrap, "bench-in", args.records, args.partitions, 100)
        small = args.small_rows * args.small_batches
        fill(broker.bootstrap, "bench-small", small, args.partitions, 100)
        console.print(f"filled {args.records:,} records in {time.monotonic() - t0:.1f} s; starting Spark")
        spark = local_session("local[2]", app_name="oncelog-bench")
        spark.dataSource.register(synthetic_source())
        triggers = [int(x) for x in str(args.per_trigger).split(",")]
        results: dict[tuple[int, str], list[dict]] = {(t, k): [] for t in triggers for k in LABELS}
        for rnd in range(args.rounds):
            for t in triggers:
                for kind in LABELS:
                    r = run_cell(spark, kind, broker.bootstrap, "bench-in", args.records, t, work,
                                 f"{kind}-{t}-{rnd}")
                    console.print(f"round {rnd + 1} {t:,}/trigger {LABELS[kind]}: {r['rows_per_s']:,.0f} rows/s "
                                  f"({r['rows']:,} rows in {r['seconds']:.2f} s, {r['batches']} batches)")
                    results[(t, kind)].append(r)
        # Commit latency: small batches, exactly-once vs at-least-once, interleaved.
        lat: dict[str, list[float]] = {"exactly-once": [], "eos-partition": [], "at-least-once": []}
        for rnd in range(args.rounds):
            for kind in lat:
                r = run_cell(spark, kind, broker.bootstrap, "bench-small", small, args.small_rows, work,
                             f"small-{kind}-{rnd}")
                lat[kind] += r["batch_ms"][: args.small_batches]
        spark.stop()
    finally:
        broker.kill()
        shutil.rmtree(work, ignore_errors=True)
    med = {k: statistics.median(x["rows_per_s"] for x in v) for k, v in results.items()}
    table = Table(title=f"Spark connector, {args.records:,} records of 100 B, local[2], fsync {args.fsync}")
    table.add_column("rows/trigger", justify="right")
    table.add_column("cell")
    table.add_column("rows/s (median)", justify="right")
    table.add_column("rounds", justify="right")
    for t in triggers:
        for k, label in LABELS.items():
            table.add_row(f"{t:,}", label, f"{med[(t, k)]:,.0f}",
                          " / ".join(f"{x['rows_per_s']:,.0f}" for x in results[(t, k)]))
    console.print(table)
    rt = Table(title="ratios")
    rt.add_column("rows/trigger", justify="right")
    rt.add_column("what")
    rt.add_column("ratio", justify="right")
    rt.add_column("target met")
    for t in triggers:
        m = {k: med[(t, k)] for k in LABELS}
        for what, value, target in [
            ("source alone ≥ 300k rows/s", m["source"] / 300_000, 1.0),
            ("exactly-once / at-least-once ≥ 0.9", m["exactly-once"] / m["at-least-once"], 0.9),
            ("eos-partition / at-least-once", m["eos-partition"] / m["at-least-once"], None),
            ("exactly-once / source alone ≥ 0.5", m["exactly-once"] / m["source"], 0.5),
            ("source / synthetic ceiling", m["source"] / m["synthetic"], None),
        ]:
            rt.add_row(f"{t:,}", what, f"{value:.2f}", "" if target is None else ("yes" if value >= target else "NO"))
    console.print(rt)
    eos_ms, alo_ms = statistics.median(lat["exactly-once"]), statistics.median(lat["at-least-once"])
    part_ms = statistics.median(lat["eos-partition"])
    console.print(f"per micro-batch of {args.small_rows} rows (median triggerExecution): exactly-once {eos_ms:.0f} ms, "
                  f"atomicity=partition {part_ms:.0f} ms, at-least-once {alo_ms:.0f} ms: the commit adds "
                  f"{eos_ms - alo_ms:.0f} ms (batch), {part_ms - alo_ms:.0f} ms (partition)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "cells": {f"{t}/{k}": v for (t, k), v in results.items()},
                       "median_rows_per_s": {f"{t}/{k}": v for (t, k), v in med.items()},
                       "small_batch_ms": lat, "commit_added_ms": eos_ms - alo_ms,
                       "partition_commit_added_ms": part_ms - alo_ms}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
