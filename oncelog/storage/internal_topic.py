"""Compacted topics the broker writes itself: ``__consumer_offsets`` and ``__transaction_state``.

Records are placed by key with Kafka's hash rule (a group id or transactional id), appended as
uncompressed batches through the ordinary partition log and flusher, and reported durable
through a callback. Replays read every batch from the log start.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Iterator

from kio.schema.errors import ErrorCode

from ..groups.records import partition_for
from ..protocol import records as rb
from .flusher import when_durable
from .log_manager import LogManager

log = logging.getLogger("oncelog.storage")


class InternalTopic:
    def __init__(self, logs: LogManager, name: str, partitions: int, segment_bytes: int) -> None:
        self.logs = logs
        self.name = name
        topic = logs.topics.get(name)
        if topic is None:
            # Small segments keep each compaction pass short (it runs on the event loop).
            topic = logs.create_topic(name, partitions,
                                      configs={"cleanup.policy": "compact", "segment.bytes": str(segment_bytes)},
                                      strict=False)
        self.partitions = topic.partitions

    def partition_for(self, key: str) -> int:
        return partition_for(key, self.partitions)

    def append(self, key: str, records: list[tuple[bytes, bytes | None]], on_done: Callable[[ErrorCode], None], *,
               producer_id: int = rb.NO_PRODUCER_ID, producer_epoch: int = -1, transactional: bool = False) -> int:
        """Append ``records`` to the partition of ``key``; ``on_done`` once durable. Returns the
        batch's offset (-1 if the write failed)."""
        plog = self.logs.get_log(self.name, self.partition_for(key))
        now = int(time.time() * 1000)
        data = rb.build_batch(records, timestamp_ms=now, producer_id=producer_id, producer_epoch=producer_epoch,
                              attributes=rb.ATTR_TRANSACTIONAL if transactional else 0)
        try:
            first = plog.append(data, rb.scan_batches(data), now)[0]
        except OSError as exc:
            log.error("cannot write to %s: %r", self.name, exc)
            on_done(ErrorCode.kafka_storage_error)
            return -1
        if transactional:
            plog.producers.begin_txn(producer_id, producer_epoch, first, now)
        when_durable(self.logs.flusher, [plog],
                     lambda ok: on_done(ErrorCode.none if ok else ErrorCode.kafka_storage_error))
        return first

    def batches(self, partition: int) -> Iterator[tuple[rb.BatchHeader, bytes]]:
        """Every batch of a partition from its log start, with its bytes."""
        plog = self.logs.get_log(self.name, partition)
        for seg in plog.segments:
            for position, header in seg.iter_headers(0):
                if header.last_offset >= plog.log_start_offset:
                    yield header, seg.read(position, header.size)
