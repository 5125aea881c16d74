"""``oncelog groups describe`` of a streams group (KIP-1071): after ConsumerGroupDescribe's and
ShareGroupDescribe's GROUP_ID_NOT_FOUND the command asks StreamsGroupDescribe and shows protocol
streams, the group's epochs, each member's active tasks as the source partitions they read, and the
lag of the committed offsets; ``groups list`` gives the type. Against oncelog and Apache Kafka 4.4
(the member is a raw StreamsGroupHeartbeat, as tests/test_streams_groups_restart.py sends it)."""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
import time
import uuid

import pytest

from oncelog.client.wire import RawClient

from .helpers import create_topic, unique
from .test_streams_groups_restart import commit, heartbeat, req

pytestmark = [pytest.mark.both_brokers, pytest.mark.e2e]


def _groups(bootstrap: str, *args) -> str:
    proc = subprocess.run([sys.executable, "-m", "oncelog", "groups", "--bootstrap-server", bootstrap, *args],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.one_node("the raw member talks to the bootstrap node, the coordinator on one node")
def test_describe_shows_a_streams_group_members_tasks_and_lag(broker):
    topic, group, member = unique("in"), unique("app"), str(uuid.uuid4())
    create_topic(broker.bootstrap, topic, 2)
    c = RawClient(broker.bootstrap, timeout=30)
    try:
        m = req(44, 1)
        r = c.request(m.IncrementalAlterConfigsRequest(validate_only=False, resources=(m.AlterConfigsResource(
            resource_type=32, resource_name=group, configs=(m.AlterableConfig(
                name="streams.initial.rebalance.delay.ms", config_operation=0, value="0"),)),)))
        assert int(r.responses[0].error_code) == 0
        deadline = time.monotonic() + 30
        m = req(10, 4)  # FindCoordinator first, as clients do: Kafka creates __consumer_offsets on it
        while int(c.request(m.FindCoordinatorRequest(key_type=0, coordinator_keys=(group,))).coordinators[0]
                  .error_code) != 0:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        while int((joined := heartbeat(c, group, member, 0, topic)).error_code) in (14, 15, 16):
            assert time.monotonic() < deadline, joined  # the group's offsets partition still loading
            time.sleep(0.2)
        assert int(joined.error_code) == 0, joined
        epoch, tasks = joined.member_epoch, {t.subtopology_id: list(t.partitions) for t in joined.active_tasks}
        while tasks != {"0": [0, 1]}:  # Kafka may assign in a later heartbeat
            assert time.monotonic() < deadline, tasks
            time.sleep(0.2)
            r = heartbeat(c, group, member, epoch, topic, owned=tasks)
            assert int(r.error_code) == 0, r
            epoch = r.member_epoch
            if r.active_tasks is not None:
                tasks = {t.subtopology_id: list(t.partitions) for t in r.active_tasks}
        heartbeat(c, group, member, epoch, topic, owned=tasks)  # owns them now: reconciled
        assert commit(c, group, member, epoch, topic) == 0  # partition 0 at 5
        d = json.loads(_groups(broker.bootstrap, "describe", group, "--json"))
        assert (d["group_type"], d["state"]) == ("streams", "Stable")
        assert [(x["member_id"], x["assignment"], x["member_epoch"]) for x in d["members"]] == \
            [(member, {topic: [0, 1]}, epoch)]
        assert [(o["topic"], o["partition"], o["committed"], o["member_id"]) for o in d["offsets"]] == \
            [(topic, 0, 5, member), (topic, 1, None, member)]
        assert [g["group_type"] for g in json.loads(_groups(broker.bootstrap, "list", "--json"))
                if g["group_id"] == group] == ["streams"]
        assert "protocol streams (KIP-1071)" in _groups(broker.bootstrap, "describe", group)
        m = req(88, 0)
        c.request(m.StreamsGroupHeartbeatRequest(  # leave
            group_id=group, member_id=member, member_epoch=-1, endpoint_information_epoch=-1,
            rebalance_timeout=datetime.timedelta(milliseconds=-1), topology=None, active_tasks=None,
            standby_tasks=None, warmup_tasks=None, process_id=None, client_tags=None, task_offsets=None,
            task_end_offsets=None))
    finally:
        c.close()
