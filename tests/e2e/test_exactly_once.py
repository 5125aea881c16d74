"""Exactly-once consume-transform-produce through process and broker crashes (real SIGKILLs).

A worker process reads 100k input records and writes one transformed record per input record,
committing output and input offsets in one transaction every ~100 records. The worker is
SIGKILLed at random moments (at least 20 times) and restarted; separately the broker is
SIGKILLed and restarted (at least 5 times). At the end read_committed output must hold exactly
one transformed record per input record, in input order per partition, and the group's committed
offsets must equal the input's end.

The soak once stalled: a worker blocked for ever in a client call after a broker
restart, out of its group, and nothing restarted it. The focused tests below check the worker
behaviour that keeps the restart loop in charge: a stuck client call or a fenced consumer ends
the process instead of leaving it idle.

The soak runs on both group protocols (tests/ctp_worker.py ``--group-protocol``): ``classic``
(static member: a restarted worker takes over at once) and ``consumer`` (KIP-848: the group
metadata carries the member epoch, a dynamic member; a restarted worker gets the partitions
once the broker expires its killed predecessor, so there each worker kill waits for that first,
and the kills land while a worker owns the partitions, as in the classic variant).

Zombies (consumer protocol): two workers share the input, and one at a time is stopped in the
middle of a transaction until the broker has removed it and the other owns its partitions; when
it runs again its offsets, sent with the group metadata it read them under, must be refused and
the output must still hold each input record once (on both brokers: the group's timing is a
group config).

A ``both_brokers`` module: the tests that SIGKILL, restart or freeze the broker are oncelog-only;
the fenced-worker and zombie tests run against the session's one-node Apache Kafka too. The
fenced-worker test uses the worker's default names (``input``, ``output``, group ``ctp``:
tests/ctp_worker.py), which the shared Kafka allows because it is the only test to; the zombie
test uses names of its own.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient

from ..consumer_protocol_cases import Timing, kafka_group_configurer
from ..consumer_protocol_cases import describe_group as describe_group_at
from ..conftest import soak_scale
from ..helpers import consume_all, coordinator_address, create_topic, first_difference, unique


def describe_group(bootstrap, group):
    """ConsumerGroupDescribe sent to the group's coordinator, found with FindCoordinator as a client
    finds it (on a cluster of nodes, not always the bootstrap's node)."""
    return describe_group_at(coordinator_address(bootstrap, group), group)

pytestmark = pytest.mark.both_brokers

PARTITIONS = 3
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# The consumer-protocol soak's group timing (the broker's in KIP-848): a killed worker's member is
# expired after 3 s, so its successor does not wait long; heartbeats every 300 ms keep a live
# worker well inside that on a loaded machine.
CONSUMER_PROTOCOL_TIMING = Timing(session_timeout_ms=3000, heartbeat_interval_ms=300)


@dataclass(frozen=True)
class Names:
    """The worker's topics and group (tests/ctp_worker.py's defaults); unique ones where the broker
    is shared (Apache Kafka)."""

    input: str = "input"
    output: str = "output"
    group: str = "ctp"

    def worker_args(self) -> list[str]:
        return ["--input", self.input, "--output", self.output, "--group", self.group]


NAMES = Names()


def start_worker(bootstrap, log, *args, group_protocol="classic", names=NAMES, transactional_id=None):
    extra = ["--transactional-id", transactional_id] if transactional_id else []
    return subprocess.Popen([sys.executable, "-m", "tests.ctp_worker", bootstrap, *map(str, args),
                             "--group-protocol", group_protocol, *names.worker_args(), *extra],
                            cwd=ROOT, stdout=log, stderr=log)


def wait_for_sole_member(bootstrap, timeout, other_than=None, names=NAMES):
    """Consumer protocol: wait until group ``ctp`` has one member, other than ``other_than`` (the
    member id of the worker killed last), owning every input partition: the killed worker's member
    expired and its successor was given the partitions. Returns that member's id, None if it did
    not happen in time. Errors (the broker restarting) are waited through."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            members = describe_group(bootstrap, names.group).members
        except Exception:  # noqa: BLE001 - any failure to describe is "not yet"
            members = {}
        if len(members) == 1:
            [(member_id, member)] = members.items()
            if member_id != other_than and member.assignment == {(names.input, q) for q in range(PARTITIONS)}:
                return member_id
        time.sleep(0.2)
    return None


def fill_input(bootstrap, stop, start=0, names=NAMES):
    """Input records ``start`` .. ``stop - 1`` (record i: value ``in<i>``, partition i % 3); the
    topics are created with the first records."""
    if start == 0:
        create_topic(bootstrap, names.input, PARTITIONS)
        create_topic(bootstrap, names.output, PARTITIONS)
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True})
    for i in range(start, stop):
        p.produce(names.input, key=str(i).encode(), value=f"in{i}".encode(), partition=i % PARTITIONS)
        if i % 10000 == 0:
            p.poll(0)
    assert p.flush(60) == 0


def input_end(n):
    return [len(range(q, n, PARTITIONS)) for q in range(PARTITIONS)]


def check_output(bootstrap, n, names=NAMES):
    """read_committed output holds exactly one transformed record per input record, in order."""
    out = consume_all(bootstrap, names.output, PARTITIONS, expected=n, timeout=120, isolation="read_committed")
    total = 0
    for q, rows in out.items():
        values = [v.decode() for _, _, v, _ in rows]
        expected = [f"in{i}-transformed@{q}:{k}" for k, i in enumerate(range(q, n, PARTITIONS))]
        dupes = len(values) - len(set(values))
        assert dupes == 0, f"partition {q}: {dupes} duplicated output records"
        assert values == expected, f"partition {q}: {len(values)} records; first difference at " \
            f"{first_difference(values, expected)}"
        total += len(values)
    assert total == n


def wait_for_offsets(bootstrap, done, timeout, names=NAMES):
    """Poll the group's committed offsets until ``done(offsets)``; returns the last offsets."""
    deadline = time.monotonic() + timeout
    offsets = committed_offsets(bootstrap, names=names)
    while not done(offsets) and time.monotonic() < deadline:
        time.sleep(0.5)
        offsets = committed_offsets(bootstrap, names=names)
    return offsets


def worker_messages(path, lines=20):
    """The worker's own log lines (not librdkafka's), newest last: what a failure message needs."""
    with open(path, errors="replace") as f:
        return "".join([line for line in f if line.startswith(("worker ", "Timeout", "Thread", "Current thread",
                                                                 "  File"))][-lines:])


def committed_offsets(bootstrap, *, stable=False, names=NAMES):
    """The group's committed offsets. Progress probes do not wait for in-flight transactions
    (read_uncommitted: no require_stable). A worker that commits every few milliseconds keeps
    offsets pending most of the time, and a require_stable OffsetFetch, retried with backoff,
    can land on pending offsets until its timeout. Final checks ask for stable offsets."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": names.group,
                     "isolation.level": "read_committed" if stable else "read_uncommitted"})
    try:
        return [tp.offset for tp in c.committed([ck.TopicPartition(names.input, p) for p in range(PARTITIONS)],
                                                timeout=30 if stable else 10)]
    finally:
        c.close()


@pytest.mark.slow
@pytest.mark.oncelog_only("SIGKILLs and restarts the broker")
@pytest.mark.crash
@pytest.mark.parametrize("group_protocol", ["classic", "consumer"])
def test_consume_transform_produce_survives_worker_and_broker_sigkills(broker_factory, tmp_path, group_protocol):
    consumer_protocol = group_protocol == "consumer"
    broker = broker_factory(extra_args=CONSUMER_PROTOCOL_TIMING.oncelog_overrides() if consumer_protocol else [])
    n = soak_scale(100_000, 100_000)
    # CI: 12 worker and 4 broker SIGKILLs per variant (four variants: two group protocols, one node
    # and two); the soak 40 and 10.
    worker_kills_wanted = soak_scale(40, 12)
    broker_kills_wanted = soak_scale(10, 4)
    fill_input(broker.bootstrap, n)
    rng = random.Random(2026)
    log = open(tmp_path / "worker.log", "ab")
    worker = start_worker(broker.bootstrap, log, group_protocol=group_protocol)
    worker_kills = broker_kills = 0
    takeovers = []  # consumer protocol: (the live worker owned every partition, seconds waited for it)
    owner = None  # consumer protocol: the member id of the worker last seen owning every partition
    started = time.monotonic()
    deadline = started + 600
    # Spread the broker kills among the worker kills.
    broker_kill_at = set(rng.sample(range(2, worker_kills_wanted + 2), broker_kills_wanted))
    step = 0
    while time.monotonic() < deadline:
        if consumer_protocol and worker_kills < worker_kills_wanted:
            # The kill is to land while the worker owns the partitions (module docstring).
            waited = time.monotonic()
            owner = wait_for_sole_member(broker.bootstrap, CONSUMER_PROTOCOL_TIMING.session_timeout_ms / 1000 + 30,
                                         other_than=owner)
            takeovers.append((owner is not None, time.monotonic() - waited))
        time.sleep(rng.uniform(0.3, 1.5))
        step += 1
        if worker.poll() is not None:  # it exited on an error (e.g. the broker went away): restart
            worker = start_worker(broker.bootstrap, log, group_protocol=group_protocol)
        if worker_kills < worker_kills_wanted:
            worker.kill()  # SIGKILL mid-transaction, or between transactions
            worker.wait()
            worker_kills += 1
            if step in broker_kill_at:
                broker.kill()
                broker_kills += 1
                time.sleep(0.3)
                broker.restart()
            worker = start_worker(broker.bootstrap, log, group_protocol=group_protocol)
            continue
        if broker_kills < broker_kills_wanted:
            broker.kill()
            broker_kills += 1
            broker.restart()
            continue
        offsets = committed_offsets(broker.bootstrap)
        if sum(max(o, 0) for o in offsets) == n:
            break
    worker.kill()
    worker.wait()
    took = f"{group_protocol}: {worker_kills} worker and {broker_kills} broker kills, " \
           f"{time.monotonic() - started:.1f} s to the input's end"
    if consumer_protocol:
        took += f"; takeovers waited for (s): {[f'{t:.1f}' if owned else 'timed out' for owned, t in takeovers]}"
    print(took)
    assert worker_kills >= worker_kills_wanted and broker_kills >= broker_kills_wanted, (worker_kills, broker_kills)
    offsets = committed_offsets(broker.bootstrap, stable=True)
    assert offsets == input_end(n), \
        f"group offsets {offsets}; the workers' last messages:\n{worker_messages(tmp_path / 'worker.log')}"
    check_output(broker.bootstrap, n)


@pytest.mark.oncelog_only("SIGKILLs and restarts the broker")
@pytest.mark.crash
@pytest.mark.one_node("on a cluster librdkafka 2.16 still loses its cached group coordinator: the nodes come back "
                      "one after the other, a Metadata answer without node 2 decommissions it (below)")
def test_worker_transaction_right_after_a_broker_restart_completes(broker, tmp_path):
    """The soak's stall, made deterministic. The worker commits a first transaction (its producer
    now caches the group coordinator), the broker is SIGKILLed and restarted while the worker has
    nothing to do, and new input arrives once the clients have reconnected. With librdkafka's
    default re-bootstrap the next send_offsets_to_transaction() never returns: the cached
    coordinator was decommissioned when every broker was down (confluentinc/librdkafka#5456,
    librdkafka#5511). The worker must process the new input itself, without needing a restart.

    One node only. On the two-node cluster ``metadata.recovery.strategy=none`` does not help: the
    nodes restart one after the other, and a Metadata answer from node 1 before node 2 is back
    leaves node 2 out (Kafka answers with its live brokers too), so librdkafka decommissions its
    broker object for node 2 — the cached group coordinator — and the TxnOffsetCommit waits on it
    for ever (seen with ``debug=eos,broker``: "Decommissioning this broker", then the new object
    for node 2 never connects for it; 4 of 14 runs under CPU hogs). There the worker's stall
    limit ends it and its supervisor's restart carries on, which the worker-and-broker SIGKILL
    test above checks on the cluster too."""
    first, n = 300, 600
    fill_input(broker.bootstrap, first)
    log = open(tmp_path / "worker.log", "ab")
    worker = start_worker(broker.bootstrap, log)
    try:
        assert wait_for_offsets(broker.bootstrap, lambda o: o == input_end(first), 60) == input_end(first)
        broker.kill()
        broker.restart()
        time.sleep(3)  # the clients reconnect and go quiet
        fill_input(broker.bootstrap, n, start=first)
        offsets = wait_for_offsets(broker.bootstrap, lambda o: o == input_end(n), 40)
        assert offsets == input_end(n), \
            f"group offsets {offsets}; the worker's messages:\n{worker_messages(tmp_path / 'worker.log')}"
        assert worker.poll() is None, f"the worker exited ({worker.returncode}) instead of carrying on"
    finally:
        worker.kill()
        worker.wait()
    check_output(broker.bootstrap, n)


@pytest.mark.oncelog_only("freezes the broker process (SIGSTOP)")
def test_worker_stuck_in_a_client_call_exits_and_a_restarted_worker_finishes(broker, tmp_path):
    """A blocking client call that does not return ends the worker, so its supervisor restarts it
    (the backstop for client hangs like the one above). The broker is frozen (SIGSTOP) while the
    worker streams: its next transactional call cannot complete, and with a stall limit of 3 s
    the worker must exit (faulthandler's status 1, with the traceback) long before a client
    timeout (10 s and more) would end the call. Once the broker runs again a restarted worker
    processes the rest exactly once."""
    n = 15_000
    fill_input(broker.bootstrap, n)
    log = open(tmp_path / "worker.log", "ab")
    worker = start_worker(broker.bootstrap, log, 3)
    try:
        offsets = wait_for_offsets(broker.bootstrap, lambda o: sum(max(x, 0) for x in o) > 0, 60)
        assert sum(max(x, 0) for x in offsets) > 0, "the worker made no progress"
        broker.proc.send_signal(signal.SIGSTOP)
        try:
            started = time.monotonic()
            rc = worker.wait(timeout=60)
            stuck_for = time.monotonic() - started
        finally:
            broker.proc.send_signal(signal.SIGCONT)
        assert rc == 1, f"worker exit status {rc}:\n{worker_messages(tmp_path / 'worker.log')}"
        assert stuck_for < 8, stuck_for
        assert "Timeout (0:00:03)!" in (tmp_path / "worker.log").read_text(errors="replace")
        worker = start_worker(broker.bootstrap, log)
        assert wait_for_offsets(broker.bootstrap, lambda o: o == input_end(n), 120) == input_end(n)
    finally:
        worker.kill()
        worker.wait()
    check_output(broker.bootstrap, n)


def test_worker_whose_consumer_is_fenced_exits_instead_of_idling(broker, tmp_path):
    """A second instance takes over the static member ``ctp-worker``: the first one's consumer is
    fenced (a fatal consumer error) and the worker must exit (status 3). Before the fix the
    worker dropped consumer errors, and a fenced instance with nothing to consume idled for ever
    (its producer, fenced too, was never called again to notice)."""
    create_topic(broker.bootstrap, "input", PARTITIONS)
    create_topic(broker.bootstrap, "output", PARTITIONS)
    log = open(tmp_path / "worker.log", "ab")
    first = start_worker(broker.bootstrap, log)
    second = None
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    try:
        deadline = time.monotonic() + 30
        group = None
        while time.monotonic() < deadline:
            try:
                group = admin.describe_consumer_groups(["ctp"])["ctp"].result(timeout=10)
            except ck.KafkaException as exc:  # Kafka making or loading __consumer_offsets on first use
                if exc.args[0].code() not in (ck.KafkaError.NOT_COORDINATOR, ck.KafkaError.COORDINATOR_LOAD_IN_PROGRESS):
                    raise
            if group is not None and group.state == ck.ConsumerGroupState.STABLE and group.members:
                break
            time.sleep(0.2)
        assert group is not None, "the group was never described"
        assert group.state == ck.ConsumerGroupState.STABLE and group.members, group.state
        second = start_worker(broker.bootstrap, log)
        rc = first.wait(timeout=30)
        messages = worker_messages(tmp_path / "worker.log")
        assert rc == 3, f"exit status {rc}:\n{messages}"
        assert "Static consumer fenced" in messages, messages
        assert second.poll() is None, "the new instance must keep running"
    finally:
        for w in (first, second):
            if w is not None:
                w.kill()
                w.wait()


def process_state(pid):
    """The one-letter state of a process (/proc/<pid>/stat): ``T`` when stopped."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def wait_for_two_owners(bootstrap, names, timeout):
    """Consumer protocol: group ``names.group`` has two members, each owning input partitions,
    together all of them; returns their member ids (or fails)."""
    deadline = time.monotonic() + timeout
    members = {}
    while time.monotonic() < deadline:
        try:
            members = describe_group(bootstrap, names.group).members
        except Exception:  # noqa: BLE001 - the group not there yet
            members = {}
        owned = [m.assignment for m in members.values()]
        if len(owned) == 2 and all(owned) and set().union(*owned) == {(names.input, q) for q in range(PARTITIONS)}:
            return set(members)
        time.sleep(0.2)
    raise AssertionError(f"two workers do not share {names.input}: {members}")


def run_two_workers_with_zombies(bootstrap, tmp_path, names, rounds=soak_scale(6, 4)):
    """Two consume-transform-produce workers on the consumer protocol, each with its own
    transactional id, share the input. Each round makes one of them a zombie at the worst moment
    (tests/ctp_worker.py's ZombieHook: its output of a batch is in the log, its offsets not sent,
    and it stops), waits until the broker has removed it and the other worker owns every
    partition (and so reads that batch again), then lets it go on: its
    send_offsets_to_transaction() with the group metadata it read the batch under must be
    refused (UNKNOWN_MEMBER_ID, or ILLEGAL_GENERATION if it rejoined first) and the worker exits;
    it is restarted (its new producer aborts the zombie transaction; 4 rounds in CI, each kind of
    refusal twice, 6 in the soak). At the end the output holds
    each input record exactly once. The group's timing must be set by the caller (a group config,
    or the broker's): CONSUMER_PROTOCOL_TIMING."""
    rng = random.Random(848)
    n = 20_000
    fill_input(bootstrap, n, names=names)
    logs = []

    def start(i):
        logs.append(tmp_path / f"worker{i}-{len(logs)}.log")
        return start_worker(bootstrap, open(logs[-1], "ab"), group_protocol="consumer", names=names,
                            transactional_id=f"{names.group}-txn-{i}"), logs[-1]

    workers = [start(0), start(1)]
    refusals = []
    try:
        for _ in range(rounds):
            members = wait_for_two_owners(bootstrap, names, 60)
            victim = rng.randrange(2)
            proc, log_path = workers[victim]
            # Alternately the zombie sends its offsets as soon as it runs again (its member is gone:
            # UNKNOWN_MEMBER_ID) or once its consumer has rejoined (its member is back under a
            # newer epoch: the old epoch's TxnOffsetCommit is ILLEGAL_GENERATION).
            rejoin_first = len(refusals) % 2 == 1
            fill_input(bootstrap, n + 3000, start=n, names=names)  # a batch for the victim to stop in
            n += 3000
            proc.send_signal(signal.SIGUSR2 if rejoin_first else signal.SIGUSR1)
            deadline = time.monotonic() + 30
            while process_state(proc.pid) != "T":
                assert proc.poll() is None and time.monotonic() < deadline, \
                    f"the victim did not stop mid-transaction:\n{worker_messages(log_path)}"
                time.sleep(0.05)
            survivor = wait_for_sole_member(bootstrap, CONSUMER_PROTOCOL_TIMING.session_timeout_ms / 1000 + 30,
                                            names=names)
            assert survivor in members and workers[1 - victim][0].poll() is None, \
                f"the stopped worker was not removed from the group ({survivor}, {members})"
            proc.send_signal(signal.SIGCONT)
            try:
                rc = proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                rc = None  # it carried on: its zombie batch was accepted
            messages = worker_messages(log_path)
            refused = [code for code in ("UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION", "STALE_MEMBER_EPOCH")
                       if f"exiting: KafkaException(KafkaError{{code={code}" in messages]
            assert rc == 3 and refused, f"the zombie was not refused (exit status {rc}):\n{messages}"
            assert "send_offsets_to_transaction" in messages or "Failed to commit offsets to transaction" in messages, \
                messages
            rejoined = "rejoined: " in messages
            assert refused[0] == ("ILLEGAL_GENERATION" if rejoined else "UNKNOWN_MEMBER_ID"), messages
            refusals.append(f"{refused[0]}{' (rejoined first)' if rejoined else ''}")
            workers[victim] = start(victim)
        offsets = wait_for_offsets(bootstrap, lambda o: o == input_end(n), 180, names=names)
        assert offsets == input_end(n), "".join(f"{p}:\n{worker_messages(p)}" for p in logs[-2:])
    finally:
        for proc, _ in workers:
            proc.kill()
            proc.wait()
    assert committed_offsets(bootstrap, stable=True, names=names) == input_end(n)
    check_output(bootstrap, n, names=names)
    print(f"zombies refused with: {refusals}")
    return refusals


def test_two_consumer_protocol_workers_fence_their_zombies(broker, tmp_path):
    """Names of their own (the Apache Kafka variant shares its broker); the group's timing as
    group configs (IncrementalAlterConfigs on the GROUP resource), before the workers join."""
    names = Names(*(unique(x) for x in ("input", "output", "ctp")))
    kafka_group_configurer(broker.bootstrap)(names.group, CONSUMER_PROTOCOL_TIMING)
    run_two_workers_with_zombies(broker.bootstrap, tmp_path, names)
