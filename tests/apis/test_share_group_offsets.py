"""DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets in-process
(oncelog.apis.*_share_group_offsets): the start offset and lag a group's state gives, an alter that
the group's next fetch starts from, a delete after which it starts again at share.auto.offset.reset,
and the refusals of a group with members and of unknown groups and topics."""

from __future__ import annotations

import datetime
import uuid

from .harness import E, batch, request_module, run

GROUP, MEMBER = "sg", "member-1"


def share_fetch(epoch: int, tid, *, acks=()):
    m = request_module(78, 2)
    return m.ShareFetchRequest(
        group_id=GROUP, member_id=MEMBER, share_session_epoch=epoch, max_wait=datetime.timedelta(0), min_bytes=0,
        max_bytes=1 << 20, max_records=100, batch_size=100, share_acquire_mode=0, is_renew_ack=False,
        forgotten_topics_data=(), topics=(m.FetchTopic(topic_id=tid, partitions=(m.FetchPartition(
            partition_index=0, acknowledgement_batches=tuple(
                m.AcknowledgementBatch(first_offset=f, last_offset=last, acknowledge_types=(1,))
                for f, last in acks)),)),))


def describe(topics, version=1, group=GROUP):
    m = request_module(90, version)
    return m.DescribeShareGroupOffsetsRequest(groups=(m.DescribeShareGroupOffsetsRequestGroup(
        group_id=group, topics=None if topics is None else tuple(
            m.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=tuple(ps)) for t, ps in topics.items())),))


def alter(topics, group=GROUP):
    m = request_module(91, 0)
    return m.AlterShareGroupOffsetsRequest(group_id=group, topics=tuple(
        m.AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=tuple(
            m.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=o) for p, o in ps.items()))
        for t, ps in topics.items()))


def delete(*topics, group=GROUP):
    m = request_module(92, 0)
    return m.DeleteShareGroupOffsetsRequest(group_id=group, topics=tuple(
        m.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics))


def offsets(resp):
    return [(t.topic_name, p.partition_index, p.start_offset, getattr(p, "lag", None), p.error_code)
            for g in resp.groups for t in g.topics for p in t.partitions]


def acquired(resp):
    return [(a.first_offset, a.last_offset, a.delivery_count) for r in resp.responses for p in r.partitions
            for a in p.acquired_records]


async def _consumed(api, values, accept):
    """Topic t with ``values`` (one batch), the group reading from the earliest; the member acquires
    them all and accepts offsets 0..accept-1 (its session stays open)."""
    await api.create_topic("t")
    api.broker.metadata.group_configs.replace(GROUP, {"share.auto.offset.reset": "earliest"}, validate_only=False)
    await api.produce("t", batch(values))
    tid = api.broker.metadata.topics.get("t").topic_id
    first = await api.call(78, 2, share_fetch(0, tid))
    assert acquired(first) == [(0, len(values) - 1, 1)]
    acked = await api.call(78, 2, share_fetch(1, tid, acks=[(0, accept - 1)]))
    assert acked.responses[0].partitions[0].acknowledge_error_code == E.none
    return tid


def test_describe_gives_the_start_offset_and_the_lag(tmp_path):
    async def scenario(api):
        await _consumed(api, [b"a", b"b", b"c", b"d"], 2)
        v1 = await api.call(90, 1, describe({"t": [0, 3], "nope": [0]}))
        # SPSO 2 (0 and 1 accepted); lag = high watermark 4 - 2 - 0 done past the SPSO; a partition the
        # topic lacks and a topic that does not exist: -1, no error (Kafka: absence of data)
        assert offsets(v1) == [("t", 0, 2, 2, E.none), ("t", 3, -1, -1, E.none), ("nope", 0, -1, -1, E.none)]
        assert offsets(await api.call(90, 0, describe({"t": [0]}, version=0))) == [("t", 0, 2, None, E.none)]
        assert offsets(await api.call(90, 1, describe(None))) == [("t", 0, 2, 2, E.none)]
        assert offsets(await api.call(90, 1, describe({}))) == []
        assert offsets(await api.call(90, 1, describe({"t": [0]}, group="other"))) == [("t", 0, -1, -1, E.none)]

    run(tmp_path, scenario)


def test_alter_needs_an_empty_group_and_the_next_fetch_starts_there(tmp_path):
    async def scenario(api):
        tid = await _consumed(api, [b"a", b"b", b"c", b"d"], 4)
        hb = request_module(76, 1)
        join = await api.call(76, 1, hb.ShareGroupHeartbeatRequest(
            group_id=GROUP, member_id=MEMBER, member_epoch=0, rack_id=None, subscribed_topic_names=("t",)))
        assert join.error_code == E.none
        busy = await api.call(91, 0, alter({"t": {0: 1}}))
        assert (busy.error_code, busy.error_message, busy.responses) == (E.non_empty_group, "The group is not empty.", ())
        await api.call(76, 1, hb.ShareGroupHeartbeatRequest(
            group_id=GROUP, member_id=MEMBER, member_epoch=-1, rack_id=None, subscribed_topic_names=None))
        await api.call(78, 2, share_fetch(-1, tid))  # the member's session ends
        done = await api.call(91, 0, alter({"nope": {0: 0}, "t": {0: 1, 5: 0}}))
        assert done.error_code == E.none
        assert [(t.topic_name, p.partition_index, p.error_code) for t in done.responses for p in t.partitions] == [
            ("nope", 0, E.unknown_topic_or_partition), ("t", 0, E.none), ("t", 5, E.unknown_topic_or_partition)]
        assert offsets(await api.call(90, 1, describe({"t": [0]}))) == [("t", 0, 1, 3, E.none)]
        again = await api.call(78, 2, share_fetch(0, tid))
        assert acquired(again) == [(1, 3, 1)]  # offsets 1-3 again, as new records (the batch is 0-3)
        other = await api.call(91, 0, alter({"t": {0: 0}}, group=""))
        assert other.error_code == E.invalid_group_id

    run(tmp_path, scenario)


def test_delete_forgets_the_state_and_the_next_fetch_starts_at_the_reset(tmp_path):
    async def scenario(api):
        tid = await _consumed(api, [b"a", b"b", b"c"], 3)
        await api.create_topic("other")
        busy_hb = request_module(76, 1)
        await api.call(76, 1, busy_hb.ShareGroupHeartbeatRequest(
            group_id=GROUP, member_id=MEMBER, member_epoch=0, rack_id=None, subscribed_topic_names=("t",)))
        busy = await api.call(92, 0, delete("t"))
        assert (busy.error_code, busy.responses) == (E.non_empty_group, ())
        await api.call(76, 1, busy_hb.ShareGroupHeartbeatRequest(
            group_id=GROUP, member_id=MEMBER, member_epoch=-1, rack_id=None, subscribed_topic_names=None))
        await api.call(78, 2, share_fetch(-1, tid))
        done = await api.call(92, 0, delete("t", "other", "nope"))
        assert done.error_code == E.none
        assert [(t.topic_name, t.topic_id == tid, t.error_code, t.error_message) for t in done.responses] == [
            ("t", True, E.none, None),
            ("other", False, E.unknown_topic_or_partition, "There is no offset information to delete."),
            ("nope", False, E.unknown_topic_or_partition, "This server does not host this topic-partition.")]
        assert offsets(await api.call(90, 1, describe({"t": [0]}))) == [("t", 0, -1, -1, E.none)]
        assert offsets(await api.call(90, 1, describe(None))) == []
        again = await api.call(78, 2, share_fetch(0, tid))
        assert acquired(again) == [(0, 2, 1)]  # earliest again
        unknown = await api.call(92, 0, delete("t", group="nobody"))
        assert (unknown.error_code, unknown.error_message) == (E.group_id_not_found, "Group nobody not found.")

    run(tmp_path, scenario)


def test_another_group_types_id_is_not_a_share_group(tmp_path):
    async def scenario(api):
        await api.create_topic("t")
        cg = request_module(68, 1)
        joined = await api.call(68, 1, cg.ConsumerGroupHeartbeatRequest(
            group_id="cg", member_id=str(uuid.uuid4()), member_epoch=0, instance_id=None, rack_id=None,
            rebalance_timeout=datetime.timedelta(seconds=30), subscribed_topic_names=("t",),
            subscribed_topic_regex=None, server_assignor=None, topic_partitions=()))
        assert joined.error_code == E.none
        resp = await api.call(92, 0, delete("t", group="cg"))
        assert (resp.error_code, resp.error_message) == (E.group_id_not_found, "Group cg is not a share group.")

    run(tmp_path, scenario)
