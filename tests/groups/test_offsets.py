"""Group coordinator: offsets retention, offsets, delete_groups (state-machine tests, no sockets; see harness.py)."""

from __future__ import annotations

import pytest

from .harness import *  # noqa: F403 (the shared harness and record helpers)


def test_validate_offset_commit():
    h = Harness()
    (a, b), gen = stable_group(h, 2)
    assert h.coord.validate_offset_commit("g", gen, a, None) == E.none
    assert h.coord.validate_offset_commit("g", gen, "ghost", None) == E.unknown_member_id
    assert h.coord.validate_offset_commit("g", gen - 1, a, None) == E.illegal_generation
    assert h.coord.validate_offset_commit("g", -1, "", None) == E.unknown_member_id  # non-empty group
    assert h.coord.validate_offset_commit("unknown", 3, "x", None) == E.group_id_not_found  # OffsetCommit v9+
    assert "unknown" not in h.coord.groups
    h.join("g", a)  # PreparingRebalance: commits still allowed
    assert h.coord.validate_offset_commit("g", gen, b, None) == E.none
    h.join("g", b)  # CompletingRebalance
    assert h.coord.validate_offset_commit("g", gen + 1, b, None) == E.rebalance_in_progress


def test_validate_offset_commit_refreshes_session():
    h = Harness()
    (a,), gen = stable_group(h, 1)
    h.tick(SESSION - 1)
    assert h.coord.validate_offset_commit("g", gen, a, None) == E.none
    h.tick(SESSION - 1)
    assert a in h.group().members


def test_generation_minus_one_on_unknown_group_creates_simple_group():
    h = Harness()
    assert h.coord.validate_offset_commit("simple", -1, "", None) == E.none
    g = h.group("simple")
    assert g.state is S.EMPTY and not g.members and g.protocol_type is None
    assert commit(h, "simple", {("t", 0): ov(5, h.now)}).result == E.none
    assert h.coord.fetch_offsets("simple", [("t", 0)]) == {("t", 0): ov(5, h.now)}
    # again: the now-existing Empty group accepts generation -1 commits
    assert h.coord.validate_offset_commit("simple", -1, "", None) == E.none


def test_commit_persists_then_applies():
    h = Harness(persist_mode="defer")
    offsets = {("t", 0): ov(10, h.now, "m0"), ("t", 1): ov(20, h.now)}
    h.coord.validate_offset_commit("g", -1, "", None)
    done = commit(h, "g", offsets)
    assert not done.called
    assert h.coord.fetch_offsets("g", None) == {}, "offsets must not be visible before they are durable"
    ((gid, recs),) = h.persisted
    assert gid == "g"
    assert [(decode_key(k), decode_offset_value(v)) for k, v in recs] == [
        (OffsetKey("g", "t", 0), offsets[("t", 0)]),
        (OffsetKey("g", "t", 1), offsets[("t", 1)]),
    ]
    h.release()
    assert done.result == E.none
    assert h.coord.fetch_offsets("g", None) == offsets


def test_failed_commit_is_not_applied():
    h = Harness(persist_mode="fail")
    h.coord.validate_offset_commit("g", -1, "", None)
    done = commit(h, "g", {("t", 0): ov(10, h.now)})
    assert done.result == E.not_coordinator
    assert h.coord.fetch_offsets("g", None) == {}
    assert len(h.persisted) == 1  # it was attempted


def test_commit_overwrites_and_keeps_other_partitions():
    h = Harness()
    h.coord.validate_offset_commit("g", -1, "", None)
    commit(h, "g", {("t", 0): ov(1, 1), ("t", 1): ov(1, 1)})
    commit(h, "g", {("t", 0): ov(2, 2)})
    assert h.coord.fetch_offsets("g", None) == {("t", 0): ov(2, 2), ("t", 1): ov(1, 1)}


def test_fetch_offsets():
    h = Harness()
    h.coord.validate_offset_commit("g", -1, "", None)
    commit(h, "g", {("t", 0): ov(7, 1), ("u", 3): ov(9, 1)})
    assert h.coord.fetch_offsets("g", None) == {("t", 0): ov(7, 1), ("u", 3): ov(9, 1)}
    assert h.coord.fetch_offsets("g", [("t", 0), ("t", 1)]) == {("t", 0): ov(7, 1), ("t", 1): None}
    assert h.coord.fetch_offsets("unknown", [("t", 0)]) == {("t", 0): None}
    assert h.coord.fetch_offsets("unknown", None) == {}


def test_delete_offsets_refuses_subscribed_topics():
    h = Harness()
    (a, b), gen = stable_group(h, 2, protocols=[("range", subscription("t1", "t2"))])
    commit(h, "g", {("t1", 0): ov(1, 1), ("t3", 0): ov(3, 1)})
    out = Once("delete_offsets")
    h.coord.delete_offsets("g", [("t1", 0), ("t3", 0), ("t4", 0)], lambda err, res: out((err, res)))
    err, res = out.result
    assert err == E.none
    assert res == {("t1", 0): E.group_subscribed_to_topic, ("t3", 0): E.none, ("t4", 0): E.none}
    assert h.coord.fetch_offsets("g", None) == {("t1", 0): ov(1, 1)}
    assert h.records("g")[-1] == (OffsetKey("g", "t3", 0), None)


def test_delete_offsets_of_an_empty_group_and_unknown_group():
    h = Harness()
    (a,), gen = stable_group(h, 1, protocols=[("range", subscription("t1"))])
    commit(h, "g", {("t1", 0): ov(1, 1)})
    h.coord.leave("g", [(a, None)])
    out = Once()
    h.coord.delete_offsets("g", [("t1", 0)], lambda err, res: out((err, res)))
    assert out.result == (E.none, {("t1", 0): E.none})
    assert h.coord.fetch_offsets("g", None) == {}
    out2 = Once()
    h.coord.delete_offsets("nope", [("t1", 0)], lambda err, res: out2((err, res)))
    assert out2.result == (E.group_id_not_found, {})


def test_delete_offsets_of_non_consumer_group_with_members_is_non_empty_group():
    h = Harness()
    stable_group(h, 1, protocol_type="connect", protocols=[("default", b"\x00")])
    out = Once()
    h.coord.delete_offsets("g", [("t1", 0)], lambda err, res: out((err, res)))
    assert out.result[0] == E.non_empty_group


def test_delete_offsets_failed_persist_keeps_them():
    h = Harness()
    h.coord.validate_offset_commit("g", -1, "", None)
    commit(h, "g", {("t", 0): ov(1, 1)})
    h.persist_mode = "fail"
    out = Once()
    h.coord.delete_offsets("g", [("t", 0)], lambda err, res: out((err, res)))
    assert out.result[0] == E.not_coordinator
    assert h.coord.fetch_offsets("g", None) == {("t", 0): ov(1, 1)}


def test_delete_groups():
    h = Harness()
    stable_group(h, 1, group="busy")
    h.coord.validate_offset_commit("idle", -1, "", None)
    commit(h, "idle", {("t", 0): ov(1, 1), ("t", 1): ov(2, 1)})
    before = len(h.persisted)
    out = Once()
    h.coord.delete_groups(["busy", "idle", "nope"], out)
    assert out.result == {"busy": E.non_empty_group, "idle": E.none, "nope": E.group_id_not_found}
    assert "idle" not in h.coord.groups and h.group("busy").state is S.STABLE
    tombstones = [(decode_key(k), v) for _, recs in h.persisted[before:] for k, v in recs]
    assert sorted(tombstones, key=repr) == sorted(
        [(OffsetKey("idle", "t", 0), None), (OffsetKey("idle", "t", 1), None), (GroupKey("idle"), None)], key=repr)
    assert h.coord.fetch_offsets("idle", None) == {}


def test_delete_groups_nothing_to_delete_answers_at_once():
    h = Harness()
    stable_group(h, 1)
    out = Once()
    h.coord.delete_groups(["g", "x"], out)
    assert out.result == {"g": E.non_empty_group, "x": E.group_id_not_found}


def test_delete_groups_reports_persist_failure():
    h = Harness()
    h.coord.validate_offset_commit("idle", -1, "", None)
    h.persist_mode = "fail"
    out = Once()
    h.coord.delete_groups(["idle", "nope"], out)
    assert out.result == {"idle": E.not_coordinator, "nope": E.group_id_not_found}


def test_delete_groups_waits_for_every_group_store():
    h = Harness(persist_mode="defer")
    for gid in ("g1", "g2"):
        h.coord.validate_offset_commit(gid, -1, "", None)
    out = Once()
    h.coord.delete_groups(["g1", "g2"], out)
    assert len(h.deferred) == 2 and not out.called
    first, second = h.deferred
    h.deferred = []
    first(E.none)
    assert not out.called
    second(E.none)
    assert out.result == {"g1": E.none, "g2": E.none}


def test_delete_groups_whose_tombstones_are_refused_are_back_with_their_offsets():
    """The pattern test_txn_offsets_durable.py checks for transactions: state changed before its records are durable. A group whose
    tombstones the log refused would come back at the next restart; it is reverted at once
    (Empty, its offsets kept), and only the groups whose tombstones are durable are gone."""
    h = Harness(persist_mode="defer")
    for gid in ("kept", "gone"):
        h.coord.validate_offset_commit(gid, -1, "", None)
        h.persist_mode = "ok"
        commit(h, gid, {("t", 0): ov(7, 1)})
        h.persist_mode = "defer"
    out = Once()
    h.coord.delete_groups(["kept", "gone"], out)
    stores = dict(zip((gid for gid, _ in h.persisted[-2:]), h.deferred))
    h.deferred = []
    stores["kept"](E.kafka_storage_error)
    stores["gone"](E.none)
    assert out.result == {"kept": E.not_coordinator, "gone": E.none}
    assert h.group("kept").state is S.EMPTY and h.coord.fetch_offsets("kept", None) == {("t", 0): ov(7, 1)}
    assert "gone" not in h.coord.groups


def test_delete_groups_with_duplicate_ids():
    h = Harness()
    h.coord.validate_offset_commit("idle", -1, "", None)
    out = Once()
    h.coord.delete_groups(["idle", "idle"], out)
    assert out.result == {"idle": E.none}


def test_simple_group_offsets_expire_after_retention():
    cfg = GroupConfig(offsets_retention_ms=60_000)
    h = Harness(cfg)
    h.coord.validate_offset_commit("s", -1, "", None)
    t0 = h.now
    commit(h, "s", {("t", 0): ov(1, t0)})
    h.advance(30_000)
    commit(h, "s", {("t", 1): ov(2, h.now)})
    before = len(h.persisted)

    h.now = t0 + 59_999
    h.coord.tick()
    assert len(h.persisted) == before and set(h.coord.fetch_offsets("s", None)) == {("t", 0), ("t", 1)}

    h.now = t0 + 60_000  # only ("t", 0) is old enough
    h.coord.tick()
    assert h.coord.fetch_offsets("s", None) == {("t", 1): ov(2, t0 + 30_000)}
    assert h.records("s")[before:] == [(OffsetKey("s", "t", 0), None)]
    assert h.group("s").state is S.EMPTY

    h.now = t0 + 90_000  # the last offset expires: the group goes too
    h.coord.tick()
    assert "s" not in h.coord.groups
    assert h.records("s")[before + 1:] == [(OffsetKey("s", "t", 1), None), (GroupKey("s"), None)]


def test_offsets_of_a_group_with_members_do_not_expire():
    cfg = GroupConfig(offsets_retention_ms=SESSION)
    h = Harness(cfg)
    (a,), gen = stable_group(h, 1)
    commit(h, "g", {("t1", 0): ov(1, h.now)})
    for _ in range(4):
        h.tick(SESSION // 2)
        h.heartbeat("g", gen, a)
    assert h.coord.fetch_offsets("g", None) == {("t1", 0): ov(1, h.now - 2 * SESSION)}


def test_retention_of_an_emptied_group_counts_from_when_it_became_empty():
    cfg = GroupConfig(offsets_retention_ms=20_000)
    h = Harness(cfg)
    (a,), gen = stable_group(h, 1, session=30_000)
    t_commit = h.now
    commit(h, "g", {("t1", 0): ov(1, t_commit)})
    h.advance(25_000)
    h.heartbeat("g", gen, a)
    h.coord.leave("g", [(a, None)])  # Empty at t_commit + 25 s
    t_empty = h.now
    h.tick(1)
    assert h.coord.fetch_offsets("g", None) == {("t1", 0): ov(1, t_commit)}
    h.now = t_empty + 20_000
    h.coord.tick()
    assert "g" not in h.coord.groups


def test_empty_group_without_offsets_is_cleaned_up():
    cfg = GroupConfig(offsets_retention_ms=60_000)
    h = Harness(cfg)
    (a,), gen = stable_group(h, 1)
    h.coord.leave("g", [(a, None)])
    assert h.group().state is S.EMPTY
    h.tick(60_001)
    assert "g" not in h.coord.groups
    assert h.records("g")[-1] == (GroupKey("g"), None)
