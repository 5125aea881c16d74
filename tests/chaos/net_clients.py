"""Writers and a reader for tests through the fault proxy: transactional writers that keep going
through network faults and record what became of every value, and an independent
read_committed reader.

Every value is unique (``"<writer>-<n>"``) and ends in one of three outcomes:

* ``committed`` — its transaction's commit was acknowledged: a reader must see it exactly once;
* ``aborted``   — its transaction's abort was acknowledged: a reader must never see it;
* ``unknown``   — the writer gave up on the transaction without an acknowledged end (its
  producer was then replaced, which aborts what it left open): seen at most once.

:func:`assert_exactly_once` checks a read against those outcomes, and that nothing else was read.
"""

from __future__ import annotations

import threading
import time

import confluent_kafka as ck
from kio.schema.errors import ErrorCode

from oncelog.client.kafka import KafkaClient, KafkaProtocolError, TransactionalProducer
from oncelog.client.wire import RawClient

COMMITTED, ABORTED, UNKNOWN = "committed", "aborted", "unknown"


class Outcomes:
    """value -> outcome, written by one writer thread."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.outcome: dict[bytes, str] = {}
        self.committed_txns = 0
        self.errors: list[str] = []

    def settle(self, values: list[bytes], outcome: str) -> None:
        for v in values:
            self.outcome[v] = outcome
        self.committed_txns += outcome == COMMITTED


class TxnWriter(threading.Thread):
    """Runs ``txns`` transactions of ``per_txn`` values over ``partitions`` partitions, replacing
    its producer after any error it cannot recover in place; ``stop()`` ends it early."""

    def __init__(self, name: str, bootstrap: str, topic: str, partitions: int, txns: int, per_txn: int = 4) -> None:
        super().__init__(name=name, daemon=True)
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.txns, self.per_txn = txns, per_txn
        self.outcomes = Outcomes(name)
        self._next = 0
        self._stop_event = threading.Event()
        self.failure: BaseException | None = None

    def values(self) -> list[bytes]:
        out = [f"{self.name}-{self._next + i}".encode() for i in range(self.per_txn)]
        self._next += self.per_txn
        return out

    def stop(self) -> None:
        self._stop_event.set()

    def run(self) -> None:
        try:
            self.work()
        except BaseException as exc:  # surfaced by the test (join + failure)
            self.failure = exc

    def work(self) -> None:
        raise NotImplementedError


class ConfluentTxnWriter(TxnWriter):
    """confluent-kafka (librdkafka) transactional producer: abortable errors abort and go on,
    retriable commits are retried, fatal errors replace the producer."""

    CONFIG = {"request.timeout.ms": 2000, "socket.timeout.ms": 2000, "message.timeout.ms": 20000,
              "transaction.timeout.ms": 30000, "retry.backoff.ms": 50, "reconnect.backoff.max.ms": 200,
              "linger.ms": 1}

    def producer(self) -> ck.Producer:
        p = ck.Producer({"bootstrap.servers": self.bootstrap, "transactional.id": f"{self.name}-tid", **self.CONFIG})
        deadline = time.monotonic() + 60
        while True:
            try:
                p.init_transactions(10)
                return p
            except ck.KafkaException as exc:
                if time.monotonic() > deadline or not (exc.args[0].retriable() or exc.args[0].code() == ck.KafkaError._TIMED_OUT):
                    raise

    def work(self) -> None:
        p = self.producer()
        done = 0
        while done < self.txns and not self._stop_event.is_set():
            values = self.values()
            try:
                p.begin_transaction()
                for i, v in enumerate(values):
                    p.produce(self.topic, value=v, partition=i % self.partitions)
                outcome = self.commit(p)
            except ck.KafkaException as exc:
                err = exc.args[0]
                self.outcomes.errors.append(str(err))
                outcome = (ABORTED if self.abort(p) else UNKNOWN) if err.txn_requires_abort() else UNKNOWN
            if outcome == UNKNOWN:
                p = self.producer()  # fences the old one; aborts what it left open
            self.outcomes.settle(values, outcome)
            done += outcome == COMMITTED

    @staticmethod
    def commit(p: ck.Producer) -> str:
        for _ in range(20):
            try:
                p.commit_transaction(10)
                return COMMITTED
            except ck.KafkaException as exc:
                if not exc.args[0].retriable():
                    raise
        return UNKNOWN

    @staticmethod
    def abort(p: ck.Producer) -> bool:
        for _ in range(20):
            try:
                p.abort_transaction(10)
                return True
            except ck.KafkaException as exc:
                if not exc.args[0].retriable():
                    return False
        return False


class ProtocolTxnWriter(TxnWriter):
    """The project's protocol client (:class:`oncelog.client.kafka.TransactionalProducer`, the
    Spark sink's writer): on any error the transaction is given up (``unknown``) and a new
    producer with the same transactional id (InitProducerId: a new epoch, which aborts it) goes on."""

    def producer(self) -> TransactionalProducer:
        deadline = time.monotonic() + 60
        while True:
            client = KafkaClient(self.bootstrap, {"request.timeout.ms": "3000"})
            tp = TransactionalProducer(client, f"{self.name}-tid", 30000)
            try:
                tp.init()
                return tp
            except (KafkaProtocolError, OSError) as exc:
                client.close()
                if time.monotonic() > deadline:
                    raise
                self.outcomes.errors.append(f"init: {exc}")

    def work(self) -> None:
        tp = self.producer()
        done = 0
        while done < self.txns and not self._stop_event.is_set():
            values = self.values()
            try:
                tp.add_partitions([(self.topic, p) for p in range(min(self.partitions, len(values)))])
                for i, v in enumerate(values):
                    tp.send_record(self.topic, i % self.partitions, b"k", v)
                code = tp.commit()
                outcome = COMMITTED if code == ErrorCode.none else UNKNOWN
            except (KafkaProtocolError, OSError) as exc:
                self.outcomes.errors.append(repr(exc))
                outcome = UNKNOWN
            self.outcomes.settle(values, outcome)
            if outcome == UNKNOWN:
                tp.close()
                tp.client.close()
                tp = self.producer()
            done += outcome == COMMITTED
        tp.close()
        tp.client.close()


def wait_stable(bootstrap: str, topic: str, partitions: int, timeout: float = 60.0) -> None:
    """Until every partition's last stable offset equals its high watermark (no transaction open)."""
    from ..kafka.conformance.framework import READ_COMMITTED, Conversation

    k = Conversation("reader", bootstrap, "stable")
    try:
        for p in range(partitions):
            def stable(p=p):
                part = k.fetch(topic, 0, partition=p, isolation_level=READ_COMMITTED).responses[0].partitions[0]
                return part.last_stable_offset == part.high_watermark
            k.wait_until(stable, f"{topic}-{p} stable", timeout)
    finally:
        k.close()


def read_committed(bootstrap: str, topic: str, partitions: int, *, timeout: float = 60.0) -> dict[int, list]:
    """Every record a read_committed confluent-kafka consumer of its own returns, from offset 0 to
    each partition's end (its EOF, once no transaction is open): {partition: [(offset, value)]}."""
    wait_stable(bootstrap, topic, partitions, timeout)
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.monotonic_ns()}",
                     "enable.auto.commit": False, "isolation.level": "read_committed",
                     "enable.partition.eof": True, "fetch.wait.max.ms": 50})
    c.assign([ck.TopicPartition(topic, p, 0) for p in range(partitions)])
    out: dict[int, list] = {p: [] for p in range(partitions)}
    at_end: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        while len(at_end) < partitions:
            if time.monotonic() > deadline:
                raise AssertionError(f"reader: partitions {sorted(set(range(partitions)) - at_end)} not read to "
                                     f"their end in {timeout} s")
            for m in c.consume(1000, 0.2):
                if m.error():
                    if m.error().code() == ck.KafkaError._PARTITION_EOF:
                        at_end.add(m.partition())
                        continue
                    raise AssertionError(f"reader: {m.error()}")
                at_end.discard(m.partition())
                out[m.partition()].append((m.offset(), m.value()))
    finally:
        c.close()
    return out


def log_end_offset(bootstrap: str, topic: str, partition: int = 0) -> int:
    """The partition's high watermark, asked over a connection of its own."""
    from oncelog.client.wire import list_offsets_latest

    client = RawClient(bootstrap)
    try:
        return list_offsets_latest(client, topic, partition)
    finally:
        client.close()


def assert_exactly_once(writers: list[TxnWriter], read: dict[int, list]) -> dict[str, int]:
    """Committed values exactly once, aborted never, unknown at most once, nothing else; returns
    the totals by outcome."""
    outcome: dict[bytes, str] = {}
    for w in writers:
        outcome.update(w.outcomes.outcome)
    seen: dict[bytes, list] = {}
    for p, rows in read.items():
        for offset, value in rows:
            seen.setdefault(value, []).append((p, offset))
    strangers = [v for v in seen if v not in outcome]
    assert not strangers, f"read values no writer wrote: {strangers[:5]}"
    twice = {v: at for v, at in seen.items() if len(at) > 1}
    assert not twice, f"values read more than once: {dict(list(twice.items())[:5])}"
    lost = [v for v, o in outcome.items() if o == COMMITTED and v not in seen]
    assert not lost, f"{len(lost)} committed values never read: {lost[:5]}"
    aborted_read = [v for v, o in outcome.items() if o == ABORTED and v in seen]
    assert not aborted_read, f"{len(aborted_read)} values of aborted transactions read: {aborted_read[:5]}"
    totals = {COMMITTED: 0, ABORTED: 0, UNKNOWN: 0}
    for o in outcome.values():
        totals[o] += 1
    return totals
