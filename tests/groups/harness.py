"""State-machine tests of the classic-protocol group coordinator: no sockets, no asyncio.

Time is a mutable int behind the injected clock; durability is a fake ``persist`` that records
the ``__consumer_offsets`` records it is given and answers ``on_done`` (at once with NONE, with
KAFKA_STORAGE_ERROR, or later, when the test says so). Expected behaviour is Kafka's classic
group coordinator (GroupCoordinator / GroupMetadata / MemberMetadata), KIP-394 and KIP-345.
Divergences from Kafka found by these tests were fixed; the last section holds their regression tests.

The coordinator answers domain errors (:mod:`oncelog.errors`); the tests assert wire codes, so its
answers are turned into codes as the handlers do (:func:`oncelog.apis._groups.error_code`) by
:class:`CodedCoordinator`, and the fake ``persist`` turns the codes tests give it into domain errors.

Shared by the test modules of this package, one per section of the coordinator."""

from __future__ import annotations


import dataclasses
import itertools


import struct


import pytest


from kio.schema.errors import ErrorCode


from oncelog import errors
from oncelog.apis._groups import error_code


from oncelog.config.settings import GroupConfig
from oncelog.groups.coordinator import GroupCoordinator
from oncelog.groups.state import TRANSITIONS, Group, GroupState, SyncResult
from oncelog.state_machine import IllegalStateTransition


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


def _coded(result):
    """A JoinResult / SyncResult with its domain error as the handler's wire code."""
    return dataclasses.replace(result, error=error_code(result.error))


def _domain(code: ErrorCode) -> errors.KafkaError | None:
    """What a fake write answers for a test's error code: None for NONE, else the domain error."""
    error = next((cls for cls, c in errors.ERROR_CODES.items() if c == code), errors.KafkaError)
    return None if code == E.none else error(f"test: {code.name}")


def _raised_code(check, *args) -> ErrorCode:
    try:
        check(*args)
    except errors.KafkaError as exc:
        return error_code(exc)
    return E.none


class CodedCoordinator(GroupCoordinator):
    """The coordinator with every answer as a wire code, as its handlers send it."""

    def join(self, *, respond, **kwargs):
        return super().join(respond=lambda result: respond(_coded(result)), **kwargs)

    def sync(self, *, respond, **kwargs):
        return super().sync(respond=lambda result: respond(_coded(result)), **kwargs)

    def heartbeat(self, *args):
        return _raised_code(super().heartbeat, *args)

    def leave(self, group_id, members):
        return [error_code(e) for e in super().leave(group_id, members)]

    def validate_offset_commit(self, *args):
        return _raised_code(super().validate_offset_commit, *args)

    def validate_txn_offset_commit(self, *args):
        return _raised_code(super().validate_txn_offset_commit, *args)

    def commit_offsets(self, group_id, offsets, on_done):
        return super().commit_offsets(group_id, offsets, lambda err: on_done(error_code(err)))

    def delete_offsets(self, group_id, partitions, respond):
        return super().delete_offsets(group_id, partitions, lambda err, results: respond(
            error_code(err), {tp: error_code(e) for tp, e in results.items()}))

    def delete_groups(self, group_ids, respond):
        return super().delete_groups(group_ids, lambda results: respond(
            {g: error_code(e) for g, e in results.items()}))


class Harness:
    def __init__(self, config: GroupConfig | None = None, persist_mode: str = "ok"):
        self.now = 1_000_000
        self.persist_mode = persist_mode  # "ok" | "fail" | "defer"
        self.persisted: list[tuple[str, list[tuple[bytes, bytes | None]]]] = []
        self.deferred: list = []
        self.coord = CodedCoordinator(lambda: self.now, self._persist, config or GroupConfig())

    def _persist(self, group_id, records, on_done):
        """Answers domain errors; ``deferred`` holds callbacks that take a test's code."""
        self.persisted.append((group_id, list(records)))
        if self.persist_mode == "ok":
            on_done(None)
        elif self.persist_mode == "fail":
            on_done(_domain(E.kafka_storage_error))
        else:
            self.deferred.append(lambda code: on_done(_domain(code)))

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


def ov(offset, ts, metadata=""):
    return OffsetValue(offset, -1, metadata, ts)


def commit(h: Harness, group, offsets) -> Once:
    done = Once("commit")
    h.coord.commit_offsets(group, offsets, done)
    return done


def loaded_value(ts, protocol="range"):
    return GroupValue(
        protocol_type="consumer", generation=5, protocol=protocol, leader="m1", state_timestamp=ts,
        members=(
            MemberRecord("m1", None, "c1", "/h1", REBALANCE, SESSION, subscription("t1"), b"A1"),
            MemberRecord("m2", "i2", "c2", "/h2", REBALANCE, 2 * SESSION, subscription("t1"), b"A2"),
        ))
