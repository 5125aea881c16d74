"""ShareFetch's handler in-process (oncelog.apis.share_fetch): what a request names that does not
exist is answered per partition and never joins the share session (a session must not grow with
made-up topic ids, request after request), and records are acquired once, whole batches with
their acquired ranges."""

from __future__ import annotations

import datetime
import uuid

from .harness import E, batch, request_module, run

GROUP, MEMBER = "sg", "member-1"


def share_fetch(m, epoch: int, parts, *, max_records: int = 100):
    return m.ShareFetchRequest(
        group_id=GROUP, member_id=MEMBER, share_session_epoch=epoch, max_wait=datetime.timedelta(0), min_bytes=0,
        max_bytes=1 << 20, max_records=max_records, batch_size=100, share_acquire_mode=0, is_renew_ack=False,
        forgotten_topics_data=(), topics=tuple(m.FetchTopic(topic_id=tid, partitions=tuple(
            m.FetchPartition(partition_index=p, acknowledgement_batches=()) for p in ps)) for tid, ps in parts))


def test_unknown_topic_ids_and_partitions_are_answered_and_never_join_the_session(tmp_path):
    async def scenario(api):
        await api.create_topic("t")
        tid = api.broker.metadata.topics.get("t").topic_id
        m = request_module(78, 2)
        epoch = 0
        for _ in range(50):
            resp = await api.call(78, 2, share_fetch(m, epoch, [(uuid.uuid4(), [0]), (tid, [7])]))
            assert resp.error_code == E.none
            codes = sorted(int(p.error_code) for r in resp.responses for p in r.partitions)
            assert codes == sorted([int(E.unknown_topic_id), int(E.unknown_topic_or_partition)]), resp
            epoch = 1 if epoch == 0 else epoch + 1
        session = api.broker.share.sessions.get(GROUP, MEMBER)
        assert session is not None and session.partitions == set()

    run(tmp_path, scenario)


def test_records_are_acquired_once_with_their_ranges(tmp_path):
    async def scenario(api):
        await api.create_topic("t")
        # the group starts at the earliest offset (its GROUP config)
        api.broker.metadata.group_configs.replace(GROUP, {"share.auto.offset.reset": "earliest"}, validate_only=False)
        await api.produce("t", batch([b"a", b"b", b"c"]))
        tid = api.broker.metadata.topics.get("t").topic_id
        m = request_module(78, 2)
        first = await api.call(78, 2, share_fetch(m, 0, [(tid, [0])]))
        [part] = first.responses[0].partitions
        assert (part.error_code, [(a.first_offset, a.last_offset, a.delivery_count) for a in part.acquired_records]) \
            == (E.none, [(0, 2, 1)])
        assert part.records
        again = await api.call(78, 2, share_fetch(m, 1, []))  # the same session: nothing left to acquire
        assert [p.acquired_records for r in again.responses for p in r.partitions] in ([], [()])

    run(tmp_path, scenario)


def test_the_share_partitions_of_a_deleted_topic_are_forgotten(tmp_path):
    async def scenario(api):
        await api.create_topic("t")
        tid = api.broker.metadata.topics.get("t").topic_id
        m = request_module(78, 2)
        await api.call(78, 2, share_fetch(m, 0, [(tid, [0])]))
        assert (GROUP, tid, 0) in api.broker.share.shares
        d = request_module(20, 6)
        resp = await api.call(20, 6, d.DeleteTopicsRequest(
            topics=(d.DeleteTopicState(name="t", topic_id=None),), timeout=datetime.timedelta(seconds=5)))
        assert resp.responses[0].error_code == E.none
        api.broker.share._pruned_at = -(10**12)  # the 10 s interval has passed
        api.broker.share.tick()
        assert (GROUP, tid, 0) not in api.broker.share.shares

    run(tmp_path, scenario)
