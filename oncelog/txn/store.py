"""The I/O side of the transaction coordinator: the ``__transaction_state`` topic.

One record per change of a transactional id (formats in :mod:`oncelog.txn.records`), placed by
Kafka's hash rule and compacted; at start-up every partition is replayed into the coordinator.
Markers are written by :mod:`oncelog.txn.markers`.
"""

from __future__ import annotations

import logging
import struct
from typing import Callable

from ..errors import KafkaError
from ..faults import Faults
from ..protocol import records as rb
from ..partition.internal_topic import TXN_TOPIC, InternalTopic
from ..partition.manager import PartitionManager
from .coordinator import TransactionCoordinator
from .records import decode_key, decode_value, encode_key, value_of
from .state import TransactionMetadata

log = logging.getLogger("oncelog.txn")

# A tombstone record's bytes besides its key (length, attributes, deltas, null value, headers:
# at most 1 + 1 + 10 + 5 + 1 + 1 + 1 as varints) and room for the batch header.
TOMBSTONE_RECORD_OVERHEAD = 20
TOMBSTONE_BATCH_SLACK = 1024


class TransactionStateTopic(InternalTopic):
    key_kind = "transactional id"

    def __init__(self, manager: PartitionManager, partitions: int, segment_bytes: int = 16 << 20,
                 faults: Faults | None = None) -> None:
        super().__init__(manager, TXN_TOPIC, partitions, segment_bytes)
        self.faults = faults if faults is not None else Faults()  # the broker's: crash points txn-durable:<State>

    def persist(self, txn_id: str, m: TransactionMetadata, on_done: Callable[[KafkaError | None], None]) -> None:
        """The coordinator's ``persist``: append ``m`` (a tombstone once it is Dead) and answer
        ``on_done(None)`` once durable, ``on_done(KafkaStorageError)`` if it is not."""
        value = value_of(m)

        def durable(error: KafkaError | None) -> None:
            if error is None and self.faults and value is not None:
                self.faults.fire(f"txn-durable:{m.state.kafka_name}")
            on_done(error)

        self.append(txn_id, [(encode_key(txn_id), value)], durable)

    def persist_expired(self, txn_ids: list[str], on_done: Callable[[list[str], KafkaError | None], None]) -> None:
        """The coordinator's ``persist_expired``: the tombstones of expired ids, as Kafka's
        ``removeExpiredTransactionalIds`` writes them: grouped by partition, in batches of at
        most ``max.message.bytes``; ``on_done(ids, error)`` once per batch."""
        by_partition: dict[int, list[str]] = {}
        for txn_id in txn_ids:
            by_partition.setdefault(self.partition_for(txn_id), []).append(txn_id)
        for partition, ids in by_partition.items():
            limit = self.manager.get(self.name, partition).log.config.max_message_bytes - TOMBSTONE_BATCH_SLACK
            chunk: list[str] = []
            records: list[tuple[bytes, None]] = []
            size = 0
            for txn_id in ids:
                key = encode_key(txn_id)
                if records and size + len(key) + TOMBSTONE_RECORD_OVERHEAD > limit:
                    self._append_tombstones(chunk, records, on_done)
                    chunk, records, size = [], [], 0
                chunk.append(txn_id)
                records.append((key, None))
                size += len(key) + TOMBSTONE_RECORD_OVERHEAD
            self._append_tombstones(chunk, records, on_done)

    def _append_tombstones(self, chunk: list[str], records: list[tuple[bytes, None]],
                           on_done: Callable[[list[str], KafkaError | None], None]) -> None:
        # Every id of the chunk is on one partition: the first one's key places the batch.
        self.append(chunk[0], records, lambda error: on_done(chunk, error))

    def replay(self, coordinator: TransactionCoordinator) -> int:
        """Load every partition into the coordinator; returns how many records were read.

        Only an id's last record counts (a record is the whole state of its id, and the log is
        in the order the coordinator made its changes), so each partition's records are read
        into ``{key: last value}`` first and only those values are decoded and loaded; an id
        whose last record is a tombstone is not loaded at all. The work is one dictionary
        assignment per record and one decode per id held: what has not been compacted yet (an
        id's earlier records, the expired ids' records and tombstones) costs little. An id whose
        last record cannot be read is left out with a warning (its earlier state is older than
        what the coordinator last wrote)."""
        count = 0
        for p in range(self.partitions):
            latest: dict[bytes, bytes | None] = {}
            for header, batch in self.batches(p):
                if header.is_control:
                    continue
                for _, _, key, value in rb.iter_records(batch):
                    count += 1
                    latest[key] = value
            for key, value in latest.items():
                if value is None:
                    continue
                try:
                    txn_id = decode_key(key)
                    coordinator.load(txn_id, decode_value(txn_id, value))
                except (ValueError, UnicodeDecodeError, struct.error) as exc:
                    log.warning("skipping unreadable %s record: %s", TXN_TOPIC, exc)
        return count
