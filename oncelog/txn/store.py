"""The I/O side of the transaction coordinator: the ``__transaction_state`` topic.

One record per change of a transactional id (formats in :mod:`oncelog.txn.records`), placed by
Kafka's hash rule and compacted; at start-up every partition is replayed into the coordinator.
Markers are written by :mod:`oncelog.txn.markers`.
"""

from __future__ import annotations

import logging
from typing import Callable

from .. import faults
from ..errors import KafkaError
from ..protocol import records as rb
from ..partition.internal_topic import TXN_TOPIC, InternalTopic
from ..partition.manager import PartitionManager
from .coordinator import TransactionCoordinator
from .records import decode_key, decode_value, encode_key, value_of
from .state import TransactionMetadata

log = logging.getLogger("oncelog.txn")


class TransactionStateTopic(InternalTopic):
    key_kind = "transactional id"

    def __init__(self, manager: PartitionManager, partitions: int, segment_bytes: int = 16 << 20) -> None:
        super().__init__(manager, TXN_TOPIC, partitions, segment_bytes)

    def persist(self, txn_id: str, m: TransactionMetadata, on_done: Callable[[KafkaError | None], None]) -> None:
        """The coordinator's ``persist``: append ``m`` (a tombstone once it is Dead) and answer
        ``on_done(None)`` once durable, ``on_done(KafkaStorageError)`` if it is not."""
        value = value_of(m)

        def durable(error: KafkaError | None) -> None:
            if error is None and faults.CRASH_POINT and value is not None:
                faults.crash_if(f"txn-durable:{m.state.kafka_name}")
            on_done(error)

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

