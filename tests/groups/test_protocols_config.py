"""Group coordinator: protocols / config (state-machine tests, no sockets; see harness.py)."""

from __future__ import annotations

import pytest

from .harness import *  # noqa: F403 (the shared harness and record helpers)


def test_protocol_chosen_by_vote():
    h = Harness()
    m = subscription("t1")
    prefs = [
        [("range", m), ("roundrobin", m)],
        [("roundrobin", m), ("range", m)],
        [("roundrobin", m), ("sticky", m), ("range", m)],
    ]
    ids = [member_id_for(h, "g", protocols=p) for p in prefs]
    joins = [h.join("g", mid, protocols=p, require_known=True) for mid, p in zip(ids, prefs)]
    assert {r.result.protocol_name for r in joins} == {"roundrobin"}
    assert h.group().protocol_name == "roundrobin"


def test_protocol_vote_only_counts_protocols_everyone_supports():
    h = Harness()
    m = subscription("t1")
    prefs = [
        [("sticky", m), ("range", m)],
        [("sticky", m), ("range", m)],
        [("range", m)],
    ]
    ids = [member_id_for(h, "g", protocols=p) for p in prefs]
    joins = [h.join("g", mid, protocols=p, require_known=True) for mid, p in zip(ids, prefs)]
    assert joins[0].result.protocol_name == "range"
    assert [meta for _, _, meta in joins[0].result.members] == [m, m, m]


def test_inconsistent_group_protocol():
    h = Harness()
    stable_group(h, 1)
    assert h.join("g", protocols=[("roundrobin", b"")]).result.error == E.inconsistent_group_protocol
    assert h.join("g", protocol_type="connect").result.error == E.inconsistent_group_protocol
    assert h.join("g", protocols=[]).result.error == E.inconsistent_group_protocol
    assert h.join("g2", protocols=[]).result.error == E.inconsistent_group_protocol
    assert h.join("g3", protocol_type="").result.error == E.inconsistent_group_protocol
    assert len(h.group().members) == 1 and h.group().state is S.STABLE


def test_invalid_session_timeout():
    cfg = GroupConfig(min_session_timeout_ms=6000, max_session_timeout_ms=300_000)
    h = Harness(cfg)
    assert h.join("g", session=5999).result.error == E.invalid_session_timeout
    assert h.join("g", session=300_001).result.error == E.invalid_session_timeout
    assert "g" not in h.coord.groups
    assert h.join("g", session=6000, require_known=True).result.error == E.member_id_required
    assert h.join("h", session=300_000, require_known=True).result.error == E.member_id_required


def test_invalid_group_id():
    h = Harness()
    assert h.join("").result.error == E.invalid_group_id


def test_rebalance_timeout_defaults_to_session_timeout():
    h = Harness()
    r = h.join("g", rebalance=-1)
    (member,) = h.group().members.values()
    assert r.result.error == E.none and member.rebalance_timeout_ms == SESSION


def test_group_max_size_rejects_new_members():
    h = Harness(GroupConfig(max_size=1))
    (a,), gen = stable_group(h, 1)
    r = h.join("g", require_known=True)
    assert r.result.error == E.group_max_size_reached
    assert h.group().state is S.STABLE and set(h.group().members) == {a}
