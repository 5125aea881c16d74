"""Share groups (KIP-932) with librdkafka's share consumer (confluent-kafka's ``ShareConsumer``),
against oncelog, the two-node cluster and Apache Kafka 4.4 (``both_brokers``): consumers sharing
a topic get every record once when they accept them; a RELEASE hands a record out again with a
higher delivery count, a REJECT never; at the delivery-count limit a record is archived; the
records a SIGKILLed consumer held go to another consumer when its connection closes, without
waiting for their lock to expire. Oncelog-only (``crash``): a broker SIGKILLed while records are
acquired and others acknowledged loses none and redelivers no acknowledged one."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from ..helpers import create_topic, unique

pytestmark = [pytest.mark.both_brokers, pytest.mark.e2e]

ACCEPT, RELEASE, REJECT = ck.AcknowledgeType.ACCEPT, ck.AcknowledgeType.RELEASE, ck.AcknowledgeType.REJECT


def share_group(bootstrap: str, **settings: str) -> str:
    """A new share group id whose GROUP configs are ``settings`` (``share.auto.offset.reset``
    earliest unless given: the records are produced before the consumers join)."""
    group = unique("sg")
    settings.setdefault("share.auto.offset.reset", "earliest")
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET) for k, v in settings.items()])
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until its answer
    for f in admin.incremental_alter_configs([res]).values():
        f.result(30)
    return group


def produce(bootstrap: str, topic: str, n: int, partitions: int) -> list[bytes]:
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    values = [b"v%05d" % i for i in range(n)]
    for i, v in enumerate(values):
        p.produce(topic, value=v, partition=i % partitions)
    assert p.flush(30) == 0
    return values


def consumer(bootstrap: str, group: str, topic: str, **conf) -> ck.ShareConsumer:
    c = ck.ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **conf})
    c.subscribe([topic])
    return c


def poll(c: ck.ShareConsumer, timeout: float = 1.0) -> list:
    out = []
    for m in c.poll(timeout) or []:
        assert m.error() is None, m.error()
        out.append(m)
    return out


def test_two_share_consumers_get_every_record_once(broker):
    topic = unique("q")
    create_topic(broker.bootstrap, topic, 3)
    group = share_group(broker.bootstrap)
    values = produce(broker.bootstrap, topic, 1000, 3)
    consumers = [consumer(broker.bootstrap, group, topic) for _ in range(2)]
    got: dict[int, list[bytes]] = {0: [], 1: []}
    try:
        deadline = time.monotonic() + 60
        while sum(map(len, got.values())) < len(values) and time.monotonic() < deadline:
            for i, c in enumerate(consumers):
                got[i] += [m.value() for m in poll(c, 0.5)]
        for c in consumers:
            c.commit_sync(30)  # the last poll's records accepted (implicit mode)
    finally:
        for c in consumers:
            c.close()
    everything = got[0] + got[1]
    assert sorted(everything) == values, (len(everything), len(set(everything)))


def test_a_released_record_comes_back_with_a_higher_count_and_a_rejected_one_never(broker):
    topic = unique("q")
    create_topic(broker.bootstrap, topic, 1)
    group = share_group(broker.bootstrap)
    produce(broker.bootstrap, topic, 2, 1)
    c = consumer(broker.bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"})
    try:
        first = []
        deadline = time.monotonic() + 30
        while len(first) < 2 and time.monotonic() < deadline:
            first += poll(c)
        assert [(m.value(), m.delivery_count()) for m in first] == [(b"v00000", 1), (b"v00001", 1)]
        c.acknowledge(first[0], RELEASE)
        c.acknowledge(first[1], REJECT)
        c.commit_sync(30)
        again = []
        deadline = time.monotonic() + 30
        while not again and time.monotonic() < deadline:
            again = poll(c)
        assert [(m.value(), m.delivery_count()) for m in again] == [(b"v00000", 2)]
        c.acknowledge(again[0], ACCEPT)
        c.commit_sync(30)
        assert poll(c, 2.0) == []  # accepted and rejected: nothing left
    finally:
        c.close()


def test_at_the_delivery_limit_a_released_record_is_archived(broker):
    topic = unique("q")
    create_topic(broker.bootstrap, topic, 1)
    group = share_group(broker.bootstrap, **{"share.delivery.count.limit": "2"})
    produce(broker.bootstrap, topic, 1, 1)
    c = consumer(broker.bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"})
    counts = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            got = poll(c)
            for m in got:
                counts.append(m.delivery_count())
                c.acknowledge(m, RELEASE)
            if got:
                c.commit_sync(30)
            if len(counts) >= 2:
                break
        assert counts == [1, 2]
        assert poll(c, 2.0) == []  # released at the limit: archived, never delivered again
    finally:
        c.close()


HOLDER = textwrap.dedent("""
    import sys, time, confluent_kafka as ck
    c = ck.ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                          "share.acknowledgement.mode": "explicit"})
    c.subscribe([sys.argv[3]])
    held = []
    deadline = time.time() + 60
    while not held and time.time() < deadline:
        held = [m for m in (c.poll(1.0) or []) if m.error() is None]
    print(len(held), flush=True)
    time.sleep(600)  # holds them until it is killed
""")


def test_the_records_of_a_sigkilled_consumer_go_to_another_before_their_lock_expires(broker, tmp_path):
    topic = unique("q")
    create_topic(broker.bootstrap, topic, 1)
    group = share_group(broker.bootstrap)
    values = produce(broker.bootstrap, topic, 20, 1)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, broker.bootstrap, group, topic],
                              stdout=subprocess.PIPE, text=True, env={**os.environ})
    try:
        held = int(holder.stdout.readline() or 0)
        assert held > 0
    finally:
        holder.kill()
        holder.wait()
    killed_at = time.monotonic()
    c = consumer(broker.bootstrap, group, topic)
    got = []
    try:
        while len(got) < len(values) and time.monotonic() - killed_at < 25:
            got += [m.value() for m in poll(c, 0.5)]
        c.commit_sync(30)
    finally:
        c.close()
    # The lock lasts 30 s: they came back when the holder's connection closed, well before.
    assert sorted(got) == values and time.monotonic() - killed_at < 25


ACCEPTOR = textwrap.dedent("""
    import json, sys, time, confluent_kafka as ck
    c = ck.ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                          "share.acknowledgement.mode": "explicit"})
    c.subscribe([sys.argv[3]])
    held = []
    deadline = time.time() + 60
    while len(held) < 100 and time.time() < deadline:
        held += [m for m in (c.poll(1.0) or []) if m.error() is None]
        if len(held) < 100 and held:
            break  # one poll's worth is enough to split
    accepted = held[: len(held) // 2]
    for m in accepted:
        c.acknowledge(m, ck.AcknowledgeType.ACCEPT)
    results = c.commit_sync(30)
    assert all(err is None for err in results.values()), results
    print(json.dumps({"accepted": [m.value().decode() for m in accepted],
                      "held": [m.value().decode() for m in held[len(held) // 2:]]}), flush=True)
    time.sleep(600)  # holds the rest, acquired, until it is killed
""")


@pytest.mark.oncelog_only("SIGKILLs and restarts the broker")
@pytest.mark.crash
def test_a_broker_sigkill_loses_no_record_and_redelivers_no_accepted_one(broker_factory):
    """Records accepted (their state durable before the answer) are never delivered again after a
    broker SIGKILL and restart; records acquired but not acknowledged come back (at-least-once,
    as Kafka: acquisition writes nothing); nothing is lost."""
    import json

    broker = broker_factory(fsync="always")
    topic = unique("q")
    create_topic(broker.bootstrap, topic, 2)
    group = share_group(broker.bootstrap)
    values = produce(broker.bootstrap, topic, 400, 2)
    holder = subprocess.Popen([sys.executable, "-c", ACCEPTOR, broker.bootstrap, group, topic],
                              stdout=subprocess.PIPE, text=True)
    try:
        line = holder.stdout.readline()
        assert line, "the first consumer accepted nothing"
        first = json.loads(line)
        broker.kill()  # with records acquired by the consumer, and others just accepted
    finally:
        holder.kill()
        holder.wait()
    broker.restart()
    accepted = {v.encode() for v in first["accepted"]}
    assert accepted and first["held"]
    c = consumer(broker.bootstrap, group, topic)
    got = []
    try:
        deadline = time.monotonic() + 60
        while len(got) + len(accepted) < len(values) and time.monotonic() < deadline:
            got += [m.value() for m in poll(c, 0.5)]
        c.commit_sync(30)
        got += [m.value() for m in poll(c, 1.0)]  # nothing more may come
    finally:
        c.close()
    assert not accepted & set(got), f"{len(accepted & set(got))} accepted record(s) delivered again"
    assert sorted(list(accepted) + got) == values, (len(accepted), len(got), len(set(got)))
    assert {v.encode() for v in first["held"]} <= set(got)


def _share_groups_listed(bootstrap: str, group: str):
    """ListGroups v5 of type ``share`` at the group's coordinator: the group's (state, type), or None."""
    from oncelog.client.wire import RawClient, request_module

    from ..helpers import coordinator_address

    m = request_module(16, 5)
    c = RawClient(coordinator_address(bootstrap, group))
    try:
        r = c.request(m.ListGroupsRequest(states_filter=(), types_filter=("share",)))
    finally:
        c.close()
    found = [(g.group_state, g.group_type) for g in r.groups if g.group_id == group]
    return found[0] if found else None


def _delete_group(bootstrap: str, group: str) -> int:
    from oncelog.client.wire import RawClient, request_module

    from ..helpers import coordinator_address

    m = request_module(42, 2)
    c = RawClient(coordinator_address(bootstrap, group))
    try:
        return int(c.request(m.DeleteGroupsRequest(groups_names=(group,))).results[0].error_code)
    finally:
        c.close()


def test_a_share_group_is_listed_by_type_and_deleted_once_empty_with_its_state(broker):
    """ListGroups v5 lists a share group (type ``share``); DeleteGroups refuses it while it has a
    member (NON_EMPTY_GROUP, 68) and deletes it once empty, with its share partitions' state on
    every node: the same group id starts again from ``share.auto.offset.reset``."""
    topic = unique("q")
    create_topic(broker.bootstrap, topic, 2)
    group = share_group(broker.bootstrap)
    values = produce(broker.bootstrap, topic, 10, 2)

    def consume_all():
        c = consumer(broker.bootstrap, group, topic)
        got = []
        deadline = time.monotonic() + 30
        while len(got) < len(values) and time.monotonic() < deadline:
            got += [m.value() for m in poll(c, 0.5)]
        c.commit_sync(30)
        return c, got

    c, got = consume_all()
    try:
        assert sorted(got) == values
        assert _share_groups_listed(broker.bootstrap, group) == ("Stable", "share")
        assert _delete_group(broker.bootstrap, group) == 68  # NON_EMPTY_GROUP
    finally:
        c.close()
    deadline = time.monotonic() + 30
    while _share_groups_listed(broker.bootstrap, group) != ("Empty", "share"):
        assert time.monotonic() < deadline, _share_groups_listed(broker.bootstrap, group)
        time.sleep(0.2)
    assert _delete_group(broker.bootstrap, group) == 0
    assert _share_groups_listed(broker.bootstrap, group) is None
    c, again = consume_all()  # its state is gone: from the earliest offset again
    c.close()
    assert sorted(again) == values


def _start_offset(bootstrap: str, group: str, topic: str) -> int:
    """Partition 0's share-partition start offset (DescribeShareGroupOffsets v0 at the coordinator)."""
    from kio.schema.describe_share_group_offsets.v0 import request as rq

    from oncelog.client.kafka import COORDINATOR_GROUP, KafkaClient

    client = KafkaClient(bootstrap, {}, client_id="share-offsets", timeout=10)
    try:
        r = client.coordinator(group, COORDINATOR_GROUP).request(rq.DescribeShareGroupOffsetsRequest(groups=(
            rq.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=(
                rq.DescribeShareGroupOffsetsRequestTopic(topic_name=topic, partitions=(0,)),)),)))
    finally:
        client.close()
    return r.groups[0].topics[0].partitions[0].start_offset


@pytest.mark.oncelog_only("a lone transaction marker is archived by design (docs/share-groups.md); Kafka 4.4 "
                          "hands it to librdkafka, which never acknowledges it, and keeps its start offset on it")
@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_a_transaction_marker_fetched_alone_does_not_hold_the_start_offset(broker, commit):
    """A record read while its transaction is open, then its COMMIT or ABORT marker alone in the next
    fetch: librdkafka's share consumer acknowledges nothing for a fetch without a data record, so
    were the marker acquired (as Kafka does) the start offset would stay on it through every lock
    timeout up to the delivery limit, and the partition stall at its in-flight limit. oncelog
    archives it: the next records come and the start offset reaches the end."""
    topic = unique("q")
    create_topic(broker.bootstrap, topic, 1)
    group = share_group(broker.bootstrap)
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": unique("tx")})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"in-txn", partition=0)
    p.flush(30)
    c = consumer(broker.bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"})
    try:
        got = []
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            got = poll(c, 0.5)  # read_uncommitted (the default): the open transaction's record
        assert [m.value() for m in got] == [b"in-txn"]
        c.acknowledge(got[0], ACCEPT)
        c.commit_sync(30)
        (p.commit_transaction if commit else p.abort_transaction)(30)
        deadline = time.monotonic() + 30
        while _start_offset(broker.bootstrap, group, topic) != 2:  # past the marker at offset 1
            assert time.monotonic() < deadline, _start_offset(broker.bootstrap, group, topic)
            poll(c, 0.3)
        after = produce(broker.bootstrap, topic, 3, 1)
        later = []
        deadline = time.monotonic() + 30
        while len(later) < len(after) and time.monotonic() < deadline:
            for m in poll(c, 0.5):
                later.append(m.value())
                c.acknowledge(m, ACCEPT)
            c.commit_sync(30)
        assert later == after
        assert _start_offset(broker.bootstrap, group, topic) == 5
    finally:
        c.close()


def test_oncelog_groups_describes_a_share_group_with_its_members_and_lag(broker):
    """``oncelog groups describe`` of a share group (ShareGroupDescribe after ConsumerGroupDescribe's
    GROUP_ID_NOT_FOUND, then DescribeShareGroupOffsets): protocol share, its member's subscription
    and assignment, per partition a start offset and a lag of 0 once everything is accepted;
    ``groups list`` gives its type."""
    import json

    topic = unique("q")
    create_topic(broker.bootstrap, topic, 2)
    group = share_group(broker.bootstrap)
    values = produce(broker.bootstrap, topic, 10, 2)
    c = consumer(broker.bootstrap, group, topic)

    def groups(*args):
        proc = subprocess.run([sys.executable, "-m", "oncelog", "groups", "--bootstrap-server", broker.bootstrap,
                               *args], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    try:
        got = []
        deadline = time.monotonic() + 30
        while len(got) < len(values) and time.monotonic() < deadline:
            got += [m.value() for m in poll(c, 0.5)]
        c.commit_sync(30)
        assert sorted(got) == values
        deadline = time.monotonic() + 30
        while True:  # the lag follows the acknowledgements the leader applied
            d = json.loads(groups("describe", group, "--json"))
            if [r["lag"] for r in d["offsets"]] == [0, 0] or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        assert (d["group_type"], d["state"]) == ("share", "Stable")
        assert [(m["subscribed_topic_names"], m["assignment"]) for m in d["members"]] == [([topic], {topic: [0, 1]})]
        assert [(r["topic"], r["partition"], r["lag"], r["error"]) for r in d["offsets"]] == \
            [(topic, 0, 0, None), (topic, 1, 0, None)]
        assert all(r["start_offset"] is not None for r in d["offsets"])
        assert [g for g in json.loads(groups("list", "--json")) if g["group_id"] == group][0]["group_type"] == "share"
        text = groups("describe", group)
        assert "protocol share (KIP-932)" in text and "start offset" in text
    finally:
        c.close()
