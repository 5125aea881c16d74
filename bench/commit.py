"""``python -m bench commit``: what the exactly-once sink's driver-side commit costs per batch, and
what waiting for CompleteCommit before ending the barrier adds to it.

No Spark: the batch commit protocol (:class:`oncelog.spark.batch_commit.CommitProtocol`) driven
directly, as the driver runs it. Each batch: ``--tasks`` task transactions from the pool
(``<prefix>-g0-<task>-0``, InitProducerId, one small record batch each on a partition of its own
and one on a shared partition), the visibility barrier opened before them, then ``commit()``:
the decision, the EndTxns, the wait for CompleteCommit (or not), done, the barrier's abort, the
sweep. Timed: ``commit()`` alone. Modes alternate batch by batch (``wait`` / ``no-wait``), on an
oncelog broker (``--fsync``) and on Apache Kafka (one node, full JIT, from the user's cache),
in the same run; medians and p99 per mode, the difference of the medians is the wait's cost.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

from rich.console import Console
from rich.table import Table

TARGETS = {"oncelog": "oncelog broker", "apache-kafka": "Apache Kafka (1 node)"}


def _one_batch(client, bootstrap: str, topic: str, prefix: str, batch_id: int, tasks: int, wait: bool) -> float:
    import pyarrow as pa

    from oncelog.client.kafka import TransactionalProducer
    from oncelog.client.recordcodec import encode_batch, encode_records
    from oncelog.spark.barrier import open_barrier
    from oncelog.spark.batch_commit import CommitProtocol, Txn

    barrier = open_barrier(client, prefix, topic, 60_000)
    txns = []
    for task in range(tasks):
        p = TransactionalProducer(client, f"{prefix}-g0-{task}-0", 60_000)
        p.init()
        for part in (task % tasks, tasks):  # a partition of its own and a shared one
            p.add_partitions([(topic, part)])
            recs = encode_records(None, pa.array([b"x" * 100] * 10, pa.binary()), None)
            p.send(topic, part, encode_batch(recs, 10, timestamp_ms=int(time.time() * 1000), producer_id=p.producer_id,
                                             producer_epoch=p.producer_epoch,
                                             base_sequence=p.next_sequence(topic, part, 10), transactional=True), 10)
        p.flush()
        p.close()
        txns.append(Txn(p.transactional_id, p.producer_id, p.producer_epoch))
    proto = CommitProtocol(client, bootstrap, f"{topic}-commits", prefix, 60_000, await_complete=wait)
    try:
        t0 = time.perf_counter()
        outcome = proto.commit(batch_id, txns, "bench", 10 * 2 * tasks, barrier=barrier)
        took = time.perf_counter() - t0
    finally:
        proto.close()
    assert outcome == "committed", outcome
    return took * 1000


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench commit", description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", type=int, default=200, help="batches per mode and target")
    ap.add_argument("--tasks", type=int, default=3, help="task transactions per batch")
    ap.add_argument("--fsync", default="always", help="oncelog broker --fsync policy (the demo's: always)")
    ap.add_argument("--targets", default="oncelog,apache-kafka")
    args = ap.parse_args(sys.argv[2:] if argv is None else argv)
    console = Console() if sys.stdout.isatty() else Console(width=140)
    from confluent_kafka.admin import AdminClient, NewTopic

    from oncelog.client.kafka import KafkaClient
    from oncelog.process import BrokerProcess

    work = tempfile.mkdtemp(prefix="oncelog-bench-commit-")
    results: dict[tuple[str, str], list[float]] = {}
    try:
        for target in [t.strip() for t in args.targets.split(",") if t.strip()]:
            if target == "oncelog":
                cluster = BrokerProcess(os.path.join(work, "broker"), fsync=args.fsync).start()
            else:
                from oncelog.tools.apache_kafka import KafkaCluster

                cluster = KafkaCluster(nodes=1, workdir=os.path.join(work, "kafka"), quick_start=False, heap="1g").start()
            try:
                bootstrap = cluster.bootstrap
                admin = AdminClient({"bootstrap.servers": bootstrap})
                topic = "bench-commit"
                admin.create_topics([NewTopic(topic, args.tasks + 1, 1)])[topic].result(timeout=60)
                client = KafkaClient(bootstrap)
                prefix = f"bench-{target}"
                for i in range(5):  # warm-up: coordinators loaded, connections open, the JIT
                    _one_batch(client, bootstrap, topic, prefix, i, args.tasks, True)
                for b in range(args.batches * 2):
                    wait = b % 2 == 0
                    ms = _one_batch(client, bootstrap, topic, prefix, 5 + b, args.tasks, wait)
                    results.setdefault((target, "wait" if wait else "no-wait"), []).append(ms)
                client.close()
            finally:
                if isinstance(cluster, BrokerProcess):
                    cluster.kill()
                else:
                    cluster.stop(graceful=False)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    table = Table(title=f"commit() of a batch of {args.tasks} task transactions, {args.batches} batches per cell, "
                        f"modes alternating (oncelog --fsync {args.fsync})")
    for col in ("target", "mode", "p50 ms", "p90 ms", "p99 ms"):
        table.add_column(col, justify="right" if col.endswith("ms") else "left")
    for (target, mode), v in results.items():
        q = statistics.quantiles(v, n=100)
        table.add_row(TARGETS.get(target, target), mode, f"{statistics.median(v):.1f}", f"{q[89]:.1f}", f"{q[98]:.1f}")
    console.print(table)
    for target in {t for t, _m in results}:
        w, n = results.get((target, "wait")), results.get((target, "no-wait"))
        if w and n:
            console.print(f"{TARGETS.get(target, target)}: waiting for CompleteCommit costs "
                          f"{statistics.median(w) - statistics.median(n):+.1f} ms per batch at the median "
                          f"({statistics.median(w) / statistics.median(n):.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
