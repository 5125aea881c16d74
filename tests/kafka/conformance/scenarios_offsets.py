"""Committed offsets: OffsetCommit (simple and by a member, its errors), OffsetFetch v7/v8
(batched groups, all partitions, require_stable against a pending transactional commit),
committed leader epochs, OffsetDelete.

Invariants: a transaction's offsets are read only after the coordinator has finished its EndTxn
(:meth:`Conversation.wait_txn_complete`); groups are built with the helpers of
scenarios_groups (real consumer-protocol subscriptions, so OffsetDelete knows what a group reads).
"""

from __future__ import annotations

from .framework import OFFSET_COMMIT, OFFSET_DELETE, OFFSET_FETCH, TXN_OFFSET_COMMIT, mod
from .scenarios_groups import (build, delete_groups, describe, join, join_member, leave, make, scenario, sync,
                               second_member_joining, simple_commit, stable_member, joined)


def commit(k, group: str, offsets: dict[tuple[str, int], int], *, generation: int = -1, member_id: str = "",
           instance: str | None = None, metadata: str | None = "", leader_epoch: int = -1, version: int = 9):
    """OffsetCommit of {(topic, partition): offset}."""
    m = mod(OFFSET_COMMIT, version)
    topics: dict[str, list] = {}
    for (t, p), o in offsets.items():
        topics.setdefault(t, []).append(make(
            m.OffsetCommitRequestPartition, partition_index=p, committed_offset=o, committed_leader_epoch=leader_epoch,
            committed_metadata=metadata, commit_timestamp=-1))
    return k.send(build(OFFSET_COMMIT, version, group_id=group, generation_id_or_member_epoch=generation,
                        member_id=member_id, group_instance_id=instance, retention_time_ms=-1,
                        topics=tuple(m.OffsetCommitRequestTopic(name=t, partitions=tuple(ps))
                                     for t, ps in topics.items())))


def fetch_offsets(k, group: str, topics: dict[str, list[int]] | None, *, require_stable: bool = False,
                  version: int = 8):
    """OffsetFetch of one group: v8 (groups batched) or v7 (one group)."""
    m = mod(OFFSET_FETCH, version)
    if version >= 8:
        return fetch_groups(k, {group: topics}, require_stable=require_stable, version=version)
    ts = None if topics is None else tuple(m.OffsetFetchRequestTopic(name=t, partition_indexes=tuple(ps))
                                           for t, ps in topics.items())
    return _sorted(k.send(build(OFFSET_FETCH, version, group_id=group, topics=ts, require_stable=require_stable)))


def fetch_groups(k, groups: dict[str, dict[str, list[int]] | None], *, require_stable: bool = False,
                 version: int = 8):
    m = mod(OFFSET_FETCH, version)
    return _sorted(k.send(build(OFFSET_FETCH, version, require_stable=require_stable, groups=tuple(
        m.OffsetFetchRequestGroup(group_id=g, topics=None if ts is None else tuple(
            m.OffsetFetchRequestTopics(name=t, partition_indexes=tuple(ps)) for t, ps in ts.items()))
        for g, ts in groups.items()))))


def _sorted(resp):
    """Topics by name and partitions by index (an all-partitions answer comes from a map)."""
    import dataclasses

    def topics(ts):
        return tuple(sorted((dataclasses.replace(t, partitions=tuple(sorted(t.partitions,
                                                                            key=lambda p: p.partition_index)))
                             for t in ts), key=lambda t: t.name))
    if hasattr(resp, "groups"):
        return dataclasses.replace(resp, groups=tuple(dataclasses.replace(g, topics=topics(g.topics))
                                                      for g in resp.groups))
    return dataclasses.replace(resp, topics=topics(resp.topics))


def offset_delete(k, group: str, topics: dict[str, list[int]]):
    m = mod(OFFSET_DELETE, 0)
    return k.send(m.OffsetDeleteRequest(group_id=group, topics=tuple(
        m.OffsetDeleteRequestTopic(name=t, partitions=tuple(m.OffsetDeleteRequestPartition(partition_index=p)
                                                            for p in ps)) for t, ps in topics.items())))


def txn_offset_commit(k, txn_id: str, pid: int, epoch: int, group: str, offsets: dict[tuple[str, int], int],
                      *, version: int = 3):
    m = mod(TXN_OFFSET_COMMIT, version)
    topics: dict[str, list] = {}
    for (t, p), o in offsets.items():
        topics.setdefault(t, []).append(m.TxnOffsetCommitRequestPartition(
            partition_index=p, committed_offset=o, committed_leader_epoch=-1, committed_metadata=""))
    return k.send(build(TXN_OFFSET_COMMIT, version, transactional_id=txn_id, group_id=group, producer_id=pid,
                        producer_epoch=epoch, generation_id=-1, member_id="", group_instance_id=None,
                        topics=tuple(m.TxnOffsetCommitRequestTopic(name=t, partitions=tuple(ps))
                                     for t, ps in topics.items())))


def pending_txn_commit(k, group: str, topic: str, offset: int):
    """A transaction that has committed ``offset`` for ``group`` and is still open:
    returns (transactional id, producer id, epoch, [answers])."""
    txn = k.name("txn")
    init = k.init_producer_id(txn)
    pid, epoch = init.producer_id, init.producer_epoch
    add = k.add_offsets_to_txn(txn, pid, epoch, group)
    tc = txn_offset_commit(k, txn, pid, epoch, group, {(topic, 0): offset})
    return txn, pid, epoch, [init, add, tc]


# ---------------------------------------------------------------------- OffsetCommit


@scenario("offsets")
def commit_simple(k):
    """OffsetCommit with generation -1 and no member to a new group, then OffsetFetch v8."""
    t = k.create_topic("t")
    g = k.name("g")
    return [commit(k, g, {(t, 0): 5}, metadata="meta"), fetch_offsets(k, g, {t: [0]}), describe(k, g)]


@scenario("offsets")
def commit_by_member(k):
    """OffsetCommit by the member of a Stable group with its member id and generation."""
    t = k.create_topic("t")
    g = k.name("g")
    j, _ = stable_member(k, g)
    return [commit(k, g, {(t, 0): 3}, generation=j.generation_id, member_id=j.member_id), fetch_offsets(k, g, {t: [0]})]


@scenario("offsets")
def commit_unknown_member(k):
    """OffsetCommit to a Stable group with an unknown member id: UNKNOWN_MEMBER_ID."""
    t = k.create_topic("t")
    g = k.name("g")
    j, _ = stable_member(k, g)
    return [commit(k, g, {(t, 0): 3}, generation=j.generation_id, member_id="never-given"),
            fetch_offsets(k, g, {t: [0]})]


@scenario("offsets")
def commit_stale_generation(k):
    """OffsetCommit with the generation before the current one: ILLEGAL_GENERATION."""
    t = k.create_topic("t")
    g = k.name("g")
    j, _ = stable_member(k, g)
    again = join(k, g, j.member_id, topics=("t", "u"))  # new metadata: generation 2
    return [again.generation_id, commit(k, g, {(t, 0): 3}, generation=j.generation_id, member_id=j.member_id)]


@scenario("offsets")
def commit_generation_minus_one_to_active_group(k):
    """OffsetCommit with generation -1 and no member to a group that has a member."""
    t = k.create_topic("t")
    g = k.name("g")
    stable_member(k, g)
    return [commit(k, g, {(t, 0): 3}), fetch_offsets(k, g, {t: [0]})]


@scenario("offsets")
def commit_completing_rebalance(k):
    """OffsetCommit by a member after JoinGroup, before SyncGroup (CompletingRebalance)."""
    t = k.create_topic("t")
    g = k.name("g")
    j = join_member(k, g)
    return commit(k, g, {(t, 0): 3}, generation=j.generation_id, member_id=j.member_id)


@scenario("offsets")
def commit_preparing_rebalance(k):
    """OffsetCommit by the first member while a second member's join rebalances the group."""
    t = k.create_topic("t")
    g = k.name("g")
    j, _ = stable_member(k, g)
    first, th, result = second_member_joining(k, g)
    answer = commit(k, g, {(t, 0): 3}, generation=j.generation_id, member_id=j.member_id)
    join(k, g, j.member_id)
    joined(th, result, "second join")
    return [answer, fetch_offsets(k, g, {t: [0]})]


@scenario("offsets")
def commit_static_member(k):
    """OffsetCommit by a static member with its instance id: NONE; with another member id: FENCED_INSTANCE_ID."""
    t = k.create_topic("t")
    g = k.name("g")
    j, _ = stable_member(k, g, instance="i1")
    return [commit(k, g, {(t, 0): 3}, generation=j.generation_id, member_id=j.member_id, instance="i1"),
            commit(k, g, {(t, 0): 4}, generation=j.generation_id, member_id="never-given", instance="i1"),
            fetch_offsets(k, g, {t: [0]})]


@scenario("offsets")
def commit_negative_offset(k):
    """OffsetCommit of offset -1 and -5: stored as given (Kafka does not check the value)."""
    t = k.create_topic("t", partitions=2)
    g = k.name("g")
    return [commit(k, g, {(t, 0): -1, (t, 1): -5}), fetch_offsets(k, g, {t: [0, 1]})]


@scenario("offsets")
def commit_beyond_log_end(k):
    """OffsetCommit of an offset past the log end (1000 on an empty partition): stored as given."""
    t = k.create_topic("t")
    g = k.name("g")
    return [commit(k, g, {(t, 0): 1000}), fetch_offsets(k, g, {t: [0]})]


@scenario("offsets")
def commit_v2_retention_time(k):
    """OffsetCommit v2 (with retention_time_ms) and OffsetFetch v1: the old versions still commit and read."""
    t = k.create_topic("t")
    g = k.name("g")
    return [commit(k, g, {(t, 0): 7}, version=2), fetch_offsets(k, g, {t: [0]}, version=1)]


@scenario("offsets")
def fetch_after_delete_groups(k):
    """OffsetFetch after DeleteGroups: the offsets are gone (-1)."""
    t = k.create_topic("t")
    g = k.name("g")
    commit(k, g, {(t, 0): 5})
    delete_groups(k, g)
    return fetch_offsets(k, g, {t: [0]})


@scenario("offsets")
def require_stable_other_group_pending(k):
    """A transaction's offset pending for group a: OffsetFetch require_stable of group b is unaffected."""
    t = k.create_topic("t")
    commit(k, k.name("b"), {(t, 0): 2})
    txn, pid, epoch, _ = pending_txn_commit(k, k.name("a"), t, 9)
    out = fetch_groups(k, {k.name("a"): {t: [0]}, k.name("b"): {t: [0]}}, require_stable=True)
    k.end_txn(txn, pid, epoch, False)
    k.wait_txn_complete(txn)
    return out


@scenario("offsets")
def offset_delete_then_commit(k):
    """OffsetDelete then OffsetCommit of the same partition: the new offset."""
    t = k.create_topic("t")
    g = k.name("g")
    commit(k, g, {(t, 0): 1})
    return [offset_delete(k, g, {t: [0]}), commit(k, g, {(t, 0): 2}), fetch_offsets(k, g, {t: [0]})]


@scenario("offsets")
def commit_metadata_too_large(k):
    """OffsetCommit metadata of 4097 characters (offset.metadata.max.bytes 4096): OFFSET_METADATA_TOO_LARGE; 4096 fits."""
    t = k.create_topic("t", partitions=2)
    g = k.name("g")
    return [commit(k, g, {(t, 0): 1}, metadata="x" * 4097), commit(k, g, {(t, 1): 1}, metadata="x" * 4096),
            [(p.partition_index, p.committed_offset, len(p.metadata or ""))
             for p in fetch_offsets(k, g, {t: [0, 1]}).groups[0].topics[0].partitions]]


@scenario("offsets")
def commit_null_metadata(k):
    """OffsetCommit with null metadata: fetched back as ""."""
    t = k.create_topic("t")
    g = k.name("g")
    return [commit(k, g, {(t, 0): 1}, metadata=None), fetch_offsets(k, g, {t: [0]})]


@scenario("offsets")
def commit_unknown_topic(k):
    """OffsetCommit for a topic that does not exist: UNKNOWN_TOPIC_OR_PARTITION."""
    g = k.name("g")
    return [commit(k, g, {(k.name("missing"), 0): 1}), fetch_offsets(k, g, {k.name("missing"): [0]})]


@scenario("offsets")
def commit_unknown_partition(k):
    """OffsetCommit for partition 5 of a one-partition topic: UNKNOWN_TOPIC_OR_PARTITION; partition 0 beside it commits."""
    t = k.create_topic("t")
    g = k.name("g")
    return [commit(k, g, {(t, 0): 1, (t, 5): 1}), fetch_offsets(k, g, {t: [0, 5]})]


@scenario("offsets")
def commit_to_deleted_group(k):
    """OffsetCommit with generation -1 to a group DeleteGroups removed: it forms again, Empty."""
    t = k.create_topic("t")
    g = k.name("g")
    commit(k, g, {(t, 0): 1})
    return [delete_groups(k, g), commit(k, g, {(t, 0): 2}), fetch_offsets(k, g, {t: [0]}),
            describe(k, g).groups[0].group_state]


@scenario("offsets")
def commit_member_to_deleted_group(k):
    """OffsetCommit with a member and generation of a group since deleted."""
    t = k.create_topic("t")
    g = k.name("g")
    j, _ = stable_member(k, g)
    leave(k, g, j.member_id)
    delete_groups(k, g)
    return commit(k, g, {(t, 0): 2}, generation=j.generation_id, member_id=j.member_id)


@scenario("offsets")
def commit_member_to_unknown_group_v8(k):
    """OffsetCommit v8 with a member and generation to a group that does not exist: ILLEGAL_GENERATION (v9+: GROUP_ID_NOT_FOUND)."""
    t = k.create_topic("t")
    return commit(k, k.name("g"), {(t, 0): 2}, generation=1, member_id="never-given", version=8)


@scenario("offsets")
def commit_unknown_topic_creates_no_group(k):
    """OffsetCommit of only unknown partitions: the group coordinator is not asked, no group appears."""
    t = k.create_topic("t")
    g = k.name("g")
    return [commit(k, g, {(t, 3): 1}), describe(k, g)]


@scenario("offsets")
def commit_empty_group_id(k):
    """OffsetCommit and OffsetFetch with group id "" (old consumers' group)."""
    t = k.create_topic("t")
    return [commit(k, "", {(t, 0): 1}), fetch_offsets(k, "", {t: [0]})]


# ---------------------------------------------------------------------- OffsetFetch


@scenario("offsets")
def fetch_v7_single_group(k):
    """OffsetFetch v7: a committed partition and one never committed (-1)."""
    t = k.create_topic("t", partitions=2)
    g = k.name("g")
    commit(k, g, {(t, 0): 4})
    return fetch_offsets(k, g, {t: [0, 1]}, version=7)


@scenario("offsets")
def fetch_v8_batched_groups(k):
    """OffsetFetch v8 of two groups with offsets and one unknown group in one request."""
    t = k.create_topic("t", partitions=2)
    commit(k, k.name("a"), {(t, 0): 1})
    commit(k, k.name("b"), {(t, 1): 2})
    return fetch_groups(k, {k.name("a"): {t: [0, 1]}, k.name("b"): {t: [0, 1]}, k.name("unknown"): {t: [0]}})


@scenario("offsets")
def fetch_all_partitions(k):
    """OffsetFetch with topics=null (v7 and v8): every committed partition of the group."""
    t = k.create_topic("t", partitions=3)
    u = k.create_topic("u")
    g = k.name("g")
    commit(k, g, {(t, 0): 1, (t, 2): 3, (u, 0): 7})
    return [fetch_offsets(k, g, None, version=7), fetch_offsets(k, g, None, version=8)]


@scenario("offsets")
def fetch_all_partitions_unknown_group(k):
    """OffsetFetch v8 with topics=null of a group that does not exist: no topics."""
    return fetch_offsets(k, k.name("g"), None)


@scenario("offsets")
def fetch_unknown_group(k):
    """OffsetFetch v7 of a group that does not exist: -1 per partition."""
    t = k.create_topic("t")
    return fetch_offsets(k, k.name("g"), {t: [0]}, version=7)


@scenario("offsets")
def fetch_unknown_topic(k):
    """OffsetFetch v8 of a topic that does not exist, in a group that has offsets."""
    t = k.create_topic("t")
    g = k.name("g")
    commit(k, g, {(t, 0): 1})
    return fetch_offsets(k, g, {k.name("missing"): [0]})


@scenario("offsets")
def committed_leader_epoch(k):
    """OffsetCommit with leader epoch 7 and with -1: OffsetFetch gives each back."""
    t = k.create_topic("t", partitions=2)
    g = k.name("g")
    commit(k, g, {(t, 0): 1}, leader_epoch=7)
    commit(k, g, {(t, 1): 1}, leader_epoch=-1)
    return fetch_offsets(k, g, {t: [0, 1]})


@scenario("offsets")
def require_stable_pending_txn(k):
    """A transaction's TxnOffsetCommit pending: OffsetFetch require_stable gives UNSTABLE_OFFSET_COMMIT (v7 and v8)."""
    t = k.create_topic("t", partitions=2)
    g = k.name("g")
    commit(k, g, {(t, 0): 1, (t, 1): 1})
    txn, pid, epoch, answers = pending_txn_commit(k, g, t, 9)
    out = answers + [fetch_offsets(k, g, {t: [0, 1]}, require_stable=True, version=7),
                     fetch_offsets(k, g, {t: [0, 1]}, require_stable=True, version=8)]
    k.end_txn(txn, pid, epoch, False)
    k.wait_txn_complete(txn)
    return out


@scenario("offsets")
def require_stable_pending_all_partitions(k):
    """A pending transactional offset: OffsetFetch v8 require_stable with topics=null."""
    t = k.create_topic("t")
    g = k.name("g")
    commit(k, g, {(t, 0): 1})
    txn, pid, epoch, _ = pending_txn_commit(k, g, t, 9)
    out = fetch_offsets(k, g, None, require_stable=True)
    k.end_txn(txn, pid, epoch, False)
    k.wait_txn_complete(txn)
    return out


@scenario("offsets")
def pending_txn_without_require_stable(k):
    """A pending transactional offset: OffsetFetch without require_stable gives the last committed one."""
    t = k.create_topic("t")
    g = k.name("g")
    commit(k, g, {(t, 0): 1})
    txn, pid, epoch, _ = pending_txn_commit(k, g, t, 9)
    out = fetch_offsets(k, g, {t: [0]})
    k.end_txn(txn, pid, epoch, False)
    k.wait_txn_complete(txn)
    return out


@scenario("offsets")
def require_stable_after_commit(k):
    """The transaction commits: OffsetFetch require_stable gives its offset."""
    t = k.create_topic("t")
    g = k.name("g")
    commit(k, g, {(t, 0): 1})
    txn, pid, epoch, _ = pending_txn_commit(k, g, t, 9)
    end = k.end_txn(txn, pid, epoch, True)
    k.wait_txn_complete(txn)
    return [end, fetch_offsets(k, g, {t: [0]}, require_stable=True)]


@scenario("offsets")
def require_stable_after_abort(k):
    """The transaction aborts: OffsetFetch require_stable gives the offset committed before it."""
    t = k.create_topic("t")
    g = k.name("g")
    commit(k, g, {(t, 0): 1})
    txn, pid, epoch, _ = pending_txn_commit(k, g, t, 9)
    end = k.end_txn(txn, pid, epoch, False)
    k.wait_txn_complete(txn)
    return [end, fetch_offsets(k, g, {t: [0]}, require_stable=True)]


# ---------------------------------------------------------------------- OffsetDelete


@scenario("offsets")
def offset_delete_subscribed(k):
    """OffsetDelete of a topic a Stable consumer group subscribes to: GROUP_SUBSCRIBED_TO_TOPIC."""
    t = k.create_topic("t")
    g = k.name("g")
    j, _ = stable_member(k, g)
    commit(k, g, {(t, 0): 1}, generation=j.generation_id, member_id=j.member_id)
    return [offset_delete(k, g, {t: [0]}), fetch_offsets(k, g, {t: [0]})]


@scenario("offsets")
def offset_delete_unsubscribed_topic(k):
    """OffsetDelete of a topic a Stable consumer group does not subscribe to: deleted."""
    t = k.create_topic("t")
    u = k.create_topic("u")
    g = k.name("g")
    j, _ = stable_member(k, g)
    commit(k, g, {(u, 0): 1}, generation=j.generation_id, member_id=j.member_id)
    return [offset_delete(k, g, {u: [0]}), fetch_offsets(k, g, {t: [0], u: [0]})]


@scenario("offsets")
def offset_delete_non_consumer_group(k):
    """OffsetDelete in a Stable group of protocol type "connect" (subscriptions unknown to the coordinator)."""
    t = k.create_topic("t")
    g = k.name("g")
    j = join_member(k, g, protocol_type="connect", protocols=[("default", b"anything")])
    sync(k, g, j.generation_id, j.member_id, {j.member_id: b""}, protocol_type="connect", protocol_name="default")
    commit(k, g, {(t, 0): 1}, generation=j.generation_id, member_id=j.member_id)
    return [offset_delete(k, g, {t: [0]}), fetch_offsets(k, g, {t: [0]})]


@scenario("offsets")
def offset_delete_unparsable_subscription(k):
    """OffsetDelete in a Stable consumer group whose member's subscription bytes do not parse."""
    t = k.create_topic("t")
    g = k.name("g")
    j = join_member(k, g, protocols=[("range", b"\x00")])
    sync(k, g, j.generation_id, j.member_id, {j.member_id: b""})
    commit(k, g, {(t, 0): 1}, generation=j.generation_id, member_id=j.member_id)
    return [offset_delete(k, g, {t: [0]}), fetch_offsets(k, g, {t: [0]})]


@scenario("offsets")
def offset_delete_empty_group(k):
    """OffsetDelete in an Empty group: NONE, the offset is gone."""
    t = k.create_topic("t", partitions=2)
    g = k.name("g")
    commit(k, g, {(t, 0): 1, (t, 1): 2})
    return [offset_delete(k, g, {t: [0]}), fetch_offsets(k, g, {t: [0, 1]})]


@scenario("offsets")
def offset_delete_unknown_group(k):
    """OffsetDelete in a group that does not exist: GROUP_ID_NOT_FOUND."""
    t = k.create_topic("t")
    return offset_delete(k, k.name("g"), {t: [0]})


@scenario("offsets")
def offset_delete_unknown_partition(k):
    """OffsetDelete of a partition the topic does not have, and of a topic that does not exist, in an Empty group."""
    t = k.create_topic("t")
    g = k.name("g")
    commit(k, g, {(t, 0): 1})
    return offset_delete(k, g, {t: [3], k.name("missing"): [0]})
