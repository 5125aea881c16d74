"""Crash tests: the broker is SIGKILLed for real and the data checked afterwards."""

from __future__ import annotations

import os
import re
import threading
import time

import confluent_kafka as ck
import pytest

from oncelog.protocol import records as rb

from ..conftest import soak_scale
from ..helpers import consume_all, create_topic


def produce_storm(bootstrap: str, topic: str, acked: dict, failed: list, stop: threading.Event, start_seq: int):
    """Produce numbered records (acks=all) until ``stop``; record what was acknowledged."""
    p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2, "retries": 0,
                     "message.timeout.ms": 5000, "enable.idempotence": False, "socket.timeout.ms": 2000,
                     "reconnect.backoff.max.ms": 200})

    def on_delivery(err, msg):
        if err is None:
            acked[(msg.partition(), msg.offset())] = msg.value()
        else:
            failed.append(msg.value())

    seq = start_seq
    while not stop.is_set():
        try:
            p.produce(topic, key=str(seq).encode(), value=f"record-{seq}".encode(), on_delivery=on_delivery)
            seq += 1
        except BufferError:
            p.poll(0.01)
        p.poll(0)
    p.flush(15)


@pytest.mark.slow
@pytest.mark.crash
def test_sigkill_during_acks_all_storm_loses_no_acknowledged_record(broker_factory):
    broker = broker_factory(fsync="always")
    create_topic(broker.bootstrap, "storm", 3)
    acked: dict = {}
    failed: list = []
    cycles = soak_scale(5, 3)
    for cycle in range(cycles):
        stop = threading.Event()
        t = threading.Thread(target=produce_storm, args=(broker.bootstrap, "storm", acked, failed, stop, cycle * 10**7))
        t.start()
        time.sleep(1.5)
        broker.kill()  # SIGKILL mid-storm
        stop.set()
        t.join()
        broker.restart()
    assert len(acked) > 1000, "the storm should have been acknowledged many records"
    expected_min = len(acked)
    # Read everything back: every acknowledged record at its acknowledged offset.
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "check", "enable.auto.commit": False,
                     "check.crcs": True, "auto.offset.reset": "earliest"})
    ends = {}
    for p in range(3):
        low, high = c.get_watermark_offsets(ck.TopicPartition("storm", p), timeout=10)
        ends[p] = high
        assert low == 0
    c.close()
    total = sum(ends.values())
    assert total >= expected_min
    got = consume_all(broker.bootstrap, "storm", 3, expected=total, timeout=120)
    for p, rows in got.items():
        offsets = [o for o, _, _, _ in rows]
        assert offsets == list(range(ends[p])), f"partition {p}: offsets not contiguous from 0"
    visible = {(p, o): v for p, rows in got.items() for o, _, v, _ in rows}
    missing = [k for k, v in acked.items() if visible.get(k) != v]
    assert not missing, f"{len(missing)} acknowledged records lost or changed, e.g. {missing[:5]}"
    # every visible record is whole and one we sent
    assert all(v.startswith(b"record-") for v in visible.values())


def test_torn_tail_and_flipped_byte_in_segment_files(broker_factory):
    """Damage written into segment files while the broker is down is truncated at start-up,
    logged, and everything before the damage is still served."""
    broker = broker_factory(fsync="always", extra_args=["--segment-bytes", "5000"])
    create_topic(broker.bootstrap, "dmg", 2)
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0})
    for i in range(400):
        p.produce("dmg", value=f"v{i}".encode() * 20, partition=i % 2)
        assert p.flush(10) == 0  # one record per batch, so the damage drops exactly one
    broker.kill()
    part0 = os.path.join(broker.data_dir, "dmg-0")
    part1 = os.path.join(broker.data_dir, "dmg-1")
    logs0 = sorted(f for f in os.listdir(part0) if f.endswith(".log"))
    logs1 = sorted(f for f in os.listdir(part1) if f.endswith(".log"))
    assert len(logs1) >= 2
    # Partition 0: a torn tail (half a batch appended to the active segment).
    with open(os.path.join(part0, logs0[-1]), "ab") as f:
        f.write(rb.build_batch([(b"k", b"half" * 100)], base_offset=200)[:150])
    # Partition 1: a flipped byte inside the last batch of the active segment.
    active1 = os.path.join(part1, logs1[-1])
    size = os.path.getsize(active1)
    with open(active1, "r+b") as f:
        f.seek(size - 5)
        b = f.read(1)
        f.seek(size - 5)
        f.write(bytes([b[0] ^ 0xFF]))
    broker.restart()
    log = broker.tail_log(50)
    assert "recovery truncated dmg-0" in log and "torn" in log
    assert "recovery truncated dmg-1" in log and "CRC mismatch" in log
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "x", "check.crcs": True})
    high0 = c.get_watermark_offsets(ck.TopicPartition("dmg", 0), timeout=10)[1]
    high1 = c.get_watermark_offsets(ck.TopicPartition("dmg", 1), timeout=10)[1]
    c.close()
    assert high0 == 200  # nothing lost before the torn tail
    assert high1 == 199  # exactly the damaged last batch (one record) dropped
    got = consume_all(broker.bootstrap, "dmg", 2, expected=high0 + high1, timeout=60)
    assert [o for o, *_ in got[0]] == list(range(200))
    assert [o for o, *_ in got[1]] == list(range(199))
    # and the partition accepts new writes after the truncation point
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    p.produce("dmg", value=b"after", partition=1)
    assert p.flush(20) == 0
    assert consume_all(broker.bootstrap, "dmg", 2, expected=high0 + high1 + 1, timeout=30)[1][-1][0] == 199


def test_startup_time_does_not_grow_with_log_size(broker_factory):
    """A clean restart and an unclean one after a checkpoint scan only the tail."""
    broker = broker_factory(fsync="never", extra_args=["--segment-bytes", "1m"])
    create_topic(broker.bootstrap, "big", 1)
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20, "batch.size": 1 << 20})
    for i in range(60_000):
        p.produce("big", value=b"x" * 500)
        if i % 5000 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    broker.stop()
    broker.restart()
    assert "clean shutdown" in broker.tail_log(5)
    broker.kill()
    broker.restart()
    log = broker.tail_log(5)
    assert "unclean shutdown" in log
    scanned, total = map(int, re.search(r"validated (\d+) of (\d+) bytes", log).groups())
    assert total > 30_000_000 and scanned <= 1 << 20, (scanned, total)
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "x"})
    assert c.get_watermark_offsets(ck.TopicPartition("big", 0), timeout=10)[1] == 60_000
    c.close()
