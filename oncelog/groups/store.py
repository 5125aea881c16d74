"""The I/O side of the group coordinator: the ``__consumer_offsets`` topic.

Records are placed by group id (Kafka's hash rule, :func:`records.partition_for`), appended as
uncompressed batches through the ordinary partition log and flusher, and reported durable to
the coordinator via its ``on_done`` callback. At start-up every partition is replayed into the
coordinator. The topic has ``cleanup.policy=compact``.
"""

from __future__ import annotations

import logging
import time

from kio.schema.errors import ErrorCode

from ..protocol import records as rb
from ..storage.flusher import when_durable
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
        when_durable(self.logs.flusher, [plog],
                     lambda ok: on_done(ErrorCode.none if ok else ErrorCode.kafka_storage_error))

    def persist_transactional(self, group_id: str, producer_id: int, producer_epoch: int,
                              records: list[tuple[bytes, bytes | None]], on_done) -> None:
        """TxnOffsetCommit: offsets written as part of a producer's transaction; they take
        effect when its COMMIT marker reaches this partition (see the coordinator)."""
        plog = self.logs.get_log(OFFSETS_TOPIC, self.partition_for(group_id))
        now = int(time.time() * 1000)
        data = bytearray(rb.build_batch(records, timestamp_ms=now, producer_id=producer_id,
                                        producer_epoch=producer_epoch, attributes=rb.ATTR_TRANSACTIONAL))
        first = plog.append(data, rb.scan_batches(bytes(data)), now)[0]
        plog.producers.begin_txn(producer_id, producer_epoch, first, now)
        when_durable(self.logs.flusher, [plog],
                     lambda ok: on_done(ErrorCode.none if ok else ErrorCode.kafka_storage_error))

    def replay(self, coordinator: GroupCoordinator) -> int:
        """Load every stored offset and group into the coordinator; returns records read."""
        count = 0
        for p in range(self.partitions):
            plog = self.logs.get_log(OFFSETS_TOPIC, p)
            # Transactional offset commits wait for their marker, as they did when written.
            pending: dict[int, list[tuple[bytes, bytes | None]]] = {}
            for seg in plog.segments:
                for position, header in seg.iter_headers(0):
                    if header.last_offset < plog.log_start_offset:
                        continue
                    batch = seg.read(position, header.size)
                    if header.is_control:
                        records = pending.pop(header.producer_id, [])
                        if rb.control_type(batch) == rb.CONTROL_COMMIT:
                            for key, value in records:
                                self._apply(coordinator, key, value)
                        continue
                    for _, _, key, value in rb.iter_records(batch):
                        count += 1
                        if header.is_transactional:
                            pending.setdefault(header.producer_id, []).append((key, value))
                        else:
                            self._apply(coordinator, key, value)
            for producer_id, records in pending.items():
                for key, value in records:
                    k = gr.decode_key(key)
                    if isinstance(k, gr.OffsetKey) and value is not None:
                        coordinator.stage_txn_offsets(producer_id, k.group,
                                                      {(k.topic, k.partition): gr.decode_offset_value(value)})
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
