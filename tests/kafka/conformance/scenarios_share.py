"""KIP-932 share groups: ShareGroupHeartbeat v1 (validation, join and assignment, epochs, fencing,
leave, a group id another group type holds), ShareGroupDescribe v1, share sessions (ShareFetch and
ShareAcknowledge epochs), and records acquired, acknowledged and redelivered (ShareFetch v1-v2,
ShareAcknowledge v2).

Invariants: member ids are the client's (random UUID strings, a run's own) and compare by role:
answers name members by the role the scenario gave them, or by the framework's numbering; a
member joins and heartbeats until its assignment holds the topic's partitions before it fetches
(Kafka answers a new member an empty assignment and the partitions once their share state is
initialised, a heartbeat or more later: scenarios wait for that state, never for a time);
share.auto.offset.reset=earliest is set on each GROUP resource before its first member joins, so
records produced before the join are acquired. Requests go where a client sends them: heartbeats
and describes to the group coordinator, ShareFetch and ShareAcknowledge to the partition's
leader, on the member's own identity (a share session belongs to its connection).
A ShareFetch partition's ``records`` are compared decoded: Kafka sends null where nothing was
acquired, and kio's field is not nullable (oncelog sends no bytes): both read as no records.
"""

from __future__ import annotations

import datetime
import re
import uuid

from .framework import DESCRIBE_CONFIGS, ScenarioFailed, batch, decode_records, mod
from .routing import GROUP as COORDINATOR_GROUP
from .scenarios_admin import BROKER, GROUP, SET, describe_configs, incremental, node_id
from .scenarios_consumer_groups import cgh
from .scenarios_groups import build, join_member, scenario

SG_HEARTBEAT, SG_DESCRIBE, SHARE_FETCH, SHARE_ACK = 76, 77, 78, 79
GAP, ACCEPT, RELEASE, REJECT = 0, 1, 2, 3
AREA = "share_groups"


# ---------------------------------------------------------------------- routing and members


def _to(k, request, node, via=None):
    """``request`` as identity ``via`` (default the conversation's client) to ``node`` on a cluster."""
    ident = via or k.client
    if not k.router.clustered:
        return ident.request(request)
    return ident.on(k.router.address(node)).request(request)


def _coordinator(k, group: str):
    return k.router.coordinator(COORDINATOR_GROUP, group) if k.router.clustered else None


def _leader(k, topic_id, partition: int = 0):
    return k.router.leader(topic_id, partition) if k.router.clustered else None


def sgh(k, group: str, member: str, epoch: int, *, topics=None, rack=None, via=None):
    """ShareGroupHeartbeat v1, to the group's coordinator."""
    return _to(k, build(SG_HEARTBEAT, 1, group_id=group, member_id=member, member_epoch=epoch, rack_id=rack,
                        subscribed_topic_names=None if topics is None else tuple(topics)),
               _coordinator(k, group), via)


def sgd(k, *groups: str, roles: dict[str, str] | None = None):
    """ShareGroupDescribe v1: per group (id, error, message, state, group epoch, assignment epoch,
    assignor, members as [role, epoch, rack, client id, subscription, assignment] by role)."""
    roles = roles or {}
    node = _coordinator(k, groups[0]) if groups else None
    resp = _to(k, build(SG_DESCRIBE, 1, group_ids=tuple(groups), include_authorized_operations=False), node)
    return [(g.group_id, g.error_code, g.error_message, g.group_state, g.group_epoch, g.assignment_epoch,
             g.assignor_name,
             sorted(([roles.get(m.member_id, "?"), m.member_epoch, m.rack_id, m.client_id,
                      sorted(m.subscribed_topic_names),
                      sorted((tp.topic_name, sorted(tp.partitions)) for tp in m.assignment.topic_partitions)]
                     for m in g.members), key=lambda row: row[0]))
            for g in resp.groups]


def share_group(k, base: str = "g") -> str:
    """A group id whose share.auto.offset.reset is earliest (set before any member joins)."""
    g = k.name(base)
    r = incremental(k, GROUP, g, [("share.auto.offset.reset", SET, "earliest")])
    if int(r.responses[0].error_code) != 0:
        raise ScenarioFailed(f"share.auto.offset.reset of {base}: {r.responses[0]!r}")
    if k.router.clustered:  # every node has it before a share partition is initialised with it
        m = mod(DESCRIBE_CONFIGS, 4)
        request = m.DescribeConfigsRequest(include_synonyms=False, include_documentation=False, resources=(
            m.DescribeConfigsResource(resource_type=GROUP, resource_name=g,
                                      configuration_keys=("share.auto.offset.reset",)),))

        def everywhere():
            return all(any(c.value == "earliest" for c in k.client.on(k.router.address(n)).request(request)
                           .results[0].configs) for n in sorted(k.router.nodes))
        k.wait_until(everywhere, f"{base}'s share.auto.offset.reset on every node")
    return g


def _assigned(resp) -> list:
    return sorted((tp.topic_id, sorted(tp.partitions)) for tp in resp.assignment.topic_partitions)


class Member:
    """One share consumer: its member id (a UUID string), heartbeat epoch, session epoch, identity."""

    def __init__(self, k, group: str, role: str, *, own_connection: bool = False) -> None:
        self.k, self.group, self.role = k, group, role
        self.id = str(uuid.uuid4())
        self.via = k.connect() if own_connection else k.client
        self.epoch = 0
        self.previous = None
        self.session = 0
        self.assignment: list = []

    def heartbeat(self, epoch: int | None = None, **kw):
        r = sgh(self.k, self.group, self.id, self.epoch if epoch is None else epoch, via=self.via, **kw)
        if int(r.error_code) == 0 and epoch is None:
            if r.member_epoch != self.epoch:
                self.previous = self.epoch
            self.epoch = r.member_epoch
            if r.assignment is not None:
                self.assignment = _assigned(r)
        return r

    def join(self, *topics: str, want: int | None = None):
        """Join (epoch 0) subscribed to ``topics``; heartbeat until assigned ``want`` partitions
        (default: every partition of the topics). Returns [the join's answer, the answer assigning them]."""
        first = self.heartbeat(topics=list(topics))
        if int(first.error_code) != 0:
            raise ScenarioFailed(f"join {self.role}: {first.error_code!r} {first.error_message}")
        if first.assignment is not None:
            self.assignment = _assigned(first)
        if want is None:
            want = sum(len(t.partitions) for t in self.k.metadata(list(topics)).topics)
        got = {}

        def assigned():
            if sum(len(ps) for _, ps in self.assignment) >= want:
                return True
            r = self.heartbeat()
            if int(r.error_code) != 0:
                raise ScenarioFailed(f"heartbeat {self.role}: {r.error_code!r} {r.error_message}")
            got["last"] = r
            return sum(len(ps) for _, ps in self.assignment) >= want
        self.k.wait_until(assigned, f"{self.role}'s assignment", interval=0.1)
        return [first, got.get("last", first)]

    def fetch(self, topic_id, partitions=(0,), *, acks=None, epoch=None, max_records=500, batch_size=500,
              max_wait_ms=500, min_bytes=1, mode=0, version=2, forget=()):
        """ShareFetch as this member at its session epoch (advanced on success). ``acks``:
        {partition: [(first, last, [types])]}."""
        m = mod(SHARE_FETCH, version)
        acks = acks or {}
        parts = sorted(set(partitions) | set(acks))
        topics = (m.FetchTopic(topic_id=topic_id, partitions=tuple(
            m.FetchPartition(partition_index=p, acknowledgement_batches=tuple(
                m.AcknowledgementBatch(first_offset=f, last_offset=last, acknowledge_types=tuple(ts))
                for f, last, ts in acks.get(p, ()))) for p in parts)),) if parts else ()
        req = build(SHARE_FETCH, version, group_id=self.group, member_id=self.id,
                    share_session_epoch=self.session if epoch is None else epoch,
                    max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=min_bytes, max_bytes=1 << 20,
                    max_records=max_records, batch_size=batch_size, share_acquire_mode=mode, is_renew_ack=False,
                    topics=topics, forgotten_topics_data=tuple(
                        m.ForgottenTopic(topic_id=topic_id, partitions=tuple(ps)) for ps in forget))
        r = _to(self.k, req, _leader(self.k, topic_id, parts[0] if parts else 0), self.via)
        if int(r.error_code) == 0 and epoch is None:
            self.session = -1 if self.session == -1 else self.session + 1
        return r

    def fetch_until(self, topic_id, **kw):
        """ShareFetch until it acquires something (Kafka initialises a share partition on its first
        fetch and may answer that fetch empty); that answer."""
        got = {}

        def acquired():
            r = got["r"] = self.fetch(topic_id, **kw)
            if int(r.error_code) != 0:
                return True
            return any(p.acquired_records for t in r.responses for p in t.partitions)
        self.k.wait_until(acquired, f"{self.role} acquires records", interval=0.05)
        return got["r"]

    def acknowledge(self, topic_id, acks, *, epoch=None, version=2):
        """ShareAcknowledge as this member: ``acks`` {partition: [(first, last, [types])]}."""
        m = mod(SHARE_ACK, version)
        topics = (m.AcknowledgeTopic(topic_id=topic_id, partitions=tuple(
            m.AcknowledgePartition(partition_index=p, acknowledgement_batches=tuple(
                m.AcknowledgementBatch(first_offset=f, last_offset=last, acknowledge_types=tuple(ts))
                for f, last, ts in bs)) for p, bs in sorted(acks.items()))),) if acks else ()
        req = build(SHARE_ACK, version, group_id=self.group, member_id=self.id,
                    share_session_epoch=self.session if epoch is None else epoch, is_renew_ack=False, topics=topics)
        r = _to(self.k, req, _leader(self.k, topic_id, min(acks) if acks else 0), self.via)
        if int(r.error_code) == 0 and epoch is None:
            self.session += 1
        return r


def fetched(r):
    """A ShareFetch answer, compared: top-level error and lock timeout; per partition the errors,
    acknowledge errors, leader epoch, acquired ranges with delivery counts and the records decoded
    (null and empty records both read as none: see the module docstring)."""
    return {"error_code": r.error_code, "error_message": r.error_message,
            "acquisition_lock_timeout": r.acquisition_lock_timeout,
            "responses": [{"topic_id": t.topic_id, "partitions": [
                {"partition_index": p.partition_index, "error_code": p.error_code, "error_message": p.error_message,
                 "acknowledge_error_code": p.acknowledge_error_code,
                 "acknowledge_error_message": p.acknowledge_error_message,
                 "current_leader": p.current_leader,
                 "acquired_records": [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records],
                 "delivered": [_record(rec) for rec in decode_records(p.records)]}
                for p in sorted(t.partitions, key=lambda p: p.partition_index)]} for t in r.responses]}


def _record(rec: dict):
    if "offset" not in rec:
        return rec
    return [rec["offset"], None if rec["key"] is None else rec["key"].decode(),
            None if rec["value"] is None else rec["value"].decode()]


def relative(answer, epochs: dict[int, str], ids: dict[str, str] | None = None):
    """A heartbeat answer with its member epoch, and the epochs its message names, as the names
    ``epochs`` gives them (e.g. {7: "E"}; epoch numbers differ by design, see sgh_join_and_assignment),
    and the member ids its message names as ``ids`` names them (a run's own UUIDs)."""
    if answer is None:
        return None
    msg = answer.error_message
    if msg:
        msg = re.sub(r"\((-?\d+)\)", lambda m: "(%s)" % epochs.get(int(m.group(1)), m.group(1)), msg)
        for member, role in (ids or {}).items():
            msg = msg.replace(member, f"<{role}>")
    return {"error_code": answer.error_code, "error_message": msg, "member_id": answer.member_id,
            "member_epoch": epochs.get(answer.member_epoch, answer.member_epoch) if answer.member_epoch > 0
            else answer.member_epoch,
            "assignment": None if answer.assignment is None else _assigned(answer)}


def acquired(r) -> list:
    """Just the acquired ranges of a ShareFetch answer, per partition that acquired any. A partition
    that acquired nothing is left out: Kafka answers it with an empty entry when its fetch read the
    log and acquired nothing, and leaves it out when the partition's fetch lock was busy (still
    persisting an earlier acquisition), a race of its own seen once in CI."""
    return [(p.partition_index, [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records])
            for t in r.responses for p in sorted(t.partitions, key=lambda p: p.partition_index) if p.acquired_records]


def topic_id(k, topic: str):
    return k.metadata([topic]).topics[0].topic_id


def produce_values(k, topic: str, *batches: list[bytes], partition: int = 0) -> None:
    """Each list of values as one batch (keys k0, k1...), in order."""
    n = 0
    for values in batches:
        keys = [b"k%d" % (n + i) for i in range(len(values))]
        n += len(values)
        r = k.produce(topic, [(partition, batch(values, keys=keys))])
        code = r.responses[0].partition_responses[0].error_code
        if int(code) != 0:
            raise ScenarioFailed(f"produce: {code!r}")


def ready(k, partitions: int = 1, *batches: list[bytes], role: str = "a"):
    """A topic (``batches`` produced to partition 0), a share group reading it from the earliest, and
    a member assigned its partitions: (topic id, group, member)."""
    t = k.create_topic("t", partitions)
    produce_values(k, t, *batches)
    g = share_group(k)
    a = Member(k, g, role)
    a.join(t)
    return topic_id(k, t), g, a


# ---------------------------------------------------------------------- ShareGroupHeartbeat


@scenario(AREA)
def sgh_invalid_requests(k):
    """INVALID_REQUEST with Kafka's messages: empty member id, empty group id, empty rack id, epoch 0
    without a subscription (null and empty), epoch -2."""
    t = k.create_topic("t", 1)
    g, m = k.name("g"), str(uuid.uuid4())
    return [sgh(k, g, "", 0, topics=[t]), sgh(k, "", m, 0, topics=[t]), sgh(k, g, m, 0, topics=[t], rack=""),
            sgh(k, g, m, 0), sgh(k, g, m, 0, topics=[]), sgh(k, g, m, -2, topics=[t])]


@scenario(AREA, differs=(
    "by design: Kafka initialises a new assignment's share-partition state asynchronously (the join answers "
    "epoch 1 and an empty assignment; the partitions come a heartbeat or more later at epoch 3, the group "
    "epoch bumped for the metadata and again once initialised); oncelog initialises the state when it "
    "assigns, and answers the partitions in the join at epoch 1 (clients take the epoch and assignment given)"))
def sgh_join_and_assignment(k):
    """A member joins a new topic's group: the join's epoch and assignment, the epoch and partitions once
    assigned; a heartbeat then (nothing changed) answers a null assignment at the same epoch."""
    t = k.create_topic("t", 3)
    g = k.name("g")
    a = Member(k, g, "a")
    first, assigned = a.join(t)
    same = a.heartbeat()
    return [first, first.member_id == a.id, assigned, same, sgd(k, g, roles={a.id: "a"})]


@scenario(AREA)
def sgh_join_relative(k):
    """A member's join, its assignment and a heartbeat with nothing changed (null assignment, same epoch),
    with epochs compared relative to the assigned one (E); ShareGroupDescribe: Stable at E, assignor simple."""
    t = k.create_topic("t", 3)
    g = k.name("g")
    a = Member(k, g, "a")
    first, assigned = a.join(t)
    same = a.heartbeat()
    e = a.epoch
    d = sgd(k, g, roles={a.id: "a"})[0]
    names = {e: "E"}
    return [first.error_code, first.member_id == a.id, first.heartbeat_interval, relative(same, names),
            [d[0], d[1], d[2], d[3], names.get(d[4], d[4]), names.get(d[5], d[5]), d[6],
             [[row[0], names.get(row[1], row[1])] + row[2:] for row in d[7]]]]


@scenario(AREA)
def sgh_epochs_previous_and_fenced(k):
    """At epoch E (moved there from P by other members' joins) P is accepted (answer: E); E+1 and an epoch
    below P are FENCED_MEMBER_EPOCH; an unknown member id with epoch 1: UNKNOWN_MEMBER_ID."""
    t = k.create_topic("t", 3)
    g = k.name("g")
    a = Member(k, g, "a")
    a.join(t)
    for role in ("b", "c"):  # each join moves a to a new epoch (and takes one of its partitions)
        before = a.epoch
        Member(k, g, role, own_connection=True).join(t, want=1)

        def moved():
            a.heartbeat()
            return a.epoch > before
        k.wait_until(moved, f"a past epoch {before}", interval=0.1)
    e, prev = a.epoch, a.previous
    older = prev - 1
    names = {e: "E", prev: "P", e + 1: "E+1", older: "P-1"}
    stranger = str(uuid.uuid4())
    ids = {a.id: "a", stranger: "stranger"}
    return [relative(sgh(k, g, a.id, prev), names, ids), relative(sgh(k, g, a.id, e + 1), names, ids),
            relative(sgh(k, g, a.id, older), names, ids),
            relative(sgh(k, g, stranger, 1), names, ids)]


@scenario(AREA, differs=(
    "by design: Kafka answers GROUP_ID_NOT_FOUND for a group it does not have; oncelog does not persist "
    "share-group membership, so that is also what a member sees after a restart, and it answers "
    "UNKNOWN_MEMBER_ID, which makes the member rejoin (GROUP_ID_NOT_FOUND is fatal to a client)"))
def sgh_missing_group(k):
    """A heartbeat at epoch 1 to a share group that does not exist, and a leave (-1) from it."""
    m = str(uuid.uuid4())
    return [relative(sgh(k, k.name("missing"), m, 1), {}, {m: "m"}), sgh(k, k.name("missing"), m, -1)]


@scenario(AREA)
def sgh_leave_and_rejoin(k):
    """A member leaves (-1): answer epoch -1; ShareGroupDescribe: Empty, no members; a second leave:
    UNKNOWN_MEMBER_ID; a rejoin (epoch 0, the same member id) gets an epoch above the old one and the partitions."""
    t = k.create_topic("t", 2)
    g = k.name("g")
    a = Member(k, g, "a")
    a.join(t)
    e = a.epoch
    gone = sgh(k, g, a.id, -1)
    described = [row[:4] + row[6:] for row in sgd(k, g, roles={a.id: "a"})]
    again = relative(sgh(k, g, a.id, -1), {}, {a.id: "a"})
    a.epoch, a.assignment = 0, []
    back = a.join(t)
    return [gone, described, again, back[1].member_epoch > e, a.assignment]


@scenario(AREA)
def sgh_group_id_of_another_type(k):
    """A share heartbeat to a group id a classic group and a consumer group (KIP-848) hold; ShareGroupDescribe of
    both, and of a group that does not exist."""
    t = k.create_topic("t", 1)
    classic, consumer = k.name("classic"), k.name("consumer")
    join_member(k, classic)
    r = cgh(k, consumer, str(uuid.uuid4()), 0, topics=[t])
    if int(r.error_code) != 0:
        raise ScenarioFailed(f"consumer group join: {r.error_code!r}")
    return [sgh(k, classic, str(uuid.uuid4()), 0, topics=[t]), sgh(k, consumer, str(uuid.uuid4()), 0, topics=[t]),
            sorted(sgd(k, classic) + sgd(k, consumer) + sgd(k, k.name("missing")))]


@scenario(AREA)
def sgd_two_members(k):
    """ShareGroupDescribe of a group of two members on one 3-partition topic: state, epochs, assignor
    name, each member's epoch, subscription and partitions (SimpleAssignor), once both are assigned."""
    t = k.create_topic("t", 3)
    g = k.name("g")
    a, b = Member(k, g, "a"), Member(k, g, "b", own_connection=True)
    a.join(t)
    b.join(t, want=1)

    def settled():
        a.heartbeat(), b.heartbeat()
        d = sgd(k, g, roles={a.id: "a", b.id: "b"})[0]
        sizes = sorted(len(row[5][0][1]) if row[5] else 0 for row in d[7])
        return d if d[4] == d[5] and sizes == [1, 2] and all(row[1] == d[4] for row in d[7]) else None
    d = k.wait_until(settled, "both members at the group epoch", interval=0.2)
    # Which member keeps two partitions depends on the order of their (random) member ids.
    return [d[:4], d[6], d[4] == d[5], [row[:1] + [row[1] == d[4]] + row[2:5] for row in d[7]],
            sorted(sum(len(ps) for _, ps in row[5]) for row in d[7])]


@scenario(AREA)
def sgd_one_partition_shared(k):
    """Two members on a 1-partition topic both get partition 0 (more members than partitions: shared)."""
    t = k.create_topic("t", 1)
    g = k.name("g")
    a, b = Member(k, g, "a"), Member(k, g, "b", own_connection=True)
    a.join(t)
    b.join(t)

    def settled():
        a.heartbeat(), b.heartbeat()
        d = sgd(k, g, roles={a.id: "a", b.id: "b"})[0]
        return d if d[4] == d[5] and all(row[1] == d[4] for row in d[7]) else None
    d = k.wait_until(settled, "both members at the group epoch", interval=0.2)
    return [d[3], d[6], d[4] == d[5], [[row[0], row[5]] for row in d[7]]]


# ---------------------------------------------------------------------- share sessions


@scenario(AREA)
def sf_initial_epoch_with_acks(k):
    """ShareFetch at epoch 0 carrying acknowledgements: INVALID_REQUEST with Kafka's message."""
    tid, g, a = ready(k, 1, [b"x"])
    return fetched(a.fetch(tid, acks={0: [(0, 0, [ACCEPT])]}, max_wait_ms=0))


@scenario(AREA)
def sf_no_session(k):
    """ShareFetch at epoch 5 and at -1, and ShareAcknowledge at 1, without a session: SHARE_SESSION_NOT_FOUND;
    ShareAcknowledge at epoch 0: INVALID_SHARE_SESSION_EPOCH."""
    tid, g, a = ready(k, 1, [b"x"])
    return [fetched(a.fetch(tid, epoch=5, max_wait_ms=0)), fetched(a.fetch(tid, epoch=-1, max_wait_ms=0)),
            a.acknowledge(tid, {}, epoch=1), a.acknowledge(tid, {}, epoch=0)]


@scenario(AREA)
def sf_wrong_session_epoch(k):
    """With a session at epoch 1: ShareFetch at 3 and ShareAcknowledge at 0 and 4 are refused; the right epoch still
    works, and ShareAcknowledge advances the same counter (the next ShareFetch is at 3)."""
    tid, g, a = ready(k, 1, [b"x"])
    first = a.fetch_until(tid)
    return [acquired(first), fetched(a.fetch(tid, epoch=3, max_wait_ms=0)), a.acknowledge(tid, {}, epoch=0),
            a.acknowledge(tid, {0: [(0, 0, [ACCEPT])]}, epoch=4),
            a.acknowledge(tid, {0: [(0, 0, [ACCEPT])]}), fetched(a.fetch(tid, epoch=2, max_wait_ms=0)),
            fetched(a.fetch(tid, epoch=3, max_wait_ms=0))]


@scenario(AREA)
def sa_final_epoch_releases(k):
    """ShareAcknowledge at the final epoch (-1) with no acknowledgements closes the session: the records it held are
    released (b acquires them at delivery count 1), and a's next ShareFetch at epoch 2 finds no session."""
    tid, g, a = ready(k, 1, [b"x", b"y"])
    b = Member(k, g, "b", own_connection=True)
    b.join(k.name("t"))
    first = a.fetch_until(tid)
    closed = a.acknowledge(tid, {}, epoch=-1)
    return [acquired(first), closed, fetched(b.fetch_until(tid)), fetched(a.fetch(tid, epoch=1, max_wait_ms=0))]


@scenario(AREA)
def sf_final_epoch_with_acks(k):
    """ShareFetch at the final epoch (-1) acknowledges and closes: no records fetched; a reopened session (epoch 0)
    acquires the unacknowledged record only."""
    tid, g, a = ready(k, 1, [b"x", b"y"])
    first = a.fetch_until(tid)
    final = a.fetch(tid, epoch=-1, acks={0: [(0, 0, [ACCEPT])]}, max_wait_ms=0)
    a.session = 0
    return [acquired(first), fetched(final), fetched(a.fetch_until(tid))]


# ---------------------------------------------------------------------- acquiring and acknowledging


@scenario(AREA)
def sf_acquire_records(k):
    """ShareFetch v2 of three batches (2, 3 and 1 records): the acquired ranges, delivery count 1, the records."""
    tid, g, a = ready(k, 1, [b"a", b"b"], [b"c", b"d", b"e"], [b"f"])
    r = a.fetch_until(tid)
    return [fetched(r), fetched(a.fetch(tid, max_wait_ms=0))]


@scenario(AREA)
def sf_acquire_records_v1(k):
    """ShareFetch v1 of one batch of 3 records, then ShareAcknowledge v2 accepting them all."""
    tid, g, a = ready(k, 1, [b"a", b"b", b"c"])
    r = a.fetch_until(tid, version=1)
    return [fetched(r), a.acknowledge(tid, {0: [(0, 2, [ACCEPT])]})]


@scenario(AREA)
def sf_accept_release_reject(k):
    """Acknowledgements in the next ShareFetch: ACCEPT 0-1, RELEASE 2, REJECT 3, per-offset [ACCEPT, RELEASE] for 4-5;
    the released offsets come back in that answer with delivery count 2, the others never."""
    tid, g, a = ready(k, 1, [b"a", b"b", b"c", b"d", b"e", b"f"])
    first = a.fetch_until(tid)
    second = a.fetch(tid, acks={0: [(0, 1, [ACCEPT]), (2, 2, [RELEASE]), (3, 3, [REJECT]),
                                    (4, 5, [ACCEPT, RELEASE])]})
    if not any(p.acquired_records for t in second.responses for p in t.partitions):
        second = [fetched(second), fetched(a.fetch_until(tid))]
    else:
        second = [fetched(second)]
    return [acquired(first), second, fetched(a.fetch(tid, acks={0: [(2, 2, [ACCEPT]), (5, 5, [ACCEPT])]},
                                                     max_wait_ms=0))]


@scenario(AREA)
def sa_acknowledge_types(k):
    """ShareAcknowledge v2: RELEASE of all acquired, then ShareFetch acquires them again at delivery count 2;
    REJECT then leaves nothing to fetch."""
    tid, g, a = ready(k, 1, [b"a", b"b"])
    first = a.fetch_until(tid)
    rel = a.acknowledge(tid, {0: [(0, 1, [RELEASE])]})
    again = a.fetch_until(tid)
    rej = a.acknowledge(tid, {0: [(0, 1, [REJECT])]})
    return [acquired(first), rel, fetched(again), rej, fetched(a.fetch(tid, max_wait_ms=0))]


@scenario(AREA)
def sa_acknowledge_errors(k):
    """ShareAcknowledge: an offset accepted again (below the SPSO: ignored), past the acquired records
    (INVALID_REQUEST), type 7 (INVALID_REQUEST), batches out of order (INVALID_REQUEST, nothing applied),
    a release reaching below the SPSO; then the redelivery."""
    tid, g, a = ready(k, 1, [b"a", b"b", b"c"])
    a.fetch_until(tid)
    out = [a.acknowledge(tid, {0: [(0, 0, [ACCEPT])]}),
           a.acknowledge(tid, {0: [(0, 0, [ACCEPT])]}),
           a.acknowledge(tid, {0: [(10, 10, [ACCEPT])]}),
           a.acknowledge(tid, {0: [(1, 1, [7])]}),
           a.acknowledge(tid, {0: [(1, 1, [ACCEPT]), (0, 0, [ACCEPT])]}),
           a.acknowledge(tid, {0: [(1, 2, [RELEASE])]})]
    out.append(fetched(a.fetch_until(tid)))
    return out


@scenario(AREA)
def sa_acknowledge_not_acquired(k):
    """INVALID_RECORD_STATE with Kafka's messages: accepting an offset a released (available, still in flight),
    and b accepting offsets a holds; nothing of either applied (a then accepts them)."""
    tid, g, a = ready(k, 1, [b"a"], [b"b"], [b"c"])
    b = Member(k, g, "b", own_connection=True)
    b.join(k.name("t"))
    first = a.fetch_until(tid)
    b_fetch = b.fetch(tid, max_wait_ms=0)
    return [acquired(first), acquired(b_fetch),
            a.acknowledge(tid, {0: [(1, 1, [RELEASE])]}),
            a.acknowledge(tid, {0: [(1, 1, [ACCEPT])]}),
            b.acknowledge(tid, {0: [(2, 2, [ACCEPT])]}),
            a.acknowledge(tid, {0: [(0, 0, [ACCEPT]), (2, 2, [ACCEPT])]})]


@scenario(AREA)
def sf_ack_errors_in_fetch(k):
    """ShareFetch's acknowledge_error_code: accepting twice (ignored below the SPSO), and past the end
    (INVALID_REQUEST); the fetch itself answers as usual."""
    tid, g, a = ready(k, 1, [b"a", b"b"])
    a.fetch_until(tid)
    return [fetched(a.fetch(tid, acks={0: [(0, 1, [ACCEPT])]}, max_wait_ms=0)),
            fetched(a.fetch(tid, acks={0: [(0, 0, [ACCEPT])]}, max_wait_ms=0)),
            fetched(a.fetch(tid, acks={0: [(5, 6, [ACCEPT])]}, max_wait_ms=0))]


@scenario(AREA)
def sf_max_records(k):
    """max_records 2 over single-record batches acquires 2 each fetch; over a 5-record batch it is soft (the whole
    batch); in RECORD_LIMIT mode (v2, share_acquire_mode 1) exactly 2."""
    tid, g, a = ready(k, 1, [b"a"], [b"b"], [b"c"], [b"d"], [b"e", b"f", b"g", b"h", b"i"])
    out = [acquired(a.fetch_until(tid, max_records=2)), acquired(a.fetch_until(tid, max_records=2)),
           acquired(a.fetch_until(tid, max_records=2))]
    t2 = k.create_topic("t2", 1)
    produce_values(k, t2, [b"a", b"b", b"c", b"d", b"e"])
    b = Member(k, g, "b", own_connection=True)
    b.join(t2, want=1)
    tid2 = topic_id(k, t2)
    out.append(fetched(b.fetch_until(tid2, max_records=2, mode=1)))
    return out


@scenario(AREA)
def sf_two_members_one_partition(k):
    """Two members of one partition: a acquires the 4 records, b none of them; records produced after go to b; no
    record is acquired twice."""
    t = k.create_topic("t", 1)
    produce_values(k, t, [b"a", b"b", b"c", b"d"])
    g = share_group(k)
    a, b = Member(k, g, "a"), Member(k, g, "b", own_connection=True)
    a.join(t)
    b.join(t)
    tid = topic_id(k, t)
    got_a = a.fetch_until(tid)
    got_b = b.fetch(tid, max_wait_ms=0)
    produce_values(k, t, [b"e", b"f"])
    later = b.fetch_until(tid)
    return [fetched(got_a), acquired(got_b), fetched(later)]


@scenario(AREA)
def sf_unknown_topic_and_partition(k):
    """ShareFetch (a new session each) of a topic id no topic has, and of a partition the topic lacks."""
    tid, g, a = ready(k, 1, [b"a"])
    b = Member(k, g, "b", own_connection=True)
    return [fetched(a.fetch(uuid.uuid4(), max_wait_ms=0)), fetched(b.fetch(tid, partitions=(5,), max_wait_ms=0))]


# ---------------------------------------------------------------------- share-group offsets (admin)

DESCRIBE_OFFSETS, ALTER_OFFSETS, DELETE_OFFSETS = 90, 91, 92


def describe_offsets(k, group: str, topics, version: int = 1):
    """DescribeShareGroupOffsets of one group, to its coordinator: ``topics`` {name: [partitions]}
    or None (every topic of the group)."""
    m = mod(DESCRIBE_OFFSETS, version)
    req = m.DescribeShareGroupOffsetsRequest(groups=(m.DescribeShareGroupOffsetsRequestGroup(
        group_id=group, topics=None if topics is None else tuple(
            m.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=tuple(ps)) for t, ps in topics.items())),))
    return _to(k, req, _coordinator(k, group))


def alter_offsets(k, group: str, topics):
    """AlterShareGroupOffsets v0, to the group's coordinator: ``topics`` {name: {partition: start}}."""
    m = mod(ALTER_OFFSETS, 0)
    req = m.AlterShareGroupOffsetsRequest(group_id=group, topics=tuple(
        m.AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=tuple(
            m.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=o) for p, o in ps.items()))
        for t, ps in topics.items()))
    return _to(k, req, _coordinator(k, group))


def delete_offsets(k, group: str, *topics: str):
    """DeleteShareGroupOffsets v0, to the group's coordinator."""
    m = mod(DELETE_OFFSETS, 0)
    req = m.DeleteShareGroupOffsetsRequest(group_id=group, topics=tuple(
        m.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics))
    return _to(k, req, _coordinator(k, group))


def ready_alone(k, *batches: list[bytes]):
    """As :func:`ready` (one partition), the member on its own connection: (topic id, group, member)."""
    t = k.create_topic("t", 1)
    produce_values(k, t, *batches)
    g = share_group(k)
    a = Member(k, g, "a", own_connection=True)
    a.join(t)
    return topic_id(k, t), g, a


def leave_and_disconnect(member, tid) -> None:
    """The member closes its share session, leaves the group and closes its connection, as a share
    consumer's close does: Kafka's leader drops its cached share partitions of a group once the
    connection of the group's last share session closes (ShareSessionCache's disconnect listener,
    onGroupEmpty), not before."""
    member.fetch(tid, epoch=-1, partitions=())
    member.heartbeat(epoch=-1)
    member.via.close()


def next_records(member, tid, tries: int = 20):
    """What a new member's fetches acquire first (a share partition is initialised on its first fetch, so
    several fetches are tried), or [] when none of them acquires anything."""
    for _ in range(tries):
        got = acquired(member.fetch(tid, max_wait_ms=250))
        if got:
            return got
    return []


@scenario(AREA, differs=(
    "open: Kafka 4.4 persists the share-partition start offset lazily (after records 0-1 of a 3-record batch are "
    "accepted its state still says start offset 0, delivery-complete count 2); oncelog moves it past the accepted "
    "records at the acknowledgement (start offset 2, count 0): the start offsets differ, the lag (1) agrees"))
def sgo_describe_offsets(k):
    """DescribeShareGroupOffsets once 2 of 3 records are accepted (start offset 2; v1's lag: high watermark 3 - 2 -
    0 complete = 1; v0 without lag), a topic that does not exist (-1, no error), every topic (null) and no
    topics (empty)."""
    tid, g, a = ready(k, 1, [b"a", b"b", b"c"])
    t = k.name("t")
    a.fetch_until(tid)
    acked = a.acknowledge(tid, {0: [(0, 1, [ACCEPT])]})
    return [acked.error_code, describe_offsets(k, g, {t: [0]}), describe_offsets(k, g, {t: [0]}, version=0),
            describe_offsets(k, g, {k.name("nope"): [0]}), describe_offsets(k, g, None), describe_offsets(k, g, {})]


@scenario(AREA)
def sgo_alter_offsets(k):
    """AlterShareGroupOffsets: with a member NON_EMPTY_GROUP; once it left (and closed its connection), start
    offset 1 (the describe follows); a partition the topic lacks and a topic that does not exist
    UNKNOWN_TOPIC_OR_PARTITION; a group nobody joined: altered (Kafka 4.4 makes its state); a new member's
    next fetch acquires from offset 1."""
    tid, g, a = ready_alone(k, [b"a", b"b", b"c"])
    t = k.name("t")
    a.fetch_until(tid)
    busy = alter_offsets(k, g, {t: {0: 1}})
    a.acknowledge(tid, {0: [(0, 2, [ACCEPT])]})
    leave_and_disconnect(a, tid)
    altered = alter_offsets(k, g, {t: {0: 1, 4: 0}, k.name("nope"): {0: 0}})
    described = describe_offsets(k, g, {t: [0]})
    b = Member(k, g, "b", own_connection=True)
    b.join(t)
    return [busy, altered, described, alter_offsets(k, k.name("nobody"), {t: {0: 0}}), next_records(b, tid)]


@scenario(AREA)
def sgo_delete_offsets(k):
    """DeleteShareGroupOffsets: with a member NON_EMPTY_GROUP; once it left (and closed its connection), the
    topic's state deleted (the describe answers -1 and every topic none), a topic the group never read and one
    that does not exist UNKNOWN_TOPIC_OR_PARTITION; a group nobody joined GROUP_ID_NOT_FOUND; a new member's next
    fetch acquires from share.auto.offset.reset (earliest: offset 0, the accepted records again)."""
    tid, g, a = ready_alone(k, [b"a", b"b", b"c"])
    t = k.name("t")
    other = k.create_topic("other", 1)
    a.fetch_until(tid)
    busy = delete_offsets(k, g, t)
    a.acknowledge(tid, {0: [(0, 2, [ACCEPT])]})
    leave_and_disconnect(a, tid)
    deleted = delete_offsets(k, g, t, other, k.name("nope"))
    after = describe_offsets(k, g, {t: [0]})
    every = describe_offsets(k, g, None)
    produce_values(k, t, [b"d"])
    b = Member(k, g, "b", own_connection=True)
    b.join(t)
    return [busy, deleted, after, every, delete_offsets(k, k.name("nobody"), t), next_records(b, tid)]


# ---------------------------------------------------------------------- read_committed and markers


def _txn_values(k, topic: str, values: list[bytes], commit: bool) -> None:
    """One transaction of ``values`` (one batch) to partition 0 of ``topic``, committed or aborted,
    its markers written."""
    from .scenarios_transactions import begin, end, txn_batch
    tid, pid, epoch = begin(k, "tx", {topic: [0]})
    r = k.produce(topic, txn_batch(values, pid, epoch, 0), transactional_id=tid)
    code = r.responses[0].partition_responses[0].error_code
    if int(code) != 0:
        raise ScenarioFailed(f"transactional produce: {code!r}")
    if int(end(k, tid, pid, epoch, commit).error_code) != 0:
        raise ScenarioFailed("EndTxn failed")


@scenario(AREA, differs=(
    "by design: a fetch that would acquire only transaction markers archives them (oncelog's first fetch "
    "acquires nothing and the SPSO moves past the ABORT marker); Kafka 4.4 acquires the lone marker [1, 1] and "
    "sends its batch, which librdkafka's share consumer never acknowledges (no data record in the fetch), so the "
    "SPSO waits on it through every lock timeout up to the delivery limit (docs/share-groups.md)"))
def sf_read_committed_abort_marker(k):
    """A read_committed share group over an aborted transaction (data then ABORT marker) and a
    committed one: which offsets are acquired and which batches sent."""
    t = k.create_topic("t", 1)
    _txn_values(k, t, [b"x"], commit=False)
    g = share_group(k)
    r = incremental(k, GROUP, g, [("share.isolation.level", SET, "read_committed")])
    if int(r.responses[0].error_code) != 0:
        raise ScenarioFailed(f"share.isolation.level: {r.responses[0]!r}")
    a = Member(k, g, "a", own_connection=True)
    a.join(t)
    tid = topic_id(k, t)
    first = [a.fetch(tid, max_wait_ms=300) for _ in range(3)]
    _txn_values(k, t, [b"y"], commit=True)
    later = a.fetch_until(tid)
    return [[fetched(f) for f in first], fetched(later)]


# ---------------------------------------------------------------------- the broker's group.share.* settings

SHARE_BROKER_SETTINGS = (
    "group.share.max.size", "group.share.max.share.sessions", "group.share.session.timeout.ms",
    "group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms", "group.share.heartbeat.interval.ms",
    "group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms",
    "group.share.record.lock.duration.ms", "group.share.min.record.lock.duration.ms",
    "group.share.max.record.lock.duration.ms", "group.share.delivery.count.limit",
    "group.share.min.delivery.count.limit", "group.share.max.delivery.count.limit",
    "group.share.partition.max.record.locks", "group.share.min.partition.max.record.locks",
    "group.share.max.partition.max.record.locks")


@scenario(AREA)
def broker_share_settings(k):
    """DescribeConfigs v4 of this broker's group.share.* settings with synonyms: Kafka 4.4's names,
    defaults, sources and read-only flags."""
    return describe_configs(k, BROKER, str(node_id(k)), list(SHARE_BROKER_SETTINGS), synonyms=True)


@scenario(AREA)
def group_share_configs_outside_broker_bounds(k):
    """A GROUP's share.* configs outside the broker's group.share.min/max.* (its defaults here):
    INVALID_CONFIG with Kafka's message, one per config; at a bound (validate_only): accepted;
    a session not above the broker's heartbeat or the group's."""
    g = k.name("g")
    return [incremental(k, GROUP, g, [(name, SET, value)], validate_only=True) for name, value in (
        ("share.record.lock.duration.ms", "14999"), ("share.record.lock.duration.ms", "60001"),
        ("share.record.lock.duration.ms", "15000"), ("share.delivery.count.limit", "11"),
        ("share.delivery.count.limit", "10"), ("share.partition.max.record.locks", "4001"),
        ("share.partition.max.record.locks", "99"), ("share.session.timeout.ms", "44999"),
        ("share.session.timeout.ms", "60000"), ("share.heartbeat.interval.ms", "4999"),
        ("share.heartbeat.interval.ms", "15001"))] + [
        incremental(k, GROUP, g, [("share.session.timeout.ms", SET, "45000"),
                                   ("share.heartbeat.interval.ms", SET, "15000")], validate_only=True)]
