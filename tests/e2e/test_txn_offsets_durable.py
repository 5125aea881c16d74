"""A transactional offset commit takes effect only if it is in the log.

TxnOffsetCommit's offsets become the group's committed offsets at the transaction's COMMIT
marker. The broker used to stage them in memory *before* their write to ``__consumer_offsets``
was durable: when that write failed and the producer committed anyway, OffsetFetch showed the
offsets (from memory) until the next restart, where they vanished (they were never in the log)
— a consumer restarting from them after the restart re-processes: duplicates downstream. Now a
failed write stages nothing: before and after a SIGKILL and restart the group has the same
committed offsets (none from the failed commit).

The write failure is the broker's ``offsets-txn-write`` fault switch (``ONCELOG_FAULT``): every
transactional write to ``__consumer_offsets`` fails as a failed disk write would.
"""

from __future__ import annotations

import pytest

from oncelog.client.kafka import KafkaClient, KafkaProtocolError
from kio.schema.errors import ErrorCode

from ..helpers import create_topic

pytestmark = pytest.mark.oncelog_only("the broker's fault switch ONCELOG_FAULT fails its own offsets write")

GROUP, TXN_ID = "g-durable", "tx-durable"


@pytest.mark.crash
def test_failed_txn_offset_write_then_commit_leaves_the_same_offsets_before_and_after_a_restart(broker_factory):
    broker = broker_factory(env={"ONCELOG_FAULT": "offsets-txn-write:1000000"})
    create_topic(broker.bootstrap, "in", 1)
    client = KafkaClient(broker.bootstrap, timeout=3)
    try:
        pid, epoch = client.init_producer_id(TXN_ID, 60000)
        client.add_offsets_to_txn(TXN_ID, pid, epoch, GROUP)
        with pytest.raises(KafkaProtocolError) as failed:
            client.txn_offset_commit(TXN_ID, pid, epoch, GROUP, {("in", 0): (42, "in-txn")})
        # Kafka's coordinators answer a KAFKA_STORAGE_ERROR of their log NOT_COORDINATOR
        # (CoordinatorOperationExceptionHelper); the client retried it until its timeout.
        assert failed.value.code == ErrorCode.not_coordinator
        # the producer commits anyway (a careless client; a careful one aborts)
        assert client.end_txn(TXN_ID, pid, epoch, commit=True) == ErrorCode.none
        before = client.offset_fetch(GROUP, [("in", 0)])
        assert "fault offsets-txn-write fires" in broker.tail_log(200)
    finally:
        client.close()
    broker.kill()
    del broker.env["ONCELOG_FAULT"]
    broker.restart()
    client = KafkaClient(broker.bootstrap, timeout=10)
    try:
        after = client.offset_fetch(GROUP, [("in", 0)])
    finally:
        client.close()
    assert before == after, "the committed offsets changed across a restart: memory held offsets the log did not"
    assert after[("in", 0)][0] != 42
