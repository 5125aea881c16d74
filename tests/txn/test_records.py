"""The ``__transaction_state`` record codec."""

from __future__ import annotations

import pytest

from oncelog.txn.records import decode_key, decode_value, encode_key, encode_value
from oncelog.txn.state import MAX_EPOCH

from .harness import P0, P1, P2, T, TXN, meta


def test_record_key_round_trip():
    assert decode_key(encode_key("tx-é")) == "tx-é"
    assert encode_key("ab") == b"\x00\x00\x00\x02ab"
    with pytest.raises(ValueError):
        decode_key(b"\x00\x01\x00\x02ab")


@pytest.mark.parametrize("m", [
    meta(),
    meta(pid=2**40, epoch=MAX_EPOCH, state=T.PREPARE_COMMIT, partitions=(P0, P1, P2, ("long-topic-name", 99)),
         last_pid=3, last_epoch=MAX_EPOCH - 1, tv2=True, timeout=900_000),
    meta(state=T.EMPTY, partitions=(), start=-1),
    meta(state=T.PREPARE_EPOCH_FENCE),
])
def test_record_value_round_trip(m):
    got = decode_value(m.transactional_id, encode_value(m))
    assert got == m
    assert not got.pending


def test_record_value_layout_and_version():
    m = meta(state=T.ONGOING, partitions=(P0,))
    data = encode_value(m)
    assert data[:2] == b"\x00\x01"  # value version 1
    assert data[16] == T.ONGOING.value
    with pytest.raises(ValueError):
        decode_value(TXN, b"\x00\x07" + data[2:])
