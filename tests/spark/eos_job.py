"""A Spark Structured Streaming job for the sink's crash tests, run in its own process group.

Reads ``--input`` through the connector (read_committed, ``maxOffsetsPerTrigger``), upper-cases
the value, tags each output with the ``oncelog.source`` header (``topic:partition:offset`` of its
input) so the auditor can match outputs to inputs, and writes ``--output`` through the sink with
``Trigger.AvailableNow``: the process exits 0 once every input available at start is written.
Crash points (``ONCELOG_SPARK_CRASH_POINT``) SIGKILL the whole process group: JVM and Python.
"""

import argparse
import os
import sys


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--max-per-trigger", type=int, default=300)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--guarantee", default="exactly-once")
    ap.add_argument("--atomicity", default="batch")
    ap.add_argument("--timeout", type=float, default=240)
    ap.add_argument("--java-options", default="", help="more JVM options for the driver (--java-options=-XX:...)")
    ap.add_argument("--prefix", default=None, help="the sink's transactionalIdPrefix (default: from the query id)")
    ap.add_argument("--test-option", action="append", default=[], help="an oncelog.test.<name>=<value> sink option")
    args = ap.parse_args()
    os.environ.setdefault("ONCELOG_SPARK_CRASH_PGID", str(os.getpgid(0)))
    from oncelog.spark.session import local_session

    spark = local_session(args.master, app_name="oncelog-eos-job", java_options=args.java_options)
    src = (spark.readStream.format("oncelog").option("kafka.bootstrap.servers", args.bootstrap)
           .option("subscribe", args.input).option("startingOffsets", "earliest")
           .option("maxOffsetsPerTrigger", args.max_per_trigger).load())
    out = src.selectExpr(
        "key", "upper(cast(value as string)) as value",
        "array(named_struct('key', 'oncelog.source', 'value', "
        "cast(concat(topic, ':', cast(partition as string), ':', cast(offset as string)) as binary))) as headers")
    w = (out.writeStream.format("oncelog").option("kafka.bootstrap.servers", args.bootstrap)
         .option("topic", args.output).option("deliveryGuarantee", args.guarantee)
         .option("atomicity", args.atomicity))
    if args.prefix:
        w = w.option("transactionalIdPrefix", args.prefix)
    for item in args.test_option:
        name, _, value = item.partition("=")
        w = w.option(f"oncelog.test.{name}", value)
    q = w.option("checkpointLocation", args.checkpoint).trigger(availableNow=True).start()
    finished = q.awaitTermination(args.timeout)
    if not finished:
        print("eos_job: query did not finish in time", file=sys.stderr)
        q.stop()
        return 4
    if q.exception() is not None:
        print(f"eos_job: query failed: {q.exception()}", file=sys.stderr)
        return 3
    print(f"eos_job: done, batches={len(q.recentProgress)}", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
