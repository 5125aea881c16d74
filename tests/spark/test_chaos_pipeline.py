"""``oncelog chaos --pipeline``: the demo's Spark job under the nemesis — pauses of the broker
and of the driver's process group (JVM and Python workers frozen while the broker moves on),
SIGKILLs of Spark's Python processes — besides the demo's own driver SIGKILL; the verdict is
the demo's exactly-once audit by an independent read_committed reader."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e


def test_the_demo_under_the_nemesis_stays_exactly_once(tmp_path):
    report = tmp_path / "run.json"
    proc = subprocess.run([sys.executable, "-m", "oncelog", "chaos", "--pipeline", "--duration", "40", "--seed", "6",
                           "--report", str(report), "--demo-args",
                           f"--records 20000 --driver-kills 1 --broker-kills 0 --produce-seconds 20 "
                           f"--data-dir {tmp_path / 'data'}"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    r = json.loads(report.read_text())
    assert r["exactly_once"] and r["input_records"] == r["output_records"], out[-4000:]
    # the nemesis's faults really happened (besides the demo's own SIGKILL)
    assert "nemesis: kill python-worker" in out and "nemesis: pause " in out, out[-4000:]
    assert "nemesis done" in out
