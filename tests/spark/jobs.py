"""Helpers for the sink's crash tests: input data, running the job in a process group, audit."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

from oncelog.audit import audit
from oncelog.process import tail_file as tail  # noqa: F401 (the spark tests import it from here)

from ..helpers import create_topic
from .conftest import ROOT, driver_java_options, spark_env


def create_replicated_topic(bootstrap: str, name: str, partitions: int, replication_factor: int = 1) -> None:
    """``replication_factor=-1``: the cluster's default.replication.factor (3 on the 3-node
    Apache Kafka cluster)."""
    if replication_factor == 1:
        create_topic(bootstrap, name, partitions)
        return
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, replication_factor)])[name].result(timeout=60)


def fill_input(bootstrap: str, topic: str, n: int, *, partitions: int = 3, abort_every: int = 4,
               txn_size: int = 100, replication_factor: int = 1) -> int:
    """Write ``n`` records in transactions of ``txn_size``; every ``abort_every``-th transaction
    is aborted on purpose. Returns the number of committed records."""
    create_replicated_topic(bootstrap, topic, partitions, replication_factor)
    create_replicated_topic(bootstrap, topic.replace("in-", "out-", 1), partitions, replication_factor)
    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": f"fill-{topic}", "linger.ms": 5})
    p.init_transactions(30)
    committed = 0
    for t, start in enumerate(range(0, n, txn_size)):
        p.begin_transaction()
        count = min(txn_size, n - start)
        for i in range(start, start + count):
            p.produce(topic, key=b"k%d" % i, value=b"order-%d" % i)
        if abort_every and t % abort_every == abort_every - 1:
            try:
                p.abort_transaction(30)
            except ck.KafkaException as exc:
                # An abort right after produce() (records purged in the client) races librdkafka's
                # partition registration; Apache Kafka then answers EndTxn INVALID_TXN_STATE, fatal
                # to the producer (seen once in CI on three Kafka brokers). The transaction was to
                # be aborted anyway: a new producer's InitProducerId aborts it.
                if not exc.args[0].fatal():
                    raise
                p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": f"fill-{topic}", "linger.ms": 5})
                p.init_transactions(30)
        else:
            p.commit_transaction(30)
            committed += count
    return committed


def run_job(bootstrap: str, input_topic: str, output_topic: str, checkpoint: str, *, env: dict | None = None,
            log_path: str, timeout: float = 300, max_per_trigger: int = 300, guarantee: str = "exactly-once",
            master: str = "local[2]", atomicity: str = "batch", prefix: str | None = None,
            test_options: dict[str, str] | None = None) -> int:
    """Run tests/spark/eos_job.py in a new process group; returns its exit code (-9 after a
    crash point's SIGKILL)."""
    cmd = [sys.executable, "-m", "tests.spark.eos_job", "--bootstrap", bootstrap, "--input", input_topic,
           "--output", output_topic, "--checkpoint", checkpoint, "--max-per-trigger", str(max_per_trigger),
           "--guarantee", guarantee, "--atomicity", atomicity, "--master", master, "--timeout", str(timeout - 30)]
    java_options = driver_java_options()
    if java_options:
        cmd.append(f"--java-options={java_options}")
    if prefix:
        cmd += ["--prefix", prefix]
    for name, value in (test_options or {}).items():
        cmd += ["--test-option", f"{name}={value}"]
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, env={**spark_env(), **(env or {})}, stdout=log, stderr=log,
                                start_new_session=True)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
            raise AssertionError(f"the job did not finish in {timeout} s; see {log_path}")
        finally:
            _reap_group(proc.pid)


def _reap_group(pgid: int) -> None:
    """Kill what is left of the job's process group (Python workers outlive a killed JVM)."""
    try:
        os.killpg(pgid, 9)
    except ProcessLookupError:
        pass
    time.sleep(0.2)


def check_exactly_once(bootstrap: str, input_topic: str, output_topic: str, committed: int):
    """Independent read_committed check (confluent-kafka, through the auditor)."""
    result = audit(bootstrap, [input_topic], [output_topic], timeout=60)
    d = result.to_dict()
    assert d["input_records"] == committed, d
    assert (d["lost"], d["duplicated"], d["aborted_reads"], d["phantom"]) == (0, 0, 0, 0), d
    assert d["output_records"] == committed, d
    return d


_CAUSE = re.compile(r"^\s*(?:E\s+)?(?::\s*)?((?:Caused by: )?[\w.]*(?:Error|Exception|Exit)\b:? .*)$")


def root_causes(exc: BaseException | str, limit: int = 6) -> str:
    """The error lines of a Spark failure's text (a query's exception wraps Py4J errors, Java
    stack traces and the Python tracebacks of tasks and of the commit runner), deepest last, each
    once: what an assertion message should open with, before CI output cuts the middle away."""
    seen: list[str] = []
    for line in str(exc).splitlines():
        m = _CAUSE.match(line)
        if m and "\tat " not in line:
            cause = m.group(1).strip()[:300]
            if cause not in seen:
                seen.append(cause)
    return "\n".join(seen[-limit:]) or str(exc)[:300]
