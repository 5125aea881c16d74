"""``python -m bench restart`` really restarts the demo's driver and times what it says.

Run as a user runs it (a subprocess, its own broker and Spark driver process groups), one restart
on a quiet machine: the driver run after a SIGKILL of its process group reports its phases in
order, the CPU it used by process kind (the JVM and PySpark's worker modules among them), and the
JSON has the medians. No figure is asserted against a target: targets live in the benchmark's
output (BENCHMARKS.md), not in tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_bench_restart_times_a_restart_of_the_demos_driver(tmp_path):
    out = tmp_path / "restart.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK")}
    done = subprocess.run([sys.executable, "-m", "bench", "restart", "--restarts", "1", "--no-hog", "--wave", "3000",
                           "--json", str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    r = json.loads(out.read_text())
    (run,) = r["restarts"]
    assert run["run"] == 2 and run["hog"] is False, run
    assert 0 < run["session"] <= run["started"] < run["first batch"], run
    assert run["totals first batch"] > run["started"], run
    # The CPU of the restarted driver's process group, by kind: the JVM and PySpark's workers.
    assert run["cpu"]["jvm"] > 0 and run["cpu"].get("worker", 0) > 0, run["cpu"]
    assert {"python_streaming_source_runner", "plan_data_source_read"} <= set(run["cpu"]), run["cpu"]
    assert r["medians"]["quiet"]["first batch"] == run["first batch"], r["medians"]
    assert "first committed micro-batch after a driver restart" in done.stdout, done.stdout[-2000:]
