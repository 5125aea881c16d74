"""The I/O side of the transaction coordinator: the ``__transaction_state`` topic.

One record per change of a transactional id (formats in :mod:`oncelog.txn.records`), placed by
Kafka's hash rule and compacted; at start-up every partition is replayed into the coordinator.
Markers are written by :mod:`oncelog.txn.markers`.
"""

from __future__ import annotations

import logging

from kio.schema.errors import ErrorCode

from .. import faults
from ..protocol import records as rb
from ..storage.internal_topic import InternalTopic
from ..storage.log_manager import LogManager
from .coordinator import TransactionCoordinator
from .records import decode_key, decode_value, encode_key

log = logging.getLogger("oncelog.txn")

TXN_TOPIC = "__transaction_state"


class TransactionStateTopic(InternalTopic):
    def __init__(self, logs: LogManager, partitions: int, segment_bytes: int = 16 << 20) -> None:
        super().__init__(logs, TXN_TOPIC, partitions, segment_bytes)

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

