"""The KIP-848 consumer group coordinator as a state machine (no sockets; time and durability
injected, as harness.py does for the classic one): joins, incremental handovers, fencing by
member epoch, static members, timers, offset checks by member epoch, failed writes, replay of
the records it wrote, and classic/consumer groups side by side. Expected behaviour is Kafka's
GroupMetadataManager.consumerGroupHeartbeat (and ConsumerGroup's offset checks).

The last test drives random members (join, heartbeat as a client does, leave, crash, topics
growing) and checks after every step that no partition is owned by two members — as the
coordinator sees it and as the clients do — and that a quiet group converges to its target.
"""

from __future__ import annotations

import random
import uuid

import pytest

from oncelog import errors
from oncelog.config.settings import GroupConfig
from oncelog.groups import consumer_records as cr
from oncelog.groups.consumer_state import ConsumerGroup, ConsumerGroupState, MemberState
from oncelog.groups.coordinator import GroupCoordinator
from oncelog.groups.records import decode_key

T, U = uuid.UUID(int=1), uuid.UUID(int=2)
SESSION, INTERVAL = 10_000, 1_000
C = ConsumerGroupState


class Harness:
    def __init__(self, topics=None, **config):
        self.now = 1_000
        self.topics = dict(topics or {"t": (T, 6)})
        self.written: list[tuple[str, list]] = []
        self.fail_writes = False
        # Assignments at once unless a test asks for Kafka's batching (its own test below).
        config.setdefault("consumer_assignment_interval_ms", 0)
        cfg = GroupConfig(consumer_session_timeout_ms=SESSION, consumer_heartbeat_interval_ms=INTERVAL, **config)

        def persist(gid, records, on_done):  # shared by coordinators replayed from these records
            if self.fail_writes:
                return on_done(errors.KafkaStorageError("__consumer_offsets: no space left on device"))
            self.written.append((gid, records))
            on_done(None)

        self.persist = persist
        self.coord = GroupCoordinator(lambda: self.now, persist, cfg, topics=lambda: self.topics)

    def hb(self, member_id, epoch, owned=None, *, names=..., regex=None, instance_id=None, group="g",
           rebalance_timeout_ms=None, assignor=None, version=1, describable=None):
        if epoch == 0:
            names = ("t",) if names is ... and regex is None else names
            owned = {} if owned is None else owned
            rebalance_timeout_ms = 30_000 if rebalance_timeout_ms is None else rebalance_timeout_ms
        names = None if names is ... else names
        got = []
        self.coord.consumer.heartbeat(
            group_id=group, member_id=member_id, member_epoch=epoch, instance_id=instance_id, rack_id=None,
            rebalance_timeout_ms=-1 if rebalance_timeout_ms is None else rebalance_timeout_ms, client_id="c",
            client_host="/127.0.0.1", subscribed_topic_names=names, subscribed_topic_regex=regex,
            server_assignor=assignor, owned=owned, api_version=version, respond=got.append,
            **({} if describable is None else {"describable": describable}))
        assert len(got) == 1
        return got[0]

    def group(self, gid="g") -> ConsumerGroup:
        return self.coord.groups[gid]

    def owned_by_coordinator(self, gid="g"):
        seen = {}
        for m in self.group(gid).members.values():
            for parts in (m.assigned, m.pending_revocation):
                for t, ps in parts.items():
                    for p in ps:
                        assert (t, p) not in seen, f"{t}-{p} owned by {seen[(t, p)]} and {m.member_id}"
                        seen[(t, p)] = m.member_id
        return seen


def parts(*ps, topic=T):
    return {topic: frozenset(ps)} if ps else {}


def test_first_member_gets_every_partition_and_the_group_is_stable():
    h = Harness()
    r = h.hb("a", 0)
    assert r.error is None and r.member_epoch == 2 and r.assignment == parts(0, 1, 2, 3, 4, 5)
    assert r.heartbeat_interval_ms == INTERVAL
    g = h.group()
    assert (g.group_epoch, g.assignment_epoch, g.state) == (2, 2, C.STABLE)
    # A heartbeat with nothing new carries no assignment.
    r = h.hb("a", 2, parts(0, 1, 2, 3, 4, 5))
    assert r.error is None and r.member_epoch == 2 and r.assignment is None


def test_second_member_gets_partitions_only_once_the_first_revoked_them():
    h = Harness()
    h.hb("a", 0)
    r = h.hb("b", 0)
    assert r.member_epoch == 3 and r.assignment == {}  # its partitions are still a's
    assert h.group().members["b"].state is MemberState.UNRELEASED_PARTITIONS
    assert h.group().state is C.RECONCILING
    target_b = h.group().target["b"][T]
    # a is asked to revoke b's partitions, at its old epoch.
    r = h.hb("a", 2, parts(0, 1, 2, 3, 4, 5))
    assert r.member_epoch == 2 and set(r.assignment[T]) == set(range(6)) - target_b
    assert h.group().members["a"].state is MemberState.UNREVOKED_PARTITIONS
    assert h.hb("b", 3, {}).assignment is None  # not free yet
    # a revoked: it moves to epoch 2; b then gets them.
    r = h.hb("a", 2, r.assignment)
    assert r.member_epoch == 3 and r.error is None
    r = h.hb("b", 3, {})
    assert r.assignment == {T: target_b} and h.group().state is C.STABLE
    h.owned_by_coordinator()


def test_assignments_are_batched_by_the_assignment_interval():
    """KIP-1263 (Kafka 4.4's default 1000 ms): a change within the interval of the last
    assignment waits for it (the group is Assigning, members reconcile towards the old target);
    the first heartbeat after it computes it, once for every change meanwhile (as Kafka 4.4: no
    timer — measured, a group stays Assigning without heartbeats)."""
    h = Harness(consumer_assignment_interval_ms=1_000)
    a = h.hb("a", 0)
    assert a.member_epoch == 2 and a.assignment == parts(0, 1, 2, 3, 4, 5)  # the first at once
    h.now += 100
    b = h.hb("b", 0)
    assert b.member_epoch == 2 and b.assignment == {}  # at the current target's epoch: nothing for it
    g = h.group()
    assert (g.group_epoch, g.assignment_epoch, g.state) == (3, 2, C.ASSIGNING)
    h.now += 100
    h.hb("c", 0)
    assert (g.group_epoch, g.assignment_epoch) == (4, 2)
    # a heartbeat before the interval passed changes nothing; time alone changes nothing either.
    assert h.hb("a", 2, a.assignment).assignment is None
    h.now = 2_000
    h.coord.tick()
    assert g.assignment_epoch == 2 and g.state is C.ASSIGNING
    r = h.hb("a", 2, a.assignment)  # computes the target; a is asked to revoke the others' partitions
    assert (g.group_epoch, g.assignment_epoch) == (4, 4) and set(g.target) == {"a", "b", "c"}
    assert sorted(len(g.target[m].get(T, ())) for m in "abc") == [2, 2, 2]
    assert r.member_epoch == 2 and len(r.assignment[T]) == 2
    assert h.hb("a", 2, r.assignment).member_epoch == 4
    assert h.hb("b", 2, {}).assignment == {T: g.target["b"][T]}
    h.owned_by_coordinator()


def test_member_epoch_fencing():
    h = Harness()
    h.hb("a", 0)
    h.hb("b", 0)
    r = h.hb("a", 2, parts(0, 1, 2, 3, 4, 5))
    kept = r.assignment
    h.hb("a", 2, kept)  # revoked -> epoch 2
    # A greater epoch than the coordinator's is fenced, as is an older one that is not the previous.
    assert isinstance(h.hb("a", 4, kept).error, errors.FencedMemberEpoch)
    assert isinstance(h.hb("b", 2, {}).error, errors.FencedMemberEpoch)
    # The previous epoch with a subset of the assignment: the answer with the new epoch was lost.
    r = h.hb("a", 2, kept)
    assert r.error is None and r.member_epoch == 3
    # ... but not while owning more than the assignment.
    assert isinstance(h.hb("a", 2, parts(0, 1, 2, 3, 4, 5)).error, errors.FencedMemberEpoch)
    assert isinstance(h.hb("zz", 5, {}).error, errors.UnknownMemberId)
    assert isinstance(h.hb("a", 3, kept, group="nope").error, errors.GroupIdNotFound)


def test_a_fenced_member_rejoins_with_its_member_id_and_owns_nothing_until_reassigned():
    h = Harness()
    h.hb("a", 0)
    r = h.hb("a", 0)  # KIP-1082: the same id, epoch 0 (after FENCED_MEMBER_EPOCH)
    assert r.error is None and r.assignment == parts(0, 1, 2, 3, 4, 5) and r.member_epoch == 2
    assert h.group().group_epoch == 2  # same subscription: no rebalance


def test_leave_frees_partitions_and_bumps_the_group_epoch():
    h = Harness()
    h.hb("a", 0)
    h.hb("b", 0)
    h.hb("a", 2, h.hb("a", 2, parts(0, 1, 2, 3, 4, 5)).assignment)
    r = h.hb("a", -1)
    assert r.error is None and r.member_epoch == -1
    g = h.group()
    assert "a" not in g.members and g.group_epoch == 4
    r = h.hb("b", 3, {})
    assert r.member_epoch == 4 and r.assignment == parts(0, 1, 2, 3, 4, 5)
    assert isinstance(h.hb("a", -1).error, errors.UnknownMemberId)
    h.hb("b", -1)
    assert h.group().state is C.EMPTY and h.group().members == {}


def test_session_timeout_removes_a_silent_member():
    h = Harness()
    h.hb("a", 0)
    h.hb("b", 0)
    h.now += SESSION - 1
    h.hb("b", 3, {})
    assert h.coord.next_deadline_ms() == 1_000 + SESSION
    h.now = 1_000 + SESSION
    h.coord.tick()
    assert set(h.group().members) == {"b"}
    r = h.hb("b", 3, {})
    assert r.assignment == parts(0, 1, 2, 3, 4, 5) and r.member_epoch == 4


def test_a_member_that_does_not_revoke_within_its_rebalance_timeout_is_fenced():
    h = Harness()
    h.hb("a", 0, rebalance_timeout_ms=5_000)
    h.hb("b", 0)
    h.hb("a", 2, parts(0, 1, 2, 3, 4, 5))  # asked to revoke; it never does
    assert h.group().members["a"].rebalance_deadline_ms == h.now + 5_000
    h.now += 5_000
    h.hb("b", 3, {})  # b's session stays alive
    h.coord.tick()
    assert set(h.group().members) == {"b"}
    assert h.hb("b", 3, {}).assignment == parts(0, 1, 2, 3, 4, 5)


def test_static_member_leaves_for_now_and_is_back_with_its_partitions_without_a_rebalance():
    h = Harness()
    h.hb("a1", 0, instance_id="A")
    h.hb("b", 0)
    r = h.hb("a1", 2, parts(0, 1, 2, 3, 4, 5), instance_id="A")
    h.hb("a1", 2, r.assignment, instance_id="A")
    h.hb("b", 3, {})
    kept = h.group().members["a1"].assigned
    epoch = h.group().group_epoch
    assert h.hb("a1", -2, instance_id="A").member_epoch == -2
    # Its partitions stay with it: b gets nothing more.
    assert h.hb("b", 3, h.group().members["b"].assigned).assignment is None
    # A second instance with the same id is refused while it is... no: it left (-2); the new
    # member id takes over, same partitions, no new group epoch.
    r = h.hb("a2", 0, instance_id="A")
    assert r.error is None and r.assignment == kept and h.group().group_epoch == epoch
    assert "a1" not in h.group().members and h.group().static_members["A"] == "a2"
    # While a2 is in, a third one with the instance id is UNRELEASED_INSTANCE_ID.
    assert isinstance(h.hb("a3", 0, instance_id="A").error, errors.UnreleasedInstanceId)
    assert isinstance(h.hb("a1", 3, kept, instance_id="A").error, errors.FencedInstanceId)


def test_new_partitions_of_a_subscribed_topic_bump_the_group_epoch():
    h = Harness()
    h.hb("a", 0)
    h.topics["t"] = (T, 8)
    r = h.hb("a", 2, parts(0, 1, 2, 3, 4, 5))
    assert r.member_epoch == 3 and r.assignment == parts(*range(8))


def test_regex_subscription_picks_up_new_topics():
    # Kafka 4.4 matches internal topics too (its resolver filters nothing): "^.*" gets
    # __consumer_offsets' partitions there, and here.
    offsets = uuid.UUID(int=9)
    h = Harness(topics={"ct-1": (T, 2), "__consumer_offsets": (offsets, 3), "other": (U, 1)})
    assert h.hb("z", 0, regex="__.*", group="z").assignment == {offsets: frozenset({0, 1, 2})}
    r = h.hb("a", 0, regex="ct-.*")
    assert r.assignment == parts(0, 1)
    h.topics["ct-2"] = (U, 3)
    r = h.hb("a", 2, parts(0, 1))
    assert r.assignment == {T: frozenset({0, 1}), U: frozenset({0, 1, 2})}
    assert isinstance(h.hb("b", 0, regex="(a").error, errors.InvalidRegularExpression)


@pytest.mark.parametrize("epoch,kwargs,message", [
    (0, dict(names=None, regex=None, owned={}), "SubscribedTopicNames or SubscribedTopicRegex"),
    (0, dict(owned=None), "TopicPartitions must be empty"),
    (0, dict(owned=parts(1)), "TopicPartitions must be empty"),
    (0, dict(rebalance_timeout_ms=-1), "RebalanceTimeoutMs"),
    (-3, {}, "MemberEpoch is invalid."),
    (-2, {}, "InstanceId can't be null"),
    (1, dict(instance_id=""), "InstanceId can't be empty"),
])
def test_invalid_requests(epoch, kwargs, message):
    h = Harness()
    if epoch == 0 and "owned" in kwargs and kwargs["owned"] is None:
        got = []
        h.coord.consumer.heartbeat(group_id="g", member_id="m", member_epoch=0, instance_id=None, rack_id=None,
                                   rebalance_timeout_ms=1, client_id="", client_host="", subscribed_topic_names=("t",),
                                   subscribed_topic_regex=None, server_assignor=None, owned=None, api_version=1,
                                   respond=got.append)
        r = got[0]
    else:
        r = h.hb("m", epoch, **kwargs)
    assert isinstance(r.error, errors.InvalidRequest) and message in str(r.error), r.error
    assert "g" not in h.coord.groups


def test_member_id_is_required_from_v1_and_made_by_the_coordinator_in_v0():
    h = Harness()
    assert isinstance(h.hb("", 0).error, errors.InvalidRequest)
    r = h.hb("", 0, version=0)
    assert r.error is None and len(r.member_id) == 22


def test_unknown_assignor_and_group_max_size():
    h = Harness(consumer_max_size=1)
    assert isinstance(h.hb("a", 0, assignor="sticky").error, errors.UnsupportedAssignor)
    assert h.hb("a", 0, assignor="range").error is None
    assert h.coord.consumer.assignor_name(h.group()) == "range"
    assert isinstance(h.hb("b", 0).error, errors.GroupMaxSizeReached)


def test_offset_commits_and_fetches_carry_the_member_epoch():
    h = Harness()
    h.hb("a", 0)
    c = h.coord
    assert c.validate_offset_commit("g", 2, "a", None, api_version=9) is None  # its current epoch
    with pytest.raises(errors.StaleMemberEpoch, match="newer than current member epoch 2"):
        c.validate_offset_commit("g", 3, "a", None, api_version=9)
    with pytest.raises(errors.UnknownMemberId):
        c.validate_offset_commit("g", 2, "zz", None, api_version=9)
    with pytest.raises(errors.UnsupportedVersion):
        c.validate_offset_commit("g", 2, "a", None, api_version=8)
    with pytest.raises(errors.UnknownMemberId):  # epoch -1 commits only to an empty group
        c.validate_offset_commit("g", -1, "", None, api_version=9)
    c.validate_offset_fetch("g", None, -1)  # an admin's fetch
    c.validate_offset_fetch("g", "a", 2)
    with pytest.raises(errors.StaleMemberEpoch):
        c.validate_offset_fetch("g", "a", 1)
    h.hb("a", -1)
    assert c.validate_offset_commit("g", -1, "", None, api_version=9) is None


def test_an_older_member_epoch_commits_the_partitions_owned_since_then():
    """KIP-1251 (Kafka 4.4): measured on Kafka by helper T — a alone (e1, p0..p5), b joins (a at
    e2 keeps half), b leaves (a at e3 owns all): a commits a kept partition at e1, e2, e3; a
    partition it got at e3 only at e3; below its first epoch or above its current: stale."""
    h = Harness()
    e1 = h.hb("a", 0).member_epoch
    h.hb("b", 0)
    r = h.hb("a", e1, parts(0, 1, 2, 3, 4, 5))  # asked to revoke b's half
    kept = r.assignment
    e2 = h.hb("a", e1, kept).member_epoch
    h.hb("b", -1)
    r = h.hb("a", e2, kept)
    e3 = r.member_epoch
    assert e1 < e2 < e3 and r.assignment == parts(0, 1, 2, 3, 4, 5)
    c = h.coord
    check = c.validate_offset_commit("g", e1, "a", None, api_version=9)
    k, gained = min(kept[T]), min(set(range(6)) - kept[T])
    assert check("t", k) is None
    assert isinstance(check("t", gained), errors.StaleMemberEpoch)
    assert c.validate_offset_commit("g", e2, "a", None, api_version=9)("t", k) is None
    assert c.validate_offset_commit("g", e3, "a", None, api_version=9) is None
    assert isinstance(c.validate_offset_commit("g", 0, "a", None, api_version=9)("t", k), errors.StaleMemberEpoch)
    assert isinstance(check("t", 99), errors.StaleMemberEpoch)  # never assigned
    # TxnOffsetCommit: the same rule, ILLEGAL_GENERATION instead (Kafka, below TxnOffsetCommit v6).
    txn = c.validate_txn_offset_commit("g", e1, "a", None)
    assert txn("t", k) is None and isinstance(txn("t", gained), errors.IllegalGeneration)
    with pytest.raises(errors.IllegalGeneration):
        c.validate_txn_offset_commit("g", e3 + 1, "a", None)
    with pytest.raises(errors.UnknownMemberId):
        c.validate_txn_offset_commit("g", e3, "zz", None)
    assert c.validate_txn_offset_commit("g", -1, "", None) is None  # no group metadata (KIP-447's old producers)


def test_a_heartbeat_whose_records_are_not_written_changes_nothing():
    h = Harness()
    h.hb("a", 0)
    g = h.group()
    before = (g.group_epoch, g.assignment_epoch, dict(g.target), g.members["a"].assignment_state(), g.state)
    h.fail_writes = True
    r = h.hb("b", 0)
    assert isinstance(r.error, errors.KafkaStorageError)
    assert set(g.members) == {"a"}
    assert (g.group_epoch, g.assignment_epoch, dict(g.target), g.members["a"].assignment_state(), g.state) == before
    # A heartbeat that moves a member (a revokes for b), not written: a is as it was.
    h.fail_writes = False
    assert h.hb("b", 0).error is None
    a = g.members["a"]
    was = (a.assignment_state(), g.state, g.group_epoch)
    h.fail_writes = True
    assert isinstance(h.hb("a", a.member_epoch, a.assigned).error, errors.KafkaStorageError)
    assert (a.assignment_state(), g.state, g.group_epoch) == was and a.state is MemberState.STABLE
    # A join that makes a group and fails leaves no group.
    h.fail_writes = True
    assert isinstance(h.hb("x", 0, group="g2").error, errors.KafkaStorageError)
    assert "g2" not in h.coord.groups


def replay(h: Harness) -> GroupCoordinator:
    """A new coordinator loaded from the records ``h`` wrote, as the store replays them."""
    fresh = GroupCoordinator(lambda: h.now, h.persist, h.coord.config, topics=lambda: h.topics)
    for _, records in h.written:
        for key, value in records:
            k = decode_key(key)
            fresh.load_consumer_record(k, cr.decode_consumer_value(k, value) if value is not None else None)
    fresh.finish_load()
    return fresh


def test_replay_restores_members_epochs_targets_and_assignments():
    h = Harness()
    h.hb("a", 0)
    h.hb("b", 0, instance_id="B")
    r = h.hb("a", 2, parts(0, 1, 2, 3, 4, 5))  # a is revoking
    fresh = replay(h)
    g, f = h.group(), fresh.groups["g"]
    assert (f.group_epoch, f.assignment_epoch, f.target, f.state) == (g.group_epoch, g.assignment_epoch, g.target,
                                                                     g.state)
    for mid, m in g.members.items():
        n = f.members[mid]
        assert (n.member_epoch, n.previous_member_epoch, n.state, n.assigned, n.pending_revocation,
                n.instance_id, n.subscribed_topic_names) == (m.member_epoch, m.previous_member_epoch, m.state,
                                                              m.assigned, m.pending_revocation, m.instance_id,
                                                              m.subscribed_topic_names)
    assert f.static_members == {"B": "b"}
    assert fresh.consumer.next_deadline_ms() is not None
    # The members go on where they were, no rebalance: a finishes revoking, b gets its share.
    h.coord = fresh
    assert h.hb("a", 2, r.assignment).member_epoch == 3
    assert h.hb("b", 3, {}, instance_id="B").assignment
    # A member that left and a deleted group are gone after a replay too.
    h.hb("a", -1)
    h.hb("b", -1, instance_id="B")
    done = []
    h.coord.delete_groups(["g"], done.append)
    assert done == [{"g": None}]
    assert "g" not in replay(h).groups


def subscription(*topics, owned=None, version=1):
    """ConsumerProtocolSubscription bytes (v0: topics; v1: and owned partitions)."""
    import struct
    out = struct.pack(">hi", version, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    out += struct.pack(">i", -1)
    if version >= 1:
        owned = owned or {}
        out += struct.pack(">i", len(owned))
        for t, ps in owned.items():
            out += struct.pack(">h", len(t)) + t.encode() + struct.pack(">i", len(ps)) + b"".join(
                struct.pack(">i", p) for p in ps)
    return out


def classic_join(c, group, member_id="", *, meta=None, protocol_type="consumer", instance=None):
    got = []
    c.join(group_id=group, member_id=member_id, group_instance_id=instance, client_id="k", client_host="h",
           session_timeout_ms=10_000, rebalance_timeout_ms=10_000, protocol_type=protocol_type,
           protocols=[("range", subscription("t") if meta is None else meta)], require_known_member_id=True,
           respond=got.append)
    return got[0]


def classic_sync(c, group, generation, member_id):
    got = []
    c.sync(group_id=group, generation=generation, member_id=member_id, group_instance_id=None,
           protocol_type="consumer", protocol_name="range", assignments={}, respond=got.append)
    return got[0]


def test_a_classic_member_joins_a_consumer_group():
    """Kafka 4.4 (measured by helper T): a classic JoinGroup with protocol type "consumer" to a
    consumer group gets MEMBER_ID_REQUIRED, then joins as a member of the consumer group; the
    coordinator assigns (no leader); its heartbeats say REBALANCE_IN_PROGRESS until it is
    reconciled; a consumer-protocol member's partitions reach it only once released."""
    from oncelog.protocol.consumer_protocol import parse_assignment
    h = Harness()
    c = h.coord
    a = h.hb("a", 0)
    assert isinstance(classic_join(c, "g", protocol_type="connect").error, errors.InconsistentGroupProtocol)
    assert isinstance(classic_join(c, "g", meta=b"").error, errors.InconsistentGroupProtocol)
    first = classic_join(c, "g")
    assert isinstance(first.error, errors.MemberIdRequired) and first.member_id
    k = classic_join(c, "g", first.member_id)
    assert k.error is None and k.leader == "" and k.members == () and k.protocol_name == "range"
    g = h.group()
    assert g.group_type == "consumer" and set(g.members) == {"a", k.member_id}
    assert g.members[k.member_id].classic is not None
    # Nothing for it yet: a still owns everything.
    assert parse_assignment(classic_sync(c, "g", k.generation, k.member_id).assignment) == {}
    with pytest.raises(errors.RebalanceInProgress):
        c.heartbeat("g", k.generation, k.member_id, None)
    r = h.hb("a", a.member_epoch, a.assignment)  # a revokes its half
    h.hb("a", r.member_epoch, r.assignment)
    k2 = classic_join(c, "g", k.member_id)  # the classic member rejoins
    got = parse_assignment(classic_sync(c, "g", k2.generation, k2.member_id).assignment)
    assert got == {"t": g.target[k.member_id][T]} and len(got["t"]) == 3
    c.heartbeat("g", k2.generation, k2.member_id, None)  # reconciled: no rebalance
    with pytest.raises(errors.IllegalGeneration):
        c.heartbeat("g", k2.generation - 1, k2.member_id, None)
    with pytest.raises(errors.UnknownMemberId):
        c.heartbeat("g", k2.generation, "a", None)  # a consumer-protocol member's id
    # Offsets by generation = member epoch; a mismatch is ILLEGAL_GENERATION for a classic member.
    assert c.validate_offset_commit("g", k2.generation, k2.member_id, None, api_version=8) is None
    with pytest.raises(errors.IllegalGeneration):
        c.validate_offset_commit("g", k2.generation + 1, k2.member_id, None, api_version=8)
    c.validate_offset_fetch("g", k2.member_id, k2.generation)
    with pytest.raises(errors.IllegalGeneration, match="received generation id"):  # Kafka's validateOffsetFetch
        c.validate_offset_fetch("g", k2.member_id, k2.generation - 1)
    h.owned_by_coordinator()
    assert c.leave("g", [(k2.member_id, None)]) == [None]
    assert set(h.group().members) == {"a"}


def test_the_last_consumer_member_leaving_converts_the_group_back_to_classic():
    """Kafka's downgrade (policy bidirectional, measured by helper Q with confluent-kafka-python's
    test_consumer_upgrade_downgrade): the classic members stay, the group is classic at the group
    epoch, rebalancing; the next heartbeat says REBALANCE_IN_PROGRESS, the rejoin forms the next
    generation; offsets stay."""
    from oncelog.protocol.consumer_protocol import parse_assignment
    from oncelog.groups.state import GroupState
    h = Harness()
    c = h.coord
    a = h.hb("a", 0)
    k = classic_join(c, "g")
    k = classic_join(c, "g", k.member_id)
    r = h.hb("a", a.member_epoch, a.assignment)
    h.hb("a", r.member_epoch, r.assignment)
    k = classic_join(c, "g", k.member_id)
    c.groups["g"].offsets[("t", 0)] = "kept"
    epoch = c.groups["g"].group_epoch
    h.hb("a", -1)
    g = c.groups["g"]
    assert g.group_type == "classic" and g.state is GroupState.PREPARING_REBALANCE
    assert g.generation == epoch and set(g.members) == {k.member_id} and g.offsets == {("t", 0): "kept"}
    with pytest.raises(errors.RebalanceInProgress):
        c.heartbeat("g", k.generation, k.member_id, None)
    again = classic_join(c, "g", k.member_id)
    assert again.error is None and again.generation == epoch + 1 and again.leader == k.member_id
    h2 = Harness(consumer_migration_policy="upgrade")
    a = h2.hb("a", 0)
    k = classic_join(h2.coord, "g")
    classic_join(h2.coord, "g", k.member_id)
    h2.hb("a", -1)
    assert h2.coord.groups["g"].group_type == "consumer"  # not without downgrade in the policy
    assert parse_assignment(b"\x00") is None


def test_a_consumer_member_joining_a_live_classic_group_converts_it():
    """Kafka 4.4 (migration policy bidirectional): the classic group becomes a consumer group at
    its generation, its members keep their partitions, rejoin when asked, and share with the new
    member; with the policy disabled, GROUP_ID_NOT_FOUND."""
    from oncelog.protocol.consumer_protocol import encode_assignment
    h = Harness()
    c = h.coord
    j = classic_join(c, "g")
    j = classic_join(c, "g", j.member_id)
    got = []
    c.sync(group_id="g", generation=j.generation, member_id=j.member_id, group_instance_id=None,
           protocol_type="consumer", protocol_name="range",
           assignments={j.member_id: encode_assignment({"t": frozenset(range(6))}, 0)}, respond=got.append)
    assert got[0].error is None
    r = h.hb("n", 0)
    g = h.group()
    assert isinstance(g, ConsumerGroup) and set(g.members) == {j.member_id, "n"}
    assert g.members[j.member_id].assigned == parts(0, 1, 2, 3, 4, 5) and r.assignment == {}
    with pytest.raises(errors.RebalanceInProgress):
        c.heartbeat("g", j.generation, j.member_id, None)
    k = classic_join(c, "g", j.member_id, meta=subscription("t", owned={}))  # an eager member revoked all
    assert k.error is None
    r = h.hb("n", r.member_epoch, {})
    assert len(r.assignment[T]) == 3
    h.owned_by_coordinator()
    h2 = Harness(consumer_migration_policy="disabled")
    j = classic_join(h2.coord, "g")
    classic_join(h2.coord, "g", j.member_id)
    assert isinstance(h2.hb("n", 0).error, errors.GroupIdNotFound)


def test_classic_and_consumer_groups_side_by_side():
    h = Harness()
    c = h.coord
    answers = []
    # Empty groups convert either way, keeping their offsets.
    j = classic_join(c, "kg")
    j = classic_join(c, "kg", j.member_id)
    c.leave("kg", [(j.member_id, None)])
    c.groups["kg"].offsets[("t", 0)] = "kept"
    assert h.hb("x", 0, group="kg").error is None
    assert isinstance(c.groups["kg"], ConsumerGroup) and c.groups["kg"].offsets == {("t", 0): "kept"}
    h.hb("x", -1, group="kg")
    c.join(group_id="kg", member_id="", group_instance_id=None, client_id="k", client_host="h",
           session_timeout_ms=10_000, rebalance_timeout_ms=10_000, protocol_type="consumer",
           protocols=[("range", b"")], require_known_member_id=False, respond=answers.append)
    assert answers[-1].error is None and c.groups["kg"].group_type == "classic"
    assert c.groups["kg"].offsets == {("t", 0): "kept"}
    h.hb("a", 0, group="cg")
    assert {g.group_id: g.group_type for g in c.list_groups()} == {"cg": "consumer", "kg": "classic"}


class Client:
    """A KIP-848 client as librdkafka behaves: it owns what the last answer assigned (it drops
    revoked partitions at once), reports that in each heartbeat, rejoins at epoch 0 when fenced."""

    def __init__(self, member_id):
        self.member_id, self.epoch, self.owned, self.alive = member_id, 0, {}, True

    def beat(self, h: Harness):
        r = h.hb(self.member_id, self.epoch, None if self.epoch == 0 else self.owned,
                 names=("t", "u") if self.epoch == 0 else None)
        if r.error is not None:
            assert isinstance(r.error, (errors.FencedMemberEpoch, errors.UnknownMemberId)), r.error
            self.epoch, self.owned = 0, {}
            return
        self.epoch = r.member_epoch
        if r.assignment is not None:
            self.owned = dict(r.assignment)


@pytest.mark.parametrize("seed", range(25))
def test_random_members_never_share_a_partition_and_converge(seed):
    rng = random.Random(seed)
    # Odd seeds with Kafka's assignment batching (1 s), even ones assigning at once.
    h = Harness(topics={"t": (T, 7), "u": (U, 3)}, consumer_assignment_interval_ms=1_000 * (seed % 2))
    clients: list[Client] = []
    for step in range(300):
        op = rng.random()
        live = [c for c in clients if c.alive]
        if op < 0.08 or not live:
            clients.append(Client(f"m{len(clients)}"))
            clients[-1].beat(h)
        elif op < 0.12:
            c = rng.choice(live)
            h.hb(c.member_id, -1)
            c.alive = False
        elif op < 0.15:
            rng.choice(live).alive = False  # crashed: stops heartbeating
        elif op < 0.17:
            name = rng.choice(["t", "u"])
            tid, n = h.topics[name]
            h.topics[name] = (tid, n + 1)
        elif op < 0.22:
            h.now += SESSION // 3
            for c in live:
                if rng.random() < 0.8:
                    c.beat(h)
            h.coord.tick()
        else:
            rng.choice(live).beat(h)
        # After every step: the coordinator's owners are disjoint, and each live client owns
        # no more than the coordinator says it does (so no two clients own one partition).
        owners = h.owned_by_coordinator()
        members = h.group().members if "g" in h.coord.groups else {}
        for c in clients:
            if c.alive and c.member_id in members and c.epoch == members[c.member_id].member_epoch:
                for t, ps in c.owned.items():
                    for p in ps:
                        assert owners.get((t, p)) == c.member_id, (step, c.member_id, t, p)
    # Quiet now: the live members heartbeat (crashed ones expire) until the group is Stable.
    live = [c for c in clients if c.alive]
    for _ in range(12):
        h.now += SESSION // 4
        for c in live:
            c.beat(h)
        h.coord.tick()
    if not live:
        return
    g = h.group()
    assert g.state is C.STABLE, g.state
    assert all(m.is_reconciled_to(g.assignment_epoch) for m in g.members.values())
    owned = h.owned_by_coordinator()
    everything = {(tid, p) for tid, n in h.topics.values() for p in range(n)}
    assert set(owned) == everything
    assert {(t, p) for c in live for t, ps in c.owned.items() for p in ps} == everything
