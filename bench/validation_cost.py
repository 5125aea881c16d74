"""In-process cost of the Produce validation path: µs per batch of
``validation.scan`` + ``validation.validate`` (headers and CRC, then every record walked,
decompressed if needed), for batch shapes a producer sends.

Each source tree is measured in its own subprocess (PYTHONPATH = the tree), interleaved, min
of 7 runs per cell, so old and new commits compare side by side::

    python -m bench.validation_cost /tmp/old .      # a git worktree of the old commit, this tree
"""

from __future__ import annotations

import os
import subprocess
import sys

CASES = [("1 x 1 KiB", 1, 1024, 0), ("16 x 1 KiB", 16, 1024, 0), ("960 x 1 KiB", 960, 1024, 0),
         ("16 x 1 KiB lz4", 16, 1024, 3), ("960 x 1 KiB lz4", 960, 1024, 3),
         ("16 x 1 KiB zstd", 16, 1024, 4), ("960 x 1 KiB zstd", 960, 1024, 4), ("1000 x 100 B", 1000, 100, 0)]

_MEASURE = r"""
import os, struct, sys, time
import crc32c
from oncelog.partition import validation
from oncelog.protocol import records as rb
from oncelog.config.settings import LogConfig
cfg, now = LogConfig(), 1_795_644_186_346
def batch(n, size, codec):
    value = os.urandom(size // 2) + bytes(size - size // 2)
    body = b"".join(rb.encode_record(i, i % 5, None, value) for i in range(n))
    if codec:
        body = rb.compress_records(codec, body)
    tail = struct.pack(">hiqqqhii", codec, n - 1, now, now, -1, -1, -1, n) + body
    return struct.pack(">qiibI", 0, len(tail) + 9, 0, 2, crc32c.crc32c(tail)) + tail
for name, n, size, codec in CASES:
    data = batch(n, size, codec)
    reps, best = max(5, 3000 // n), 1e9
    for _ in range(7):
        t = time.perf_counter()
        for _ in range(reps):
            b = validation.scan(data, cfg, name="t-0")
            validation.validate(data, b, cfg, acks=1, now_ms=now, name="t-0", node_id=1)
        best = min(best, (time.perf_counter() - t) / reps)
    print(f"{name}\t{best * 1e6:.1f}")
"""


def measure(tree: str) -> dict[str, float]:
    code = f"CASES = {CASES!r}\n" + _MEASURE
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": os.path.abspath(tree)},
                         cwd=os.path.abspath(tree), capture_output=True, text=True, check=True).stdout
    return {name: float(us) for name, us in (line.split("\t") for line in out.splitlines())}


def main(trees: list[str]) -> None:
    results = {tree: measure(tree) for tree in trees}
    print("batch".ljust(20) + "".join(f"{os.path.basename(os.path.abspath(t)) or t:>16}" for t in trees)
          + ("      ratio (last/first)" if len(trees) > 1 else ""))
    for name, n, _, _ in CASES:
        row = [results[t][name] for t in trees]
        ratio = f"{row[-1] / row[0]:>10.1f}x" if len(trees) > 1 else ""
        print(name.ljust(20) + "".join(f"{us:>13.1f} µs" for us in row) + ratio)


if __name__ == "__main__":
    main(sys.argv[1:] or ["."])
