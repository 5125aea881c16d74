"""Scale-out: the exactly-once job on a Spark standalone cluster (master and worker JVMs started
with pyspark's ``spark-class``, on loopback), so that reads and write tasks run in executors:
JVMs launched by the worker in directories of their own, whose Python workers import the
installed ``oncelog`` package (no PYTHONPATH, not run from the source tree).

The driver is SIGKILLed once, right after a batch's commit decision; the standalone master must
then remove the dead application (its executors killed, their Python workers gone), and the
restarted driver must get executors of its own from the same cluster and finish the job. The
auditor checks exactly-once against the real broker afterwards.
"""

from __future__ import annotations

import os
import time

import pytest

from .cluster import StandaloneCluster, java_missing
from .jobs import check_exactly_once, fill_input, run_job, tail

N = 800  # input records over 3 partitions in transactions of 100; every 4th transaction aborted
MAX_PER_TRIGGER = 300  # 3 micro-batches: batch 1 (the crash) has a successor
JOB_TIMEOUT = 300  # per driver run: 25-40 s on a quiet machine, 70 s seen under load
# eos_job has no --conf option: executor settings reach spark-submit through PYSPARK_SUBMIT_ARGS
# (read by pyspark's java_gateway). Executors are JVMs of their own: small heap, quick start.
EXECUTOR_CONF = ("--conf spark.executor.memory=512m "
                 "--conf 'spark.executor.extraJavaOptions=-XX:TieredStopAtLevel=1 -XX:+UseSerialGC' pyspark-shell")


@pytest.fixture
def spark_cluster(tmp_path):
    if java_missing():
        pytest.skip("java is not installed: a Spark standalone cluster (master, worker, executors) needs a JVM")
    cluster = StandaloneCluster(tmp_path / "cluster", cores=2, memory="1g").start()
    try:
        yield cluster
    finally:
        cluster.stop()


def _poll(cond, timeout: float, what: str, diag):
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}\n{diag()}")
        time.sleep(0.5)


def _executors(cluster: StandaloneCluster) -> tuple[list[dict], list[dict]]:
    """The worker's running and finished executors (each with appid and memory in MiB)."""
    w = cluster.worker_state()
    return w.get("executors") or [], w.get("finishedexecutors") or []


def test_exactly_once_on_standalone_cluster_through_driver_sigkill(spark_cluster, broker, tmp_path, uniq):
    inp, out = f"in-{uniq}", f"out-{uniq}"
    committed = fill_input(broker.bootstrap, inp, N)  # while the cluster boots in the background
    master = spark_cluster.wait_ready()
    ckpt, log = str(tmp_path / "ckpt"), str(tmp_path / "job.log")
    env = {"ONCELOG_SPARK_CRASH_POINT": "after-decision", "ONCELOG_SPARK_CRASH_ONCE": str(tmp_path / "crashed"),
           "ONCELOG_SPARK_CRASH_AFTER_BATCH": "0", "PYSPARK_SUBMIT_ARGS": EXECUTOR_CONF, "SPARK_LOCAL_IP": "127.0.0.1"}

    def diag() -> str:
        return f"--- job.log\n{tail(log)}\n{spark_cluster.diagnostics()}"

    def run() -> int:
        return run_job(broker.bootstrap, inp, out, ckpt, env=env, log_path=log, master=master,
                       timeout=JOB_TIMEOUT, max_per_trigger=MAX_PER_TRIGGER)

    # Run 1: SIGKILLed (driver JVM and Python) right after batch 1's commit decision.
    rc = run()
    assert rc == -9, f"expected the after-decision crash point to SIGKILL the driver, exit code {rc}\n{diag()}"
    assert os.path.exists(f"{tmp_path / 'crashed'}.after-decision"), "the driver died, but not at after-decision"

    # The master notices the dead driver and removes its application; the worker kills the
    # application's executors, and their Python daemons and workers go with them.
    state = _poll(lambda: (lambda s: s if s.get("completedapps") and not s.get("activeapps") else None)(
        spark_cluster.master_state()), 120, "the master to remove the killed driver's application", diag)
    assert [a["name"] for a in state["completedapps"]] == ["oncelog-eos-job"], state["completedapps"]
    app1 = state["completedapps"][0]["id"]
    _poll(lambda: (lambda r, f: not r and any(e["appid"] == app1 for e in f))(*_executors(spark_cluster)), 120,
          f"the worker to kill {app1}'s executors", diag)
    _poll(lambda: not spark_cluster.pids_under(spark_cluster.work_dir / app1), 60,
          f"{app1}'s executor JVMs and Python workers to exit", diag)
    assert spark_cluster.worker_state().get("coresused") == 0, spark_cluster.worker_state()

    # Run 2: the restart on the same cluster gets executors of its own and finishes the job.
    rc = run()
    assert rc == 0, f"the restart failed ({rc})\n{diag()}"
    state = _poll(lambda: (lambda s: s if len(s.get("completedapps") or []) == 2 else None)(
        spark_cluster.master_state()), 60, "the master to list the second application as completed", diag)
    app2 = next(a["id"] for a in state["completedapps"] if a["id"] != app1)
    finished = _poll(lambda: (lambda r, f: f if any(e["appid"] == app2 for e in f) else None)(
        *_executors(spark_cluster)), 60, f"{app2}'s executors in the worker's list", diag)
    assert {e["appid"] for e in finished} == {app1, app2}, finished
    assert {e["memory"] for e in finished} == {512}, finished  # spark.executor.memory=512m
    assert "Finished task" in spark_cluster.executor_logs(app2), f"{app2}'s executors ran no task\n{diag()}"

    d = check_exactly_once(broker.bootstrap, inp, out, committed)
    assert not d.get("open_transactions"), d
