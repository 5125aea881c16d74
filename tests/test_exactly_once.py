"""Exactly-once consume-transform-produce through process and broker crashes (real SIGKILLs).

A worker process reads 100k input records and writes one transformed record per input record,
committing output and input offsets in one transaction every ~100 records. The worker is
SIGKILLed at random moments (at least 20 times) and restarted; separately the broker is
SIGKILLed and restarted (at least 5 times). At the end read_committed output must hold exactly
one transformed record per input record, in input order per partition, and the group's committed
offsets must equal the input's end.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time

import confluent_kafka as ck
import pytest

from .conftest import soak_scale
from .helpers import consume_all, create_topic, first_difference

PARTITIONS = 3
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def committed_offsets(bootstrap, *, stable=False):
    """The group's committed offsets. Progress probes do not wait for in-flight transactions
    (read_uncommitted: no require_stable). A worker that commits every few milliseconds keeps
    offsets pending most of the time, and a require_stable OffsetFetch, retried with backoff,
    can land on pending offsets until its timeout. Final checks ask for stable offsets."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "ctp",
                     "isolation.level": "read_committed" if stable else "read_uncommitted"})
    try:
        return [tp.offset for tp in c.committed([ck.TopicPartition("input", p) for p in range(PARTITIONS)],
                                                timeout=30 if stable else 10)]
    finally:
        c.close()


@pytest.mark.slow
def test_consume_transform_produce_survives_worker_and_broker_sigkills(broker, tmp_path):
    n = soak_scale(100_000, 100_000)
    worker_kills_wanted = soak_scale(40, 20)
    broker_kills_wanted = soak_scale(10, 5)
    create_topic(broker.bootstrap, "input", PARTITIONS)
    create_topic(broker.bootstrap, "output", PARTITIONS)
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20, "enable.idempotence": True})
    for i in range(n):
        p.produce("input", key=str(i).encode(), value=f"in{i}".encode(), partition=i % PARTITIONS)
        if i % 10000 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    rng = random.Random(2026)
    log = open(tmp_path / "worker.log", "ab")

    def start_worker():
        return subprocess.Popen([sys.executable, "-m", "tests.ctp_worker", broker.bootstrap], cwd=ROOT,
                                stdout=log, stderr=log)

    worker = start_worker()
    worker_kills = broker_kills = 0
    deadline = time.monotonic() + 600
    # Spread the broker kills among the worker kills.
    broker_kill_at = set(rng.sample(range(2, worker_kills_wanted + 2), broker_kills_wanted))
    step = 0
    while time.monotonic() < deadline:
        time.sleep(rng.uniform(0.3, 1.5))
        step += 1
        if worker.poll() is not None:  # it exited on an error (e.g. the broker went away): restart
            worker = start_worker()
        if worker_kills < worker_kills_wanted:
            worker.kill()  # SIGKILL mid-transaction, or between transactions
            worker.wait()
            worker_kills += 1
            if step in broker_kill_at:
                broker.kill()
                broker_kills += 1
                time.sleep(0.3)
                broker.restart()
            worker = start_worker()
            continue
        if broker_kills < broker_kills_wanted:
            broker.kill()
            broker_kills += 1
            broker.restart()
            continue
        offsets = committed_offsets(broker.bootstrap)
        if sum(max(o, 0) for o in offsets) == n:
            break
    worker.kill()
    worker.wait()
    assert worker_kills >= 20 and broker_kills >= 5, (worker_kills, broker_kills)
    offsets = committed_offsets(broker.bootstrap, stable=True)
    assert offsets == [len(range(q, n, PARTITIONS)) for q in range(PARTITIONS)], f"group offsets {offsets}"
    out = consume_all(broker.bootstrap, "output", PARTITIONS, expected=n, timeout=120, isolation="read_committed")
    total = 0
    for q, rows in out.items():
        values = [v.decode() for _, _, v, _ in rows]
        expected = [f"in{i}-transformed@{q}:{k}" for k, i in enumerate(range(q, n, PARTITIONS))]
        dupes = len(values) - len(set(values))
        assert dupes == 0, f"partition {q}: {dupes} duplicated output records"
        assert values == expected, f"partition {q}: {len(values)} records; first difference at " \
            f"{first_difference(values, expected)}"
        total += len(values)
    assert total == n
