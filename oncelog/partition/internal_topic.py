"""Compacted topics the broker writes itself: ``__consumer_offsets`` and ``__transaction_state``.

Records are placed by key with Kafka's hash rule (a group id or transactional id), built into
uncompressed batches and written through :meth:`oncelog.partition.Partition.append` with the
coordinator origin (the same path as client batches and markers, so a transactional offset
commit opens its producer's transaction on the partition as a client's batch would), then
reported durable through a callback: ``on_done(None)`` once durable, else
``on_done(KafkaStorageError)`` (a domain error; the coordinators install nothing then, and their
API edges answer it NOT_COORDINATOR, as Kafka's coordinators answer a KAFKA_STORAGE_ERROR of their
log). A write refused by a full disk leaves nothing in the log. Replays read every batch from the
log start.

The two topics' names and Kafka's placement rule (``Utils.abs(key.hashCode) % partitions``, with
Java's ``String.hashCode``) live here, below both coordinators: a group id and a transactional id
land on the partition Kafka would choose. Data directories written before oncelog placed keys as
Kafka does keep their placement, ``(hashCode & 0x7fffffff) % partitions`` (``legacy``: it differs
for a negative hash), because their records are where it put them; the data directory's
``meta.json`` says which (:attr:`oncelog.metadata.Metadata.internal_placement`).
"""

from __future__ import annotations

import logging
import struct
from typing import Callable, Iterator

from .. import errors
from ..errors import KafkaError
from ..notices import notice
from ..protocol import records as rb
from ..storage.flusher import when_durable
from .manager import PartitionManager
from .partition import AppendOrigin

log = logging.getLogger("oncelog.storage")

OFFSETS_TOPIC = "__consumer_offsets"
TXN_TOPIC = "__transaction_state"


def java_string_hash(s: str) -> int:
    """Java's String.hashCode over UTF-16 code units, as Kafka uses to place a group."""
    h = 0
    for unit in struct.unpack(f">{len(s.encode('utf-16-be')) // 2}H", s.encode("utf-16-be")):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_or_txn_id: str, partitions: int, placement: str = "kafka") -> int:
    """The internal-topic partition of a group or transactional id: Kafka's
    ``Utils.abs(hashCode) % partitions`` (``Utils.abs`` maps Integer.MIN_VALUE to 0), or with
    ``placement="legacy"`` the rule of data directories oncelog wrote before,
    ``(hashCode & 0x7fffffff) % partitions`` — the same for a hash >= 0, else not (-1: Kafka
    1 % n, legacy 2147483647 % n)."""
    h = java_string_hash(group_or_txn_id)
    if placement == "legacy":
        return (h & 0x7FFFFFFF) % partitions
    return (0 if h == -(1 << 31) else abs(h)) % partitions


class InternalTopic:
    key_kind = "key"  # what a key is, for messages: "group", "transactional id"

    def __init__(self, manager: PartitionManager, name: str, partitions: int, segment_bytes: int) -> None:
        self.manager = manager
        self.name = name
        # Small segments keep each compaction pass short (it runs on the event loop).
        configs = {"cleanup.policy": "compact", "segment.bytes": str(segment_bytes)}
        self.partitions = manager.topics.ensure_internal(name, partitions, configs)

    def partition_for(self, key: str) -> int:
        return partition_for(key, self.partitions, self.manager.topics.internal_placement)

    def append(self, key: str, records: list[tuple[bytes, bytes | None]],
               on_done: Callable[[KafkaError | None], None], *, producer_id: int = rb.NO_PRODUCER_ID,
               producer_epoch: int = -1, transactional: bool = False) -> int:
        """Append ``records`` to the partition of ``key``; ``on_done(None)`` once durable,
        ``on_done(KafkaStorageError)`` if the write or the flush failed. Returns the batch's
        offset (-1 if the write failed)."""
        partition = self.manager.get(self.name, self.partition_for(key))
        now = self.manager.logs.clock()
        data = rb.build_batch(records, timestamp_ms=now, producer_id=producer_id, producer_epoch=producer_epoch,
                              attributes=rb.ATTR_TRANSACTIONAL if transactional else 0)
        try:
            first = partition.append(data, now_ms=now, origin=AppendOrigin.COORDINATOR).first_offset
        except errors.KafkaStorageError as exc:  # a full disk: nothing was written
            notice(log, "cannot write to %s: %s", self.name, exc, level=logging.ERROR,
                   key=("internal-write", self.name))
            on_done(self._not_durable(key))
            return -1
        when_durable(self.manager.flusher, [partition.log], lambda ok: on_done(None if ok else self._not_durable(key)))
        return first

    def _not_durable(self, key: str) -> errors.KafkaStorageError:
        return errors.KafkaStorageError(f"{self.name}: the records of {self.key_kind} {key!r} are not durable")

    def batches(self, partition: int) -> Iterator[tuple[rb.BatchHeader, bytes]]:
        """Every batch of a partition from its log start, with its bytes (read a chunk at a
        time: a replay may read millions of small batches). None for a partition another node
        of a cluster leads (its coordinator loads it there)."""
        if not self.manager.here(self.name, partition):
            return
        plog = self.manager.get(self.name, partition).log
        start = plog.log_start_offset
        for seg in list(plog.segments):
            for _, header, data in seg.iter_batches():
                if header.last_offset >= start:
                    yield header, data
