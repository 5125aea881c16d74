"""What a broker process imports to start: nothing it only needs for some requests.

The tests start hundreds of broker processes, and ``oncelog.testing`` promises a broker within a second;
each library a start imports for nothing is paid every time (measured with ``-X importtime``:
numpy ~0.13 s, used only to walk batches of 40 records or more; scramp with asn1crypto and
importlib.metadata ~0.04 s, used only by a SCRAM exchange; kio's hypothesis strategies ~0.4 s,
used by no server). A real ``serve`` runs with ``-X importtime`` until it listens, then stops; its
modules are read from what it printed."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.e2e

# Imported on first use, never by a start: what each is for.
LAZY = {
    "numpy": "the bulk walk of large batches (oncelog.protocol.records)",
    "scramp": "SCRAM exchanges (oncelog.security.sasl)",
    "hypothesis": "kio's strategies, for examples no server draws (cli.keep_hypothesis_out)",
    "pyarrow": "the Spark connector",
    "pyspark": "the Spark connector",
    "confluent_kafka": "the client side",
}


def test_a_broker_start_imports_none_of_the_lazy_libraries(tmp_path):
    cmd = [sys.executable, "-X", "importtime", "-m", "oncelog", "serve", "--data-dir", str(tmp_path / "data"),
           "--port", "0", "--nodes", "1", "--fsync", "never"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=open(tmp_path / "imports.txt", "wb"))
    try:
        deadline = time.monotonic() + 60
        while b"oncelog listening on" not in proc.stdout.readline():
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "imports.txt").read_text()[-3000:]
    finally:
        proc.terminate()
        proc.wait(30)
    imported = set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", (tmp_path / "imports.txt").read_text(), re.M))
    assert "oncelog.broker" in imported and "asyncio" in imported  # the list is the start's
    # (exact names: a package imported prints its own line; ``hypothesis.strategies`` alone is kio's
    # attempt, refused by keep_hypothesis_out, which -X importtime lists too)
    assert not imported & set(LAZY), {name: LAZY[name] for name in imported & set(LAZY)}
