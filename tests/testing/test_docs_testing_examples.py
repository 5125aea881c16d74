"""docs/testing.md's user guide stays true: its examples run.

Every fenced ``python`` block of docs/testing.md whose first line is ``# example: <name>`` is
extracted: a block with ``def test_`` becomes ``test_<name>.py`` in a temporary directory and
runs in a pytest subprocess there, with the fixtures coming from the plugin's ``pytest11`` entry
point (no conftest: what a user who ran ``pip install oncelog`` has); any other block runs as a
script. The ``any_kafka`` example runs twice: on the embedded broker, and with
``--kafka-bootstrap`` at a second broker started here, where its test that adds a fault must be
skipped, as the guide says. The guide's Spark example is not marked (the sample suite covers
Spark through the plugin, and a Spark start would cost this test most of its time budget).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.e2e  # starts brokers and pytest subprocesses

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GUIDE = os.path.join(REPO, "docs", "testing.md")
# The examples the guide promises; a block that loses its marker must not drop out unnoticed.
EXPECTED = {"first-test", "broker-directly", "faults-idempotent", "exactly-once-kill", "faults-verbs", "any-kafka"}
MARK = re.compile(r"# example: ([a-z0-9-]+)\s*$")


def examples() -> dict[str, str]:
    """name -> code of every marked python block of the guide."""
    with open(GUIDE, encoding="utf-8") as f:
        text = f.read()
    found: dict[str, str] = {}
    for lang, body in re.findall(r"^```(\w*)\n(.*?)^```", text, re.S | re.M):
        first = body.split("\n", 1)[0]
        m = MARK.match(first)
        if lang == "python" and m:
            assert m.group(1) not in found, f"two examples named {m.group(1)}"
            found[m.group(1)] = body
    return found


def _env() -> dict[str, str]:
    """The child's environment without the outer run's pytest/xdist settings."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("PYTEST_", "PYTEST_XDIST")) and k != "PYTEST_ADDOPTS"}


def _pytest(directory, *args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs",
                             "--rootdir", str(directory), *args],
                            cwd=directory, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _outcome(proc: subprocess.Popen, timeout: float) -> tuple[int, str]:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"timed out after {timeout} s:\n{out[-4000:]}")
    # librdkafka's own log lines (%3|...) are noise here
    return proc.returncode, "\n".join(line for line in out.splitlines() if not line.startswith("%"))


def test_the_guide_marks_its_examples():
    assert set(examples()) == EXPECTED


def test_the_guides_examples_run(tmp_path):
    from oncelog.testing import Broker

    started = time.monotonic()
    blocks = examples()
    suite, scripts, external = tmp_path / "suite", tmp_path / "scripts", tmp_path / "external"
    for d in (suite, scripts, external):
        d.mkdir()
        (d / "pytest.ini").write_text("[pytest]\n")  # its own rootdir: not this repository's settings
    tests, script_names = [], []
    for name, code in blocks.items():
        module = name.replace("-", "_")
        if "def test_" in code:
            (suite / f"test_{module}.py").write_text(code)
            tests.append(name)
        else:
            (scripts / f"{module}.py").write_text(code)
            script_names.append(name)
    (external / "test_any_kafka.py").write_text(blocks["any-kafka"])

    # The suite runs beside the rest, which run one after the other (two processes at a time).
    suite_run = _pytest(suite)
    results = {}
    with Broker() as cluster:  # the "real cluster" the any_kafka example moves to
        external_run = _pytest(external, "-m", "any_kafka", f"--kafka-bootstrap={cluster.bootstrap_servers}")
        results["external"] = _outcome(external_run, 120)
    for name in script_names:
        script = subprocess.Popen([sys.executable, f"{name.replace('-', '_')}.py"], cwd=scripts, env=_env(),
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        results[name] = _outcome(script, 120)
    results["suite"] = _outcome(suite_run, 120)

    rc, out = results.pop("suite")
    n = sum(len(re.findall(r"^def test_", blocks[name], re.M)) for name in tests)
    assert rc == 0 and re.search(rf"\b{n} passed\b", out) and " skipped" not in out, out[-4000:]
    rc, out = results.pop("external")
    assert rc == 0 and re.search(r"\b1 passed, 1 skipped\b", out), out[-4000:]
    assert re.search(r"needs? the embedded broker", out), out[-4000:]  # the skip says why
    for name, (rc, out) in results.items():
        assert rc == 0, f"example {name}:\n{textwrap.indent(out[-4000:], '  ')}"
    assert time.monotonic() - started < 60, "the guide's examples should stay quick to run"
