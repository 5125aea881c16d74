"""State-machine tests of the classic-protocol group coordinator: no sockets, no asyncio.

Time is a mutable int behind the injected clock; durability is a fake ``persist`` that records
the ``__consumer_offsets`` records it is given and answers ``on_done`` (at once with NONE, with
KAFKA_STORAGE_ERROR, or later, when the test says so). Expected behaviour is Kafka's classic
group coordinator (GroupCoordinator / GroupMetadata / MemberMetadata), KIP-394 and KIP-345.
Divergences from Kafka found by these tests were fixed; the last section holds their regression tests.
"""

from __future__ import annotations

import itertools
import struct

import pytest
from kio.schema.errors import ErrorCode

from oncelog.groups.coordinator import (
    TRANSITIONS,
    Group,
    GroupConfig,
    GroupCoordinator,
    GroupState,
    IllegalStateTransition,
    SyncResult,
)
from oncelog.groups.records import (
    GroupKey,
    GroupValue,
    MemberRecord,
    OffsetKey,
    OffsetValue,
    decode_group_value,
    decode_key,
    decode_offset_value,
)

E = ErrorCode
S = GroupState

SESSION = 10_000
REBALANCE = 30_000


# ---------------------------------------------------------------------------------------- harness


def subscription(*topics: str, version: int = 0) -> bytes:
    """ConsumerProtocolSubscription v0: int16 version, int32 topic count, int16-length names,
    int32 user-data length (-1 = null)."""
    out = struct.pack(">hi", version, len(topics))
    for t in topics:
        b = t.encode()
        out += struct.pack(">h", len(b)) + b
    return out + struct.pack(">i", -1)


class Once:
    """A respond callback that must be called at most once; keeps what it got."""

    def __init__(self, name: str = "respond"):
        self.name = name
        self.calls: list = []

    def __call__(self, *args):
        self.calls.append(args[0] if len(args) == 1 else args)
        assert len(self.calls) == 1, f"{self.name} called {len(self.calls)} times: {self.calls}"

    @property
    def called(self) -> bool:
        return bool(self.calls)

    @property
    def result(self):
        assert self.calls, f"{self.name} was not called"
        return self.calls[0]


class Harness:
    def __init__(self, config: GroupConfig | None = None, persist_mode: str = "ok"):
        self.now = 1_000_000
        self.persist_mode = persist_mode  # "ok" | "fail" | "defer"
        self.persisted: list[tuple[str, list[tuple[bytes, bytes | None]]]] = []
        self.deferred: list = []
        self.coord = GroupCoordinator(lambda: self.now, self._persist, config or GroupConfig())

    def _persist(self, group_id, records, on_done):
        self.persisted.append((group_id, list(records)))
        if self.persist_mode == "ok":
            on_done(E.none)
        elif self.persist_mode == "fail":
            on_done(E.kafka_storage_error)
        else:
            self.deferred.append(on_done)

    def release(self, error=E.none):
        pending, self.deferred = self.deferred, []
        for on_done in pending:
            on_done(error)

    # -- clock
    def advance(self, ms: int) -> None:
        self.now += ms

    def tick(self, ms: int = 0) -> None:
        self.now += ms
        self.coord.tick()

    # -- requests
    def join(self, group="g", member_id="", instance=None, protocols=None, *, session=SESSION,
             rebalance=REBALANCE, require_known=False, protocol_type="consumer", client_id="client") -> Once:
        r = Once(f"join({member_id or instance or '?'})")
        self.coord.join(group_id=group, member_id=member_id, group_instance_id=instance, client_id=client_id,
                        client_host="/127.0.0.1", session_timeout_ms=session, rebalance_timeout_ms=rebalance,
                        protocol_type=protocol_type,
                        protocols=protocols if protocols is not None else [("range", subscription("t1"))],
                        require_known_member_id=require_known, respond=r)
        return r

    def sync(self, group, generation, member_id, assignments=None, instance=None, protocol_type="consumer",
             protocol_name=None) -> Once:
        r = Once(f"sync({member_id})")
        self.coord.sync(group_id=group, generation=generation, member_id=member_id, group_instance_id=instance,
                        protocol_type=protocol_type, protocol_name=protocol_name,
                        assignments=assignments or {}, respond=r)
        return r

    def heartbeat(self, group, generation, member_id, instance=None):
        return self.coord.heartbeat(group, generation, member_id, instance)

    def group(self, gid="g") -> Group:
        return self.coord.groups[gid]

    def records(self, gid=None):
        """Decoded (key, value-or-None) of everything persisted (for one group)."""
        out = []
        for g, recs in self.persisted:
            if gid is not None and g != gid:
                continue
            for k, v in recs:
                key = decode_key(k)
                if v is None:
                    out.append((key, None))
                elif isinstance(key, GroupKey):
                    out.append((key, decode_group_value(v)))
                else:
                    out.append((key, decode_offset_value(v)))
        return out


def member_id_for(h: Harness, group: str, **join_kwargs) -> str:
    """KIP-394 first join: MEMBER_ID_REQUIRED hands out the member id."""
    r = h.join(group, require_known=True, **join_kwargs)
    assert r.result.error == E.member_id_required
    assert r.result.member_id
    return r.result.member_id


def stable_group(h: Harness, n: int = 2, group: str = "g", instances=None, protocols=None, **join_kwargs):
    """Bring a new group to Stable with n members; returns (member ids, generation). The first id
    is the leader; member i gets assignment b"assign-<i>". Dynamic members go through KIP-394 first,
    so their joins are held until everyone joined; a static member's first join completes a
    rebalance of its own, so earlier members rejoin until one generation holds everyone."""
    instances = instances or [None] * n
    ids = [member_id_for(h, group, protocols=protocols, **join_kwargs) if inst is None else ""
           for inst in instances]

    def join(i):
        return h.join(group, member_id=ids[i], instance=instances[i], protocols=protocols, **join_kwargs)

    latest = [join(i) for i in range(len(instances))]
    for _ in range(3 * len(instances)):
        g = h.group(group)
        current = [r.called and r.result.error == E.none and r.result.generation == g.generation
                   and g.state is S.COMPLETING_REBALANCE for r in latest]
        if all(current):
            break
        # rejoin the first member answered for an older generation (parked joins just wait)
        i = next(i for i, r in enumerate(latest) if r.called and not current[i])
        assert latest[i].result.error == E.none, latest[i].result
        ids[i] = latest[i].result.member_id
        latest[i] = join(i)
    else:
        raise AssertionError("group did not complete a rebalance")
    ids = [r.result.member_id for r in latest]
    gen = latest[0].result.generation
    assert latest[0].result.leader == ids[0]
    assignments = {mid: f"assign-{i}".encode() for i, mid in enumerate(ids)}
    ptype = join_kwargs.get("protocol_type", "consumer")
    syncs = [h.sync(group, gen, mid, instance=inst, protocol_type=ptype) for mid, inst in zip(ids[1:], instances[1:])]
    syncs.insert(0, h.sync(group, gen, ids[0], assignments, instance=instances[0], protocol_type=ptype))
    for i, r in enumerate(syncs):
        assert r.result.error == E.none, r.result
        assert r.result.assignment == assignments[ids[i]]
    assert h.group(group).state is S.STABLE
    return ids, gen


# ------------------------------------------------------------------------------ state table


def test_transition_table_matches_kafka():
    # Kafka's GroupState.validPreviousStates, inverted. Kafka also allows Dead -> Dead; oncelog
    # deletes a Dead group at once so never needs it: either is accepted.
    kafka = {
        S.EMPTY: {S.PREPARING_REBALANCE, S.DEAD},
        S.PREPARING_REBALANCE: {S.COMPLETING_REBALANCE, S.EMPTY, S.DEAD},
        S.COMPLETING_REBALANCE: {S.STABLE, S.PREPARING_REBALANCE, S.DEAD},
        S.STABLE: {S.PREPARING_REBALANCE, S.DEAD},
        S.DEAD: set(),
    }
    assert {s: set(t) - ({S.DEAD} if s is S.DEAD else set()) for s, t in TRANSITIONS.items()} == kafka
    assert set(TRANSITIONS) == set(GroupState)


@pytest.mark.parametrize("old,new", list(itertools.product(GroupState, GroupState)),
                         ids=lambda s: s.value)
def test_group_transition_follows_table(old, new):
    g = Group("g", state=old, state_timestamp_ms=5)
    if new in TRANSITIONS[old]:
        g.transition(new, 42)
        assert g.state is new and g.state_timestamp_ms == 42
    else:
        with pytest.raises(IllegalStateTransition):
            g.transition(new, 42)
        assert g.state is old and g.state_timestamp_ms == 5


@pytest.fixture
def transitions(monkeypatch):
    """Every (group, old, new) the coordinator asks for, in order."""
    seen: list[tuple[str, GroupState, GroupState]] = []
    original = Group.transition

    def spy(self, new, now_ms):
        old = self.state
        original(self, new, now_ms)
        seen.append((self.group_id, old, new))

    monkeypatch.setattr(Group, "transition", spy)
    return seen


def test_coordinator_walks_every_legal_transition(transitions):
    h = Harness()
    # Empty -> PreparingRebalance -> CompletingRebalance -> Stable
    (a, b), gen = stable_group(h, 2)
    # Stable -> PreparingRebalance (a new member), PreparingRebalance -> CompletingRebalance
    c = member_id_for(h, "g")
    rc = h.join("g", c, require_known=True)
    assert h.group().state is S.PREPARING_REBALANCE and not rc.called
    ra, rb = h.join("g", a), h.join("g", b)
    assert h.group().state is S.COMPLETING_REBALANCE
    gen2 = ra.result.generation
    assert gen2 == gen + 1 and rb.result.generation == gen2 and rc.result.generation == gen2
    # CompletingRebalance -> PreparingRebalance (a member leaves before the leader's sync)
    sb = h.sync("g", gen2, b)
    assert h.coord.leave("g", [(c, None)]) == [E.none]
    assert h.group().state is S.PREPARING_REBALANCE
    assert sb.result.error == E.rebalance_in_progress
    # PreparingRebalance -> Empty (everyone leaves)
    assert h.coord.leave("g", [(a, None), (b, None)]) == [E.none, E.none]
    assert h.group().state is S.EMPTY
    # Empty -> Dead (DeleteGroups)
    done = Once()
    h.coord.delete_groups(["g"], done)
    assert done.result == {"g": E.none}
    assert "g" not in h.coord.groups

    moves = [(old, new) for _, old, new in transitions]
    assert moves == [
        (S.EMPTY, S.PREPARING_REBALANCE),
        (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE),
        (S.COMPLETING_REBALANCE, S.STABLE),
        (S.STABLE, S.PREPARING_REBALANCE),
        (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE),
        (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE),
        (S.PREPARING_REBALANCE, S.EMPTY),
        (S.EMPTY, S.DEAD),
    ]
    legal = {(old, new) for old, news in TRANSITIONS.items() for new in news}
    assert set(moves) == legal - {(s, S.DEAD) for s in (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.STABLE)}


def test_state_timestamp_tracks_transitions():
    h = Harness()
    stable_group(h, 1)
    t_stable = h.now
    assert h.group().state_timestamp_ms == t_stable
    h.advance(500)
    (mid,) = h.group().members
    h.coord.leave("g", [(mid, None)])
    assert h.group().state is S.EMPTY and h.group().state_timestamp_ms == t_stable + 500


# ------------------------------------------------------------------------------------- KIP-394


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


# ----------------------------------------------------------------------- two-member rebalance


def test_two_member_rebalance():
    h = Harness()
    meta_a, meta_b = subscription("t1"), subscription("t1", "t2")
    a = member_id_for(h, "g")
    b = member_id_for(h, "g")
    ra = h.join("g", a, protocols=[("range", meta_a)], require_known=True)
    assert not ra.called and h.group().state is S.PREPARING_REBALANCE
    rb = h.join("g", b, protocols=[("range", meta_b)], require_known=True)

    # both joins answered together, same generation
    la, lb = ra.result, rb.result
    assert la.error == lb.error == E.none
    assert la.generation == lb.generation == 1
    assert la.leader == lb.leader == a
    assert la.protocol_name == lb.protocol_name == "range"
    assert la.protocol_type == lb.protocol_type == "consumer"
    assert dict((m, meta) for m, _, meta in la.members) == {a: meta_a, b: meta_b}
    assert lb.members == ()
    assert h.group().state is S.COMPLETING_REBALANCE

    # the follower's SyncGroup waits for the leader's
    sb = h.sync("g", 1, b)
    assert not sb.called
    before = len(h.persisted)
    sa = h.sync("g", 1, a, {a: b"A", b: b"B"})
    assert sa.result == SyncResult(E.none, "consumer", "range", b"A")
    assert sb.result == SyncResult(E.none, "consumer", "range", b"B")
    assert h.group().state is S.STABLE

    # the group metadata was persisted, with the assignments
    assert len(h.persisted) == before + 1
    ((key, value),) = h.records("g")[-1:]
    assert key == GroupKey("g")
    assert value.generation == 1 and value.protocol == "range" and value.leader == a
    assert value.protocol_type == "consumer"
    by_id = {m.member_id: m for m in value.members}
    assert by_id[a].assignment == b"A" and by_id[b].assignment == b"B"
    assert by_id[a].subscription == meta_a and by_id[b].subscription == meta_b
    assert by_id[a].session_timeout_ms == SESSION and by_id[a].rebalance_timeout_ms == REBALANCE

    # a SyncGroup in Stable returns the stored assignment
    assert h.sync("g", 1, b).result.assignment == b"B"


def test_leader_sync_fills_missing_assignments_with_empty():
    h = Harness()
    (a, b), gen = stable_group(h, 2)
    h.join("g", a)  # leader rejoin in Stable forces a rebalance
    rb = h.join("g", b)
    gen2 = rb.result.generation
    sb = h.sync("g", gen2, b)
    h.sync("g", gen2, a, {a: b"only-a"})
    assert sb.result.error == E.none and sb.result.assignment == b""


def test_sync_error_cases():
    h = Harness()
    (a, b), gen = stable_group(h, 2)
    assert h.sync("g", gen + 1, b).result.error == E.illegal_generation
    assert h.sync("g", gen, "ghost").result.error == E.unknown_member_id
    assert h.sync("nope", gen, b).result.error == E.unknown_member_id
    assert h.sync("g", gen, b, protocol_type="connect").result.error == E.inconsistent_group_protocol
    assert h.sync("g", gen, b, protocol_name="roundrobin").result.error == E.inconsistent_group_protocol
    h.join("g", a)  # -> PreparingRebalance
    assert h.sync("g", gen, b).result.error == E.rebalance_in_progress


def test_follower_rejoin_without_changes_in_stable_gets_current_generation():
    h = Harness()
    (a, b), gen = stable_group(h, 2)
    r = h.join("g", b)
    assert r.result.error == E.none and r.result.generation == gen and r.result.members == ()
    assert h.group().state is S.STABLE


def test_leader_rejoin_in_stable_forces_rebalance():
    h = Harness()
    (a, b), gen = stable_group(h, 2)
    ra = h.join("g", a)
    assert not ra.called and h.group().state is S.PREPARING_REBALANCE


def test_changed_metadata_in_stable_forces_rebalance():
    h = Harness()
    (a, b), gen = stable_group(h, 2)
    rb = h.join("g", b, protocols=[("range", subscription("t1", "t9"))])
    assert not rb.called and h.group().state is S.PREPARING_REBALANCE
    ra = h.join("g", a)
    assert ra.result.generation == gen + 1
    assert dict((m, meta) for m, _, meta in ra.result.members)[b] == subscription("t1", "t9")


def test_rejoin_in_completing_rebalance_with_same_metadata_gets_current_generation():
    h = Harness()
    a = member_id_for(h, "g")
    b = member_id_for(h, "g")
    h.join("g", a, require_known=True)
    first_b = h.join("g", b, require_known=True)
    again = h.join("g", b)  # the first answer was lost
    assert again.result == first_b.result
    again_leader = h.join("g", a)
    assert {m for m, _, _ in again_leader.result.members} == {a, b}
    assert h.group().state is S.COMPLETING_REBALANCE


def test_sync_failure_to_persist_does_not_complete_the_rebalance():
    h = Harness()
    a = member_id_for(h, "g")
    b = member_id_for(h, "g")
    h.join("g", a, require_known=True)
    h.join("g", b, require_known=True)
    sb = h.sync("g", 1, b)
    h.persist_mode = "fail"
    sa = h.sync("g", 1, a, {a: b"A", b: b"B"})
    # Kafka answers the waiting SyncGroups with the (mapped) storage error and rebalances; here
    # they get REBALANCE_IN_PROGRESS — either way nobody gets an assignment and the group rebalances.
    for r in (sa, sb):
        assert r.result.error != E.none and r.result.assignment == b""
    assert h.group().state is S.PREPARING_REBALANCE
    assert all(m.assignment == b"" for m in h.group().members.values())


def test_sync_answers_wait_for_durability():
    h = Harness(persist_mode="defer")
    a = member_id_for(h, "g")
    b = member_id_for(h, "g")
    h.join("g", a, require_known=True)
    h.join("g", b, require_known=True)
    sb = h.sync("g", 1, b)
    sa = h.sync("g", 1, a, {a: b"A", b: b"B"})
    assert not sa.called and not sb.called and h.group().state is S.COMPLETING_REBALANCE
    h.release()
    assert sa.result.assignment == b"A" and sb.result.assignment == b"B"
    assert h.group().state is S.STABLE


def test_rebalance_during_inflight_sync_store_ignores_the_late_completion():
    h = Harness(persist_mode="defer")
    a = member_id_for(h, "g")
    b = member_id_for(h, "g")
    h.join("g", a, require_known=True)
    h.join("g", b, require_known=True)
    sa = h.sync("g", 1, a, {a: b"A", b: b"B"})
    assert h.coord.leave("g", [(b, None)]) == [E.none]
    assert sa.result.error == E.rebalance_in_progress
    state = h.group().state
    h.release()  # the store for generation 1 completes after the group moved on
    assert h.group().state is state is not S.STABLE


# ------------------------------------------------------------------------------------ heartbeats


def test_heartbeat_errors():
    h = Harness()
    (a, b), gen = stable_group(h, 2)
    assert h.heartbeat("g", gen, a) == E.none
    assert h.heartbeat("g", gen - 1, a) == E.illegal_generation
    assert h.heartbeat("g", gen + 1, a) == E.illegal_generation
    assert h.heartbeat("g", gen, "ghost") == E.unknown_member_id
    assert h.heartbeat("nope", gen, a) == E.unknown_member_id
    h.join("g", a)  # leader rejoin -> PreparingRebalance
    assert h.group().state is S.PREPARING_REBALANCE
    assert h.heartbeat("g", gen, b) == E.rebalance_in_progress
    h.join("g", b)
    assert h.group().state is S.COMPLETING_REBALANCE
    assert h.heartbeat("g", gen, b) == E.illegal_generation
    assert h.heartbeat("g", gen + 1, b) == E.none  # alive while waiting for the leader's sync


def test_heartbeat_extends_the_session():
    h = Harness()
    (a,), gen = stable_group(h, 1)
    for _ in range(5):
        h.tick(SESSION - 1)
        assert h.heartbeat("g", gen, a) == E.none
    h.tick(1)
    assert h.group().state is S.STABLE and a in h.group().members


# ---------------------------------------------------------------------------- session / timeouts


def test_session_timeout_removes_silent_member_and_rebalances():
    h = Harness()
    (a, b), gen = stable_group(h, 2)
    h.tick(SESSION // 2)
    assert h.heartbeat("g", gen, a) == E.none
    h.tick(SESSION // 2)  # b's deadline
    assert b not in h.group().members and a in h.group().members
    assert h.group().state is S.PREPARING_REBALANCE
    assert h.heartbeat("g", gen, a) == E.rebalance_in_progress
    assert h.heartbeat("g", gen, b) == E.unknown_member_id
    ra = h.join("g", a)
    assert ra.result.error == E.none and ra.result.generation == gen + 1
    assert [m for m, _, _ in ra.result.members] == [a]


def test_session_timeout_of_leader_moves_leadership():
    h = Harness()
    (a, b), gen = stable_group(h, 2)
    h.tick(SESSION // 2)
    h.heartbeat("g", gen, b)
    h.tick(SESSION // 2)
    assert h.group().leader_id == b
    rb = h.join("g", b)
    assert rb.result.leader == b and [m for m, _, _ in rb.result.members] == [b]


def test_every_member_timing_out_empties_the_group():
    h = Harness()
    stable_group(h, 2)
    gen_before = h.group().generation
    h.tick(SESSION)
    g = h.group()
    assert g.state is S.EMPTY and not g.members and g.leader_id is None and g.protocol_name is None
    assert g.generation == gen_before + 1
    key, value = h.records("g")[-1]
    assert key == GroupKey("g") and value.members == () and value.generation == gen_before + 1


def test_rebalance_timeout_removes_members_that_do_not_rejoin():
    h = Harness()
    (a, b), gen = stable_group(h, 2)
    ra = h.join("g", a)
    deadline = h.now + REBALANCE
    # b stays alive by heartbeats but never rejoins
    while h.now + SESSION // 2 < deadline:
        h.tick(SESSION // 2)
        assert h.heartbeat("g", gen, b) == E.rebalance_in_progress
    assert not ra.called
    h.now = deadline - 1
    h.tick()
    assert not ra.called and h.group().state is S.PREPARING_REBALANCE
    h.tick(1)
    assert ra.result.error == E.none and ra.result.generation == gen + 1
    assert [m for m, _, _ in ra.result.members] == [a]
    assert set(h.group().members) == {a}
    assert h.heartbeat("g", gen + 1, b) == E.unknown_member_id


def test_rebalance_timeout_is_the_largest_of_the_members():
    h = Harness()
    (a, b), gen = stable_group(h, 2, rebalance=REBALANCE)
    h.join("g", a, rebalance=3 * REBALANCE)  # -> PreparingRebalance; a now asks for a longer timeout
    assert h.group().rebalance_deadline_ms == h.now + 3 * REBALANCE


def test_member_awaiting_join_is_not_expired_by_session_timeout():
    h = Harness()
    (a, b), gen = stable_group(h, 2)
    ra = h.join("g", a)
    h.tick(SESSION // 2)
    h.heartbeat("g", gen, b)
    h.tick(SESSION // 2 + 1)  # a's session deadline passed while its JoinGroup is parked
    assert a in h.group().members and not ra.called


# ----------------------------------------------------------------------------- protocols / config


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


# --------------------------------------------------------------------------- static membership


def test_static_member_joins_without_member_id_required():
    h = Harness()
    r = h.join("g", instance="i1", require_known=True)
    assert r.result.error == E.none and r.result.member_id
    assert h.group().static_members == {"i1": r.result.member_id}
    assert r.result.members == ((r.result.member_id, "i1", subscription("t1")),)


def test_second_static_join_fences_old_member_id():
    h = Harness()
    (s1, s2), gen = stable_group(h, 2, instances=["i1", "i2"])
    replacement = h.join("g", instance="i2")
    new_id = h.group().static_members["i2"]
    assert new_id != s2 and s2 not in h.group().members and new_id in h.group().members
    assert not replacement.calls or replacement.result.member_id == new_id

    assert h.heartbeat("g", gen, s2, "i2") == E.fenced_instance_id
    assert h.sync("g", gen, s2, instance="i2").result.error == E.fenced_instance_id
    assert h.coord.validate_offset_commit("g", gen, s2, "i2") == E.fenced_instance_id
    assert h.coord.leave("g", [(s2, "i2")]) == [E.fenced_instance_id]
    assert new_id in h.group().members  # the fenced leave did not remove the new incarnation
    # without the instance id the old member is simply unknown
    assert h.heartbeat("g", gen, s2) == E.unknown_member_id


def test_static_replacement_fences_parked_join_and_inherits_leadership():
    h = Harness()
    (s1, s2), gen = stable_group(h, 2, instances=["i1", "i2"])
    parked = h.join("g", s1, instance="i1")  # leader rejoin: rebalance, join parked
    assert not parked.called and h.group().state is S.PREPARING_REBALANCE
    new1 = h.join("g", instance="i1")  # a new process with the same instance id
    assert parked.result.error == E.fenced_instance_id and parked.result.member_id == s1
    new_id = h.group().static_members["i1"]
    assert h.group().leader_id == new_id
    r2 = h.join("g", s2, instance="i2")
    assert new1.result.error == r2.result.error == E.none
    assert new1.result.leader == new_id and new1.result.member_id == new_id
    assert {(m, i) for m, i, _ in new1.result.members} == {(new_id, "i1"), (s2, "i2")}


def test_static_replacement_fences_parked_sync():
    h = Harness()
    (s1, s2), gen = stable_group(h, 2, instances=["i1", "i2"])
    h.join("g", s1, instance="i1")
    h.join("g", s2, instance="i2")
    parked = h.sync("g", gen + 1, s2, instance="i2")
    assert not parked.called
    h.join("g", instance="i2")
    assert parked.result.error == E.fenced_instance_id


def test_static_member_with_wrong_member_id_is_fenced_on_join():
    h = Harness()
    (s1,), gen = stable_group(h, 1, instances=["i1"])
    r = h.join("g", "some-other-id", instance="i1")
    assert r.result.error in (E.fenced_instance_id, E.unknown_member_id)


def test_replaced_static_member_rejoining_with_old_id_is_fenced():
    h = Harness()
    (s1, s2), gen = stable_group(h, 2, instances=["i1", "i2"])
    h.join("g", instance="i2")
    r = h.join("g", s2, instance="i2")
    assert r.result.error == E.fenced_instance_id


def test_static_member_restart_in_stable_does_not_rebalance():
    h = Harness()
    (s1, s2), gen = stable_group(h, 2, instances=["i1", "i2"])
    r = h.join("g", instance="i2")
    assert h.group().state is S.STABLE and h.group().generation == gen
    new_id = h.group().static_members["i2"]
    assert r.result.error == E.none and r.result.member_id == new_id and r.result.generation == gen
    s = h.sync("g", gen, new_id, instance="i2")
    assert s.result.error == E.none and s.result.assignment == b"assign-1"
    assert h.heartbeat("g", gen, s1, "i1") == E.none


def test_rebalance_timeout_keeps_static_members():
    h = Harness()
    (s1, s2), gen = stable_group(h, 2, instances=["i1", "i2"])
    r1 = h.join("g", s1, instance="i1")
    deadline = h.now + REBALANCE
    while h.now + SESSION // 2 < deadline:
        h.tick(SESSION // 2)
        h.heartbeat("g", gen, s2, "i2")
    h.now = deadline
    h.tick()
    assert r1.result.error == E.none
    assert s2 in h.group().members
    assert {m for m, _, _ in r1.result.members} == {s1, s2}


def test_leave_by_instance_id():
    h = Harness()
    (s1, s2), gen = stable_group(h, 2, instances=["i1", "i2"])
    assert h.coord.leave("g", [("", "i2")]) == [E.none]
    assert s2 not in h.group().members and "i2" not in h.group().static_members
    assert h.group().state is S.PREPARING_REBALANCE
    assert h.coord.leave("g", [("", "i-unknown")]) == [E.unknown_member_id]
    assert h.coord.leave("g", [(s1, "i1")]) == [E.none]
    assert h.group().state is S.EMPTY


def test_leave_errors():
    h = Harness()
    (a, b), gen = stable_group(h, 2)
    assert h.coord.leave("nope", [(a, None)]) == [E.unknown_member_id]
    assert h.coord.leave("g", [("ghost", None), (b, None)]) == [E.unknown_member_id, E.none]


# ---------------------------------------------------------------------------------- LeaveGroup


def test_leader_leaving_moves_leadership():
    h = Harness()
    (a, b, c), gen = stable_group(h, 3)
    assert h.coord.leave("g", [(a, None)]) == [E.none]
    g = h.group()
    assert g.state is S.PREPARING_REBALANCE and g.leader_id in (b, c)
    rb, rc = h.join("g", b), h.join("g", c)
    leader = rb.result.leader
    assert leader == rc.result.leader == g.leader_id
    leader_res, follower_res = (rb, rc) if leader == b else (rc, rb)
    assert {m for m, _, _ in leader_res.result.members} == {b, c}
    assert follower_res.result.members == ()
    assert rb.result.generation == gen + 1


def test_last_member_leaving_empties_the_group_after_the_rebalance():
    h = Harness()
    (a,), gen = stable_group(h, 1)
    assert h.coord.leave("g", [(a, None)]) == [E.none]
    g = h.group()
    assert g.state is S.EMPTY and not g.members and g.generation == gen + 1
    assert h.records("g")[-1] == (GroupKey("g"), GroupValue("consumer", gen + 1, None, None, h.now, ()))
    assert h.heartbeat("g", gen, a) == E.unknown_member_id
    # the group is reusable
    r = h.join("g")
    assert r.result.error == E.none and r.result.generation == gen + 2


def test_leave_while_others_parked_completes_the_join():
    h = Harness()
    (a, b), gen = stable_group(h, 2)
    ra = h.join("g", a)
    assert not ra.called
    h.coord.leave("g", [(b, None)])
    assert ra.result.error == E.none and [m for m, _, _ in ra.result.members] == [a]


def test_leave_of_parked_member_answers_its_join():
    h = Harness()
    (a, b), gen = stable_group(h, 2)
    ra = h.join("g", a)
    h.coord.leave("g", [(a, None)])
    assert ra.result.error == E.unknown_member_id


# -------------------------------------------------------------------------------------- offsets


def ov(offset, ts, metadata=""):
    return OffsetValue(offset, -1, metadata, ts)


def commit(h: Harness, group, offsets) -> Once:
    done = Once("commit")
    h.coord.commit_offsets(group, offsets, done)
    return done


def test_validate_offset_commit():
    h = Harness()
    (a, b), gen = stable_group(h, 2)
    assert h.coord.validate_offset_commit("g", gen, a, None) == E.none
    assert h.coord.validate_offset_commit("g", gen, "ghost", None) == E.unknown_member_id
    assert h.coord.validate_offset_commit("g", gen - 1, a, None) == E.illegal_generation
    assert h.coord.validate_offset_commit("g", -1, "", None) == E.unknown_member_id  # non-empty group
    assert h.coord.validate_offset_commit("unknown", 3, "x", None) == E.illegal_generation
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
    assert done.result == E.kafka_storage_error
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
    assert out.result[0] == E.kafka_storage_error
    assert h.coord.fetch_offsets("g", None) == {("t", 0): ov(1, 1)}


# -------------------------------------------------------------------------------- delete_groups


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
    assert out.result == {"idle": E.kafka_storage_error, "nope": E.group_id_not_found}


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


def test_delete_groups_with_duplicate_ids():
    h = Harness()
    h.coord.validate_offset_commit("idle", -1, "", None)
    out = Once()
    h.coord.delete_groups(["idle", "idle"], out)
    assert out.result == {"idle": E.none}


# ----------------------------------------------------------------------------- offsets retention


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


# ----------------------------------------------------------------------------------------- replay


def loaded_value(ts, protocol="range"):
    return GroupValue(
        protocol_type="consumer", generation=5, protocol=protocol, leader="m1", state_timestamp=ts,
        members=(
            MemberRecord("m1", None, "c1", "/h1", REBALANCE, SESSION, subscription("t1"), b"A1"),
            MemberRecord("m2", "i2", "c2", "/h2", REBALANCE, 2 * SESSION, subscription("t1"), b"A2"),
        ))


def test_replay_restores_a_stable_group():
    h = Harness()
    h.coord.load_offset(OffsetKey("g", "t1", 0), ov(11, 5))
    h.coord.load_offset(OffsetKey("g", "t1", 1), ov(12, 5))
    h.coord.load_offset(OffsetKey("g", "t1", 1), None)  # tombstone
    h.coord.load_group("g", loaded_value(ts=123))
    g = h.group()
    assert g.state is S.STABLE and g.generation == 5 and g.leader_id == "m1"
    assert g.protocol_type == "consumer" and g.protocol_name == "range"
    assert g.static_members == {"i2": "m2"} and g.state_timestamp_ms == 123
    assert h.coord.fetch_offsets("g", None) == {("t1", 0): ov(11, 5)}
    assert h.sync("g", 5, "m1").result == SyncResult(E.none, "consumer", "range", b"A1")
    assert h.heartbeat("g", 5, "m2", "i2") == E.none
    assert h.coord.validate_offset_commit("g", 5, "m2", "i2") == E.none


def test_replayed_members_must_heartbeat_within_their_session():
    h = Harness()
    h.coord.load_group("g", loaded_value(ts=0))
    h.tick(SESSION - 1)
    assert h.heartbeat("g", 5, "m1") == E.none
    h.tick(1)  # m2's session is 2 * SESSION: still in, m1 just heartbeat
    assert h.group().state is S.STABLE
    h.tick(2 * SESSION - 1)  # now past m2's deadline (load + 2 * SESSION) and m1's
    assert h.group().state is S.EMPTY and not h.group().members
    assert h.group().generation == 6


def test_replayed_member_that_keeps_heartbeating_survives_the_other():
    h = Harness()
    h.coord.load_group("g", loaded_value(ts=0))
    for _ in range(5):
        h.tick(SESSION // 2)
        assert h.heartbeat("g", 5, "m1") in (E.none, E.rebalance_in_progress)
    g = h.group()
    assert set(g.members) == {"m1"} and g.state is S.PREPARING_REBALANCE
    r = h.join("g", "m1")
    assert r.result.error == E.none and r.result.generation == 6


def test_replay_of_empty_group_and_group_tombstone():
    h = Harness()
    h.coord.load_group("g", GroupValue("consumer", 3, None, None, 77, ()))
    assert h.group().state is S.EMPTY and h.group().generation == 3
    assert h.join("g").result.generation == 4
    h.coord.load_group("g", None)
    assert "g" not in h.coord.groups


def test_persisted_group_record_round_trips_through_replay():
    h = Harness()
    (a, b), gen = stable_group(h, 2, instances=[None, "i2"])
    commit(h, "g", {("t1", 0): ov(42, h.now)})
    fresh = Harness()
    fresh.now = h.now + 1000
    for key, value in h.records():
        if isinstance(key, GroupKey):
            fresh.coord.load_group(key.group, value)
        else:
            fresh.coord.load_offset(key, value)
    g = fresh.group()
    assert g.state is S.STABLE and g.generation == gen and g.leader_id == a
    assert set(g.members) == {a, b} and g.static_members == {"i2": b}
    assert fresh.sync("g", gen, b, instance="i2").result.assignment == b"assign-1"
    assert fresh.coord.fetch_offsets("g", None) == {("t1", 0): ov(42, h.now)}


# ------------------------------------------------------- former divergences from Kafka (now fixed)


def test_member_awaiting_sync_is_not_expired_by_session_timeout():
    h = Harness()
    a = member_id_for(h, "g")
    b = member_id_for(h, "g")
    h.join("g", a, require_known=True)
    h.join("g", b, require_known=True)
    sb = h.sync("g", 1, b)  # b waits; the leader takes its time computing the assignment
    for _ in range(3):
        h.tick(SESSION // 2)
        assert b in h.group().members, "b was expired while parked in SyncGroup"
        assert h.heartbeat("g", 1, a) == E.none
    sa = h.sync("g", 1, a, {a: b"A", b: b"B"})
    assert sa.result.error == E.none and sb.result.assignment == b"B"


def test_leader_that_never_syncs_is_removed_after_rebalance_timeout():
    h = Harness()
    a = member_id_for(h, "g")
    b = member_id_for(h, "g")
    h.join("g", a, require_known=True)
    h.join("g", b, require_known=True)
    sb = h.sync("g", 1, b)
    for _ in range(2 * REBALANCE // (SESSION // 2)):
        h.tick(SESSION // 2)
        h.heartbeat("g", 1, a)
        h.heartbeat("g", 1, b)
    assert a not in h.group().members
    assert sb.result.error == E.rebalance_in_progress
    assert h.group().state is not S.COMPLETING_REBALANCE


def test_duplicate_parked_join_answers_both_requests():
    h = Harness()
    (a, b), gen = stable_group(h, 2)
    first = h.join("g", a)
    second = h.join("g", a)
    h.join("g", b)
    assert second.result.error == E.none
    assert first.called
