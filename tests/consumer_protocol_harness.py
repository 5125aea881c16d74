"""What the KIP-848 cases of tests/consumer_protocol_cases.py run on: the :class:`Target` and its
:class:`Timing`, the :class:`Ledger` that replays every member's assignment callbacks,
:class:`Member` (a confluent-kafka consumer, all members polled by one thread), the waits
(:func:`poll_until`, :func:`settle`) and the broker's view (:func:`describe_group`), classic
consumers (kafka-python, aiokafka), raw OffsetCommit/OffsetFetch, and a member in a child process
(:class:`WorkerProcess`, ``python -m tests.consumer_protocol_harness``).
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

from .helpers import unique


Partition = tuple[str, int]  # (topic, partition)

# oncelog's broker settings for KIP-848 timing (serve --override NAME=VALUE); Kafka's names.
ONCELOG_SESSION_TIMEOUT = "group.consumer.session.timeout.ms"
ONCELOG_HEARTBEAT_INTERVAL = "group.consumer.heartbeat.interval.ms"
# Kafka's per-group settings (GroupConfig), bounded by the broker's group.consumer.min/max.* ones.
KAFKA_GROUP_SESSION_TIMEOUT = "consumer.session.timeout.ms"
KAFKA_GROUP_HEARTBEAT_INTERVAL = "consumer.heartbeat.interval.ms"

SETTLE_TIMEOUT = 60.0  # a rebalance takes a few heartbeats; this is for a loaded machine
REGEX_TIMEOUT = 90.0  # Kafka resolves a subscription's regular expressions again every ~10 s
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass(frozen=True)
class Timing:
    """The group timing a case asks for (the broker's, in KIP-848)."""

    session_timeout_ms: int = 6000
    heartbeat_interval_ms: int = 500

    def oncelog_overrides(self) -> list[str]:
        """``serve`` arguments giving an oncelog broker this timing."""
        return ["--override", f"{ONCELOG_SESSION_TIMEOUT}={self.session_timeout_ms}",
                "--override", f"{ONCELOG_HEARTBEAT_INTERVAL}={self.heartbeat_interval_ms}"]


@dataclass
class Target:
    """A broker to run a case against. ``configure_group(group_id, timing)`` runs before a group's
    first member joins (Apache Kafka: per-group configs; oncelog: nothing, the broker was started
    with the timing). ``restart()`` SIGKILLs the broker and starts it again on the same data and
    port, returning once it answers; None where the broker may not be restarted."""

    bootstrap: str
    timing: Timing
    name: str
    configure_group: Callable[[str, Timing], None] | None = None
    restart: Callable[[], None] | None = None

    @property
    def session_timeout(self) -> float:
        return self.timing.session_timeout_ms / 1000

    @property
    def heartbeat_interval(self) -> float:
        return self.timing.heartbeat_interval_ms / 1000

    def new_group(self, name: str = "kip848") -> str:
        group = unique(name)
        if self.configure_group is not None:
            self.configure_group(group, self.timing)
        return group

    def new_topic(self, partitions: int, name: str = "ctopic") -> str:
        topic = unique(name)
        create_topics(self.bootstrap, {topic: partitions})
        return topic


def create_topics(bootstrap: str, topics: dict[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(t, n, 1) for t, n in topics.items()])
    for f in futures.values():
        f.result(timeout=30)


def kafka_group_configurer(bootstrap: str) -> Callable[[str, Timing], None]:
    """Apache Kafka: set a group's session timeout and heartbeat interval (KIP-848 group configs)."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    def configure(group: str, timing: Timing) -> None:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
            ConfigEntry(KAFKA_GROUP_SESSION_TIMEOUT, str(timing.session_timeout_ms),
                        incremental_operation=AlterConfigOpType.SET),
            ConfigEntry(KAFKA_GROUP_HEARTBEAT_INTERVAL, str(timing.heartbeat_interval_ms),
                        incremental_operation=AlterConfigOpType.SET)])
        for f in admin.incremental_alter_configs([resource]).values():
            f.result(timeout=30)

    return configure


# -- members and what they did ----------------------------------------------------------------------


@dataclass
class Event:
    at: float  # time.monotonic()
    member: str
    kind: str  # assign | revoke | lost
    partitions: frozenset


class Ledger:
    """Every member's rebalance callbacks, in the order they ran (one thread polls every member)."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.lock = threading.Lock()

    def record(self, member: str, kind: str, partitions) -> None:
        with self.lock:
            self.events.append(Event(time.monotonic(), member, kind,
                                     frozenset((p.topic, p.partition) for p in partitions)))

    def since(self, at: float) -> list[Event]:
        with self.lock:
            return [e for e in self.events if e.at >= at]

    def owners(self) -> dict[Partition, set[str]]:
        """Replay: who owns each partition after the events so far."""
        owners: dict[Partition, set[str]] = {}
        for e in list(self.events):
            for p in e.partitions:
                if e.kind == "assign":
                    owners.setdefault(p, set()).add(e.member)
                else:
                    owners.setdefault(p, set()).discard(e.member)
        return owners

    def check_exclusive(self) -> None:
        """No partition was ever held by two members at once: a member is assigned a partition only
        after its previous owner's revoke (or lost) callback ran."""
        owners: dict[Partition, str] = {}
        for e in list(self.events):
            for p in sorted(e.partitions):
                if e.kind == "assign":
                    held = owners.get(p)
                    assert held is None or held == e.member, (
                        f"{p} assigned to {e.member} at {e.at:.3f} while {held} still owned it\n{self.render()}")
                    owners[p] = e.member
                elif owners.get(p) == e.member:
                    del owners[p]

    def render(self, last: int = 40) -> str:
        start = self.events[0].at if self.events else 0.0
        return "\n".join(f"  +{e.at - start:7.3f}s {e.member:>8} {e.kind:6} {sorted(e.partitions)}"
                         for e in self.events[-last:])


def consumer_config(bootstrap: str, group: str, **extra) -> dict:
    # KIP-848: no session.timeout.ms / heartbeat.interval.ms / partition.assignment.strategy on the
    # client (librdkafka refuses them with group.protocol=consumer); the broker owns them.
    return {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
            "auto.offset.reset": "earliest", "enable.auto.commit": False, "fetch.wait.max.ms": 100, **extra}


class Member:
    """A confluent_kafka.Consumer on the consumer protocol, its callbacks recorded in a Ledger."""

    def __init__(self, name: str, target: Target, group: str, topics: list[str], ledger: Ledger, **extra) -> None:
        self.name = name
        self.ledger = ledger
        self.consumer = ck.Consumer(consumer_config(target.bootstrap, group, **extra))
        self.closed = False
        self.errors: list = []
        self.messages: list = []  # every record polled, in order
        self.consumer.subscribe(topics, on_assign=lambda c, ps: ledger.record(name, "assign", ps),
                                on_revoke=lambda c, ps: ledger.record(name, "revoke", ps),
                                on_lost=lambda c, ps: ledger.record(name, "lost", ps))

    def poll(self, timeout: float = 0.05) -> None:
        msg = self.consumer.poll(timeout)
        if msg is None:
            return
        if msg.error() is not None:
            self.errors.append(msg.error())
        else:
            self.messages.append(msg)

    def records(self) -> list[tuple[int, int]]:
        """(partition, offset) of every record polled."""
        return [(m.partition(), m.offset()) for m in self.messages]

    def assignment(self) -> frozenset:
        return frozenset((p.topic, p.partition) for p in self.consumer.assignment())

    @property
    def member_id(self) -> str:
        return self.consumer.memberid()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.consumer.close()


def partitions_of(topics: dict[str, int]) -> frozenset:
    return frozenset((t, p) for t, n in topics.items() for p in range(n))


def balanced(assignments: dict[str, frozenset], partitions: frozenset) -> bool:
    """Every partition owned by exactly one member, sizes within one of each other (Kafka's
    uniform and range assignors both give that for one topic)."""
    union = frozenset().union(*assignments.values()) if assignments else frozenset()
    sizes = [len(a) for a in assignments.values()]
    return (union == partitions and sum(sizes) == len(partitions)
            and (not sizes or max(sizes) - min(sizes) <= 1))


def poll_until(members: Iterable[Member], condition: Callable[[], bool], what: str, timeout: float = SETTLE_TIMEOUT,
               describe: Callable[[], str] = lambda: "") -> float:
    """Poll every member until ``condition()`` holds; the time it took. Fails after ``timeout``, or
    at once when a member's consumer failed fatally (it will never recover)."""
    members = list(members)
    start = time.monotonic()
    deadline = start + timeout
    while True:
        for m in members:
            m.poll(0.05)
        if condition():
            return time.monotonic() - start
        fatal = [f"{m.name}: {e}" for m in members for e in m.errors
                 if e.fatal() or e.code() == ck.KafkaError._FATAL]
        if fatal or time.monotonic() > deadline:
            raise AssertionError(("a fatal error: " + "; ".join(fatal) if fatal else f"not within {timeout:.0f} s")
                                 + f": {what}\n"
                                 + "\n".join(f"  {m.name}: {sorted(m.assignment())}" for m in members)
                                 + f"\n{describe()}\n{members[0].ledger.render() if members else ''}")


def poll_for(members: Iterable[Member], seconds: float) -> None:
    members = list(members)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for m in members:
            m.poll(0.05)


# -- ConsumerGroupDescribe / JoinGroup on the wire (the broker's own view) -------------------------


def raw_connection(bootstrap: str):
    from oncelog.client.kafka import Connection

    host, port = bootstrap.rsplit(":", 1)
    return Connection(host, int(port), timeout=30, client_id="kip848-e2e")


@dataclass
class DescribedMember:
    member_id: str
    instance_id: str | None
    member_epoch: int
    subscribed_topic_names: tuple
    subscribed_topic_regex: str | None
    assignment: frozenset
    target_assignment: frozenset


@dataclass
class DescribedGroup:
    error: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: dict[str, DescribedMember] = field(default_factory=dict)


def describe_group(bootstrap: str, group: str) -> DescribedGroup:
    """ConsumerGroupDescribe v0 to the bootstrap broker (a one-node cluster: the coordinator)."""
    from kio.index import load_request_schema

    request = load_request_schema(69, 0)(group_ids=(group,), include_authorized_operations=False)
    conn = raw_connection(bootstrap)
    try:
        [g] = conn.request(request).groups
    finally:
        conn.close()

    def parts(a) -> frozenset:
        return frozenset((tp.topic_name, p) for tp in a.topic_partitions for p in tp.partitions)

    return DescribedGroup(
        g.error_code.name, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name,
        {m.member_id: DescribedMember(m.member_id, m.instance_id, m.member_epoch, tuple(m.subscribed_topic_names),
                                      m.subscribed_topic_regex, parts(m.assignment), parts(m.target_assignment))
         for m in g.members})


def broker_agrees(bootstrap: str, group: str, members: list[Member]) -> Callable[[], bool]:
    """A condition: the broker describes ``group`` Stable with exactly these members at the group's
    epoch, each one's current assignment equal to its target and to what the client holds."""

    def check() -> bool:
        try:
            d = describe_group(bootstrap, group)
        except (OSError, ConnectionError):
            return False
        if d.error != "none" or d.state != "Stable" or set(d.members) != {m.member_id for m in members}:
            return False
        # Stable: every member has reconciled to the group's latest target assignment.
        if d.assignment_epoch != d.group_epoch or any(x.member_epoch != d.group_epoch for x in d.members.values()):
            return False
        return all(d.members[m.member_id].assignment == d.members[m.member_id].target_assignment == m.assignment()
                   for m in members)

    return check


def covered(assignments: dict[str, frozenset], partitions: frozenset) -> bool:
    """Every partition owned by exactly one member (balance aside)."""
    union = frozenset().union(*assignments.values()) if assignments else frozenset()
    return union == partitions and sum(len(a) for a in assignments.values()) == len(partitions)


def settle(target: Target, group: str, members: list[Member], partitions: frozenset, what: str,
           timeout: float = SETTLE_TIMEOUT, *, even: bool = True) -> float:
    """Poll until every partition is owned by exactly one of ``members`` (balanced unless ``even``
    is False) and the broker agrees (Stable, current == target == local for each member)."""
    agreed = broker_agrees(target.bootstrap, group, members)
    shared = balanced if even else covered
    return poll_until(members, lambda: shared({m.name: m.assignment() for m in members}, partitions) and agreed(),
                      what, timeout, describe=lambda: describe_or_error(target.bootstrap, group))


def describe_or_error(bootstrap: str, group: str) -> str:
    try:
        d = describe_group(bootstrap, group)
    except Exception as exc:  # the report of a failure must not fail itself
        return f"  describe: {exc!r}"
    lines = [f"  broker: {d.error} {d.state} group_epoch={d.group_epoch} assignment_epoch={d.assignment_epoch}"]
    lines += [f"    {m.member_id} epoch={m.member_epoch} current={sorted(m.assignment)} "
              f"target={sorted(m.target_assignment)}" for m in d.members.values()]
    return "\n".join(lines)


def produce_per_partition(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for part in range(partitions):
        for i in range(per_partition):
            p.produce(topic, value=f"{part}:{i}".encode(), partition=part)
    assert p.flush(30) == 0


def kafka_python_consumer(bootstrap: str, group: str, topic: str, listener=None):
    """A kafka-python consumer of ``group`` subscribed to ``topic`` (with ``listener``), not yet
    polled, which knows the topic's partitions and whose coordinator has them in its metadata
    snapshot.

    Why the partitions first: kafka-python's range assignor, leading a join before its first
    metadata answer for a new topic arrived, assigns nothing ("No partition metadata for topic")
    and does not rejoin when the metadata comes (seen beside a CPU hog and once in CI: a consumer
    that never owned the topic in 60 s); metadata_max_age_ms keeps them fresh.

    Why the snapshot: kafka-python 3.0.12's leader records the snapshot of the last metadata
    update as what it assigned from, and one taken before ``subscribe`` is empty, so the next
    update starts a second round. If that round outlives the ``poll`` that started it, the
    round's own assignment makes ``need_rejoin()`` false, no later ``poll`` applies the round's
    end, and the consumer stays REBALANCING for good: it fetches from its old assignment but
    the client refuses every commit (RebalanceInProgressError: in CI, and in 1 of 40 runs beside
    two CPU hogs, on oncelog; a client bug, the same on any broker). Subscribed and with the
    snapshot current before its first join, it joins once."""
    import kafka

    c = kafka.KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                            enable_auto_commit=False, session_timeout_ms=10000, heartbeat_interval_ms=1000,
                            metadata_max_age_ms=1000)
    deadline = time.monotonic() + SETTLE_TIMEOUT
    while not c.partitions_for_topic(topic):
        assert time.monotonic() < deadline, f"kafka-python never saw the partitions of {topic}"
        time.sleep(0.1)
    c.subscribe([topic], listener=listener)
    while not c._coordinator._metadata_snapshot.get(topic):  # updated by its next metadata answer
        assert time.monotonic() < deadline, f"kafka-python's coordinator never had {topic} in its snapshot"
        time.sleep(0.05)
    return c


class ClassicConsumer:
    """A kafka-python consumer (the classic protocol) polled without pause by a thread of its own.

    Why a thread: kafka-python 3.0.12 drops a JoinGroup/SyncGroup round that completed while no
    ``poll`` was waiting for it (``join_group_async`` starts a new join when its cached task is
    already done, without reading its result), so the member joins again at once and every other
    member must follow. Two consumers polled in turn from one thread, each for 50 ms, lost their
    rounds to each other this way: generation after generation, a new one every second, for a whole
    minute (seen on oncelog and on Apache Kafka alike; CI failed `classic_unaffected` on Kafka).
    A consumer always inside ``poll`` takes each round as it completes, as an application would.

    With a ledger, its rebalance callbacks are recorded there beside the KIP-848 members', so a
    mixed group's exclusivity is checked across both kinds of member."""

    def __init__(self, target: Target, group: str, topic: str, ledger: Ledger | None = None,
                 name: str = "classic") -> None:
        import kafka

        self.ledger, self.name, self.topic = ledger, name, topic
        listener = None
        if ledger is not None:
            class Listener(kafka.ConsumerRebalanceListener):
                def on_partitions_revoked(self, revoked):
                    ledger.record(name, "revoke", revoked)

                def on_partitions_assigned(self, assigned):
                    ledger.record(name, "assign", assigned)

            listener = Listener()
        self.consumer = kafka_python_consumer(target.bootstrap, group, topic, listener)
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name=f"kafka-python-{name}", daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            try:
                self.consumer.poll(200)
            except Exception as e:  # kept for the test's message; polling goes on as an app's would
                self.errors.append(e)
                time.sleep(0.1)

    def assignment(self) -> frozenset:
        return frozenset((tp.topic, tp.partition) for tp in self.consumer.assignment())

    def settled(self) -> bool:
        """Whether kafka-python will not start another round by itself.

        A round may have another behind it: when its leader assigned from a metadata snapshot that
        differs from the next update (see :func:`kafka_python_consumer`), or when another member
        joins. A test that checks the group's state right after an assignment would see that round
        (CI: DescribeGroups answered Stable, then CompletingRebalance a few ms later). The checks
        read kafka-python 3.0's coordinator (``state``, ``_metadata_snapshot``, ``_assignment_snapshot``)."""
        from kafka.coordinator.base import MemberState

        coordinator = self.consumer._coordinator
        snapshot = coordinator._metadata_snapshot
        return (coordinator.state is MemberState.STABLE and not coordinator.need_rejoin()
                and bool(snapshot.get(self.topic)) and coordinator._assignment_snapshot in (None, snapshot))

    def wait_for_assignment(self, size: int = 1, what: str = "the classic consumer got no assignment") -> None:
        """Wait until it owns ``size`` partitions and its group is settled (see ``settled``)."""
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while len(self.assignment()) < size or not self.settled():
            assert time.monotonic() < deadline, f"{what}; errors: {self.errors[-3:]}"
            time.sleep(0.05)

    def close(self) -> None:
        """Stop polling and close; its partitions are given up as it leaves (kafka-python calls no
        revoke callback on close, so the ledger gets one before the LeaveGroup goes out)."""
        self._stop.set()
        self._thread.join(timeout=30)
        if self.ledger is not None and self.consumer.assignment():
            self.ledger.record(self.name, "revoke", self.consumer.assignment())
        self.consumer.close()


def read_with_kafka_python(bootstrap: str, topic: str, group: str, n: int) -> list[Partition]:
    import kafka

    c = kafka_python_consumer(bootstrap, group, topic)
    got: list = []
    try:
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while len(got) < n and time.monotonic() < deadline:
            for records in c.poll(200).values():
                got += [(r.partition, r.offset) for r in records]
        c.commit()
        assert c.committed(kafka.TopicPartition(topic, 0)) is not None
    finally:
        c.close()
    return got


async def read_with_aiokafka(bootstrap: str, topic: str, group: str, n: int) -> list[Partition]:
    import aiokafka

    c = aiokafka.AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                                  enable_auto_commit=False, session_timeout_ms=10000, heartbeat_interval_ms=1000)
    await c.start()
    got: list = []
    try:
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while len(got) < n and time.monotonic() < deadline:
            for records in (await c.getmany(timeout_ms=200)).values():
                got += [(r.partition, r.offset) for r in records]
        await c.commit()
    finally:
        await c.stop()
    return got


def raw_offset_commit(bootstrap: str, group: str, member_id: str, member_epoch: int, topic: str, partition: int,
                      offset: int) -> str:
    """OffsetCommit v9 (KIP-848: the member id and member epoch) of one offset; its error code name."""
    from kio.index import load_request_schema

    cls = load_request_schema(8, 9)
    m = importlib.import_module(cls.__module__)
    request = cls(group_id=group, generation_id_or_member_epoch=member_epoch, member_id=member_id, group_instance_id=None,
                  topics=(m.OffsetCommitRequestTopic(name=topic, partitions=(m.OffsetCommitRequestPartition(
                      partition_index=partition, committed_offset=offset, committed_leader_epoch=-1,
                      committed_metadata=None),)),))
    conn = raw_connection(bootstrap)
    try:
        [t] = conn.request(request).topics
    finally:
        conn.close()
    return t.partitions[0].error_code.name


def raw_offset_fetch(bootstrap: str, group: str, member_id: str | None, member_epoch: int, topic: str,
                     partitions: Iterable[int]) -> tuple[str, dict[int, int]]:
    """OffsetFetch v9 with a member id and epoch: the group's error code name and its offsets."""
    from kio.index import load_request_schema

    cls = load_request_schema(9, 9)
    m = importlib.import_module(cls.__module__)
    request = cls(groups=(m.OffsetFetchRequestGroup(group_id=group, member_id=member_id, member_epoch=member_epoch,
                                                    topics=(m.OffsetFetchRequestTopics(
                                                        name=topic, partition_indexes=tuple(partitions)),)),),
                  require_stable=False)
    conn = raw_connection(bootstrap)
    try:
        [g] = conn.request(request).groups
    finally:
        conn.close()
    return g.error_code.name, {p.partition_index: p.committed_offset for t in g.topics for p in t.partitions}


# -- the member process of the killed-member case --------------------------------------------------


class WorkerProcess:
    """A consumer-protocol member in a child process (``python -m tests.consumer_protocol_harness``),
    reporting its member id and assignment on stdout as JSON lines each time they change."""

    def __init__(self, bootstrap: str, group: str, topic: str, instance_id: str = "") -> None:
        self.assignment: frozenset = frozenset()
        self.member_id = ""
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.consumer_protocol_harness", bootstrap, group, topic,
                                      instance_id],
                                     cwd=REPO, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                     preexec_fn=_die_with_parent)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            state = json.loads(line)
            self.member_id = state["member_id"]
            self.assignment = frozenset(tuple(p) for p in state["assignment"])

    def kill(self) -> float:
        """SIGKILL; the time it died."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        return time.monotonic()


def _die_with_parent() -> None:  # in the child, between fork and exec: no orphan after a crashed run
    import ctypes

    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _worker(bootstrap: str, group: str, topic: str, instance_id: str) -> None:
    c = ck.Consumer(consumer_config(bootstrap, group, **({"group.instance.id": instance_id} if instance_id else {})))
    c.subscribe([topic])
    last = None
    while True:
        c.poll(0.1)
        now = {"member_id": c.memberid(), "assignment": sorted((p.topic, p.partition) for p in c.assignment())}
        if now != last:
            print(json.dumps(now), flush=True)
            last = now


if __name__ == "__main__":
    _worker(*sys.argv[1:5])
