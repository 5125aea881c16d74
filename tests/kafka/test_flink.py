"""Flink's KafkaSink EXACTLY_ONCE on both brokers, on the two Flink lines users run:
Flink 1.20 (flink-connector-kafka 3.4.0-1.20, kafka-clients 3.4.0 — before the ApiVersions fix its
clients could not connect to oncelog at all, KAFKA-17492) and Flink 2.2 (connector 5.0.0-2.2,
kafka-clients 4.2, with both transaction naming strategies: INCREMENTING ids probed and aborted
on restore, POOLING ids found through ListTransactions). The job (tests/kafka/compat/FlinkExactlyOnce.java, a local MiniCluster, two
subtasks, checkpoints every 500 ms) writes v0..v{N-1} through Flink's two-phase-commit sink; an
independent confluent-kafka reader at read_committed then reads the topic to its end:

- an exception in a map: Flink restarts the job from its last checkpoint, the sink aborts what
  the failed attempt had open; every value once;
- the JVM SIGKILLed (its whole process group) after two checkpoints, then a new JVM restored from
  the latest retained checkpoint: the sink commits the transactions that checkpoint recorded
  (commit on restore: kafka-clients' producer resumed by id and epoch) and aborts lingering ones;
  every value once, and the topic has no open transaction left (LSO = high watermark).

Flink's jars (~80 MB a version) are fetched with Maven into
``~/.cache/oncelog/flink/<flink>-<connector>`` on first use.
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

from oncelog.tools import apache_kafka as ak
from oncelog.cachedir import user_cache

from ..helpers import create_topic, need_apache_kafka, read_committed_to_end, unique
from .engine_results import engine_cell

pytestmark = [pytest.mark.e2e, pytest.mark.apache_kafka]

# (Flink, its Kafka connector, the connector's TransactionNamingStrategy or None before 4.0)
FLINK_1, FLINK_2 = ("1.20.5", "3.4.0-1.20"), ("2.2.1", "5.0.0-2.2")
SETUPS = [(*FLINK_1, None), (*FLINK_2, "INCREMENTING"), (*FLINK_2, "POOLING")]
ENGINE = "Flink KafkaSink EXACTLY_ONCE"
CHECKS = ("exception in a map, restart", "JVM SIGKILLed, restore from checkpoint")


def setup_label(setup) -> str:
    """The compatibility table's version column for one of SETUPS."""
    version, connector, naming = setup
    return f"{version} (connector {connector}" + (f", {naming})" if naming else ")")
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "compat", "FlinkExactlyOnce.java")
PARTITIONS = 2
# The long version (ONCELOG_SOAK=full): ten times the records, so tens of checkpoints and
# transactions per subtask before the failure and the kill instead of a few.
SCALE = 10 if os.environ.get("ONCELOG_SOAK") == "full" else 1
JOB_TIMEOUT = 300 * SCALE
TXN_TIMEOUT_S = 60  # FlinkExactlyOnce.java's transaction.timeout.ms


def _pom(flink: str, connector: str) -> str:
    deps = [("org.apache.flink", "flink-streaming-java", flink), ("org.apache.flink", "flink-clients", flink),
            ("org.apache.flink", "flink-connector-base", flink),
            ("org.apache.flink", "flink-connector-kafka", connector), ("org.slf4j", "slf4j-simple", "1.7.36")]
    body = "".join(f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version></dependency>"
                   for g, a, v in deps)
    return (f'<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
            f"<groupId>oncelog</groupId><artifactId>flink-runtime</artifactId><version>{flink}</version>"
            f"<packaging>pom</packaging><dependencies>{body}</dependencies></project>")


_compiled: dict = {}


@pytest.fixture(scope="module", params=SETUPS, ids=lambda s: f"flink-{s[0]}" + (f"-{s[2].lower()}" if s[2] else ""))
def flink(request):
    """(jars, compiled classes, naming strategy, table label) of one Flink setup, fetched and
    compiled once."""
    version, connector, naming = request.param
    if version not in _compiled:
        def fetch():
            home = user_cache("flink", f"{version}-{connector}")
            ak.maven_fetch(home, _pom(version, connector), f"Flink {version} with flink-connector-kafka {connector}")
            return ak.ClientJars(version, home, ak.java())

        jars = need_apache_kafka(f"Flink {version}", fetch)
        _compiled[version] = (jars, ak.compile_java([SOURCE], installation=jars))
    return (*_compiled[version], naming, setup_label(request.param))


def _command(flink, bootstrap: str, topic: str, checkpoints: str, *extra) -> list[str]:
    jars, classes, naming, _ = flink
    return ak.client_command(jars, classes, "FlinkExactlyOnce", [
        "--bootstrap", bootstrap, "--topic", topic, "--checkpoints", checkpoints,
        "--txn-prefix", topic + "-tx", *(["--naming", naming] if naming else []), *extra], heap="384m")


def _finish(cmd: list[str]) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=JOB_TIMEOUT, stdin=subprocess.DEVNULL)
    assert done.returncode == 0 and '"finished": true' in done.stdout, \
        f"the Flink job exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-6000:]}"


def _assert_exactly_once(raw: list[bytes], records: int) -> None:
    values = [v.decode() for v in raw]
    expected = {f"v{i}" for i in range(records)}
    duplicates = len(values) - len(set(values))
    missing = sorted(expected - set(values), key=lambda v: int(v[1:]))
    assert not duplicates and not missing and set(values) == expected, \
        f"{len(values)} read for {records}: {duplicates} duplicates, missing {missing[:10]}"


def _bootstrap(kind: str, broker_factory, apache_kafka) -> str:
    return apache_kafka.bootstrap if kind == "apache-kafka" else broker_factory().bootstrap


@pytest.mark.parametrize("kind", ["oncelog", "apache-kafka"])
def test_an_exception_in_a_map_restarts_the_job_exactly_once(kind, flink, broker_factory, apache_kafka, tmp_path):
    with engine_cell(ENGINE, flink[3], CHECKS[0], kind):
        bootstrap = _bootstrap(kind, broker_factory, apache_kafka)
        topic = unique("flink-fail")
        create_topic(bootstrap, topic, partitions=PARTITIONS)
        records = 3000 * SCALE
        _finish(_command(flink, bootstrap, topic, str(tmp_path / "chk"), "--records", str(records), "--pace-ms", "1",
                         "--fail-at", str(records * 17 // 30), "--marker", str(tmp_path / "failed-once")))
        assert (tmp_path / "failed-once").exists(), "the injected failure did not happen"
        values, at_end = read_committed_to_end(bootstrap, topic, PARTITIONS)
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


def _latest_checkpoint_id(root: str) -> int:
    """N of the newest completed chk-N (only the last three are retained), 0 before the first."""
    done = _completed_checkpoints(root)
    return int(done[-1].rsplit("-", 1)[1]) if done else 0


@pytest.mark.parametrize("kind", ["oncelog", "apache-kafka"])
def test_a_killed_jvm_restores_from_its_checkpoint_exactly_once(kind, flink, broker_factory, apache_kafka, tmp_path):
    with engine_cell(ENGINE, flink[3], CHECKS[1], kind):
        bootstrap = _bootstrap(kind, broker_factory, apache_kafka)
        topic = unique("flink-kill")
        create_topic(bootstrap, topic, partitions=PARTITIONS)
        records = 6000 * SCALE
        checkpoints = str(tmp_path / "chk")
        cmd = _command(flink, bootstrap, topic, checkpoints, "--records", str(records), "--pace-ms", "2")
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            deadline = time.monotonic() + JOB_TIMEOUT
            while _latest_checkpoint_id(checkpoints) < 2 * SCALE:
                assert proc.poll() is None, \
                    f"the job ended before {2 * SCALE} checkpoints:\n{proc.stderr.read().decode()[-4000:]}"
                assert time.monotonic() < deadline, f"no {2 * SCALE} completed checkpoints"
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
        # Until the job's transaction.timeout.ms (60 s) and then some: a transaction the killed
        # JVM opened that the restored job's probe did not reach (a CI run under load saw one
        # once, on oncelog; it passed at once alone) is the broker's to abort at its timeout —
        # it must not stay open, and nothing of it may be read.
        values, at_end = read_committed_to_end(bootstrap, topic, PARTITIONS, timeout=TXN_TIMEOUT_S + 30)
        _assert_exactly_once(values, records)
        assert all(at_end.values()), f"a transaction is still open after the job: {at_end}"
