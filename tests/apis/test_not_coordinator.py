"""NOT_COORDINATOR from the group and transaction APIs in a cluster of nodes (oncelog.cluster):
a group or transactional id another node coordinates is refused before this node's coordinator
is asked, so nothing of it is made or stored here; the ACL checks come first (a denied
principal gets the authorization error, as Kafka authorizes before routing to a coordinator);
the keys this node coordinates, also in the same multi-key request, are served as usual. On a
single node every request is served as before.

The broker under test is node 1 of a 2-node cluster, in-process, without node 2 running: what
is asked of node 2's keys never leaves node 1.
"""

from __future__ import annotations

import dataclasses
import datetime
import uuid

import pytest

from oncelog.cluster import Placement
from oncelog.errors import TransactionalIdNotFound

from .harness import E, Api, request_module, run, run_with_authorizer

OFFSET_COMMIT, OFFSET_FETCH, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 8, 9, 11, 12, 13, 14
DESCRIBE_GROUPS, INIT_PRODUCER_ID, ADD_OFFSETS_TO_TXN, END_TXN, DELETE_GROUPS = 15, 22, 25, 26, 42
OFFSET_DELETE, DESCRIBE_TRANSACTIONS, CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE = 47, 65, 68, 69

GROUP, TXN = 0, 1
TOPIC = "t"
SECONDS = datetime.timedelta(seconds=10)
CLUSTER = {"nodes": 2, "node_id": 1}


def _key(broker, key_type: int, node: int, prefix: str) -> str:
    """A group (or transactional) id that node ``node`` of a 2-node cluster coordinates, by
    Kafka's placement (also on a single-node broker, which then coordinates it anyway)."""
    internal = broker.offsets_topic if key_type == GROUP else broker.txn_topic
    placement = Placement(2, 1)
    for i in range(1000):
        key = f"{prefix}{i}"
        if placement.leader(internal.name, internal.partition_for(key)) == node:
            if broker.placement.clustered:
                assert broker.coordinator_node(key_type, key) == node
            return key
    raise AssertionError("no key found")


def _keys(api: Api):
    """(local group, remote group, local transactional id, remote transactional id)."""
    b = api.broker
    return _key(b, GROUP, 1, "g-"), _key(b, GROUP, 2, "g-"), _key(b, TXN, 1, "tx-"), _key(b, TXN, 2, "tx-")


def _no_group(api: Api, gid: str) -> None:
    assert api.broker.groups.describe(gid) is None
    assert api.broker.groups.fetch_offsets(gid, None) == {}


def _no_txn(api: Api, tid: str) -> None:
    with pytest.raises(TransactionalIdNotFound):
        api.broker.txn.describe(tid)


# ---------------------------------------------------------------------- the requests


async def join(api, gid, version=9):
    m = request_module(JOIN_GROUP, version)
    return await api.call(JOIN_GROUP, version, m.JoinGroupRequest(**_known(
        m.JoinGroupRequest, group_id=gid, session_timeout=SECONDS, rebalance_timeout=SECONDS, member_id="",
        group_instance_id=None, protocol_type="consumer",
        protocols=(m.JoinGroupRequestProtocol(name="range", metadata=b""),), reason=None)))


async def sync(api, gid):
    m = request_module(SYNC_GROUP, 5)
    return await api.call(SYNC_GROUP, 5, m.SyncGroupRequest(
        group_id=gid, generation_id=1, member_id="m", group_instance_id=None, protocol_type="consumer",
        protocol_name="range", assignments=(m.SyncGroupRequestAssignment(member_id="m", assignment=b"a"),)))


async def heartbeat(api, gid):
    m = request_module(HEARTBEAT, 4)
    return await api.call(HEARTBEAT, 4, m.HeartbeatRequest(group_id=gid, generation_id=1, member_id="m",
                                                           group_instance_id=None))


async def leave(api, gid, version=5):
    m = request_module(LEAVE_GROUP, version)
    if version < 3:
        return await api.call(LEAVE_GROUP, version, m.LeaveGroupRequest(group_id=gid, member_id="m"))
    return await api.call(LEAVE_GROUP, version, m.LeaveGroupRequest(group_id=gid, members=(
        m.MemberIdentity(member_id="m", group_instance_id=None, reason=None),)))


async def offset_commit(api, gid):
    """Partition 0 (exists) and 9 (does not): {partition: code}."""
    m = request_module(OFFSET_COMMIT, 9)
    resp = await api.call(OFFSET_COMMIT, 9, m.OffsetCommitRequest(
        group_id=gid, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=(m.OffsetCommitRequestTopic(name=TOPIC, partitions=tuple(
            m.OffsetCommitRequestPartition(partition_index=p, committed_offset=5, committed_leader_epoch=-1,
                                           committed_metadata="") for p in (0, 9))),)))
    return {p.partition_index: p.error_code for t in resp.topics for p in t.partitions}


async def offset_fetch(api, gid, version=7):
    m = request_module(OFFSET_FETCH, version)
    return await api.call(OFFSET_FETCH, version, m.OffsetFetchRequest(**_known(
        m.OffsetFetchRequest, group_id=gid, require_stable=False,
        topics=(m.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=(0,)),))))


async def offset_fetch_groups(api, gids):
    m = request_module(OFFSET_FETCH, 8)
    resp = await api.call(OFFSET_FETCH, 8, m.OffsetFetchRequest(require_stable=False, groups=tuple(
        m.OffsetFetchRequestGroup(group_id=g, topics=(m.OffsetFetchRequestTopics(name=TOPIC, partition_indexes=(0,)),))
        for g in gids)))
    return {g.group_id: g for g in resp.groups}


async def offset_delete(api, gid):
    m = request_module(OFFSET_DELETE, 0)
    return await api.call(OFFSET_DELETE, 0, m.OffsetDeleteRequest(group_id=gid, topics=(
        m.OffsetDeleteRequestTopic(name=TOPIC, partitions=(m.OffsetDeleteRequestPartition(partition_index=0),)),)))


async def describe_groups(api, gids, version=5):
    m = request_module(DESCRIBE_GROUPS, version)
    resp = await api.call(DESCRIBE_GROUPS, version, m.DescribeGroupsRequest(**_known(
        m.DescribeGroupsRequest, groups=tuple(gids), include_authorized_operations=True)))
    return {g.group_id: g for g in resp.groups}


async def delete_groups(api, gids):
    m = request_module(DELETE_GROUPS, 2)
    resp = await api.call(DELETE_GROUPS, 2, m.DeleteGroupsRequest(groups_names=tuple(gids)))
    return [(r.group_id, r.error_code) for r in resp.results]


async def consumer_heartbeat(api, gid):
    m = request_module(CONSUMER_GROUP_HEARTBEAT, 1)
    return await api.call(CONSUMER_GROUP_HEARTBEAT, 1, m.ConsumerGroupHeartbeatRequest(
        group_id=gid, member_id=str(uuid.uuid4()), member_epoch=0, instance_id=None, rack_id=None,
        rebalance_timeout=SECONDS, subscribed_topic_names=(TOPIC,), subscribed_topic_regex=None,
        server_assignor=None, topic_partitions=()))


async def consumer_describe(api, gids):
    m = request_module(CONSUMER_GROUP_DESCRIBE, 1)
    resp = await api.call(CONSUMER_GROUP_DESCRIBE, 1, m.ConsumerGroupDescribeRequest(
        group_ids=tuple(gids), include_authorized_operations=False))
    return {g.group_id: g for g in resp.groups}


async def init_producer_id(api, tid):
    m = request_module(INIT_PRODUCER_ID, 4)
    return await api.call(INIT_PRODUCER_ID, 4, m.InitProducerIdRequest(
        transactional_id=tid, transaction_timeout=SECONDS, producer_id=-1, producer_epoch=-1))


async def describe_transactions(api, tids):
    m = request_module(DESCRIBE_TRANSACTIONS, 0)
    resp = await api.call(DESCRIBE_TRANSACTIONS, 0, m.DescribeTransactionsRequest(transactional_ids=tuple(tids)))
    return {t.transactional_id: t for t in resp.transaction_states}


def _known(cls, **values):
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in values.items() if k in names}


# ---------------------------------------------------------------------- the group APIs


def test_join_sync_heartbeat_leave_answer_not_coordinator(tmp_path):
    async def scenario(api: Api):
        local, remote, _, _ = _keys(api)
        for version in (0, 4, 9):
            r = await join(api, remote, version)
            assert (r.error_code, r.generation_id, r.member_id, r.members) == (E.not_coordinator, -1, "", ())
        assert (await join(api, local)).error_code == E.member_id_required  # served as usual
        r = await sync(api, remote)
        assert (r.error_code, r.assignment, r.protocol_type, r.protocol_name) == (E.not_coordinator, b"", None, None)
        assert (await heartbeat(api, remote)).error_code == E.not_coordinator
        r = await leave(api, remote)
        assert (r.error_code, r.members) == (E.not_coordinator, ())
        assert (await leave(api, remote, version=0)).error_code == E.not_coordinator
        _no_group(api, remote)
        assert api.broker.groups.describe(local) is not None

    run(tmp_path, scenario, **CLUSTER)


def test_offset_commit_fetch_and_delete_answer_not_coordinator(tmp_path):
    async def scenario(api: Api):
        local, remote, _, _ = _keys(api)
        await api.create_topic(TOPIC)
        # The unknown partition is refused first, as ever; the group's partitions get NOT_COORDINATOR.
        assert await offset_commit(api, remote) == {9: E.unknown_topic_or_partition, 0: E.not_coordinator}
        assert await offset_commit(api, local) == {9: E.unknown_topic_or_partition, 0: E.none}
        r = await offset_fetch(api, remote)
        assert (r.error_code, r.topics) == (E.not_coordinator, ())
        r = await offset_fetch(api, remote, version=1)  # no top-level error: on each partition
        assert [(p.partition_index, p.error_code, p.committed_offset) for t in r.topics for p in t.partitions] == [
            (0, E.not_coordinator, -1)]
        r = await offset_fetch(api, local)
        assert r.error_code == E.none and r.topics[0].partitions[0].committed_offset == 5
        groups = await offset_fetch_groups(api, [local, remote])
        assert (groups[remote].error_code, groups[remote].topics) == (E.not_coordinator, ())
        assert groups[local].error_code == E.none and groups[local].topics[0].partitions[0].committed_offset == 5
        r = await offset_delete(api, remote)
        assert (r.error_code, r.topics) == (E.not_coordinator, ())
        r = await offset_delete(api, local)
        assert r.error_code == E.none and r.topics[0].partitions[0].error_code == E.none
        _no_group(api, remote)

    run(tmp_path, scenario, **CLUSTER)


def test_describe_and_delete_groups_answer_not_coordinator_per_group(tmp_path):
    async def scenario(api: Api):
        local, remote, _, _ = _keys(api)
        await api.create_topic(TOPIC)
        assert await offset_commit(api, local) == {9: E.unknown_topic_or_partition, 0: E.none}
        for version in (5, 6):
            described = await describe_groups(api, [remote, local], version)
            r = described[remote]
            assert (r.error_code, r.group_state, r.protocol_type, r.members, r.authorized_operations) == (
                E.not_coordinator, "", "", (), -2147483648)
            assert (described[local].error_code, described[local].group_state) == (E.none, "Empty")
        assert await delete_groups(api, [remote, local]) == [(remote, E.not_coordinator), (local, E.none)]
        assert await delete_groups(api, [remote]) == [(remote, E.not_coordinator)]
        _no_group(api, remote)
        assert api.broker.groups.describe(local) is None  # deleted

    run(tmp_path, scenario, **CLUSTER)


def test_consumer_group_heartbeat_and_describe_answer_not_coordinator(tmp_path):
    async def scenario(api: Api):
        local, remote, _, _ = _keys(api)
        await api.create_topic(TOPIC)
        r = await consumer_heartbeat(api, remote)
        assert (r.error_code, r.member_id, r.member_epoch, r.assignment) == (E.not_coordinator, None, 0, None)
        assert r.error_message
        r = await consumer_heartbeat(api, local)
        assert r.error_code == E.none and r.member_epoch > 0
        described = await consumer_describe(api, [remote, local])
        r = described[remote]
        assert (r.error_code, r.error_message, r.group_state, r.members) == (E.not_coordinator, None, "", ())
        assert described[local].error_code == E.none and len(described[local].members) == 1
        _no_group(api, remote)

    run(tmp_path, scenario, **CLUSTER)


# ---------------------------------------------------------------------- the transaction APIs


def test_transaction_apis_answer_not_coordinator(tmp_path):
    async def scenario(api: Api):
        local_g, _, local, remote = _keys(api)
        r = await init_producer_id(api, remote)
        assert (r.error_code, r.producer_id, r.producer_epoch) == (E.not_coordinator, -1, -1)
        pid, epoch = await api.producer(local)  # served as usual
        assert (await init_producer_id(api, None)).error_code == E.none  # idempotent: any node
        assert await api.add_offsets(remote, pid, epoch, local_g) == E.not_coordinator
        assert await api.add_offsets(remote, pid, epoch, local_g, version=0) == E.not_coordinator
        assert await api.add_offsets(local, pid, epoch, local_g) == E.none
        r = await api.end_txn(remote, pid, epoch, True)
        assert r.error_code == E.not_coordinator
        r = await api.end_txn(remote, pid, epoch, True, version=5)
        assert (r.error_code, r.producer_id, r.producer_epoch) == (E.not_coordinator, -1, -1)
        assert (await api.end_txn(local, pid, epoch, False)).error_code == E.none
        described = await describe_transactions(api, [remote, local])
        r = described[remote]
        assert (r.error_code, r.transaction_state, r.producer_id, r.topics) == (E.not_coordinator, "", 0, ())
        assert (described[local].error_code, described[local].producer_id) == (E.none, pid)
        _no_txn(api, remote)

    run(tmp_path, scenario, **CLUSTER)


# ---------------------------------------------------------------------- ACLs first


ALICE, ADMIN = "User:alice", "User:admin"


def test_a_denied_principal_gets_the_authorization_error_not_not_coordinator(tmp_path):
    async def scenario(api: Api):
        _, remote, _, remote_txn = _keys(api)
        alice, admin = api.as_principal(ALICE), api.as_principal(ADMIN)
        await admin.create_topic(TOPIC)
        for caller, group_code, txn_code in ((alice, E.group_authorization_failed,
                                              E.transactional_id_authorization_failed),
                                             (admin, E.not_coordinator, E.not_coordinator)):
            assert (await join(caller, remote)).error_code == group_code
            assert (await sync(caller, remote)).error_code == group_code
            assert (await heartbeat(caller, remote)).error_code == group_code
            assert (await leave(caller, remote)).error_code == group_code
            assert (await offset_commit(caller, remote))[0] == group_code
            assert (await offset_fetch(caller, remote)).error_code == group_code
            assert (await offset_fetch_groups(caller, [remote]))[remote].error_code == group_code
            assert (await offset_delete(caller, remote)).error_code == group_code
            assert (await describe_groups(caller, [remote]))[remote].error_code == group_code
            assert await delete_groups(caller, [remote]) == [(remote, group_code)]
            assert (await consumer_heartbeat(caller, remote)).error_code == group_code
            assert (await consumer_describe(caller, [remote]))[remote].error_code == group_code
            assert (await init_producer_id(caller, remote_txn)).error_code == txn_code
            assert await caller.add_offsets(remote_txn, 1000, 0, remote) == txn_code
            assert (await caller.end_txn(remote_txn, 1000, 0, True)).error_code == txn_code
            assert (await describe_transactions(caller, [remote_txn]))[remote_txn].error_code == txn_code
        _no_group(api, remote)
        _no_txn(api, remote_txn)

    run_with_authorizer(tmp_path, scenario, super_users=ADMIN, **CLUSTER)


# ---------------------------------------------------------------------- one node: as before


def test_a_single_node_serves_the_same_requests_as_before(tmp_path):
    async def scenario(api: Api):
        assert not api.broker.placement.clustered
        _, remote, _, remote_txn = _keys(api)  # keys node 2 would coordinate in a cluster
        await api.create_topic(TOPIC)
        assert (await join(api, remote)).error_code == E.member_id_required
        assert (await sync(api, remote)).error_code == E.unknown_member_id
        assert (await heartbeat(api, remote)).error_code == E.unknown_member_id
        assert (await leave(api, remote, version=0)).error_code == E.unknown_member_id
        assert await offset_commit(api, remote) == {9: E.unknown_topic_or_partition, 0: E.none}
        r = await offset_fetch(api, remote)
        assert r.error_code == E.none and r.topics[0].partitions[0].committed_offset == 5
        r = await offset_fetch(api, remote, version=1)
        assert r.topics[0].partitions[0].committed_offset == 5
        assert (await offset_fetch_groups(api, [remote]))[remote].topics[0].partitions[0].committed_offset == 5
        r = await offset_delete(api, remote)
        assert r.error_code == E.none and r.topics[0].partitions[0].error_code == E.none
        assert (await describe_groups(api, [remote]))[remote].error_code == E.none
        assert await delete_groups(api, [remote]) == [(remote, E.none)]  # Empty: the join left it pending
        r = await consumer_heartbeat(api, "c-" + remote)
        assert r.error_code == E.none and r.member_epoch > 0
        assert (await consumer_describe(api, ["c-" + remote]))["c-" + remote].error_code == E.none
        pid, epoch = await api.producer(remote_txn)
        assert await api.add_offsets(remote_txn, pid, epoch, remote) == E.none
        assert (await api.end_txn(remote_txn, pid, epoch, False)).error_code == E.none
        assert (await describe_transactions(api, [remote_txn]))[remote_txn].error_code == E.none

    run(tmp_path, scenario)
