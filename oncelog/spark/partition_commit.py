"""``atomicity=partition``: each write task commits its own transaction, with a progress marker
inside it, so a retried, replayed or zombie task writes its rows exactly once.

The unit of atomicity is one Spark write partition ``p`` of one micro-batch ``b``. Its task::

    1. InitProducerId of the transactional id ``<prefix>.p<p>`` (stable across attempts and
       runs): fences every earlier producer of the same partition (a failed attempt, a task of
       a killed run, a zombie) and aborts its open transaction, or waits until its commit is
       complete;
    2. reads the partition's progress marker: the offset committed for the group
       ``<prefix>.p<p>`` on partition 0 of the commit-log topic (OffsetFetch with
       ``require_stable``, so only committed transactions count). The marker is ``b' + 1``
       for the last batch ``b'`` that partition ``p`` committed;
    3. if the marker shows batch ``b`` (or a later one) done, the task writes nothing: the
       rows of (b, p) are already visible (it drains its input and compares the row count
       with the one recorded in the marker, logging a warning if replay was not deterministic);
    4. otherwise it writes its rows into the transaction, adds the marker ``b + 1`` to it
       (AddOffsetsToTxn + TxnOffsetCommit, metadata ``{"batchId", "partition", "records"}``;
       Kafka refuses offsets for unknown topics, hence a real topic-partition),
    5. and commits (EndTxn). Any answer but NONE fails the task (a newer attempt fenced it, or
       the coordinator aborted the transaction after ``transaction.timeout.ms``): nothing of it
       became visible, and Spark's retry or the replay writes it.

Rows and marker commit or abort together, so "marker says done" is equivalent to "rows
visible". The driver's ``commit()`` has nothing transactional left to do and ``abort()``
nothing to undo: a task's transaction is committed by the task, or aborted by the next
InitProducerId of its id (or by the coordinator's timeout).

**Guarantee.** Exactly once per Spark partition, *provided replay is deterministic*: Spark
re-executes an uncommitted batch with the same offsets, and partition ``p`` of batch ``b``
must then get the same rows as before. That holds for the oncelog source with a plan that has
no shuffle before the sink (the write partitions are the source's offset ranges, in a fixed
order) or whose shuffle is deterministic. If replay is not deterministic (a shuffle under
adaptive query execution, non-deterministic expressions, a source that does not replay the
same rows), rows that moved from a committed partition to an uncommitted one are written
twice, and rows that moved the other way are lost. A micro-batch is visible partition by
partition: a read_committed reader may see some of a batch's partitions before the others,
and after a crash the rest appears when the query restarts (there is no visibility barrier,
:mod:`oncelog.spark.barrier`, in this mode). ``atomicity=batch`` has neither caveat (the driver
decides the whole batch) and costs a decision write, a barrier and an EndTxn per task per batch.

Progress markers are ordinary consumer-group offsets: ``kafka-consumer-groups --describe
--group <prefix>.p0`` (or ``Consumer.committed``) shows the last batch each partition wrote.
Like any group's offsets they expire once the group has been empty for the broker's
``offsets.retention.minutes`` (7 days by default on Kafka): a query stopped longer than that
with a batch half committed would write that batch's committed partitions again on restart.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from ..client.kafka import KafkaClient, KafkaProtocolError, TransactionalProducer
from .batch_commit import init_transactional
from .faults import crash_point

log = logging.getLogger("oncelog.spark")


class PartitionCommitError(RuntimeError):
    """A write task's transaction could not be committed (typically: fenced by a newer attempt
    of the same partition, or aborted by the coordinator after ``transaction.timeout.ms``). The
    task fails; Spark's retry or the replay reads the marker to learn whether it took effect."""


def transactional_id(prefix: str, partition_id: int) -> str:
    """One transactional id per (query, write partition), the same in every attempt and run."""
    return f"{prefix}.p{partition_id}"


def marker_group(prefix: str, partition_id: int) -> str:
    """The consumer group whose committed offset is partition ``partition_id``'s marker."""
    return f"{prefix}.p{partition_id}"


@dataclass(frozen=True)
class Marker:
    """What a write partition committed last: batch ``batch_id`` with ``records`` rows."""

    batch_id: int
    partition_id: int
    records: int

    @property
    def offset(self) -> int:
        return self.batch_id + 1

    def metadata(self) -> str:
        return json.dumps({"batchId": self.batch_id, "partition": self.partition_id, "records": self.records},
                          sort_keys=True)

    @classmethod
    def read(cls, client: KafkaClient, marker_tp: tuple[str, int], prefix: str, partition_id: int) -> "Marker | None":
        """Step 2: the committed marker, or None when partition ``partition_id`` never committed."""
        offset, metadata = client.offset_fetch(marker_group(prefix, partition_id), [marker_tp],
                                               require_stable=True)[marker_tp]
        if offset < 0:
            return None
        try:
            records = int(json.loads(metadata).get("records", -1))
        except (ValueError, AttributeError):
            records = -1
        return cls(offset - 1, partition_id, records)


class PartitionTransaction:
    """Steps 1-5 for one write task; the rows themselves are sent by the caller through
    :attr:`producer` between :meth:`begin` and :meth:`commit`."""

    def __init__(self, client: KafkaClient, prefix: str, partition_id: int, batch_id: int, marker_topic: str,
                 transaction_timeout_ms: int) -> None:
        self.client = client
        self.prefix = prefix
        self.partition_id = partition_id
        self.batch_id = batch_id
        self.marker_tp = (marker_topic, 0)
        self.producer = TransactionalProducer(client, transactional_id(prefix, partition_id), transaction_timeout_ms)
        self.done: Marker | None = None

    def begin(self) -> bool:
        """Steps 1-2. True when this batch's rows for this partition must be written; False
        when the marker shows them (or a later batch) already committed (step 3)."""
        init_transactional(self.producer)
        marker = Marker.read(self.client, self.marker_tp, self.prefix, self.partition_id)
        if marker is not None and marker.batch_id >= self.batch_id:
            self.done = marker
            return False
        return True

    def check_replay(self, records: int) -> None:
        """Step 3's check: a skipped replay should have seen as many rows as were committed."""
        done = self.done
        if done is not None and done.batch_id == self.batch_id and done.records >= 0 and done.records != records:
            log.warning("%s: replay of batch %d, partition %d got %d rows, but %d were committed: replay is not "
                        "deterministic, so atomicity=partition cannot be exactly-once for this query (use "
                        "atomicity=batch)", self.prefix, self.batch_id, self.partition_id, records, done.records)

    def commit(self, records: int) -> None:
        """Steps 4-5: the marker into the transaction, then EndTxn(commit)."""
        marker = Marker(self.batch_id, self.partition_id, records)
        p = self.producer
        try:
            # A newer attempt's InitProducerId may fence this one while its rows are in flight:
            # Apache Kafka then answers them INVALID_PRODUCER_EPOCH / PRODUCER_FENCED.
            p.flush()
            p.send_offsets(marker_group(self.prefix, self.partition_id),
                           {self.marker_tp: (marker.offset, marker.metadata())})
        except KafkaProtocolError as exc:
            # Before EndTxn: nothing of this transaction is visible, whatever the error.
            raise PartitionCommitError(f"{p.transactional_id}: writing the rows and marker of batch {self.batch_id} failed "
                                       f"({exc}); nothing of this attempt is visible") from None
        crash_point("task-write", self.batch_id)  # rows and marker sent, transaction open
        code = p.commit()
        if code != ErrorCode.none:
            # Fenced or timed out; only if an earlier, unanswered try of this EndTxn went
            # through is anything visible, and then the marker says so: a retry reads it.
            raise PartitionCommitError(
                f"{p.transactional_id}: committing batch {self.batch_id} failed with {code.name.upper()} "
                "(a newer attempt of this partition fenced this one, or the transaction outlived "
                "transaction.timeout.ms)")
        self.done = marker

    def abort(self) -> None:
        try:
            self.producer.abort()
        except Exception as exc:  # the next InitProducerId of this id (or the timeout) ends it
            log.warning("could not abort %s: %s", self.producer.transactional_id, exc)
        finally:
            self.producer.close()
