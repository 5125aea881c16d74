"""One topic partition: its log and the transactional state derived from the log's batches.

A :class:`Partition` owns, and is the only writer of:

* its :class:`~oncelog.storage.partition_log.PartitionLog` — bytes, offsets, high watermark;
* its :class:`~oncelog.partition.producer_state.ProducerStateManager` — per producer id the
  epoch, the last sequences (idempotence) and the first offset of an open transaction;
* its :class:`~oncelog.partition.txn_index.AbortedTxnIndex` — the aborted transactions.

Every write — a client's Produce, a transaction marker, a record of an internal topic — goes
through :meth:`Partition.append`, in four steps:

1. **validate** (client batches only): the headers against the topic's config, each
   transactional batch with the transaction coordinator (KIP-890: the producer's transaction
   must hold this partition), then what needs the records (keys on compacted
   topics, timestamp bounds) — :mod:`oncelog.partition.validation`;
2. **check producer state**: every batch against the state the batches before it leave;
   a retried duplicate is answered with its original offsets and nothing is written;
3. **write**: batches recompressed if ``compression.type`` asks for it, then the log assigns
   the offsets and appends the bytes;
4. **update state** (:meth:`Partition._apply`): a data batch advances its producer's sequence
   and may open its transaction here; a COMMIT/ABORT marker closes it, an ABORT is indexed.

Step 4 is also how the state is rebuilt at start-up (:meth:`Partition.open`): the newest
producer-state snapshot, then the batches after it, replayed through the same rules.

The origin of an append says which checks apply (as Kafka's ``AppendOrigin``): ``CLIENT`` —
all of them; ``COORDINATOR`` — the broker's own batches (markers, ``__consumer_offsets``,
``__transaction_state``), built by the broker, so step 1 and the sequence checks are skipped.

Reads: the log's bytes are read directly (``partition.log.read``); what needs transactions —
the last stable offset and the aborted ranges of a read_committed fetch — is asked here.
DeleteRecords and retention move the log start in the log, which returns the new start; the
partition then trims its state (:meth:`Partition.delete_records`, :meth:`Partition.apply_retention`).
Durability is not handled here: the caller marks the log for the flusher
(:mod:`oncelog.storage.flusher`) and waits as its request requires.

A full disk: a write the log refuses raises :class:`~oncelog.errors.KafkaStorageError` in step 3,
before step 4, so the producer state and the aborted index are as if the append never came (a
retry of the batch is not taken for a duplicate). The files derived from the log are optional
at the moment they are written: a producer-state snapshot that cannot be written (at a roll, a
log start move, a clean shutdown) is skipped — the replay at start-up then begins at an older
snapshot — and the aborted index keeps its entry in memory until its file can be rewritten,
which must happen before any snapshot past that entry is taken (:meth:`AbortedTxnIndex.sync`).

Errors are domain errors (:mod:`oncelog.errors`); only API handlers map them to wire codes.
"""

from __future__ import annotations

import enum
import logging
from typing import Callable, NamedTuple

from .. import errors
from ..notices import notice
from ..protocol import records as rb
from ..storage.partition_log import PartitionLog
from .producer_state import ProducerStateManager
from .txn_index import AbortedTxn, AbortedTxnIndex
from . import validation

log = logging.getLogger("oncelog.partition")


class AppendOrigin(enum.Enum):
    CLIENT = "client"  # a Produce request: every check
    COORDINATOR = "coordinator"  # the broker's own batches: markers and internal topics


class AppendInfo(NamedTuple):  # a tuple, not a frozen dataclass: built once per append, on the hot path
    """Where an append went: the offsets of its first and last records (a duplicate's are
    those of the original write) and the partition's log start offset."""

    first_offset: int
    last_offset: int
    log_start_offset: int
    duplicate: bool = False
    # Kafka's LogAppendInfo.logAppendTime: the time stamped on the batch with
    # message.timestamp.type=LogAppendTime, a duplicate's original max timestamp, else -1.
    log_append_time: int = -1


# Verifies one transactional client batch for this partition with the transaction coordinator;
# raises a domain error.
TxnVerifier = Callable[["Partition", rb.BatchHeader], None]


class Partition:
    def __init__(self, log: PartitionLog, *, internal: bool = False, node_id: int = 1) -> None:
        self.log = log
        self.topic = log.topic
        self.index = log.partition
        self.name = f"{log.topic}-{log.partition}"
        self.internal = internal  # clients may not write to internal topics (``__`` names)
        self.node_id = node_id  # the broker holding the one replica (the ISR, for messages)
        self.producers = ProducerStateManager(log.directory)
        self.aborted = AbortedTxnIndex(log.directory)
        log.on_roll = self._on_roll

    @classmethod
    def open(cls, log: PartitionLog, *, internal: bool = False, node_id: int = 1) -> "Partition":
        """A partition over an opened (recovered) log, its state rebuilt from the log."""
        partition = cls(log, internal=internal, node_id=node_id)
        partition._rebuild()
        return partition

    # ------------------------------------------------------------------ the append path

    def append(self, records, *, now_ms: int, origin: AppendOrigin = AppendOrigin.CLIENT, acks: int = 1,
               verify_txn: TxnVerifier | None = None) -> AppendInfo:
        """Append ``records`` (whole record batches) in the four steps of the module docstring.
        Raises a :class:`~oncelog.errors.KafkaError` when a check fails; nothing is written then."""
        client = origin is AppendOrigin.CLIENT
        config = self.log.config
        # Step 1. Validate.
        if client:
            if self.internal:
                raise errors.InvalidTopic(f"cannot produce to internal topic {self.topic}")
            batches = validation.scan(records, config, name=self.name)
            if verify_txn is not None:
                for header in batches:
                    if header.is_transactional:
                        verify_txn(self, header)
            try:
                validation.validate(records, batches, config, acks=acks, now_ms=now_ms, name=self.name,
                                    node_id=self.node_id)
            except errors.KafkaError as exc:
                raise self._with_log_start(exc)
        else:
            batches = rb.scan_batches(records)
        # Step 2. Check every batch against the producer state; nothing changes yet.
        try:
            pending, duplicate = self.producers.prepare(batches, check_sequences=client)
        except errors.KafkaError as exc:
            raise self._with_log_start(exc)
        if duplicate is not None:
            # Kafka answers a duplicate with the original's offsets and its max timestamp as the
            # log append time (UnifiedLog.append: appendInfo.setLogAppendTime(duplicate.timestamp)).
            return AppendInfo(duplicate.first_offset, duplicate.last_offset, self.log.log_start_offset, True,
                              duplicate.timestamp_ms)
        # Step 3. Write (pending keeps the producer fields, which recompression does not change).
        if client and config.compression_type != "producer":
            records, batches = validation.recompress(config, records, batches)
        firsts = self.log.append(records, batches, now_ms)
        # Step 4. Update the state, at the offsets just assigned.
        self.producers.commit(pending, firsts, now_ms)
        if not client:
            # Markers: a control batch is written alone (one per append), so closing the
            # transaction after the data batches of the same append keeps the log's order.
            for header, first in zip(batches, firsts):
                if header.is_control:
                    batch = memoryview(records)[header.position : header.position + header.size]
                    self._end_txn(header.producer_id, header.producer_epoch, first, now_ms, *_marker(batch))
        return AppendInfo(firsts[0], firsts[-1] + batches[-1].last_offset_delta, self.log.log_start_offset, False,
                          now_ms if config.message_timestamp_type == "LogAppendTime" else -1)

    def _with_log_start(self, exc: errors.KafkaError) -> errors.KafkaError:
        """Record and producer-state errors carry the partition's log start offset in Kafka's
        answer (ReplicaManager.appendToLocalLog: processFailedRecord); format errors (corrupt,
        too large) and unknown partitions answer -1."""
        exc.log_start_offset = self.log.log_start_offset
        return exc

    def append_marker(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                      now_ms: int) -> int:
        """Write a COMMIT/ABORT control batch for ``producer_id``'s transaction; returns its offset."""
        data = rb.build_control_batch(producer_id, producer_epoch, commit, coordinator_epoch, now_ms)
        return self.append(data, now_ms=now_ms, origin=AppendOrigin.COORDINATOR).first_offset

    def _end_txn(self, producer_id: int, producer_epoch: int, marker_offset: int, ts: int, commit: bool,
                 coordinator_epoch: int = -1) -> None:
        """A marker at ``marker_offset`` closes the producer's transaction on this partition;
        an aborted one (if it wrote here) goes to the index, unless the index has it already
        (a replay after a restart meets the markers the index was written for)."""
        first = self.producers.complete_txn(producer_id, producer_epoch, marker_offset, ts, coordinator_epoch)
        self.producers.on_high_watermark(self.log.high_watermark)  # bounds the ended-above-HW set
        if commit or first is None or self.aborted.has_marker(marker_offset):
            return
        # Kafka's AbortedTxn.lastStableOffset: the first offset of another open transaction
        # (ended ones whose markers are above the HW do not count there), else past the marker.
        still_open = self.producers.first_ongoing_offset()
        self.aborted.append(AbortedTxn(producer_id, first, marker_offset,
                                       marker_offset + 1 if still_open is None else still_open))

    # ------------------------------------------------------------------ recovery

    def _rebuild(self) -> None:
        """Newest snapshot at or below the LEO, then replay of the batch headers after it:
        data batches through the producer state's rules, markers through :meth:`_end_txn`
        (which re-creates aborted-index entries a crash lost)."""
        log = self.log
        self.aborted.load(log.log_end_offset)
        start = self.producers.load_latest_snapshot(log.log_end_offset)
        if start is None:
            start = log.log_start_offset
        for segment, position, header in log.batches_from(start):
            if header.base_offset < start:
                continue
            if header.is_control:
                self._end_txn(header.producer_id, header.producer_epoch, header.base_offset, header.max_timestamp,
                              *_marker(segment.read(position, header.size)))
            else:
                self.producers.replay(header)

    def _on_roll(self, base_offset: int) -> None:
        # A snapshot per roll bounds the replay at start-up to one segment; the aborted index
        # entries before it must be durable first, as replay will not recreate them.
        self._snapshot(base_offset, "at a segment roll")

    def _snapshot(self, offset: int, when: str) -> bool:
        """Make the aborted index durable, then snapshot the producer state at ``offset``.
        Either failing (a full disk) skips the snapshot: the replay at start-up begins at an
        older one, which is longer but right. Returns whether the snapshot was written."""
        try:
            self.aborted.sync()
            self.producers.write_snapshot(offset)
            return True
        except OSError as exc:
            notice(log, "%s: no producer-state snapshot %s at offset %d: %r; the next start replays from an older one",
                   self.name, when, offset, exc, level=logging.WARNING, key=("snapshot", self.name))
            return False

    # ------------------------------------------------------------------ transactional reads

    def last_stable_offset(self) -> int:
        """Kafka's LSO: the first offset of the oldest transaction that is open, or whose marker
        is not yet below the HW; never above the HW."""
        hw = self.log.high_watermark
        self.producers.on_high_watermark(hw)
        first = self.producers.first_unstable_offset()
        return hw if first is None else min(first, hw)

    def aborted_between(self, start: int, end: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of aborted transactions overlapping [start, end)."""
        return self.aborted.aborted_between(start, end)

    # ------------------------------------------------------------------ log start, expiry, close

    def delete_records(self, offset: int) -> int:
        """DeleteRecords: advance the log start to ``offset``; returns the new log start."""
        before = self.log.log_start_offset
        start = self.log.delete_records(offset)
        if start > before:
            self._log_start_advanced(start)
        return start

    def apply_retention(self, now_ms: int) -> int:
        """Delete closed segments beyond retention; returns the new log start."""
        before = self.log.log_start_offset
        start = self.log.apply_retention(now_ms)
        if start > before:
            self._log_start_advanced(start)
        return start

    def _log_start_advanced(self, start: int) -> None:
        # Producer state outlives the batches it came from (as in Kafka): the replay at start-up
        # begins at the log start, so a producer whose batches are all gone is kept across a
        # restart by a snapshot at the log end (the aborted entries first, as at a roll).
        if self.producers.on_log_start_advanced(start):
            self._snapshot(self.log.log_end_offset, "after the log start moved")
        self.aborted.trim(start)

    def expire_producers(self, now_ms: int, expiration_ms: int) -> int:
        """Drop producers idle longer than ``producer.id.expiration.ms``; returns how many."""
        return self.producers.expire(now_ms, expiration_ms)

    def close(self) -> None:
        """Clean shutdown: the index made durable and the state snapshotted at the log end,
        so the next start replays nothing. The log itself is closed by its LogManager."""
        if self._snapshot(self.log.log_end_offset, "at shutdown"):
            self.aborted.close()
        else:
            self.aborted.close(sync=False)

    def discard(self) -> None:
        """The topic was deleted (with every file of the partition): release the index file."""
        self.aborted.close(sync=False)


def _marker(batch) -> tuple[bool, int]:
    """(commit?, coordinator epoch) of a control batch: its one record's key says COMMIT or
    ABORT, its value (EndTxnMarker: int16 version, int32 coordinator epoch) the epoch."""
    control_type, coordinator_epoch = rb.control_marker(batch)
    return control_type == rb.CONTROL_COMMIT, coordinator_epoch
