"""Compacted topics the broker writes itself: ``__consumer_offsets`` and ``__transaction_state``.

Records are placed by key with Kafka's hash rule (a group id or transactional id), built into
uncompressed batches and written through :meth:`oncelog.partition.Partition.append` with the
coordinator origin (the same path as client batches and markers, so a transactional offset
commit opens its producer's transaction on the partition as a client's batch would), then
reported durable through a callback. Replays read every batch from the log start.
"""

from __future__ import annotations

import logging
from typing import Callable, Iterator

from kio.schema.errors import ErrorCode

from ..groups.records import partition_for
from ..protocol import records as rb
from ..storage.flusher import when_durable
from .manager import PartitionManager
from .partition import AppendOrigin

log = logging.getLogger("oncelog.storage")


class InternalTopic:
    def __init__(self, manager: PartitionManager, name: str, partitions: int, segment_bytes: int) -> None:
        self.manager = manager
        self.name = name
        topic = manager.logs.topics.get(name)
        if topic is None:
            # Small segments keep each compaction pass short (it runs on the event loop).
            configs = {"cleanup.policy": "compact", "segment.bytes": str(segment_bytes)}
            topic = manager.logs.create_topic(name, partitions, configs=configs, strict=False)
        self.partitions = topic.partitions

    def partition_for(self, key: str) -> int:
        return partition_for(key, self.partitions)

    def append(self, key: str, records: list[tuple[bytes, bytes | None]], on_done: Callable[[ErrorCode], None], *,
               producer_id: int = rb.NO_PRODUCER_ID, producer_epoch: int = -1, transactional: bool = False) -> int:
        """Append ``records`` to the partition of ``key``; ``on_done`` once durable. Returns the
        batch's offset (-1 if the write failed)."""
        partition = self.manager.get(self.name, self.partition_for(key))
        now = self.manager.logs.clock()
        data = rb.build_batch(records, timestamp_ms=now, producer_id=producer_id, producer_epoch=producer_epoch,
                              attributes=rb.ATTR_TRANSACTIONAL if transactional else 0)
        try:
            first = partition.append(data, now_ms=now, origin=AppendOrigin.COORDINATOR).first_offset
        except OSError as exc:
            log.error("cannot write to %s: %r", self.name, exc)
            on_done(ErrorCode.kafka_storage_error)
            return -1
        when_durable(self.manager.flusher, [partition.log],
                     lambda ok: on_done(ErrorCode.none if ok else ErrorCode.kafka_storage_error))
        return first

    def batches(self, partition: int) -> Iterator[tuple[rb.BatchHeader, bytes]]:
        """Every batch of a partition from its log start, with its bytes."""
        plog = self.manager.get(self.name, partition).log
        for seg, position, header in plog.batches_from(plog.log_start_offset):
            yield header, seg.read(position, header.size)
