"""The main job until the Spark pipeline exists: start a broker, produce a sample with
confluent-kafka, read it back, and report what happened."""

from __future__ import annotations

import os
import shutil
import tempfile
import time

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.table import Table

from .process import BrokerProcess


def run(args) -> int:
    console = Console()
    data_dir = args.data_dir or tempfile.mkdtemp(prefix="oncelog-demo-")
    broker = BrokerProcess(os.path.join(data_dir, "broker"), fsync="always")
    console.print(f"[bold]oncelog demo[/]: starting a broker with data in {broker.data_dir}")
    broker.start()
    try:
        return _exercise(console, broker, args.records)
    finally:
        broker.stop()
        if not args.data_dir:
            shutil.rmtree(data_dir, ignore_errors=True)


def _exercise(console: Console, broker: BrokerProcess, n: int) -> int:
    bootstrap = broker.bootstrap
    console.print(f"broker listening on {bootstrap}")
    topic = "demo"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # keep a reference until the result arrives
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(30)
    producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                            "compression.type": "lz4"})
    acked = 0
    errors = []

    def on_delivery(err, msg):
        nonlocal acked
        if err:
            errors.append(err)
        else:
            acked += 1

    t0 = time.perf_counter()
    for i in range(n):
        producer.produce(topic, key=f"user-{i % 100}".encode(), value=f"event {i}".encode(),
                         headers=[("seq", str(i).encode())], on_delivery=on_delivery)
        producer.poll(0)
    producer.flush(60)
    produce_s = time.perf_counter() - t0

    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "demo-reader",
                            "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign([ck.TopicPartition(topic, p, 0) for p in range(3)])
    per_partition: dict[int, list[int]] = {0: [], 1: [], 2: []}
    t0 = time.perf_counter()
    got = 0
    while got < acked and time.perf_counter() - t0 < 60:
        for m in consumer.consume(10000, 0.5):
            if m.error():
                errors.append(m.error())
                continue
            per_partition[m.partition()].append(int(dict(m.headers())["seq"]))
            got += 1
    consume_s = time.perf_counter() - t0
    consumer.close()

    in_order = all(seqs == sorted(seqs) for seqs in per_partition.values())
    unique = len({s for seqs in per_partition.values() for s in seqs})
    table = Table(title="what happened")
    table.add_column("step")
    table.add_column("result", justify="right")
    table.add_row("records produced (acks=all, fsync always)", f"{acked:,} of {n:,}")
    table.add_row("produce rate", f"{acked / produce_s:,.0f} records/s")
    table.add_row("records read back", f"{got:,} ({unique:,} distinct)")
    table.add_row("consume rate", f"{got / max(consume_s, 1e-9):,.0f} records/s")
    for p, seqs in per_partition.items():
        table.add_row(f"partition {p}", f"{len(seqs):,} records, in send order: {seqs == sorted(seqs)}")
    console.print(table)
    ok = not errors and acked == n and got == n and unique == n and in_order
    console.print("[green]OK[/]: every record read back once, in order per partition" if ok
                  else f"[red]FAILED[/]: {errors[:3]}")
    return 0 if ok else 1
