"""A streams group (KIP-1071) survives a SIGKILL of its broker: its records in __consumer_offsets
are replayed at start-up, so after the restart the member heartbeats at its epoch, keeps its tasks,
its offset commits are still checked by member epoch, and StreamsGroupDescribe shows the group as
it was."""

from __future__ import annotations

import datetime
import uuid

import pytest
from kio.index import load_payload_module
from kio.static.constants import EntityType

from oncelog.client.wire import RawClient

pytestmark = pytest.mark.e2e


def req(key: int, version: int):
    return load_payload_module(key, version, EntityType.request)


def heartbeat(c: RawClient, group: str, member: str, epoch: int, topic: str, owned=None):
    m = req(88, 0)
    joining = epoch == 0
    topo = m.Topology(epoch=0, subtopologies=(m.Subtopology(
        subtopology_id="0", source_topics=(topic,), state_changelog_topics=(), repartition_source_topics=(),
        copartition_groups=()),)) if joining else None
    tasks = () if joining else tuple(m.TaskIds(subtopology_id=s, partitions=tuple(ps)) for s, ps in owned.items()) \
        if owned is not None else None
    return c.request(m.StreamsGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=epoch, endpoint_information_epoch=-1,
        rebalance_timeout=datetime.timedelta(seconds=30) if joining else datetime.timedelta(milliseconds=-1),
        topology=topo, active_tasks=tasks, standby_tasks=() if tasks is not None else None,
        warmup_tasks=() if tasks is not None else None, process_id="p1" if joining else None,
        client_tags=() if joining else None, task_offsets=() if joining else None,
        task_end_offsets=() if joining else None))


def commit(c: RawClient, group: str, member: str, epoch: int, topic: str) -> int:
    m = req(8, 9)
    r = c.request(m.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=epoch, member_id=member, group_instance_id=None,
        topics=(m.OffsetCommitRequestTopic(name=topic, partitions=(m.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=5, committed_leader_epoch=-1, committed_metadata=""),)),)))
    return int(r.topics[0].partitions[0].error_code)


def describe(c: RawClient, group: str):
    m = req(89, 0)
    return c.request(m.StreamsGroupDescribeRequest(group_ids=(group,), include_authorized_operations=False)).groups[0]


def test_a_streams_group_continues_after_its_broker_is_sigkilled(broker_factory):
    broker = broker_factory()
    c = RawClient(broker.bootstrap, timeout=30)
    topic, group, member = "in", "app", str(uuid.uuid4())
    m = req(19, 5)
    r = c.request(m.CreateTopicsRequest(topics=(m.CreatableTopic(
        name=topic, num_partitions=2, replication_factor=1, assignments=(), configs=()),),
        timeout=datetime.timedelta(seconds=10), validate_only=False))
    assert int(r.topics[0].error_code) == 0
    m = req(44, 1)
    r = c.request(m.IncrementalAlterConfigsRequest(validate_only=False, resources=(m.AlterConfigsResource(
        resource_type=32, resource_name=group, configs=(m.AlterableConfig(
            name="streams.initial.rebalance.delay.ms", config_operation=0, value="0"),)),)))
    assert int(r.responses[0].error_code) == 0
    joined = heartbeat(c, group, member, 0, topic)
    assert int(joined.error_code) == 0, joined
    epoch = joined.member_epoch
    tasks = {t.subtopology_id: list(t.partitions) for t in joined.active_tasks}
    assert tasks == {"0": [0, 1]} and epoch == 2
    assert commit(c, group, member, epoch, topic) == 0
    before = describe(c, group)
    assert (before.group_state, before.group_epoch, before.assignment_epoch) == ("Stable", 2, 2)
    c.close()

    broker.kill()
    broker.start()
    c = RawClient(broker.bootstrap, timeout=30)
    after = describe(c, group)
    assert (after.group_state, after.group_epoch, after.assignment_epoch) == ("Stable", 2, 2)
    assert [(x.member_id, x.member_epoch, x.process_id) for x in after.members] == [(member, 2, "p1")]
    assert after.topology.subtopologies[0].source_topics == (topic,)
    again = heartbeat(c, group, member, epoch, topic, owned=tasks)
    assert (int(again.error_code), again.member_epoch) == (0, epoch), again
    assert commit(c, group, member, epoch, topic) == 0
    assert commit(c, group, member, epoch + 1, topic) == 113  # STALE_MEMBER_EPOCH: still checked
    left = heartbeat(c, group, member, -1, topic)
    assert (int(left.error_code), left.member_epoch) == (0, -1)
    assert describe(c, group).group_state == "Empty"
    c.close()
