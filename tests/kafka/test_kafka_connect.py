"""Kafka Connect 4.4.0 in distributed mode with ``exactly.once.source.support=enabled`` (KIP-618)
on both brokers. A worker (``ConnectDistributed``, its REST API on a free loopback
port, its group and internal topics unique per test) runs tests/kafka/compat/ConnectGenerator.java,
a source connector whose two tasks each write their own numbered sequence, with
``exactly.once.support=required`` and ``transaction.boundary=interval`` (1 s): a task's records
and its source offsets go to the broker in one transaction a second, through the task's own
transactional producer (``<group>-<connector>-<task>``). On the broker that exercises the
leader's transactional producer of the config topic (``connect-cluster-<group>``), the
read_committed readers of the config and offsets topics, CreateTopics and DescribeConfigs of the
compacted internal topics, classic JoinGroup with protocol type ``connect``, the zombie fencing
round (Admin.fenceProducers: InitProducerId of every task's transactional id) that a
reconfiguration runs before the new tasks start, and a new task's InitProducerId aborting the
transaction its killed predecessor left open.

The run: worker A starts the connector; once some records are committed the connector is
reconfigured (new task configs: a fencing round, which the worker's log must show, then tasks
restarted from their committed offsets). Mid-run, while a transaction holding records is open
(the output's last stable offset below its high watermark), A is SIGKILLed (its whole process
group: no commit, no abort, no LeaveGroup) and worker B is started in the same group; B takes the
connector over once A's session expires, and its tasks resume from the offsets committed with
the records. An independent confluent-kafka reader at read_committed then reads the output to
its end. Invariants: every expected value exactly once (a duplicate: offsets and records were
not atomic; a gap: the aborted records were not written again); records written but never
committed exist (the kill did land inside a transaction); B's tasks resumed past 0; and the last
stable offset equals the high watermark on the output and on the worker's offsets topic (no
transaction left open). The test waits on conditions only, with generous deadlines: it holds on
a 2-core machine with a CPU hog on one core.

CI runs the short version (one kill, ~25-40 s per broker); ``ONCELOG_SOAK=full`` adds a longer
run (four workers killed in turn, 40,000 records) and an at-least-once control (exactly-once
support disabled: the kill repeats what was written since the last offset flush, which the check
sees — it is not blind).

Each CI test's outcome goes to build/engines.json (tests/kafka/engine_results.py), from which
``python -m tests.kafka.compat_report`` writes the engines table of docs/COMPATIBILITY.md.

Connect's jars (connect-runtime and a log4j2 binding for slf4j) come from Maven into
``~/.cache/oncelog/kafka-connect/4.4.0``; connect-file 4.4.0 (FileStreamSourceConnector) is not
on Maven Central, hence the generator."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request

import confluent_kafka as ck
import pytest

from oncelog.tools import apache_kafka as ak
from oncelog.cachedir import user_cache

from ..helpers import create_topic, free_port, need_apache_kafka, unique
from .engine_results import engine_cell

pytestmark = [pytest.mark.e2e, pytest.mark.apache_kafka]

VERSION = "4.4.0"
ENGINE, CHECK = "Kafka Connect exactly-once source (KIP-618)", "fencing round, worker SIGKILLed, a new one takes over"
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "compat", "ConnectGenerator.java")
FULL = os.environ.get("ONCELOG_SOAK") == "full"
PARTITIONS = 2  # the output topic
OFFSET_PARTITIONS = 2  # the worker's offsets topic
TASKS = 2
TIMEOUT = 240.0  # one run, from the first worker's start to the last record read
FENCED = re.compile(r"Finished fencing out (\d+) task producers")

_LOG4J2 = ak.LOG4J2 + """\
logger.reflections.name = org.reflections
logger.reflections.level = ERROR
# "Finished fencing out N task producers": the zombie fencing round ran (the test looks for it)
logger.worker.name = org.apache.kafka.connect.runtime.Worker
logger.worker.level = DEBUG
"""


def _pom() -> str:
    # log4j-slf4j-impl: connect-runtime logs through slf4j 1.7 and brings log4j2 but no binding
    deps = [("org.apache.kafka", "connect-runtime", VERSION),
            ("org.apache.logging.log4j", "log4j-slf4j-impl", "2.25.5")]
    body = "".join(f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version></dependency>"
                   for g, a, v in deps)
    return ('<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
            f"<groupId>oncelog</groupId><artifactId>kafka-connect-runtime</artifactId><version>{VERSION}</version>"
            f"<packaging>pom</packaging><dependencies>{body}</dependencies></project>")


@pytest.fixture(scope="module")
def connect(tmp_path_factory):
    """(jars, classpath of the compiled generator and its ServiceLoader manifest, log4j2 config)."""
    def fetch():
        home = user_cache("kafka-connect", VERSION)
        ak.maven_fetch(home, _pom(), f"Kafka Connect {VERSION}")
        return ak.ClientJars(VERSION, home, ak.java())

    jars = need_apache_kafka(f"Kafka Connect {VERSION}", fetch)
    classes = ak.compile_java([SOURCE], installation=jars)
    # plugin.discovery=service_load finds a plugin by its manifest alone (no scan of the whole
    # classpath: a faster start); compile_java's folder holds classes only, so the manifest has its own.
    extra = tmp_path_factory.mktemp("connect")
    services = extra / "manifest" / "META-INF" / "services"
    services.mkdir(parents=True)
    (services / "org.apache.kafka.connect.source.SourceConnector").write_text("ConnectGenerator\n")
    (extra / "log4j2.properties").write_text(_LOG4J2)
    return jars, os.pathsep.join([classes, str(extra / "manifest")]), str(extra / "log4j2.properties")


class _Worker:
    """One ``ConnectDistributed`` JVM in its own process group, its log in ``tmp_path``."""

    def __init__(self, connect, tmp_path, name: str, props: dict) -> None:
        jars, classpath, log4j = connect
        self.name, self.port = name, free_port()
        self.log_path = tmp_path / f"worker-{name}.log"
        config = tmp_path / f"worker-{name}.properties"
        props = {**props, "listeners": f"http://127.0.0.1:{self.port}", "rest.advertised.host.name": "127.0.0.1",
                 "rest.advertised.port": str(self.port)}
        config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        cmd = [jars.java, "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
               f"-Dlog4j2.configurationFile={log4j}", "-cp", os.pathsep.join([classpath, jars.classpath]),
               "org.apache.kafka.connect.cli.ConnectDistributed", str(config)]
        with open(self.log_path, "wb") as log:
            # its own process group (killed whole); it dies with this thread too (a crashed run
            # leaves no worker retrying a dead broker)
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True, preexec_fn=ak._die_with_parent)

    def log(self, chars: int = 6000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def check_alive(self) -> None:
        assert self.alive(), f"worker {self.name} exited {self.proc.returncode}:\n{self.log()}"

    def started_tasks(self) -> list[tuple[int, int]]:
        """(task, first record) of each generator task start this worker logged, in order."""
        return [(int(t), int(n)) for t, n in re.findall(r"ConnectGenerator task (\d+) starts at (\d+)",
                                                        self.log_path.read_text(errors="replace"))]

    def rest(self, method: str, path: str, body=None) -> tuple[int, object]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data, method=method,
                                     headers={"Content-Type": "application/json", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                status, text = r.status, r.read()
        except urllib.error.HTTPError as exc:
            status, text = exc.code, exc.read()
        try:
            return status, json.loads(text or b"null")
        except ValueError:
            return status, text.decode(errors="replace")

    def wait_ready(self, deadline: float) -> None:
        """GET /health answers 200 once the worker has joined its group and read the config topic."""
        while True:
            self.check_alive()
            try:
                if self.rest("GET", "/health")[0] == 200:
                    return
            except OSError:  # the REST server is not listening yet
                pass
            assert time.monotonic() < deadline, f"worker {self.name} not ready:\n{self.log()}"
            time.sleep(0.5)

    def put_connector(self, name: str, config: dict, deadline: float) -> None:
        """PUT the connector's config (creates or reconfigures it); a worker still rebalancing
        answers 409 or 500 (request timed out): retried."""
        while True:
            self.check_alive()
            status, body = self.rest("PUT", f"/connectors/{name}/config", config)
            if status in (200, 201):
                return
            assert status in (409, 500, 503) and time.monotonic() < deadline, f"PUT {name}: {status} {body}"
            time.sleep(1)

    def check_status(self, name: str) -> None:
        """No task of the connector FAILED (a failed task would hold the run up until the deadline)."""
        try:
            status, body = self.rest("GET", f"/connectors/{name}/status")
        except OSError:  # busy: asked again on the next round
            return
        if status == 200:
            failed = [t for t in body["tasks"] if t["state"] == "FAILED"]
            if body["connector"]["state"] == "FAILED":
                failed.append(body["connector"])
            assert not failed, f"worker {self.name}: {json.dumps(failed)[:4000]}\n{self.log()}"

    def kill(self) -> None:
        if self.alive():
            os.killpg(self.proc.pid, signal.SIGKILL)  # the whole JVM at once: no commit, no abort, no leave
        self.proc.wait()

    def stop(self) -> None:
        if self.alive():
            os.killpg(self.proc.pid, signal.SIGTERM)  # Connect's shutdown hook stops the herder
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


def _worker_props(bootstrap: str, cluster: str, exactly_once: bool) -> dict:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": cluster,
        "config.storage.topic": f"{cluster}-configs",
        "offset.storage.topic": f"{cluster}-offsets",
        "status.storage.topic": f"{cluster}-status",
        "config.storage.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "offset.storage.partitions": str(OFFSET_PARTITIONS),
        "status.storage.partitions": "1",
        "exactly.once.source.support": "enabled" if exactly_once else "disabled",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        "plugin.discovery": "service_load",
        # a killed worker leaves the group after 6 s; its lost tasks are reassigned at once (the
        # default would hold them 5 minutes for the worker to come back)
        "session.timeout.ms": "6000",
        "heartbeat.interval.ms": "1000",
        "scheduled.rebalance.max.delay.ms": "0",
        # the control (no exactly-once): offsets flushed every 5 s, apart from the records
        "offset.flush.interval.ms": "5000",
    }


def _connector_config(topic: str, records: int, exactly_once: bool, generation: int) -> dict:
    config = {"connector.class": "ConnectGenerator", "tasks.max": str(TASKS), "topic": topic,
              "records": str(records), "batch": "10", "pace.ms": "50",
              # a changed task config is a reconfiguration: new task configs, a fencing round
              "generation": str(generation)}
    if exactly_once:
        config.update({"exactly.once.support": "required", "transaction.boundary": "interval",
                       "transaction.boundary.interval.ms": "1000"})
    return config


def _expected(records: int) -> set[str]:
    return {f"t{t}-v{i}" for t in range(TASKS) for i in range(records)}


class _Committed:
    """A read_committed consumer of the output kept across polls: what is committed so far."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": unique("kc-progress"),
                              "enable.auto.commit": False, "isolation.level": "read_committed",
                              "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100})
        self.c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(PARTITIONS)])
        self.values: set[str] = set()

    def poll(self, seconds: float = 0.3) -> int:
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            for m in self.c.consume(1000, left):
                assert m.error() is None, m.error()
                self.values.add(m.value().decode())
        return len(self.values)

    def close(self) -> None:
        self.c.close()


def _watermarks(bootstrap: str, topic: str, partitions: int, isolation: str) -> dict[int, int]:
    """{partition: end offset} as ListOffsets answers at ``isolation``: the high watermark at
    read_uncommitted, the last stable offset at read_committed."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": unique("kc-wm"), "isolation.level": isolation})
    try:
        return {p: c.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=30, cached=False)[1]
                for p in range(partitions)}
    finally:
        c.close()


def _open_transaction(bootstrap: str, topic: str) -> bool:
    """A transaction with records in it is open now: some partition's last stable offset is below
    the high watermark asked just before it (records written, not yet committed or aborted)."""
    high = _watermarks(bootstrap, topic, PARTITIONS, "read_uncommitted")
    stable = _watermarks(bootstrap, topic, PARTITIONS, "read_committed")
    return any(stable[p] < high[p] for p in range(PARTITIONS))


def read_to_end(bootstrap: str, topic: str, isolation: str = "read_committed", timeout: float = 60.0) -> list[str]:
    """Every value of ``topic`` at ``isolation``, by a fresh consumer, read until each partition's
    position reaches its high watermark (at read_committed it cannot while a transaction is open)."""
    ends = _watermarks(bootstrap, topic, PARTITIONS, "read_uncommitted")
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": unique("kc-reader"), "enable.auto.commit": False,
                     "isolation.level": isolation, "auto.offset.reset": "earliest"})
    c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(PARTITIONS)])
    values: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            for m in c.consume(1000, 0.3):
                assert m.error() is None, m.error()
                values.append(m.value().decode())
            pos = {tp.partition: tp.offset for tp in c.position([ck.TopicPartition(topic, p)
                                                                 for p in range(PARTITIONS)])}
            if all(pos[p] >= ends[p] or ends[p] == 0 for p in range(PARTITIONS)):
                return values
        raise AssertionError(f"{isolation} did not reach the high watermarks {ends} in {timeout} s "
                             f"(an open transaction?); {len(values)} values read")
    finally:
        c.close()


def _run(connect, bootstrap: str, tmp_path, *, records: int, kills: int, exactly_once: bool = True) -> dict:
    """One run; returns what the check found: {"values", "duplicates", "missing", "aborted", ...}."""
    cluster, connector, topic = unique("kc"), "gen", unique("kc-out")
    create_topic(bootstrap, topic, partitions=PARTITIONS)
    props = _worker_props(bootstrap, cluster, exactly_once)
    total = TASKS * records
    deadline = time.monotonic() + TIMEOUT * (1 + kills) / 2
    committed = _Committed(bootstrap, topic)
    workers: list[_Worker] = []
    try:
        worker = _Worker(connect, tmp_path, "a", props)
        workers.append(worker)
        worker.wait_ready(deadline)
        worker.put_connector(connector, _connector_config(topic, records, exactly_once, 1), deadline)

        def wait_for(condition, what: str) -> None:
            while not condition():
                worker.check_alive()
                worker.check_status(connector)
                assert time.monotonic() < deadline, \
                    f"{what}: {len(committed.values)} of {total} committed\n{worker.log()}"
                committed.poll()

        # reconfigured once some records are committed: the new tasks start after a fencing round
        wait_for(lambda: len(committed.values) >= total // 20, "no records committed")
        worker.put_connector(connector, _connector_config(topic, records, exactly_once, 2), deadline)
        wait_for(lambda: len(worker.started_tasks()) >= 2 * TASKS, "no tasks restarted after the reconfiguration")
        fenced = FENCED.findall(worker.log_path.read_text(errors="replace")) if exactly_once else []
        at_kill = []
        for k in range(kills):
            # the k-th kill (from 0) of n at (k + 1) / (n + 2) of the records (1/3 for one kill), and
            # once the tasks running now have committed some
            floor = max(total * (k + 1) / (kills + 2), len(committed.values) + total / 10)
            wait_for(lambda: len(committed.values) >= floor, f"kill {k + 1}: too few records committed")
            if exactly_once:  # the kill lands inside a transaction that holds records
                wait_for(lambda: _open_transaction(bootstrap, topic), f"kill {k + 1}: no open transaction")
            worker.kill()
            at_kill.append((len(committed.values), sum(_watermarks(bootstrap, topic, PARTITIONS,
                                                                   "read_uncommitted").values())))
            assert len(committed.values) < total * 0.9, f"the run was nearly over before kill {k + 1}: {at_kill}"
            worker = _Worker(connect, tmp_path, "bcdefg"[k], props)
            workers.append(worker)
            worker.wait_ready(deadline)
        wait_for(lambda: len(committed.values) >= total, "the records were not all committed")
        resumed = worker.started_tasks()
        # no transaction left open: the killed workers' were aborted when their successors'
        # producers initialized, and the idle tasks have none
        lso_hw = {name: (_watermarks(bootstrap, t, n, "read_committed"),
                         _watermarks(bootstrap, t, n, "read_uncommitted"))
                  for name, t, n in (("output", topic, PARTITIONS),
                                     ("offsets", props["offset.storage.topic"], OFFSET_PARTITIONS))}
        values = read_to_end(bootstrap, topic)
        every = read_to_end(bootstrap, topic, "read_uncommitted")
    finally:
        committed.close()
        for w in workers:
            w.stop()
    expected = _expected(records)
    return {"values": len(values), "duplicates": len(values) - len(set(values)),
            "missing": sorted(expected - set(values))[:10], "unexpected": sorted(set(values) - expected)[:10],
            "open": {name: lso_hw[name] for name in lso_hw if lso_hw[name][0] != lso_hw[name][1]},
            "aborted": len(every) - len(values),  # records written in transactions the kills left open
            "at_kill": at_kill, "resumed": resumed, "fenced": fenced}


def _assert_exactly_once(found: dict, records: int) -> None:
    assert not found["duplicates"] and not found["missing"] and not found["unexpected"] \
        and found["values"] == TASKS * records, found
    assert not found["open"], f"a transaction is still open (last stable offset, high watermark): {found}"
    assert found["aborted"] > 0, f"no kill left records in an open transaction: {found}"
    assert any(start > 0 for _, start in found["resumed"]), f"the last worker's tasks did not resume: {found}"
    assert found["fenced"] == [str(TASKS)], f"no zombie fencing round (Admin.fenceProducers) ran: {found}"


def _bootstrap(kind: str, broker_factory, apache_kafka) -> str:
    return apache_kafka.bootstrap if kind == "apache-kafka" else broker_factory().bootstrap


@pytest.mark.parametrize("kind", ["oncelog", "apache-kafka"])
def test_a_killed_worker_and_a_new_one_write_every_record_exactly_once(kind, connect, broker_factory, apache_kafka,
                                                                       tmp_path):
    records = 2000
    with engine_cell(ENGINE, VERSION, CHECK, kind):
        found = _run(connect, _bootstrap(kind, broker_factory, apache_kafka), tmp_path, records=records, kills=1)
        _assert_exactly_once(found, records)


@pytest.mark.slow
@pytest.mark.skipif(not FULL, reason="the longer run: ONCELOG_SOAK=full")
@pytest.mark.parametrize("kind", ["oncelog", "apache-kafka"])
def test_soak_four_workers_killed_in_turn_exactly_once(kind, connect, broker_factory, apache_kafka, tmp_path):
    records = 20000
    found = _run(connect, _bootstrap(kind, broker_factory, apache_kafka), tmp_path, records=records, kills=4)
    _assert_exactly_once(found, records)


@pytest.mark.slow
@pytest.mark.skipif(not FULL, reason="control run: ONCELOG_SOAK=full")
def test_control_without_exactly_once_shows_duplicates(connect, broker_factory, tmp_path):
    """The same run with exactly-once support disabled, on oncelog: offsets are flushed every 5 s
    apart from the records, so the kill repeats what was written since the last flush, which the
    check sees — it is not blind."""
    found = _run(connect, broker_factory().bootstrap, tmp_path, records=2000, kills=1, exactly_once=False)
    assert found["duplicates"] > 0 and not found["missing"], found
