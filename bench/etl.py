"""A group's exactly-once ETL, oncelog (one node and a cluster of nodes) against Apache Kafka:
``python -m bench.etl``.

The job every Kafka user writes: consume an input topic in a consumer group, transform each
record, produce the results and commit the group's offsets in the same transaction
(``send_offsets_to_transaction``), with independent clients (confluent-kafka). Per target:

1. a fresh broker (oncelog with ``--nodes 1`` or ``--nodes N``, ``--fsync never`` or ``always``;
   Apache Kafka 4.4 with its defaults or ``flush.messages=1``: the durability pairs of
   ``bench --suite kafka``);
2. the input topic preloaded with ``--records`` records of ``--size`` bytes (idempotent
   producer; not timed); the input and output topics have ``--partitions`` partitions;
3. timed: ``--workers`` processes, each a member of one group with its own transactional
   producer, consume -> transform (the value upper-cased) -> produce -> send the offsets ->
   commit, a transaction per poll of up to ``--batch`` records, until the group has consumed
   every record;
4. checked: an independent read_committed reader counts the output; every input record must be
   there exactly once (by key), else the run fails.

Targets run in turn, ``--rounds`` times with the order rotated; the table gives each target's
seconds (median), records/s, and its ratio to Kafka with the same durability.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid

TARGETS = ("oncelog-never", "oncelog-never-nodes", "kafka", "oncelog-always", "oncelog-always-nodes", "kafka+flush1")
PAIR = {"oncelog-never": "kafka", "oncelog-never-nodes": "kafka", "oncelog-always": "kafka+flush1",
        "oncelog-always-nodes": "kafka+flush1"}


def _worker(bootstrap: str, group: str, src: str, dst: str, worker: int, total: int, batch: int, consumed, start,
            done) -> None:
    import confluent_kafka as ck

    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                            "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                            "fetch.wait.max.ms": 50})
    producer = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{group}-w{worker}",
                            "linger.ms": 5})
    producer.init_transactions(60)
    consumer.subscribe([src])
    start.wait()
    while consumed.value < total:
        msgs = consumer.consume(batch, 0.1)
        msgs = [m for m in msgs if m.error() is None]
        if not msgs:
            continue
        producer.begin_transaction()
        for m in msgs:
            producer.produce(dst, key=m.key(), value=m.value().upper(), partition=m.partition())
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                             consumer.consumer_group_metadata(), 60)
        producer.commit_transaction(60)
        with consumed.get_lock():
            consumed.value += len(msgs)
    done.set()
    consumer.close()


def _preload(bootstrap: str, topic: str, records: int, size: int, partitions: int) -> None:
    import confluent_kafka as ck

    p = ck.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 20,
                     "batch.size": 1 << 20, "queue.buffering.max.messages": 1_000_000})
    value = b"x" * size
    for i in range(records):
        while True:
            try:
                p.produce(topic, key=str(i).encode(), value=value, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.05)
    left = p.flush(300)
    if left:
        raise RuntimeError(f"preload: {left} records not acknowledged")


def _count_output(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 300) -> tuple[int, int]:
    """(distinct keys, records) read at read_committed from every partition."""
    import confluent_kafka as ck

    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:6]}",
                     "enable.auto.commit": False, "isolation.level": "read_committed",
                     "auto.offset.reset": "earliest"})
    c.assign([ck.TopicPartition(topic, p, 0) for p in range(partitions)])
    keys, count = set(), 0
    deadline = time.monotonic() + timeout
    idle = 0
    while time.monotonic() < deadline and idle < 20:
        msgs = c.consume(10000, 0.5)
        got = [m for m in msgs if m.error() is None]
        if not got:
            idle += 1 if count >= expected else 0
            continue
        idle = 0
        for m in got:
            keys.add(m.key())
        count += len(got)
    c.close()
    return len(keys), count


def _create(bootstrap: str, names: list[str], partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(n, partitions, 1) for n in names]).values():
        f.result(60)
    time.sleep(1.0)  # every node has followed the controller


class _Broker:
    def __init__(self, target: str, work: str, nodes: int, partitions: int) -> None:
        self.target, self.work, self.nodes, self.partitions = target, work, nodes, partitions
        self.handle = None

    def __enter__(self) -> str:
        if self.target.startswith("kafka"):
            from . import kafka as bk

            self.handle = bk.start(self.target == "kafka+flush1", self.work, self.partitions)
            return self.handle.bootstrap
        from oncelog.process import BrokerProcess

        fsync = "always" if "always" in self.target else "never"
        nodes = self.nodes if self.target.endswith("-nodes") else 1
        self.handle = BrokerProcess(os.path.join(self.work, self.target), fsync=fsync, nodes=nodes).start(120)
        return self.handle.bootstrap

    def __exit__(self, *exc) -> None:
        if self.target.startswith("kafka"):
            self.handle.stop(graceful=False)
        else:
            self.handle.kill()


def run_target(target: str, args, work: str) -> dict:
    src, dst, group = f"etl-in-{uuid.uuid4().hex[:6]}", f"etl-out-{uuid.uuid4().hex[:6]}", f"etl-{uuid.uuid4().hex[:6]}"
    with _Broker(target, work, args.nodes, args.partitions) as bootstrap:
        _create(bootstrap, [src, dst], args.partitions)
        _preload(bootstrap, src, args.records, args.size, args.partitions)
        ctx = mp.get_context("spawn")
        consumed, start = ctx.Value("q", 0), ctx.Event()
        dones = [ctx.Event() for _ in range(args.workers)]
        procs = [ctx.Process(target=_worker, args=(bootstrap, group, src, dst, w, args.records, args.batch, consumed,
                                                   start, dones[w]), daemon=True) for w in range(args.workers)]
        for p in procs:
            p.start()
        time.sleep(3.0)  # every worker has joined and initialized its transactions
        t0 = time.monotonic()
        start.set()
        deadline = t0 + args.timeout
        while consumed.value < args.records and time.monotonic() < deadline:
            time.sleep(0.01)
        seconds = time.monotonic() - t0
        finished = consumed.value >= args.records
        for p in procs:
            p.join(30)
            if p.is_alive():
                p.kill()
        keys, count = _count_output(bootstrap, dst, args.partitions, args.records) if finished else (0, 0)
    return {"target": target, "seconds": seconds, "finished": finished, "distinct": keys, "records": count,
            "exactly_once": finished and keys == args.records and count == args.records}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.etl", description=__doc__.split("\n\n")[0])
    ap.add_argument("--targets", default=",".join(TARGETS), help=f"comma-separated: {', '.join(TARGETS)}")
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--size", type=int, default=200, help="value bytes per record (default 200)")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=2000, help="records per poll, one transaction each")
    ap.add_argument("--nodes", type=int, default=2, help="the cluster targets' node count (default 2)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--json", default=None, help="write the results here")
    args = ap.parse_args(argv)
    targets = [t for t in args.targets.split(",") if t]
    unknown = set(targets) - set(TARGETS)
    if unknown:
        ap.error(f"unknown targets: {sorted(unknown)}")
    work = tempfile.mkdtemp(prefix="bench-etl-")
    results: list[dict] = []
    print(f"load average at start: {os.getloadavg()[0]:.2f}; {args.records:,} records of {args.size} B, "
          f"{args.partitions} partitions, {args.workers} workers, {args.batch} records per transaction", flush=True)
    try:
        for r in range(args.rounds):
            order = targets[r % len(targets):] + targets[:r % len(targets)]
            for target in order:
                res = run_target(target, args, work)
                res["round"] = r
                results.append(res)
                print(f"round {r + 1} {target:22s} {res['seconds']:7.2f} s  exactly once: {res['exactly_once']} "
                      f"({res['distinct']:,} keys, {res['records']:,} records)", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    med = {t: statistics.median([x["seconds"] for x in results if x["target"] == t]) for t in targets}
    print("\n| target | seconds (median) | records/s | time / Kafka's (same durability) | exactly once |")
    print("|---|--:|--:|--:|---|")
    for t in targets:
        pair = PAIR.get(t)
        ratio = f"{med[t] / med[pair]:.2f}×" if pair in med else ""
        ok = all(x["exactly_once"] for x in results if x["target"] == t)
        print(f"| {t} | {med[t]:.2f} | {args.records / med[t]:,.0f} | {ratio} | {'yes' if ok else 'NO'} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "results": results}, f, indent=1)
    return 0 if all(x["exactly_once"] for x in results) else 1


if __name__ == "__main__":
    sys.exit(main())
