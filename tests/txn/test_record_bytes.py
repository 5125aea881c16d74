"""The bytes of ``__transaction_state`` records, pinned: the literals below were written by the
codec before it moved onto :mod:`oncelog.protocol.internal_records`, so records written
by an older oncelog still replay, and new ones are byte-identical."""

from __future__ import annotations

from tests.broker_parts import open_parts

import pytest

from oncelog.txn.records import decode_key, decode_value, encode_key, encode_value
from oncelog.txn.state import TransactionMetadata, TransactionState as T

VALUES = [
    (TransactionMetadata("txn-é", 2**40, 32766, 900000, T.ONGOING, 3, 32765,
                         {("orders", 2), ("orders", 0), ("__consumer_offsets", 49), ("b", 1)},
                         1700000000000, 1700000000500, False, True, 77),
     "000100000100000000007ffe000dbba0010000000300125f5f636f6e73756d65725f6f6666736574730000000100000031000162"
     "000000010000000100066f72646572730000000200000000000000020000018bcfe569f40000018bcfe5680000000000000000037ffd"
     "01000000000000004d"),
    (TransactionMetadata("t", 5, 0, 60000, T.EMPTY),
     "0001000000000000000500000000ea6000000000000000000000000000ffffffffffffffffffffffffffffffffffff00ffffffffffffffff"),
    (TransactionMetadata("t", 5, 1, 60000, T.PREPARE_EPOCH_FENCE, 5, 0, {("x", 0)}, 10, 20),
     "0001000000000000000500010000ea60070000000100017800000001000000000000000000000014000000000000000a000000000000"
     "0005000000ffffffffffffffff"),
]


def test_key_is_byte_identical():
    golden = "0000000674786e2dc3a9"
    assert encode_key("txn-é").hex() == golden
    assert decode_key(bytes.fromhex(golden)) == "txn-é"


@pytest.mark.parametrize("m, golden", VALUES)
def test_values_are_byte_identical(m, golden):
    assert encode_value(m).hex() == golden
    assert decode_value(m.transactional_id, bytes.fromhex(golden)) == m


def test_records_written_before_replay_into_the_coordinator(tmp_path):
    import asyncio

    from oncelog.config.settings import FsyncPolicy, LogConfig
    from oncelog.txn.store import TransactionStateTopic

    class Loaded:
        def __init__(self):
            self.loaded = []

        def load(self, txn_id, m):
            self.loaded.append((txn_id, m))

    async def run():
        parts = open_parts(str(tmp_path / "data"), LogConfig())
        logs, manager = parts.logs, parts.partitions
        topic = TransactionStateTopic(manager, 1)
        key = bytes.fromhex("0000000674786e2dc3a9")
        topic.append("txn-é", [(key, bytes.fromhex(VALUES[1][1])), (key, bytes.fromhex(VALUES[0][1]))],
                     lambda _: None)
        gone = encode_key("gone")  # a value, then its tombstone: not loaded at all
        topic.append("gone", [(gone, bytes.fromhex(VALUES[1][1])), (gone, None)], lambda _: None)
        coordinator = Loaded()
        assert topic.replay(coordinator) == 4
        assert coordinator.loaded == [("txn-é", VALUES[0][0])]  # an id's last record is its state
        await manager.close()

    asyncio.run(run())
