"""The record-batch validator under fuzzing: the atheris harness
(tests/fuzz/fuzz_batches.py) in a subprocess — a short pass in CI, ≥ 1,000,000 inputs under
``slow`` — and hypothesis properties in-process: any mutation of a valid batch (with its CRC
rewritten or not) is either refused with a domain error or accepted and read back the same by a
consumer's parser (kafka-python's), never another exception.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from oncelog import errors
from oncelog.partition import validation
from oncelog.protocol import records as rb
from oncelog.config.settings import LogConfig
from tests.fuzz import fuzz_batches as harness

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _fuzz(runs: int, timeout: float) -> str:
    proc = subprocess.run([sys.executable, "-m", "tests.fuzz.fuzz_batches", f"-runs={runs}", "-seed=1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert re.search(rf"Done {runs} runs", out), out[-3000:]
    return out


@pytest.mark.e2e
def test_fuzz_batches_short_pass():
    _fuzz(50_000, timeout=300)


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("ONCELOG_SOAK") != "full", reason="1,000,000 inputs: ONCELOG_SOAK=full "
                    "(docs/limits.md: CI runs the short pass, as the other harnesses)")
def test_fuzz_batches_a_million_inputs():
    _fuzz(1_000_000, timeout=3600)


# ------------------------------------------------------------------ hypothesis

SEEDS = sorted(os.listdir(harness.SEEDS))
CONFIGS = [LogConfig(), LogConfig(cleanup_policy="compact"), LogConfig(max_message_bytes=2000)]


def _seed(name: str) -> bytes:
    with open(os.path.join(harness.SEEDS, name), "rb") as f:
        return f.read()


@st.composite
def mutated(draw):
    data = bytearray(_seed(draw(st.sampled_from(SEEDS))))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "set", "insert", "delete", "truncate", "varint"]))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "flip" and data:
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set" and data:
            data[at] = draw(st.integers(0, 255))
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            del data[at : at + draw(st.integers(1, 8))]
        elif kind == "truncate":
            del data[at:]
        elif kind == "varint":  # a length-like value where lengths live: past the header
            data[at:at] = rb._varint(draw(st.sampled_from([-2, -1, 0, 1, 63, 64, 2**31 - 1, -(2**31)])))
    return bytes(harness.fix_crcs(bytes(data)) if draw(st.booleans()) else data)


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=mutated(), config=st.sampled_from(CONFIGS))
def test_a_mutated_batch_is_refused_with_a_domain_error_or_read_back_the_same(data, config):
    try:
        batches = validation.scan(data, config, name="t-0")
        validation.validate(data, batches, config, acks=1, now_ms=harness.NOW_MS, name="t-0", node_id=1)
    except errors.KafkaError as exc:
        assert errors.error_code_for(exc).name != "unknown_server_error"
        return
    for header in batches:
        metas: list = []
        rb.check_records(data, header, limit=rb.decompressed_limit(config.max_message_bytes), metas=metas)
        harness.consumer_agrees(data, header, metas)


def test_every_seed_of_a_real_client_is_accepted():
    for name in SEEDS:
        if not name.startswith("bad-"):
            data = _seed(name)
            batches = validation.scan(data, LogConfig(), name="t-0")
            validation.validate(data, batches, LogConfig(), acks=1, now_ms=batches[0].max_timestamp, name="t-0",
                                node_id=1)
