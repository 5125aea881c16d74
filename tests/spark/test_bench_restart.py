"""``python -m bench restart`` really restarts the demo's driver and times what it says.

Run as a user runs it (a subprocess, its own broker and Spark driver process groups) on a new
user cache (``XDG_CACHE_HOME``), as on a fresh machine: the first run has no class-data archive
of the driver JVM, records and writes one itself after its first batch (through its JVM's
DiagnosticCommand MBean, no ``jcmd``); the restart after a SIGKILL of its process group maps it
(the driver asks its JVM), reports its phases in order, the CPU it used by process kind (the JVM
and PySpark's worker modules among them, the task workers forked from the connector's daemon)
and when each process started; the JSON has the medians. Spark's own Kafka job is left out here
(``--no-spark-kafka``: it needs Maven Central and a PySpark 4.2.0 virtualenv). No figure is
asserted against a target: targets live in the benchmark's output (BENCHMARKS.md), not in tests.
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
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    done = subprocess.run([sys.executable, "-m", "bench", "restart", "--restarts", "1", "--no-hog", "--wave", "3000",
                           "--no-spark-kafka", "--json", str(out)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    r = json.loads(out.read_text())
    assert r["paths"] == ["oncelog"], r["paths"]
    first = r["first_run"]
    assert first["archive"] is False and " MB in " in first["archive_made"], first
    (archive,) = [f for f in os.listdir(tmp_path / "cache" / "oncelog") if f.endswith(".jsa")]
    assert archive.startswith("spark-driver-"), archive
    (run,) = r["restarts"]
    assert run["run"] == 2 and run["hog"] is False and run["path"] == "oncelog", run
    assert run["archive"] is True and run["archive_used"] is True, run
    assert 0 < run["session"] <= run["started"] < run["first batch"], run
    assert run["totals first batch"] > run["started"], run
    # The CPU of the restarted driver's process group, by kind: the JVM and PySpark's workers.
    assert run["cpu"]["jvm"] > 0 and run["cpu"].get("worker", 0) > 0, run["cpu"]
    assert {"python_streaming_source_runner", "plan_data_source_read"} <= set(run["cpu"]), run["cpu"]
    starts = {kind: t for t, kind, _cpu in reversed(run["processes"])}  # each kind's first start
    assert 0 <= starts["jvm"] < starts["plan_data_source_read"] < starts["worker"] < run["first batch"], starts
    assert r["medians"]["quiet"]["first batch"] == run["first batch"], r["medians"]
    assert "first committed micro-batch after a driver restart" in done.stdout, done.stdout[-2000:]


def test_the_restart_summary_compares_with_sparks_kafka_job_round_by_round():
    from bench.restart import summarize

    def run(path, rnd, hog, first):
        return {"path": path, "round": rnd, "hog": hog, "session": 1.0, "started": 2.0, "first batch": first,
                "totals first batch": first + 1}

    runs = [run("oncelog", 0, False, 8.0), run("spark-kafka", 0, False, 4.0),
            run("oncelog", 1, True, 12.0), run("spark-kafka", 1, True, 10.0),
            run("oncelog", 2, False, 6.0), run("spark-kafka", 2, False, 6.0)]
    s = summarize(runs, ["oncelog", "spark-kafka"], ["quiet", "hog"])
    assert s["medians"]["oncelog"]["quiet"]["first batch"] == 7.0
    assert s["medians"]["spark-kafka"]["quiet"]["first batch"] == 5.0
    quiet = s["ratios"]["oncelog"]["quiet"]
    assert quiet["of_medians"] == pytest.approx(1.4) and quiet["median_of_rounds"] == pytest.approx(1.5)
    assert s["ratios"]["oncelog"]["hog"]["of_medians"] == pytest.approx(1.2)
