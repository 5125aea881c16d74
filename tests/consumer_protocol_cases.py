"""End-to-end scenarios of the KIP-848 consumer group protocol (``group.protocol=consumer``) with
confluent-kafka, written once and run against two brokers: Apache Kafka 4.4, the reference
(tests/kafka/test_consumer_protocol_kafka.py; every case must pass there first), and oncelog
(tests/e2e/test_consumer_protocol.py).

Each case is a function of a :class:`Target` (a bootstrap, the group timing the case asks for,
and for the restart case a way to SIGKILL and restart the broker). The broker owns the timing in
KIP-848 (session timeout and heartbeat interval are not client settings): on Apache Kafka the
target sets it per group (``consumer.session.timeout.ms`` and ``consumer.heartbeat.interval.ms``
with IncrementalAlterConfigs on the GROUP resource, before the first member joins); oncelog is
started per test with ``group.consumer.session.timeout.ms`` / ``group.consumer.heartbeat.interval.ms``.

Invariants checked, beyond "it works":
- once a group settles, every partition of its topics is owned by exactly one member, and the
  members' local assignments agree with the broker's (ConsumerGroupDescribe: Stable, each
  member's current assignment equal to its target and to what the client holds);
- at no moment is a partition owned by two members: every member's assign, revoke and lost
  callbacks are recorded in one :class:`Ledger` in the order they ran (all members are polled by
  one thread, so that order is a real-time order) and replayed;
- rebalances are incremental: a member never gives up a partition it ends the rebalance with.

Nothing waits for a fixed time where a state can be waited for: each wait polls every member until
its condition holds or a deadline (generous: a loaded 2-core machine) passes, and then fails with
what it saw. The few fixed waits are the point of their test (a static member's absence; a quiet
period that must stay quiet) and are kept well inside the session timeout. What the cases run on
(targets, members, the ledger, the waits) is tests/consumer_protocol_harness.py.
"""

from __future__ import annotations

import asyncio
import datetime
import importlib
import struct
import time
from dataclasses import dataclass
from typing import Callable

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient

from .consumer_protocol_harness import (KAFKA_GROUP_HEARTBEAT_INTERVAL, KAFKA_GROUP_SESSION_TIMEOUT, REGEX_TIMEOUT,
                                        SETTLE_TIMEOUT, ClassicConsumer, Ledger, Member, Target, Timing, WorkerProcess,
                                        balanced, create_topics, describe_group, describe_or_error,
                                        kafka_group_configurer, kafka_python_consumer, partitions_of, poll_for,
                                        poll_until, produce_per_partition, raw_connection, raw_offset_commit,
                                        raw_offset_fetch, read_with_aiokafka, read_with_kafka_python, settle)
from .helpers import unique

# -- the scenarios ----------------------------------------------------------------------------------


def case_join_and_leave_one_by_one(target: Target) -> None:
    """Members join one by one (1 -> 3), then leave (3 -> 1). After each change the group settles
    with every partition owned by exactly one member; no partition is ever owned by two members at
    once (a member's revoke runs before another's assign of the same partition); a member keeps,
    without a revoke, the partitions it still owns after the change (incremental, not eager)."""
    topic = target.new_topic(6)
    partitions = partitions_of({topic: 6})
    group = target.new_group()
    ledger = Ledger()
    members: list[Member] = []
    try:
        for i in range(3):
            before = time.monotonic()
            members.append(Member(f"m{i}", target, group, [topic], ledger))
            settle(target, group, members, partitions, f"{len(members)} members share {topic}")
            _check_incremental(ledger, before, members)
        for leaving in (members[2], members[1]):
            before = time.monotonic()
            leaving.close()
            members.remove(leaving)
            settle(target, group, members, partitions, f"{leaving.name} left; {len(members)} members share {topic}")
            _check_incremental(ledger, before, members)
            # A member that leaves gives up what it had: its revoke callback ran in close().
            assert leaving.name in {e.member for e in ledger.since(before) if e.kind == "revoke"}, ledger.render()
        ledger.check_exclusive()
        # Each member's final ownership, replayed from its callbacks, is what it holds.
        owners = ledger.owners()
        for m in members:
            assert frozenset(p for p, o in owners.items() if m.name in o) == m.assignment(), ledger.render()
    finally:
        for m in members:
            m.close()


def case_concurrent_churn(target: Target) -> None:
    """Several members join at once, then two leave while two others join: each time the group
    settles with every partition owned once, never two owners at once, and a member that stays
    keeps, without a revoke, what it ends up owning."""
    topic = target.new_topic(12)
    partitions = partitions_of({topic: 12})
    group = target.new_group()
    ledger = Ledger()
    members = [Member(f"m{i}", target, group, [topic], ledger) for i in range(4)]
    everyone = list(members)
    try:
        settle(target, group, members, partitions, "four members joined at once")
        before = time.monotonic()
        leaving = members[:2]
        members = members[2:] + [Member(f"m{i}", target, group, [topic], ledger) for i in range(4, 6)]
        everyone += members[2:]
        for m in leaving:
            m.close()
        settle(target, group, members, partitions, "two left and two joined at once")
        _check_incremental(ledger, before, members[:2])  # the two that stayed
        ledger.check_exclusive()
    finally:
        for m in everyone:
            m.close()


def _check_incremental(ledger: Ledger, since: float, members: list[Member]) -> None:
    for m in members:
        revoked = frozenset().union(*(e.partitions for e in ledger.since(since)
                                      if e.member == m.name and e.kind in ("revoke", "lost")))
        assert not (revoked & m.assignment()), (
            f"{m.name} gave up {sorted(revoked & m.assignment())} and got them back: not incremental\n{ledger.render()}")


def case_killed_member_partitions_move_after_session_timeout(target: Target) -> None:
    """A member in another process is SIGKILLed (no leave): the broker keeps its partitions until
    its session times out, then the survivors get them — not before (a lost connection is not a
    leave in KIP-848: members are not tied to connections). The expired member's offset commits
    are fenced (UNKNOWN_MEMBER_ID)."""
    topic = target.new_topic(6)
    partitions = partitions_of({topic: 6})
    group = target.new_group()
    ledger = Ledger()
    members = [Member(f"m{i}", target, group, [topic], ledger) for i in range(2)]
    worker = WorkerProcess(target.bootstrap, group, topic)
    try:
        def all_three() -> bool:
            owned = {m.name: m.assignment() for m in members}
            owned["worker"] = worker.assignment
            return balanced(owned, partitions)

        poll_until(members, all_three, "two members and the worker process share the topic",
                   describe=lambda: describe_or_error(target.bootstrap, group) + f"\n  worker: {worker.assignment}")
        worker_had = worker.assignment
        assert len(worker_had) == 2
        worker_epoch = describe_group(target.bootstrap, group).members[worker.member_id].member_epoch
        killed_at = worker.kill()
        settle(target, group, members, partitions, "the survivors own every partition")
        took = time.monotonic() - killed_at
        gained = [e for e in ledger.since(killed_at) if e.kind == "assign" and e.partitions & worker_had]
        assert frozenset().union(*(e.partitions for e in gained)) == worker_had, ledger.render()
        # The session timer restarts at each heartbeat: the last one came at most a heartbeat
        # interval before the kill (give a loaded machine's late heartbeat the benefit of another).
        assert took >= target.session_timeout - 2 * target.heartbeat_interval, (
            f"the killed member's partitions moved {took:.1f} s after SIGKILL, before its "
            f"{target.session_timeout:.1f} s session could expire")
        ledger.check_exclusive()
        # The expired member is gone: a zombie's commit with its id and last epoch is fenced.
        [(_, partition)] = sorted(worker_had)[:1]
        assert raw_offset_commit(target.bootstrap, group, worker.member_id, worker_epoch, topic, partition, 5) == \
            "unknown_member_id"
    finally:
        worker.kill()
        for m in members:
            m.close()


def case_group_config_session_timeout(target: Target) -> None:
    """KIP-848's group configs: IncrementalAlterConfigs on the GROUP resource sets a group's own
    consumer.session.timeout.ms and consumer.heartbeat.interval.ms (DescribeConfigs reads them
    back), and they win over the broker's: a killed member's partitions move after the group's
    short session timeout, well before the broker-wide one (this case's Timing, 20 s)."""
    topic = target.new_topic(4)
    partitions = partitions_of({topic: 4})
    group = target.new_group()
    short = Timing(3000, 300)
    kafka_group_configurer(target.bootstrap)(group, short)
    from confluent_kafka.admin import ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": target.bootstrap})
    [described] = admin.describe_configs([ConfigResource(ResourceType.GROUP, group)]).values()
    values = {k: v.value for k, v in described.result(timeout=30).items()}
    assert (values[KAFKA_GROUP_SESSION_TIMEOUT], values[KAFKA_GROUP_HEARTBEAT_INTERVAL]) == ("3000", "300"), values
    ledger = Ledger()
    other = Member("other", target, group, [topic], ledger)
    worker = WorkerProcess(target.bootstrap, group, topic)
    try:
        poll_until([other], lambda: balanced({"other": other.assignment(), "worker": worker.assignment}, partitions),
                   "the worker and the other member share the topic",
                   describe=lambda: describe_or_error(target.bootstrap, group))
        killed_at = worker.kill()
        settle(target, group, [other], partitions, "the other member owns the topic")
        took = time.monotonic() - killed_at
        assert short.session_timeout_ms / 1000 - 2 * short.heartbeat_interval_ms / 1000 <= took \
            < target.session_timeout * 0.75, f"{took:.1f} s: not the group's 3 s session timeout"
        ledger.check_exclusive()
    finally:
        worker.kill()
        other.close()


def case_regex_subscription_picks_up_new_topic(target: Target) -> None:
    """``subscribe(["^ctopic-<id>-.*"])``: librdkafka sends the pattern as the member's
    subscribed_topic_regex, which the broker resolves; a topic created later that matches is
    assigned to the member; a topic that does not match never is."""
    prefix = unique("ctopic")
    first, later, other = f"{prefix}-a", f"{prefix}-b", f"x{prefix}-c"
    create_topics(target.bootstrap, {first: 2, other: 1})
    group = target.new_group()
    ledger = Ledger()
    member = Member("m0", target, group, [f"^{prefix}-.*"], ledger)
    try:
        settle(target, group, [member], partitions_of({first: 2}), "the regex's one topic is assigned")
        d = describe_group(target.bootstrap, group).members[member.member_id]
        assert d.subscribed_topic_names == (), d
        assert d.subscribed_topic_regex is not None and f"^{prefix}-.*" in d.subscribed_topic_regex, d
        create_topics(target.bootstrap, {later: 3})
        settle(target, group, [member], partitions_of({first: 2, later: 3}), "a new matching topic is assigned",
               timeout=REGEX_TIMEOUT)
        assert not any(p[0] == other for e in ledger.events for p in e.partitions), ledger.render()
        ledger.check_exclusive()
    finally:
        member.close()


def case_committed_offsets_resume_a_new_member(target: Target) -> None:
    """A member reads, commits offsets (OffsetCommit with its member epoch) and closes; a new member
    of the group reads the committed offsets back (OffsetFetch, Consumer.committed) and resumes
    exactly there."""
    topic = target.new_topic(3)
    produce_per_partition(target.bootstrap, topic, 3, 10)
    group = target.new_group()
    ledger = Ledger()
    first = Member("m0", target, group, [topic], ledger)
    try:
        poll_until([first], lambda: len(first.messages) >= 30, "the first member reads all 30 records")
        offsets = [ck.TopicPartition(topic, p, 4) for p in range(3)]
        first.consumer.commit(offsets=offsets, asynchronous=False)
        assert {(tp.partition, tp.offset) for tp in first.consumer.committed(offsets, timeout=30)} == \
            {(p, 4) for p in range(3)}
    finally:
        first.close()
    second = Member("m1", target, group, [topic], ledger)
    try:
        committed = second.consumer.committed([ck.TopicPartition(topic, p) for p in range(3)], timeout=30)
        assert {(tp.partition, tp.offset) for tp in committed} == {(p, 4) for p in range(3)}
        poll_until([second], lambda: len(second.messages) >= 18, "the new member reads from the committed offsets")
        poll_for([second], 1.0)  # and nothing before them arrives late
        assert sorted(second.records()) == [(p, o) for p in range(3) for o in range(4, 10)]
    finally:
        second.close()


def case_static_member_restart_keeps_its_partitions(target: Target) -> None:
    """A static member (group.instance.id) closes and a new consumer with the same instance id
    joins within the session timeout: it gets the same partitions, and the other member is not
    disturbed meanwhile (no revoke, no assign: the broker holds the absent static member's
    partitions for it)."""
    topic = target.new_topic(6)
    partitions = partitions_of({topic: 6})
    group = target.new_group()
    ledger = Ledger()
    static = Member("static", target, group, [topic], ledger, **{"group.instance.id": "static-a"})
    other = Member("other", target, group, [topic], ledger)
    members = [static, other]
    try:
        settle(target, group, members, partitions, "the static and the dynamic member share the topic")
        had = static.assignment()
        other_had = other.assignment()
        closed_at = time.monotonic()
        static.close()
        # The static member is away for a while, well inside its session timeout.
        poll_for([other], min(2.0, target.session_timeout / 4))
        assert other.assignment() == other_had
        assert not [e for e in ledger.since(closed_at) if e.member == "other"], ledger.render()
        back = Member("static2", target, group, [topic], ledger, **{"group.instance.id": "static-a"})
        members = [back, other]
        settle(target, group, members, partitions, "the restarted static member is back")
        assert time.monotonic() - closed_at < target.session_timeout, (
            f"the static member came back {time.monotonic() - closed_at:.1f} s later: past its session timeout")
        assert back.assignment() == had, (sorted(had), sorted(back.assignment()))
        assert other.assignment() == other_had
        assert not [e for e in ledger.since(closed_at) if e.member == "other"], ledger.render()
        d = describe_group(target.bootstrap, group)
        assert d.members[back.member_id].instance_id == "static-a"
        ledger.check_exclusive()
    finally:
        for m in (static, *members):
            m.close()


def case_static_member_killed_then_restarted(target: Target) -> None:
    """A static member is SIGKILLed (no leave) and restarted at once with its instance id: as on
    Kafka 4.4, the newcomer is refused UNRELEASED_INSTANCE_ID while the old member's session runs
    (librdkafka makes that fatal for the consumer), the old member's partitions go to the other
    member when that session expires, and a consumer with the instance id that comes after the
    expiry joins normally."""
    topic = target.new_topic(6)
    partitions = partitions_of({topic: 6})
    group = target.new_group()
    ledger = Ledger()
    other = Member("other", target, group, [topic], ledger)
    worker = WorkerProcess(target.bootstrap, group, topic, instance_id="static-w")
    members = [other]
    try:
        poll_until([other], lambda: balanced({"other": other.assignment(), "worker": worker.assignment}, partitions),
                   "the static worker and the other member share the topic",
                   describe=lambda: describe_or_error(target.bootstrap, group))
        killed_at = worker.kill()
        early = Member("early", target, group, [topic], ledger, **{"group.instance.id": "static-w"})
        members.append(early)
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while not any(e.code() == ck.KafkaError._FATAL for e in early.errors):
            assert time.monotonic() < deadline, f"the early static member was not refused: {early.errors}"
            early.poll(0.05)
            other.poll(0.05)
        assert "instance ID is still used" in str(early.errors[-1]), early.errors  # UNRELEASED_INSTANCE_ID
        assert not early.assignment()
        settle(target, group, [other], partitions, "the other member owns the topic once the session expired")
        assert time.monotonic() - killed_at >= target.session_timeout - 2 * target.heartbeat_interval
        late = Member("late", target, group, [topic], ledger, **{"group.instance.id": "static-w"})
        members.append(late)
        settle(target, group, [other, late], partitions, "the static member is back after its session expired")
        assert describe_group(target.bootstrap, group).members[late.member_id].instance_id == "static-w"
        ledger.check_exclusive()
    finally:
        worker.kill()
        for m in members:
            m.close()


def case_classic_groups_unaffected(target: Target) -> None:
    """kafka-python and aiokafka groups on the classic protocol work in the same broker while a
    KIP-848 group is active, and the KIP-848 group is not disturbed by them."""
    kip848_topic, kp_topic, aio_topic = target.new_topic(4), target.new_topic(2), target.new_topic(2)
    partitions = partitions_of({kip848_topic: 4})
    group = target.new_group()
    ledger = Ledger()
    members = [Member(f"m{i}", target, group, [kip848_topic], ledger) for i in range(2)]
    try:
        settle(target, group, members, partitions, "the KIP-848 group is stable")
        quiet_since = time.monotonic()
        for t in (kp_topic, aio_topic):
            produce_per_partition(target.bootstrap, t, 2, 5)
        kp_group, aio_group = unique("classic-kp"), unique("classic-aio")
        got = read_with_kafka_python(target.bootstrap, kp_topic, kp_group, 10)
        assert sorted(got) == [(p, o) for p in range(2) for o in range(5)]
        got = asyncio.run(read_with_aiokafka(target.bootstrap, aio_topic, aio_group, 10))
        assert sorted(got) == [(p, o) for p in range(2) for o in range(5)]
        # A classic rebalance: a second kafka-python member joins a classic group of one.
        pair_group, classic_ledger = unique("classic-pair"), Ledger()
        pair = [ClassicConsumer(target, pair_group, kp_topic, classic_ledger, f"kp{i}") for i in range(2)]
        try:
            deadline = time.monotonic() + SETTLE_TIMEOUT
            while not balanced({f"kp{i}": c.assignment() for i, c in enumerate(pair)}, partitions_of({kp_topic: 2})):
                assert time.monotonic() < deadline, [(c.assignment(), c.errors[-3:]) for c in pair]
                time.sleep(0.05)
            classic_ledger.check_exclusive()
        finally:
            for c in pair:
                c.close()
        admin = AdminClient({"bootstrap.servers": target.bootstrap})
        described = {g: f.result(timeout=30)
                     for g, f in admin.describe_consumer_groups([group, kp_group, aio_group, pair_group]).items()}
        assert described[pair_group].type == ck.ConsumerGroupType.CLASSIC
        assert described[group].type == ck.ConsumerGroupType.CONSUMER
        assert described[kp_group].type == ck.ConsumerGroupType.CLASSIC
        assert described[aio_group].type == ck.ConsumerGroupType.CLASSIC
        # The classic groups committed, and left no effect on the KIP-848 one.
        settle(target, group, members, partitions, "the KIP-848 group is still stable")
        assert not ledger.since(quiet_since), ledger.render()
    finally:
        for m in members:
            m.close()


def case_classic_member_joins_consumer_group(target: Target) -> None:
    """A classic consumer (kafka-python: JoinGroup/SyncGroup, protocol type "consumer") joining a
    group that is a KIP-848 consumer group gets what Kafka 4.4 answers: it becomes a member of that
    consumer group (a mixed group; the broker assigns its partitions with the group's assignor),
    and the group stays a consumer group. On the wire: JoinGroup v5 without a member id is answered
    MEMBER_ID_REQUIRED; one of another protocol type ("connect") INCONSISTENT_GROUP_PROTOCOL."""
    topic = target.new_topic(4)
    partitions = partitions_of({topic: 4})
    group = target.new_group()
    ledger = Ledger()
    member = Member("m0", target, group, [topic], ledger)
    try:
        settle(target, group, [member], partitions, "the KIP-848 member owns the topic")
        assert _raw_join(target.bootstrap, group, topic, protocol_type="connect") == "inconsistent_group_protocol"
        assert _raw_join(target.bootstrap, group, topic, protocol_type="consumer") == "member_id_required"
        classic = ClassicConsumer(target, group, topic, ledger)
        try:
            def split() -> bool:
                return balanced({"m0": member.assignment(), "classic": classic.assignment()}, partitions)

            poll_until([member], split, "the classic member and the KIP-848 member share the topic",
                       describe=lambda: describe_or_error(target.bootstrap, group))
            admin = AdminClient({"bootstrap.servers": target.bootstrap})
            d = admin.describe_consumer_groups([group])[group].result(timeout=30)
            assert d.type == ck.ConsumerGroupType.CONSUMER, d.type
            assert len(d.members) == 2
        finally:
            classic.close()
        settle(target, group, [member], partitions, "the classic member left; the KIP-848 member owns the topic")
        ledger.check_exclusive()
    finally:
        member.close()


def case_group_apis_answer_by_type(target: Target) -> None:
    """With a KIP-848 group and a classic group (kafka-python) both active, the group APIs answer as
    Kafka 4.4 does for each type: ListGroups gives each its type (and filters by it);
    DescribeGroups v0-v5 describes the consumer group as Dead with no members and v6 answers
    GROUP_ID_NOT_FOUND; ConsumerGroupDescribe answers GROUP_ID_NOT_FOUND for the classic group and
    for an unknown one; an admin's offset commit (no member) to the non-empty consumer group is
    UNKNOWN_MEMBER_ID."""
    from kio.index import load_request_schema

    topic = target.new_topic(2)
    group = target.new_group()
    ledger = Ledger()
    member = Member("m0", target, group, [topic], ledger)
    classic_group = unique("classic")
    classic = ClassicConsumer(target, classic_group, topic)
    try:
        settle(target, group, [member], partitions_of({topic: 2}), "the KIP-848 member owns the topic")
        classic.wait_for_assignment()
        admin = AdminClient({"bootstrap.servers": target.bootstrap})
        listed = {g.group_id: g for g in admin.list_consumer_groups().result(timeout=30).valid}
        assert listed[group].type == ck.ConsumerGroupType.CONSUMER
        assert listed[classic_group].type == ck.ConsumerGroupType.CLASSIC
        only = admin.list_consumer_groups(types={ck.ConsumerGroupType.CONSUMER}).result(timeout=30).valid
        assert group in {g.group_id for g in only} and classic_group not in {g.group_id for g in only}
        described = {g: f.result(timeout=30)
                     for g, f in admin.describe_consumer_groups([group, classic_group]).items()}
        assert described[group].type == ck.ConsumerGroupType.CONSUMER
        assert [m.member_id for m in described[group].members] == [member.member_id]
        assert described[classic_group].type == ck.ConsumerGroupType.CLASSIC
        assert len(described[classic_group].members) == 1
        conn = raw_connection(target.bootstrap)
        try:
            for version in (0, 5, 6):
                extra = {"include_authorized_operations": False} if version >= 3 else {}
                answer = {g.group_id: g for g in conn.request(load_request_schema(15, version)(
                    groups=(group, classic_group), **extra)).groups}
                kip848, old = answer[group], answer[classic_group]
                assert (kip848.error_code.name, kip848.group_state, kip848.protocol_type, len(kip848.members)) == \
                    ("group_id_not_found" if version >= 6 else "none", "Dead", "", 0), (version, kip848)
                assert (old.error_code.name, old.group_state, old.protocol_type, len(old.members)) == \
                    ("none", "Stable", "consumer", 1), (version, old)
            unknown = unique("nosuch")
            answer = {g.group_id: g for g in conn.request(load_request_schema(69, 0)(
                group_ids=(classic_group, unknown, group), include_authorized_operations=False)).groups}
            assert answer[classic_group].error_code.name == "group_id_not_found", answer[classic_group]
            assert answer[unknown].error_code.name == "group_id_not_found", answer[unknown]
            assert answer[group].error_code.name == "none", answer[group]
        finally:
            conn.close()
        commit = admin.alter_consumer_group_offsets([ck.ConsumerGroupTopicPartitions(group, [ck.TopicPartition(topic, 0, 1)])])
        try:
            errors = [tp.error for tp in commit[group].result(timeout=30).topic_partitions]
        except ck.KafkaException as exc:
            errors = [exc.args[0]]
        assert [e.code() if e is not None else None for e in errors] == [ck.KafkaError.UNKNOWN_MEMBER_ID], errors
    finally:
        classic.close()
        member.close()


def case_offset_commits_checked_against_member_epochs(target: Target) -> None:
    """OffsetCommit v9 / OffsetFetch v9 from real members' ids and epochs, answered as Kafka 4.4 does:
    a commit for a partition the member owns is accepted from any epoch since the partition was
    assigned to it up to its current one (a member that kept a partition through a rebalance may
    commit it with its older epoch), and refused STALE_MEMBER_EPOCH from an earlier or a future
    epoch; for a partition it does not own, only the current epoch is accepted. An unknown member
    (or one that left) is UNKNOWN_MEMBER_ID, and so is a commit without a member (an admin's) while
    the group has members; once the group is empty the admin's commit is accepted. OffsetFetch
    with a member: the current epoch reads, a stale one STALE_MEMBER_EPOCH, an unknown member
    UNKNOWN_MEMBER_ID; without a member (epoch -1) it reads."""
    topic = target.new_topic(2)
    partitions = partitions_of({topic: 2})
    group = target.new_group()
    ledger = Ledger()
    a = Member("a", target, group, [topic], ledger)
    b = None
    bs = target.bootstrap
    try:
        settle(target, group, [a], partitions, "a owns both partitions")
        first_epoch = describe_group(bs, group).members[a.member_id].member_epoch
        b = Member("b", target, group, [topic], ledger)
        settle(target, group, [a, b], partitions, "a and b share the topic")
        d = describe_group(bs, group)
        middle_epoch, b_id, b_epoch = d.members[a.member_id].member_epoch, b.member_id, d.members[b.member_id].member_epoch
        [(_, kept)], [(_, moved)] = a.assignment(), b.assignment()
        # While b owns `moved`, a may not commit it with any other epoch than its current one.
        assert raw_offset_commit(bs, group, a.member_id, first_epoch, topic, moved, 1) == "stale_member_epoch"
        assert raw_offset_commit(bs, group, a.member_id, middle_epoch, topic, moved, 1) == "none"
        b.close()
        settle(target, group, [a], partitions, "b left; a owns both partitions again")
        last_epoch = describe_group(bs, group).members[a.member_id].member_epoch
        assert first_epoch < middle_epoch < last_epoch
        commits = {  # (epoch, partition) -> Kafka 4.4's answer
            (last_epoch, kept): "none", (middle_epoch, kept): "none", (first_epoch, kept): "none",
            (0, kept): "stale_member_epoch", (last_epoch + 1, kept): "stale_member_epoch",
            (last_epoch, moved): "none", (middle_epoch, moved): "stale_member_epoch",
        }
        answers = {key: raw_offset_commit(bs, group, a.member_id, key[0], topic, key[1], 10 + i)
                   for i, key in enumerate(commits)}
        assert answers == commits
        assert raw_offset_commit(bs, group, b_id, b_epoch, topic, moved, 99) == "unknown_member_id"  # b left
        assert raw_offset_commit(bs, group, unique("nosuch"), last_epoch, topic, kept, 99) == "unknown_member_id"
        assert raw_offset_commit(bs, group, "", -1, topic, kept, 99) == "unknown_member_id"  # not empty
        stored = {kept: 10 + list(commits).index((first_epoch, kept)), moved: 10 + list(commits).index((last_epoch, moved))}
        assert raw_offset_fetch(bs, group, a.member_id, last_epoch, topic, [0, 1]) == ("none", stored)
        assert raw_offset_fetch(bs, group, a.member_id, middle_epoch, topic, [0, 1])[0] == "stale_member_epoch"
        assert raw_offset_fetch(bs, group, unique("nosuch"), last_epoch, topic, [0, 1])[0] == "unknown_member_id"
        assert raw_offset_fetch(bs, group, None, -1, topic, [0, 1]) == ("none", stored)
        committed = a.consumer.committed([ck.TopicPartition(topic, p) for p in (0, 1)], timeout=30)
        assert {tp.partition: tp.offset for tp in committed} == stored
        a.close()
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while describe_group(bs, group).members:  # a's leave was handled: the group is empty
            assert time.monotonic() < deadline, describe_or_error(bs, group)
            time.sleep(0.1)
        assert raw_offset_commit(bs, group, "", -1, topic, kept, 77) == "none"
        assert raw_offset_fetch(bs, group, None, -1, topic, [kept])[1] == {kept: 77}
    finally:
        a.close()
        if b is not None:
            b.close()


def case_topic_changes_rebalance(target: Target) -> None:
    """The group follows its topics: partitions added to a subscribed topic are assigned; a deleted
    topic's partitions are taken back; a member that widens its subscription gets the new topic's
    partitions (the others, not subscribed to it, get none of them)."""
    first, second, third = target.new_topic(2), target.new_topic(2), target.new_topic(2)
    group = target.new_group()
    ledger = Ledger()
    members = [Member(f"m{i}", target, group, [first, second], ledger) for i in range(2)]
    try:
        settle(target, group, members, partitions_of({first: 2, second: 2}), "two members share two topics")
        from confluent_kafka.admin import NewPartitions

        admin = AdminClient({"bootstrap.servers": target.bootstrap})
        for f in admin.create_partitions([NewPartitions(first, 4)]).values():
            f.result(timeout=30)
        settle(target, group, members, partitions_of({first: 4, second: 2}), "the added partitions are assigned")
        for f in admin.delete_topics([second]).values():
            f.result(timeout=30)
        settle(target, group, members, partitions_of({first: 4}), "the deleted topic's partitions are taken back")
        widening = members[1]
        widening.consumer.subscribe([first, third], on_assign=lambda c, ps: ledger.record(widening.name, "assign", ps),
                                    on_revoke=lambda c, ps: ledger.record(widening.name, "revoke", ps),
                                    on_lost=lambda c, ps: ledger.record(widening.name, "lost", ps))
        settle(target, group, members, partitions_of({first: 4, third: 2}), "the widened subscription is assigned",
               even=False)
        assert partitions_of({third: 2}) <= widening.assignment(), sorted(widening.assignment())
        assert not any(t == third for t, _ in members[0].assignment())
        ledger.check_exclusive()
    finally:
        for m in members:
            m.close()


def case_topic_created_after_subscribe(target: Target) -> None:
    """A member subscribed by name to a topic that does not exist yet is a Stable member with an
    empty assignment; once the topic is created its partitions are assigned."""
    topic = unique("later")
    group = target.new_group()
    ledger = Ledger()
    member = Member("m0", target, group, [topic], ledger)
    try:
        settle(target, group, [member], frozenset(), "a member with nothing to own")
        assert describe_group(target.bootstrap, group).members[member.member_id].subscribed_topic_names == (topic,)
        create_topics(target.bootstrap, {topic: 2})
        settle(target, group, [member], partitions_of({topic: 2}), "the created topic is assigned")
        ledger.check_exclusive()
    finally:
        member.close()


def case_range_assignor_co_partitions(target: Target) -> None:
    """A member asking for the broker's ``range`` assignor (librdkafka's group.remote.assignor) gets
    it: the group describes assignor "range", and each member owns the same partition numbers of
    two topics with the same number of partitions (co-partitioning), the first members one more."""
    first, second = target.new_topic(3), target.new_topic(3)
    group = target.new_group()
    ledger = Ledger()
    members = [Member(f"m{i}", target, group, [first, second], ledger, **{"group.remote.assignor": "range"})
               for i in range(2)]
    try:
        settle(target, group, members, partitions_of({first: 3, second: 3}), "two members share two topics",
               even=False)
        assert describe_group(target.bootstrap, group).assignor == "range"
        numbers = []
        for m in members:
            of = {t: sorted(p for tt, p in m.assignment() if tt == t) for t in (first, second)}
            assert of[first] == of[second], (m.name, of)
            numbers.append(of[first])
        assert sorted(map(len, numbers)) == [1, 2] and all(n == list(range(n[0], n[0] + len(n))) for n in numbers), numbers
        ledger.check_exclusive()
    finally:
        for m in members:
            m.close()


def case_consumer_member_joins_classic_group(target: Target) -> None:
    """A KIP-848 member joining a classic group that has a live member (kafka-python) gets what
    Kafka 4.4 does (group.consumer.migration.policy=bidirectional, its default): the group is
    converted online into a consumer group, the classic member stays in it, and the two share the
    partitions."""
    topic = target.new_topic(4)
    partitions = partitions_of({topic: 4})
    group = target.new_group()
    ledger = Ledger()
    classic = ClassicConsumer(target, group, topic, ledger)
    member = None
    try:
        classic.wait_for_assignment(4, "the classic consumer never owned the topic")
        admin = AdminClient({"bootstrap.servers": target.bootstrap})
        assert admin.describe_consumer_groups([group])[group].result(timeout=30).type == ck.ConsumerGroupType.CLASSIC
        member = Member("m0", target, group, [topic], ledger)

        def split() -> bool:
            return balanced({"m0": member.assignment(), "classic": classic.assignment()}, partitions)

        poll_until([member], split, "the KIP-848 member and the classic member share the topic",
                   describe=lambda: describe_or_error(target.bootstrap, group) + "\n  member errors: "
                   + repr(member.errors[-3:]))
        d = admin.describe_consumer_groups([group])[group].result(timeout=30)
        assert d.type == ck.ConsumerGroupType.CONSUMER and len(d.members) == 2, (d.type, d.members)
        ledger.check_exclusive()
    finally:
        classic.close()
        if member is not None:
            member.close()


def case_empty_group_converted_both_ways(target: Target) -> None:
    """An empty group changes type with its offsets: a classic group (kafka-python) commits and
    leaves; a KIP-848 member of the same group id resumes from those offsets (the group is now a
    consumer group), commits further and leaves; a classic consumer resumes from those (a classic
    group again)."""
    import kafka

    topic = target.new_topic(2)
    produce_per_partition(target.bootstrap, topic, 2, 10)
    group = target.new_group()
    admin = AdminClient({"bootstrap.servers": target.bootstrap})

    def group_type():
        return admin.describe_consumer_groups([group])[group].result(timeout=30).type

    def classic_reads_and_commits(resume_at: int, commit_at: int) -> None:
        c = kafka_python_consumer(target.bootstrap, group, topic)
        try:
            deadline = time.monotonic() + SETTLE_TIMEOUT
            got = []
            while len(got) < 2 * (10 - resume_at):
                assert time.monotonic() < deadline, f"the classic consumer read {got}"
                for records in c.poll(100).values():
                    got += [(r.partition, r.offset) for r in records]
            assert sorted(got) == [(p, o) for p in range(2) for o in range(resume_at, 10)]
            assert group_type() == ck.ConsumerGroupType.CLASSIC
            c.commit({kafka.TopicPartition(topic, p): kafka.OffsetAndMetadata(commit_at, "", -1) for p in range(2)})
        finally:
            c.close()

    classic_reads_and_commits(0, 3)
    ledger = Ledger()
    member = Member("m0", target, group, [topic], ledger)
    try:
        poll_until([member], lambda: len(member.messages) >= 14, "the KIP-848 member resumes the classic group's offsets")
        assert sorted(member.records()) == [(p, o) for p in range(2) for o in range(3, 10)]
        assert group_type() == ck.ConsumerGroupType.CONSUMER
        member.consumer.commit(offsets=[ck.TopicPartition(topic, p, 6) for p in range(2)], asynchronous=False)
    finally:
        member.close()
    deadline = time.monotonic() + SETTLE_TIMEOUT
    while describe_group(target.bootstrap, group).members:  # its leave was handled: the group is empty
        assert time.monotonic() < deadline, describe_or_error(target.bootstrap, group)
        time.sleep(0.1)
    classic_reads_and_commits(6, 8)
    committed = admin.list_consumer_group_offsets([ck.ConsumerGroupTopicPartitions(group)])[group].result(timeout=30)
    assert {tp.partition: tp.offset for tp in committed.topic_partitions} == {0: 8, 1: 8}


def _raw_join(bootstrap: str, group: str, topic: str, protocol_type: str) -> str:
    """JoinGroup v5 without a member id, with a valid ConsumerProtocolSubscription v0 for ``topic``;
    the answer's error code name."""
    from kio.index import load_request_schema

    cls = load_request_schema(11, 5)
    protocol = importlib.import_module(cls.__module__).JoinGroupRequestProtocol
    name = topic.encode()
    metadata = struct.pack(">hih", 0, 1, len(name)) + name + struct.pack(">i", -1)  # version, [topic], null user data
    request = cls(group_id=group, session_timeout=datetime.timedelta(seconds=10),
                  rebalance_timeout=datetime.timedelta(seconds=10), member_id="", group_instance_id=None,
                  protocol_type=protocol_type, protocols=(protocol(name="range", metadata=metadata),))
    conn = raw_connection(bootstrap)
    try:
        return conn.request(request).error_code.name
    finally:
        conn.close()


def case_broker_restart_keeps_assignments_and_epochs(target: Target) -> None:
    """The broker is SIGKILLed and restarted on its data: the members keep their partitions without
    a reassignment (no revoke, assign or lost callback), their member epochs and the group epoch are
    what they were, the committed offsets are still there, and new records reach their owners."""
    assert target.restart is not None
    topic = target.new_topic(6)
    partitions = partitions_of({topic: 6})
    group = target.new_group()
    ledger = Ledger()
    members = [Member(f"m{i}", target, group, [topic], ledger) for i in range(2)]
    try:
        settle(target, group, members, partitions, "two members share the topic")
        offsets = [ck.TopicPartition(topic, p, 3 + p) for p in range(6)]
        for m in members:  # each member commits for its own partitions
            mine = [tp for tp in offsets if (topic, tp.partition) in m.assignment()]
            m.consumer.commit(offsets=mine, asynchronous=False)
        before = describe_group(target.bootstrap, group)
        had = {m.name: m.assignment() for m in members}
        restarted_at = time.monotonic()
        target.restart()
        # Members heartbeat again (each at least a few heartbeats after the restart) and the broker
        # still describes the same group, members and assignments.
        settle(target, group, members, partitions, "the group is back after the restart")
        poll_for(members, 5 * target.heartbeat_interval + 1.0)
        settle(target, group, members, partitions, "the group is still stable")
        after = describe_group(target.bootstrap, group)
        assert {m.name: m.assignment() for m in members} == had
        assert not ledger.since(restarted_at), f"a reassignment after the restart:\n{ledger.render()}"
        assert after.group_epoch == before.group_epoch, (before, after)
        assert {k: v.member_epoch for k, v in after.members.items()} == \
            {k: v.member_epoch for k, v in before.members.items()}, (before, after)
        committed = members[0].consumer.committed([ck.TopicPartition(topic, p) for p in range(6)], timeout=30)
        assert sorted((tp.partition, tp.offset) for tp in committed) == [(p, 3 + p) for p in range(6)]
        # And the group works: new records reach the member owning their partition.
        produce_per_partition(target.bootstrap, topic, 6, 2)
        poll_until(members, lambda: sum(len(m.messages) for m in members) >= 12, "the members read the new records")
        for m in members:
            assert {(topic, p) for p, _ in m.records()} <= m.assignment(), (m.name, m.records())
    finally:
        for m in members:
            m.close()


def case_broker_restart_mid_rebalance(target: Target) -> None:
    """The broker is SIGKILLed while a rebalance is in progress (a third member joined and the first
    revocation ran) and restarted on its data: the group completes the rebalance from where it
    was, with no partition ever owned by two members and no member losing its partitions (no
    lost callback: members and epochs were persisted)."""
    assert target.restart is not None
    topic = target.new_topic(6)
    partitions = partitions_of({topic: 6})
    group = target.new_group()
    ledger = Ledger()
    members = [Member(f"m{i}", target, group, [topic], ledger) for i in range(2)]
    try:
        settle(target, group, members, partitions, "two members share the topic")
        joined_at = time.monotonic()
        members.append(Member("m2", target, group, [topic], ledger))
        poll_until(members, lambda: any(e.kind == "revoke" for e in ledger.since(joined_at)),
                   "a revocation starts the rebalance")
        target.restart()
        settle(target, group, members, partitions, "three members share the topic after the restart")
        ledger.check_exclusive()
        assert not [e for e in ledger.events if e.kind == "lost"], ledger.render()
    finally:
        for m in members:
            m.close()


@dataclass(frozen=True)
class Case:
    run: Callable[[Target], None]
    timing: Timing = Timing()
    restarts_broker: bool = False


CASES: dict[str, Case] = {
    "join_and_leave": Case(case_join_and_leave_one_by_one),
    "concurrent_churn": Case(case_concurrent_churn),
    "killed_member": Case(case_killed_member_partitions_move_after_session_timeout),
    # The broker's session (20 s) is long: the group's own (3 s) must be what expires the member.
    "group_config_session_timeout": Case(case_group_config_session_timeout, Timing(20000, 500)),
    "regex_new_topic": Case(case_regex_subscription_picks_up_new_topic),
    "committed_offsets": Case(case_committed_offsets_resume_a_new_member),
    # A long session: the static member's absence must stay well inside it on a loaded machine.
    "static_member": Case(case_static_member_restart_keeps_its_partitions, Timing(30000, 500)),
    "static_member_killed": Case(case_static_member_killed_then_restarted),
    "classic_unaffected": Case(case_classic_groups_unaffected),
    "classic_joins_consumer_group": Case(case_classic_member_joins_consumer_group),
    "group_apis_by_type": Case(case_group_apis_answer_by_type),
    "consumer_joins_classic_group": Case(case_consumer_member_joins_classic_group),
    "empty_group_converted": Case(case_empty_group_converted_both_ways),
    "commit_member_epochs": Case(case_offset_commits_checked_against_member_epochs),
    "topic_changes": Case(case_topic_changes_rebalance),
    "topic_created_after_subscribe": Case(case_topic_created_after_subscribe),
    "range_assignor": Case(case_range_assignor_co_partitions),
    # A long session: the broker's downtime (and Kafka's start) must not expire the members.
    "broker_restart": Case(case_broker_restart_keeps_assignments_and_epochs, Timing(45000, 500), restarts_broker=True),
    "broker_restart_mid_rebalance": Case(case_broker_restart_mid_rebalance, Timing(45000, 500), restarts_broker=True),
}
