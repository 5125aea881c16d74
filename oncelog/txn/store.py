"""The I/O side of the transaction coordinator: ``__transaction_state`` and marker writes.

``__transaction_state`` holds one record per change of a transactional id (key and value in
:mod:`oncelog.txn.coordinator`), placed by Kafka's hash rule and compacted. Markers are control
batches appended to each partition of a transaction (see
:meth:`oncelog.partition.Partition.append_marker`); a marker in
``__consumer_offsets`` also settles the transaction's pending offset commits.
"""

from __future__ import annotations

import logging
import time

from kio.schema.errors import ErrorCode

from .. import faults
from ..groups.records import partition_for
from ..groups.store import OFFSETS_TOPIC
from ..protocol import records as rb
from ..storage.flusher import when_durable
from ..partition.internal_topic import InternalTopic
from ..partition.manager import PartitionManager
from .coordinator import TransactionCoordinator, decode_key, decode_value, encode_key

log = logging.getLogger("oncelog.txn")

TXN_TOPIC = "__transaction_state"


class TransactionStateTopic(InternalTopic):
    def __init__(self, manager: PartitionManager, partitions: int, segment_bytes: int = 16 << 20) -> None:
        super().__init__(manager, TXN_TOPIC, partitions, segment_bytes)

    def persist(self, txn_id: str, value: bytes | None, on_done) -> None:
        def durable(err: ErrorCode) -> None:
            if err == ErrorCode.none and faults.CRASH_POINT and value is not None:
                faults.crash_if(f"txn-durable:{decode_value(txn_id, value).state.kafka_name}")
            on_done(err)

        self.append(txn_id, [(encode_key(txn_id), value)], durable)

    def replay(self, coordinator: TransactionCoordinator) -> int:
        count = 0
        for p in range(self.partitions):
            for header, batch in self.batches(p):
                if header.is_control:
                    continue
                for _, _, key, value in rb.iter_records(batch):
                    count += 1
                    try:
                        txn_id = decode_key(key)
                        coordinator.load(txn_id, decode_value(txn_id, value) if value is not None else None)
                    except (ValueError, UnicodeDecodeError) as exc:
                        log.warning("skipping unreadable %s record: %s", TXN_TOPIC, exc)
        return count


class MarkerWriter:
    """Writes COMMIT/ABORT markers to a transaction's partitions and reports durability."""

    def __init__(self, partitions: PartitionManager, groups) -> None:
        self.partitions = partitions
        self.groups = groups

    def write(self, producer_id: int, producer_epoch: int, commit: bool, partitions, on_done,
              coordinator_epoch: int = 0) -> dict[tuple[str, int], ErrorCode]:
        now = int(time.time() * 1000)
        written, results = [], {}
        touches_offsets = False
        for topic, partition in sorted(partitions):
            try:
                part = self.partitions.get(topic, partition)
            except Exception:
                results[(topic, partition)] = ErrorCode.unknown_topic_or_partition
                continue  # the topic was deleted: nothing to mark
            part.append_marker(producer_id, producer_epoch, commit, coordinator_epoch, now)
            written.append(part.log)
            if faults.CRASH_POINT == "markers:after-first" and len(partitions) > 1:
                part.log.active.flush()
                faults.crash_if("markers:after-first")
            results[(topic, partition)] = ErrorCode.none
            touches_offsets |= topic == OFFSETS_TOPIC

        def durable(ok: bool) -> None:
            if ok and touches_offsets:
                self.groups.complete_txn_offsets(producer_id, commit)
            on_done(ErrorCode.none if ok else ErrorCode.kafka_storage_error)

        when_durable(self.partitions.flusher, written, durable)
        return results

    def offsets_partition(self, group_id: str) -> tuple[str, int]:
        topic = self.partitions.logs.topics[OFFSETS_TOPIC]
        return OFFSETS_TOPIC, partition_for(group_id, topic.partitions)
