"""The sample suite (tests/sample_suite: what a user's Kafka code tests look like with oncelog's
pytest plugin) moved to Apache Kafka as a user would move it: ``pytest -m any_kafka
--kafka-bootstrap=HOST:PORT``, in a pytest process of its own, against the session's one-node
Apache Kafka. Every selected test must pass there: none failed, none errored, none skipped.

Left out there: the suite's one Spark test. It would start a second Spark JVM in that process
(~14 s to start and ~8 s to its first query on this 2-core machine, beside the Spark worker's
own), and the connector on Apache Kafka is tested already (tests/spark/test_apache_kafka.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

pytestmark = pytest.mark.e2e

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPARK_TEST = "tests/sample_suite/test_spark_read.py::test_spark_reads_the_committed_records"


def test_the_sample_suite_passes_on_apache_kafka(apache_kafka, tmp_path):
    junit = tmp_path / "junit.xml"
    # The child is a pytest run of its own: not an xdist worker of this one.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTEST_XDIST"))}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/sample_suite", "-m", "any_kafka",
         f"--kafka-bootstrap={apache_kafka.bootstrap}", "-p", "no:cacheprovider", "-n", "0",
         "--deselect", SPARK_TEST, f"--junitxml={junit}", "-q", "--durations=5"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    out = proc.stdout[-6000:] + proc.stderr[-3000:]
    assert proc.returncode == 0, out
    suite = ET.parse(junit).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    counts = {k: int(suite.get(k)) for k in ("tests", "failures", "errors", "skipped")}
    assert counts["tests"] >= 45, (counts, out)
    assert counts["failures"] == counts["errors"] == counts["skipped"] == 0, (counts, out)
    cases = suite.findall("testcase")
    assert len(cases) == counts["tests"]
    assert not [c.get("name") for c in cases if c.find("failure") is not None or c.find("error") is not None
                or c.find("skipped") is not None], out
    assert not [c for c in cases if c.get("name") == SPARK_TEST.rsplit("::", 1)[1]]
