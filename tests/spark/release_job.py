"""A driver for tests/spark/test_sink_release.py, in its own process group: starts a query
writing through the exactly-once sink whose write tasks hold their transactions open for a
while (``oncelog.test.taskDelayMs``), waits until one is open (the middle of a micro-batch),
then ends as ``--end`` says:

* ``spark-stop``: ``spark.stop()`` with the query running, then stays alive (``--linger`` s),
  so what releases the transactions is the stop, not the process's exit;
* ``exit``: returns from ``main`` with the query running (a normal interpreter exit).

Prints ``open <prefix>`` when it saw the transaction open and ``ending <time>`` just before the
end, so the test can time the release from then.
"""

import argparse
import json
import os
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--path", choices=["stream", "foreachBatch"], default="stream")
    ap.add_argument("--end", choices=["spark-stop", "exit"], required=True)
    ap.add_argument("--linger", type=float, default=30.0)
    ap.add_argument("--java-options", default="")
    args = ap.parse_args()
    from oncelog.client.kafka import KafkaClient
    from oncelog.spark.session import local_session

    spark = local_session("local[2]", app_name="oncelog-release-job", java_options=args.java_options)
    src = (spark.readStream.format("oncelog").option("kafka.bootstrap.servers", args.bootstrap)
           .option("subscribe", args.input).option("startingOffsets", "earliest")
           .option("maxOffsetsPerTrigger", 30).load().selectExpr("key", "value"))
    if args.path == "stream":
        q = (src.writeStream.format("oncelog").option("kafka.bootstrap.servers", args.bootstrap)
             .option("topic", args.output).option("oncelog.test.taskDelayMs", 4000)
             .option("checkpointLocation", args.checkpoint).trigger(processingTime="200 milliseconds").start())
        with open(os.path.join(args.checkpoint, "metadata")) as f:
            prefix = "oncelog-" + json.loads(f.readline())["id"]
    else:
        prefix = "oncelog-release-job"

        def write(batch_df, batch_id):
            (batch_df.write.format("oncelog").option("kafka.bootstrap.servers", args.bootstrap)
             .option("topic", args.output).option("txnAppId", "release-job").option("txnVersion", batch_id)
             .option("oncelog.test.taskDelayMs", 4000).mode("append").save())

        q = (src.writeStream.foreachBatch(write).option("checkpointLocation", args.checkpoint)
             .trigger(processingTime="200 milliseconds").start())
    client = KafkaClient(args.bootstrap)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if q.exception() is not None:
            print(f"query failed: {q.exception()}", flush=True)
            return 3
        if any(s == "Ongoing" and t.startswith(prefix + "-g") for t, _p, s in client.list_transactions()):
            break
        time.sleep(0.1)
    else:
        print("no task transaction opened", flush=True)
        return 4
    print(f"open {prefix}", flush=True)
    print(f"ending {time.time()}", flush=True)
    if args.end == "spark-stop":
        spark.stop()
        print(f"stopped {time.time()}", flush=True)
        time.sleep(args.linger)
    return 0


if __name__ == "__main__":
    sys.exit(main())
