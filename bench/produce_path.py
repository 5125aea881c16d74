"""In-process cost of the broker's Produce path: µs per Produce request (one partition, one
batch) through ``Broker.handle_frame`` — decode, authorize, validate, append, answer, encode —
on a broker with ``--fsync never``, for idempotent and plain batches. No sockets, no client:
what the broker's own code costs per request, without the noise of a shared machine's
scheduler that the end-to-end ``python -m bench`` cells carry.

Each source tree is measured in its own subprocess (PYTHONPATH = the tree), the trees taking
turns, min of 7 runs per cell, so old and new commits compare side by side::

    python -m bench.produce_path /tmp/old .      # a checkout of the old commit, this tree
"""

from __future__ import annotations

import os
import subprocess
import sys

CASES = [("idempotent 16 x 1 KiB", True, 16, 1024), ("idempotent 1 x 1 KiB", True, 1, 1024),
         ("plain 16 x 1 KiB", False, 16, 1024), ("idempotent 960 x 1 KiB", True, 960, 1024)]

_MEASURE = r"""
import asyncio, inspect, io, os, tempfile, time
from oncelog.broker import Broker
from oncelog.config.settings import BrokerConfig, FsyncPolicy
from oncelog.client.wire import produce_request, write_request
from oncelog.protocol import records as rb

def frame(request, correlation_id):
    buf = io.BytesIO()
    write_request(buf, request, correlation_id, "bench")
    return buf.getvalue()

async def main():
    tmp = tempfile.mkdtemp()
    b = Broker(BrokerConfig(data_dir=tmp, fsync=FsyncPolicy("never")))
    b.open()
    registry = b.metadata.topics if hasattr(b, "metadata") else b.logs
    ids = b.metadata.producer_ids if hasattr(b, "metadata") else b.producer_ids
    for name, idempotent, n, size in CASES:
        topic = name.replace(" ", "-")
        registry.create_topic(topic, 1)
        pid = ids.allocate() if idempotent else -1
        value = os.urandom(size // 2) + bytes(size - size // 2)
        reps = max(20, 4000 // n)
        frames = [frame(produce_request(topic, 0, rb.build_batch(
                      [(b"k", value)] * n, producer_id=pid, producer_epoch=0 if idempotent else -1,
                      base_sequence=i * n if idempotent else -1), acks=1), i) for i in range(reps * 8)]
        best, k = 1e9, 0
        for _ in range(8):  # the first is a warm-up
            t = time.perf_counter()
            for _ in range(reps):
                out = b.handle_frame(frames[k], "bench")
                if inspect.isawaitable(out):
                    await out
                k += 1
            best = min(best, (time.perf_counter() - t) / reps)
        # Every request appended (an error answer would be a faster path, not this one).
        appended = b.partitions.get(topic, 0).log.log_end_offset
        print(f"{name}\t{best * 1e6:.1f}\t{appended == k * n}")

asyncio.run(main())
"""


def measure(tree: str) -> dict[str, float]:
    code = f"CASES = {CASES!r}\n" + _MEASURE
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": os.path.abspath(tree)},
                         cwd=os.path.abspath(tree), capture_output=True, text=True, check=True).stdout
    results = {}
    for name, us, appended in (line.split("\t") for line in out.splitlines()):
        if appended != "True":
            raise RuntimeError(f"{tree}: {name}: not every measured request was appended")
        results[name] = float(us)
    return results


def main(trees: list[str], rounds: int = 3) -> None:
    runs: dict[str, list[dict[str, float]]] = {t: [] for t in trees}
    for _ in range(rounds):  # the trees take turns, so a busy moment hits both
        for tree in trees:
            runs[tree].append(measure(tree))
    best = {t: {name: min(r[name] for r in runs[t]) for name, *_ in CASES} for t in trees}
    print("µs per Produce request".ljust(26) + "".join(f"{os.path.basename(os.path.abspath(t)) or t:>14}"
                                                       for t in trees)
          + ("   ratio (last/first)" if len(trees) > 1 else ""))
    for name, *_ in CASES:
        row = [best[t][name] for t in trees]
        ratio = f"{row[-1] / row[0]:>12.2f}" if len(trees) > 1 else ""
        print(name.ljust(26) + "".join(f"{v:>14.1f}" for v in row) + ratio)


if __name__ == "__main__":
    main(sys.argv[1:] or ["."])
