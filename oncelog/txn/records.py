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

Strings are int16-length-prefixed UTF-8, arrays int32-counted; the state byte is
:class:`~oncelog.txn.state.TransactionState`'s value.
"""

from __future__ import annotations

import struct

from .state import TransactionMetadata, TransactionState


def encode_key(txn_id: str) -> bytes:
    b = txn_id.encode()
    return struct.pack(">hh", 0, len(b)) + b


def decode_key(data: bytes) -> str:
    version, n = struct.unpack_from(">hh", data)
    if version != 0:
        raise ValueError(f"unknown transaction log key version {version}")
    return data[4 : 4 + n].decode()


def encode_value(m: TransactionMetadata) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(m.partitions):
        by_topic.setdefault(t, []).append(p)
    out = bytearray(struct.pack(">hqhib", 1, m.producer_id, m.producer_epoch, m.timeout_ms, int(m.state)))
    out += struct.pack(">i", len(by_topic))
    for t, ps in by_topic.items():
        tb = t.encode()
        out += struct.pack(">h", len(tb)) + tb + struct.pack(">i", len(ps)) + b"".join(struct.pack(">i", p) for p in ps)
    out += struct.pack(">qqqhbq", m.last_update_ms, m.start_ms, m.last_producer_id, m.last_producer_epoch, int(m.tv2),
                       m.next_producer_id)
    return bytes(out)


def value_of(m: TransactionMetadata) -> bytes | None:
    """The record value for ``m``: a tombstone (None) once the id is Dead, as Kafka writes."""
    return None if m.state is TransactionState.DEAD else encode_value(m)


def decode_value(txn_id: str, data: bytes) -> TransactionMetadata:
    version, pid, epoch, timeout, state = struct.unpack_from(">hqhib", data)
    if version != 1:
        raise ValueError(f"unknown transaction log value version {version}")
    pos = 17
    (n_topics,) = struct.unpack_from(">i", data, pos)
    pos += 4
    partitions = set()
    for _ in range(n_topics):
        (n,) = struct.unpack_from(">h", data, pos)
        topic = data[pos + 2 : pos + 2 + n].decode()
        pos += 2 + n
        (count,) = struct.unpack_from(">i", data, pos)
        pos += 4
        for _ in range(count):
            partitions.add((topic, struct.unpack_from(">i", data, pos)[0]))
            pos += 4
    last_update, start, last_pid, last_epoch, tv2, next_pid = struct.unpack_from(">qqqhbq", data, pos)
    return TransactionMetadata(txn_id, pid, epoch, timeout, TransactionState(state), last_pid, last_epoch, partitions,
                               start, last_update, False, bool(tv2), next_pid)
