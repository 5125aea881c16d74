"""The connector against Apache Kafka itself: the same source, sink and crash tests
that run against oncelog, on Apache Kafka 4.x from Maven Central (``oncelog.tools.apache_kafka``).

Single node (the ``apache_kafka`` fixture), in this session's SparkSession: the source's
read_committed reads (aborted transactions, the last stable offset, control records), the
exactly-once sink with ``atomicity=batch`` and its visibility barrier (a read_committed reader
polling the output never sees part of a micro-batch), and ``atomicity=partition`` with its
progress markers (ordinary consumer-group offsets on Kafka's group coordinator).

Three nodes (``apache_kafka_cluster``: RF 3, ``min.insync.replicas=2``, transaction state log RF 3):
crashes the single broker cannot have. The job (tests/spark/eos_job.py) runs in a subprocess;
between its first and second EndTxn of a batch it pauses on a file handshake
(``ONCELOG_SPARK_COMMIT_PAUSE``), the test SIGKILLs the broker leading an output partition (batch
1) or the transaction coordinator of the batch's still-open transactions (batch 2), then lets
the commit go on. And the crash matrix's representative points (see
:func:`test_crash_points_and_a_dead_coordinator_on_three_brokers`) with the driver SIGKILLed.
Afterwards an independent audit: confluent-kafka read_committed (0 lost, 0 duplicated, 0
aborted reads), the output's per-partition counts a polling reader saw (whole micro-batches
only), and Kafka's own ``kafka-transactions list`` (TransactionsCommand, the Java admin client)
showing no transaction of the query left open.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import subprocess
import threading
import time
from collections import defaultdict

import confluent_kafka as ck
import pytest

from oncelog.client.kafka import KafkaClient
from oncelog.spark.batch_commit import PENDING, CommitLog
from oncelog.spark.options import DEFAULT_COMMIT_LOG_TOPIC

from ..helpers import consume_all
from . import test_sink_partition as partition_tests
from . import test_source as source_tests
from .jobs import check_exactly_once, create_replicated_topic, fill_input, run_job, tail

pytestmark = [pytest.mark.e2e, pytest.mark.apache_kafka]

FULL = os.environ.get("ONCELOG_SOAK") == "full"
OPEN_STATES = {"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"}


# ---------------------------------------------------------------------------------------------
# The audit's parts


class EofReader:
    """A read_committed confluent-kafka consumer that, every time it reaches the end of a
    partition (librdkafka's partition EOF: its position reached the last stable offset),
    records how many rows of that partition it had consumed then. With the sink's visibility
    barrier each such count is a sum of whole micro-batches. Survives broker kills (librdkafka
    reconnects and follows the new leaders)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, expected: int) -> None:
        self.topic, self.partitions, self.expected = topic, partitions, expected
        self.seen: dict[int, list[int]] = defaultdict(list)
        self.counts: dict[int, int] = defaultdict(int)
        self.stop = threading.Event()
        self.abandon = threading.Event()  # the test failed: stop at once
        self.consumer = ck.Consumer({
            "bootstrap.servers": bootstrap, "group.id": f"eof-{topic}", "isolation.level": "read_committed",
            "auto.offset.reset": "earliest", "enable.partition.eof": True, "enable.auto.commit": False,
            "fetch.wait.max.ms": 10, "error_cb": lambda err: None,  # broker-down notices: expected here
            "logger": logging.getLogger("tests.eof_reader")})
        self.consumer.assign([ck.TopicPartition(topic, p, 0) for p in range(partitions)])
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _done(self) -> bool:
        """Told to stop, every expected row read, and each partition's end reached after its last row."""
        return (self.stop.is_set() and sum(self.counts.values()) >= self.expected
                and all(self.seen[p] and self.seen[p][-1] == self.counts[p] for p in range(self.partitions)))

    def _run(self) -> None:
        try:
            while not self._done() and not self.abandon.is_set():
                msg = self.consumer.poll(0.05)
                if msg is None:
                    continue
                if msg.error():
                    if msg.error().code() == ck.KafkaError._PARTITION_EOF:
                        self.seen[msg.partition()].append(self.counts[msg.partition()])
                    continue
                self.counts[msg.partition()] += 1
        finally:
            self.consumer.close()

    def __enter__(self) -> "EofReader":
        return self

    def __exit__(self, *exc) -> None:
        self.abandon.set()
        self.thread.join(30)

    def finish(self, timeout: float = 90) -> dict[int, list[int]]:
        self.stop.set()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"the reader did not reach {self.expected} rows: {dict(self.counts)}"
        return dict(self.seen)


def _checkpoint_ends(ckpt: str) -> list[dict[tuple[str, int], int]]:
    """The end offsets of every micro-batch, in batch order, from Spark's offset log."""
    out = []
    folder = os.path.join(ckpt, "offsets")
    for b in sorted(int(f) for f in os.listdir(folder) if f.isdigit()):
        with open(os.path.join(folder, str(b))) as f:
            end = json.loads(f.read().splitlines()[2])
        out.append({(t, int(p)): o for t, ps in end.items() for p, o in ps.items()})
    return out


def whole_batch_counts(bootstrap: str, output: str, partitions: int, ckpt: str, expected: int) -> dict[int, set[int]]:
    """Per output partition, the row counts at which a micro-batch ends (0 included): each
    output row is mapped to its batch by its ``oncelog.source`` header (the input's
    topic:partition:offset) and the batches' offset ranges in the checkpoint."""
    ends = _checkpoint_ends(ckpt)
    rows = consume_all(bootstrap, output, partitions, expected=expected, timeout=60,
                                       isolation="read_committed")
    per_batch: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for p, recs in rows.items():
        for _off, _key, _value, headers in recs:
            src = dict(headers)["oncelog.source"].decode()
            topic, part, offset = src.rsplit(":", 2)
            batch = next(i for i, e in enumerate(ends) if int(offset) < e.get((topic, int(part)), 0))
            per_batch[p][batch] += 1
    out = {}
    for p in range(partitions):
        total, marks = 0, {0}
        for b in sorted(per_batch[p]):
            total += per_batch[p][b]
            marks.add(total)
        out[p] = marks
    return out


def assert_no_partial_batch(seen: dict[int, list[int]], whole: dict[int, set[int]]) -> None:
    assert seen, "the reader never reached the end of a partition"
    for p, counts in seen.items():
        partial = sorted(set(counts) - whole[p])
        assert not partial, f"partition {p}: a reader saw {partial} rows; whole micro-batches end at {sorted(whole[p])}"


def kafka_transactions(cluster) -> list[dict[str, str]]:
    """``kafka-transactions --bootstrap-server ... list``: Kafka's own tool (TransactionsCommand,
    the Java admin client's ListTransactions on every broker), run from the cached jars."""
    inst = cluster.installation
    cmd = [inst.java, "-Xmx128m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
           f"-Dlog4j2.configurationFile={inst.log4j_config}", "-cp", inst.classpath,
           "org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server", cluster.bootstrap, "list"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("TransactionalId"))
    header = lines[start].split()
    return [dict(zip(header, line.split())) for line in lines[start + 1:] if line.strip()]


def assert_no_open_transaction(cluster, prefix: str) -> None:
    """No transaction of the query (task, decider or barrier ids all start with its prefix)
    is open, as Kafka's own tool lists them and as our protocol client's ListTransactions does."""
    listed = kafka_transactions(cluster)
    ours = [t for t in listed if t["TransactionalId"].startswith(prefix)]
    assert ours, f"kafka-transactions lists no transaction of {prefix}: {listed}"
    still_open = [t for t in ours if t["TransactionState"] in OPEN_STATES]
    assert not still_open, still_open
    client = KafkaClient(cluster.bootstrap)
    try:
        assert not [t for t in client.list_transactions() if t[0].startswith(prefix) and t[2] in OPEN_STATES]
    finally:
        client.close()


# ---------------------------------------------------------------------------------------------
# One node, in this session's SparkSession

# The source's read_committed behaviour is Kafka's: aborted transactions listed in the Fetch
# answer, the last stable offset held by an open transaction, offsets taken by control records.
SOURCE_TESTS = [
    "test_read_committed_hides_aborted_records_and_read_uncommitted_shows_them",
    "test_stops_at_the_open_transaction_then_continues_after_its_commit",
    "test_a_partition_of_only_aborted_records_does_not_hang",
    "test_starting_timestamp_inside_a_batch",
]


@pytest.mark.parametrize("name", SOURCE_TESTS)
def test_source_on_apache_kafka(spark, apache_kafka, uniq, tmp_path, name):
    fn = getattr(source_tests, name)
    given = {"spark": spark, "broker": apache_kafka, "uniq": uniq, "tmp_path": tmp_path}
    fn(**{arg: given[arg] for arg in inspect.signature(fn).parameters})


def _batch_atomicity_run(spark, cluster, tmp_path, uniq, *, barrier: bool = True):
    """Transactional input through the source and the exactly-once sink (atomicity=batch),
    three write tasks per micro-batch into one output partition, their EndTxns 250 ms apart,
    a read_committed reader polling the output. Returns (what it saw, whole-batch counts)."""
    bootstrap = cluster.bootstrap
    inp, out = f"in-{uniq}", f"res-{uniq}"
    committed = fill_input(bootstrap, inp, 900)  # also makes out-<uniq>, unused here
    create_replicated_topic(bootstrap, out, 1)
    ckpt = str(tmp_path / "ck")
    with EofReader(bootstrap, out, 1, committed) as reader:
        q = (partition_tests.source_tagged(spark, bootstrap, inp, 150).writeStream.format("oncelog")
             .option("kafka.bootstrap.servers", bootstrap).option("topic", out).option("checkpointLocation", ckpt)
             .option("oncelog.test.commitStaggerMs", 250).option("oncelog.test.barrier", str(barrier).lower())
             .trigger(availableNow=True).start())
        try:
            assert q.awaitTermination(180), "query did not finish"
            assert q.exception() is None, q.exception()
            batches = [p["batchId"] for p in q.recentProgress if p["numInputRows"] > 0]
        finally:
            q.stop()
        seen = reader.finish()
    assert len(batches) >= 4, batches
    assert seen[0][-1] == committed
    d = check_exactly_once(bootstrap, inp, out, committed)
    assert not d["open_transactions"], d
    assert_no_open_transaction(cluster, partition_tests.query_prefix(ckpt))
    return seen, whole_batch_counts(bootstrap, out, 1, ckpt, committed)


def test_exactly_once_batch_atomicity_on_apache_kafka(spark, apache_kafka, tmp_path, uniq):
    """A quarter of the input's transactions aborted; the audit finds every committed input
    once, and the polling reader saw whole micro-batches only (the visibility barrier)."""
    seen, whole = _batch_atomicity_run(spark, apache_kafka, tmp_path, uniq)
    assert_no_partial_batch(seen, whole)


@pytest.mark.skipif(not FULL, reason="control run: ONCELOG_SOAK=full")
def test_control_without_the_barrier_a_reader_sees_partial_batches_on_apache_kafka(spark, apache_kafka, tmp_path, uniq):
    """Shows that the check above can fail on Apache Kafka: without the barrier, the reader
    sees the staggered EndTxns one by one."""
    seen, whole = _batch_atomicity_run(spark, apache_kafka, tmp_path, uniq, barrier=False)
    assert set(seen[0]) - whole[0], f"expected partial batches without the barrier; saw {sorted(set(seen[0]))}"


def test_atomicity_partition_on_apache_kafka(spark, apache_kafka, tmp_path, uniq):
    """atomicity=partition: rows and progress marker in one task transaction; the markers are
    Kafka consumer-group offsets (read back with kafka-python); a replayed batch writes nothing."""
    partition_tests.test_stream_writes_exactly_once_and_a_replayed_batch_writes_nothing(
        spark, apache_kafka, tmp_path, uniq)


# ---------------------------------------------------------------------------------------------
# Three nodes: brokers SIGKILLed during the sink's commit, and the driver SIGKILLed


N = 900  # input records over 3 partitions, transactions of 100, every 4th aborted
JOB_TIMEOUT = 420  # per driver run: ~35 s on a quiet machine


def _wait_file(path: str, job: threading.Thread, log: str, timeout: float = JOB_TIMEOUT) -> dict:
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        assert job.is_alive(), f"the job ended before {os.path.basename(path)}\n{tail(log)}"
        assert time.monotonic() < deadline, f"no {os.path.basename(path)} after {timeout} s\n{tail(log)}"
        time.sleep(0.05)
    with open(path) as f:
        return json.load(f)


def _wait_full_isr(cluster, topics: list[str], timeout: float = 120) -> None:
    """Every partition of ``topics`` has all three replicas in sync again (the restarted node
    caught up), so the next kill leaves two in-sync replicas: min.insync.replicas holds."""
    deadline = time.monotonic() + timeout
    while True:
        meta = cluster.metadata(topics)
        if all(t.error_code == 0 and all(len(p.isr_nodes) == 3 for p in t.partitions) for t in meta.topics):
            return
        assert time.monotonic() < deadline, f"the ISR of {topics} did not fill again: {meta}"
        time.sleep(0.2)


def decided_open_transactions(cluster, prefix: str) -> list[str]:
    """The still-open transactions of the query's pending decision (read from the sink's
    commit log, as a restart reads it), checked against Kafka's own listing."""
    client = KafkaClient(cluster.bootstrap)
    try:
        decision = CommitLog(client, cluster.bootstrap, DEFAULT_COMMIT_LOG_TOPIC).latest(prefix)
    finally:
        client.close()
    assert decision is not None and decision.state == PENDING, decision
    states = {t["TransactionalId"]: t["TransactionState"] for t in kafka_transactions(cluster)}
    return [t.transactional_id for t in decision.txns if states.get(t.transactional_id) == "Ongoing"]


def test_broker_sigkills_during_the_commit_on_three_brokers(apache_kafka_cluster, tmp_path, uniq):
    """Batch 1's commit pauses after its first EndTxn: the broker leading an output partition
    (preferably one that coordinates none of the batch's open transactions) is SIGKILLed, the
    commit goes on, the broker restarts. Batch 2's commit pauses likewise: the broker that
    coordinates the batch's still-open transactions is SIGKILLed, and stays dead to the end.
    The job finishes in one run; the audit finds every committed input exactly once, a reader
    polling the output throughout saw whole micro-batches only, and no transaction is open."""
    cluster = apache_kafka_cluster
    bootstrap = cluster.bootstrap
    inp, out = f"in-{uniq}", f"out-{uniq}"
    committed = fill_input(bootstrap, inp, N, replication_factor=-1)
    pause = tmp_path / "pause"
    pause.mkdir()
    ckpt, log = str(tmp_path / "ckpt"), str(tmp_path / "job.log")
    env = {"ONCELOG_SPARK_COMMIT_PAUSE": str(pause), "ONCELOG_SPARK_COMMIT_PAUSE_BATCHES": "1,2"}
    with EofReader(bootstrap, out, 3, committed) as reader:
        result: dict[str, int] = {}
        job = threading.Thread(target=lambda: result.setdefault(
            "rc", run_job(bootstrap, inp, out, ckpt, env=env, log_path=log, timeout=JOB_TIMEOUT)), daemon=True)
        job.start()
        killed = []
        try:
            # Batch 1: the leader of an output partition.
            info = _wait_file(str(pause / "paused.1"), job, log)
            assert info["open"], info
            coordinators = {cluster.transaction_coordinator(t) for t in info["open"]}
            leaders = {p: cluster.leader_of(out, p) for p in range(3)}
            victim = next((n for n in leaders.values() if n not in coordinators), leaders[0])
            cluster.kill(victim)
            killed.append(("leader", victim))
            (pause / "go.1").touch()
            new_leaders = {p: cluster.wait_for_leader(out, p, not_on=victim) for p, n in leaders.items() if n == victim}
            assert new_leaders and victim not in new_leaders.values()
            cluster.restart(victim)
            _wait_full_isr(cluster, [inp, out, "__transaction_state", DEFAULT_COMMIT_LOG_TOPIC])
            # Batch 2: the coordinator of its still-open transactions.
            info = _wait_file(str(pause / "paused.2"), job, log)
            victim = cluster.transaction_coordinator(info["open"][0])
            cluster.kill(victim)
            killed.append(("coordinator", victim))
            (pause / "go.2").touch()
            job.join(JOB_TIMEOUT)
            assert result.get("rc") == 0, f"the job failed ({result}) after killing {killed}:\n{tail(log, 80)}"
            assert cluster.transaction_coordinator(info["open"][0]) != victim
        finally:
            (pause / "go.1").touch()
            (pause / "go.2").touch()
        seen = reader.finish()
        assert_no_partial_batch(seen, whole_batch_counts(bootstrap, out, 3, ckpt, committed))
        d = check_exactly_once(bootstrap, inp, out, committed)
        assert not d["open_transactions"], d
        assert_no_open_transaction(cluster, partition_tests.query_prefix(ckpt))
        # the commit did meet the dead brokers: the sink retried, or its client asked for a successor
        met = tail(log, 5000)
        assert "retrying on a fresh client" in met or "asking for its successor" in met, tail(log, 40)


def _plan_coordinator_kill(cluster, out: str, prefix: str, still_open: list[str]) -> int | None:
    """For a batch paused between its first and second EndTxn: the broker to SIGKILL, or None if
    the current placement cannot show the window. It coordinates the batch's still-open
    transactions (its successor, once Kafka fenced it, loads them and answers their EndTxn), not
    the barrier (whose abort must not be slowed down with them), and leads a partition of
    ``out`` (the new coordinator's COMMIT markers to it wait for a new leader too)."""
    victim = cluster.transaction_coordinator(still_open[0])
    if victim == cluster.transaction_coordinator(prefix + ".barrier"):
        return None
    if victim not in {cluster.leader_of(out, p) for p in range(3)}:
        return None
    return victim


def _elect_preferred_leaders(bootstrap: str, topics: list[str]) -> None:
    """Kafka's preferred leader election (ElectLeaders, what ``kafka-leader-election`` sends) for
    every partition of ``topics``: a restarted broker leads its partitions again."""
    from confluent_kafka import ElectionType, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    meta = admin.list_topics(timeout=30)
    partitions = [TopicPartition(t, p) for t in topics for p in meta.topics[t].partitions]
    try:
        admin.elect_leaders(ElectionType.PREFERRED, partitions).result(timeout=60)
    except Exception as exc:  # noqa: BLE001 - ELECTION_NOT_NEEDED for partitions already led right
        if "ELECTION_NOT_NEEDED" not in str(exc).upper():
            raise
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # until the answers' leaders are the preferred replicas
        meta = admin.list_topics(timeout=30)
        if all(pm.leader == pm.replicas[0] for t in topics for pm in meta.topics[t].partitions.values()):
            return
        time.sleep(0.2)


def _choose_prefix(cluster, out: str, uniq: str) -> str:
    """A transactionalIdPrefix under which the first batch can be planned: the coordinator of
    ``<prefix>-g0-1-0`` (the first run's task 1, still open at the pause) is not the barrier's
    and leads a partition of ``out``. Coordinators are Kafka's (FindCoordinator): try names."""
    for n in range(100):
        prefix = f"eos-{uniq}-{n}"
        if _plan_coordinator_kill(cluster, out, prefix, [f"{prefix}-g0-1-0"]) is not None:
            return prefix
    raise AssertionError("no prefix with the coordinators the test needs in 100 tries")


def marker_window_run(cluster, tmp_path, uniq: str, *, batches: int, await_complete: bool = True) -> dict:
    """One job of ``batches`` paused micro-batches (after the first) on three brokers. At each,
    between its first and second EndTxn, the coordinator of its still-open transactions is
    SIGKILLed (:func:`_plan_coordinator_kill`), so their EndTxn is answered by its successor
    after a failover and their COMMIT markers are written after that answer, some through a new
    partition leader, while a reader polls the output. Returns the batches exercised and what
    the reader saw at each partition end."""
    bootstrap = cluster.bootstrap
    inp, out = f"in-{uniq}", f"out-{uniq}"
    committed = fill_input(bootstrap, inp, 300 * (batches + 1), replication_factor=-1, abort_every=0)
    prefix = _choose_prefix(cluster, out, uniq)
    pause = tmp_path / "pause"
    pause.mkdir()
    ckpt, log = str(tmp_path / "ckpt"), str(tmp_path / "job.log")
    env = {"ONCELOG_SPARK_COMMIT_PAUSE": str(pause),
           "ONCELOG_SPARK_COMMIT_PAUSE_BATCHES": ",".join(str(b) for b in range(1, batches + 1))}
    options = {} if await_complete else {"awaitComplete": "false"}
    exercised = []
    with EofReader(bootstrap, out, 3, committed) as reader:
        result: dict[str, int] = {}
        job = threading.Thread(target=lambda: result.setdefault("rc", run_job(
            bootstrap, inp, out, ckpt, env=env, log_path=log, timeout=JOB_TIMEOUT + 60 * batches, prefix=prefix,
            test_options=options)), daemon=True)
        job.start()
        try:
            for b in range(1, batches + 1):
                info = _wait_file(str(pause / f"paused.{b}"), job, log)
                restarted = [n for n in cluster.node_ids() if n not in cluster.live_node_ids()]
                for node in restarted:  # the previous batch's victim is back and caught up
                    cluster.restart(node)
                _wait_full_isr(cluster, [inp, out, "__transaction_state", DEFAULT_COMMIT_LOG_TOPIC])
                if restarted:  # leaders and coordinators back where they were: the same plan holds
                    _elect_preferred_leaders(bootstrap, [out, "__transaction_state"])
                victim = _plan_coordinator_kill(cluster, out, prefix, info["open"]) if info["open"] else None
                if victim is not None:
                    cluster.kill(victim)
                    exercised.append((b, victim))
                (pause / f"go.{b}").touch()
            job.join(JOB_TIMEOUT + 60 * batches)
            assert result.get("rc") == 0, f"the job failed ({result}) after {exercised}:\n{tail(log, 80)}"
        finally:
            for name in os.listdir(pause):
                if name.startswith("paused."):
                    (pause / name.replace("paused.", "go.", 1)).touch()
            cluster.ensure_running()
        seen = reader.finish()
    whole = whole_batch_counts(bootstrap, out, 3, ckpt, committed)
    partial = {p: sorted(set(counts) - whole[p]) for p, counts in seen.items() if set(counts) - whole[p]}
    d = check_exactly_once(bootstrap, inp, out, committed)
    assert not d["open_transactions"], d
    return {"exercised": exercised, "partial": partial, "seen": seen, "prefix": prefix}


def test_barrier_waits_for_the_commit_markers_through_a_coordinator_sigkill(apache_kafka_cluster, tmp_path, uniq):
    """Kafka answers EndTxn once a commit is prepared; its markers follow.
    Here the coordinator of a batch's still-open transactions is SIGKILLed between two of the
    batch's EndTxns, so the rest are answered by its successor after a failover and their
    markers follow that answer (to a partition that also lost its leader). The barrier must
    stay up until every transaction is CompleteCommit: a reader polling the output sees whole
    micro-batches only, and the audit finds every input once. ONCELOG_SOAK=full repeats it over
    more batches, and runs the control (no wait) that shows the window is there to close."""
    r = marker_window_run(apache_kafka_cluster, tmp_path, uniq, batches=12 if FULL else 2)
    print(f"exercised {len(r['exercised'])} batches: {r['exercised']}")
    assert r["exercised"], "no batch had its coordinators placed so that the window could be shown"
    assert not r["partial"], f"a reader saw part of a micro-batch: {r['partial']} (exercised {r['exercised']})"


@pytest.mark.slow
@pytest.mark.skipif(not FULL, reason="control run: ONCELOG_SOAK=full")
def test_control_without_the_wait_a_reader_can_see_part_of_a_batch(apache_kafka_cluster, tmp_path, uniq):
    """The same kills with ``oncelog.test.awaitComplete=false``: the barrier ends right after the
    EndTxns, with no wait for CompleteCommit and before the done write (the order that once let
    a reader see part of a batch here). Reports how often a reader then sees part of a batch."""
    r = marker_window_run(apache_kafka_cluster, tmp_path, uniq, batches=12, await_complete=False)
    print(f"control: exercised {len(r['exercised'])} batches, partial views {r['partial']}")
    assert r["exercised"], r


def test_crash_points_and_a_dead_coordinator_on_three_brokers(spark, apache_kafka_cluster, tmp_path, uniq):
    """The crash matrix's points where Kafka's transaction coordinator does the work, on three
    brokers, in one driver run and its restart. A write task's Python worker is killed once
    right after it sent its rows: its transaction stays open, Spark retries the task (local[2,3]),
    and the commit's sweep must abort the orphan through ListTransactions and InitProducerId.
    Then the driver (JVM and Python) is SIGKILLed between batch 1's first and second EndTxn: a
    decided batch, half committed. The broker coordinating the decided batch's still-open
    transactions is SIGKILLed too, and the restart (in this session's SparkSession, on the same
    checkpoint, with that broker still dead) rolls the decision forward through the transactions'
    new coordinator, from another process, by (producer id, epoch)."""
    cluster = apache_kafka_cluster
    bootstrap = cluster.bootstrap
    inp, out = f"in-{uniq}", f"out-{uniq}"
    committed = fill_input(bootstrap, inp, N, replication_factor=-1)
    ckpt, log = str(tmp_path / "ckpt"), str(tmp_path / "job.log")
    env = {"ONCELOG_SPARK_CRASH_POINT": "between-commits", "ONCELOG_SPARK_CRASH_ONCE": str(tmp_path / "crashed"),
           "ONCELOG_SPARK_CRASH_AFTER_BATCH": "0",
           "ONCELOG_SPARK_TASK_FAULT": "exit", "ONCELOG_SPARK_TASK_FAULT_ONCE": str(tmp_path / "task-failed")}
    rc = run_job(bootstrap, inp, out, ckpt, env=env, log_path=log, master="local[2,3]", timeout=JOB_TIMEOUT)
    assert rc == -9, f"expected the between-commits crash point to SIGKILL the driver, exit code {rc}\n{tail(log)}"
    assert (tmp_path / "crashed.between-commits").exists() and (tmp_path / "task-failed").exists()
    prefix = partition_tests.query_prefix(ckpt)
    decided = decided_open_transactions(cluster, prefix)
    assert decided, "batch 1 was decided with a single transaction: nothing left between two EndTxns"
    victim = cluster.transaction_coordinator(decided[0])
    cluster.kill(victim)
    q = (partition_tests.source_tagged(spark, bootstrap, inp).writeStream.format("oncelog")
         .option("kafka.bootstrap.servers", bootstrap).option("topic", out).option("checkpointLocation", ckpt)
         .trigger(availableNow=True).start())
    try:
        assert q.awaitTermination(JOB_TIMEOUT), "the restart did not finish"
        assert q.exception() is None, q.exception()
        assert [p["batchId"] for p in q.recentProgress if p["numInputRows"] > 0][0] == 1, q.recentProgress
    finally:
        q.stop()
    assert cluster.transaction_coordinator(decided[0]) != victim
    d = check_exactly_once(bootstrap, inp, out, committed)
    assert not d["open_transactions"], d
    assert_no_open_transaction(cluster, prefix)


POINTS = ["task-write", "before-commit", "after-decision", "between-commits", "after-commits"]


@pytest.mark.slow
@pytest.mark.skipif(not FULL, reason="the whole crash matrix on three brokers: ONCELOG_SOAK=full "
                                     "(CI runs its representative points above)")
def test_crash_matrix_on_three_brokers(apache_kafka_cluster, tmp_path, uniq):
    """tests/spark/test_sink_crash.py's matrix on three brokers: a driver SIGKILL at every point
    of the write/commit protocol, a write task's Python worker killed once, and after the
    after-decision kill the coordinator of the decided transactions SIGKILLed and restarted."""
    cluster = apache_kafka_cluster
    bootstrap = cluster.bootstrap
    inp, out = f"in-{uniq}", f"out-{uniq}"
    committed = fill_input(bootstrap, inp, 1500, replication_factor=-1)
    ckpt, log = str(tmp_path / "ckpt"), str(tmp_path / "job.log")
    env = {"ONCELOG_SPARK_CRASH_POINT": ",".join(POINTS), "ONCELOG_SPARK_CRASH_ONCE": str(tmp_path / "crashed"),
           "ONCELOG_SPARK_CRASH_AFTER_BATCH": "0",
           "ONCELOG_SPARK_TASK_FAULT": "exit", "ONCELOG_SPARK_TASK_FAULT_ONCE": str(tmp_path / "task-failed")}
    for point in POINTS:
        rc = run_job(bootstrap, inp, out, ckpt, env=env, log_path=log, master="local[2,3]", timeout=JOB_TIMEOUT)
        assert rc == -9, f"expected the crash point {point} to SIGKILL the driver, exit code {rc}\n{tail(log)}"
        assert os.path.exists(f"{tmp_path / 'crashed'}.{point}"), f"the run was killed, but not at {point}"
        if point == "after-decision":
            decided = decided_open_transactions(cluster, partition_tests.query_prefix(ckpt))
            victim = cluster.transaction_coordinator(decided[0])
            cluster.kill(victim)
            cluster.restart(victim)
    rc = run_job(bootstrap, inp, out, ckpt, env=env, log_path=log, master="local[2,3]", timeout=JOB_TIMEOUT)
    assert rc == 0, f"final restart failed ({rc}):\n{tail(log)}"
    assert (tmp_path / "task-failed").exists()
    d = check_exactly_once(bootstrap, inp, out, committed)
    assert not d["open_transactions"], d
    assert_no_open_transaction(cluster, partition_tests.query_prefix(ckpt))
