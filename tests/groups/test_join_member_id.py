"""Group coordinator: KIP-394 (state-machine tests, no sockets; see harness.py)."""

from __future__ import annotations

import pytest

from .harness import *  # noqa: F403 (the shared harness and record helpers)


def test_member_id_required_then_rejoin_completes():
    h = Harness()
    first = h.join("g", require_known=True)
    assert first.result.error == E.member_id_required
    mid = first.result.member_id
    assert mid in h.group().pending_members and not h.group().members
    assert h.group().state is S.EMPTY

    again = h.join("g", mid, require_known=True)
    res = again.result
    assert res.error == E.none
    assert res.member_id == mid and res.leader == mid and res.generation == 1
    assert res.protocol_type == "consumer" and res.protocol_name == "range"
    assert res.members == ((mid, None, subscription("t1")),)
    assert h.group().state is S.COMPLETING_REBALANCE
    assert not h.group().pending_members


def test_each_member_id_required_answer_is_a_fresh_id():
    h = Harness()
    ids = {member_id_for(h, "g") for _ in range(3)}
    assert len(ids) == 3 and set(h.group().pending_members) == ids


def test_pending_member_that_never_rejoins_expires_after_session_timeout():
    h = Harness()
    mid = member_id_for(h, "g", session=SESSION)
    h.tick(SESSION - 1)
    assert mid in h.group().pending_members
    h.tick(1)
    assert mid not in h.group().pending_members
    late = h.join("g", mid, require_known=True)
    assert late.result.error == E.unknown_member_id


def test_pending_member_holds_the_rebalance_until_it_expires():
    h = Harness()
    a = member_id_for(h, "g")
    b = member_id_for(h, "g", session=SESSION)
    ra = h.join("g", a, require_known=True, rebalance=10 * SESSION)
    assert h.group().state is S.PREPARING_REBALANCE
    assert not ra.called, "the join must wait for the pending member"
    h.tick(SESSION)  # b's pending deadline; the rebalance timeout is far away
    assert ra.result.error == E.none and ra.result.members == ((a, None, subscription("t1")),)
    assert h.group().state is S.COMPLETING_REBALANCE and set(h.group().members) == {a}


def test_pending_member_can_leave():
    h = Harness()
    a = member_id_for(h, "g")
    b = member_id_for(h, "g")
    ra = h.join("g", a, require_known=True)
    assert not ra.called
    assert h.coord.leave("g", [(b, None)]) == [E.none]
    assert ra.result.error == E.none and h.group().state is S.COMPLETING_REBALANCE


def test_join_with_member_id_for_unknown_group_is_unknown_member():
    h = Harness()
    r = h.join("nope", "made-up-id")
    assert r.result.error == E.unknown_member_id
    assert "nope" not in h.coord.groups


def test_old_clients_without_require_known_member_id_join_directly():
    h = Harness()
    r = h.join("g")
    assert r.result.error == E.none and r.result.generation == 1 and r.result.member_id
