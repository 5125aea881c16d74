"""``python -m bench txnids``: what a client can make the broker remember — transactional ids and
producer ids, held and expired.

A protocol-level generator creates ``--ids`` transactional ids (1,000,000) on one broker:
InitProducerId per id (a new id: its Empty record in ``__transaction_state``), and for a
``--committed`` share (30%) a transaction too, AddPartitionsToTxn (one partition of a
``--partitions``-partition topic) and EndTxn(commit), so the id ends CompleteCommit and the
partition holds a COMMIT marker of its producer id (the per-partition producer state Kafka keeps
for ``producer.id.expiration.ms``). Requests are pipelined over ``--connections`` connections,
``--in-flight`` requests each (transaction versions 1: InitProducerId v4, AddPartitionsToTxn v3,
EndTxn v3, as pre-KIP-890 clients). Retriable answers (COORDINATOR_LOAD_IN_PROGRESS,
COORDINATOR_NOT_AVAILABLE, CONCURRENT_TRANSACTIONS) are retried; any other error stops the run.

Time. Kafka's defaults stay (``transactional.id.expiration.ms`` 7 days, ``producer.id.expiration.ms``
1 day, tombstones kept ``delete.retention.ms`` 1 day); oncelog's clock is moved instead, with its
clock-jump switch (``ONCELOG_FAULT_CLOCK``, :mod:`oncelog.faults`: the broker's injected clock is
the wall clock plus an offset read from a file at start and at SIGUSR2), so a run of minutes
shows a month. The stages, in the broker's days:

==========  ==============================================================================
empty       the broker with its topic, before any id
day 0       the first half of the ids created (``a-*``)
day 6       the second half created (``b-*``): every id held; the ``a-*`` producers' state on
            the partitions is past producer.id.expiration.ms (1 day) and goes
day 7       the ``a-*`` ids are 7 days idle: expired (tombstones), the ``b-*`` ones held
day 14      the ``b-*`` ids expired too: nothing held
day 15      the tombstones are past delete.retention.ms: the next cleaning drops them (a
            cleaning runs after a restart, or when enough new records are written)
==========  ==============================================================================

At each stage: ids held (ListTransactions' count, and how long it took), producers held on the
topic's partitions (DescribeProducers), broker RSS, ``__transaction_state`` bytes on disk and the
producer-state snapshots' bytes; then two restarts timed from process start to serving (the
``listening`` line: oncelog replays ``__transaction_state`` and rebuilds producer state before it
listens): after SIGKILL, and after a clean stop (its stop time too, which writes the snapshots),
and the RSS after the restart (the figure without what the running broker's allocator kept).
Memory per id is (RSS held - RSS empty) / ids. Between stages the bench waits for the expiry
sweep to finish (DescribeTransactions of the stage's last-created expiring id says not found) and
for the cleaner (``__transaction_state`` bytes unchanged for a few seconds).

Apache Kafka (``--broker oncelog,kafka``): one node (oncelog.tools.apache_kafka, full JIT,
``--kafka-heap``), the same generator; stages ``empty``, ``held`` (every id), then a restart with
``transactional.id.expiration.ms`` and its check interval at 1 s (Kafka's clock cannot be moved)
and ``expired``. Its memory is the heap after a full GC (``jcmd GC.run`` then ``GC.heap_info``:
used), its restart time start to serving Metadata; the RSS is shown too.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field

from rich.console import Console
from rich.table import Table

from oncelog.client.wire import request_module

from .wireload import API_VERSIONS, Connection, WireLoadError

API_INIT_PRODUCER_ID, API_ADD_PARTITIONS, API_END_TXN = 22, 24, 26
API_DESCRIBE_PRODUCERS, API_DESCRIBE_TRANSACTIONS, API_LIST_TRANSACTIONS = 61, 65, 66
VERSIONS = {API_INIT_PRODUCER_ID: 4, API_ADD_PARTITIONS: 3, API_END_TXN: 3, API_DESCRIBE_PRODUCERS: 0,
            API_DESCRIBE_TRANSACTIONS: 0, API_LIST_TRANSACTIONS: 1}
# COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, CONCURRENT_TRANSACTIONS
RETRIABLE = {14, 15, 51}
TRANSACTIONAL_ID_NOT_FOUND = 105
TXN_TIMEOUT_MS = 60_000
TOPIC = "bench-txnids"
DAY_MS = 24 * 3600 * 1000
HOUR_MS = 3600 * 1000


# ------------------------------------------------------------------------------- the generator

async def _open(bootstrap: str, client_id: str) -> Connection:
    host, port = bootstrap.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port), limit=64 << 20)
    conn = Connection(reader, writer, client_id)
    m = request_module(API_VERSIONS, 3)
    resp = await conn.request(m.ApiVersionsRequest(client_software_name="oncelog-bench-txnids",
                                                   client_software_version="1"))
    offered = {k.api_key: k.max_version for k in resp.api_keys}
    for key, wanted in VERSIONS.items():
        if key not in offered:
            raise WireLoadError(f"the broker does not offer API key {key}")
        conn.versions[key] = min(wanted, offered[key])
    return conn


@dataclass
class Created:
    ids: int = 0
    committed: int = 0
    seconds: float = 0.0
    retries: int = 0


async def _retrying(conn: Connection, request, code_of, what: str, stats: Created):
    for _ in range(600):
        resp = await conn.request(request)
        code = code_of(resp)
        if code in RETRIABLE:
            stats.retries += 1
            await asyncio.sleep(0.05)
            continue
        if code:
            raise WireLoadError(f"{what}: error code {code}")
        return resp
    raise WireLoadError(f"{what}: retriable errors for 30 s")


async def _one(conn: Connection, txn_id: str, commit_partition: int | None, stats: Created) -> None:
    m = conn.module(API_INIT_PRODUCER_ID)
    resp = await _retrying(conn, m.InitProducerIdRequest(
        transactional_id=txn_id, transaction_timeout=datetime.timedelta(milliseconds=TXN_TIMEOUT_MS),
        producer_id=-1, producer_epoch=-1), lambda r: r.error_code, f"InitProducerId {txn_id}", stats)
    stats.ids += 1
    if commit_partition is None:
        return
    pid, epoch = resp.producer_id, resp.producer_epoch
    m = conn.module(API_ADD_PARTITIONS)
    await _retrying(conn, m.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=(m.AddPartitionsToTxnTopic(name=TOPIC, partitions=(commit_partition,)),)),
        lambda r: max((p.partition_error_code for t in r.results_by_topic_v3_and_below
                       for p in t.results_by_partition), default=0),
        f"AddPartitionsToTxn {txn_id}", stats)
    m = conn.module(API_END_TXN)
    await _retrying(conn, m.EndTxnRequest(transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
                                          committed=True), lambda r: r.error_code, f"EndTxn {txn_id}", stats)
    stats.committed += 1


def committed_partition(i: int, share: float, partitions: int) -> int | None:
    """Whether id ``i`` commits a transaction (spread evenly: ``share`` of every 100 ids), and on
    which partition."""
    return i % partitions if (i % 100) < share * 100 else None


async def create_ids(bootstrap: str, prefix: str, count: int, *, committed: float, partitions: int,
                     connections: int, in_flight: int) -> Created:
    """Create ``count`` transactional ids ``<prefix>-<i:07d>`` (see the module docstring)."""
    stats = Created()
    conns = [await _open(bootstrap, f"bench-txnids-{k}") for k in range(connections)]
    t0 = time.monotonic()

    async def worker(k: int) -> None:
        conn, slots = conns[k], asyncio.Semaphore(in_flight)
        tasks = set()
        for i in range(k, count, connections):
            await slots.acquire()
            task = asyncio.get_running_loop().create_task(
                _one(conn, f"{prefix}-{i:07d}", committed_partition(i, committed, partitions), stats))
            task.add_done_callback(lambda t: slots.release())
            tasks.add(task)
            if len(tasks) > 4 * in_flight:
                done = {t for t in tasks if t.done()}
                for t in done:
                    t.result()
                tasks -= done
        for t in tasks:
            await t

    try:
        await asyncio.gather(*(worker(k) for k in range(connections)))
    finally:
        stats.seconds = time.monotonic() - t0
        for conn in conns:
            await conn.close()
    return stats


# ------------------------------------------------------------------------------- client-side looks

async def _ask(bootstrap: str, request):
    conn = await _open(bootstrap, "bench-txnids-admin")
    try:
        return await conn.request(request)
    finally:
        await conn.close()


def list_transactions(bootstrap: str) -> tuple[int, float]:
    """(ids ListTransactions lists, seconds the answer took, decoding included)."""
    m = request_module(API_LIST_TRANSACTIONS, VERSIONS[API_LIST_TRANSACTIONS])
    t0 = time.monotonic()
    resp = asyncio.run(_ask(bootstrap, m.ListTransactionsRequest(state_filters=(), producer_id_filters=(),
                                                                 duration_filter=-1)))
    if resp.error_code:
        raise WireLoadError(f"ListTransactions: error code {resp.error_code}")
    return len(resp.transaction_states), time.monotonic() - t0


def known(bootstrap: str, txn_id: str) -> bool:
    """Whether DescribeTransactions finds ``txn_id``."""
    m = request_module(API_DESCRIBE_TRANSACTIONS, 0)
    resp = asyncio.run(_ask(bootstrap, m.DescribeTransactionsRequest(transactional_ids=(txn_id,))))
    code = resp.transaction_states[0].error_code
    if code not in (0, TRANSACTIONAL_ID_NOT_FOUND):
        raise WireLoadError(f"DescribeTransactions {txn_id}: error code {code}")
    return code == 0


def producers_held(bootstrap: str, partitions: int) -> int:
    """Producers DescribeProducers lists over the topic's partitions."""
    m = request_module(API_DESCRIBE_PRODUCERS, 0)
    resp = asyncio.run(_ask(bootstrap, m.DescribeProducersRequest(
        topics=(m.TopicRequest(name=TOPIC, partition_indexes=tuple(range(partitions))),))))
    total = 0
    for t in resp.topics:
        for p in t.partitions:
            if p.error_code:
                raise WireLoadError(f"DescribeProducers {TOPIC}-{p.partition_index}: error code {p.error_code}")
            total += len(p.active_producers)
    return total


def wait_until(what: str, predicate, timeout: float, interval: float = 0.5) -> float:
    t0 = time.monotonic()
    while not predicate():
        if time.monotonic() - t0 > timeout:
            raise TimeoutError(f"{what}: not after {timeout:.0f} s")
        time.sleep(interval)
    return time.monotonic() - t0


def dir_bytes(path: str, match) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            p = os.path.join(root, name)
            if match(os.path.relpath(p, path)):
                try:
                    total += os.path.getsize(p)
                except OSError:
                    pass
    return total


def proc_kib(pid: int, field_name: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


# ------------------------------------------------------------------------------- the brokers

class OncelogTarget:
    label = "oncelog"

    def __init__(self, work_dir: str, args) -> None:
        from oncelog.process import BrokerProcess

        self.clock_file = os.path.join(work_dir, "clock-offset-ms")
        with open(self.clock_file, "w") as f:
            f.write("0")
        self.offset_ms = 0
        overrides = {
            # Kafka's defaults, said explicitly: the figures are for them.
            "transactional.id.expiration.ms": str(7 * DAY_MS),
            "producer.id.expiration.ms": str(DAY_MS),
            "log.cleaner.delete.retention.ms": str(DAY_MS),
            # Checked often, so the stages need not wait an hour of real time.
            "producer.id.expiration.check.interval.ms": "1000",
        }
        known = self._known_names(args.source_tree)
        self.settings = {k: v for k, v in overrides.items() if k in known}
        extra = [arg for k, v in self.settings.items() for arg in ("--override", f"{k}={v}")]
        extra += ["--log-cleaner-interval-ms", "2000"]
        if "producer.id.expiration.check.interval.ms" not in known:
            # an older oncelog (802c6e8 and before) expires producers at each retention check
            extra += ["--retention-check-ms", "1000"]
        self.broker = BrokerProcess(os.path.join(work_dir, "oncelog"), fsync=args.fsync, extra_args=extra,
                                    env={"ONCELOG_FAULT_CLOCK": self.clock_file}, source_tree=args.source_tree)

    @staticmethod
    def _known_names(source_tree: str | None) -> set[str]:
        """The broker settings the oncelog that runs knows (a --source-tree of an older commit
        may not know the newer ones)."""
        if source_tree is None:
            from oncelog.config import registry

            return set(registry.BROKER_CONFIGS)
        with open(os.path.join(source_tree, "oncelog", "config", "registry.py")) as f:
            text = f.read()
        return {name for name in ("transactional.id.expiration.ms", "producer.id.expiration.ms",
                                  "log.cleaner.delete.retention.ms", "producer.id.expiration.check.interval.ms",
                                  "transaction.remove.expired.transaction.cleanup.interval.ms")
                if f'"{name}"' in text or f'"{name.removeprefix("log.cleaner.")}"' in text}

    def start(self) -> float:
        t0 = time.monotonic()
        self.broker.start(timeout=900)
        return time.monotonic() - t0

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    @property
    def pid(self) -> int:
        return self.broker.proc.pid

    def kill_restart(self) -> float:
        self.broker.kill()
        return self.start()

    def clean_restart(self) -> tuple[float, float]:
        t0 = time.monotonic()
        rc = self.broker.stop(timeout=900)
        stop_s = time.monotonic() - t0
        if rc != 0:
            raise RuntimeError(f"oncelog stopped with {rc}: {self.broker.tail_log()}")
        return stop_s, self.start()

    def stop(self) -> None:
        self.broker.stop(timeout=900)

    def advance_clock(self, ms: int) -> None:
        self.offset_ms += ms
        with open(self.clock_file, "w") as f:
            f.write(str(self.offset_ms))
        os.kill(self.pid, signal.SIGUSR2)

    def memory(self) -> dict:
        return {"rss_mib": proc_kib(self.pid, "VmRSS") / 1024, "hwm_mib": proc_kib(self.pid, "VmHWM") / 1024}

    def txn_state_bytes(self) -> int:
        return dir_bytes(self.broker.data_dir, lambda p: p.startswith("__transaction_state-"))

    def snapshot_bytes(self) -> int:
        return dir_bytes(self.broker.data_dir, lambda p: p.startswith(TOPIC + "-") and p.endswith(".snapshot"))

    def create_topic(self, partitions: int) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(TOPIC, partitions, 1)])[TOPIC].result(30)


class KafkaTarget:
    label = "Apache Kafka"

    def __init__(self, work_dir: str, args) -> None:
        from oncelog.tools import apache_kafka

        self.cluster = apache_kafka.KafkaCluster(nodes=1, heap=args.kafka_heap, quick_start=False,
                                                 workdir=os.path.join(work_dir, "kafka"), config={})
        self.settings = {"heap": args.kafka_heap}

    def start(self) -> float:
        self.cluster.start()
        return self.cluster.members[1].ready_seconds or 0.0

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    @property
    def node(self):
        return self.cluster.members[1]

    def kill_restart(self) -> float:
        self.cluster.kill(1)
        self.cluster.restart(1, timeout=900)
        return self.node.ready_seconds

    def clean_restart(self, config: dict | None = None) -> tuple[float, float]:
        node = self.node
        t0 = time.monotonic()
        node.proc.send_signal(signal.SIGTERM)
        node.proc.wait(900)
        stop_s = time.monotonic() - t0
        if config:
            with open(node.config_path, "a") as f:  # later keys win in a properties file
                f.writelines(f"{k}={v}\n" for k, v in config.items())
        self.cluster.restart(1, timeout=900)
        return stop_s, node.ready_seconds

    def stop(self) -> None:
        self.cluster.stop(graceful=False)

    def memory(self) -> dict:
        jcmd = os.path.join(os.path.dirname(self.cluster.installation.java), "jcmd")
        pid = str(self.node.proc.pid)
        subprocess.run([jcmd, pid, "GC.run"], capture_output=True, timeout=300)
        out = subprocess.run([jcmd, pid, "GC.heap_info"], capture_output=True, text=True, timeout=60).stdout
        used_kib = 0
        for line in out.splitlines():  # SerialGC: "def new generation total N, used M" and "tenured ..."
            parts = line.replace(",", " ").split()
            if "used" in parts and ("generation" in parts or "tenured" in line):
                value = parts[parts.index("used") + 1]
                used_kib += int(value.rstrip("K"))
        return {"rss_mib": proc_kib(self.node.proc.pid, "VmRSS") / 1024, "heap_used_mib": used_kib / 1024}

    def txn_state_bytes(self) -> int:
        return dir_bytes(os.path.join(self.node.dir, "data"), lambda p: p.startswith("__transaction_state-"))

    def snapshot_bytes(self) -> int:
        return dir_bytes(os.path.join(self.node.dir, "data"), lambda p: p.startswith(TOPIC + "-")
                         and p.endswith(".snapshot"))

    def create_topic(self, partitions: int) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(TOPIC, partitions, 1)])[TOPIC].result(30)


# ------------------------------------------------------------------------------- the probe

class Probe(threading.Thread):
    """ApiVersions to the broker every 100 ms on a connection of its own, timed: the broker's
    pauses (an expiry sweep, a cleaning pass, a ListTransactions of a million ids all run on
    oncelog's one event loop) show as slow answers. Restarts are not counted (the connection
    fails and is made again)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.bootstrap: str | None = None
        self.samples: list[tuple[float, float]] = []  # (monotonic at send, seconds to answer)
        self.stopping = threading.Event()
        self.since = 0.0  # where the current stage began

    def run(self) -> None:
        from oncelog.client.wire import RawClient

        m = request_module(API_VERSIONS, 3)
        request = m.ApiVersionsRequest(client_software_name="bench-txnids-probe", client_software_version="1")
        client = None
        while not self.stopping.wait(0.1):
            try:
                if client is None:
                    client = RawClient(self.bootstrap, timeout=120)
                t0 = time.monotonic()
                client.request(request)
                self.samples.append((t0, time.monotonic() - t0))
            except Exception:  # a restart: connect again
                if client is not None:
                    client.close()
                client = None

    def worst(self, since: float) -> tuple[float, float]:
        """(slowest answer, 99th percentile) in seconds since ``since``."""
        lat = sorted(x for t, x in self.samples if t >= since)
        if not lat:
            return float("nan"), float("nan")
        return lat[-1], lat[min(len(lat) - 1, int(len(lat) * 0.99))]


PROBE = Probe()


def probe(bootstrap: str) -> None:
    PROBE.bootstrap, PROBE.since = bootstrap, time.monotonic()
    if not PROBE.is_alive():
        PROBE.start()


# ------------------------------------------------------------------------------- the run

class TimingLock:
    """``--lock``: the file's flock, shared while the run loads the machine (creating ids,
    waiting), exclusive while it times restarts, so other work that takes it shared is not
    running then. Without a file, nothing."""

    def __init__(self, path: str | None) -> None:
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666) if path else None
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_SH)

    @contextlib.contextmanager
    def exclusive(self):
        if self.fd is None:
            yield
            return
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_SH)


@dataclass
class Stage:
    broker: str
    name: str
    ids_listed: int = -1
    list_seconds: float = float("nan")
    producers: int = -1
    memory: dict = field(default_factory=dict)
    txn_state_bytes: int = -1
    snapshot_bytes: int = -1
    kill_restart_s: float | None = None
    stop_s: float | None = None
    clean_restart_s: float | None = None
    memory_after_restart: dict = field(default_factory=dict)
    created: dict | None = None
    waited_s: float | None = None
    # the broker's slowest ApiVersions answer and its p99 since the previous stage (restarts aside)
    slowest_answer_s: float | None = None
    p99_answer_s: float | None = None
    list_pause_s: float | None = None  # the slowest answer while ListTransactions was answered
    note: str = ""


def settle_bytes(target, quiet_s: float = 6.0, timeout: float = 600.0) -> float:
    """Wait until ``__transaction_state``'s bytes stay the same for ``quiet_s`` (the cleaner's
    passes are done)."""
    t0 = time.monotonic()
    last, since = target.txn_state_bytes(), time.monotonic()
    while time.monotonic() - since < quiet_s and time.monotonic() - t0 < timeout:
        time.sleep(0.5)
        now = target.txn_state_bytes()
        if now != last:
            last, since = now, time.monotonic()
    return time.monotonic() - t0


def look(target, stage: Stage, args, *, restarts: bool, console: Console, lock: "TimingLock") -> Stage:
    probe = PROBE
    stage.slowest_answer_s, stage.p99_answer_s = probe.worst(probe.since)
    # memory first: ListTransactions' answer (a million entries) takes memory of its own
    stage.memory = target.memory()
    stage.txn_state_bytes = target.txn_state_bytes()
    stage.snapshot_bytes = target.snapshot_bytes()
    listing = time.monotonic()
    stage.ids_listed, stage.list_seconds = list_transactions(target.bootstrap)
    time.sleep(0.2)  # the probe's answer that waited behind it
    stage.list_pause_s = probe.worst(listing)[0]
    stage.producers = producers_held(target.bootstrap, args.partitions)
    if restarts:
        with lock.exclusive():
            stage.kill_restart_s = target.kill_restart()
            stage.stop_s, stage.clean_restart_s = target.clean_restart()
        stage.memory_after_restart = target.memory()
        listed, _ = list_transactions(target.bootstrap)
        if listed != stage.ids_listed:
            stage.note += f"after the restarts {listed:,} ids listed (before: {stage.ids_listed:,}); "
    probe.since = time.monotonic()
    console.print(f"  {stage.broker} {stage.name}: {_stage_line(stage)}")
    return stage


def _stage_line(s: Stage) -> str:
    mem = s.memory
    parts = [f"slowest answer {s.slowest_answer_s:.2f} s (p99 {s.p99_answer_s:.2f} s; "
             f"{s.list_pause_s:.2f} s during ListTransactions)",f"{s.ids_listed:,} ids ({s.list_seconds:.1f} s to list)", f"{s.producers:,} producers",
             f"RSS {mem.get('rss_mib', float('nan')):,.0f} MiB"]
    if "heap_used_mib" in mem:
        parts.append(f"heap {mem['heap_used_mib']:,.0f} MiB")
    parts.append(f"__transaction_state {s.txn_state_bytes / 2**20:,.1f} MiB")
    if s.kill_restart_s is not None:
        parts.append(f"restart {s.kill_restart_s:.1f} s after SIGKILL, stop {s.stop_s:.1f} s + "
                     f"{s.clean_restart_s:.1f} s clean")
    if s.created:
        parts.append(f"created {s.created['ids']:,} in {s.created['seconds']:.1f} s")
    return "; ".join(parts) + (f"  [{s.note.strip('; ')}]" if s.note else "")


def create(target, prefix: str, count: int, args, console: Console) -> dict:
    stats = asyncio.run(create_ids(target.bootstrap, prefix, count, committed=args.committed,
                                   partitions=args.partitions, connections=args.connections,
                                   in_flight=args.in_flight))
    console.print(f"  {target.label}: {stats.ids:,} ids ({stats.committed:,} with a committed transaction) in "
                  f"{stats.seconds:.1f} s, {stats.ids / stats.seconds:,.0f} ids/s, {stats.retries:,} retries")
    return asdict(stats)


def run_oncelog(args, work_dir: str, console: Console, lock: "TimingLock") -> list[Stage]:
    target = OncelogTarget(work_dir, args)
    half = args.ids // 2
    stages = []
    target.start()
    probe(target.bootstrap)
    try:
        target.create_topic(args.partitions)
        # (no restarts timed here: the last stage, every id gone and cleaned, is the empty broker's)
        stages.append(look(target, Stage("oncelog", "empty"), args, restarts=False, console=console, lock=lock))
        created = create(target, "a", half, args, console)
        stages.append(look(target, Stage("oncelog", "day 0: a-* held", created=created), args, restarts=False,
                           console=console, lock=lock))
        target.advance_clock(6 * DAY_MS)
        created = create(target, "b", args.ids - half, args, console)
        time.sleep(3)  # the next producer-expiry check (every second) drops the a-* producers
        stages.append(look(target, Stage("oncelog", "day 6: all held", created=created), args, restarts=True,
                           console=console, lock=lock))
        for name, last, days in (("day 7: a-* expired", f"a-{half - 1:07d}", 1),
                                 ("day 14: all expired", f"b-{args.ids - half - 1:07d}", 7)):
            target.advance_clock(days * DAY_MS + 2 * HOUR_MS)
            stage = Stage("oncelog", name)
            stage.waited_s = wait_until(f"{last} expired", lambda: not known(target.bootstrap, last), 900)
            stage.waited_s += settle_bytes(target)
            stages.append(look(target, stage, args, restarts=True, console=console, lock=lock))
        target.advance_clock(DAY_MS + 2 * HOUR_MS)
        stage = Stage("oncelog", "day 15: tombstones cleaned")
        # A cleaning runs at the first cleaner pass after a restart (oncelog does not keep
        # Kafka's cleaner-offset-checkpoint) or once enough new records are written.
        with lock.exclusive():
            target.kill_restart()
        stage.waited_s = settle_bytes(target)
        stages.append(look(target, stage, args, restarts=True, console=console, lock=lock))
    finally:
        target.stop()
    return stages


def run_kafka(args, work_dir: str, console: Console, lock: "TimingLock") -> list[Stage]:
    target = KafkaTarget(work_dir, args)
    stages = []
    target.start()
    probe(target.bootstrap)
    try:
        target.create_topic(args.partitions)
        # the first InitProducerId creates __transaction_state (50 partitions): outside the figures
        asyncio.run(create_ids(target.bootstrap, "warmup", 1, committed=0, partitions=args.partitions,
                               connections=1, in_flight=1))
        stages.append(look(target, Stage("kafka", "empty"), args, restarts=True, console=console, lock=lock))
        created = create(target, "a", args.ids, args, console)
        stages.append(look(target, Stage("kafka", "all held", created=created), args, restarts=True,
                           console=console, lock=lock))
        short = {"transactional.id.expiration.ms": "1000",
                 "transaction.remove.expired.transaction.cleanup.interval.ms": "1000",
                 "producer.id.expiration.ms": "1000", "producer.id.expiration.check.interval.ms": "1000"}
        with lock.exclusive():
            target.clean_restart(short)
        stage = Stage("kafka", "all expired (restarted with 1 s expirations)")
        last = f"a-{args.ids - 1:07d}"
        stage.waited_s = wait_until(f"{last} expired", lambda: not known(target.bootstrap, last), 900)
        stage.waited_s += wait_until("every id expired", lambda: list_transactions(target.bootstrap)[0] <= 1, 900, 2)
        stages.append(look(target, stage, args, restarts=True, console=console, lock=lock))
    finally:
        target.stop()
    return stages


def table(stages: list[Stage], ids: int) -> Table:
    t = Table(title=f"Transactional ids: {ids:,} created (what the broker holds at each stage)")
    for col in ("broker", "stage", "ids listed", "list s", "producers", "RSS MiB", "heap MiB", "MiB/1M ids",
                "__txn_state MiB", "snapshots MiB", "restart s (SIGKILL)", "stop s", "restart s (clean)",
                "RSS after restart", "slowest answer s"):
        t.add_column(col, justify="left" if col in ("broker", "stage") else "right")
    base: dict[str, float] = {}
    for s in stages:
        mem = s.memory.get("heap_used_mib", s.memory.get("rss_mib"))
        if s.name == "empty":
            base[s.broker] = mem
        per = (mem - base[s.broker]) / s.ids_listed * 1e6 if s.broker in base and s.ids_listed > 1 else None
        f = lambda v, fmt=",.1f": "" if v is None else format(v, fmt)  # noqa: E731
        t.add_row(s.broker, s.name, f(s.ids_listed, ","), f(s.list_seconds), f(s.producers, ","),
                  f(s.memory.get("rss_mib"), ",.0f"), f(s.memory.get("heap_used_mib"), ",.0f"),
                  f(per, ",.0f"), f(s.txn_state_bytes / 2**20), f(s.snapshot_bytes / 2**20, ",.2f"),
                  f(s.kill_restart_s), f(s.stop_s), f(s.clean_restart_s),
                  f(s.memory_after_restart.get("heap_used_mib", s.memory_after_restart.get("rss_mib")), ",.0f"),
                  f(s.slowest_answer_s, ",.2f"))
    return t


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench txnids", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ids", type=int, default=1_000_000, help="transactional ids to create (1,000,000)")
    p.add_argument("--committed", type=float, default=0.3, help="share of ids with a committed transaction (0.3)")
    p.add_argument("--partitions", type=int, default=3, help="partitions of the topic the transactions use (3)")
    p.add_argument("--connections", type=int, default=64,
                   help="connections of the generator (64: a broker works on one request per connection at a time)")
    p.add_argument("--in-flight", type=int, default=4, help="ids in progress per connection (4)")
    p.add_argument("--broker", default="oncelog", help="oncelog, kafka or oncelog,kafka (oncelog)")
    p.add_argument("--fsync", default="always", help="oncelog's --fsync (always)")
    p.add_argument("--kafka-heap", default="2g", help="the Kafka node's -Xmx (2g)")
    p.add_argument("--source-tree", default=None, help="run oncelog from another checkout (before/after)")
    p.add_argument("--work-dir", default=None, help="where data goes (a temporary directory, removed)")
    p.add_argument("--json", default=None, help="write the stages to this file")
    p.add_argument("--lock", default=None,
                   help="a lock file (flock) held shared for the run and exclusive while restarts are timed, "
                        "e.g. a machine's CPU lock that other work takes shared (run the bench without another "
                        "flock on it around it)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    console = Console()
    if not console.is_terminal:
        console = Console(width=max(console.width, 200))
    own = args.work_dir is None
    work_dir = args.work_dir or tempfile.mkdtemp(prefix="oncelog-bench-txnids-")
    os.makedirs(work_dir, exist_ok=True)
    from .report import machine

    meta = machine()
    console.print(f"[bold]txnids bench[/bold]: {meta.get('cpu', '?')} × {meta['nproc']}; {args.ids:,} ids, "
                  f"{args.committed:.0%} committed, {args.connections} connections × {args.in_flight} in flight; "
                  f"work dir {work_dir}")
    stages: list[Stage] = []
    lock = TimingLock(args.lock)
    try:
        for b in args.broker.split(","):
            run = {"oncelog": run_oncelog, "kafka": run_kafka}[b]
            stages += run(args, work_dir, console, lock)
    finally:
        console.print(table(stages, args.ids))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"argv": sys.argv, "machine": meta, "stages": [asdict(s) for s in stages]}, f, indent=1)
        if own:
            shutil.rmtree(work_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
