"""KIP-848 consumer groups (group.protocol=consumer): ConsumerGroupHeartbeat (join, heartbeat,
incremental handover, fencing by member epoch, leave, static members, invalid requests),
ConsumerGroupDescribe, and what the other group APIs answer about a consumer group (DescribeGroups,
ListGroups types, OffsetCommit/OffsetFetch/TxnOffsetCommit with member epochs, classic joins).

Invariants: member ids are the client's (v1, KIP-1082) and compare by role (the framework numbers
them); each scenario's topics are its own, so the uniform assignor's choices are the same on both
brokers (oncelog's is a port of Kafka 4.4's); epochs sent are the ones the broker answered. Kafka
4.4 batches assignments (group.consumer.assignment.interval.ms, 1 s, both brokers): a scenario
whose member joins a group assigned less than a second before waits until the group's assignment
epoch reaches its group epoch, and leaves out of its answer what depends on that second (whether
the joining member's first answer came before or after the assignment). Kafka resolves regex
subscriptions in the background, oncelog at once: the regex scenario compares the settled group.
"""

from __future__ import annotations

import datetime
import uuid

from oncelog.partition.internal_topic import partition_for

from .framework import DELETE_GROUPS, DESCRIBE_GROUPS, LIST_GROUPS, OFFSET_COMMIT, OFFSET_FETCH, mod
from .scenarios_groups import build, join_member, leave, scenario
from .scenarios_transactions import begin, txn_offset_commit

HEARTBEAT_848, DESCRIBE_848 = 68, 69
REBALANCE_MS = 30000


def cgh(k, group: str, member: str, epoch: int, *, topics=None, regex=None, owned=(), instance=None,
        rebalance_ms: int | None = None, assignor=None, version: int = 1):
    """ConsumerGroupHeartbeat. ``owned``: [(topic id, [partitions])], or None (not sent). A join
    (epoch 0) sends the full request as clients do."""
    m = mod(HEARTBEAT_848, version)
    if epoch == 0 and rebalance_ms is None:
        rebalance_ms = REBALANCE_MS
    parts = None if owned is None else tuple(m.TopicPartitions(topic_id=t, partitions=tuple(ps)) for t, ps in owned)
    return k.send(build(HEARTBEAT_848, version, group_id=group, member_id=member, member_epoch=epoch,
                        instance_id=instance, rack_id=None,
                        rebalance_timeout=datetime.timedelta(milliseconds=-1 if rebalance_ms is None else rebalance_ms),
                        subscribed_topic_names=None if topics is None else tuple(topics),
                        subscribed_topic_regex=regex, server_assignor=assignor, topic_partitions=parts))


def settled(k, group: str, member: str, epoch: int) -> int:
    """Heartbeat as ``member`` (owning nothing, at ``epoch``) until the group's target assignment
    is at its group epoch: Kafka computes a batched assignment at a heartbeat after the interval,
    not on a timer. Returns the member's epoch then."""
    state = {"epoch": epoch}

    def done():
        state["epoch"] = cgh(k, group, member, state["epoch"], owned=[]).member_epoch
        d = cgd(k, group)[0]
        return int(d[1]) == 0 and d[4] == d[5]
    k.wait_until(done, f"group {group} assigned", interval=0.2)
    return state["epoch"]


def owned_of(resp):
    """The partitions an answer assigned, as the next heartbeat reports them."""
    if resp.assignment is None:
        return None
    return [(tp.topic_id, list(tp.partitions)) for tp in resp.assignment.topic_partitions]


def cgd(k, *groups: str, version: int = 1):
    resp = k.send(build(DESCRIBE_848, version, group_ids=tuple(groups), include_authorized_operations=False))
    # Members in member-id order: both brokers keep them in maps (the framework numbers the ids).
    return [(g.group_id, g.error_code, g.error_message, g.group_state, g.group_epoch, g.assignment_epoch,
             g.assignor_name, sorted(([m.member_id, m.instance_id, m.member_epoch, list(m.subscribed_topic_names),
                                       m.subscribed_topic_regex, _parts(m.assignment), _parts(m.target_assignment)]
                                      for m in g.members), key=lambda row: row[0]))
            for g in resp.groups]


def _parts(assignment):
    return sorted((tp.topic_name, sorted(tp.partitions)) for tp in assignment.topic_partitions)


def coordinator_sees(k, group: str, topic: str) -> None:
    """Wait until the coordinator shard of ``group`` assigns every partition of ``topic``.

    Why: Kafka applies a new metadata image to each ``__consumer_offsets`` shard by an event it
    queues after the broker already serves the topic (CoordinatorRuntime.onNewMetadataImage), so
    a member joining at once can be assigned nothing (CI saw it once: epoch 2, no partitions).
    A throwaway group on the same shard (Kafka's placement, :func:`partition_for`; events of a
    shard run in order) joins, reads its assignment, leaves and is deleted; its name lacks the
    run's prefix, so no answer shows it.
    oncelog's coordinator sees a topic when it exists: the first probe succeeds there."""
    seen = k.__dict__.setdefault("_coordinator_sees", set())
    shards = k.__dict__.get("_offsets_partitions")
    if shards is None:  # asked once per conversation
        md = k.metadata(["__consumer_offsets"]).topics[0]
        shards = k.__dict__["_offsets_partitions"] = (len(md.partitions) if int(md.error_code) == 0 and md.partitions
                                                      else 50)
    shard = partition_for(group, shards)
    if (shard, topic) in seen:
        return
    want = len(k.metadata([topic]).topics[0].partitions)

    def probe() -> bool:
        while True:  # a fresh group each time: a rejoin would wait for the assignment interval
            name = f"probe-{uuid.uuid4().hex}"
            if partition_for(name, shards) == shard:
                break
        member = uuid.uuid4().hex
        r = cgh(k, name, member, 0, topics=[topic])
        got = 0 if r.assignment is None else sum(len(tp.partitions) for tp in r.assignment.topic_partitions)
        if int(r.error_code) == 0:
            cgh(k, name, member, -1, owned=None)
            k.send(build(DELETE_GROUPS, 2, groups_names=(name,)))
        return int(r.error_code) == 0 and got == want
    k.wait_until(probe, f"the coordinator of {group} sees {topic}", interval=0.05)
    seen.add((shard, topic))


def joined(k, group: str, member: str, topic: str, **kw):
    coordinator_sees(k, group, topic)
    r = cgh(k, group, k.name(member), 0, topics=[topic], **kw)
    if int(r.error_code) != 0:
        raise AssertionError(f"join {member}: {r.error_code!r} {r.error_message}")
    return r


@scenario("consumer_groups")
def cg_join_and_heartbeat(k):
    """A first member joins (epoch 0): epoch 1, every partition; a heartbeat at epoch 1 with them: no assignment sent."""
    t = k.create_topic("t", 3)
    g = k.name("g")
    j = joined(k, g, "a", t)
    return [j, cgh(k, g, k.name("a"), j.member_epoch, owned=owned_of(j))]


@scenario("consumer_groups")
def cg_handover_between_two_members(k):
    """b joins: nothing for it yet (a owns it all); once assigned, a is asked to revoke at its epoch; a revokes
    and moves to the new epoch; b then gets its share; the group is Stable."""
    t = k.create_topic("t", 4)
    g = k.name("g")
    a, b = k.name("a"), k.name("b")
    ja = joined(k, g, "a", t)
    jb = joined(k, g, "b", t)
    eb = settled(k, g, b, jb.member_epoch)
    ra = cgh(k, g, a, ja.member_epoch, owned=owned_of(ja))
    ra2 = cgh(k, g, a, ra.member_epoch, owned=owned_of(ra))
    rb = cgh(k, g, b, eb, owned=[])
    # b's join answer: its epoch is the old or the new assignment's, by the second (see above).
    return [ja, [jb.error_code, jb.assignment], ra, ra2, rb, cgd(k, g)]


@scenario("consumer_groups")
def cg_member_epoch_fencing(k):
    """A heartbeat ahead of the member's epoch, and one behind it that is not the previous epoch: FENCED_MEMBER_EPOCH."""
    t = k.create_topic("t", 2)
    g = k.name("g")
    j = joined(k, g, "a", t)
    e = j.member_epoch
    return [cgh(k, g, k.name("a"), e + 3, owned=owned_of(j)), cgh(k, g, k.name("a"), e - 1, owned=owned_of(j))]


@scenario("consumer_groups")
def cg_unknown_member_and_group(k):
    """A heartbeat (epoch 1) of a member the group does not have, and to a group that does not exist."""
    t = k.create_topic("t", 1)
    g = k.name("g")
    joined(k, g, "a", t)
    return [cgh(k, g, k.name("zz"), 1, owned=[]), cgh(k, k.name("nope"), k.name("a"), 1, owned=[])]


@scenario("consumer_groups")
def cg_invalid_requests(k):
    """INVALID_REQUEST: empty group id; a join without a rebalance timeout, with owned partitions, without a
    subscription; an epoch below -2; a v1 join without a member id; a static leave without an instance id."""
    t = k.create_topic("t", 1)
    g = k.name("g")
    m = k.name("m")
    return [cgh(k, "", m, 0, topics=[t]),
            cgh(k, g, m, 0, topics=[t], rebalance_ms=-1),
            cgh(k, g, m, 0, topics=[t], owned=[(k.metadata([t]).topics[0].topic_id, [0])]),
            cgh(k, g, m, 0),
            cgh(k, g, m, -3, owned=[]),
            cgh(k, g, "", 0, topics=[t]),
            cgh(k, g, m, -2)]


@scenario("consumer_groups")
def cg_unsupported_assignor_and_bad_regex(k):
    """A server assignor the broker does not have: UNSUPPORTED_ASSIGNOR; a regex RE2J refuses: INVALID_REGULAR_EXPRESSION."""
    t = k.create_topic("t", 1)
    g = k.name("g")
    return [cgh(k, g, k.name("a"), 0, topics=[t], assignor="sticky"),
            cgh(k, g, k.name("b"), 0, regex="(unclosed")]


@scenario("consumer_groups")
def cg_regex_subscription(k):
    """A regex subscription, once resolved and assigned: the matching topic's partitions (and not the other's);
    ConsumerGroupDescribe shows the regex (epochs left out: Kafka resolves in the background, one epoch more)."""
    t = k.create_topic("rx-t", 2)
    k.create_topic("other", 1)
    g, a = k.name("g"), k.name("a")
    r = cgh(k, g, a, 0, regex=f"{t.replace('.', '[.]')}|none-such")
    state = {"epoch": r.member_epoch, "owned": owned_of(r) or []}

    def assigned():
        resp = cgh(k, g, a, state["epoch"], owned=state["owned"])
        state["epoch"] = resp.member_epoch
        if resp.assignment is not None:
            state["owned"] = owned_of(resp)
        return state["owned"]
    got = k.wait_until(assigned, "the regex member's partitions")
    described = [(row[0], row[1], row[3], [m[3:7] for m in row[7]]) for row in cgd(k, g)]
    return [got, described]


@scenario("consumer_groups")
def cg_leave(k):
    """A member leaves (epoch -1): the answer echoes -1; the group is Empty at the next epoch; a second leave: UNKNOWN_MEMBER_ID."""
    t = k.create_topic("t", 2)
    g = k.name("g")
    joined(k, g, "a", t)
    return [cgh(k, g, k.name("a"), -1, owned=None), cgd(k, g), cgh(k, g, k.name("a"), -1, owned=None)]


@scenario("consumer_groups")
def cg_static_member_leaves_and_returns(k):
    """A static member leaves with -2 and returns under a new member id: the same partitions, no new group epoch;
    a third instance with the id while it is in: UNRELEASED_INSTANCE_ID; the old id: FENCED_INSTANCE_ID."""
    t = k.create_topic("t", 3)
    g, inst = k.name("g"), k.name("inst")
    j = joined(k, g, "a1", t, instance=inst)
    gone = cgh(k, g, k.name("a1"), -2, instance=inst, owned=None)
    back = joined(k, g, "a2", t, instance=inst)
    third = cgh(k, g, k.name("a3"), 0, topics=[t], instance=inst)
    old = cgh(k, g, k.name("a1"), j.member_epoch, instance=inst, owned=owned_of(j))
    return [j, gone, back, third, old, cgd(k, g)]


@scenario("consumer_groups")
def cg_describe_missing_and_classic(k):
    """ConsumerGroupDescribe of a group that does not exist and of a classic group: GROUP_ID_NOT_FOUND."""
    g = k.name("classic")
    join_member(k, g)
    return sorted(cgd(k, k.name("missing"), g))  # Kafka answers them by coordinator, not as asked


@scenario("consumer_groups")
def cg_other_group_apis_on_a_consumer_group(k):
    """DescribeGroups v5 and v6 of a consumer group; ListGroups v5 with and without a type filter."""
    t = k.create_topic("t", 1)
    g = k.name("g")
    joined(k, g, "a", t)
    lists = []
    for types in ((), ("consumer",), ("classic",)):
        resp = k.send(build(LIST_GROUPS, 5, states_filter=(), types_filter=types))
        lists.append(sorted([x.group_id, x.group_state, x.group_type, x.protocol_type]
                            for x in resp.groups if x.group_id == g))
    described = [k.send(build(DESCRIBE_GROUPS, v, groups=(g,), include_authorized_operations=False)).groups
                 for v in (5, 6)]
    return [described, lists]


def _commit(k, group, member, epoch, topic, *, version=9):
    m = mod(OFFSET_COMMIT, version)
    return k.send(build(OFFSET_COMMIT, version, group_id=group, generation_id_or_member_epoch=epoch,
                        generation_id=epoch, member_id=member, group_instance_id=None,
                        topics=(build_topic(m, topic),)))


def build_topic(m, topic):
    return m.OffsetCommitRequestTopic(name=topic, partitions=(m.OffsetCommitRequestPartition(
        partition_index=0, committed_offset=7, committed_leader_epoch=-1, committed_metadata=""),))


@scenario("consumer_groups")
def cg_offset_commit_and_fetch_with_member_epochs(k):
    """OffsetCommit v9: the member's epoch commits; an epoch before the partition was assigned, or a newer one:
    STALE_MEMBER_EPOCH (KIP-1251); an unknown member:
    UNKNOWN_MEMBER_ID; epoch -1 while the group has members: UNKNOWN_MEMBER_ID; v8 from a member:
    UNSUPPORTED_VERSION. OffsetFetch v9 with the member's epoch, an older one, and as an admin."""
    t = k.create_topic("t", 1)
    g, a = k.name("g"), k.name("a")
    e = joined(k, g, "a", t).member_epoch
    commits = [_commit(k, g, a, e, t), _commit(k, g, a, e - 1, t), _commit(k, g, a, e + 1, t),
               _commit(k, g, k.name("zz"), e, t), _commit(k, g, "", -1, t), _commit(k, g, a, e, t, version=8)]
    m = mod(OFFSET_FETCH, 9)

    def fetch(member, epoch):
        return k.send(m.OffsetFetchRequest(groups=(m.OffsetFetchRequestGroup(
            group_id=g, member_id=member, member_epoch=epoch,
            topics=(m.OffsetFetchRequestTopics(name=t, partition_indexes=(0,)),)),), require_stable=True))
    return [commits, [fetch(a, e), fetch(a, e - 1), fetch(None, -1)]]


@scenario("consumer_groups")
def cg_txn_offset_commit_with_member_epochs(k):
    """TxnOffsetCommit v3 with a member's group metadata: its epoch commits; an older epoch: ILLEGAL_GENERATION;
    an unknown member: UNKNOWN_MEMBER_ID."""
    t = k.create_topic("t", 1)
    g, a = k.name("g"), k.name("a")
    e = joined(k, g, "a", t).member_epoch
    tid, pid, epoch = begin(k, "tx", {t: [0]})
    k.add_offsets_to_txn(tid, pid, epoch, g)
    return [txn_offset_commit(k, tid, g, pid, epoch, t, 5, generation_id=e, member_id=a),
            txn_offset_commit(k, tid, g, pid, epoch, t, 5, generation_id=e - 1, member_id=a),
            txn_offset_commit(k, tid, g, pid, epoch, t, 5, generation_id=e + 1, member_id=a),
            txn_offset_commit(k, tid, g, pid, epoch, t, 5, generation_id=e, member_id=k.name("zz"))]


@scenario("consumer_groups")
def cg_empty_classic_group_becomes_a_consumer_group_and_back(k):
    """A classic group whose member left is joined with ConsumerGroupHeartbeat: converted, its offsets kept; once
    that member leaves, a classic JoinGroup converts it back."""
    t = k.create_topic("t", 1)
    g = k.name("g")
    j = join_member(k, g)
    leave(k, g, j.member_id)
    _commit(k, g, "", -1, t)
    c = joined(k, g, "a", t)
    gone = cgh(k, g, k.name("a"), -1, owned=None)
    back = join_member(k, g)
    m = mod(OFFSET_FETCH, 9)
    fetched = k.send(m.OffsetFetchRequest(groups=(m.OffsetFetchRequestGroup(
        group_id=g, member_id=None, member_epoch=-1,
        topics=(m.OffsetFetchRequestTopics(name=t, partition_indexes=(0,)),)),), require_stable=False))
    return [c, gone, back.error_code, fetched]


@scenario("consumer_groups")
def cg_delete_empty_consumer_group(k):
    """DeleteGroups of a consumer group with a member: NON_EMPTY_GROUP; once it left: deleted, then not found."""
    t = k.create_topic("t", 1)
    g = k.name("g")
    joined(k, g, "a", t)
    busy = k.send(build(DELETE_GROUPS, 2, groups_names=(g,)))
    cgh(k, g, k.name("a"), -1, owned=None)
    done = k.send(build(DELETE_GROUPS, 2, groups_names=(g,)))
    return [busy, done, cgd(k, g)]
