"""The persisted state of share partitions (KIP-932): ``__share_group_state``, its records and
their replay.

Kafka's share coordinator writes a ShareSnapshot (the whole state) and then ShareUpdates (the
ranges that changed) under the key {GroupId, TopicId, Partition}, prunes the log below the last
snapshot and replays snapshot + updates at load. oncelog keeps Kafka's fields and moments — a
record is written on every acknowledgement, release and lock expiry (never on acquisition), and
an acknowledgement is answered only once its record is durable — but every record is a
**snapshot** (the whole state of one share partition: its SPSO and its in-flight ranges with
state and delivery count), in a compacted topic: the last record of a key is its state, so
compaction alone bounds the log and replay reads one value per key. The cost is a record the
size of the in-flight ranges, bounded by ``share.partition.max.record.locks`` (a few hundred
bytes in practice: neighbouring records in one state merge into one range).

Placement (docs/share-groups.md): a key uses a partition of ``__share_group_state`` that the
data partition's leader leads — on one node Kafka's rule, the key string's Java hash over all
partitions; on a cluster the same hash over the partitions this node leads — so a state write
never crosses nodes. A state partition's records are only ever this node's.

Record format (``STATE_FORMAT`` = 0): key ``int16 type (0: ShareSnapshot) | string group id |
uuid topic id | int32 partition``; value ``int16 version | int32 snapshot epoch | int32 state
epoch | int32 leader epoch | int64 start offset | int32 delivery-complete count | int32 n |
n × (int64 first offset, int64 last offset, int8 delivery state 0/2/4, int16 delivery count)``;
a tombstone (value null) forgets a share partition (its group or topic deleted).
"""

from __future__ import annotations

import logging
import struct
import uuid
from typing import Callable

from .. import errors
from ..cluster import Placement
from ..errors import KafkaError
from ..partition.internal_topic import InternalTopic, java_string_hash
from ..partition.manager import PartitionManager
from ..protocol import records as rb
from .share_partition import StateBatch, StateChange

log = logging.getLogger("oncelog.groups")

SHARE_STATE_TOPIC = "__share_group_state"
SNAPSHOT_KEY = 0
STATE_FORMAT = 0
_BATCH = struct.Struct(">qqbh")
_HEAD = struct.Struct(">hiiiqii")

Key = tuple[str, uuid.UUID, int]  # (group id, topic id, partition)


def encode_key(key: Key) -> bytes:
    group_id, topic_id, partition = key
    g = group_id.encode()
    return struct.pack(">hH", SNAPSHOT_KEY, len(g)) + g + topic_id.bytes + struct.pack(">i", partition)


def decode_key(data: bytes) -> Key:
    kind, n = struct.unpack_from(">hH", data, 0)
    if kind != SNAPSHOT_KEY or len(data) != 4 + n + 16 + 4:
        raise ValueError(f"not a share-state key (type {kind}, {len(data)} bytes)")
    group_id = data[4:4 + n].decode()
    topic_id = uuid.UUID(bytes=bytes(data[4 + n:20 + n]))
    (partition,) = struct.unpack_from(">i", data, 20 + n)
    return group_id, topic_id, partition


def encode_value(state: StateChange, *, state_epoch: int = 0) -> bytes:
    head = _HEAD.pack(STATE_FORMAT, 0, state_epoch, 0, state.start_offset, state.delivery_complete_count,
                      len(state.batches))
    return head + b"".join(_BATCH.pack(b.first_offset, b.last_offset, b.state, b.delivery_count)
                           for b in state.batches)


def decode_value(data: bytes) -> StateChange:
    version, _snap, _state_epoch, _leader_epoch, start, complete, n = _HEAD.unpack_from(data, 0)
    if version != STATE_FORMAT or n < 0 or len(data) != _HEAD.size + n * _BATCH.size:
        raise ValueError(f"not a share-state value (version {version}, {n} batches, {len(data)} bytes)")
    batches = tuple(StateBatch(*_BATCH.unpack_from(data, _HEAD.size + i * _BATCH.size)) for i in range(n))
    return StateChange(start, batches, complete)


def key_string(key: Key) -> str:
    """Kafka's share-coordinator key string, ``groupId:topicId:partition`` (topic id in Kafka's
    base64 form is not needed: only the hash's spread matters here)."""
    group_id, topic_id, partition = key
    return f"{group_id}:{topic_id}:{partition}"


class ShareStateTopic(InternalTopic):
    key_kind = "share partition"

    def __init__(self, manager: PartitionManager, partitions: int, placement: Placement,
                 segment_bytes: int = 16 << 20) -> None:
        super().__init__(manager, SHARE_STATE_TOPIC, partitions, segment_bytes)
        self.placement = placement
        # The state partitions this node leads, where the share partitions it leads write.
        self.local = [p for p in range(self.partitions) if placement.leads(SHARE_STATE_TOPIC, p)]

    def partition_for(self, key: str) -> int:
        h = java_string_hash(key)
        h = 0 if h == -(1 << 31) else abs(h)
        return self.local[h % len(self.local)]

    def persist(self, key: Key, state: StateChange | None, on_done: Callable[[KafkaError | None], None]) -> None:
        """Write ``state`` (None: a tombstone) for ``key``; ``on_done(None)`` once durable,
        ``on_done(KafkaStorageError)`` if not."""
        value = None if state is None else encode_value(state)
        self.append(key_string(key), [(encode_key(key), value)], on_done)

    def replay(self) -> dict[Key, StateChange]:
        """Every share partition's last state in this node's state partitions (tombstones
        forget); a record that cannot be read is left out with a warning."""
        latest: dict[bytes, bytes | None] = {}
        for p in self.local:
            for header, batch in self.batches(p):
                if header.is_control:
                    continue
                for _, _, key, value in rb.iter_records(batch):
                    latest[key] = value
        out: dict[Key, StateChange] = {}
        for raw_key, value in latest.items():
            if value is None:
                continue
            try:
                out[decode_key(raw_key)] = decode_value(value)
            except (ValueError, struct.error, UnicodeDecodeError) as exc:
                log.warning("%s: a share-state record cannot be read (%s); left out", SHARE_STATE_TOPIC, exc)
        return out


def storage_error(key: Key) -> errors.KafkaStorageError:
    return errors.KafkaStorageError(f"{SHARE_STATE_TOPIC}: the state of share partition {key} is not durable")
