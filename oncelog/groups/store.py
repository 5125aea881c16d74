"""The I/O side of the group coordinator: the ``__consumer_offsets`` topic.

Group metadata and offset commits are records placed by group id; at start-up every partition is
replayed into the coordinator: offsets and classic groups by ``load_offset`` / ``load_group``,
consumer (KIP-848) group records by ``load_consumer_record(key, value or None)``, streams
(KIP-1071) group records by ``load_streams_record``. Transactional
offset commits (TxnOffsetCommit) are written as transactional batches of the producer and
replayed as pending until their marker; such batches hold nothing else.
"""

from __future__ import annotations

import logging
from typing import Callable

from .. import errors
from ..errors import KafkaError
from ..faults import Faults
from ..protocol import records as rb
from ..partition.internal_topic import OFFSETS_TOPIC, InternalTopic
from ..partition.manager import PartitionManager
from . import consumer_records as cr
from . import records as gr
from . import streams_records as sr
from .coordinator import GroupCoordinator

log = logging.getLogger("oncelog.groups")


class OffsetsTopic(InternalTopic):
    key_kind = "group"

    def __init__(self, manager: PartitionManager, partitions: int, segment_bytes: int = 16 << 20,
                 faults: Faults | None = None) -> None:
        super().__init__(manager, OFFSETS_TOPIC, partitions, segment_bytes)
        self.faults = faults if faults is not None else Faults()  # the broker's: offsets-txn-write

    def persist(self, group_id: str, records: list[tuple[bytes, bytes | None]],
                on_done: Callable[[KafkaError | None], None]) -> None:
        """The coordinator's ``persist``: append ``records`` and answer ``on_done(None)`` once
        durable, ``on_done(KafkaStorageError)`` if they are not."""
        self.append(group_id, records, on_done)

    def persist_transactional(self, group_id: str, producer_id: int, producer_epoch: int,
                              records: list[tuple[bytes, bytes | None]],
                              on_done: Callable[[KafkaError | None], None]) -> None:
        """TxnOffsetCommit: offsets written as part of a producer's transaction; they take
        effect when its COMMIT marker reaches this partition (see the coordinator). ``on_done``
        as :meth:`persist`."""
        if self.faults and self.faults.fire("offsets-txn-write"):
            on_done(errors.KafkaStorageError(f"{OFFSETS_TOPIC}: write failed (fault offsets-txn-write)"))
            return
        self.append(group_id, records, on_done, producer_id=producer_id,
                    producer_epoch=producer_epoch, transactional=True)

    def replay(self, coordinator: GroupCoordinator) -> int:
        """Load every stored offset and group into the coordinator; returns records read."""
        count = 0
        for p in range(self.partitions):
            # Transactional offset commits wait for their marker, as they did when written.
            pending: dict[int, list[tuple[bytes, bytes | None]]] = {}
            for header, batch in self.batches(p):
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
                    try:
                        k = gr.decode_key(key)
                        if isinstance(k, gr.OffsetKey) and value is not None:
                            coordinator.stage_txn_offsets(producer_id, k.group,
                                                          {(k.topic, k.partition): gr.decode_offset_value(value)})
                    except ValueError as exc:  # TruncatedRecord, UnicodeDecodeError, unknown version
                        log.warning("skipping unreadable %s record: %s", OFFSETS_TOPIC, exc)
        return count

    @staticmethod
    def _apply(coordinator: GroupCoordinator, key: bytes, value: bytes | None) -> None:
        try:
            k = gr.decode_key(key)
            if isinstance(k, gr.OffsetKey):
                coordinator.load_offset(k, gr.decode_offset_value(value) if value is not None else None)
            elif isinstance(k, gr.GroupKey):
                coordinator.load_group(k.group, gr.decode_group_value(value) if value is not None else None)
            elif isinstance(k, sr.STREAMS_KEYS):  # a streams (KIP-1071) group's record
                load = getattr(coordinator, "load_streams_record", None)
                if load is not None:
                    load(k, sr.decode_streams_value(k, value) if value is not None else None)
            elif isinstance(k, cr.CONSUMER_KEYS):  # a consumer (KIP-848) group's record
                v = cr.decode_consumer_value(k, value) if value is not None else None
                load = getattr(coordinator, "load_consumer_record", None)
                if load is not None:  # a coordinator without consumer groups ignores them
                    load(k, v)
            elif value is not None:  # ConsumerGroupPartitionMetadata: deprecated, nothing to load
                cr.decode_consumer_value(k, value)  # still checked: unreadable bytes are warned of
        except (ValueError, UnicodeDecodeError) as exc:
            log.warning("skipping unreadable %s record: %s", OFFSETS_TOPIC, exc)
