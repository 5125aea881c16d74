"""Flink 1.20's KafkaSink EXACTLY_ONCE (flink-connector-kafka 3.4.0-1.20, kafka-clients 3.4.0) on
both brokers (issue 33): before the ApiVersions fix its clients could not connect to oncelog at
all (KAFKA-17492). The job (tests/kafka/compat/FlinkExactlyOnce.java, a local MiniCluster, two
subtasks, checkpoints every 500 ms) writes v0..v{N-1} through Flink's two-phase-commit sink; an
independent confluent-kafka reader at read_committed then reads the topic to its end:

- an exception in a map: Flink restarts the job from its last checkpoint, the sink aborts what
  the failed attempt had open; every value once;
- the JVM SIGKILLed (its whole process group) after two checkpoints, then a new JVM restored from
  the latest retained checkpoint: the sink commits the transactions that checkpoint recorded
  (commit on restore: kafka-clients' producer resumed by id and epoch) and aborts lingering ones;
  every value once, and the topic has no open transaction left (LSO = high watermark).

Flink's jars (~80 MB) are fetched with Maven into ``~/.cache/oncelog/flink/1.20.5`` on first use.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import time

import confluent_kafka as ck
import pytest

from oncelog import apache_kafka as ak
from oncelog.cachedir import user_cache

from ..helpers import create_topic, need_apache_kafka, unique

pytestmark = [pytest.mark.e2e, pytest.mark.apache_kafka]

FLINK, CONNECTOR = "1.20.5", "3.4.0-1.20"
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "compat", "FlinkExactlyOnce.java")
PARTITIONS = 2
JOB_TIMEOUT = 300


def _pom() -> str:
    deps = [("org.apache.flink", "flink-streaming-java", FLINK), ("org.apache.flink", "flink-clients", FLINK),
            ("org.apache.flink", "flink-connector-base", FLINK),
            ("org.apache.flink", "flink-connector-kafka", CONNECTOR), ("org.slf4j", "slf4j-simple", "1.7.36")]
    body = "".join(f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version></dependency>"
                   for g, a, v in deps)
    return (f'<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
            f"<groupId>oncelog</groupId><artifactId>flink-runtime</artifactId><version>{FLINK}</version>"
            f"<packaging>pom</packaging><dependencies>{body}</dependencies></project>")


@pytest.fixture(scope="module")
def flink():
    def fetch():
        home = user_cache("flink", f"{FLINK}-{CONNECTOR}")
        ak.maven_fetch(home, _pom(), f"Flink {FLINK} with flink-connector-kafka {CONNECTOR}")
        return ak.ClientJars(FLINK, home, ak.java())

    jars = need_apache_kafka(f"Flink {FLINK}", fetch)
    return jars, ak.compile_java([SOURCE], installation=jars)


def _command(flink, bootstrap: str, topic: str, checkpoints: str, *extra) -> list[str]:
    jars, classes = flink
    return ak.client_command(jars, classes, "FlinkExactlyOnce", [
        "--bootstrap", bootstrap, "--topic", topic, "--checkpoints", checkpoints,
        "--txn-prefix", topic + "-tx", *extra], heap="384m")


def _finish(cmd: list[str]) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=JOB_TIMEOUT, stdin=subprocess.DEVNULL)
    assert done.returncode == 0 and '"finished": true' in done.stdout, \
        f"the Flink job exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-6000:]}"


def read_committed_to_end(bootstrap: str, topic: str, timeout: float = 60.0) -> tuple[list[str], dict]:
    """Every value of ``topic`` at read_committed, read until each partition's position reaches
    its end; also {partition: (last stable offset == high watermark)}."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": unique("flink-reader"), "enable.auto.commit": False,
                     "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    tps = [ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(PARTITIONS)]
    ends = {p: c.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=30)[1] for p in range(PARTITIONS)}
    c.assign(tps)
    values: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            for m in c.consume(1000, 0.3):
                assert m.error() is None, m.error()
                values.append(m.value().decode())
            positions = {tp.partition: tp.offset for tp in c.position([ck.TopicPartition(topic, p)
                                                                       for p in range(PARTITIONS)])}
            if all(positions[p] >= ends[p] or ends[p] == 0 for p in range(PARTITIONS)):
                return values, {p: positions[p] >= ends[p] for p in range(PARTITIONS)}
        raise AssertionError(f"read_committed did not reach the end {ends} in {timeout} s (an open transaction?)")
    finally:
        c.close()


def _assert_exactly_once(values: list[str], records: int) -> None:
    expected = {f"v{i}" for i in range(records)}
    duplicates = len(values) - len(set(values))
    missing = sorted(expected - set(values), key=lambda v: int(v[1:]))
    assert not duplicates and not missing and set(values) == expected, \
        f"{len(values)} read for {records}: {duplicates} duplicates, missing {missing[:10]}"


def _bootstrap(kind: str, broker_factory, apache_kafka) -> str:
    return apache_kafka.bootstrap if kind == "apache-kafka" else broker_factory().bootstrap


@pytest.mark.parametrize("kind", ["oncelog", "apache-kafka"])
def test_an_exception_in_a_map_restarts_the_job_exactly_once(kind, flink, broker_factory, apache_kafka, tmp_path):
    bootstrap = _bootstrap(kind, broker_factory, apache_kafka)
    topic = unique("flink-fail")
    create_topic(bootstrap, topic, partitions=PARTITIONS)
    records = 3000
    _finish(_command(flink, bootstrap, topic, str(tmp_path / "chk"), "--records", str(records), "--pace-ms", "1",
                     "--fail-at", "1700", "--marker", str(tmp_path / "failed-once")))
    assert (tmp_path / "failed-once").exists(), "the injected failure did not happen"
    values, at_end = read_committed_to_end(bootstrap, topic)
    _assert_exactly_once(values, records)


def _high_watermark(bootstrap: str, topic: str, partition: int) -> int:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": unique("hw")})
    try:
        return c.get_watermark_offsets(ck.TopicPartition(topic, partition), timeout=30)[1]
    finally:
        c.close()


def _completed_checkpoints(root: str) -> list[str]:
    done = glob.glob(os.path.join(root, "*", "chk-*", "_metadata"))
    return sorted((os.path.dirname(p) for p in done), key=lambda d: int(d.rsplit("-", 1)[1]))


@pytest.mark.parametrize("kind", ["oncelog", "apache-kafka"])
def test_a_killed_jvm_restores_from_its_checkpoint_exactly_once(kind, flink, broker_factory, apache_kafka, tmp_path):
    bootstrap = _bootstrap(kind, broker_factory, apache_kafka)
    topic = unique("flink-kill")
    create_topic(bootstrap, topic, partitions=PARTITIONS)
    records = 6000
    checkpoints = str(tmp_path / "chk")
    cmd = _command(flink, bootstrap, topic, checkpoints, "--records", str(records), "--pace-ms", "2")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + JOB_TIMEOUT
        while len(_completed_checkpoints(checkpoints)) < 2:
            assert proc.poll() is None, f"the job ended before two checkpoints:\n{proc.stderr.read().decode()[-4000:]}"
            assert time.monotonic() < deadline, "no two completed checkpoints"
            time.sleep(0.05)
    finally:
        running = proc.poll() is None
        os.killpg(proc.pid, signal.SIGKILL)  # the whole JVM, mid-run: no cancel, no final commit
        out, _ = proc.communicate()
    assert running and b'"finished"' not in out, "the job had finished before the kill"
    written = sum(_high_watermark(bootstrap, topic, p) for p in range(PARTITIONS))
    assert 0 < written, "nothing was written before the kill"
    latest = _completed_checkpoints(checkpoints)[-1]
    _finish(_command(flink, bootstrap, topic, checkpoints, "--records", str(records), "--pace-ms", "0",
                     "--restore", latest))
    values, at_end = read_committed_to_end(bootstrap, topic)
    _assert_exactly_once(values, records)
    assert all(at_end.values()), f"a transaction is still open after the job: {at_end}"
