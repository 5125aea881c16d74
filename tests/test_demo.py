"""``oncelog demo`` end to end, run as a user runs it: a subprocess from outside the repository,
with no PYSPARK_* variables set (the demo must point Spark's Python workers at its own
interpreter). Everything is real: a broker process, a Spark driver process group that is
SIGKILLed and restarted from its checkpoints, a broker SIGKILL and restart, a write task that
dies and is retried; the verdict comes from the auditor and a ground truth recomputed from the
committed input, read from the report JSON the demo writes.

Scale: 20k events here (each driver restart costs 15-45 s of JVM and Python worker start-up on
a 2-core machine, whatever the record count); ``ONCELOG_SOAK=full`` runs the default 200k.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e  # starts processes

FULL = os.environ.get("ONCELOG_SOAK") == "full"


def run_demo(tmp_path, *args: str, timeout: float) -> tuple[int, str, dict]:
    report = tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK")}
    cmd = [sys.executable, "-m", "oncelog", "demo", "--data-dir", str(tmp_path / "data"), "--report", str(report),
           *args]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop_demo(proc, tmp_path)
        raise AssertionError(f"the demo did not finish in {timeout}s\n{driver_log(tmp_path)}") from None
    assert report.exists(), f"no report (exit {proc.returncode}):\n{out[-3000:]}\n{driver_log(tmp_path)}"
    return proc.returncode, out, json.loads(report.read_text())


def stop_demo(proc: subprocess.Popen, tmp_path) -> None:
    """SIGTERM (the demo then stops its driver and broker), then SIGKILL whatever of this test's
    processes is left: the demo's group, and processes naming this test's directory (the broker,
    the Spark driver, which leads a session of its own)."""
    proc.terminate()
    try:
        proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    for pid in [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if str(tmp_path).encode() in cmdline:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    proc.wait()


def assert_plain_screen(out: str, report: dict) -> None:
    """What the demo printed, and its timeline, hold no traceback: recovery lines say the cause in
    one line (oncelog.pipeline.causes) and the demo ends by naming the run's log directory."""
    from tests.test_causes import TRACEBACK_FRAGMENTS, assert_no_traceback

    for fragment in TRACEBACK_FRAGMENTS:
        assert fragment not in out, f"{fragment!r} on the screen:\n{out[-3000:]}"
    for event in report["timeline"]:
        assert "\n" not in event["text"] and not any(f in event["text"] for f in TRACEBACK_FRAGMENTS), event
        if event["kind"] == "query-failed":
            assert_no_traceback(event["text"].split(": ", 1)[1])  # "query X failed: <cause>"
    assert "logs of this run:" in out, out[-2000:]


def driver_log(tmp_path, lines: int = 40) -> str:
    path = tmp_path / "data" / "driver.log"
    if not path.exists():
        return ""
    return "driver.log:\n" + "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


@pytest.mark.slow
def test_demo_exactly_once_through_driver_and_broker_kills(tmp_path):
    records = 200_000 if FULL else 20_000
    plot = tmp_path / "rows.png"
    rc, out, r = run_demo(tmp_path, "--records", str(records), "--driver-kills", "3", "--broker-kills", "1",
                          "--produce-seconds", "40" if FULL else "20", "--plot", str(plot),
                          timeout=900 if FULL else 420)
    context = f"{json.dumps({k: v for k, v in r.items() if k != 'timeline'}, indent=1)[:4000]}\n{out[-2500:]}"
    assert rc == 0, context
    assert r["exactly_once"] is True, context
    # The auditor: every committed input once in the enriched output, nothing from aborted input.
    assert (r["lost"], r["duplicated"], r["aborted_reads"], r["phantom"]) == (0, 0, 0, 0), context
    assert r["input_records"] == r["output_records"] == r["ground_truth"]["committed"], context
    gen = r["generator"]
    assert r["input_records"] == gen["committed"], context  # what the generator committed, as the log has it
    assert r["aborted_input_records"] >= gen["aborted_on_purpose"] > 0, context  # aborted records really in the log
    # The aggregates equal the ground truth, and no batch was written twice.
    assert r["aggregates_match"] is True and r["aggregates"]["ok"], context
    assert r["aggregates"]["matching"] == r["aggregates"]["expected_keys"] > 100, context
    assert r["aggregate_duplicate_writes"] == 0, context
    gt = r["ground_truth"]
    assert gt["late_kept"] > 0 and gt["late_dropped_by_watermark"] > 0 and gt["invalid"] > 0, context
    assert gt["ambiguous"] == 0, context
    # The chaos really happened, and the pipeline recovered from each crash.
    assert (r["driver_kills"], r["broker_kills"], r["task_failures"]) == (3, 1, 1), context
    assert r["driver_runs"] >= 4, context
    assert r["recoveries"] >= 4, context
    kills = [e for e in r["timeline"] if e["kind"] == "driver-kill"]
    assert len(kills) == 3 and all("processes" in e["text"] for e in kills), context
    assert r["master"] == "local[2,3]" and r["seconds"] > 0, context
    # on serve's default shape: a node process per core (here 2), all killed and restarted together
    from oncelog.cluster import default_nodes

    assert r["cluster"]["nodes"] == default_nodes(str(tmp_path / "fresh")), context
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "exactly once" in out
    assert_plain_screen(out, r)
    # Freshness: every enriched record timed from its input's produce call to read_committed
    # visibility; the last wave went in after the pipeline caught up, with no crash in the way.
    fr = r["freshness"]
    assert fr["samples"] == r["output_records"], context
    assert any(e["kind"] == "calm" for e in r["timeline"]), context
    assert fr["between_crashes_samples"] > 0 and fr["between_crashes_ms"]["p50"] > 0, context
    assert fr["between_crashes_ms"]["p95"] <= fr["all_ms"]["p95"], context
    assert "freshness between crashes" in out, out[-3000:]


def test_demo_at_least_once_shows_the_duplicates(tmp_path):
    """The same pipeline with at-least-once sinks: a driver SIGKILL and the retried task make
    Spark write rows again, the auditor counts them, and the demo fails. On one broker process
    (``--nodes 1``): the exactly-once run above takes serve's default, a node per core."""
    rc, out, r = run_demo(tmp_path, "--records", "20000", "--driver-kills", "1", "--broker-kills", "0",
                          "--produce-seconds", "15", "--delivery-guarantee", "at-least-once", "--nodes", "1",
                          timeout=300)
    context = f"{json.dumps({k: v for k, v in r.items() if k != 'timeline'}, indent=1)[:4000]}\n{out[-2500:]}"
    assert rc == 1, context
    assert r["exactly_once"] is False and r["delivery_guarantee"] == "at-least-once", context
    assert r["duplicated"] > 0, context
    assert r["output_records"] == r["input_records"] + r["duplicated"], context
    # Duplicates, but nothing lost and nothing from an aborted transaction: at-least-once.
    assert (r["lost"], r["aborted_reads"], r["phantom"]) == (0, 0, 0), context
    assert r["driver_kills"] == 1 and r["task_failures"] == 1, context
    assert r["cluster"]["nodes"] == 1, context
    assert "NOT exactly once" in out and "twice" in out, context
    assert_plain_screen(out, r)


def test_demo_refuses_a_data_dir_in_use(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "something").write_text("x")
    proc = subprocess.run([sys.executable, "-m", "oncelog", "demo", "--data-dir", str(data)], cwd=tmp_path,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    assert proc.returncode == 2, proc.stdout
    assert "not empty" in proc.stdout
    assert sorted(p.name for p in data.iterdir()) == ["something"]
