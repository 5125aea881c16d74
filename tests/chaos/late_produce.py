"""KAFKA-17754's anomaly class as one deterministic conversation: a Produce of an earlier
transaction, delayed in the network, lands after that transaction ended, when the same producer's
next transaction is open on the same partition.

The conversation (raw requests of the project's protocol client, so every version, epoch and
sequence is chosen here), on one partition ``t-0``:

1. InitProducerId (transactional id ``tx``): producer id ``pid``, epoch ``e``.
2. txn1 writes ``txn1-first`` (sequence 0) and it is acknowledged; it writes ``txn1-late``
   (sequence 1) on another connection, and that Produce is delayed (:class:`Delay`).
3. txn1 ends: EndTxn commit or abort, and its markers are written.
   Transactions v1: EndTxn v4 at epoch ``e``; the producer keeps ``e`` (unless ``bump``: an
   InitProducerId with (pid, e), KIP-360, gives ``e + 1`` as the Java producer does after an
   abort with a request left unanswered). Transactions v2 (KIP-890 part 2): EndTxn v5, which
   bumps the epoch to ``e + 1`` for the next transaction.
4. txn2 adds ``t-0``: v1 with AddPartitionsToTxn v3 (unless ``add_again`` is False: txn2 then
   writes nowhere), v2 implicitly with its own Produce v12.
5. The delayed ``txn1-late`` lands — before txn2's own write (``late_first``) or after it. txn2
   writes ``txn2-own`` (v1 without bump: sequence 2, the producer's next; else sequence 0 of the
   new epoch) and commits.
6. An independent read_committed consumer (confluent-kafka) reads ``t-0`` to its end.

:func:`expected` is what happens, the same on oncelog (through the fault proxy's ``hold``) and
on Apache Kafka 4.4 (the frame written to the socket late, tests/kafka/test_kafka_17754.py):

* transactions v2: the late Produce is refused with INVALID_PRODUCER_EPOCH (the partition's
  producer state and the coordinator's verification both know epoch ``e + 1``; Kafka's
  AddPartitionsToTxnManager turns the coordinator's PRODUCER_FENCED into INVALID_PRODUCER_EPOCH
  for a Produce), in either order, after a commit or an abort; nothing of txn1 is in txn2;
* transactions v1, same epoch, txn2 added the partition: **the late Produce is acknowledged and
  appended into txn2**, and committed with it: after an aborted txn1, a write of the aborted
  transaction becomes visible (KAFKA-17754's anomaly). KIP-890 part 1's verification does not
  help: the partition *is* in an ongoing transaction of that producer and epoch, and sequence 1
  follows sequence 0 (the markers do not reset sequences within an epoch);
* transactions v1 with the KIP-360 epoch bump between the transactions: refused with
  INVALID_PRODUCER_EPOCH (the coordinator's verification knows ``e + 1``);
* transactions v1, txn2 did not add the partition: refused (KIP-890 part 1: the partition is in
  no ongoing transaction of the producer) with INVALID_TXN_STATE (Produce v9's code for it).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from oncelog.chaos.proxy import PRODUCE, FaultProxy
from oncelog.client.wire import RawClient

from ..kafka.conformance.framework import Conversation, batch, mod
from .net_clients import read_committed


class Delay:
    """How txn1's last Produce is delayed: :meth:`send` puts its frame on the way, :meth:`land`
    lets it reach the broker."""

    def send(self, conn: RawClient, frame: bytes) -> None: ...
    def land(self, conn: RawClient, frame: bytes) -> None: ...


class ProxyHold(Delay):
    """Through the fault proxy: the frame is sent at once and held by the proxy."""

    def __init__(self, proxy: FaultProxy) -> None:
        self.proxy = proxy

    def send(self, conn, frame):
        self.proxy.hold(PRODUCE)
        conn.send_frame(frame)
        self.proxy.wait_held(1)

    def land(self, conn, frame):
        assert self.proxy.release() == 1


class LateWrite(Delay):
    """Any broker: the frame is encoded now and written to its (open) connection later."""

    def land(self, conn, frame):
        conn.send_frame(frame)


@dataclass(frozen=True)
class Case:
    tv2: bool
    commit: bool  # how txn1 ends
    late_first: bool = True  # the late Produce lands before txn2's own write
    bump: bool = False  # v1: InitProducerId(pid, e) between the transactions (KIP-360)
    add_again: bool = True  # v1: txn2 adds the partition

    @property
    def id(self) -> str:
        parts = ["tv2" if self.tv2 else "tv1", "commit" if self.commit else "abort",
                 "late-first" if self.late_first else "late-last"]
        parts += ["kip360-bump"] if self.bump else []
        parts += [] if self.add_again else ["partition-not-added"]
        return "-".join(parts)


CASES = [Case(tv2=True, commit=c, late_first=lf) for c in (False, True) for lf in (True, False)] + \
        [Case(tv2=False, commit=c) for c in (False, True)] + \
        [Case(tv2=False, commit=c, late_first=lf, bump=True) for c in (False, True) for lf in (True, False)] + \
        [Case(tv2=False, commit=c, add_again=False) for c in (False, True)]


def expected(case: Case) -> tuple[ErrorCode, list[bytes]]:
    """(the late Produce's error code, the values a read_committed reader sees, in offset order)."""
    first = [b"txn1-first"] if case.commit else []
    own = [b"txn2-own"] if case.add_again else []
    if case.tv2 or case.bump:
        return ErrorCode.invalid_producer_epoch, first + own
    if not case.add_again:
        return ErrorCode.invalid_txn_state, first
    return ErrorCode.none, first + [b"txn1-late"] + own  # KAFKA-17754: txn1's write committed by txn2


@dataclass
class Outcome:
    late: ErrorCode
    late_offset: int
    own: ErrorCode | None
    read: list[bytes]


def produce(k: Conversation, topic: str, tid: str, pid: int, epoch: int, seq: int, value: bytes, tv2: bool):
    m = mod(PRODUCE, 12 if tv2 else 9)
    return m.ProduceRequest(
        transactional_id=tid, acks=-1, timeout=datetime.timedelta(seconds=30),
        topic_data=(m.TopicProduceData(name=topic, partition_data=(m.PartitionProduceData(
            index=0, records=batch([value], pid=pid, epoch=epoch, seq=seq, transactional=True)),)),))


def partition_answer(resp):
    return resp.responses[0].partition_responses[0]


def run(k: Conversation, delay: Delay, case: Case, *, reader_bootstrap: str | None = None) -> Outcome:
    """The conversation of the module docstring on broker ``k``; returns what happened."""
    end_version = 5 if case.tv2 else 4
    topic = k.create_topic("t")
    tid = k.name("tx")
    init = k.init_producer_id(tid)
    assert int(init.error_code) == 0, init
    pid, epoch = init.producer_id, init.producer_epoch
    late_conn = k.connect()

    # 1. txn1: one acknowledged write, one delayed
    if not case.tv2:
        k.add_partitions_to_txn(tid, pid, epoch, {topic: [0]})
    first = partition_answer(k.send(produce(k, topic, tid, pid, epoch, 0, b"txn1-first", case.tv2)))
    assert int(first.error_code) == 0, first
    late = produce(k, topic, tid, pid, epoch, 1, b"txn1-late", case.tv2)
    frame = late_conn.encode(late)
    delay.send(late_conn, frame)

    # 2. txn1 ends; its markers are written
    ended = k.end_txn(tid, pid, epoch, case.commit, version=end_version)
    assert int(ended.error_code) == 0, ended
    k.wait_txn_complete(tid)
    epoch2, seq2 = epoch, 2
    if case.tv2:
        epoch2, seq2 = ended.producer_epoch, 0
        assert epoch2 == epoch + 1
    elif case.bump:
        bumped = k.init_producer_id(tid, producer_id=pid, producer_epoch=epoch)
        assert int(bumped.error_code) == 0 and bumped.producer_epoch == epoch + 1, bumped
        epoch2, seq2 = bumped.producer_epoch, 0

    # 3. txn2 adds the partition; the late Produce lands before or after txn2's own write
    if not case.tv2 and case.add_again:
        added = k.add_partitions_to_txn(tid, pid, epoch2, {topic: [0]})
        code = added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
        assert int(code) == 0, added

    def land():
        delay.land(late_conn, frame)
        return partition_answer(late_conn.read_response(type(late)))

    own = None
    if case.late_first:
        late_answer = land()
    if case.add_again:
        own = partition_answer(k.send(produce(k, topic, tid, pid, epoch2, seq2, b"txn2-own", case.tv2)))
    if not case.late_first:
        late_answer = land()

    # 4. txn2 commits (when it has anything); an independent reader reads the partition to its end
    if case.add_again:
        committed = k.end_txn(tid, pid, epoch2, True, version=end_version)
        assert int(committed.error_code) == 0, committed
        k.wait_txn_complete(tid)
    read = read_committed(reader_bootstrap or k.bootstrap, topic, 1)[0]
    return Outcome(late=late_answer.error_code, late_offset=late_answer.base_offset,
                   own=None if own is None else own.error_code, read=[value for _, value in read])


def check(outcome: Outcome, case: Case) -> None:
    late_code, values = expected(case)
    assert (outcome.late, outcome.read) == (late_code, values), (case.id, outcome)
    if case.add_again:
        assert outcome.own == ErrorCode.none, (case.id, outcome)
