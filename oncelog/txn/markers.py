"""Transaction markers: COMMIT/ABORT control batches written to each partition of a transaction
(see :meth:`oncelog.storage.partition_log.PartitionLog.append_marker`).

The coordinator calls :meth:`MarkerWriter.write` once a PrepareCommit/PrepareAbort is durable
(step 7 of EndTxn); WriteTxnMarkers (admin tools, KIP-664) calls it directly. A marker that
reaches ``__consumer_offsets`` settles the transaction's pending offset commits there.
"""

from __future__ import annotations

import time

from kio.schema.errors import ErrorCode

from .. import faults
from ..groups.records import partition_for
from ..groups.store import OFFSETS_TOPIC
from ..storage.flusher import when_durable
from ..storage.log_manager import LogManager


class MarkerWriter:
    """Writes COMMIT/ABORT markers to a transaction's partitions and reports durability."""

    def __init__(self, logs: LogManager, groups) -> None:
        self.logs = logs
        self.groups = groups

    def write(self, producer_id: int, producer_epoch: int, commit: bool, partitions, on_done,
              coordinator_epoch: int = 0) -> dict[tuple[str, int], ErrorCode]:
        now = int(time.time() * 1000)
        written, results = [], {}
        touches_offsets = False
        for topic, partition in sorted(partitions):
            try:
                plog = self.logs.get_log(topic, partition)
            except Exception:
                results[(topic, partition)] = ErrorCode.unknown_topic_or_partition
                continue  # the topic was deleted: nothing to mark
            plog.append_marker(producer_id, producer_epoch, commit, coordinator_epoch, now)
            written.append(plog)
            if faults.CRASH_POINT == "markers:after-first" and len(partitions) > 1:
                plog.active.flush()
                faults.crash_if("markers:after-first")
            results[(topic, partition)] = ErrorCode.none
            touches_offsets |= topic == OFFSETS_TOPIC

        def durable(ok: bool) -> None:
            if ok and touches_offsets:
                self.groups.complete_txn_offsets(producer_id, commit)
            on_done(ErrorCode.none if ok else ErrorCode.kafka_storage_error)

        when_durable(self.logs.flusher, written, durable)
        return results

    def offsets_partition(self, group_id: str) -> tuple[str, int]:
        topic = self.logs.topics[OFFSETS_TOPIC]
        return OFFSETS_TOPIC, partition_for(group_id, topic.partitions)
