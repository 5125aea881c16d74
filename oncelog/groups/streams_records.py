"""The ``__consumer_offsets`` records of streams groups (KIP-1071), as Apache Kafka 4.4 writes
them (``group-coordinator/src/main/resources/common/message/StreamsGroup*.json``). Keys are an
int16 record type then the key's fields (the codec is :mod:`.records`'); a value is an int16
version (0) then the flexible encoding of :mod:`.consumer_records`.

    type  key                  value (version 0)
    17    group                StreamsGroupMetadata: int32 epoch, int64 metadata_hash; tag 0:
                               int32 validated_topology_epoch (default -1); tags 1-3 (assignment
                               configs, description epochs) skipped on read, not written
    19    group, member_id     StreamsGroupMemberMetadata: ?instance_id, ?rack_id, client_id,
                               client_host, int32 rebalance_timeout_ms, int32 topology_epoch,
                               process_id, ?user_endpoint {host, uint16 port}, [client_tags]
    20    group                StreamsGroupTargetAssignmentMetadata: int32 assignment_epoch; tag 0:
                               int64 assignment_timestamp
    21    group, member_id     StreamsGroupTargetAssignmentMember: active, standby, warmup tasks,
                               each [subtopology_id, [int32 partition]]
    22    group, member_id     StreamsGroupCurrentMemberAssignment: int32 member_epoch, int32
                               previous_member_epoch, int8 state, active, standby, warmup, and the
                               three pending revocation; each [subtopology_id, [int32]; tag 0:
                               ?[int32 assignment_epochs] (active lists only)]
    23    group                StreamsGroupTopology: int32 epoch, [subtopology]

Decoding raises ValueError only (the readers bound every count by what is left).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from .consumer_records import _encoded, _FlexReader, _FlexWriter
from .streams_topology import Subtopology, TopicInfo, Topology

STREAMS_GROUP_METADATA = 17
STREAMS_GROUP_MEMBER_METADATA = 19
STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA = 20
STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER = 21
STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT = 22
STREAMS_GROUP_TOPOLOGY = 23

Task = tuple[str, int]


@dataclass(frozen=True)
class StreamsGroupMetadataKey:
    group: str


@dataclass(frozen=True)
class StreamsGroupMemberMetadataKey:
    group: str
    member_id: str


@dataclass(frozen=True)
class StreamsGroupTargetAssignmentMetadataKey:
    group: str


@dataclass(frozen=True)
class StreamsGroupTargetAssignmentMemberKey:
    group: str
    member_id: str


@dataclass(frozen=True)
class StreamsGroupCurrentMemberAssignmentKey:
    group: str
    member_id: str


@dataclass(frozen=True)
class StreamsGroupTopologyKey:
    group: str


# (key class, record type, key field kinds) for :mod:`.records`' key codec
KEY_LAYOUTS = (
    (StreamsGroupMetadataKey, STREAMS_GROUP_METADATA, "s"),
    (StreamsGroupMemberMetadataKey, STREAMS_GROUP_MEMBER_METADATA, "ss"),
    (StreamsGroupTargetAssignmentMetadataKey, STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA, "s"),
    (StreamsGroupTargetAssignmentMemberKey, STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER, "ss"),
    (StreamsGroupCurrentMemberAssignmentKey, STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT, "ss"),
    (StreamsGroupTopologyKey, STREAMS_GROUP_TOPOLOGY, "s"),
)
STREAMS_KEYS = tuple(k for k, _, _ in KEY_LAYOUTS)


@dataclass(frozen=True)
class GroupMetadataValue:
    epoch: int
    metadata_hash: int
    validated_topology_epoch: int = -1


@dataclass(frozen=True)
class MemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    topology_epoch: int
    process_id: str
    user_endpoint: tuple[str, int] | None
    client_tags: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class TargetMetadataValue:
    assignment_epoch: int
    assignment_timestamp: int = 0


@dataclass(frozen=True)
class TargetMemberValue:
    active: frozenset[Task] = frozenset()
    standby: frozenset[Task] = frozenset()
    warmup: frozenset[Task] = frozenset()


@dataclass(frozen=True)
class CurrentAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    active: Mapping[Task, int]  # task -> assignment epoch
    standby: frozenset[Task] = frozenset()
    warmup: frozenset[Task] = frozenset()
    pending_active: Mapping[Task, int] = None  # type: ignore[assignment]
    pending_standby: frozenset[Task] = frozenset()
    pending_warmup: frozenset[Task] = frozenset()


# -- encode -------------------------------------------------------------------------------------

def _by_subtopology(tasks) -> list[tuple[str, list[int]]]:
    grouped: dict[str, list[int]] = {}
    for sid, p in tasks:
        grouped.setdefault(sid, []).append(p)
    return [(sid, sorted(ps)) for sid, ps in sorted(grouped.items())]


def _write_tasks(w: _FlexWriter, tasks, epochs: Mapping[Task, int] | None = None, tagged: bool = False) -> None:
    def one(w: _FlexWriter, item) -> None:
        sid, ps = item
        w.compact_string(sid).compact_array(ps, lambda w, p: w.i32(p))
        tags = {}
        if tagged and epochs is not None and ps:
            tags[0] = _encoded(lambda x: x.compact_array([epochs[(sid, p)] for p in ps], lambda x, e: x.i32(e)))
        w.tags(tags)
    w.compact_array(_by_subtopology(tasks), one)


def _write_kv(w: _FlexWriter, kv) -> None:
    w.compact_string(kv[0]).compact_string(kv[1]).tags({})


def _write_topic_info(w: _FlexWriter, t: TopicInfo) -> None:
    w.compact_string(t.name).i32(t.partitions).i16(t.replication_factor)
    w.compact_array(t.configs, _write_kv).tags({})


def _write_subtopology(w: _FlexWriter, s: Subtopology) -> None:
    w.compact_string(s.subtopology_id)
    w.compact_array(s.source_topics, lambda w, n: w.compact_string(n))
    w.compact_array(s.source_topic_regex, lambda w, n: w.compact_string(n))
    w.compact_array(s.state_changelog_topics, _write_topic_info)
    w.compact_array(s.repartition_sink_topics, lambda w, n: w.compact_string(n))
    w.compact_array(s.repartition_source_topics, _write_topic_info)

    def group(w: _FlexWriter, g) -> None:
        for idx in g:
            w.compact_array(idx, lambda w, i: w.i16(i))
        w.tags({})
    w.compact_array(s.copartition_groups, group).tags({})


def encode_streams_value(value) -> bytes:
    w = _FlexWriter().i16(0)
    if isinstance(value, GroupMetadataValue):
        w.i32(value.epoch).i64(value.metadata_hash)
        tags = {}
        if value.validated_topology_epoch != -1:
            tags[0] = _encoded(lambda x: x.i32(value.validated_topology_epoch))
        w.tags(tags)
    elif isinstance(value, MemberMetadataValue):
        w.compact_string(value.instance_id).compact_string(value.rack_id).compact_string(value.client_id)
        w.compact_string(value.client_host).i32(value.rebalance_timeout_ms).i32(value.topology_epoch)
        w.compact_string(value.process_id)
        if value.user_endpoint is None:
            w.i8(-1)
        else:
            w.i8(1).compact_string(value.user_endpoint[0]).i16(value.user_endpoint[1] - (1 << 16)
                                                                if value.user_endpoint[1] >= 1 << 15
                                                                else value.user_endpoint[1]).tags({})
        w.compact_array(value.client_tags, _write_kv).tags({})
    elif isinstance(value, TargetMetadataValue):
        w.i32(value.assignment_epoch)
        w.tags({0: _encoded(lambda x: x.i64(value.assignment_timestamp))} if value.assignment_timestamp else {})
    elif isinstance(value, TargetMemberValue):
        for tasks in (value.active, value.standby, value.warmup):
            _write_tasks(w, tasks)
        w.tags({})
    elif isinstance(value, CurrentAssignmentValue):
        w.i32(value.member_epoch).i32(value.previous_member_epoch).i8(value.state)
        _write_tasks(w, value.active, value.active, tagged=True)
        _write_tasks(w, value.standby)
        _write_tasks(w, value.warmup)
        pending = value.pending_active or {}
        _write_tasks(w, pending, pending, tagged=True)
        _write_tasks(w, value.pending_standby)
        _write_tasks(w, value.pending_warmup)
        w.tags({})
    elif isinstance(value, Topology):
        w.i32(value.epoch).compact_array(value.subtopologies, _write_subtopology).tags({})
    else:
        raise TypeError(f"not a streams group value: {value!r}")
    return w.to_bytes()


# -- decode -------------------------------------------------------------------------------------

def _read_tasks(r: _FlexReader, with_epochs: bool = False) -> tuple[frozenset[Task], dict[Task, int]]:
    tasks: set[Task] = set()
    epochs: dict[Task, int] = {}

    def one(r: _FlexReader) -> None:
        sid = r.compact_string()
        ps = r.compact_array(lambda r: r.i32(), 4)
        tags = r.tags({0: lambda r: r.compact_nullable_array(lambda r: r.i32(), 4)})
        es = tags.get(0)
        for i, p in enumerate(ps):
            tasks.add((sid, p))
            if with_epochs:
                epochs[(sid, p)] = es[i] if es is not None and len(es) == len(ps) else 0
    r.compact_array(one, 3)
    return frozenset(tasks), epochs


def _read_kv(r: _FlexReader) -> tuple[str, str]:
    kv = (r.compact_string(), r.compact_string())
    r.tags({})
    return kv


def _read_topic_info(r: _FlexReader) -> TopicInfo:
    name, partitions, rf = r.compact_string(), r.i32(), r.i16()
    configs = tuple(r.compact_array(_read_kv, 3))
    r.tags({})
    return TopicInfo(name, partitions, rf, configs)


def _read_subtopology(r: _FlexReader) -> Subtopology:
    sid = r.compact_string()
    sources = tuple(r.compact_array(lambda r: r.compact_string(), 1))
    regex = tuple(r.compact_array(lambda r: r.compact_string(), 1))
    changelogs = tuple(r.compact_array(_read_topic_info, 9))
    sinks = tuple(r.compact_array(lambda r: r.compact_string(), 1))
    repartition = tuple(r.compact_array(_read_topic_info, 9))

    def group(r: _FlexReader):
        g = tuple(tuple(r.compact_array(lambda r: r.i16(), 2)) for _ in range(3))
        r.tags({})
        return g
    groups = tuple(r.compact_array(group, 4))
    r.tags({})
    return Subtopology(sid, sources, regex, changelogs, sinks, repartition, groups)


def decode_streams_value(key, data: bytes):
    r = _FlexReader(data)
    version = r.i16()
    if version != 0:
        raise ValueError(f"unsupported {type(key).__name__} value version {version}")
    if isinstance(key, StreamsGroupMetadataKey):
        epoch, mhash = r.i32(), r.i64()
        tags = r.tags({0: lambda r: r.i32()})
        return GroupMetadataValue(epoch, mhash, tags.get(0, -1))
    if isinstance(key, StreamsGroupMemberMetadataKey):
        iid, rack, cid, host = r.compact_nullable_string(), r.compact_nullable_string(), r.compact_string(), \
            r.compact_string()
        rto, tepoch, pid = r.i32(), r.i32(), r.compact_string()
        endpoint = None
        if r.i8() >= 0:
            endpoint = (r.compact_string(), r.i16() & 0xFFFF)
            r.tags({})
        tags = tuple(r.compact_array(_read_kv, 3))
        r.tags({})
        return MemberMetadataValue(iid, rack, cid, host, rto, tepoch, pid, endpoint, tags)
    if isinstance(key, StreamsGroupTargetAssignmentMetadataKey):
        epoch = r.i32()
        tags = r.tags({0: lambda r: r.i64()})
        return TargetMetadataValue(epoch, tags.get(0, 0))
    if isinstance(key, StreamsGroupTargetAssignmentMemberKey):
        lists = [_read_tasks(r)[0] for _ in range(3)]
        r.tags({})
        return TargetMemberValue(*lists)
    if isinstance(key, StreamsGroupCurrentMemberAssignmentKey):
        me, pe, state = r.i32(), r.i32(), r.i8()
        _, active = _read_tasks(r, True)
        standby, warmup = _read_tasks(r)[0], _read_tasks(r)[0]
        _, pending = _read_tasks(r, True)
        pstandby, pwarmup = _read_tasks(r)[0], _read_tasks(r)[0]
        r.tags({})
        return CurrentAssignmentValue(me, pe, state, active, standby, warmup, pending, pstandby, pwarmup)
    if isinstance(key, StreamsGroupTopologyKey):
        epoch = r.i32()
        subs = tuple(r.compact_array(_read_subtopology, 8))
        r.tags({})
        return Topology(epoch, subs)
    raise ValueError(f"not a streams group key: {key!r}")
