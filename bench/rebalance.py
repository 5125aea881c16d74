"""``python -m bench rebalance``: how long a consumer group takes to take in a new member, and how many
group-protocol round trips that costs, with the classic protocol and with the consumer protocol
(KIP-848, ``group.protocol=consumer``) side by side in one run.

A growth: a fresh group on a topic of ``--partitions`` (16) partitions grows 1 → ``--members`` (8),
one member at a time. Members are confluent-kafka Consumers in this process, each polled by its own
thread every 20 ms for the whole growth (librdkafka does the protocol work in its own threads;
Python only polls and runs the rebalance callbacks). A member connects and fetches the topic's
metadata before its step, so a step's window opens at its ``subscribe()``. The next member
subscribes 1–2 × ``--step-pause`` s (random: librdkafka's heartbeats are periodic, and a fixed pause
would land at the same heartbeat phase each time) after the group settled.

A step ends when the group has settled:

- ``assigned``: every member's assignment (its rebalance callbacks, applied as increments: eager
  protocols revoke everything and assign anew, cooperative ones move a few partitions) is
  non-empty, the assignments are disjoint and cover every partition — so every member holds
  a partition of the new generation / target assignment;
- ``stable``: the broker's describe of the group (DescribeGroups, or ConsumerGroupDescribe for a
  consumer-protocol group) says Stable with all k members, polled every 10 ms from ``assigned``
  on. A consumer-protocol member acknowledges its assignment in its next heartbeat: the group is
  Reconciling until then.

The step's time is subscribe → max(assigned, stable). Phases: ``noticed`` (subscribe → the last
existing member that gave up partitions learnt of the rebalance: its revoke callback; the
heartbeat cadence bounds it), ``new member`` (subscribe → the new member's first partitions).

Round trips: every member's librdkafka logs each request it sends (``debug=protocol``: "Sent
<Api>Request"), timestamped when the log line reaches its poll loop. A step counts the requests of
every member sent within its window, by API: the group protocol's (JoinGroup, SyncGroup,
Heartbeat, ConsumerGroupHeartbeat) and, apart, FindCoordinator, OffsetFetch and LeaveGroup.
Counting at the client measures both brokers the same way (oncelog has no request metrics, and
Kafka's are JMX). The heartbeats members send while the group waits are part of the count: they
are how existing members learn of a rebalance in both protocols.

Settings: the classic heartbeat.interval.ms (client) and the consumer protocol's
group.consumer.heartbeat.interval.ms (broker) are both ``--heartbeat-ms`` (500), session timeouts
both ``--session-timeout-ms`` (6000); group.initial.rebalance.delay.ms is 0 on both brokers (a
classic group's first join is not held). Kafka needs group.consumer.min.heartbeat.interval.ms and
group.consumer.min.session.timeout.ms lowered to allow that (its minimums are 5000 / 45000).
Each broker × protocol first runs an unrecorded 1 → 2 growth (``--warmup``: Kafka's JIT, the
offsets topic, connection set-up), then ``--reps`` recorded growths, brokers and protocols
rotated per repetition; medians are reported.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass

from rich.console import Console
from rich.markup import escape
from rich.table import Table

GROUP_APIS = ("JoinGroup", "SyncGroup", "Heartbeat", "ConsumerGroupHeartbeat")
OTHER_APIS = ("FindCoordinator", "OffsetFetch", "LeaveGroup")
_SENT = re.compile(r"Sent (\w+)Request \(")


@dataclass(frozen=True)
class Protocol:
    name: str
    label: str
    group_protocol: str  # librdkafka's group.protocol
    assignor: str  # partition.assignment.strategy (classic) or group.remote.assignor (consumer; "" = broker's)

    def client_config(self, heartbeat_ms: int, session_timeout_ms: int) -> dict:
        if self.group_protocol == "classic":
            return {"group.protocol": "classic", "partition.assignment.strategy": self.assignor,
                    "heartbeat.interval.ms": heartbeat_ms, "session.timeout.ms": session_timeout_ms}
        # The consumer protocol's heartbeat interval and session timeout are the broker's
        # (librdkafka refuses the classic settings with group.protocol=consumer).
        return {"group.protocol": "consumer", **({"group.remote.assignor": self.assignor} if self.assignor else {})}


PROTOCOLS = {
    "classic": Protocol("classic", "classic, eager range", "classic", "range"),
    "classic-coop": Protocol("classic-coop", "classic, cooperative-sticky", "classic", "cooperative-sticky"),
    "consumer": Protocol("consumer", "consumer (KIP-848), uniform", "consumer", "uniform"),
}
BROKERS = ("oncelog", "kafka")


# ------------------------------------------------------------------------------------ brokers

class Broker:
    """oncelog (a child process of this source tree) or Apache Kafka 4.4 (bench/kafka.py: one KRaft
    node, full JIT), with the group settings of the module docstring."""

    def __init__(self, kind: str, work_dir: str, args) -> None:
        self.kind = kind
        self.work_dir = work_dir
        self.args = args
        self.bootstrap = ""
        self.settings: dict[str, str] = {}
        self.notes: list[str] = []
        self.pid = 0
        self._oncelog = None
        self._kafka = None

    @property
    def label(self) -> str:
        return "oncelog" if self.kind == "oncelog" else "Apache Kafka"

    def wanted(self) -> dict[str, str]:
        a = self.args
        return {"group.initial.rebalance.delay.ms": "0",
                "group.min.session.timeout.ms": str(min(6000, a.session_timeout_ms)),
                "group.consumer.heartbeat.interval.ms": str(a.heartbeat_ms),
                "group.consumer.min.heartbeat.interval.ms": str(min(a.heartbeat_ms, 5000)),
                "group.consumer.session.timeout.ms": str(a.session_timeout_ms),
                "group.consumer.min.session.timeout.ms": str(min(a.session_timeout_ms, 45000))}

    def start(self) -> "Broker":
        wanted = self.wanted()
        if self.kind == "oncelog":
            from oncelog.config.registry import BROKER_CONFIGS
            from oncelog.process import BrokerProcess

            # Only the names this oncelog knows (an unknown --override stops its start).
            self.settings = {k: v for k, v in wanted.items() if k in BROKER_CONFIGS}
            self.notes = [f"oncelog has no {k}: its default applies" for k in wanted if k not in BROKER_CONFIGS]
            overrides = [arg for k, v in self.settings.items() for arg in ("--override", f"{k}={v}")]
            b = BrokerProcess(os.path.join(self.work_dir, "oncelog"), fsync=self.args.fsync,
                              extra_args=["--num-partitions", "1", *overrides])
            b.start()
            self._oncelog, self.bootstrap, self.pid = b, b.bootstrap, b.proc.pid
            self.settings = {"oncelog.fsync": self.args.fsync, **self.settings}
        else:
            from . import kafka

            self._kafka = kafka.start(False, self.work_dir, 1, wanted)
            self.bootstrap = self._kafka.bootstrap
            self.pid = self._kafka.members[1].proc.pid
            self.settings = {"version": self._kafka.installation.version, **wanted}
        return self

    def cpu_seconds(self) -> float:
        try:
            with open(f"/proc/{self.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return float("nan")

    def log_path(self) -> str:
        if self._oncelog is not None:
            return self._oncelog.log_path
        return self._kafka.members[1].log_path if self._kafka else ""

    def create_topic(self, name: str, partitions: int, timeout: float = 30.0) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "allow.auto.create.topics": False,
                             "logger": _quiet_logger()})
        admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=timeout)[name].result(timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            md = admin.list_topics(name, timeout=5).topics.get(name)
            if md is not None and md.error is None and len(md.partitions) == partitions \
                    and all(p.leader >= 0 for p in md.partitions.values()):
                return
            time.sleep(0.05)
        raise RuntimeError(f"topic {name} has no leader for every partition on {self.kind} after {timeout:.0f}s")

    def stop(self) -> None:
        if self._oncelog is not None:
            self._oncelog.stop()
        if self._kafka is not None:
            self._kafka.stop()


def _quiet_logger() -> logging.Logger:
    log = logging.getLogger("bench.rebalance.quiet")
    if not log.handlers:
        log.addHandler(logging.NullHandler())
        log.propagate = False
    return log


# ------------------------------------------------------------------------------------ members

class _Requests(logging.Handler):
    """librdkafka's ``debug=protocol`` log of one client: (monotonic instant, API) of each request
    sent. Errors and warnings (level <= WARNING) are kept apart."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.sent: list[tuple[float, str]] = []
        self.problems: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        now = time.monotonic()
        text = record.getMessage()
        m = _SENT.search(text)
        if m:
            self.sent.append((now, m.group(1)))
        elif record.levelno >= logging.WARNING and len(self.problems) < 20:
            self.problems.append(text[:300])


class Member:
    """One group member: a confluent_kafka Consumer polled by its own thread. Its assignment is
    applied from the rebalance callbacks as increments (assign adds, revoke and lost remove), which
    reads the eager protocols' full revoke + assign and the cooperative ones' moves alike."""

    def __init__(self, index: int, conf: dict, topic: str) -> None:
        self.index = index
        self.topic = topic
        self.requests = _Requests()
        log = logging.getLogger(f"bench.rebalance.m{index}.{uuid.uuid4().hex[:8]}")
        log.setLevel(logging.DEBUG)
        log.propagate = False
        log.addHandler(self.requests)
        self.conf = {**conf, "client.id": f"bench-rebalance-m{index}", "debug": "protocol", "logger": log}
        self.ready = threading.Event()
        self.go = threading.Event()
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.owned: set[int] = set()
        self.changed_at = 0.0
        self.events: list[tuple[float, str, list[int]]] = []
        self.t_subscribe = 0.0
        self.error: str | None = None
        self.thread = threading.Thread(target=self._run, name=f"rebalance-member-{index}", daemon=True)

    def _event(self, kind: str, partitions) -> None:
        now = time.monotonic()
        parts = sorted(tp.partition for tp in partitions)
        with self.lock:
            if kind == "assign":
                self.owned |= set(parts)
            else:
                self.owned -= set(parts)
            self.changed_at = now
            self.events.append((now, kind, parts))

    def _run(self) -> None:
        import confluent_kafka as ck

        try:
            c = ck.Consumer(self.conf)
            c.list_topics(self.topic, timeout=30)
        except BaseException as exc:
            self.error = f"member {self.index}: {exc}"
            self.ready.set()
            return
        self.ready.set()
        try:
            while not self.go.wait(0.02):
                c.poll(0)  # serve the log queue
                if self.stop.is_set():
                    return
            self.t_subscribe = time.monotonic()
            c.subscribe([self.topic], on_assign=lambda _c, ps: self._event("assign", ps),
                        on_revoke=lambda _c, ps: self._event("revoke", ps),
                        on_lost=lambda _c, ps: self._event("lost", ps))
            while not self.stop.is_set():
                msg = c.poll(0.02)
                if msg is not None and msg.error() and self.error is None:
                    self.error = f"member {self.index}: {msg.error()}"
        except BaseException as exc:
            self.error = f"member {self.index}: {exc}"
        finally:
            c.close()

    def snapshot(self) -> tuple[frozenset[int], float]:
        with self.lock:
            return frozenset(self.owned), self.changed_at

    def first_after(self, t: float, kinds: tuple[str, ...]) -> float | None:
        with self.lock:
            return next((at for at, kind, parts in self.events if at >= t and kind in kinds and parts), None)


def _describe(admin, group: str) -> tuple[str | None, int | None, str | None]:
    """(state, member count, error) from the broker (DescribeGroups / ConsumerGroupDescribe)."""
    try:
        d = admin.describe_consumer_groups([group], request_timeout=5)[group].result(timeout=10)
        return getattr(d.state, "name", str(d.state)), len(d.members or []), None
    except Exception as exc:
        return None, None, str(exc)[:200]


def grow(bootstrap: str, topic: str, partitions: int, protocol: Protocol, members: int, *, heartbeat_ms: int,
         session_timeout_ms: int, step_pause: float, step_timeout: float = 60.0, settle_check: float = 0.5) -> dict:
    """One growth of a fresh group 1 → ``members`` (see the module docstring); returns its steps."""
    from confluent_kafka.admin import AdminClient

    group = f"bench-rebalance-{protocol.name}-{uuid.uuid4().hex[:10]}"
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", **protocol.client_config(heartbeat_ms, session_timeout_ms)}
    admin = AdminClient({"bootstrap.servers": bootstrap, "logger": _quiet_logger()})
    crew = [Member(i, conf, topic) for i in range(members)]
    for m in crew:
        m.thread.start()
    for m in crew:
        m.ready.wait(60)
    errors = [m.error for m in crew if m.error]
    steps: list[dict] = []
    everything = frozenset(range(partitions))
    last_settled = float("inf")
    late: list[str] = []
    try:
        for k in range(members if not errors else 0):
            if k:
                time.sleep(step_pause * (1 + random.random()))
            new = crew[k]
            new.go.set()
            deadline = time.monotonic() + step_timeout

            def shared_out() -> float | None:
                """Wait until the members' own views (their assign/revoke callbacks) share every
                partition out disjointly, each member some; when they last changed (None: timeout)."""
                while time.monotonic() < deadline:
                    snaps = [m.snapshot() for m in crew[:k + 1]]
                    sets = [owned for owned, _ in snaps]
                    if all(sets) and sum(map(len, sets)) == partitions and frozenset().union(*sets) == everything:
                        return max(at for _, at in snaps)
                    time.sleep(0.002)
                return None

            assigned_at = shared_out()
            if assigned_at is None:
                owned = [sorted(m.snapshot()[0]) for m in crew[:k + 1]]
                errors.append(f"step to {k + 1} member(s): no complete assignment within {step_timeout:.0f}s: {owned}")
                break
            stable_at, state, count, derr = None, None, None, None
            while time.monotonic() < deadline:
                state, count, derr = _describe(admin, group)
                if state == "STABLE" and count == k + 1:
                    stable_at = time.monotonic()
                    break
                time.sleep(0.01)
            if stable_at is None:
                errors.append(f"step to {k + 1} member(s): the broker says {state} with {count} member(s) "
                              f"{derr or ''}, not Stable with {k + 1}, {step_timeout:.0f}s after the join")
                break
            # The broker is Stable once every member has acknowledged its target, but a member's
            # assign callback runs at its application's next poll, which may come later: the views
            # can cover every partition before Stable (one still with the member giving it up) and
            # then move once more (seen once in CI under load: "member 2: assign [5]" after the
            # step had ended; the report did not say which protocol). So they are read again.
            assigned_at = shared_out()
            if assigned_at is None:
                owned = [sorted(m.snapshot()[0]) for m in crew[:k + 1]]
                errors.append(f"step to {k + 1} member(s): Stable, then no complete assignment within "
                              f"{step_timeout:.0f}s: {owned}")
                break
            t_sub = new.t_subscribe
            settled_at = max(assigned_at, stable_at)
            last_settled = settled_at
            noticed = [t for t in (m.first_after(t_sub, ("revoke", "lost")) for m in crew[:k]) if t and t <= settled_at]
            requests: dict[str, int] = {}
            for m in crew[:k + 1]:
                for at, api in list(m.requests.sent):
                    if t_sub <= at <= settled_at and (api in GROUP_APIS or api in OTHER_APIS):
                        requests[api] = requests.get(api, 0) + 1
            first_own = new.first_after(t_sub, ("assign",))
            steps.append({
                "members": k + 1, "seconds": settled_at - t_sub, "assigned_s": assigned_at - t_sub,
                "stable_s": stable_at - t_sub, "noticed_s": (max(noticed) - t_sub) if noticed else None,
                "new_member_s": (first_own - t_sub) if first_own else None,
                "requests": requests, "group_requests": sum(requests.get(a, 0) for a in GROUP_APIS),
                "revoking_members": len(noticed),
                "assignment": [sorted(m.snapshot()[0]) for m in crew[:k + 1]],
            })
        # A moment later: did any assignment move again? (Then the settled instant was not final.)
        time.sleep(settle_check)
        # An empty callback moves nothing (a cooperative member is told of a rebalance that left
        # it as it was: librdkafka calls on_assign with no partitions; seen in CI under load).
        late = [f"member {m.index}: {kind} {parts}" for m in crew for at, kind, parts in m.events
                if at > last_settled and parts]
    finally:
        for m in crew:
            m.stop.set()
        for m in crew:
            m.thread.join(30)
    errors += [m.error for m in crew if m.error and m.error not in errors]
    return {"group": group, "steps": steps, "errors": errors, "late_events": late[:10],
            "client_problems": [p for m in crew for p in m.requests.problems][:10]}


# ------------------------------------------------------------------------------------ summary

def _median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def summarize(results: list[dict], brokers: list[str], protocols: list[str], members: int) -> list[dict]:
    """One row per (broker, protocol): per step the medians over the repetitions of the time, its
    phases and the request counts; and the growth's totals (the sum of the step medians)."""
    rows = []
    for b in brokers:
        for p in protocols:
            runs = [r for r in results if r["broker"] == b and r["protocol"] == p and not r["warmup"]]
            steps = {}
            for k in range(1, members + 1):
                mine = [s for r in runs for s in r["steps"] if s["members"] == k]
                apis = sorted({a for s in mine for a in s["requests"]})
                steps[k] = {"n": len(mine), "seconds": _median([s["seconds"] for s in mine]),
                            "all_s": [s["seconds"] for s in mine],
                            "assigned_s": _median([s["assigned_s"] for s in mine]),
                            "stable_s": _median([s["stable_s"] for s in mine]),
                            "noticed_s": _median([s["noticed_s"] for s in mine]),
                            "new_member_s": _median([s["new_member_s"] for s in mine]),
                            "group_requests": _median([s["group_requests"] for s in mine]),
                            "requests": {a: _median([s["requests"].get(a, 0) for s in mine]) for a in apis}}
            complete = all(steps[k]["n"] for k in steps)
            joins = [k for k in steps if k > 1]
            # The phases pooled over every join after the first (of every repetition): which one the
            # time goes to.
            pooled = [s for r in runs for s in r["steps"] if s["members"] > 1]
            total = {a: sum(steps[k]["requests"].get(a, 0) for k in joins)
                     for a in GROUP_APIS + OTHER_APIS}
            rows.append({
                "broker": b, "protocol": p, "label": PROTOCOLS[p].label, "repetitions": len(runs), "steps": steps,
                "joins_s": sum(steps[k]["seconds"] for k in joins) if complete else None,
                "join_median_s": _median([steps[k]["seconds"] for k in joins]) if complete else None,
                "joins_group_requests": sum(steps[k]["group_requests"] for k in joins) if complete else None,
                "joins_requests": total,
                "join_noticed_s": _median([s["noticed_s"] for s in pooled]),
                "join_new_member_s": _median([s["new_member_s"] for s in pooled]),
                "join_after_noticed_s": _median([s["assigned_s"] - s["noticed_s"] for s in pooled
                                                 if s["noticed_s"] is not None]),
                "errors": [e for r in runs for e in r["errors"]],
                "late_events": [e for r in runs for e in r["late_events"]],
                "broker_cpu_s": _median([r.get("broker_cpu_s") for r in runs]),
            })
    return rows


def _ms(x, fmt=",.0f") -> str:
    return "—" if x is None else format(x * 1000, fmt)


def _n(x) -> str:
    return "—" if x is None else f"{x:g}"


def step_table(rows: list[dict], broker: str, members: int, reps: int, partitions: int) -> Table:
    label = "oncelog" if broker == "oncelog" else "Apache Kafka 4.4"
    t = Table(title=f"{label}: a group growing 1→{members} (one member joining at a time, {partitions} partitions); "
                    f"median of {reps}: step time in ms / group-protocol requests sent during the step",
              title_justify="left", header_style="bold")
    t.add_column("protocol")
    for k in range(1, members + 1):
        t.add_column("first join" if k == 1 else f"→{k}", justify="right")
    t.add_column(f"→{members} noticed / new member / assigned / stable", justify="right")
    t.add_column("errors")
    for r in (r for r in rows if r["broker"] == broker):
        last = r["steps"][members]
        errs = r["errors"]
        t.add_row(r["label"],
                  *[f"{_ms(r['steps'][k]['seconds'])} / {_n(r['steps'][k]['group_requests'])}"
                    for k in range(1, members + 1)],
                  " / ".join(_ms(last[x]) for x in ("noticed_s", "new_member_s", "assigned_s", "stable_s")),
                  f"[red]{len(errs)}: {escape(errs[0][:80])}[/red]" if errs else "0")
    return t


def summary_table(rows: list[dict], members: int) -> Table:
    t = Table(title=f"Rebalance, 2→{members}: the {members - 1} joins after the first (sums of the step medians)",
              title_justify="left", header_style="bold",
              caption="A step: from the new member's subscribe() until every member holds a partition of the new "
                      "assignment (disjoint, complete) and the broker says Stable. Phases, medians over every join: "
                      "'noticed' until the last existing member that gave partitions up saw its revoke, 'new member' "
                      "until the new member got its first partitions, 'noticed→assigned' from the revoke on until "
                      "all were assigned. "
                      "requests: sent by all members within the steps' windows (librdkafka debug=protocol); "
                      "Join/Sync/HB = JoinGroup/SyncGroup/Heartbeat, CGH = ConsumerGroupHeartbeat, "
                      "FC/OF = FindCoordinator/OffsetFetch. × classic: the row over the classic eager row of its broker.",
              caption_justify="left")
    for col, just in [("broker", "left"), ("protocol", "left"), ("Σ time ms", "right"), ("median join ms", "right"),
                      ("noticed / new member / noticed→assigned ms", "right"), ("group requests", "right"), ("Join/Sync/HB/CGH", "right"), ("FC/OF", "right"),
                      ("time × classic", "right"), ("requests × classic", "right"), ("broker CPU s / growth", "right")]:
        t.add_column(col, justify=just)
    for r in rows:
        base = next((x for x in rows if x["broker"] == r["broker"] and x["protocol"] == "classic"), None)
        q = r["joins_requests"]
        t.add_row("oncelog" if r["broker"] == "oncelog" else "Apache Kafka", r["label"], _ms(r["joins_s"]),
                  _ms(r["join_median_s"]),
                  " / ".join(_ms(r[x]) for x in ("join_noticed_s", "join_new_member_s", "join_after_noticed_s")),
                  _n(r["joins_group_requests"]),
                  "/".join(_n(q[a]) for a in GROUP_APIS), "/".join(_n(q[a]) for a in ("FindCoordinator", "OffsetFetch")),
                  _ratio(r["joins_s"], base and base["joins_s"]),
                  _ratio(r["joins_group_requests"], base and base["joins_group_requests"]),
                  "—" if r["broker_cpu_s"] is None else f"{r['broker_cpu_s']:.2f}")
    return t


def broker_table(rows: list[dict]) -> Table | None:
    pairs = [(o, k) for o in rows if o["broker"] == "oncelog"
             for k in rows if k["broker"] == "kafka" and k["protocol"] == o["protocol"]]
    if not pairs:
        return None
    t = Table(title="oncelog / Apache Kafka, per protocol (2→N joins)", title_justify="left", header_style="bold")
    for col in ("protocol", "Σ time", "median join", "group requests"):
        t.add_column(col, justify="left" if col == "protocol" else "right")
    for o, k in pairs:
        t.add_row(o["label"], _ratio(o["joins_s"], k["joins_s"]), _ratio(o["join_median_s"], k["join_median_s"]),
                  _ratio(o["joins_group_requests"], k["joins_group_requests"]))
    return t


def _ratio(a, b) -> str:
    return f"{a / b:.2f}" if a is not None and b else "—"


# ------------------------------------------------------------------------------------ main

def _csv(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench rebalance", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--broker", default="oncelog", help=f"comma-separated, of: {', '.join(BROKERS)}")
    p.add_argument("--protocols", default=",".join(PROTOCOLS), help=f"comma-separated, of: {', '.join(PROTOCOLS)}")
    p.add_argument("--members", type=int, default=8, help="members the group grows to")
    p.add_argument("--partitions", type=int, default=16, help="partitions of the topic")
    p.add_argument("--reps", type=int, default=3, help="recorded growths per broker and protocol (medians reported)")
    p.add_argument("--warmup", type=int, default=2,
                   help="members of the unrecorded growth per broker and protocol before the first (0: none)")
    p.add_argument("--heartbeat-ms", type=int, default=500,
                   help="classic heartbeat.interval.ms (client) and group.consumer.heartbeat.interval.ms (broker)")
    p.add_argument("--session-timeout-ms", type=int, default=6000,
                   help="classic session.timeout.ms (client) and group.consumer.session.timeout.ms (broker)")
    p.add_argument("--step-pause", type=float, default=1.0,
                   help="the group stays settled 1-2x this many seconds before the next member subscribes")
    p.add_argument("--step-timeout", type=float, default=60.0, help="seconds a step may take before it fails")
    p.add_argument("--fsync", default="never", help="oncelog's --fsync (Kafka does not fsync per write either)")
    p.add_argument("--work-dir", help="broker data and logs (default: a new directory under $TMPDIR, removed after)")
    p.add_argument("--json", metavar="PATH", help="write every step of every growth here")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    brokers, protocols = _csv(args.broker), _csv(args.protocols)
    for b in brokers:
        if b not in BROKERS:
            raise SystemExit(f"unknown broker {b!r}; known: {', '.join(BROKERS)}")
    for p in protocols:
        if p not in PROTOCOLS:
            raise SystemExit(f"unknown protocol {p!r}; known: {', '.join(PROTOCOLS)}")
    if args.members < 1 or args.partitions < args.members:
        raise SystemExit("need 1 <= --members <= --partitions (every member holds a partition when settled)")
    console = Console()
    if not console.is_terminal:
        console = Console(width=max(console.width, 230))
    from .report import machine

    meta = machine()
    work_dir = args.work_dir or tempfile.mkdtemp(prefix="oncelog-bench-rebalance-")
    os.makedirs(work_dir, exist_ok=True)
    console.print(f"[bold]rebalance bench[/bold]: {meta.get('cpu', '?')} × {meta['nproc']}, librdkafka "
                  f"{meta['librdkafka']}; brokers {', '.join(brokers)}; protocols {', '.join(protocols)}; "
                  f"1→{args.members} members, {args.partitions} partitions, {args.reps} repetition(s); "
                  f"work dir {work_dir}")
    for p in protocols:
        conf = PROTOCOLS[p].client_config(args.heartbeat_ms, args.session_timeout_ms)
        console.print(f"  {PROTOCOLS[p].label}: client {', '.join(f'{k}={v}' for k, v in conf.items())}")
    results: list[dict] = []
    running: dict[str, Broker] = {}
    t0 = time.monotonic()
    try:
        for b in brokers:
            running[b] = Broker(b, os.path.join(work_dir, b), args).start()
            console.print(f"  {running[b].label} on {running[b].bootstrap}: "
                          + ", ".join(f"{k}={v}" for k, v in running[b].settings.items())
                          + "".join(f"; [yellow]{escape(n)}[/yellow]" for n in running[b].notes))
            running[b].create_topic("bench-rebalance", args.partitions)
        plan = [(-1, args.warmup)] if args.warmup > 1 else []
        plan += [(rep, args.members) for rep in range(args.reps)]
        for rep, n in plan:
            shift = max(rep, 0)
            order_b = brokers[shift % len(brokers):] + brokers[:shift % len(brokers)]
            order_p = protocols[shift % len(protocols):] + protocols[:shift % len(protocols)]
            for b in order_b:
                for p in order_p:
                    broker = running[b]
                    cpu0 = broker.cpu_seconds()
                    res = grow(broker.bootstrap, "bench-rebalance", args.partitions, PROTOCOLS[p], n,
                               heartbeat_ms=args.heartbeat_ms, session_timeout_ms=args.session_timeout_ms,
                               step_pause=args.step_pause, step_timeout=args.step_timeout)
                    res.update({"broker": b, "protocol": p, "repetition": rep, "warmup": rep < 0,
                                "broker_cpu_s": broker.cpu_seconds() - cpu0})
                    results.append(res)
                    console.print(_line(res))
    finally:
        for broker in running.values():
            broker.stop()
    rows = summarize(results, brokers, protocols, args.members)
    console.print(summary_table(rows, args.members))
    for b in brokers:
        console.print(step_table(rows, b, args.members, args.reps, args.partitions))
    versus = broker_table(rows)
    if versus is not None:
        console.print(versus)
    console.print(f"run took {time.monotonic() - t0:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"argv": sys.argv[1:] if argv is None else argv, "machine": meta,
                       "settings": {b: x.settings for b, x in running.items()}, "summary": rows,
                       "growths": results}, f, indent=1)
        console.print(f"figures written to {args.json}")
    failed = any(r["errors"] for r in results)
    if not args.work_dir:
        if failed:
            console.print(f"[red]errors[/red]: broker logs kept in {work_dir}")
        else:
            shutil.rmtree(work_dir, ignore_errors=True)
    return 1 if failed or not results else 0


def _line(res: dict) -> str:
    head = (f"{'warm-up' if res['warmup'] else 'rep ' + str(res['repetition'] + 1)} {res['broker']:<8} "
            f"{res['protocol']:<13}")
    text = head + "  ".join(f"→{s['members']}: {s['seconds'] * 1000:5.0f} ms {s['group_requests']:3d} req"
                            for s in res["steps"])
    if res["errors"]:
        text += f" [red]{len(res['errors'])} error(s): {escape(res['errors'][0][:160])}[/red]"
    if res["late_events"]:
        text += f" [yellow]assignment moved after settling: {escape(res['late_events'][0])}[/yellow]"
    return text
