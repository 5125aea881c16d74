"""Share groups' membership (oncelog.groups.share_group): ShareGroupHeartbeat's validation in
Kafka's order and words, join / heartbeat / leave with member and group epochs, the previous
epoch accepted and others fenced, session expiry on a fake clock, the group size limit, topics
appearing after a join, the one namespace of group ids, and the deadline heap bounded however
members come and go."""

from __future__ import annotations

import uuid

import pytest

from oncelog import errors
from oncelog.config.group_configs import share_settings
from oncelog.config.settings import GroupConfig
from oncelog.groups.share_group import ShareGroups, ShareGroupState

T1, T2 = uuid.uuid4(), uuid.uuid4()


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def make(topics=None, other=None, max_size=200):
    clock = Clock()
    topics = {"orders": (T1, 3)} if topics is None else topics
    settings = share_settings({}, GroupConfig())
    sg = ShareGroups(clock, lambda: topics, lambda _g: settings, other or (lambda _g: None), max_size=max_size)
    return sg, clock, topics


def hb(sg, member, epoch, subscribed=("orders",), group="g", rack=None):
    return sg.heartbeat(group_id=group, member_id=member, member_epoch=epoch, rack_id=rack,
                        subscribed_topic_names=subscribed, client_id="c", client_host="/127.0.0.1")


@pytest.mark.parametrize("group, member, epoch, rack, subscribed, message", [
    ("g", "", 0, None, ("orders",), "MemberId can't be empty."),
    ("", "m", 0, None, ("orders",), "GroupId can't be empty."),
    ("g", "m", 0, "", ("orders",), "RackId can't be empty."),
    ("g", "m", 0, None, None, "SubscribedTopicNames must be set in first request."),
    ("g", "m", 0, None, (), "SubscribedTopicNames must be set in first request."),
    ("g", "m", -2, None, ("orders",), "MemberEpoch is invalid."),
])
def test_invalid_requests_are_refused_in_kafkas_order_and_words(group, member, epoch, rack, subscribed, message):
    sg, _clock, _topics = make()
    r = sg.heartbeat(group_id=group, member_id=member, member_epoch=epoch, rack_id=rack,
                     subscribed_topic_names=subscribed)
    assert isinstance(r.error, errors.InvalidRequest) and str(r.error) == message
    assert sg.groups == {}


def test_join_gets_every_partition_then_heartbeats_answer_no_change():
    sg, _clock, _topics = make()
    r = hb(sg, "a", 0)
    assert r.error is None and r.member_epoch == 1 and r.member_id == "a"
    assert r.assignment == {T1: [0, 1, 2]} and r.heartbeat_interval_ms == 5000
    again = hb(sg, "a", 1, subscribed=None)
    assert again.error is None and again.member_epoch == 1 and again.assignment is None
    assert sg.get("g").state is ShareGroupState.STABLE


def test_a_second_member_shares_the_partitions_and_the_first_learns_its_new_assignment():
    sg, _clock, _topics = make()
    hb(sg, "a", 0)
    b = hb(sg, "b", 0)
    assert b.member_epoch == 2
    a = hb(sg, "a", 1, subscribed=None)
    assert a.member_epoch == 2 and a.assignment is not None
    owned = [set(a.assignment[T1]), set(b.assignment[T1])]
    assert owned[0] | owned[1] == {0, 1, 2} and abs(len(owned[0]) - len(owned[1])) <= 1


def test_more_members_than_partitions_share_a_partition():
    sg, _clock, _topics = make(topics={"orders": (T1, 1)})
    answers = [hb(sg, m, 0) for m in ("a", "b", "c")]
    latest = [hb(sg, m, r.member_epoch, subscribed=None) for m, r in zip("abc", answers)]
    given = {m: (r.assignment or answers[i].assignment) for i, (m, r) in enumerate(zip("abc", latest))}
    assert all(v == {T1: [0]} for v in given.values()), given


def test_previous_epoch_is_accepted_and_any_other_is_fenced():
    sg, _clock, _topics = make()
    hb(sg, "a", 0)
    hb(sg, "b", 0)
    r = hb(sg, "a", 1, subscribed=None)  # the member's epoch before the answer it may have lost
    assert r.error is None and r.member_epoch == 2
    assert hb(sg, "a", 1, subscribed=None).error is None  # still its previous epoch
    for bad in (3, 7):
        fenced = hb(sg, "a", bad, subscribed=None)
        assert isinstance(fenced.error, errors.FencedMemberEpoch), fenced
    b = sg.get("g").members["b"]
    assert isinstance(hb(sg, "b", b.member_epoch - 1, subscribed=None).error, errors.FencedMemberEpoch)


def test_an_unknown_member_with_an_epoch_is_unknown_member_id_and_may_join_again():
    sg, _clock, _topics = make()
    r = hb(sg, "ghost", 4, subscribed=None)
    assert isinstance(r.error, errors.UnknownMemberId)
    assert hb(sg, "ghost", 0).error is None


def test_leave_answers_minus_one_and_the_others_take_its_partitions():
    sg, _clock, _topics = make()
    hb(sg, "a", 0)
    b = hb(sg, "b", 0)
    left = hb(sg, "b", b.member_epoch, subscribed=None, group="g")
    assert left.error is None
    out = sg.heartbeat(group_id="g", member_id="b", member_epoch=-1, rack_id=None, subscribed_topic_names=None)
    assert out.error is None and out.member_epoch == -1
    # a never heartbeat while b was there: what it was last sent, all three, is its assignment
    # again, so the answer's assignment is null (unchanged), at the new epoch (as Kafka sends one
    # only on a join or when the member's partitions changed)
    a = hb(sg, "a", 1, subscribed=None)
    assert a.member_epoch == 3 and a.assignment is None
    assert sg.get("g").members["a"].assignment == {T1: frozenset({0, 1, 2})}
    assert set(sg.get("g").members) == {"a"}


def test_a_member_that_stops_heartbeating_is_removed_at_its_session_timeout():
    sg, clock, _topics = make()
    hb(sg, "a", 0)
    b = hb(sg, "b", 0)
    assert sg.next_deadline_ms() == clock.now + 45000
    clock.now += 30000
    hb(sg, "a", 1, subscribed=None)  # a keeps its session; b does not
    clock.now += 15000
    assert sg.tick() == [("g", "b")]
    assert sg.next_deadline_ms() == clock.now + 30000  # a's: 45 s after its heartbeat at 30 s
    assert isinstance(hb(sg, "b", b.member_epoch, subscribed=None).error, errors.UnknownMemberId)
    clock.now += 30000
    assert sg.tick() == [("g", "a")]
    assert sg.get("g").state is ShareGroupState.EMPTY and sg.next_deadline_ms() is None


def test_the_group_size_limit():
    sg, _clock, _topics = make(max_size=2)
    hb(sg, "a", 0)
    hb(sg, "b", 0)
    r = hb(sg, "c", 0)
    assert isinstance(r.error, errors.GroupMaxSizeReached)
    assert set(sg.get("g").members) == {"a", "b"}


def test_a_topic_created_after_the_join_is_assigned_at_the_next_heartbeat():
    sg, _clock, topics = make(topics={})
    r = hb(sg, "a", 0, subscribed=("later",))
    assert r.error is None and r.assignment == {}
    assert hb(sg, "a", r.member_epoch, subscribed=None).assignment is None
    topics["later"] = (T2, 2)
    after = hb(sg, "a", r.member_epoch, subscribed=None)
    assert after.member_epoch == r.member_epoch + 1 and after.assignment == {T2: [0, 1]}
    topics["later"] = (T2, 4)  # partitions added
    grown = hb(sg, "a", after.member_epoch, subscribed=None)
    assert grown.assignment == {T2: [0, 1, 2, 3]}


def test_a_subscription_change_moves_the_assignment():
    sg, _clock, topics = make(topics={"orders": (T1, 2), "audit": (T2, 1)})
    r = hb(sg, "a", 0)
    moved = hb(sg, "a", r.member_epoch, subscribed=("audit",))
    assert moved.assignment == {T2: [0]} and moved.member_epoch == r.member_epoch + 1


def test_a_group_id_of_another_type_is_group_id_not_found():
    sg, _clock, _topics = make(other=lambda g: "consumer" if g == "taken" else None)
    r = hb(sg, "a", 0, group="taken")
    assert isinstance(r.error, errors.GroupIdNotFound) and str(r.error) == "Group taken is not a share group."
    assert "taken" not in sg.groups


def test_rejoin_with_epoch_zero_gets_a_new_epoch_and_the_whole_assignment():
    sg, _clock, _topics = make()
    r = hb(sg, "a", 0)
    again = hb(sg, "a", 0)
    assert again.error is None and again.member_epoch >= r.member_epoch and again.assignment == {T1: [0, 1, 2]}


def test_the_deadline_heap_stays_bounded_while_members_come_and_go():
    sg, _clock, _topics = make()
    hb(sg, "stays", 0)
    for i in range(5000):
        member = f"m{i % 7}"
        r = hb(sg, member, 0)
        sg.heartbeat(group_id="g", member_id=member, member_epoch=-1, rack_id=None, subscribed_topic_names=None)
        for _ in range(3):  # frequent heartbeats of the one that stays push nothing more
            hb(sg, "stays", sg.get("g").members["stays"].member_epoch, subscribed=None)
        assert r.error is None
    assert len(sg._deadlines) <= 2 * 1 + 64 + 1


def test_delete_only_an_empty_group():
    sg, _clock, _topics = make()
    hb(sg, "a", 0)
    with pytest.raises(errors.NonEmptyGroup):
        sg.delete("g")
    sg.heartbeat(group_id="g", member_id="a", member_epoch=-1, rack_id=None, subscribed_topic_names=None)
    sg.delete("g")
    assert sg.get("g") is None
    with pytest.raises(errors.GroupIdNotFound):
        sg.delete("g")


def test_a_second_leave_is_unknown_member_id_and_a_leave_from_a_group_it_lacks_succeeds():
    sg, _clock, _topics = make()
    hb(sg, "a", 0)
    assert hb(sg, "a", -1, subscribed=None).member_epoch == -1
    again = hb(sg, "a", -1, subscribed=None)
    assert isinstance(again.error, errors.UnknownMemberId)
    assert str(again.error) == "Member a is not a member of group g."
    # membership is not persisted: after a restart the group is unknown, and a leave just succeeds
    gone = hb(sg, "a", -1, subscribed=None, group="other")
    assert gone.error is None and gone.member_epoch == -1
