"""Zombie fencing by member epoch (KIP-848 with KIP-447): offsets committed, in a transaction or
not, with the group metadata of a consumer-protocol member that is no longer what the broker
knows. Written once and run against two brokers: Apache Kafka 4.4, the reference
(tests/kafka/test_txn_member_epoch_kafka.py; every case passes there first), and oncelog
(tests/e2e/test_txn_member_epoch.py). The targets, group timing and group helpers are those of
tests/consumer_protocol_cases.py.

What Apache Kafka 4.4 answers (its group coordinator, read in its jar and observed here):

- A commit's member epoch equal to the member's current epoch is accepted, whatever partitions it
  names. An older epoch is accepted for a partition assigned to the member (or pending revocation
  from it) since that epoch or earlier (KIP-1251's assignment epochs); for a partition assigned
  after it, or not the member's at all, it is STALE_MEMBER_EPOCH. A newer epoch is
  STALE_MEMBER_EPOCH. A member id the group does not have is UNKNOWN_MEMBER_ID. One refused
  partition refuses the whole request.
- OffsetCommit v9+ answers STALE_MEMBER_EPOCH as such. TxnOffsetCommit answers it only from
  v6; below (librdkafka 2.16 sends v3) Kafka answers ILLEGAL_GENERATION instead.
- librdkafka 2.16 surfaces either refusal of send_offsets_to_transaction() as an abortable
  error (``txn_requires_abort()``, not fatal, not retriable); commit_transaction() then fails
  too, and abort_transaction() ends the transaction: nothing of it becomes visible.
- The zombie here is a consumer whose application stalled (a long GC pause, a stuck call): it
  stops polling, its partitions go to a new member, and then it wakes up and commits what it read.
  The broker removes a stalled member in one of two ways, both covered: its session expires
  (librdkafka 2.16 on the consumer protocol, once max.poll.interval.ms passes without a poll,
  logs "leaving group" but stops heartbeating without a leave, so the broker's session timeout
  removes it), or, when another member joins, it fails to revoke the partitions it is asked to
  give up within its rebalance timeout (librdkafka sends max.poll.interval.ms as the rebalance
  timeout; Kafka logs "failed to transition from epoch N").

Invariants checked wherever a zombie commits: its commit is refused with the error above; its
transaction's records reached the log (read_uncommitted sees them) yet a read_committed reader
sees none of them; the group's committed offsets are the live member's, never the zombie's. The
one accepted old epoch (partitions kept since then) commits exactly its offsets and output.
"""

from __future__ import annotations

import struct
import time
import uuid
from dataclasses import dataclass
from typing import Callable

import confluent_kafka as ck
from kio.schema.errors import ErrorCode

from .consumer_protocol_cases import (Case, Ledger, Member, Target, Timing, describe_group, partitions_of, poll_until,
                                      settle)

# librdkafka 2.16's encoding of a ConsumerGroupMetadata (rd_kafka_consumer_group_metadata_write):
# the magic, the generation id (the member epoch on the consumer protocol) as a native-endian
# int32, then the group id and the member id, each NUL-terminated, then the instance id.
CGMD_MAGIC = b"CGMDv2:"


@dataclass(frozen=True)
class GroupMetadata:
    member_epoch: int
    group_id: str
    member_id: str


def group_metadata(raw: bytes) -> GroupMetadata:
    """What a consumer's consumer_group_metadata() holds (librdkafka's bytes; see CGMD_MAGIC)."""
    assert raw.startswith(CGMD_MAGIC), f"not librdkafka 2.x group metadata: {raw[:16]!r}"
    (epoch,) = struct.unpack_from("=i", raw, len(CGMD_MAGIC))
    group_id, member_id = raw[len(CGMD_MAGIC) + 4:].split(b"\0")[:2]
    return GroupMetadata(epoch, group_id.decode(), member_id.decode())


def transactional_producer(bootstrap: str, name: str) -> ck.Producer:
    """Each member's own transactional id (KIP-447: fencing is by the group metadata, not by a
    shared transactional id, so the zombie's producer is never fenced by the live one's)."""
    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{name}-{uuid.uuid4().hex[:8]}",
                     "linger.ms": 5, "transaction.timeout.ms": 60000})
    p.init_transactions(30)
    return p


def produce_inputs(bootstrap: str, topic: str, partitions: int, start: int, stop: int) -> None:
    """Records ``start`` .. ``stop - 1`` of each partition, value ``<partition>:<i>``."""
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for part in range(partitions):
        for i in range(start, stop):
            p.produce(topic, value=f"{part}:{i}".encode(), partition=part)
    assert p.flush(30) == 0


def transform(producer: ck.Producer, output: str, who: str, messages) -> None:
    """One output record per input record, ``<who>|<input value>``; flushed, so that the records
    are in the log (in the open transaction) before the offsets are sent."""
    for m in messages:
        producer.produce(output, value=f"{who}|{m.value().decode()}".encode(), partition=0)
    assert producer.flush(30) == 0


def positions(messages) -> dict[tuple[str, int], int]:
    """The offsets to commit after ``messages``: the next offset of each partition read."""
    out: dict[tuple[str, int], int] = {}
    for m in messages:
        out[(m.topic(), m.partition())] = max(out.get((m.topic(), m.partition()), 0), m.offset() + 1)
    return out


def as_topic_partitions(offsets: dict[tuple[str, int], int]) -> list[ck.TopicPartition]:
    return [ck.TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())]


def refused(call) -> ck.KafkaError:
    """Run ``call()``, which must raise a KafkaException; its error."""
    try:
        call()
    except ck.KafkaException as exc:
        return exc.args[0]
    raise AssertionError("the call was accepted")


def assert_refused_abortable(err: ck.KafkaError, code: int) -> None:
    assert err.code() == code, f"expected {ck.KafkaError(code).name()}, got {err.name()}: {err.str()}"
    assert err.txn_requires_abort() and not err.fatal() and not err.retriable(), err


def assert_zombie_transaction_ends_aborted(producer: ck.Producer) -> None:
    """After the refused send_offsets_to_transaction(): the zombie cannot commit (the transaction
    must be aborted), and its abort succeeds."""
    err = refused(lambda: producer.commit_transaction(30))
    assert err.txn_requires_abort() and not err.fatal(), err
    producer.abort_transaction(30)


def read_output(bootstrap: str, topic: str, isolation: str) -> list[str]:
    """Every record of partition 0 of ``topic`` up to its end (read_committed: its last stable
    offset, which is its end once no transaction is open)."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:8]}",
                     "isolation.level": isolation, "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    try:
        _, end = c.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=30)
        c.assign([ck.TopicPartition(topic, 0, 0)])
        values: list[str] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for m in c.consume(1000, 0.2):
                assert m.error() is None, m.error()
                values.append(m.value().decode())
            [pos] = c.position([ck.TopicPartition(topic, 0)])
            if pos.offset >= end:  # read_committed skips aborted records and markers
                return values
        raise AssertionError(f"{topic}: read {len(values)} records, not up to offset {end}, in 60 s")
    finally:
        c.close()


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's stable committed offsets (require_stable: no transaction of the group open)."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed"})
    try:
        return {tp.partition: tp.offset for tp in
                c.committed([ck.TopicPartition(topic, p) for p in range(partitions)], timeout=30)}
    finally:
        c.close()


def assert_only_live_output(bootstrap: str, output: str, live: list[str], zombie: list[str]) -> None:
    """The zombie's records are in the log but invisible to read_committed; the live member's
    committed ones are all there, once each."""
    everything = read_output(bootstrap, output, "read_uncommitted")
    assert set(zombie) <= set(everything), "the zombie's records never reached the log: nothing was tested"
    visible = read_output(bootstrap, output, "read_committed")
    assert not set(visible) & set(zombie), f"zombie records visible to read_committed: {sorted(set(visible) & set(zombie))[:5]}"
    assert sorted(visible) == sorted(live), (visible, live)


# -- the scenarios ----------------------------------------------------------------------------------


def case_zombie(target: Target, removed_by: str) -> None:
    """The zombie: member Z reads the first input, opens a transaction and writes its output, then
    stalls (no poll). The broker removes it (``removed_by``: ``session_expiry``, alone in the group
    until then, or ``revocation_timeout``, a new member joining at once, to which Z does not give
    up its partitions in time). The new member N, with its own transactional producer, reads
    everything from the committed offsets (none), writes its output and commits it with its
    offsets. Z wakes up and commits the offsets of what it read: plainly (Consumer.commit,
    OffsetCommit) and in its transaction (send_offsets_to_transaction, TxnOffsetCommit with its
    stale group metadata). Both are refused UNKNOWN_MEMBER_ID; the transaction can only be aborted."""
    parts = 2
    topic, output = target.new_topic(parts, "txnin"), target.new_topic(1, "txnout")
    group = target.new_group("zombie")
    ledger = Ledger()
    produce_inputs(target.bootstrap, topic, parts, 0, 10)
    # max.poll.interval.ms is also the member's rebalance timeout (revocation_timeout).
    zombie = Member("zombie", target, group, [topic], ledger, **{"max.poll.interval.ms": ZOMBIE_MAX_POLL_MS})
    live = None
    try:
        poll_until([zombie], lambda: len(zombie.messages) >= 10 * parts, "the zombie-to-be reads the first input")
        stalled = time.monotonic()  # its last poll
        zombie_md = zombie.consumer.consumer_group_metadata()
        zombie_meta = group_metadata(zombie_md)
        assert (zombie_meta.group_id, zombie_meta.member_id) == (group, zombie.member_id), zombie_meta
        zombie_read = list(zombie.messages)
        zombie_offsets = positions(zombie_read)
        zombie_producer = transactional_producer(target.bootstrap, "zombie")
        zombie_producer.begin_transaction()
        transform(zombie_producer, output, "zombie", zombie_read)
        # More input arrives while Z stalls (it polls no more from here on).
        produce_inputs(target.bootstrap, topic, parts, 10, 20)
        if removed_by == "session_expiry":
            wait_until_gone(target, group, zombie.member_id,
                            timeout=ZOMBIE_MAX_POLL_MS / 1000 + target.session_timeout + 60)
            # It heartbeat until max.poll.interval.ms passed: a whole session cannot be over before.
            assert time.monotonic() - stalled >= target.session_timeout, "removed before its session could expire"
        else:
            assert removed_by == "revocation_timeout", removed_by
        live = Member("live", target, group, [topic], ledger)
        settle(target, group, [live], partitions_of({topic: parts}),
               f"the stalled member is removed ({removed_by}) and the new member owns every partition",
               timeout=ZOMBIE_MAX_POLL_MS / 1000 + target.session_timeout + 60)
        if removed_by == "revocation_timeout":
            # Its case's session is long (15 s): a removal before then is the revocation timeout's.
            assert time.monotonic() - stalled < target.session_timeout, \
                "the stalled member was not fenced for failing to revoke in time, only when its session expired"
        assert zombie.member_id not in describe_group(target.bootstrap, group).members
        poll_until([live], lambda: len(live.messages) >= 20 * parts, "the new member reads all the input")
        live_read = list(live.messages)
        live_offsets = positions(live_read)
        assert live_offsets == {(topic, p): 20 for p in range(parts)}, live_offsets
        live_producer = transactional_producer(target.bootstrap, "live")
        live_producer.begin_transaction()
        transform(live_producer, output, "live", live_read)
        live_producer.send_offsets_to_transaction(as_topic_partitions(live_offsets),
                                                  live.consumer.consumer_group_metadata(), 30)
        live_producer.commit_transaction(30)

        # The zombie wakes up. Its plain commit first: the consumer still holds the old member id
        # and epoch (it has not polled, so it has not rejoined).
        assert group_metadata(zombie.consumer.consumer_group_metadata()) == zombie_meta
        err = refused(lambda: zombie.consumer.commit(offsets=as_topic_partitions(zombie_offsets), asynchronous=False))
        assert err.code() == ck.KafkaError.UNKNOWN_MEMBER_ID, err
        err = refused(lambda: zombie_producer.send_offsets_to_transaction(as_topic_partitions(zombie_offsets),
                                                                          zombie_md, 30))
        assert_refused_abortable(err, ck.KafkaError.UNKNOWN_MEMBER_ID)
        assert_zombie_transaction_ends_aborted(zombie_producer)

        assert committed(target.bootstrap, group, topic, parts) == {p: 20 for p in range(parts)}
        assert_only_live_output(target.bootstrap, output, [f"live|{m.value().decode()}" for m in live_read],
                                [f"zombie|{m.value().decode()}" for m in zombie_read])
    finally:
        for m in (zombie, live):
            if m is not None:
                m.close()


ZOMBIE_MAX_POLL_MS = 2000


def wait_until_gone(target: Target, group: str, member_id: str, timeout: float) -> None:
    """Wait (without polling anyone) until the broker's group no longer has ``member_id``."""
    deadline = time.monotonic() + timeout
    while member_id in describe_group(target.bootstrap, group).members:
        assert time.monotonic() < deadline, f"{member_id} still in {group} after {timeout:.0f} s"
        time.sleep(0.1)


@dataclass
class Rebalanced:
    """Member A read every partition at epoch ``old_epoch`` (``old_md``, its group metadata then),
    with its transaction open and its output written; then B joined and the group settled, A
    keeping ``kept`` and B taking ``moved``. More input followed, which B read."""

    topic: str
    output: str
    group: str
    a: Member
    b: Member
    old_md: bytes
    old_epoch: int
    a_read: list
    a_producer: ck.Producer
    kept: frozenset
    moved: frozenset
    parts: int = 4

    def close(self) -> None:
        for m in (self.a, self.b):
            m.close()


def rebalanced(target: Target) -> Rebalanced:
    parts = 4
    topic, output = target.new_topic(parts, "txnin"), target.new_topic(1, "txnout")
    group = target.new_group("stale")
    ledger = Ledger()
    produce_inputs(target.bootstrap, topic, parts, 0, 5)
    a = Member("a", target, group, [topic], ledger)
    b = None
    try:
        settle(target, group, [a], partitions_of({topic: parts}), "A owns every partition")
        poll_until([a], lambda: len(a.messages) >= 5 * parts, "A reads every partition")
        old_md = a.consumer.consumer_group_metadata()
        old = group_metadata(old_md)
        assert old.member_id == a.member_id and old.member_epoch == \
            describe_group(target.bootstrap, group).members[a.member_id].member_epoch, old
        a_producer = transactional_producer(target.bootstrap, "a")
        a_producer.begin_transaction()
        a_read = list(a.messages)
        transform(a_producer, output, "a", a_read)
        b = Member("b", target, group, [topic], ledger)
        settle(target, group, [a, b], partitions_of({topic: parts}), "A and B share the partitions")
        described = describe_group(target.bootstrap, group)
        assert described.members[a.member_id].member_epoch > old.member_epoch, (old, described)
        assert group_metadata(a.consumer.consumer_group_metadata()).member_epoch > old.member_epoch
        produce_inputs(target.bootstrap, topic, parts, 5, 10)
        moved = b.assignment()
        poll_until([a, b], lambda: len(b.messages) >= 10 * len(moved), "B reads its partitions")
        return Rebalanced(topic, output, group, a, b, old_md, old.member_epoch, a_read, a_producer,
                          a.assignment(), moved, parts)
    except BaseException:
        a.close()
        if b is not None:
            b.close()
        raise


def case_stale_epoch_after_rebalance_txn(target: Target) -> None:
    """A's transaction began before the rebalance; A sends the offsets of everything it read with
    its group metadata of then. Half of those partitions are B's now (assigned to B at a later
    epoch), and B has committed them in its own transaction. A's TxnOffsetCommit is refused
    ILLEGAL_GENERATION (Kafka's STALE_MEMBER_EPOCH below TxnOffsetCommit v6), abortable; the
    committed offsets are B's for B's partitions and untouched for A's."""
    r = rebalanced(target)
    try:
        b_read = list(r.b.messages)
        b_producer = transactional_producer(target.bootstrap, "b")
        b_producer.begin_transaction()
        transform(b_producer, r.output, "b", b_read)
        b_offsets = positions(b_read)
        assert b_offsets == {p: 10 for p in r.moved}, b_offsets
        b_producer.send_offsets_to_transaction(as_topic_partitions(b_offsets), r.b.consumer.consumer_group_metadata(), 30)
        b_producer.commit_transaction(30)

        a_offsets = positions(r.a_read)  # every partition at 5
        err = refused(lambda: r.a_producer.send_offsets_to_transaction(as_topic_partitions(a_offsets), r.old_md, 30))
        assert_refused_abortable(err, ck.KafkaError.ILLEGAL_GENERATION)
        assert_zombie_transaction_ends_aborted(r.a_producer)

        assert committed(target.bootstrap, r.group, r.topic, r.parts) == \
            {p: 10 if (r.topic, p) in r.moved else ck.OFFSET_INVALID for p in range(r.parts)}
        assert_only_live_output(target.bootstrap, r.output, [f"b|{m.value().decode()}" for m in b_read],
                                [f"a|{m.value().decode()}" for m in r.a_read])
    finally:
        r.close()


def case_old_epoch_for_kept_partitions_txn(target: Target) -> None:
    """The other side of the same rule: A's old group metadata, for only the partitions A has
    owned since that epoch (it kept them through the rebalance), is accepted (Kafka 4.4,
    KIP-1251: a partition's assignment epoch, not the member's latest epoch, bounds the commit),
    and the transaction commits: A's offsets and output for those partitions."""
    r = rebalanced(target)
    try:
        kept_read = [m for m in r.a_read if (m.topic(), m.partition()) in r.kept]
        offsets = positions(kept_read)
        assert offsets == {p: 5 for p in r.kept}, offsets
        r.a_producer.send_offsets_to_transaction(as_topic_partitions(offsets), r.old_md, 30)
        r.a_producer.commit_transaction(30)
        assert committed(target.bootstrap, r.group, r.topic, r.parts) == \
            {p: 5 if (r.topic, p) in r.kept else ck.OFFSET_INVALID for p in range(r.parts)}
        # The whole transaction committed, including A's output for the partitions it lost later
        # (it read them when they were its own: its offsets for them are simply not committed).
        assert sorted(read_output(target.bootstrap, r.output, "read_committed")) == \
            sorted(f"a|{m.value().decode()}" for m in r.a_read)
    finally:
        r.close()


def offset_commit_v9(bootstrap: str, group: str, member_id: str, member_epoch: int,
                     offsets: dict[tuple[str, int], int]) -> dict[tuple[str, int], ErrorCode]:
    """A plain OffsetCommit v9 (the first with member epochs) on the wire; each partition's error.
    librdkafka always commits with its current epoch, so an old one needs the raw request."""
    from kio.index import load_payload_module
    from kio.static.constants import EntityType

    from oncelog.client.kafka import Connection

    m = load_payload_module(8, 9, EntityType.request)
    topics: dict[str, list] = {}
    for (t, p), o in sorted(offsets.items()):
        topics.setdefault(t, []).append(m.OffsetCommitRequestPartition(
            partition_index=p, committed_offset=o, committed_leader_epoch=-1, committed_metadata=""))
    request = m.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=member_epoch, member_id=member_id, group_instance_id=None,
        topics=tuple(m.OffsetCommitRequestTopic(name=t, partitions=tuple(ps)) for t, ps in topics.items()))
    host, port = bootstrap.rsplit(":", 1)
    conn = Connection(host, int(port), timeout=30, client_id="txn-member-epoch")
    try:
        response = conn.request(request)
    finally:
        conn.close()
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


def case_plain_commit_with_old_epoch(target: Target) -> None:
    """OffsetCommit v9 from A with its member epoch of before the rebalance: STALE_MEMBER_EPOCH for
    a request naming a partition now B's (and nothing of that request is committed, not even A's
    own partition in it); accepted for the partitions A kept since then; STALE_MEMBER_EPOCH for an
    epoch newer than A's; UNKNOWN_MEMBER_ID for a member id the group does not have."""
    r = rebalanced(target)
    try:
        a_id = r.a.member_id
        current = describe_group(target.bootstrap, r.group).members[a_id].member_epoch
        kept, moved = sorted(r.kept)[0], sorted(r.moved)[0]
        stale = ErrorCode.stale_member_epoch
        assert offset_commit_v9(target.bootstrap, r.group, a_id, r.old_epoch, {kept: 3, moved: 3}) == \
            {kept: stale, moved: stale}
        assert committed(target.bootstrap, r.group, r.topic, r.parts) == {p: ck.OFFSET_INVALID for p in range(r.parts)}
        assert offset_commit_v9(target.bootstrap, r.group, a_id, current + 1, {kept: 4}) == {kept: stale}
        assert offset_commit_v9(target.bootstrap, r.group, uuid.uuid4().hex[:22], r.old_epoch, {kept: 4}) == \
            {kept: ErrorCode.unknown_member_id}
        assert offset_commit_v9(target.bootstrap, r.group, a_id, r.old_epoch, {p: 2 for p in r.kept}) == \
            {p: ErrorCode.none for p in r.kept}
        assert committed(target.bootstrap, r.group, r.topic, r.parts) == \
            {p: 2 if (r.topic, p) in r.kept else ck.OFFSET_INVALID for p in range(r.parts)}
        r.a_producer.abort_transaction(30)
    finally:
        r.close()


def case_groupless_commit_beside_live_members(target: Target) -> None:
    """What fencing does not cover, as Kafka has it: a TxnOffsetCommit with no member at all
    (member id "", epoch -1: the group metadata of a consumer that never joined, as KIP-447's
    pre-2.5 producers send with only a group id) is accepted though the group has a live member,
    while a plain OffsetCommit with no member is UNKNOWN_MEMBER_ID; a consumer-protocol consumer
    that never joined carries its own member id, unknown to the group: UNKNOWN_MEMBER_ID."""
    parts = 2
    topic = target.new_topic(parts, "txnin")
    group = target.new_group("groupless")
    ledger = Ledger()
    member = Member("m", target, group, [topic], ledger)
    outsiders = []
    try:
        settle(target, group, [member], partitions_of({topic: parts}), "the member owns every partition")
        never_joined = ck.Consumer({"bootstrap.servers": target.bootstrap, "group.id": group, "enable.auto.commit": False})
        outsiders.append(never_joined)
        groupless = group_metadata(never_joined.consumer_group_metadata())
        assert (groupless.member_epoch, groupless.member_id) == (-1, ""), groupless
        producer = transactional_producer(target.bootstrap, "groupless")
        producer.begin_transaction()
        producer.send_offsets_to_transaction([ck.TopicPartition(topic, 0, 3)], never_joined.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
        err = refused(lambda: never_joined.commit(offsets=[ck.TopicPartition(topic, 1, 7)], asynchronous=False))
        assert err.code() == ck.KafkaError.UNKNOWN_MEMBER_ID, err
        unjoined_848 = ck.Consumer({"bootstrap.servers": target.bootstrap, "group.id": group,
                                    "group.protocol": "consumer"})
        outsiders.append(unjoined_848)
        producer.begin_transaction()
        err = refused(lambda: producer.send_offsets_to_transaction([ck.TopicPartition(topic, 1, 5)],
                                                                   unjoined_848.consumer_group_metadata(), 30))
        assert_refused_abortable(err, ck.KafkaError.UNKNOWN_MEMBER_ID)
        assert_zombie_transaction_ends_aborted(producer)
        assert committed(target.bootstrap, group, topic, parts) == {0: 3, 1: ck.OFFSET_INVALID}
    finally:
        member.close()
        for c in outsiders:
            c.close()


def case_fencing_survives_broker_restart(target: Target) -> None:
    """The member epochs fence after a broker restart (SIGKILL): they come back from
    __consumer_offsets. After the rebalance the broker is killed and restarted; A's transaction
    of before the rebalance still cannot commit B's partitions with its old group metadata
    (ILLEGAL_GENERATION, abortable), while a new transaction with A's current metadata commits
    A's own partitions."""
    r = rebalanced(target)
    try:
        epochs = {m: d.member_epoch for m, d in describe_group(target.bootstrap, r.group).members.items()}
        target.restart()
        settle(target, r.group, [r.a, r.b], partitions_of({r.topic: r.parts}), "the group is back after the restart")
        assert {m: d.member_epoch for m, d in describe_group(target.bootstrap, r.group).members.items()} == epochs
        err = refused(lambda: r.a_producer.send_offsets_to_transaction(as_topic_partitions(positions(r.a_read)),
                                                                       r.old_md, 30))
        assert_refused_abortable(err, ck.KafkaError.ILLEGAL_GENERATION)
        assert_zombie_transaction_ends_aborted(r.a_producer)
        kept_read = [m for m in r.a_read if (m.topic(), m.partition()) in r.kept]
        r.a_producer.begin_transaction()
        transform(r.a_producer, r.output, "a2", kept_read)
        r.a_producer.send_offsets_to_transaction(as_topic_partitions(positions(kept_read)),
                                                 r.a.consumer.consumer_group_metadata(), 30)
        r.a_producer.commit_transaction(30)
        assert committed(target.bootstrap, r.group, r.topic, r.parts) == \
            {p: 5 if (r.topic, p) in r.kept else ck.OFFSET_INVALID for p in range(r.parts)}
        assert_only_live_output(target.bootstrap, r.output, [f"a2|{m.value().decode()}" for m in kept_read],
                                [f"a|{m.value().decode()}" for m in r.a_read])
    finally:
        r.close()


CASES: dict[str, Case] = {
    "zombie_session_expiry": Case(lambda target: case_zombie(target, "session_expiry")),
    # A long session, so that the revocation timeout (2 s) is what removes the zombie, clearly.
    "zombie_revocation_timeout": Case(lambda target: case_zombie(target, "revocation_timeout"), Timing(15000, 500)),
    "stale_epoch_after_rebalance_txn": Case(case_stale_epoch_after_rebalance_txn),
    "old_epoch_for_kept_partitions_txn": Case(case_old_epoch_for_kept_partitions_txn),
    "plain_commit_with_old_epoch": Case(case_plain_commit_with_old_epoch),
    "groupless_commit_beside_live_members": Case(case_groupless_commit_beside_live_members),
    # A long session: the broker's downtime (and Kafka's start) must not expire the members.
    "fencing_survives_broker_restart": Case(case_fencing_survives_broker_restart, Timing(45000, 500),
                                            restarts_broker=True),
}
