"""Record validation and bounded decompression, against a broker process: every CRC-valid batch Kafka refuses is
refused with its code and nothing of it is stored; the partition then serves a normal
confluent-kafka producer and consumer from offset 0; a 32 KiB zstd batch holding 1 GiB is
refused with MESSAGE_TOO_LARGE while the broker's peak RSS stays far below 600 MiB."""

from __future__ import annotations

import os

import confluent_kafka as ck

from oncelog.client.wire import RawClient, list_offsets_latest, produce_request
from tests import bad_batches as bad

from ..helpers import consume_all, create_topic

INVALID_RECORD, MESSAGE_TOO_LARGE = 87, 10


def _produce(client: RawClient, topic: str, batch: bytes):
    return client.request(produce_request(topic, 0, batch)).responses[0].partition_responses[0]


def _serves_normal_clients(bootstrap: str, topic: str, already: int = 0) -> None:
    p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    values = [os.urandom(8).hex().encode() for _ in range(5)]
    for v in values:
        p.produce(topic, key=b"k", value=v)
    assert p.flush(20) == 0
    got = consume_all(bootstrap, topic, 1, expected=already + 5, timeout=30)[0]
    assert [v for _, _, v, _ in got][already:] == values
    assert [o for o, _, _, _ in got] == list(range(already + 5))  # no offset was skipped or reused


def _peak_rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def test_every_reproducer_is_refused_and_the_partition_keeps_serving(broker):
    create_topic(broker.bootstrap, "v", 1)
    c = RawClient(broker.bootstrap)
    for name, (build, _) in bad.REPRODUCERS.items():
        for _ in range(3):  # the probe sent each 50 times; all were accepted
            part = _produce(c, "v", build())
            assert part.error_code == INVALID_RECORD, (name, part.error_message)
            assert part.error_message, name
    part = _produce(c, "v", bad.offset_deltas())
    assert [e.batch_index for e in part.record_errors] == [1]  # KIP-467: the record is named
    assert list_offsets_latest(c, "v") == 0  # nothing of any refused batch was stored
    assert broker.proc.poll() is None
    _serves_normal_clients(broker.bootstrap, "v")
    # ... and goes on serving after a restart (nothing half-written in the log or its indexes).
    broker.stop()
    broker.restart()
    _serves_normal_clients(broker.bootstrap, "v", already=5)


def test_a_decompression_bomb_is_message_too_large_with_memory_bounded(broker):
    create_topic(broker.bootstrap, "bomb", 1)
    bomb = bad.zstd_bomb(gib=1.0)
    assert len(bomb) < 64 * 1024  # the 32 KiB batch holding 1 GiB
    c = RawClient(broker.bootstrap)
    for _ in range(3):
        part = _produce(c, "bomb", bomb)
        assert part.error_code == MESSAGE_TOO_LARGE, part.error_message
        assert "decompress to more than" in part.error_message
    peak = _peak_rss_mib(broker.proc.pid)
    assert peak < 600, f"peak RSS {peak:.0f} MiB"  # was 2,082 MiB before the limit
    assert list_offsets_latest(c, "bomb") == 0
    _serves_normal_clients(broker.bootstrap, "bomb")
    print(f"broker peak RSS after three 1 GiB bombs: {peak:.0f} MiB")
