"""Classic-protocol consumer groups: JoinGroup/SyncGroup/Heartbeat/LeaveGroup in each group state
(Empty, PreparingRebalance, CompletingRebalance, Stable, Dead), static membership. Its helpers
serve :mod:`.scenarios_groups_admin` (DescribeGroups, ListGroups filters, DeleteGroups,
FindCoordinator) and the other group and offset scenarios.

Invariants: every member joins with a real consumer-protocol subscription (so the coordinator
knows the topics a group is subscribed to); a JoinGroup that blocks (a rebalance waiting for the
other members) runs on its own connection in a thread, and the scenario waits for the group's
state (DescribeGroups), never for a time. Members are listed in the order they joined (both
brokers keep them in maps), so the opaque member ids compare by role.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import struct
import threading

from .framework import (DELETE_GROUPS, DESCRIBE_GROUPS, HEARTBEAT, JOIN_GROUP, LEAVE_GROUP, OFFSET_COMMIT, SYNC_GROUP, mod,
                        request_class)
from .framework import scenario as _register

SESSION_MS = 10000
REBALANCE_MS = 20000


# ---------------------------------------------------------------------- helpers (offsets use them too)


def scenario(area: str, **kw):
    """framework.scenario, the answer's consumer-protocol bytes decoded (:func:`readable`)."""
    def register(fn):
        @functools.wraps(fn)
        def decoded(k):
            return readable(fn(k))
        _register(area, **kw)(decoded)
        return fn
    return register


def readable(value):
    """``value`` with kio responses as dicts and the consumer protocol's subscriptions and
    assignments decoded: they hold topic names, which carry each run's own prefix (of its own
    length), so their bytes never compare."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        for f in dataclasses.fields(value):
            v = getattr(value, f.name)
            if f.name in ("metadata", "member_metadata") and isinstance(v, bytes):
                out[f.name] = _parse(v, _read_subscription)
            elif f.name in ("assignment", "member_assignment") and isinstance(v, bytes):
                out[f.name] = _parse(v, _read_assignment)
            else:
                out[f.name] = readable(v)
        return out
    if isinstance(value, (list, tuple)):
        return [readable(v) for v in value]
    if isinstance(value, dict):
        return {key: readable(v) for key, v in value.items()}
    return value


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, fmt: str):
        got = struct.unpack_from(fmt, self.data, self.at)
        self.at += struct.calcsize(fmt)
        return got[0]

    def string(self) -> str:
        n = self.take(">h")
        s = self.data[self.at:self.at + n].decode()
        self.at += n
        return s

    def nullable_bytes(self):
        n = self.take(">i")
        if n < 0:
            return None
        b = self.data[self.at:self.at + n]
        self.at += n
        return b


def _parse(data: bytes, reader):
    if not data:
        return data
    try:
        r = _Reader(data)
        got = reader(r)
        return got if r.at == len(data) else data
    except (struct.error, UnicodeDecodeError, IndexError):
        return data


def _read_subscription(r):
    version = r.take(">h")
    topics = [r.string() for _ in range(r.take(">i"))]
    return {"subscription_version": version, "topics": topics, "user_data": r.nullable_bytes()}


def _read_assignment(r):
    version = r.take(">h")
    parts = []
    for _ in range(r.take(">i")):
        t = r.string()
        parts.append([t, [r.take(">i") for _ in range(r.take(">i"))]])
    return {"assignment_version": version, "partitions": parts, "user_data": r.nullable_bytes()}


def build(api_key: int, version: int, **fields):
    """kio's request ``api_key`` at ``version`` from ``fields``, dropping those the version lacks."""
    cls = request_class(api_key, version)
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in fields.items() if k in names})


def make(cls, **fields):
    """``cls(**fields)`` (a request's nested entity) without the fields its version lacks."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in fields.items() if k in names})


def _string(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0: the topics, no user data."""
    return struct.pack(">hi", 0, len(topics)) + b"".join(_string(t) for t in topics) + struct.pack(">i", -1)


def assignment(parts: dict[str, list[int]]) -> bytes:
    """ConsumerProtocolAssignment v0."""
    out = struct.pack(">hi", 0, len(parts))
    for t, ps in parts.items():
        out += _string(t) + struct.pack(">i", len(ps)) + b"".join(struct.pack(">i", p) for p in ps)
    return out + struct.pack(">i", -1)


def join(k, group: str, member_id: str = "", *, instance: str | None = None, protocol_type: str = "consumer",
         protocols=None, topics=("t",), session_ms: int = SESSION_MS, rebalance_ms: int = REBALANCE_MS,
         version: int = 9, via=None):
    """One JoinGroup (it may block while the group rebalances)."""
    m = mod(JOIN_GROUP, version)
    if protocols is None:
        protocols = [("range", subscription(*(k.name(t) for t in topics)))]
    return k.send(build(JOIN_GROUP, version, group_id=group, session_timeout=datetime.timedelta(milliseconds=session_ms),
                        rebalance_timeout=datetime.timedelta(milliseconds=rebalance_ms), member_id=member_id,
                        group_instance_id=instance, protocol_type=protocol_type, reason=None,
                        protocols=tuple(m.JoinGroupRequestProtocol(name=n, metadata=md) for n, md in protocols)),
                  via=via)


def join_member(k, group: str, **kw):
    """JoinGroup v4+ as a client does it: without a member id (MEMBER_ID_REQUIRED gives one), then with it."""
    first = join(k, group, **kw)
    if int(first.error_code) != 79 or kw.get("instance"):  # MEMBER_ID_REQUIRED
        return first
    return join(k, group, first.member_id, **kw)


def sync(k, group: str, generation: int, member_id: str, assignments=None, *, instance: str | None = None,
         protocol_type: str | None = "consumer", protocol_name: str | None = "range", version: int = 5, via=None):
    m = mod(SYNC_GROUP, version)
    return k.send(build(SYNC_GROUP, version, group_id=group, generation_id=generation, member_id=member_id,
                        group_instance_id=instance, protocol_type=protocol_type, protocol_name=protocol_name,
                        assignments=tuple(m.SyncGroupRequestAssignment(member_id=mid, assignment=a)
                                          for mid, a in (assignments or {}).items())), via=via)


def heartbeat(k, group: str, generation: int, member_id: str, *, instance: str | None = None, version: int = 4,
              via=None):
    return k.send(build(HEARTBEAT, version, group_id=group, generation_id=generation, member_id=member_id,
                        group_instance_id=instance), via=via)


def leave(k, group: str, *members, version: int = 5, via=None):
    """LeaveGroup of ``members``: member ids, or (member id, group instance id) pairs."""
    m = mod(LEAVE_GROUP, version)
    if version < 3:
        return k.send(build(LEAVE_GROUP, version, group_id=group, member_id=members[0]), via=via)
    idents = tuple(m.MemberIdentity(member_id=x, group_instance_id=None, reason=None) if isinstance(x, str) else
                   m.MemberIdentity(member_id=x[0], group_instance_id=x[1], reason=None) for x in members)
    return k.send(build(LEAVE_GROUP, version, group_id=group, members=idents), via=via)


def describe(k, *groups: str, order=(), version: int = 5):
    """DescribeGroups; each group's members in the order of ``order`` (member ids)."""
    resp = k.send(build(DESCRIBE_GROUPS, version, groups=tuple(groups), include_authorized_operations=False))
    rank = {m: i for i, m in enumerate(order)}
    return dataclasses.replace(resp, groups=tuple(
        dataclasses.replace(g, members=tuple(sorted(g.members, key=lambda m: rank.get(m.member_id, len(rank)))))
        for g in resp.groups))


def state(k, group: str) -> str:
    return describe(k, group).groups[0].group_state


def wait_state(k, group: str, wanted: str) -> None:
    k.wait_until(lambda: state(k, group) == wanted, f"group {group} {wanted}")


def delete_groups(k, *groups: str, version: int = 2):
    return k.send(build(DELETE_GROUPS, version, groups_names=tuple(groups)))


def ordered_join(resp, order):
    rank = {m: i for i, m in enumerate(order)}
    return dataclasses.replace(resp, members=tuple(sorted(resp.members, key=lambda m: rank.get(m.member_id, len(rank)))))


def stable_member(k, group: str, topics=("t",), **kw):
    """A group with one member, joined and synced (Stable); returns (join response, sync response)."""
    j = join_member(k, group, topics=topics, **kw)
    s = sync(k, group, j.generation_id, j.member_id,
             {j.member_id: assignment({k.name(t): [0] for t in topics})}, instance=kw.get("instance"))
    return j, s


def in_thread(fn):
    """Run ``fn()`` in a daemon thread; returns (thread, result dict with "value" or "error")."""
    result: dict = {}

    def run():
        try:
            result["value"] = fn()
        except Exception as exc:  # noqa: BLE001 - the scenario's answer then says so
            result["error"] = f"{type(exc).__name__}: {exc}"

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, result


def joined(t, result, what: str):
    t.join(60)
    return result.get("value", {"failed": result.get("error", f"{what} did not return")})


def second_member_joining(k, group: str, **kw):
    """With ``group`` Stable, a second member joins on its own connection (its JoinGroup blocks):
    returns (its MEMBER_ID_REQUIRED answer, thread, result) once the group is PreparingRebalance."""
    other = k.connect()
    first = join(k, group, via=other, **kw)
    t, result = in_thread(lambda: join(k, group, first.member_id, via=other, **kw))
    wait_state(k, group, "PreparingRebalance")
    return first, t, result


def simple_commit(k, group: str, topic: str, offset: int, *, version: int = 9):
    """OffsetCommit with generation -1 and no member (a group of no members: a 'simple' consumer)."""
    m = mod(OFFSET_COMMIT, version)
    return k.send(build(OFFSET_COMMIT, version, group_id=group, generation_id_or_member_epoch=-1, member_id="",
                        group_instance_id=None, retention_time_ms=-1, topics=(m.OffsetCommitRequestTopic(
                            name=topic, partitions=(m.OffsetCommitRequestPartition(
                                partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
                                committed_metadata=""),)),)))


# ---------------------------------------------------------------------- JoinGroup


@scenario("groups")
def join_without_member_id(k):
    """JoinGroup v9 without a member id: MEMBER_ID_REQUIRED with a member id to rejoin with."""
    return join(k, k.name("g"))


@scenario("groups")
def join_with_given_member_id(k):
    """JoinGroup v9 again with the id MEMBER_ID_REQUIRED gave: generation 1, the member leads, sees itself."""
    g = k.name("g")
    first = join(k, g)
    return [first, join(k, g, first.member_id)]


@scenario("groups")
def join_v3_without_member_id(k):
    """JoinGroup v3 (before KIP-394) without a member id joins at once."""
    return join(k, k.name("g"), version=3)


@scenario("groups")
def join_v0_without_member_id(k):
    """JoinGroup v0 (no rebalance timeout: the session timeout stands for it), then SyncGroup v0: Kafka 4.4 still serves both."""
    g = k.name("g")
    j = join(k, g, version=0)
    s = sync(k, g, j.generation_id, j.member_id, {j.member_id: assignment({k.name("t"): [0]})}, version=0)
    return [j, s]


@scenario("groups")
def join_v1_without_member_id(k):
    """JoinGroup v1 (the first with a rebalance timeout) without a member id joins at once."""
    return join(k, k.name("g"), version=1)


@scenario("groups")
def join_unknown_member_id(k):
    """JoinGroup with a member id the group never gave: UNKNOWN_MEMBER_ID."""
    g = k.name("g")
    stable_member(k, g)
    return join(k, g, "never-given")


@scenario("groups")
def join_unknown_member_id_new_group(k):
    """JoinGroup with a made-up member id to a group that does not exist: UNKNOWN_MEMBER_ID."""
    return join(k, k.name("g"), "never-given")


@scenario("groups")
def join_empty_group_id(k):
    """JoinGroup with group id "": INVALID_GROUP_ID."""
    return join(k, "")


@scenario("groups")
def join_session_timeout_too_small(k):
    """JoinGroup with a session timeout below group.min.session.timeout.ms (6000): INVALID_SESSION_TIMEOUT."""
    return join(k, k.name("g"), session_ms=5999)


@scenario("groups")
def join_session_timeout_too_large(k):
    """JoinGroup with a session timeout above group.max.session.timeout.ms (1800000): INVALID_SESSION_TIMEOUT."""
    return join(k, k.name("g"), session_ms=1800001)


@scenario("groups")
def join_session_timeout_bounds_inclusive(k):
    """Session timeouts of exactly 6000 and 1800000 ms are accepted."""
    return [join_member(k, k.name("g1"), session_ms=6000), join_member(k, k.name("g2"), session_ms=1800000)]


@scenario("groups")
def join_empty_protocol_type(k):
    """JoinGroup with protocol type "": INCONSISTENT_GROUP_PROTOCOL."""
    return join(k, k.name("g"), protocol_type="")


@scenario("groups")
def join_no_protocols(k):
    """JoinGroup with an empty protocol list: INCONSISTENT_GROUP_PROTOCOL."""
    return join(k, k.name("g"), protocols=[])


@scenario("groups")
def join_inconsistent_protocol_type(k):
    """A second member with another protocol type than the group's: INCONSISTENT_GROUP_PROTOCOL."""
    g = k.name("g")
    stable_member(k, g)
    first = join(k, g, protocol_type="connect")
    return [first, join(k, g, first.member_id, protocol_type="connect")]


@scenario("groups")
def join_no_common_protocol(k):
    """A second member whose protocols share none with the group's: INCONSISTENT_GROUP_PROTOCOL."""
    g = k.name("g")
    stable_member(k, g)
    protocols = [("roundrobin", subscription(k.name("t")))]
    first = join(k, g, protocols=protocols)
    return [first, join(k, g, first.member_id, protocols=protocols)]


@scenario("groups")
def join_picks_common_protocol(k):
    """Two members, protocols [range, roundrobin] and [roundrobin]: the group chooses roundrobin."""
    g = k.name("g")
    sub = subscription(k.name("t"))
    j1 = join_member(k, g, protocols=[("range", sub), ("roundrobin", sub)])
    sync(k, g, j1.generation_id, j1.member_id, {j1.member_id: b""})
    first, t, result = second_member_joining(k, g, protocols=[("roundrobin", sub)])
    again = join(k, g, j1.member_id, protocols=[("range", sub), ("roundrobin", sub)])
    j2 = joined(t, result, "second join")
    return [first, ordered_join(again, [j1.member_id, first.member_id]), j2]


@scenario("groups")
def join_stable_leader_same_metadata(k):
    """The leader of a Stable group rejoins with the same metadata: it gets the current generation, no rebalance."""
    g = k.name("g")
    j, _ = stable_member(k, g)
    return [join(k, g, j.member_id), describe(k, g).groups[0].group_state]


@scenario("groups")
def join_stable_leader_new_metadata(k):
    """The leader of a Stable group rejoins with new metadata: a new generation (2)."""
    g = k.name("g")
    j, _ = stable_member(k, g)
    return [join(k, g, j.member_id, topics=("t", "u")), describe(k, g).groups[0].group_state]


# ---------------------------------------------------------------------- SyncGroup


@scenario("groups")
def sync_leader(k):
    """The leader's SyncGroup with an assignment: it gets its assignment, the group is Stable."""
    g = k.name("g")
    j, s = stable_member(k, g)
    return [s, describe(k, g, order=[j.member_id])]


@scenario("groups")
def sync_unknown_member(k):
    """SyncGroup with an unknown member id: UNKNOWN_MEMBER_ID."""
    g = k.name("g")
    j = join_member(k, g)
    return sync(k, g, j.generation_id, "never-given")


@scenario("groups")
def sync_unknown_group(k):
    """SyncGroup to a group that does not exist: UNKNOWN_MEMBER_ID."""
    return sync(k, k.name("g"), 1, "never-given")


@scenario("groups")
def sync_illegal_generation(k):
    """SyncGroup with generation + 1: ILLEGAL_GENERATION."""
    g = k.name("g")
    j = join_member(k, g)
    return sync(k, g, j.generation_id + 1, j.member_id)


@scenario("groups")
def sync_wrong_protocol_type(k):
    """SyncGroup v5 naming another protocol type than the group's: INCONSISTENT_GROUP_PROTOCOL."""
    g = k.name("g")
    j = join_member(k, g)
    return sync(k, g, j.generation_id, j.member_id, protocol_type="connect")


@scenario("groups")
def sync_wrong_protocol_name(k):
    """SyncGroup v5 naming another protocol than the chosen one: INCONSISTENT_GROUP_PROTOCOL."""
    g = k.name("g")
    j = join_member(k, g)
    return sync(k, g, j.generation_id, j.member_id, protocol_name="roundrobin")


@scenario("groups")
def sync_without_protocol_fields(k):
    """SyncGroup v5 with null protocol type and name (optional): accepted."""
    g = k.name("g")
    j = join_member(k, g)
    return sync(k, g, j.generation_id, j.member_id, {j.member_id: b"x"}, protocol_type=None, protocol_name=None)


@scenario("groups")
def sync_stable_again(k):
    """SyncGroup again in a Stable group: the member's assignment once more."""
    g = k.name("g")
    j, s = stable_member(k, g)
    return [s, sync(k, g, j.generation_id, j.member_id)]


@scenario("groups")
def sync_during_preparing_rebalance(k):
    """SyncGroup while a second member's join rebalances the group: REBALANCE_IN_PROGRESS."""
    g = k.name("g")
    j, _ = stable_member(k, g)
    first, t, result = second_member_joining(k, g)
    answer = sync(k, g, j.generation_id, j.member_id)
    join(k, g, j.member_id)
    joined(t, result, "second join")
    return answer


@scenario("groups")
def sync_follower_waits_for_leader(k):
    """A follower's SyncGroup waits for the leader's; both get their own assignment."""
    g = k.name("g")
    j1, _ = stable_member(k, g)
    first, t, result = second_member_joining(k, g)
    r1 = join(k, g, j1.member_id)
    j2 = joined(t, result, "second join")
    other = k.connect()
    t2, res2 = in_thread(lambda: sync(k, g, j2.generation_id, j2.member_id, via=other))
    wait_state(k, g, "CompletingRebalance")
    s1 = sync(k, g, r1.generation_id, j1.member_id, {j1.member_id: b"one", j2.member_id: b"two"})
    return [s1, joined(t2, res2, "follower sync"), state(k, g)]


def _two_members_completing(k, g):
    """Two members joined (generation 2, CompletingRebalance): (leader's join, follower's join, follower's connection)."""
    j1, _ = stable_member(k, g)
    first, t, result = second_member_joining(k, g)
    r1 = join(k, g, j1.member_id)
    j2 = joined(t, result, "second join")
    return r1, j2, first.member_id


@scenario("groups")
def follower_sync_answered_when_leader_rejoins(k):
    """A follower waits in SyncGroup; the leader rejoins with new metadata: the follower's SyncGroup is REBALANCE_IN_PROGRESS."""
    g = k.name("g")
    r1, j2, follower = _two_members_completing(k, g)
    other = k.connect()
    t2, res2 = in_thread(lambda: sync(k, g, r1.generation_id, follower, via=other))
    k.wait_until(lambda: state(k, g) == "CompletingRebalance", "follower syncing")
    t3, res3 = in_thread(lambda: join(k, g, r1.member_id, topics=("t", "u"), via=k.connect()))
    answer = joined(t2, res2, "follower sync")
    join(k, g, follower, via=other)  # the follower rejoins: the rebalance completes
    rejoined = joined(t3, res3, "leader rejoin")
    if not isinstance(rejoined, dict):
        rejoined = ordered_join(rejoined, [r1.member_id, follower])
    return [answer, rejoined]


@scenario("groups")
def follower_sync_answered_when_leader_leaves(k):
    """A follower waits in SyncGroup; the leader leaves: the follower's SyncGroup is REBALANCE_IN_PROGRESS."""
    g = k.name("g")
    r1, j2, follower = _two_members_completing(k, g)
    other = k.connect()
    t2, res2 = in_thread(lambda: sync(k, g, r1.generation_id, follower, via=other))
    k.wait_until(lambda: state(k, g) == "CompletingRebalance", "follower syncing")
    left = leave(k, g, r1.member_id)
    answer = joined(t2, res2, "follower sync")
    return [left, answer, state(k, g)]


@scenario("groups")
def heartbeat_completing_rebalance_wrong_generation(k):
    """Heartbeat in CompletingRebalance with the previous generation: ILLEGAL_GENERATION."""
    g = k.name("g")
    r1, j2, follower = _two_members_completing(k, g)
    return [state(k, g), heartbeat(k, g, r1.generation_id - 1, follower)]


# ---------------------------------------------------------------------- Heartbeat


@scenario("groups")
def heartbeat_stable(k):
    """Heartbeat of the member of a Stable group: NONE."""
    g = k.name("g")
    j, _ = stable_member(k, g)
    return heartbeat(k, g, j.generation_id, j.member_id)


@scenario("groups")
def heartbeat_completing_rebalance(k):
    """Heartbeat after JoinGroup, before SyncGroup (CompletingRebalance)."""
    g = k.name("g")
    j = join_member(k, g)
    return [state(k, g), heartbeat(k, g, j.generation_id, j.member_id)]


@scenario("groups")
def heartbeat_unknown_member(k):
    """Heartbeat with an unknown member id: UNKNOWN_MEMBER_ID."""
    g = k.name("g")
    j, _ = stable_member(k, g)
    return heartbeat(k, g, j.generation_id, "never-given")


@scenario("groups")
def heartbeat_unknown_group(k):
    """Heartbeat to a group that does not exist."""
    return heartbeat(k, k.name("g"), 1, "never-given")


@scenario("groups")
def heartbeat_illegal_generation(k):
    """Heartbeat with generation + 1: ILLEGAL_GENERATION."""
    g = k.name("g")
    j, _ = stable_member(k, g)
    return heartbeat(k, g, j.generation_id + 1, j.member_id)


@scenario("groups")
def heartbeat_empty_group(k):
    """Heartbeat to an Empty group (its only member left): UNKNOWN_MEMBER_ID."""
    g = k.name("g")
    j, _ = stable_member(k, g)
    leave(k, g, j.member_id)
    return [state(k, g), heartbeat(k, g, j.generation_id, j.member_id)]


@scenario("groups")
def heartbeat_rebalance_in_progress(k):
    """While a second member's JoinGroup waits, the first member's heartbeat: REBALANCE_IN_PROGRESS; it rejoins, both get generation 2."""
    g = k.name("g")
    j1, _ = stable_member(k, g)
    first, t, result = second_member_joining(k, g)
    hb = heartbeat(k, g, j1.generation_id, j1.member_id)
    again = join(k, g, j1.member_id)
    j2 = joined(t, result, "second join")
    return [first, hb, ordered_join(again, [j1.member_id, first.member_id]), j2]


@scenario("groups")
def heartbeat_dead_group(k):
    """Heartbeat to a group deleted by DeleteGroups (Dead)."""
    g = k.name("g")
    j, _ = stable_member(k, g)
    leave(k, g, j.member_id)
    return [delete_groups(k, g), heartbeat(k, g, j.generation_id, j.member_id)]


@scenario("groups")
def sync_empty_group(k):
    """SyncGroup of a member that left (group Empty): UNKNOWN_MEMBER_ID."""
    g = k.name("g")
    j, _ = stable_member(k, g)
    leave(k, g, j.member_id)
    return sync(k, g, j.generation_id, j.member_id)


@scenario("groups")
def session_timeout_expires_member(k):
    """A member that stops heartbeating is removed after its session timeout (6 s): the group is Empty, generation 2."""
    g = k.name("g")
    j, _ = stable_member(k, g, session_ms=6000)
    k.wait_until(lambda: state(k, g) == "Empty", "the member expired", timeout=60, interval=0.5)
    return [describe(k, g), heartbeat(k, g, j.generation_id, j.member_id)]


@scenario("groups")
def rebalance_timeout_drops_member(k):
    """A member that does not rejoin within the rebalance timeout is dropped: the newcomer's join completes alone."""
    g = k.name("g")
    j1, _ = stable_member(k, g, rebalance_ms=3000)
    first, t, result = second_member_joining(k, g, rebalance_ms=3000)
    j2 = joined(t, result, "second join")
    return [j2, heartbeat(k, g, j1.generation_id, j1.member_id), describe(k, g, order=[first.member_id])]


@scenario("groups")
def heartbeat_pending_member(k):
    """Heartbeat with the member id MEMBER_ID_REQUIRED gave, before the second JoinGroup (a pending member)."""
    g = k.name("g")
    stable_member(k, g)
    first = join(k, g)
    return [first, heartbeat(k, g, 1, first.member_id)]


@scenario("groups")
def sync_pending_member(k):
    """SyncGroup with the member id MEMBER_ID_REQUIRED gave, before the second JoinGroup."""
    g = k.name("g")
    stable_member(k, g)
    first = join(k, g)
    return sync(k, g, 1, first.member_id)


@scenario("groups")
def follower_rejoins_completing_rebalance(k):
    """In CompletingRebalance a follower rejoins with the same metadata: the current generation, no new rebalance."""
    g = k.name("g")
    j1, _ = stable_member(k, g)
    first, t, result = second_member_joining(k, g)
    r1 = join(k, g, j1.member_id)
    j2 = joined(t, result, "second join")
    follower = j2["member_id"] if isinstance(j2, dict) else j2.member_id
    again = join(k, g, follower)
    return [r1.generation_id, again, state(k, g)]


# ---------------------------------------------------------------------- LeaveGroup


@scenario("groups")
def leave_pending_member(k):
    """LeaveGroup v5 of a pending member (MEMBER_ID_REQUIRED given, not joined again)."""
    g = k.name("g")
    stable_member(k, g)
    first = join(k, g)
    return [leave(k, g, first.member_id), state(k, g)]


@scenario("groups")
def leave_stable(k):
    """The only member leaves a Stable group: NONE, the group is Empty with generation + 1."""
    g = k.name("g")
    j, _ = stable_member(k, g)
    return [leave(k, g, j.member_id), describe(k, g)]


@scenario("groups")
def leave_completing_rebalance(k):
    """The only member leaves before SyncGroup (CompletingRebalance): the group is Empty."""
    g = k.name("g")
    j = join_member(k, g)
    return [leave(k, g, j.member_id), state(k, g)]


@scenario("groups")
def leave_preparing_rebalance(k):
    """The first member leaves while a second joins: the second's join completes with it as leader."""
    g = k.name("g")
    j1, _ = stable_member(k, g)
    first, t, result = second_member_joining(k, g)
    out = leave(k, g, j1.member_id)
    j2 = joined(t, result, "second join")
    return [out, j2]


@scenario("groups")
def leave_batch_with_unknown_member(k):
    """LeaveGroup v5 of a known and an unknown member: top-level NONE, UNKNOWN_MEMBER_ID for the unknown one."""
    g = k.name("g")
    j, _ = stable_member(k, g)
    return [leave(k, g, j.member_id, "never-given"), state(k, g)]


@scenario("groups")
def leave_v1_unknown_member(k):
    """LeaveGroup v1 (one member id) of an unknown member: UNKNOWN_MEMBER_ID at the top level."""
    g = k.name("g")
    stable_member(k, g)
    return leave(k, g, "never-given", version=1)


@scenario("groups")
def leave_unknown_group(k):
    """LeaveGroup v5 to a group that does not exist."""
    return leave(k, k.name("g"), "never-given")


@scenario("groups")
def leave_empty_group(k):
    """LeaveGroup v5 of a member that already left (group Empty)."""
    g = k.name("g")
    j, _ = stable_member(k, g)
    leave(k, g, j.member_id)
    return leave(k, g, j.member_id)


# ---------------------------------------------------------------------- static membership


@scenario("groups")
def static_join(k):
    """JoinGroup v9 with group.instance.id and no member id joins at once (no MEMBER_ID_REQUIRED)."""
    g = k.name("g")
    return join(k, g, instance="i1")


@scenario("groups")
def static_rejoin_replaces(k):
    """A static member rejoins with its instance id and no member id: a new member id, same generation, old id fenced."""
    g = k.name("g")
    j, _ = stable_member(k, g, instance="i1")
    again = join(k, g, instance="i1")
    return [j, again, heartbeat(k, g, j.generation_id, j.member_id, instance="i1"),
            heartbeat(k, g, again.generation_id, again.member_id, instance="i1"), describe(k, g)]


@scenario("groups")
def static_heartbeat_wrong_member_id(k):
    """Heartbeat with a static member's instance id and a wrong member id: FENCED_INSTANCE_ID."""
    g = k.name("g")
    j, _ = stable_member(k, g, instance="i1")
    return heartbeat(k, g, j.generation_id, "never-given", instance="i1")


@scenario("groups")
def static_leave_by_instance_id(k):
    """LeaveGroup v5 naming a static member by instance id only: it leaves."""
    g = k.name("g")
    j, _ = stable_member(k, g, instance="i1")
    return [leave(k, g, ("", "i1")), state(k, g)]


@scenario("groups")
def static_leave_fenced(k):
    """LeaveGroup v5 with the instance id and another member id: FENCED_INSTANCE_ID for that member."""
    g = k.name("g")
    stable_member(k, g, instance="i1")
    return [leave(k, g, ("never-given", "i1")), state(k, g)]


@scenario("groups")
def static_join_wrong_member_id(k):
    """JoinGroup with a static member's instance id and a member id that is not its own: FENCED_INSTANCE_ID."""
    g = k.name("g")
    stable_member(k, g, instance="i1")
    return join(k, g, "never-given", instance="i1")


@scenario("groups")
def static_rejoin_new_metadata(k):
    """A static member rejoins (no member id) with another subscription: a rebalance, generation 2."""
    g = k.name("g")
    stable_member(k, g, instance="i1")
    again = join(k, g, instance="i1", topics=("t", "u"))
    return [again, state(k, g)]


@scenario("groups")
def static_rejoin_v5(k):
    """A static leader rejoins with JoinGroup v5 (no SkipAssignment): the current generation, the old leader id, no members."""
    g = k.name("g")
    j, _ = stable_member(k, g, instance="i1")
    again = join(k, g, instance="i1", version=5)
    return [j, again, state(k, g)]


@scenario("groups")
def static_heartbeat_unknown_instance(k):
    """Heartbeat of a dynamic member naming a group instance id the group does not know: UNKNOWN_MEMBER_ID."""
    g = k.name("g")
    j, _ = stable_member(k, g)
    return heartbeat(k, g, j.generation_id, j.member_id, instance="i9")


@scenario("groups")
def static_sync_wrong_instance(k):
    """SyncGroup with the member id of one static member and another instance id: FENCED_INSTANCE_ID."""
    g = k.name("g")
    j, _ = stable_member(k, g, instance="i1")
    return sync(k, g, j.generation_id, j.member_id, instance="i2")
