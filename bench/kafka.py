"""Apache Kafka as a benchmark target, and Kafka's own perf tools as load generators.

Targets. ``kafka`` is one Apache Kafka node (oncelog.tools.apache_kafka.KafkaCluster: KRaft, combined
controller+broker, loopback) with the full JIT (``quick_start=False``) and a :data:`HEAP` heap;
its settings are Kafka's defaults except what :func:`broker_config` lists (KafkaCluster's own
choices for a 2-core machine: 2 network and 2 I/O threads, replication factor 1, no initial
rebalance delay; and the bench's partition count). Kafka does not fsync per acknowledgement by
default (``flush.messages`` is Long.MAX_VALUE: the page cache and replication are its
durability), so ``kafka`` pairs with ``oncelog-never``; ``kafka+flush1`` sets
``log.flush.interval.messages=1`` (the broker default of the topic config ``flush.messages``: an
fsync of the segment after every append, before the acknowledgement) and pairs with
``oncelog-always``. :data:`PAIRS` is that pairing; the report's "oncelog / Apache Kafka" table
prints each pair side by side with the ratios of throughput and of broker CPU per record.

Broker CPU. RunningBroker.cpu_seconds() reads utime+stime of ``/proc/<pid>/stat``; for the
JVM's pid that is the whole thread group (Linux sums every thread's time into the process's
line, including threads that have exited): request handlers, network threads, the log cleaner,
GC and the JIT compiler threads all count, as every thread of oncelog's process does.

Java perf tools. :func:`run_java_produce` and :func:`run_java_consume` are worker-pool jobs
(bench/workers.py) that run ``org.apache.kafka.tools.ProducerPerformance`` /
``ConsumerPerformance`` from the cached kafka-tools jar and parse their summary lines.
ProducerPerformance takes a record count, not a duration: the runner asks for
``duration x`` the rate last measured for that cell (a first guess in the first round), so cells
last about ``duration``. The first :data:`WARMUP_SHARE` of its records are ``--warmup-records``
(the client JVM's JIT warm-up: a fresh JVM per cell); the cell's rate and p50/p99 latency are
the tool's steady-state line (up to ``producer.close()``, i.e. every record acknowledged), while
the records read back and the broker CPU per record count the whole run, warm-up included
(the broker's CPU is measured around the whole tool; its CPU % is over the tool's own time). ConsumerPerformance reads the acknowledged count back with its own
group (one per process), its rate over ``fetch.time.ms`` (the group join excluded).
"""

from __future__ import annotations

import os
import re
import subprocess
import time

from oncelog.tools import apache_kafka

HEAP = "1g"  # -Xmx of the Kafka node (Kafka's own kafka-server-start.sh uses 1 GB)
CLIENT_HEAP = "512m"  # -Xmx of each perf-tool JVM
# oncelog target -> the Apache Kafka target with the same durability per acknowledgement
# (oncelog-<fsync>:nodes2 is the same broker as a cluster of two node processes, bench/modes.py)
PAIRS = {"oncelog-never": "kafka", "oncelog-always": "kafka+flush1",
         "oncelog-never:nodes2": "kafka", "oncelog-always:nodes2": "kafka+flush1"}
FLUSH1 = {"log.flush.interval.messages": "1"}
# ProducerPerformance's first guess of one process's records/s (1 KB records), before a cell of
# that target and mode has been measured (the warm-up measures it for the Kafka targets). Low on
# purpose: kafka+flush1 takes ~2-3k records/s per process from the Java client here (an fsync per
# 16 KB batch), and a first cell sized for a faster broker took minutes.
FIRST_GUESS_RECORDS_PER_S = 15_000


def broker_config(flush1: bool, partitions: int, extra: dict | None = None) -> dict[str, str]:
    """The server properties the bench adds to KafkaCluster's (which are listed in the output)."""
    return {"num.partitions": str(partitions), **(FLUSH1 if flush1 else {}), **(extra or {})}


def settings_text(cluster: apache_kafka.KafkaCluster) -> str:
    """What differs from Kafka's defaults on this node, for the run's header and BENCHMARKS.md."""
    props = {}
    node = next(iter(cluster.members.values()))
    with open(node.config_path) as f:
        for line in f:
            key, _, value = line.strip().partition("=")
            props[key] = value
    shown = ["num.network.threads", "num.io.threads", "num.partitions", "log.flush.interval.messages"]
    return (f"Apache Kafka {cluster.installation.version}, 1 node KRaft, -Xmx{cluster.heap} SerialGC full JIT; "
            + ", ".join(f"{k}={props[k]}" for k in shown if k in props))


def start(flush1: bool, work_dir: str, partitions: int, extra: dict | None = None) -> apache_kafka.KafkaCluster:
    """One Kafka node for the bench, its transaction and group coordinators loaded (the first
    FindCoordinator creates __transaction_state / __consumer_offsets, 50 partitions each: done here,
    outside every measured window)."""
    cluster = apache_kafka.KafkaCluster(nodes=1, heap=HEAP, quick_start=False,
                                        workdir=os.path.join(work_dir, "kafka+flush1" if flush1 else "kafka"),
                                        config=broker_config(flush1, partitions, extra))
    cluster.start()
    try:
        cluster.coordinator_of("bench-prime", key_type=1, timeout=120)
        cluster.coordinator_of("bench-prime", key_type=0, timeout=120)
    except Exception:
        cluster.stop(graceful=False)
        raise
    return cluster


# --------------------------------------------------------------------------- Java perf tools

def tool_command(main_class: str, args: list[str]) -> list[str]:
    """``java ... main_class args`` on the cached Kafka jars (oncelog.tools.apache_kafka.tool_command:
    log4j2 at WARN to stderr, so stdout is the tool's output alone), with the full JIT."""
    return apache_kafka.tool_command(main_class, args, heap=CLIENT_HEAP, quick_start=False)


def _props(conf: dict) -> list[str]:
    return [f"{k}={v}" for k, v in conf.items()]


def _security(job: dict) -> dict:
    if job.get("security"):
        raise ValueError("the Java perf-tool modes run over PLAINTEXT only")
    return {}


_PRODUCE_TOTAL = re.compile(
    r"(\d+)( steady state)? records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th")
WARMUP_SHARE = 0.25  # of each ProducerPerformance run: --warmup-records, outside the steady-state figures
_EXCEPTION = re.compile(r"^(?:[\w.$]+(?:Exception|Error))(?::|$)")


def _run(cmd: list[str], timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def run_java_produce(job: dict, barrier) -> dict:
    """ProducerPerformance: ``job["records"]`` records of ``job["size"]`` bytes, no throttle,
    ``job["producer"]`` as --command-property; transactional with --transaction-duration-ms when
    ``txn_commit_ms`` is set (one transactional id per process)."""
    from .workers import BARRIER_TIMEOUT

    _security(job)
    args = ["--bootstrap-server", job["bootstrap"], "--topic", job["topic"], "--num-records", job["records"],
            "--warmup-records", int(job["records"] * WARMUP_SHARE),
            "--record-size", job["size"], "--throughput", "-1", "--reporting-interval", "600000",
            "--command-property", f"client.id=bench-java-p{job['worker']}", *_props(job["producer"])]
    if job.get("txn_commit_ms"):
        args += ["--transactional-id", f"{job['topic']}-w{job['worker']}",
                 "--transaction-duration-ms", job["txn_commit_ms"]]
    cmd = tool_command("org.apache.kafka.tools.ProducerPerformance", args)
    barrier.wait(BARRIER_TIMEOUT)
    t0 = time.monotonic()
    done = _run(cmd, job.get("timeout", 600))
    t_end = time.monotonic()
    lines = [m for m in map(_PRODUCE_TOTAL.search, done.stdout.splitlines()) if m]
    totals = [m for m in lines if not m.group(2)]
    steady = [m for m in lines if m.group(2)] or totals
    failures = [line for line in done.stderr.splitlines() if _EXCEPTION.match(line)]
    if not totals:
        raise RuntimeError(f"ProducerPerformance exit {done.returncode}, no summary: "
                           f"{(done.stderr or done.stdout).strip()[-400:]}")
    total, m = totals[-1], steady[-1]
    acked_total, total_seconds = int(total.group(1)), int(total.group(1)) / max(float(total.group(3)), 1e-9)
    acked, rate = int(m.group(1)), float(m.group(3))
    seconds = acked / rate if rate else t_end - t0
    # The rate and latencies are the steady state's (after the client JVM's warm-up records); the
    # records written (for the read-back) and the broker CPU per record are the whole run's.
    return {"sent": job["records"], "acked": acked, "acked_by_partition": {}, "failed": len(failures),
            "records_total": acked_total, "seconds_total": total_seconds,
            "unflushed": 0, "transactions": 0, "t_start": t_end - seconds, "t_sent": t_end, "t_end": t_end,
            "latencies": [], "reported_latency_ms": {"p50": float(m.group(7)), "p99": float(m.group(9)),
                                                    "avg": float(m.group(5)), "max": float(m.group(6))},
            "delivery_errors": failures[:10], "client_errors": [] if done.returncode == 0 else
            [f"ProducerPerformance exit {done.returncode}: {done.stderr.strip()[-300:]}"],
            "client_log": [line[:300] for line in done.stderr.splitlines()[:20]],
            "jvm_seconds": t_end - t0}


_CONSUME_LINE = re.compile(r"^[^,]+, [^,]+, ([\d.]+), ([\d.]+), (\d+), ([\d.]+), (\d+), (-?\d+), ([-\d.NaInfity]+), "
                           r"([-\d.NaInfity]+)\s*$")


def run_java_consume(job: dict, barrier) -> dict:
    """ConsumerPerformance: read ``job["expected_total"]`` records of the topic with a group of
    this process's own, at ``job["isolation"]``; the rate is over its fetch time (join excluded)."""
    from .workers import BARRIER_TIMEOUT

    _security(job)
    want = int(job["expected_total"])
    args = ["--bootstrap-server", job["bootstrap"], "--topic", job["topic"], "--num-records", want,
            "--group", f"{job['topic']}-{job['isolation']}-c{job['worker']}", "--timeout", "10000",
            "--command-property", f"isolation.level={job['isolation']}", f"client.id=bench-java-c{job['worker']}"]
    cmd = tool_command("org.apache.kafka.tools.ConsumerPerformance", args)
    barrier.wait(BARRIER_TIMEOUT)
    t0 = time.monotonic()
    done = _run(cmd, job.get("timeout", 600))
    t_end = time.monotonic()
    rows = [m for m in map(_CONSUME_LINE.match, done.stdout.splitlines()) if m]
    if not rows:
        raise RuntimeError(f"ConsumerPerformance exit {done.returncode}, no summary: "
                           f"{(done.stderr or done.stdout).strip()[-400:]}")
    m = rows[-1]
    records, fetch_ms = int(m.group(3)), int(m.group(6))
    mb = float(m.group(1)) * 1024 * 1024
    seconds = fetch_ms / 1000 if fetch_ms > 0 else t_end - t0
    warned = [line for line in (done.stdout + done.stderr).splitlines() if "WARNING" in line or "ERROR" in line]
    return {"received": records, "bytes": int(mb), "expected": want, "errors": 0 if done.returncode == 0 else 1,
            "watermarks": {}, "timed_out": records < want, "capped": False,
            "t_start": t_end - seconds, "t_end": t_end, "rebalance_ms": int(m.group(5)),
            "client_errors": [f"ConsumerPerformance exit {done.returncode}: {done.stderr.strip()[-300:]}"]
            if done.returncode else [],
            "client_log": [line[:300] for line in warned[:20]], "jvm_seconds": t_end - t0}
