"""Transactional ids and producer ids expire on oncelog as on Apache Kafka, through a real broker
over TCP with real clients (confluent-kafka, oncelog.client), and stay expired across restarts.
The client-visible cases are tests/txn_id_expiry_cases.py, which
tests/kafka/test_txn_id_expiry_kafka.py runs against Apache Kafka 4.4 with the same settings;
here they run on oncelog, and then the broker is SIGKILLed and stopped cleanly: the replay of
``__transaction_state`` applies the tombstones, a partition's producer state is rebuilt without
the expired producers, and the cleaner leaves the compacted ``__transaction_state`` with the live
ids only. A small version of the benchmark (``python -m bench txnids``) checks the bound with a
few thousand ids."""

from __future__ import annotations

import asyncio
import os
import re
import signal

import pytest
from kio.schema.errors import ErrorCode

from oncelog.client.kafka import KafkaClient, KafkaProtocolError
from oncelog.protocol import records as rb
from oncelog.txn.records import decode_key

from .. import txn_id_expiry_cases as cases
from ..helpers import create_topic, unique

OVERRIDES = [arg for k, v in cases.SETTINGS.items() for arg in ("--override", f"{k}={v}")]


def start(broker_factory, *extra: str):
    return broker_factory(extra_args=[*OVERRIDES, *extra])


def restart_both_ways(b):
    """SIGKILL and start, then a clean stop and start: every check after each."""
    yield "after SIGKILL"
    b.kill()
    b.start()
    yield "after a clean stop"
    assert b.stop() == 0
    b.start()


def loaded_records(b) -> tuple[int, int]:
    """(records, ids) the transaction coordinator replayed at its last start (its log line)."""
    found = re.findall(r"transaction coordinator loaded (\d+) record\(s\): (\d+) transactional id", b.tail_log(400))
    assert found, b.tail_log()
    return tuple(int(x) for x in found[-1])


def test_an_idle_id_expires_and_a_touched_one_stays(broker_factory):
    b = start(broker_factory)
    topic = unique("t")
    create_topic(b.bootstrap, topic, 1)
    answers = cases.check_an_idle_id_expires_and_a_touched_one_stays(b.bootstrap, topic, unique("expired"),
                                                                     unique("live"))
    assert answers == {"add": ErrorCode.invalid_producer_id_mapping, "end": ErrorCode.invalid_producer_id_mapping,
                       "new_epoch": 0}


class Clock:
    """The broker's clock moved by hand (oncelog's clock-jump switch, ONCELOG_FAULT_CLOCK: an
    offset read at start and at SIGUSR2), so the ids of a test expire or not whatever the time
    its restarts take."""

    def __init__(self, path: str) -> None:
        self.path, self.offset_ms = path, 0
        with open(path, "w") as f:
            f.write("0")

    def advance(self, b, ms: int) -> None:
        self.offset_ms += ms
        with open(self.path, "w") as f:
            f.write(str(self.offset_ms))
        os.kill(b.proc.pid, signal.SIGUSR2)


def test_an_expired_id_stays_expired_across_restarts_and_the_others_stay_as_they_were(broker_factory, tmp_path):
    # Expiration 60 s on the broker's clock, moved by hand: "gone" is 65 s idle, "committed" and
    # "empty" 15 s; the restarts then take what they take.
    clock = Clock(str(tmp_path / "clock"))
    b = broker_factory(extra_args=["--override", "transactional.id.expiration.ms=60000",
                                   "--override", "transaction.remove.expired.transaction.cleanup.interval.ms=200"],
                       env={"ONCELOG_FAULT_CLOCK": clock.path})
    topic = unique("t")
    create_topic(b.bootstrap, topic, 1)
    client = KafkaClient(b.bootstrap)
    gone = unique("gone")
    gone_pid, gone_epoch = cases.committed_id(b.bootstrap, client, gone, topic)
    clock.advance(b, 50_000)
    committed, empty = unique("committed"), unique("empty")
    cases.committed_id(b.bootstrap, client, committed, topic)
    client.init_producer_id(empty, cases.TIMEOUT_MS)
    clock.advance(b, 15_000)
    cases.wait_for(f"{gone} expired", lambda: cases.described(b.bootstrap, gone) is None)
    kept = {t: cases.described(b.bootstrap, t) for t in (committed, empty)}
    assert kept[committed][0] == "CompleteCommit" and kept[empty][0] == "Empty"
    client.close()
    for when in restart_both_ways(b):
        client = KafkaClient(b.bootstrap)
        # the tombstone wins the replay: the expired id is not back; the others are as they were
        assert cases.described(b.bootstrap, gone) is None, when
        assert cases.listed(client, [gone, committed, empty]) == {committed, empty}, when
        for t, d in kept.items():
            assert cases.described(b.bootstrap, t) == d, when
        with pytest.raises(KafkaProtocolError) as refused:
            client.add_partitions_to_txn(gone, gone_pid, gone_epoch, [(topic, 0)])
        assert refused.value.code == ErrorCode.invalid_producer_id_mapping, when
        client.close()
    assert loaded_records(b)[1] == 2


def test_a_transactional_producer_idle_past_the_expiration_recovers(broker_factory):
    b = start(broker_factory)
    topic = unique("t")
    create_topic(b.bootstrap, topic, 1)
    assert cases.check_a_transactional_producer_idle_past_the_expiration_recovers(
        b.bootstrap, topic, unique("idle")) == [b"first", b"third"]


def test_an_idle_producer_id_expires_and_a_restart_does_not_bring_it_back(broker_factory):
    # 300-byte segments: the partition rolls, so its snapshots name the idle producer, and the
    # replay after a SIGKILL starts at one of them: the restart must expire it again.
    b = start(broker_factory, "--segment-bytes", "300")
    topic = unique("t")
    create_topic(b.bootstrap, topic, 1)
    idle_pid = cases.check_an_idle_producer_id_expires_on_its_partition(b.bootstrap, topic)
    cases.wait_for("the idle producer expired again", lambda: idle_pid not in cases.producers(b.bootstrap, topic))
    held = cases.producers(b.bootstrap, topic)
    snapshots = [n for n in os.listdir(os.path.join(b.data_dir, f"{topic}-0")) if n.endswith(".snapshot")]
    assert snapshots
    for when in restart_both_ways(b):
        now = cases.producers(b.bootstrap, topic)
        assert idle_pid not in now, when
        assert set(now) <= set(held), when  # the live one may have expired meanwhile; none came back


def transaction_state_keys(data_dir: str) -> list[str]:
    """The transactional ids of every record in ``__transaction_state-0``'s segment files (a
    batch still being written at a file's end is left for the next look)."""
    d = os.path.join(data_dir, "__transaction_state-0")
    keys = []
    for name in sorted(n for n in os.listdir(d) if n.endswith(".log")):
        with open(os.path.join(d, name), "rb") as f:
            data = f.read()
        pos = 0
        while pos + rb.HEADER_SIZE <= len(data):
            h = rb.parse_header(data, pos)
            if pos + h.size > len(data):
                break
            keys += [decode_key(key) for _, _, key, _ in rb.iter_records(data[pos:pos + h.size])]
            pos += h.size
    return keys


def test_the_cleaner_leaves_transaction_state_with_the_live_ids_only(broker_factory):
    # Small __transaction_state segments, tombstones kept 1 s: once the cleaner has run over the
    # closed segments, the records of expired ids and then their tombstones are gone, and the
    # replay at start-up reads the live ids' records, not the history.
    b = start(broker_factory, "--override", "transaction.state.log.segment.bytes=4096",
              "--override", "transaction.state.log.num.partitions=1",
              "--override", "log.cleaner.delete.retention.ms=1000", "--log-cleaner-interval-ms", "200")
    from bench.txnids import create_ids

    create_topic(b.bootstrap, "bench-txnids", 1)
    asyncio.run(create_ids(b.bootstrap, "gone", 300, committed=0.3, partitions=1, connections=8, in_flight=2))
    client = KafkaClient(b.bootstrap)
    cases.wait_for("300 ids expired", lambda: not cases.listed(client, [f"gone-{i:07d}" for i in range(300)]))
    assert sum(k.startswith("gone-") for k in transaction_state_keys(b.data_dir)) >= 300  # a tombstone each, at least
    live = unique("live")

    def cleaned() -> bool:
        # a live id's changes keep closing segments, so the tombstones reach a cleanable one
        for _ in range(10):
            cases.touch(client, live)
        return not any(k.startswith("gone-") for k in transaction_state_keys(b.data_dir))

    cases.wait_for("the cleaner dropped the expired ids' records and tombstones", cleaned, interval=0.2)
    client.close()
    b.kill()
    b.start()
    loaded, ids = loaded_records(b)
    assert ids == 1 and loaded == len(transaction_state_keys(b.data_dir)) < 100


def test_thousands_of_expired_ids_leave_nothing_held_nor_replayed(broker_factory):
    # The benchmark's bound, small: 5,000 ids (a third committed: CompleteCommit, markers on the
    # partitions), all expired; nothing is held, and a SIGKILL restart brings none back.
    b = start(broker_factory, "--fsync", "never")
    from bench.txnids import create_ids, list_transactions, producers_held

    create_topic(b.bootstrap, "bench-txnids", 3)
    stats = asyncio.run(create_ids(b.bootstrap, "many", 5000, committed=0.33, partitions=3, connections=16,
                                   in_flight=2))
    assert stats.ids == 5000 and stats.committed > 1000
    cases.wait_for("every id expired", lambda: list_transactions(b.bootstrap)[0] == 0)
    cases.wait_for("every producer expired", lambda: producers_held(b.bootstrap, 3) == 0)
    b.kill()
    b.start()
    assert list_transactions(b.bootstrap)[0] == 0 and producers_held(b.bootstrap, 3) == 0
    assert loaded_records(b)[1] == 0


def test_a_listing_longer_than_a_chunk_answers_every_id_while_the_broker_serves_others(broker_factory):
    # ListTransactions of more ids than apis/list_transactions.CHUNK is made a chunk at a time and
    # encoded off the event loop (the server's other path): every id is listed, as Kafka lists
    # them, and another connection is answered while the listing is asked for again and again.
    from bench.list_pause import measure
    from bench.txnids import create_ids
    from oncelog.apis.list_transactions import CHUNK

    b = broker_factory(extra_args=["--fsync", "never"])
    count = CHUNK + 300
    stats = asyncio.run(create_ids(b.bootstrap, "listed", count, committed=0, partitions=1, connections=16,
                                   in_flight=2))
    assert stats.ids == count
    client = KafkaClient(b.bootstrap)
    try:
        listed = client.list_transactions()
        assert sorted(t for t, _pid, _state in listed) == [f"listed-{i:07d}" for i in range(count)]
        assert {s for _t, _pid, s in listed} == {"Empty"}
        assert client.list_transactions(states=("Ongoing",)) == []
    finally:
        client.close()

    # Three listings while a probe in another process asks for Metadata every 20 ms (the bench's
    # measurement, bench/list_pause.py): each lists every id, and the probe is answered meanwhile.
    rows = measure(b.bootstrap, 3)
    assert [r["ids"] for r in rows] == [count] * 3
    assert all(r["answers_during"] >= 1 for r in rows), rows
