"""Transaction markers: COMMIT/ABORT control batches written to each partition of a transaction
(see :meth:`oncelog.partition.Partition.append_marker`).

The coordinator calls :meth:`MarkerWriter.write` once a PrepareCommit/PrepareAbort is durable
(step 7 of EndTxn); WriteTxnMarkers (admin tools, KIP-664) calls it directly. A marker that
reaches ``__consumer_offsets`` settles the transaction's pending offset commits: the writer calls
the ``on_txn_marker(producer_id, commit)`` callback the group side provides (wired in
:mod:`oncelog.broker`), so neither coordinator holds the other.

The CompleteCommit/CompleteAbort record that follows the markers (step 8 of EndTxn) is written
by the coordinator, not here: every change of a transaction's state goes through the
coordinator's one write-ahead path and transition table, and this module stays I/O only.
"""

from __future__ import annotations

from typing import Callable

from .. import errors
from ..errors import KafkaError
from ..faults import Faults
from ..partition.internal_topic import OFFSETS_TOPIC
from ..partition.manager import PartitionManager
from ..storage.flusher import when_durable

OnTxnMarker = Callable[[int, bool], None]


class MarkerWriter:
    """Writes COMMIT/ABORT markers to a transaction's partitions and reports durability."""

    def __init__(self, partitions: PartitionManager, clock: Callable[[], int], on_txn_marker: OnTxnMarker,
                 faults: Faults | None = None) -> None:
        self.partitions = partitions
        self.clock = clock
        self.on_txn_marker = on_txn_marker
        self.faults = faults if faults is not None else Faults()  # the broker's (tests add to it)
        self.written = {True: 0, False: 0}  # markers appended, COMMIT (True) and ABORT (False): metrics

    def write(self, producer_id: int, producer_epoch: int, commit: bool, partitions: set[tuple[str, int]],
              on_done: Callable[[KafkaError | None], None],
              coordinator_epoch: int = 0) -> dict[tuple[str, int], KafkaError | None]:
        """Append a marker to each partition; ``on_done(None)`` once all are durable (or
        ``on_done(KafkaStorageError)``). Returns each partition's result: None, or
        UnknownTopicOrPartition for a partition whose topic was deleted (nothing to mark)."""
        now = self.clock()
        written, results = [], {}
        touches_offsets = False
        # The fault ``markers:drop`` (sensitivity tests only): one data partition of a
        # transaction over two or more never gets its marker.
        dropped = None
        faults = self.faults
        if faults:
            data_partitions = sorted(tp for tp in partitions if tp[0] != OFFSETS_TOPIC)
            if len(data_partitions) > 1 and faults.fire("markers:drop"):
                dropped = data_partitions[-1]
        for topic, partition in sorted(partitions):
            if (topic, partition) == dropped:
                results[(topic, partition)] = None
                continue
            try:
                part = self.partitions.get(topic, partition)
            except Exception:
                results[(topic, partition)] = errors.UnknownTopicOrPartition(f"{topic}-{partition}")
                continue
            part.append_marker(producer_id, producer_epoch, commit, coordinator_epoch, now)
            self.written[commit] += 1
            written.append(part.log)
            if faults and len(partitions) > 1 and faults.armed("markers:after-first"):
                part.log.active.flush()  # the first marker is written when the point is reached
                faults.fire("markers:after-first")
            results[(topic, partition)] = None
            touches_offsets |= topic == OFFSETS_TOPIC

        def durable(ok: bool) -> None:
            if ok and touches_offsets:
                self.on_txn_marker(producer_id, commit)
            on_done(None if ok else errors.KafkaStorageError(
                f"the markers of producer {producer_id} epoch {producer_epoch} are not durable"))

        when_durable(self.partitions.flusher, written, durable)
        return results
