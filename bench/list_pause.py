"""``python -m bench list-pause``: how long an oncelog broker leaves its other clients without an
answer while it answers an unfiltered ListTransactions.

Kafka's ListTransactions lists every transactional id a broker holds (a million, if clients made
them), as ``kafka-transactions.sh list`` asks. The bench creates ``--ids`` ids (InitProducerId
only: state Empty), then a probe in a process of its own (so that the lister's decoding of the
answer does not count) sends a Metadata request every 20 ms while this process asks for the
listing ``--listings`` times; it prints, per listing, the seconds the listing took and the
probe's slowest answer during it. ``--source-tree`` runs the broker from another checkout (before
and after)."""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import tempfile
import time

from oncelog.client.kafka import KafkaClient
from oncelog.process import BrokerProcess

from .txnids import create_ids, list_transactions

PROBE_EVERY_S = 0.02


def _probe(bootstrap: str, stop, out) -> None:
    client = KafkaClient(bootstrap)
    samples = []
    try:
        while not stop.is_set():
            t = time.monotonic()
            client.metadata([])
            samples.append((t, time.monotonic() - t))
            time.sleep(PROBE_EVERY_S)
    finally:
        client.close()
        out.put(samples)


def measure(bootstrap: str, listings: int) -> list[dict]:
    """Each listing's seconds, ids and the probe's slowest answer overlapping it."""
    stop, out = mp.Event(), mp.Queue()
    probe = mp.Process(target=_probe, args=(bootstrap, stop, out))
    probe.start()
    time.sleep(1)
    spans = []
    for _ in range(listings):
        start = time.monotonic()
        ids, seconds = list_transactions(bootstrap)
        spans.append((start, time.monotonic(), ids, seconds))
        time.sleep(1)
    stop.set()
    samples = out.get(timeout=60)
    probe.join(30)
    quiet = sorted(x for t, x in samples if t < spans[0][0])
    rows = []
    for start, end, ids, seconds in spans:
        during = [x for t, x in samples if t <= end and t + x >= start]
        rows.append({"ids": ids, "list_s": seconds, "slowest_answer_s": max(during) if during else None,
                     "answers_during": len(during), "quiet_p50_ms": quiet[len(quiet) // 2] * 1000 if quiet else None})
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench list-pause", description=__doc__.split("\n\n")[0])
    p.add_argument("--ids", type=int, default=300_000)
    p.add_argument("--listings", type=int, default=3)
    p.add_argument("--source-tree", default=None, help="run the broker from this checkout")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="oncelog-bench-list-pause-") as work:
        broker = BrokerProcess(os.path.join(work, "broker"), fsync="never", source_tree=args.source_tree).start()
        try:
            t0 = time.monotonic()
            asyncio.run(create_ids(broker.bootstrap, "listed", args.ids, committed=0, partitions=1, connections=32,
                                   in_flight=4))
            print(f"{args.ids:,} ids created in {time.monotonic() - t0:.1f} s (broker from "
                  f"{args.source_tree or 'this checkout'})", flush=True)
            for r in measure(broker.bootstrap, args.listings):
                print(f"  listed {r['ids']:,} in {r['list_s']:.1f} s; the probe's slowest answer meanwhile "
                      f"{r['slowest_answer_s']:.2f} s ({r['answers_during']} answers; p50 when quiet "
                      f"{r['quiet_p50_ms']:.1f} ms)", flush=True)
        finally:
            broker.kill()
    return 0
