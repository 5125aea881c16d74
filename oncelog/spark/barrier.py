"""The visibility barrier: a micro-batch's output appears on each partition all at once.

Why: the exactly-once sink commits a batch as several Kafka transactions (one per write task),
ended one after another by the driver. A read_committed reader sees a partition up to its *last
stable offset* (LSO): the first offset of the earliest transaction still open there. Without a
barrier, between two of those EndTxns a reader could see task 1's rows of a partition and not
yet task 2's: part of a micro-batch.

How: before the batch's tasks start (``streamWriter()`` on the driver), a *barrier transaction*
``<prefix>.barrier`` writes one record to every partition of the output topic and stays open.
Every row the tasks write lands after that record, so while the barrier is open no partition's
LSO can pass any of the batch's rows, whichever task transactions are already committed. Once
every task transaction is committed, the driver **aborts** the barrier: its abort markers move
each partition's LSO past the whole batch at once. Aborted, the barrier's records are never
returned to a read_committed reader (read_uncommitted readers see them, as they see any
uncommitted data).

Invariants:
* the barrier is opened after the previous batch's commit (Spark plans batch N+1 after it has
  committed batch N) and after recovery rolled forward any pending decision, and before any
  write task of the batch runs;
* it is ended only after every task transaction of a *decided* batch is committed, or when the
  batch is given up (abort); a crash in between leaves it open, holding the output back, until
  the next run's ``streamWriter()`` re-initialises the barrier id (after its own roll-forward)
  or ``transaction.timeout.ms`` passes;
* ``InitProducerId`` on the stable barrier id fences and aborts any barrier a previous run left.

What it gives is what one Kafka transaction gives: per partition, all of the batch or none of
it. Across partitions the abort markers land one partition after another (within one request on
one broker), exactly as the markers of a single Kafka transaction do.

It covers the partitions of the ``topic`` option. With a ``topic`` column the topics are known
only to the tasks, and each task transaction is atomic on its own (documented in docs/connector.md).
"""

from __future__ import annotations

import json
import logging
import sys

from ..client.kafka import KafkaClient, KafkaProtocolError, TransactionalProducer

log = logging.getLogger("oncelog.spark")

BARRIER_KEY = b"oncelog.barrier"


def barrier_id(prefix: str) -> str:
    # Not "<prefix>-...": the orphan sweep aborts "<prefix>-*" task transactions and must not
    # end the barrier before the batch is committed.
    return f"{prefix}.barrier"


def in_commit_runner() -> bool:
    """True inside Spark's streaming sink commit runner, which also calls ``streamWriter()``
    (after the tasks ran, right before ``commit()``/``abort()``): a barrier opened there would
    come after the batch's rows and protect nothing."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename.endswith("python_streaming_sink_runner.py"):
            return True
        frame = frame.f_back
    return False


def open_barrier(client: KafkaClient, prefix: str, topic: str, transaction_timeout_ms: int,
                 batch_hint: str = "") -> tuple[str, int, int] | None:
    """Open the barrier on every partition of ``topic``; returns (transactional id, producer
    id, epoch), or None when the topic does not exist yet (the tasks will create it; that
    batch has per-transaction atomicity only)."""
    meta = client.metadata([topic]).get(topic)
    if meta is None or meta.error.value != 0 or not meta.partitions:
        return None
    producer = TransactionalProducer(client, barrier_id(prefix), transaction_timeout_ms)
    try:
        producer.init()  # fences and aborts a barrier left open by a crashed run
        partitions = sorted(meta.partitions)
        producer.add_partitions([(topic, p) for p in partitions])
        value = json.dumps({"barrier": prefix, "batch": batch_hint}, sort_keys=True).encode()
        for p in partitions:
            producer.send_record(topic, p, BARRIER_KEY, value)
        producer.flush()  # acknowledged before any task may write
        return (producer.transactional_id, producer.producer_id, producer.producer_epoch)
    finally:
        producer.close()


def close_barrier(client: KafkaClient, barrier: tuple[str, int, int] | None) -> None:
    """Abort the barrier, releasing the batch's rows on every partition. An error means it is
    already over (aborted by a timeout or fenced by a newer run): nothing left to release."""
    if barrier is None:
        return
    try:
        code = client.end_txn(*barrier, commit=False)
    except KafkaProtocolError as exc:
        code = exc.code
    if code.value != 0:
        log.info("barrier %s was already ended (%s)", barrier[0], code.name.upper())
