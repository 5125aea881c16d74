"""The group APIs against an in-process broker: the edge where the group coordinator's domain
errors (:mod:`oncelog.errors`) become the wire codes each API answers (oncelog.apis._groups).
The coordinator's behaviour itself is tested in tests/groups; these check that the codes reach
the responses, per partition, per member or per group where the API answers that way."""

from __future__ import annotations

import datetime

from .harness import E, request_module, run

HEARTBEAT, OFFSET_COMMIT, JOIN_GROUP, LEAVE_GROUP, DESCRIBE_GROUPS = 12, 8, 11, 13, 15
DELETE_GROUPS, OFFSET_DELETE = 42, 47


async def _offset_commit(api, group, offsets, *, generation=-1, member_id="", metadata="", version=9):
    m = request_module(OFFSET_COMMIT, version)
    by_topic: dict[str, list] = {}
    for (topic, index), offset in offsets.items():
        by_topic.setdefault(topic, []).append(m.OffsetCommitRequestPartition(
            partition_index=index, committed_offset=offset, committed_leader_epoch=-1, committed_metadata=metadata))
    resp = await api.call(OFFSET_COMMIT, version, m.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=generation, member_id=member_id, group_instance_id=None,
        topics=tuple(m.OffsetCommitRequestTopic(name=t, partitions=tuple(ps)) for t, ps in by_topic.items())))
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


def test_member_errors_reach_join_heartbeat_and_leave(tmp_path):
    async def scenario(api):
        m = request_module(JOIN_GROUP, 9)
        join = await api.call(JOIN_GROUP, 9, m.JoinGroupRequest(
            group_id="g", session_timeout=datetime.timedelta(seconds=10),
            rebalance_timeout=datetime.timedelta(seconds=30), member_id="", group_instance_id=None,
            protocol_type="consumer", protocols=(m.JoinGroupRequestProtocol(name="range", metadata=b""),),
            reason=None))
        assert join.error_code == E.member_id_required and join.member_id  # KIP-394

        m = request_module(HEARTBEAT, 4)
        hb = await api.call(HEARTBEAT, 4, m.HeartbeatRequest(group_id="g", generation_id=0, member_id="nobody",
                                                             group_instance_id=None))
        assert hb.error_code == E.unknown_member_id

        m = request_module(LEAVE_GROUP, 5)
        leave = await api.call(LEAVE_GROUP, 5, m.LeaveGroupRequest(group_id="g", members=(
            m.MemberIdentity(member_id=join.member_id, group_instance_id=None, reason=None),
            m.MemberIdentity(member_id="nobody", group_instance_id=None, reason=None))))
        assert leave.error_code == E.none
        assert [x.error_code for x in leave.members] == [E.none, E.unknown_member_id]

    run(tmp_path, scenario)


def test_offset_commit_answers_each_partition_its_error(tmp_path):
    async def scenario(api):
        await api.create_topic("t", partitions=1)
        assert await _offset_commit(api, "g", {("t", 0): 5, ("t", 9): 5}) == {
            ("t", 0): E.none, ("t", 9): E.unknown_topic_or_partition}
        assert await _offset_commit(api, "g", {("t", 0): 6}, metadata="x" * 5000) == {
            ("t", 0): E.offset_metadata_too_large}
        # a generation for a group that does not exist: every partition gets the group's error,
        # GROUP_ID_NOT_FOUND from v9, ILLEGAL_GENERATION before (Kafka's validateOffsetCommit)
        assert await _offset_commit(api, "other", {("t", 0): 6}, generation=3, member_id="m") == {
            ("t", 0): E.group_id_not_found}
        assert await _offset_commit(api, "other", {("t", 0): 6}, generation=3, member_id="m", version=8) == {
            ("t", 0): E.illegal_generation}
        # only partitions that do not exist: answered without the group check
        assert await _offset_commit(api, "other", {("t", 9): 6}, generation=3, member_id="m") == {
            ("t", 9): E.unknown_topic_or_partition}

    run(tmp_path, scenario)


def test_group_errors_reach_describe_delete_and_offset_delete(tmp_path):
    async def scenario(api):
        await api.create_topic("t", partitions=1)
        assert await _offset_commit(api, "simple", {("t", 0): 5}) == {("t", 0): E.none}

        m = request_module(DESCRIBE_GROUPS, 6)
        described = await api.call(DESCRIBE_GROUPS, 6, m.DescribeGroupsRequest(
            groups=("nope",), include_authorized_operations=False))
        assert described.groups[0].error_code == E.group_id_not_found
        assert described.groups[0].error_message == "Group nope not found."

        m = request_module(OFFSET_DELETE, 0)
        topics = (m.OffsetDeleteRequestTopic(name="t", partitions=(m.OffsetDeleteRequestPartition(partition_index=0),)),)
        missing = await api.call(OFFSET_DELETE, 0, m.OffsetDeleteRequest(group_id="nope", topics=topics))
        assert missing.error_code == E.group_id_not_found and missing.topics == ()
        deleted = await api.call(OFFSET_DELETE, 0, m.OffsetDeleteRequest(group_id="simple", topics=topics))
        assert deleted.error_code == E.none
        assert [p.error_code for t in deleted.topics for p in t.partitions] == [E.none]

        m = request_module(DELETE_GROUPS, 2)
        resp = await api.call(DELETE_GROUPS, 2, m.DeleteGroupsRequest(groups_names=("simple", "nope")))
        assert {r.group_id: r.error_code for r in resp.results} == {"simple": E.none, "nope": E.group_id_not_found}

    run(tmp_path, scenario)
