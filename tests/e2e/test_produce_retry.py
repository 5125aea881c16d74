"""The connector's transactional producer (oncelog.client.kafka.TransactionalProducer) carries
on through a broker SIGKILL in the middle of a pipelined write: batches the dead leader did not
answer are resent, with the same producer id, epoch and sequences, once the broker is back (a
copy the broker had appended is recognised as a duplicate), and the transaction commits with
every record exactly once for an independent read_committed reader.

Oncelog-only (``both_brokers`` module, the one test ``oncelog_only``): it SIGKILLs and restarts
the broker, which the session's shared Apache Kafka does not allow."""

from __future__ import annotations

import threading
import time

import pyarrow as pa
import pytest

from oncelog.client.kafka import KafkaClient, TransactionalProducer
from oncelog.client.recordcodec import encode_batch, encode_records

from ..helpers import consume_all, create_topic

pytestmark = pytest.mark.both_brokers


def _batch(p: TransactionalProducer, topic: str, values: list[bytes]) -> bytes:
    recs = encode_records(None, pa.array(values, pa.binary()), None)
    return encode_batch(recs, len(values), timestamp_ms=int(time.time() * 1000), producer_id=p.producer_id,
                        producer_epoch=p.producer_epoch, base_sequence=p.next_sequence(topic, 0, len(values)),
                        transactional=True)


@pytest.mark.oncelog_only("SIGKILLs and restarts the broker")
@pytest.mark.crash
def test_a_write_survives_a_broker_sigkill_and_commits_each_record_once(broker):
    topic = "retry-out"
    create_topic(broker.bootstrap, topic, 1)
    client = KafkaClient(broker.bootstrap, {"request.timeout.ms": "60000"})
    p = TransactionalProducer(client, "retry-txn", 120_000)
    p.init()
    p.add_partitions([(topic, 0)])
    values = [b"v%05d" % i for i in range(4000)]
    chunks = [values[i : i + 20] for i in range(0, len(values), 20)]
    for chunk in chunks[:100]:
        p.send(topic, 0, _batch(p, topic, chunk), len(chunk))
    # SIGKILL while batches are in flight; bring the broker back on the same port a moment later,
    # from another thread, while this one keeps sending (and must wait for it).
    broker.kill()
    restarter = threading.Timer(1.0, broker.restart)
    restarter.start()
    try:
        for chunk in chunks[100:]:
            p.send(topic, 0, _batch(p, topic, chunk), len(chunk))
        p.flush()
    finally:
        restarter.join()
    assert p.commit().name == "none"
    rows = consume_all(broker.bootstrap, topic, 1, expected=len(values), timeout=60, isolation="read_committed")[0]
    assert [v for _o, _k, v, _h in rows] == values
