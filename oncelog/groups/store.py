"""The I/O side of the group coordinator: the ``__consumer_offsets`` topic.

Records are placed by group id (Kafka's hash rule, :func:`records.partition_for`), appended as
uncompressed batches through the ordinary partition log and flusher, and reported durable to
the coordinator via its ``on_done`` callback. At start-up every partition is replayed into the
coordinator. The topic has ``cleanup.policy=compact``.
"""

from __future__ import annotations

import asyncio
import logging
import time

from kio.schema.errors import ErrorCode

from ..protocol import records as rb
from ..storage.log_manager import LogManager
from . import records as gr
from .coordinator import GroupCoordinator

log = logging.getLogger("oncelog.groups")

OFFSETS_TOPIC = "__consumer_offsets"


class OffsetsTopic:
    def __init__(self, logs: LogManager, partitions: int, segment_bytes: int = 16 << 20) -> None:
        self.logs = logs
        topic = logs.topics.get(OFFSETS_TOPIC)
        if topic is None:
            # Small segments keep each compaction pass short (it runs on the event loop).
            topic = logs.create_topic(OFFSETS_TOPIC, partitions,
                                      configs={"cleanup.policy": "compact", "segment.bytes": str(segment_bytes)})
        self.partitions = topic.partitions

    def partition_for(self, group_id: str) -> int:
        return gr.partition_for(group_id, self.partitions)

    def persist(self, group_id: str, records: list[tuple[bytes, bytes | None]], on_done) -> None:
        plog = self.logs.get_log(OFFSETS_TOPIC, self.partition_for(group_id))
        now = int(time.time() * 1000)
        data = bytearray(rb.build_batch(records, timestamp_ms=now))
        try:
            plog.append(data, rb.scan_batches(bytes(data)), now)
        except OSError as exc:
            log.error("cannot write to %s: %r", OFFSETS_TOPIC, exc)
            on_done(ErrorCode.kafka_storage_error)
            return
        durable = self.logs.flusher.mark(plog, wait=True)
        if durable is None:
            on_done(ErrorCode.none)
            return

        def done(fut: asyncio.Future) -> None:
            on_done(ErrorCode.kafka_storage_error if fut.cancelled() or fut.exception() else ErrorCode.none)

        durable.add_done_callback(done)

    def replay(self, coordinator: GroupCoordinator) -> int:
        """Load every stored offset and group into the coordinator; returns records read."""
        count = 0
        for p in range(self.partitions):
            plog = self.logs.get_log(OFFSETS_TOPIC, p)
            for seg in plog.segments:
                for position, header in seg.iter_headers(0):
                    if header.is_control or header.last_offset < plog.log_start_offset:
                        continue
                    batch = seg.read(position, header.size)
                    for _, _, key, value in rb.iter_records(batch):
                        count += 1
                        self._apply(coordinator, key, value)
        return count

    @staticmethod
    def _apply(coordinator: GroupCoordinator, key: bytes, value: bytes | None) -> None:
        try:
            k = gr.decode_key(key)
            if isinstance(k, gr.OffsetKey):
                coordinator.load_offset(k, gr.decode_offset_value(value) if value is not None else None)
            else:
                coordinator.load_group(k.group, gr.decode_group_value(value) if value is not None else None)
        except (ValueError, UnicodeDecodeError) as exc:
            log.warning("skipping unreadable %s record: %s", OFFSETS_TOPIC, exc)
