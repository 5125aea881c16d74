"""Streams groups (KIP-1071), sans-IO: topology checks and configuration, the sticky assignor,
the coordinator's heartbeat (join, statuses, the handover of tasks by revocation, leave, session
expiry), offset-commit checks, and the records (round trip, replay, hostile bytes)."""

from __future__ import annotations

import random
import uuid

import pytest

from oncelog import errors
from oncelog.groups import records as gr
from oncelog.groups import streams_records as sr
from oncelog.groups.streams_assignor import MemberSpec, assign
from oncelog.groups.streams_coordinator import HeartbeatRequest, StreamsGroupCoordinator
from oncelog.groups.streams_group import STABLE, UNREVOKED_TASKS, StreamsGroup
from oncelog.groups.streams_topology import (
    Configured, StreamsInvalidTopology, Subtopology, TopicInfo, Topology, check_topic_names, check_topology, configure,
)

T = Topology(0, (Subtopology("0", source_topics=("in",), repartition_sink_topics=("app-rep",)),
                 Subtopology("1", repartition_source_topics=(TopicInfo("app-rep", 0, -1, (("cleanup.policy", "delete"),)),),
                             state_changelog_topics=(TopicInfo("app-store-changelog", 0, -1,
                                                               (("cleanup.policy", "compact"),)),))))


def topics(**counts):
    return {n.replace("_", "-"): (uuid.uuid5(uuid.NAMESPACE_DNS, n), c) for n, c in counts.items()}


# ---------------------------------------------------------------------- topology


def test_topology_checks_with_kafkas_errors():
    bad = Topology(0, (Subtopology("0", source_topics=("a",), state_changelog_topics=(TopicInfo("c", 3),)),))
    with pytest.raises(StreamsInvalidTopology, match="Changelog topic c must have an undefined partition count, but "
                                                     "it is set to 3."):
        check_topology(bad)
    with pytest.raises(errors.InvalidRequest, match="Regular expressions for source topics are not supported yet."):
        check_topology(Topology(0, (Subtopology("0", source_topic_regex=("a.*",)),)))
    with pytest.raises(StreamsInvalidTopology, match="index out of range"):
        check_topology(Topology(0, (Subtopology("0", source_topics=("a",), copartition_groups=(((5,), (), ()),)),)))
    with pytest.raises(StreamsInvalidTopology, match="more than"):
        check_topology(Topology(0, tuple(Subtopology(str(i), source_topics=("a",)) for i in range(1001))))
    with pytest.raises(StreamsInvalidTopology, match="Use of Kafka internal topics __consumer_offsets in a Kafka "
                                                     "Streams topology is prohibited."):
        check_topic_names(["a", "__consumer_offsets"])
    with pytest.raises(StreamsInvalidTopology, match="Topic names a b are not valid topic names."):
        check_topic_names(["ok", "a b"])


def test_configure_missing_sources_then_internal_topics_then_ready():
    c = configure(T, {})
    assert c.statuses == ((1, "Source topics in are missing."),) and not c.tasks and not c.ready
    c = configure(T, topics(**{"in": 4}))
    assert c.tasks == {"0": 4, "1": 4} and [s[0] for s in c.statuses] == [3]
    assert sorted(t[:3] for t in c.to_create) == [("app-rep", 4, -1), ("app-store-changelog", 4, -1)]
    assert dict(c.to_create[0][3]) in ({"cleanup.policy": "delete"}, {"cleanup.policy": "compact"})
    c = configure(T, topics(**{"in": 4, "app_rep": 4, "app_store_changelog": 4}))
    assert c.ready and c.tasks == {"0": 4, "1": 4}
    c = configure(T, topics(**{"in": 4, "app_rep": 2, "app_store_changelog": 4}))
    assert [s[0] for s in c.statuses] == [2] and "found 2" in c.statuses[0][1] and not c.tasks


def test_a_repartition_topic_never_written_is_an_invalid_topology():
    loop = Topology(0, (Subtopology("0", repartition_source_topics=(TopicInfo("r1"),), repartition_sink_topics=("r2",)),
                        Subtopology("1", repartition_source_topics=(TopicInfo("r2"),), repartition_sink_topics=("r1",))))
    with pytest.raises(StreamsInvalidTopology, match="loops"):
        configure(loop, {})
    never = Topology(0, (Subtopology("0", repartition_source_topics=(TopicInfo("r1"),)),))
    with pytest.raises(StreamsInvalidTopology, match="never used as a sink"):
        configure(never, {})


# ---------------------------------------------------------------------- assignor


def test_sticky_assignor_balances_by_process_and_keeps_owners():
    tasks = {"0": 4, "1": 2}
    out = assign({"a": MemberSpec("p1"), "b": MemberSpec("p2")}, tasks)
    assert sorted(len(v) for v in out.values()) == [3, 3] and out["a"] | out["b"] == {
        (s, p) for s, n in tasks.items() for p in range(n)}
    again = assign({"a": MemberSpec("p1", out["a"]), "b": MemberSpec("p2", out["b"])}, tasks)
    assert again == out  # sticky
    alone = assign({"b": MemberSpec("p2", out["b"])}, tasks)
    assert len(alone["b"]) == 6 and out["b"] <= alone["b"]
    assert assign({}, tasks) == {}


# ---------------------------------------------------------------------- coordinator


class Harness:
    def __init__(self, **counts) -> None:
        self.now = 1000
        self.topics = topics(**counts)
        self.log: list = []
        self.fail = False
        self.groups: dict = {}
        self.c = StreamsGroupCoordinator(self.groups, lambda: self.now, self.persist, lambda: self.topics)

    def persist(self, gid, records, on_done):
        if self.fail:
            return on_done(errors.KafkaStorageError("disk full"))
        self.log += records
        on_done(None)

    def hb(self, member, epoch, **kw):
        out = []
        kw.setdefault("settings", {"initial.rebalance.delay.ms": 0, "assignment.interval.ms": 0})
        if epoch == 0:
            kw.setdefault("topology", T)
            kw.setdefault("rebalance_timeout_ms", 30000)
            kw.setdefault("process_id", "p-" + member)
            for k in ("active", "standby", "warmup"):
                kw.setdefault(k, frozenset())
        self.c.heartbeat(HeartbeatRequest("app", member, epoch, **kw), out.append)
        [r] = out
        return r


def own(tasks):
    return dict(active=frozenset(tasks), standby=frozenset(), warmup=frozenset())


def test_join_reports_missing_topics_then_assigns_once_ready():
    h = Harness()
    r = h.hb("a", 0)
    assert r.error is None and [s[0] for s in r.statuses] == [1] and r.active == frozenset()
    g = h.groups["app"]
    assert g.state.value == "NotReady"
    h.topics.update(topics(**{"in": 2}))
    r = h.hb("a", r.member_epoch, **own(()))
    assert [s[0] for s in r.statuses] == [3] and {t[0] for t in r.to_create} == {"app-rep", "app-store-changelog"}
    h.topics.update(topics(**{"app_rep": 2, "app_store_changelog": 2}))
    r = h.hb("a", r.member_epoch, **own(()))
    assert r.error is None and r.statuses == () and len(r.active) == 4 and r.member_epoch == g.group_epoch
    assert g.state.value == "Stable"


def test_a_task_moves_only_after_its_owner_revoked_it():
    h = Harness(**{"in": 2, "app_rep": 2, "app_store_changelog": 2})
    a = h.hb("a", 0)
    assert len(a.active) == 4  # the join's answer: all tasks
    a_tasks = a.active
    a = h.hb("a", a.member_epoch, **own(a_tasks))
    assert a.active is None  # unchanged: not sent
    b = h.hb("b", 0)
    assert b.active == frozenset()  # a still holds what b is to get
    g = h.groups["app"]
    assert g.members["b"].state == 3  # UNRELEASED_TASKS
    a2 = h.hb("a", a.member_epoch, **own(a_tasks))
    assert len(a2.active) == 2 and g.members["a"].state == UNREVOKED_TASKS and a2.member_epoch == a.member_epoch
    b = h.hb("b", b.member_epoch, **own(()))
    assert b.active is None or b.active == frozenset()  # still held by a
    a3 = h.hb("a", a2.member_epoch, **own(a2.active))  # revoked
    assert g.members["a"].state == STABLE and a3.member_epoch == g.assignment_epoch
    b = h.hb("b", b.member_epoch, **own(()))
    assert len(b.active) == 2 and not (b.active & a2.active)
    assert g.state.value == "Stable"


def test_session_expiry_moves_the_dead_members_tasks_and_leave_empties():
    h = Harness(**{"in": 2, "app_rep": 2, "app_store_changelog": 2})
    a = h.hb("a", 0)
    b = h.hb("b", 0)
    for _ in range(3):
        a = h.hb("a", a.member_epoch, **own(h.groups["app"].members["a"].active))
        b = h.hb("b", b.member_epoch, **own(h.groups["app"].members["b"].active))
    g = h.groups["app"]
    assert len(g.members["a"].active) == 2 and len(g.members["b"].active) == 2
    h.now += 45000
    h.hb("b", b.member_epoch, **own(g.members["b"].active))
    h.now += 1
    h.c.tick()
    assert list(g.members) == ["b"]
    b = h.hb("b", g.members["b"].member_epoch, **own(g.members["b"].active))
    b = h.hb("b", b.member_epoch, **own(g.members["b"].active))
    assert len(g.members["b"].active) == 4
    r = h.hb("b", -1)
    assert r.error is None and r.member_epoch == -1 and g.state.value == "Empty"


def test_heartbeat_errors_are_kafkas():
    h = Harness(**{"in": 2})
    assert isinstance(h.hb("a", 3, **own(())).error, errors.GroupIdNotFound)
    assert isinstance(h.hb("a", 0, rebalance_timeout_ms=-1).error, errors.InvalidRequest)
    assert str(h.hb("a", 0, active=frozenset({("0", 1)})).error) == "ActiveTasks must be empty when (re-)joining."
    assert str(h.hb("a", 5, active=frozenset(), standby=None, warmup=None).error).startswith("If one task-type")
    assert str(h.hb("", 0).error) == "MemberId can't be empty."
    a = h.hb("a", 0)
    assert isinstance(h.hb("zz", 1, **own(())).error, errors.UnknownMemberId)
    assert isinstance(h.hb("a", a.member_epoch + 5, **own(())).error, errors.FencedMemberEpoch)
    other = Topology(0, (Subtopology("0", source_topics=("in", "x")),))
    assert str(h.hb("b", 0, topology=other).error) == "Topology updates are not supported yet."
    stale = h.hb("c", 0, topology=Topology(-1, T.subtopologies))
    assert stale.error is None and [s[0] for s in stale.statuses][:1] == [0]
    h.groups["plain"] = __import__("oncelog.groups.consumer_state", fromlist=["x"]).new_group("plain", 0)
    out = []
    h.c.heartbeat(HeartbeatRequest("plain", "m", 0, rebalance_timeout_ms=1, topology=T, active=frozenset(),
                                   standby=frozenset(), warmup=frozenset()), out.append)
    assert str(out[0].error) == "Group plain is not a streams group."


def test_a_failed_write_puts_the_group_back():
    h = Harness(**{"in": 2})
    h.fail = True
    r = h.hb("a", 0)
    assert isinstance(r.error, errors.KafkaStorageError) and "app" not in h.groups


def test_initial_rebalance_delay_then_timer_assigns():
    h = Harness(**{"in": 2, "app_rep": 2, "app_store_changelog": 2})
    r = h.hb("a", 0, settings={"initial.rebalance.delay.ms": 3000})
    assert [s[0] for s in r.statuses] == [5] and h.groups["app"].assignment_epoch == 1 and r.member_epoch == 1
    h.now += 3000
    h.c.tick()
    g = h.groups["app"]
    assert g.assignment_epoch == g.group_epoch and len(g.target["a"]) == 4
    r = h.hb("a", r.member_epoch, **own(()))
    assert len(r.active) == 4


def test_offset_commit_checks():
    h = Harness(**{"in": 2, "app_rep": 2, "app_store_changelog": 2})
    a = h.hb("a", 0)
    a = h.hb("a", a.member_epoch, **own(a.active))
    g = h.groups["app"]
    check = StreamsGroupCoordinator.offset_commit
    assert check(g, "a", a.member_epoch, transactional=True, api_version=99) is None
    with pytest.raises(errors.StaleMemberEpoch):
        check(g, "a", a.member_epoch + 1, transactional=True, api_version=99)
    with pytest.raises(errors.UnknownMemberId):
        check(g, "zz", 1, transactional=True, api_version=99)
    with pytest.raises(errors.UnsupportedVersion):
        check(g, "a", a.member_epoch, transactional=False, api_version=8)
    per = check(g, "a", a.member_epoch - 1, transactional=True, api_version=99)
    assert isinstance(per("nope", 0), errors.StaleMemberEpoch)
    assert isinstance(per("in", 0), errors.StaleMemberEpoch)  # assigned at the current epoch, later than asked
    assert check(g, "", -1, transactional=True, api_version=99) is None


# ---------------------------------------------------------------------- records


def test_records_round_trip_and_replay_rebuilds_the_group():
    h = Harness(**{"in": 2, "app_rep": 2, "app_store_changelog": 2})
    a = h.hb("a", 0, user_endpoint=("host", 65535), client_tags=(("k", "v"),))
    a = h.hb("a", a.member_epoch, **own(a.active))
    b = h.hb("b", 0)
    g = h.groups["app"]
    fresh: dict = {}
    c2 = StreamsGroupCoordinator(fresh, lambda: h.now, None, lambda: h.topics)
    for key, value in h.log:
        k = gr.decode_key(key)
        assert isinstance(k, sr.STREAMS_KEYS)
        v = sr.decode_streams_value(k, value) if value is not None else None
        if v is not None:
            assert sr.encode_streams_value(v) == value  # byte for byte
        c2.load(k, v)
    c2.finish_load()
    g2 = fresh["app"]
    assert (g2.group_epoch, g2.assignment_epoch, g2.topology, g2.target) == (
        g.group_epoch, g.assignment_epoch, g.topology, g.target)
    for mid, m in g.members.items():
        m2 = g2.members[mid]
        assert m2.metadata() == m.metadata() and m2.assignment() == m.assignment()
    assert g2.members["a"].user_endpoint == ("host", 65535)
    assert b.error is None


def test_tombstones_replay_removes_the_group():
    g = StreamsGroup("x")
    fresh = {"x": StreamsGroup("x")}
    c = StreamsGroupCoordinator(fresh, lambda: 0, None, dict)
    for key, value in g.tombstones():
        c.load(gr.decode_key(key), value)
    assert "x" not in fresh


def test_hostile_bytes_raise_value_error_only():
    rng = random.Random(7)
    value = sr.encode_streams_value(T)
    keys = [sr.StreamsGroupTopologyKey("g"), sr.StreamsGroupMemberMetadataKey("g", "m"),
            sr.StreamsGroupCurrentMemberAssignmentKey("g", "m"), sr.StreamsGroupMetadataKey("g"),
            sr.StreamsGroupTargetAssignmentMemberKey("g", "m"), sr.StreamsGroupTargetAssignmentMetadataKey("g")]
    for _ in range(3000):
        data = bytearray(value)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        data = bytes(data[:rng.randint(0, len(data))])
        for k in keys:
            try:
                sr.decode_streams_value(k, data)
            except ValueError:
                pass


def test_configured_ready_means_no_status():
    assert Configured().ready and not Configured(statuses=((3, "x"),)).ready
