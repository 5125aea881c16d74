"""Key/value formats of the records in ``__transaction_state``: one record per change of a
transactional id, placed by Kafka's hash rule and compacted (a null value, a tombstone, deletes
the id).

    TransactionLogKey    v0: int16 version (0), string transactional_id
    TransactionLogValue  oncelog's v1: Kafka's v0 fields
                             int16 version (1), int64 producer_id, int16 producer_epoch,
                             int32 timeout_ms, int8 state, array of (string topic,
                             array of int32 partition), int64 last_update_ms, int64 start_ms
                         followed by the fields Kafka's flexible v1 keeps in tagged fields:
                             int64 last_producer_id, int16 last_producer_epoch, int8 tv2,
                             int64 next_producer_id

Strings are int16-length-prefixed UTF-8, arrays int32-counted (the codec of
:mod:`oncelog.protocol.internal_records`); the state byte is
:class:`~oncelog.txn.state.TransactionState`'s value.
"""

from __future__ import annotations

import struct

from ..protocol.internal_records import Reader, Writer
from .state import NO_PARTITIONS, TransactionMetadata, TransactionState

KEY_VERSION = 0
VALUE_VERSION = 1


def encode_key(txn_id: str) -> bytes:
    return Writer().i16(KEY_VERSION).string(txn_id).to_bytes()


def decode_key(data: bytes) -> str:
    if len(data) >= 4 and data[:2] == b"\0\0" and int.from_bytes(data[2:4], "big") == len(data) - 4:
        return bytes(data[4:]).decode()  # version 0 and the whole id: the one form written
    r = Reader(data)
    version = r.i16()
    if version != KEY_VERSION:
        raise ValueError(f"unknown transaction log key version {version}")
    txn_id = r.string()
    if txn_id is None:
        raise ValueError("transaction log key with a null transactional id")
    return txn_id


def _write_topic(w: Writer, item: tuple[str, list[int]]) -> None:
    w.string(item[0]).array(item[1], Writer.i32)


def _read_topic(r: Reader) -> tuple[str, list[int]]:
    return r.string(), r.array(Reader.i32)


def encode_value(m: TransactionMetadata) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(m.partitions):
        by_topic.setdefault(t, []).append(p)
    w = Writer().i16(VALUE_VERSION).i64(m.producer_id).i16(m.producer_epoch).i32(m.timeout_ms).i8(int(m.state))
    w.array(by_topic.items(), _write_topic)
    w.i64(m.last_update_ms).i64(m.start_ms)
    w.i64(m.last_producer_id).i16(m.last_producer_epoch).i8(int(m.tv2)).i64(m.next_producer_id)
    return w.to_bytes()


def value_of(m: TransactionMetadata) -> bytes | None:
    """The record value for ``m``: a tombstone (None) once the id is Dead, as Kafka writes."""
    return None if m.state is TransactionState.DEAD else encode_value(m)


# The value of an id with no partitions (Empty, Complete*: nearly all of a million ids) in one
# unpack: version, producer id, epoch, timeout, state, a zero partition count, then the tail.
_NO_PARTITIONS_VALUE = struct.Struct(">hqhibiqqqhbq")


def decode_value(txn_id: str, data: bytes) -> TransactionMetadata:
    if len(data) == _NO_PARTITIONS_VALUE.size:
        (version, pid, epoch, timeout, state, count, last_update, start, last_pid, last_epoch, tv2,
         next_pid) = _NO_PARTITIONS_VALUE.unpack(data)
        if version == VALUE_VERSION and count == 0:
            timeout = _TIMEOUTS.setdefault(timeout, timeout) if len(_TIMEOUTS) < 1024 else timeout
            return TransactionMetadata(txn_id, pid, epoch, timeout, TransactionState(state), last_pid, last_epoch,
                                       NO_PARTITIONS, start, last_update, False, bool(tv2), next_pid)
    r = Reader(data)
    version = r.i16()
    if version != VALUE_VERSION:
        raise ValueError(f"unknown transaction log value version {version}")
    pid, epoch, timeout, state = r.i64(), r.i16(), r.i32(), r.i8()
    partitions = frozenset((topic, p) for topic, ps in r.array(_read_topic) for p in ps) or NO_PARTITIONS
    last_update, start = r.i64(), r.i64()
    last_pid, last_epoch, tv2, next_pid = r.i64(), r.i16(), r.i8(), r.i64()
    # A million ids share a few timeouts: one int object per value, not per id.
    timeout = _TIMEOUTS.setdefault(timeout, timeout) if len(_TIMEOUTS) < 1024 else timeout
    return TransactionMetadata(txn_id, pid, epoch, timeout, TransactionState(state), last_pid, last_epoch, partitions,
                               start, last_update, False, bool(tv2), next_pid)


_TIMEOUTS: dict[int, int] = {}
