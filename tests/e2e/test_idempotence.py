"""Idempotent producers through a faulty network and through broker crashes: every record
exactly once, in send order per partition (real broker, real clients, real SIGKILL).

Oncelog-only (``both_brokers`` module, every test ``oncelog_only``): the faulty network needs
the broker to advertise the fault proxy's address (oncelog's ``--advertise``; the session's
shared Apache Kafka advertises its own listener, so clients would go round the proxy), and the
crash test SIGKILLs and restarts the broker."""

from __future__ import annotations

import threading
import time

import confluent_kafka as ck
import pytest

from oncelog.chaos.proxy import FaultProxy

from ..helpers import consume_all, create_topic, first_difference

pytestmark = pytest.mark.both_brokers

PARTITIONS = 3


def start_behind_proxy(broker_factory, seed: int):
    """A broker that advertises a fault proxy's address, so every client connection crosses it."""
    proxy = FaultProxy(seed=seed)
    broker = broker_factory(extra_args=["--advertise", proxy.address])
    proxy.upstream_port = broker.port
    proxy.start()
    return broker, proxy


def send_confluent(bootstrap: str, topic: str, n: int, progress: list | None = None) -> int:
    p = ck.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "max.in.flight": 5,
                     "linger.ms": 5, "batch.num.messages": 500, "message.timeout.ms": 300_000,
                     "request.timeout.ms": 3000, "retry.backoff.ms": 50, "socket.timeout.ms": 3000})
    acked = [0]
    failures = []

    def on_delivery(err, msg):
        if err:
            failures.append(err)
        else:
            acked[0] += 1

    for seq in range(n):
        while True:
            try:
                p.produce(topic, value=str(seq).encode(), partition=seq % PARTITIONS, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.05)
        if seq % 1000 == 0:
            p.poll(0)
            if progress is not None:
                progress.append(seq)
    remaining = p.flush(300)
    assert remaining == 0 and not failures, f"{remaining} undelivered, failures: {failures[:3]}"
    return acked[0]


def send_kafka_python(bootstrap: str, topic: str, n: int, progress: list | None = None) -> int:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all",
                      max_in_flight_requests_per_connection=5, linger_ms=5, batch_size=16384,
                      request_timeout_ms=5000, delivery_timeout_ms=300_000, retry_backoff_ms=50,
                      reconnect_backoff_max_ms=500)
    futures = []
    for seq in range(n):
        futures.append(p.send(topic, value=str(seq).encode(), partition=seq % PARTITIONS))
        if progress is not None and seq % 1000 == 0:
            progress.append(seq)
    p.flush(300)
    for f in futures:
        f.get(timeout=60)  # raises if any record failed
    p.close()
    return len(futures)


SENDERS = {"confluent-kafka": send_confluent, "kafka-python": send_kafka_python}


def assert_exactly_once_in_order(bootstrap: str, topic: str, n: int) -> None:
    got = consume_all(bootstrap, topic, PARTITIONS, expected=n, timeout=180)
    total = 0
    for p, rows in got.items():
        seqs = [int(v) for _, _, v, _ in rows]
        expected = list(range(p, n, PARTITIONS))
        dupes = len(seqs) - len(set(seqs))
        assert dupes == 0, f"partition {p}: {dupes} duplicates"
        assert seqs == expected, f"partition {p}: {len(seqs)} records, first difference at " \
            f"{first_difference(seqs, expected)}"
        total += len(seqs)
    assert total == n


@pytest.mark.oncelog_only("the broker advertises the fault proxy (oncelog's --advertise)")
@pytest.mark.parametrize("client", list(SENDERS))
def test_idempotent_producer_through_faulty_network(broker_factory, client):
    n = 200_000
    # kafka-python packs all partitions into few, large requests: give each a higher fault rate
    drop, reset = (0.03, 0.01) if client == "confluent-kafka" else (0.12, 0.04)
    broker, proxy = start_behind_proxy(broker_factory, seed=7)
    try:
        create_topic(proxy.address, "idem", PARTITIONS)
        proxy.drop(drop)
        proxy.reset(reset)
        proxy.delay(0.2, rate=0.05, jitter=True)
        t0 = time.monotonic()
        SENDERS[client](proxy.address, "idem", n)
        elapsed = time.monotonic() - t0
        faults = proxy.counts
        proxy.heal()
        print(f"{client}: {n} records in {elapsed:.1f}s through faults {faults}")
        assert faults["dropped"] + faults["reset"] >= 3, f"too few faults injected to mean anything: {faults}"
        assert faults["delayed"] > 0
        assert_exactly_once_in_order(proxy.address, "idem", n)
    finally:
        proxy.close()


@pytest.mark.slow
@pytest.mark.oncelog_only("SIGKILLs and restarts the broker")
@pytest.mark.crash
@pytest.mark.parametrize("client", list(SENDERS))
def test_idempotent_producer_across_broker_sigkills(broker_factory, client):
    n = 200_000
    broker = broker_factory()
    create_topic(broker.bootstrap, "crash", PARTITIONS)
    progress: list = []
    errors: list = []

    def run():
        try:
            SENDERS[client](broker.bootstrap, "crash", n, progress)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    t = threading.Thread(target=run)
    t.start()
    kills = 0
    for fraction in (0.2, 0.45, 0.7):
        while t.is_alive() and (not progress or progress[-1] < n * fraction):
            time.sleep(0.01)
        if not t.is_alive():
            break
        broker.kill()  # SIGKILL while batches are in flight
        kills += 1
        time.sleep(0.3)
        broker.restart()
    t.join(600)
    assert not errors, errors
    assert kills == 3, "the stream ended before three crashes could be injected"
    assert_exactly_once_in_order(broker.bootstrap, "crash", n)
