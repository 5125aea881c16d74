"""The nemesis: faults at random times, from a seed, each healed before the next.

The schedule is a pure function of the seed and the enabled kinds (:func:`schedule`), so a run
can be repeated; what each fault does to the system is in :class:`Nemesis`, which acts on the
run's :class:`Targets` (the broker, the worker processes, the fault proxy, the disk ballast, the
broker's clock). Every fault is recorded as a window ``{kind, target, start, end, detail}``
(times in ns, the history's clock) for the report and the plot.

Kinds (``--faults``):

* ``kill``  — SIGKILL the broker (restarted after 0.5-3 s) or a worker (a new incarnation).
* ``pause`` — SIGSTOP the broker or a worker for 0.5-8 s (longer than a group session or a
  transaction timeout sometimes: zombies must be fenced), then SIGCONT.
* ``net``   — through the fault proxy, for 1-6 s: delayed responses, dropped responses,
  requests reset midway, or a one-way blackhole (either direction; half the time between one
  worker and the broker only, else every connection).
* ``disk``  — the broker's data dir (a small filesystem) filled by a ballast for 1-6 s.
* ``clock`` — the broker's clock jumps forward or back by up to 30 s (its injected clock).
* ``kill-node`` — a cluster's (``--nodes N``, N > 1) kill of ONE broker node, as Jepsen's kill of
  one node: SIGKILL of node ``k``'s process (its pid from ``nodes/<k>.json``), ``k`` drawn from
  the seed; the cluster's supervisor starts it again, and the fault ends once the node has
  registered again (a new pid, listening), so faults never overlap; the later faults move by
  the time it took, so the schedule's quiet gap (2-6 s) follows the node's return. Its partitions and the
  groups and transactions it coordinates are unavailable meanwhile (no replication).

On a cluster, ``kill`` and ``pause`` of the ``broker`` act on the whole cluster: ``kill`` is a
SIGKILL of the supervisor (every node dies with it) then a restart, ``pause`` stops every node;
``clock`` jumps every node's clock.

Process faults need local processes: against ``--bootstrap-server`` only the workers can be
killed or paused; net/disk/clock need the local broker.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field

KINDS = ("kill", "pause", "net", "disk", "clock", "kill-node")
CLUSTER_KINDS = ("kill-node",)  # need a local cluster: --nodes 2 or more


def available(kinds, *, local: bool = True, nodes: int = 1) -> list[str]:
    """The kinds that can act: against another cluster only the workers' kill and pause; the
    cluster kinds only on a local cluster of several nodes."""
    return [k for k in kinds if (local or k in ("kill", "pause")) and (k not in CLUSTER_KINDS or (local and nodes > 1))]


@dataclass
class Fault:
    at_s: float          # seconds after the nemesis starts
    kind: str
    target: str          # "broker" or a worker slot name ("producer-0", ...), "proxy", "disk", "clock"
    duration_s: float
    detail: dict = field(default_factory=dict)


def schedule(seed: int, kinds: list[str], duration_s: float, targets: list[str], *, broker: bool = True,
             interval_s: tuple[float, float] = (2.0, 6.0), nodes: int = 1) -> list[Fault]:
    """The run's faults: one at a time, a quiet gap of ``interval_s`` between them, the kinds
    and targets drawn with ``random.Random(seed)`` (each enabled kind once per round, the broker
    the target of 40% of kills and pauses, a ``kill-node`` one of nodes 1..``nodes``); all end
    before ``duration_s``. Kinds that cannot act (:func:`available`) are left out before any draw,
    so a seed's schedule on one node is what it was before clusters."""
    rng = random.Random(seed)
    usable = available(kinds, local=broker, nodes=nodes)
    faults, t, bag = [], rng.uniform(*interval_s), []
    while usable and t < duration_s - 1:
        if not bag:  # every kind once per round, in a random order: a short run still has them all
            bag = list(usable)
            rng.shuffle(bag)
        kind = bag.pop()
        if kind in ("kill", "pause"):
            target = "broker" if broker and (not targets or rng.random() < 0.4) else rng.choice(list(targets))
            dur = rng.uniform(0.5, 3.0) if kind == "kill" else rng.uniform(0.5, 8.0)
            detail = {}
        elif kind == "net":
            target, dur = "proxy", rng.uniform(1.0, 6.0)
            mode = rng.choice(["delay", "drop", "reset", "blackhole"])
            detail = {"mode": mode}
            if mode == "delay":
                detail["seconds"] = round(rng.uniform(0.05, 1.0), 3)
            elif mode in ("drop", "reset"):
                detail["rate"] = round(rng.uniform(0.1, 0.5), 3)
            else:
                detail["direction"] = rng.choice(["to_broker", "to_client"])
                if targets and rng.random() < 0.5:  # one client cut off, the others not
                    detail["client"] = rng.choice(list(targets))
        elif kind == "kill-node":
            # no duration of its own: the supervisor restarts the node; the window lasts until
            # the node has registered again
            target, dur, detail = f"node-{rng.randint(1, nodes)}", 0.0, {}
        elif kind == "disk":
            target, dur, detail = "disk", rng.uniform(1.0, 6.0), {}
        else:
            target, dur = "clock", 0.0
            detail = {"jump_ms": rng.choice([-1, 1]) * rng.randint(1_000, 30_000)}
        dur = min(dur, max(duration_s - t - 0.5, 0.1))
        faults.append(Fault(round(t, 3), kind, target, round(dur, 3), detail))
        t += dur + rng.uniform(*interval_s)
    return faults


class Targets:
    """What the nemesis acts on; the run provides it. Methods return a short description."""

    def kill(self, target: str) -> None: ...
    def revive(self, target: str) -> None: ...
    def pause(self, target: str) -> None: ...
    def resume(self, target: str) -> None: ...
    def net(self, detail: dict) -> None: ...
    def heal_net(self) -> None: ...
    def fill_disk(self) -> None: ...
    def free_disk(self) -> None: ...
    def jump_clock(self, ms: int) -> None: ...
    def kill_node(self, target: str) -> None: ...
    def revive_node(self, target: str) -> None: ...


class Nemesis:
    """Runs a schedule against targets in a thread; :meth:`stop` ends (and heals) early."""

    def __init__(self, faults: list[Fault], targets: Targets, on_event=None) -> None:
        self.faults, self.targets = faults, targets
        self.windows: list[dict] = []
        self.errors: list[str] = []
        self.on_event = on_event or (lambda text: None)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="nemesis", daemon=True)

    def start(self) -> "Nemesis":
        self._t0 = time.monotonic()
        self._thread.start()
        return self

    def stop(self, timeout: float = 60.0) -> None:
        self._stop.set()
        self._thread.join(timeout)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for w in self.windows:
            key = w["kind"] if w["kind"] != "net" else f"net:{w['detail'].get('mode')}"
            if w["kind"] in ("kill", "pause"):
                key += " broker" if w["target"] == "broker" else f" {w['target'].rsplit('-', 1)[0]}"
            elif w["kind"] == "kill-node":
                key += f" {w['target']}"
            out[key] = out.get(key, 0) + 1
        return out

    def _wait(self, seconds: float) -> bool:
        """Sleep; True if stopped meanwhile."""
        return self._stop.wait(max(seconds, 0))

    def _run(self) -> None:
        # A kill-node lasts until the node is back, longer than its scheduled 0 s: the faults
        # after it move by as much as it ended late, so the schedule's quiet gap follows every
        # node's return.
        lag = 0.0
        for fault in self.faults:
            if self._wait(fault.at_s + lag - (time.monotonic() - self._t0)):
                return
            start = time.time_ns()
            try:
                self._begin(fault)
            except Exception as exc:  # a fault that could not be applied is reported, not fatal
                self.errors.append(f"{fault.kind} {fault.target}: {exc!r}")
                continue
            self.on_event(f"{fault.kind} {fault.target} {fault.detail or ''}".strip())
            self._wait(fault.duration_s)  # heal even when stopping
            try:
                self._end(fault)
            except Exception as exc:
                self.errors.append(f"healing {fault.kind} {fault.target}: {exc!r}")
            self.windows.append({"kind": fault.kind, "target": fault.target, "start": start,
                                 "end": time.time_ns(), "detail": fault.detail})
            if fault.kind == "kill-node":  # how far behind its scheduled end the schedule now is
                lag = max(lag, time.monotonic() - self._t0 - (fault.at_s + fault.duration_s))
            if self._stop.is_set():
                return

    def _begin(self, f: Fault) -> None:
        t = self.targets
        if f.kind == "kill":
            t.kill(f.target)
        elif f.kind == "pause":
            t.pause(f.target)
        elif f.kind == "net":
            t.net(f.detail)
        elif f.kind == "disk":
            t.fill_disk()
        elif f.kind == "clock":
            t.jump_clock(f.detail["jump_ms"])
        elif f.kind == "kill-node":
            t.kill_node(f.target)

    def _end(self, f: Fault) -> None:
        t = self.targets
        if f.kind == "kill":
            t.revive(f.target)
        elif f.kind == "pause":
            t.resume(f.target)
        elif f.kind == "net":
            t.heal_net()
        elif f.kind == "disk":
            t.free_disk()
        elif f.kind == "kill-node":
            t.revive_node(f.target)  # waits for the node's new registration
