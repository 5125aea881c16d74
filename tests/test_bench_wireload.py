"""The benchmark's protocol-level producer (bench/wireload.py) against a real broker.

Its figures back the idempotence and transaction throughput targets, so it must really do what each mode claims:
every acknowledged record is in the log, an idempotent run leaves its producer id with the last
sequence it sent in the broker's producer state, and a transactional run commits (read_committed
sees every record, the last stable offset reaches the end). Read back with confluent-kafka."""

from __future__ import annotations

import asyncio

import pytest

from bench.wireload import WireFetcher, WireLoadError, WireMode, WireProducer
from oncelog.client.wire import RawClient, request_module
from tests.helpers import consume_all, create_topic

PARTITIONS = 3
BATCH = 20


def _run(bootstrap: str, topic: str, mode: WireMode, seconds: float = 0.5) -> WireProducer:
    async def main() -> WireProducer:
        producer = await WireProducer.create(bootstrap, topic, mode, batch_records=BATCH, value=b"v" * 100,
                                             client_id="test-wireload", transactional_id=f"{topic}-txn")
        try:
            await producer.run(seconds)
        finally:
            await producer.conn.close()
        return producer

    return asyncio.run(main())


def _active_producers(bootstrap: str, topic: str) -> dict[int, list]:
    m = request_module(61, 0)
    client = RawClient(bootstrap)
    try:
        resp = client.request(m.DescribeProducersRequest(topics=(
            m.TopicRequest(name=topic, partition_indexes=tuple(range(PARTITIONS))),)))
    finally:
        client.close()
    return {p.partition_index: list(p.active_producers) for p in resp.topics[0].partitions}


@pytest.mark.parametrize("mode", [WireMode(acks=1, max_in_flight=5), WireMode(acks=-1, max_in_flight=1)],
                         ids=["at-most-once", "at-least-once"])
def test_plain_modes_land_every_acknowledged_record(broker, mode):
    create_topic(broker.bootstrap, "wl-plain", PARTITIONS)
    p = _run(broker.bootstrap, "wl-plain", mode)
    assert p.max_in_flight_seen == mode.max_in_flight
    assert p.requests_acked > 0 and p.acked == p.requests_acked * BATCH * PARTITIONS
    got = consume_all(broker.bootstrap, "wl-plain", PARTITIONS, p.acked)
    assert {part: len(rows) for part, rows in got.items()} == dict.fromkeys(range(PARTITIONS), p.requests_acked * BATCH)
    assert _active_producers(broker.bootstrap, "wl-plain") == dict.fromkeys(range(PARTITIONS), [])


def test_idempotent_mode_uses_sequences_with_requests_in_flight(broker):
    create_topic(broker.bootstrap, "wl-idem", PARTITIONS)
    p = _run(broker.bootstrap, "wl-idem", WireMode(acks=-1, max_in_flight=5, idempotent=True))
    assert p.producer_id >= 0 and p.requests_acked > 5
    assert p.max_in_flight_seen == 5  # the point of the generator: requests really pipelined
    per_partition = p.requests_acked * BATCH
    got = consume_all(broker.bootstrap, "wl-idem", PARTITIONS, p.acked)
    assert {part: len(rows) for part, rows in got.items()} == dict.fromkeys(range(PARTITIONS), per_partition)
    for part, producers in _active_producers(broker.bootstrap, "wl-idem").items():
        assert [(x.producer_id, x.last_sequence) for x in producers] == [(p.producer_id, per_partition - 1)], part


def test_transactional_mode_commits_everything_it_sent(broker):
    create_topic(broker.bootstrap, "wl-txn", PARTITIONS)
    p = _run(broker.bootstrap, "wl-txn", WireMode(acks=-1, max_in_flight=5, idempotent=True, txn_commit_ms=100), 0.7)
    assert p.transactions >= 3 and len(p.endtxn_latencies) == p.transactions
    per_partition = p.requests_acked * BATCH
    got = consume_all(broker.bootstrap, "wl-txn", PARTITIONS, p.acked, isolation="read_committed", timeout=30)
    assert {part: len(rows) for part, rows in got.items()} == dict.fromkeys(range(PARTITIONS), per_partition)
    # nothing left open: no producer of this topic has a current transaction
    for producers in _active_producers(broker.bootstrap, "wl-txn").values():
        assert all(x.current_txn_start_offset == -1 for x in producers)


def test_a_produce_error_stops_the_run_with_its_code(broker):
    """A figure is never taken from failed produces: a batch the broker refuses (here larger than
    the topic's max.message.bytes) ends the run with the broker's error code."""
    create_topic(broker.bootstrap, "wl-small", PARTITIONS, {"max.message.bytes": "1000"})
    with pytest.raises(WireLoadError, match="error code"):
        _run(broker.bootstrap, "wl-small", WireMode(acks=-1, max_in_flight=1))


def _fetch(bootstrap: str, topic: str, isolation: str, expected: dict[int, int], timeout: float = 30) -> WireFetcher:
    async def main() -> WireFetcher:
        f = await WireFetcher.create(bootstrap, topic, list(range(PARTITIONS)), isolation, client_id="test-fetch")
        try:
            await f.run(expected, max_seconds=0, timeout=timeout)
        finally:
            await f.conn.close()
        return f

    return asyncio.run(main())


def test_fetch_loop_counts_what_each_isolation_level_may_see(broker):
    """The read-back of the wire modes: read_uncommitted counts every data record, read_committed
    skips an aborted transaction's records (from the response's aborted-transactions list) and
    never counts markers. Data: committed wire transactions, then an aborted confluent-kafka
    transaction, then more committed records."""
    import confluent_kafka as ck

    create_topic(broker.bootstrap, "wl-read", PARTITIONS)
    first = _run(broker.bootstrap, "wl-read", WireMode(acks=-1, max_in_flight=5, idempotent=True, txn_commit_ms=100))
    per_partition = first.requests_acked * BATCH
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "wl-read-abort"})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(300):
        p.produce("wl-read", b"aborted", partition=i % PARTITIONS)
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    for i in range(30):
        p.produce("wl-read", b"kept", partition=i % PARTITIONS)
    p.commit_transaction(30)
    committed = dict.fromkeys(range(PARTITIONS), per_partition + 10)
    everything = dict.fromkeys(range(PARTITIONS), per_partition + 110)

    # asked for everything, read_committed must stop at the committed records (until the timeout)
    rc = _fetch(broker.bootstrap, "wl-read", "read_committed", everything, timeout=2)
    assert rc.by_partition == committed
    ru = _fetch(broker.bootstrap, "wl-read", "read_uncommitted", everything)
    assert ru.by_partition == everything
