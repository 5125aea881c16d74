"""The fuzz harnesses as tests: each runs in a subprocess, so an abort of the process fails the
test instead of killing pytest.

CI runs a short pass of every harness (tens of thousands of inputs, a few seconds each on a quiet
machine); ``ONCELOG_SOAK=full`` runs 1,000,000 inputs per harness (``slow``). A failure prints
the input (hex) and where libFuzzer wrote it; replay it with
``python -m tests.fuzz.<harness> <file>``, and add it to tests/protocol/test_guard.py once fixed.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEEDS = os.path.join(ROOT, "tests", "fuzz", "corpus", "requests")

HARNESSES = {
    # harness: (inputs in the CI pass, seed corpus directories)
    "fuzz_requests": (50_000, [SEEDS]),
    "fuzz_framing": (30_000, []),
    "fuzz_proxy": (20_000, []),  # the chaos fault proxy's frame reader and header parse
    # __consumer_offsets keys and consumer (KIP-848) group values, seeded with Kafka-written records
    "fuzz_consumer_records": (20_000, [os.path.join(ROOT, "tests", "fuzz", "corpus", "consumer_records")]),
    # the consumer protocol's subscription and assignment bytes inside JoinGroup / SyncGroup
    "fuzz_consumer_protocol": (20_000, []),
    # the metrics endpoint's HTTP request heads, Accept / Accept-Encoding negotiation included
    "fuzz_metrics_http": (20_000, []),
}


def run_harness(name: str, runs: int, tmp_path) -> None:
    work = tmp_path / "corpus"
    artifacts = tmp_path / "artifacts"
    work.mkdir()
    artifacts.mkdir()
    seeds = HARNESSES[name][1]
    cmd = [sys.executable, "-m", f"tests.fuzz.{name}", f"-runs={runs}", str(work), *seeds]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=3600,
                          env={**os.environ, "ONCELOG_FUZZ_ARTIFACTS": str(artifacts)})
    found = sorted(glob.glob(str(artifacts / "*")))
    if proc.returncode != 0 or found:
        inputs = "\n".join(f"{path}: {open(path, 'rb').read().hex()}" for path in found)
        pytest.fail(f"{name} failed (exit status {proc.returncode}); inputs:\n{inputs}\n"
                    f"--- output tail ---\n{proc.stderr[-6000:]}")
    assert f"Done {runs} runs" in proc.stderr, proc.stderr[-3000:]


@pytest.mark.parametrize("name", sorted(HARNESSES))
def test_fuzz_short_pass(name, tmp_path):
    run_harness(name, HARNESSES[name][0], tmp_path)


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("ONCELOG_SOAK") != "full", reason="1,000,000 inputs per harness: ONCELOG_SOAK=full")
@pytest.mark.parametrize("name", sorted(HARNESSES))
def test_fuzz_a_million_inputs(name, tmp_path):
    run_harness(name, 1_000_000, tmp_path)
