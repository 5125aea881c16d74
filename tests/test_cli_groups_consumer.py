"""``oncelog groups list|describe|delete`` for consumer groups of the KIP-848 protocol
(``group.protocol=consumer``) beside classic ones, against an oncelog broker; the same scenarios
run against Apache Kafka 4.4 in tests/kafka/test_cli_groups_consumer_kafka.py, which imports the
``check_*`` functions below, so both brokers are held to one set of expectations.

Invariants checked, through the command (its ``--json`` output, and its tables where a reader
relies on them):
- ``groups list`` gives each group its type (``consumer``/``classic``, ListGroups v5) and state.
- ``groups describe`` of a consumer group shows protocol consumer, the group's state, group epoch
  and assignment epoch, the assignor, and per member its id, instance id, client id and host,
  member epoch, subscribed topics or regex, current and target assignment; once the group is
  stable the members' assignments are disjoint, cover every subscribed partition, equal their
  targets, and every epoch is the assignment epoch.
- While a member has not yet revoked partitions its target no longer holds, the describe shows
  the difference: the old owner's partitions to revoke (``-``) and the new owner's partitions to
  assign (``+``), and no partition is in two members' current assignments.
- A classic group is described by the DescribeGroups fallback, labelled classic; an unknown group
  fails (exit 1) with GROUP_ID_NOT_FOUND and Kafka's message.
- Lag rows cover the partitions committed or owned: committed offset, high watermark, lag, owner.

The consumers are confluent-kafka's (librdkafka 2.16). Waits are for states (the describe shows
what is expected), bounded by a generous deadline, never for a fixed time.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
import time

import confluent_kafka as ck
import pytest

from .helpers import create_topic, unique

pytestmark = pytest.mark.e2e

DEADLINE = 60.0  # seconds a wait for a group state may take before the test fails


# -- tools -------------------------------------------------------------------------------------

def oncelog_groups(bootstrap: str, *args, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "oncelog", "groups", "--bootstrap-server", bootstrap, *args],
                          capture_output=True, text=True, timeout=120)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def describe_json(bootstrap: str, group: str, *extra: str) -> dict:
    return json.loads(oncelog_groups(bootstrap, "describe", group, "--json", *extra).stdout)


def describe_now(bootstrap: str, group: str):
    """The group's description in this process (oncelog.admin.describe_group, what the command
    runs): cheap enough to poll while waiting for a state. None while the group does not exist
    (its first member's first heartbeat may not have reached the coordinator yet)."""
    from oncelog.admin import GroupError, describe_group
    from oncelog.client.kafka import KafkaClient

    client = KafkaClient(bootstrap, client_id="test-groups", timeout=10)
    try:
        return describe_group(client, group)
    except GroupError as exc:
        if exc.code != "GROUP_ID_NOT_FOUND":
            raise
        return None
    finally:
        client.close()


def consumer(bootstrap: str, group: str, client_id: str, topics: list[str], **conf) -> ck.Consumer:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                     "client.id": client_id, "enable.auto.commit": False, "auto.offset.reset": "earliest", **conf})
    c.subscribe(topics)
    return c


def classic_consumer(bootstrap: str, group: str, client_id: str, topics: list[str]) -> ck.Consumer:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": client_id,
                     "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.subscribe(topics)
    return c


def poll_until(consumers: list[ck.Consumer], done, what: str, timeout: float = DEADLINE, group: tuple | None = None):
    """Poll ``consumers`` (they heartbeat and reconcile only when polled) until ``done()`` returns
    something true, and return it. ``group``: (bootstrap, group id) whose description a failure shows."""
    deadline = time.monotonic() + timeout
    errors = {}  # the consumers' last error events, to say why a wait failed
    while True:
        for i, c in enumerate(consumers):
            msg = c.poll(0.1)
            if msg is not None and msg.error() is not None:
                errors[i] = msg.error().str()
        result = done()
        if result:
            return result
        if time.monotonic() > deadline:
            last = describe_now(*group) if group else None
            raise AssertionError(f"not within {timeout:g}s: {what} (consumers' errors: {errors}; the group: {last})")


def stable(bootstrap: str, group: str, members: int):
    """The description once the group is Stable with ``members`` members all at the assignment
    epoch, their current assignments equal to their targets; else None."""
    d = describe_now(bootstrap, group)
    if d is None or d.state != "Stable" or len(d.members) != members or d.group_epoch != d.assignment_epoch:
        return None
    if any(m.member_epoch != d.assignment_epoch or m.assignment != m.target_assignment for m in d.members):
        return None
    return d


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    p = ck.Producer({"bootstrap.servers": bootstrap})
    for i in range(partitions * per_partition):
        p.produce(topic, value=b"%d" % i, partition=i % partitions)
    p.flush(30)


def owned(members: list[dict], key: str = "assignment") -> list[tuple[str, int]]:
    return [(t, p) for m in members for t, ps in m[key].items() for p in ps]


def table_rows(text: str) -> list[list[str]]:
    """The cells of a rich table's body rows (lines framed by │)."""
    return [[cell.strip() for cell in line.strip().strip("│").split("│")] for line in text.splitlines()
            if line.startswith("│")]


# -- scenarios (each takes a bootstrap; tests/kafka runs them against Apache Kafka) -------------

def check_list_shows_type_and_state(bootstrap: str) -> None:
    topic, new, old = unique("list"), unique("g848"), unique("gclassic")
    create_topic(bootstrap, topic, 2)
    c_new, c_old = consumer(bootstrap, new, "n", [topic]), classic_consumer(bootstrap, old, "o", [topic])
    try:
        def both_stable():
            groups = {g["group_id"]: g for g in json.loads(oncelog_groups(bootstrap, "list", "--json").stdout)}
            ok = all(groups.get(g, {}).get("state") == "Stable" for g in (new, old))
            return groups if ok else None

        groups = poll_until([c_new, c_old], both_stable, "both groups Stable in groups list")
        assert groups[new] == {"group_id": new, "group_type": "consumer", "state": "Stable", "protocol_type": "consumer"}
        assert groups[old] == {"group_id": old, "group_type": "classic", "state": "Stable", "protocol_type": "consumer"}
        rows = {r[0]: r for r in table_rows(oncelog_groups(bootstrap, "list").stdout)}
        assert rows[new][1:3] == ["consumer", "Stable"] and rows[old][1:3] == ["classic", "Stable"]
    finally:
        c_new.close()
        c_old.close()


def check_describe_consumer_group(bootstrap: str) -> None:
    """Two members (one static), both topics subscribed: epochs, subscriptions, assignments, lag,
    authorized operations on request; the text form names the protocol and the members."""
    t1, t2, group = unique("ga"), unique("gb"), unique("g848")
    create_topic(bootstrap, t1, 3)
    create_topic(bootstrap, t2, 2)
    produce(bootstrap, t1, 3, 4)
    members = [consumer(bootstrap, group, "c0", [t1, t2]),
               consumer(bootstrap, group, "c1", [t1, t2], **{"group.instance.id": "static-1"})]
    try:
        poll_until(members, lambda: stable(bootstrap, group, 2), "two members reconciled")
        members[0].commit(offsets=[ck.TopicPartition(t1, 0, 3)], asynchronous=False)
        d = describe_json(bootstrap, group, "--include-authorized-operations")
        assert (d["group_type"], d["protocol_type"], d["state"], d["assignor"]) == (
            "consumer", "consumer", "Stable", "uniform")
        assert d["api"].startswith("ConsumerGroupDescribe v")
        assert d["group_epoch"] == d["assignment_epoch"] > 0
        # no authorizer: every operation Kafka 4.4 supports on a group (AclEntry.supportedOperations)
        assert d["authorized_operations"] == ["Read", "Delete", "Describe", "DescribeConfigs", "AlterConfigs"]
        by_client = {m["client_id"]: m for m in d["members"]}
        assert set(by_client) == {"c0", "c1"}
        assert by_client["c1"]["instance_id"] == "static-1" and by_client["c0"]["instance_id"] is None
        for m in d["members"]:
            assert m["member_epoch"] == d["assignment_epoch"]
            assert m["subscribed_topic_names"] == sorted([t1, t2]) and m["subscribed_topic_regex"] is None
            assert m["assignment"] == m["target_assignment"]
            assert m["pending"] == {"to_assign": {}, "to_revoke": {}}
            assert m["member_type"] in ("consumer", None)  # None: ConsumerGroupDescribe v0
        parts = owned(d["members"])
        assert sorted(parts) == sorted([(t1, p) for p in range(3)] + [(t2, p) for p in range(2)])
        assert len(parts) == len(set(parts))  # no partition owned twice
        owner_of = {(t, p): m["client_id"] for m in d["members"] for t, ps in m["assignment"].items() for p in ps}
        lag = {(r["topic"], r["partition"]): r for r in d["offsets"]}
        assert set(lag) == set(parts)  # every owned partition, committed or not
        assert (lag[(t1, 0)]["committed"], lag[(t1, 0)]["high_watermark"], lag[(t1, 0)]["lag"]) == (3, 4, 1)
        assert lag[(t1, 1)]["committed"] is None and lag[(t1, 1)]["lag"] is None and lag[(t1, 1)]["high_watermark"] == 4
        assert all(r["client_id"] == owner_of[tp] for tp, r in lag.items())
        assert describe_json(bootstrap, group)["authorized_operations"] is None  # not asked for

        text = oncelog_groups(bootstrap, "describe", group).stdout
        assert f"group {group}: protocol consumer (KIP-848), state Stable, group epoch {d['group_epoch']}, " \
               f"assignment epoch {d['assignment_epoch']}, assignor uniform" in text
        rows = {r[0]: r for r in table_rows(text) if len(r) == 9}  # the members table
        for m in d["members"]:
            row = rows[m["member_id"]]
            assert row[1:5] == [m["instance_id"] or "-", m["client_id"], m["client_host"], str(m["member_epoch"])]
            assert row[6] == row[7] != "-" and row[8] == "-"  # current = target, nothing pending
        lag_rows = {(r[0], r[1]): r for r in table_rows(text) if len(r) == 6}
        assert lag_rows[(t1, "0")][2:] == ["3", "4", "1", owner_of[(t1, 0)]]
    finally:
        for c in members:
            c.close()


class RawMember:
    """A KIP-848 member made of bare ConsumerGroupHeartbeats (oncelog.client.kafka, at the highest
    version both sides support): it reports owning what the test says, so it can hold partitions
    its target no longer has for as long as the test wants — a slow consumer that has not revoked
    yet, made deterministic (librdkafka revokes on its own schedule)."""

    def __init__(self, bootstrap: str, group: str, topics: list[str], client_id: str) -> None:
        import base64
        import uuid

        from oncelog.client.kafka import COORDINATOR_GROUP, KafkaClient

        self.client = KafkaClient(bootstrap, client_id=client_id, timeout=10)
        self.conn = self.client.coordinator(group, COORDINATOR_GROUP)
        self.version = min(1, self.conn.api_versions[68][1])
        self.group, self.topics = group, topics
        # v1 (KIP-1082): the member names itself, as Kafka's Uuid.randomUuid().toString()
        self.member_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=") if self.version else ""
        self.epoch = 0
        self.target: dict = {}  # topic id -> partitions, the last assignment the coordinator sent

    def heartbeat(self, owned: dict | None) -> None:
        """One heartbeat reporting ``owned`` (topic id -> partitions; None: unchanged since the last)."""
        from oncelog.client.wire import request_module

        m = request_module(68, self.version)
        joining = self.epoch == 0
        fields = dict(group_id=self.group, member_id=self.member_id, member_epoch=self.epoch, instance_id=None,
                      rack_id=None, rebalance_timeout=datetime.timedelta(seconds=60) if joining else datetime.timedelta(milliseconds=-1),
                      subscribed_topic_names=tuple(self.topics) if joining else None, server_assignor=None,
                      topic_partitions=None if owned is None else tuple(
                          m.TopicPartitions(topic_id=t, partitions=tuple(ps)) for t, ps in owned.items()))
        if self.version >= 1:
            fields["subscribed_topic_regex"] = None
        resp = self.conn.request(m.ConsumerGroupHeartbeatRequest(**fields))
        assert resp.error_code == 0, (resp.error_code, resp.error_message)
        self.member_id, self.epoch = resp.member_id, resp.member_epoch
        if resp.assignment is not None:
            self.target = {t.topic_id: sorted(t.partitions) for t in resp.assignment.topic_partitions}

    def leave(self) -> None:
        self.epoch = -1
        try:
            self.heartbeat(None)
        finally:
            self.client.close()


def check_describe_shows_pending_assignment(bootstrap: str) -> None:
    """c0 owns every partition; c1 joins; c0 goes on heartbeating that it owns them all (it has
    not revoked yet): the describe shows c0's partitions to revoke and c1's to assign, c0's
    current assignment still holding them (Kafka counts partitions pending revocation as the
    member's), never one partition in two current assignments, the group Reconciling; once c0
    reports having revoked them, both reconcile. c0 is a :class:`RawMember`."""
    topic, group = unique("pend"), unique("g848")
    create_topic(bootstrap, topic, 4)
    c0 = RawMember(bootstrap, group, [topic], "c0")
    c1 = None
    try:
        c0.heartbeat(owned={})

        def c0_owns_all():
            c0.heartbeat(owned=c0.target)  # takes whatever it is given
            return stable(bootstrap, group, 1) if sum(map(len, c0.target.values())) == 4 else None

        poll_until([], c0_owns_all, "c0 owns every partition", group=(bootstrap, group))
        everything = dict(c0.target)
        c1 = consumer(bootstrap, group, "c1", [topic])

        def c1_waits_for_partitions():
            # c1 has taken the new assignment epoch (Kafka's UNRELEASED_PARTITIONS): it waits
            # only for the partitions c0 has not revoked.
            c0.heartbeat(owned=everything)
            d = describe_now(bootstrap, group)
            new = [m for m in d.members if m.client_id == "c1"] if d is not None else []
            return d if new and new[0].pending()[0] and new[0].member_epoch == d.assignment_epoch else None

        poll_until([c1], c1_waits_for_partitions, "c1 at the assignment epoch, waiting for partitions c0 still owns",
                   group=(bootstrap, group))
        for _ in range(3):  # each answered heartbeat of c0's, still owning everything, changes nothing
            c0.heartbeat(owned=everything)
            d = describe_json(bootstrap, group)
            assert d["state"] == "Reconciling"  # Kafka: a member not at its target makes the group so
            by_client = {m["client_id"]: m for m in d["members"]}
            old, new = by_client["c0"], by_client["c1"]
            parts = owned(d["members"])
            assert len(parts) == len(set(parts))  # c1 gets nothing c0 has not given back
            assert sorted(owned(d["members"], "target_assignment")) == [(topic, p) for p in range(4)]
            assert new["pending"]["to_assign"] and not new["pending"]["to_revoke"] and not new["assignment"]
            # What moves from c0 to c1: c0's current assignment still holds it, its target no longer does.
            assert old["pending"]["to_revoke"] == new["pending"]["to_assign"]
            assert sorted(owned([old])) == [(topic, p) for p in range(4)]
            assert old["member_epoch"] < d["assignment_epoch"] == new["member_epoch"]

        text = oncelog_groups(bootstrap, "describe", group).stdout
        rows = {r[2]: r for r in table_rows(text) if len(r) == 9}
        moving = ";".join(f"{t}:{','.join(map(str, ps))}" for t, ps in new["pending"]["to_assign"].items())
        assert rows["c0"][8] == f"-{moving}" and rows["c1"][8] == f"+{moving}"

        def reconciled():
            c0.heartbeat(owned=c0.target)  # now it revokes: owns just its new target
            return stable(bootstrap, group, 2)

        d = poll_until([c1], reconciled, "both members reconciled", group=(bootstrap, group))
        by_client = {m.client_id: m for m in d.members}
        assert by_client["c1"].assignment == new["pending"]["to_assign"]
        assert by_client["c0"].assignment == old["target_assignment"]
    finally:
        c0.leave()
        if c1 is not None:
            c1.close()


def check_describe_regex_subscription(bootstrap: str) -> None:
    """A member subscribed by a regular expression (resolved by the broker): the describe shows
    the regex, and the matching topics end up in its assignment."""
    prefix = unique("rx").replace("-", "_")
    topics = [f"{prefix}_a", f"{prefix}_b"]
    for t in topics:
        create_topic(bootstrap, t, 1)
    group = unique("g848")
    c = consumer(bootstrap, group, "rx", [f"^{prefix}_.*"])
    try:
        def assigned():
            d = stable(bootstrap, group, 1)
            return d if d is not None and sorted(d.members[0].assignment) == topics else None

        poll_until([c], assigned, "both matching topics assigned")
        [m] = describe_json(bootstrap, group)["members"]
        assert prefix in m["subscribed_topic_regex"] and m["subscribed_topic_names"] == []
        assert m["assignment"] == {t: [0] for t in topics}
        assert "regex" in oncelog_groups(bootstrap, "describe", group).stdout
    finally:
        c.close()


def check_describe_mixed_group(bootstrap: str) -> None:
    """A classic consumer (JoinGroup, protocol type consumer) joining a consumer group becomes a
    member of it, as Kafka 4.4 allows: the group stays type consumer, and the describe marks that
    member classic (ConsumerGroupDescribe v1 member_type) beside the KIP-848 one."""
    topic, group = unique("mix"), unique("g848")
    create_topic(bootstrap, topic, 4)
    new = consumer(bootstrap, group, "new", [topic])
    old = None
    try:
        poll_until([new], lambda: stable(bootstrap, group, 1), "the KIP-848 member owns every partition")
        old = classic_consumer(bootstrap, group, "old", [topic])

        def both_assigned():
            d = stable(bootstrap, group, 2)
            return d if d is not None and all(m.assignment for m in d.members) else None

        poll_until([new, old], both_assigned, "both members assigned", group=(bootstrap, group))
        d = describe_json(bootstrap, group)
        assert d["group_type"] == "consumer" and d["state"] == "Stable"
        by_client = {m["client_id"]: m for m in d["members"]}
        assert by_client["old"]["member_type"] == "classic" and by_client["new"]["member_type"] == "consumer"
        assert sorted(owned(d["members"])) == [(topic, p) for p in range(4)]
        rows = {r[2]: r for r in table_rows(oncelog_groups(bootstrap, "describe", group).stdout) if len(r) == 9}
        assert rows["old"][4].endswith("(classic member)") and rows["new"][4] == str(d["assignment_epoch"])
        listed = {g["group_id"]: g for g in json.loads(oncelog_groups(bootstrap, "list", "--json").stdout)}
        assert listed[group]["group_type"] == "consumer"
    finally:
        new.close()
        if old is not None:
            old.close()


def check_describe_classic_group(bootstrap: str) -> None:
    """A classic group: ConsumerGroupDescribe answers GROUP_ID_NOT_FOUND, the command falls back
    to DescribeGroups and keeps the classic output, labelled classic."""
    topic, group = unique("cl"), unique("gclassic")
    create_topic(bootstrap, topic, 2)
    c = classic_consumer(bootstrap, group, "cl", [topic])
    try:
        def described():
            d = describe_now(bootstrap, group)
            return d if d is not None and d.state == "Stable" and d.members and d.members[0].assignment else None

        poll_until([c], described, "the classic member assigned")
        d = describe_json(bootstrap, group)
        assert (d["group_type"], d["protocol_type"], d["state"], d["assignor"]) == (
            "classic", "consumer", "Stable", "range")
        assert d["api"].startswith("DescribeGroups v")
        assert d["group_epoch"] is None and d["assignment_epoch"] is None
        [m] = d["members"]
        assert m["client_id"] == "cl" and m["assignment"] == {topic: [0, 1]}
        assert m["member_epoch"] is None and m["target_assignment"] is None and "pending" not in m
        text = oncelog_groups(bootstrap, "describe", group).stdout
        assert f"group {group}: protocol classic (protocol type consumer), state Stable, assignor range" in text
        assert f"{topic}-0, {topic}-1" in text
    finally:
        c.close()


def check_describe_unknown_group(bootstrap: str) -> None:
    group = unique("nosuch")
    proc = oncelog_groups(bootstrap, "describe", group, check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"oncelog groups describe: GROUP_ID_NOT_FOUND: Group {group} not found."


def check_delete_consumer_group(bootstrap: str) -> None:
    """An empty consumer group, with a committed offset, is deleted and then unknown."""
    topic, group = unique("del"), unique("g848")
    create_topic(bootstrap, topic, 1)
    c = consumer(bootstrap, group, "d", [topic])
    poll_until([c], lambda: stable(bootstrap, group, 1), "the member assigned")
    c.commit(offsets=[ck.TopicPartition(topic, 0, 0)], asynchronous=False)
    c.close()  # leaves the group (epoch -1)
    listed = {g["group_id"]: g for g in json.loads(oncelog_groups(bootstrap, "list", "--json").stdout)}
    assert listed[group]["group_type"] == "consumer" and listed[group]["state"] == "Empty"
    oncelog_groups(bootstrap, "delete", group)
    assert group not in {g["group_id"] for g in json.loads(oncelog_groups(bootstrap, "list", "--json").stdout)}
    assert oncelog_groups(bootstrap, "describe", group, check=False).returncode == 1


# -- against oncelog ----------------------------------------------------------------------------

def test_list_shows_type_and_state(broker):
    check_list_shows_type_and_state(broker.bootstrap)


def test_describe_consumer_group(broker):
    check_describe_consumer_group(broker.bootstrap)


def test_describe_shows_pending_assignment(broker):
    check_describe_shows_pending_assignment(broker.bootstrap)


def test_describe_regex_subscription(broker):
    check_describe_regex_subscription(broker.bootstrap)


def test_describe_mixed_group(broker):
    check_describe_mixed_group(broker.bootstrap)


def test_describe_classic_group(broker):
    check_describe_classic_group(broker.bootstrap)


def test_describe_unknown_group(broker):
    check_describe_unknown_group(broker.bootstrap)


def test_delete_consumer_group(broker):
    check_delete_consumer_group(broker.bootstrap)


# -- over SASL, with the authorizer: --command-config and authorized operations (oncelog only:
# it configures the broker) ---------------------------------------------------------------------

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')


def _sasl(user: str, password: str) -> dict:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": user,
            "sasl.password": password}


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_over_sasl_with_authorized_operations(broker_factory, tmp_path, protocol):
    """alice, allowed Read and Describe on her group (and Read, Describe on its topic), lists and
    describes it through --command-config; the authorized operations she asks for are exactly
    those two; the admin (a super user) gets every operation a group supports; a connection
    without SASL to the SASL listener is a one-line error, exit 1."""
    from .helpers import free_port

    port = free_port()
    broker_factory(extra_args=[
        "--override", f"listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{port}",
        "--override", f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}",
        "--override", "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "--override", "super.users=User:admin"])
    sasl = f"127.0.0.1:{port}"
    props = {}
    for user in ("admin", "alice"):
        path = tmp_path / f"{user}.properties"
        path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                        f'username="{user}" password="{user}-secret";\n')
        props[user] = str(path)
    topic, group = "orders", "billing"
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": sasl, **_sasl("admin", "admin-secret")})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    acl = subprocess.run([sys.executable, "-m", "oncelog", "acls", "add", "--allow-principal", "User:alice",
                          "--consumer", "--topic", topic, "--group", group, "--bootstrap-server", sasl,
                          "--command-config", props["admin"]], capture_output=True, text=True, timeout=120)
    assert acl.returncode == 0, acl.stderr
    conf = {"bootstrap.servers": sasl, "group.id": group, "client.id": "alice-1", **_sasl("alice", "alice-secret")}
    if protocol == "consumer":
        conf["group.protocol"] = "consumer"
    c = ck.Consumer(conf)
    c.subscribe([topic])
    try:
        def assigned():
            proc = oncelog_groups(sasl, "describe", group, "--json", "--command-config", props["alice"], check=False)
            d = json.loads(proc.stdout) if proc.returncode == 0 else None
            return d if d and d["state"] == "Stable" and owned(d["members"]) else None

        d = poll_until([c], assigned, "alice's member assigned, described as alice")
        assert d["group_type"] == protocol and d["authorized_operations"] is None
        d = describe_json(sasl, group, "--include-authorized-operations", "--command-config", props["alice"])
        assert d["authorized_operations"] == ["Read", "Describe"]
        assert sorted(owned(d["members"])) == [(topic, 0), (topic, 1)]
        d = describe_json(sasl, group, "--include-authorized-operations", "--command-config", props["admin"])
        assert d["authorized_operations"] == ["Read", "Delete", "Describe", "DescribeConfigs", "AlterConfigs"]
        listed = json.loads(oncelog_groups(sasl, "list", "--json", "--command-config", props["alice"]).stdout)
        assert [(g["group_id"], g["group_type"]) for g in listed] == [(group, protocol)]
        proc = oncelog_groups(sasl, "describe", group, check=False)  # no SASL: the listener drops it
        assert proc.returncode == 1 and "SASL_PLAINTEXT" in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    finally:
        c.close()
