"""Faults a test injects into a broker: named points where the broker misbehaves on purpose, and
control functions that intercept requests. In the manner of franz-go's kfake (``AddFault``,
``ControlKey``): a :class:`Faults` object lives on the broker (``broker.faults``); a test adds a
fault in-process and gets a :class:`FaultHandle` back; ``oncelog serve`` adds the faults its
environment names (:func:`install_from_env`, the only reader of these variables). With nothing
added, a point costs one check (``if self.faults``).

Points (the code that consults :class:`Faults` names them; each takes a budget and a cadence):

* ``txn-durable:<State>`` — right after a ``__transaction_state`` record of that state is
  durable (e.g. ``txn-durable:PrepareCommit``);
* ``markers:after-first`` — after the first marker of a transaction over two or more partitions
  is written (and flushed), before the others;
* ``markers:drop`` — fires: one data partition of a transaction over two or more data
  partitions loses its marker (the coordinator believes it written, the partition never sees
  it: the class of bug behind partial or aborted reads);
* ``offsets-txn-write`` — fires: a transactional write to ``__consumer_offsets``
  (TxnOffsetCommit) fails as a failed disk write would.

A fault at a point fires on every ``every``-th call there (1: each call), at most ``count``
times (0: until removed), and then runs its ``action`` if it has one (crash points: SIGKILL).

Matching order: the first live handle added at a point decides; a spent one (its budget used)
is removed and the next one is asked.

Control functions (``Broker.control(api_key, fn)``, kept here as :meth:`Faults.control`):
``fn(ctx, request)`` sees every decoded request of that API key before its handler, and
answers it (returns the response, an awaitable of it, or a ``CloseConnection``) or passes it on
(returns None). Its budget counts answered requests.

The environment (read by ``oncelog serve`` only, :func:`install_from_env`):

* ``ONCELOG_CRASH_POINT=<point>`` — SIGKILL the broker at that point (a real kill: no flush, no
  clean shutdown), so a test can check recovery from an exact coordinator state;
* ``ONCELOG_FAULT=<name>[:<n>]`` — ``offsets-txn-write[:n]``: the first ``n`` (default 1) writes
  fail; ``markers:drop[:n]``: every ``n``-th (default 3) transaction loses one marker;
* ``ONCELOG_FAULT_CLOCK=<file>`` (``oncelog chaos --faults clock``): the broker's clock is the
  wall clock plus an offset in milliseconds read from that file at start and at every SIGUSR2
  (:func:`broker_clock`) — transaction timeouts, group sessions and timestamps see the jump.
"""

from __future__ import annotations

import logging
import os
import signal
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

log = logging.getLogger("oncelog.faults")


@dataclass(eq=False)
class FaultHandle:
    """One added fault (or control function): how often it fired; :meth:`remove` ends it."""

    point: Any  # a point's name, or an API key for a control function
    count: int = 0  # budget of firings; 0 = until removed
    every: int = 1  # fires on every n-th call at its point
    action: Callable[..., Any] | None = None
    calls: int = 0  # calls seen at its point while it was live
    _fired: int = 0
    _owner: "Faults | None" = field(default=None, repr=False)

    def fired(self) -> int:
        """How many times it fired (a control function: how many requests it answered)."""
        return self._fired

    @property
    def live(self) -> bool:
        return self._owner is not None

    def remove(self) -> None:
        """Take it out: it never fires again. Removing twice is harmless."""
        if self._owner is not None:
            self._owner._drop(self)

    def _spent(self) -> bool:
        return self.count > 0 and self._fired >= self.count


class Faults:
    """The broker's faults: points a fault may fire at, control functions per API key."""

    def __init__(self) -> None:
        self._points: dict[str, list[FaultHandle]] = {}
        self.controls: dict[int, list[FaultHandle]] = {}  # read by Broker.handle_frame: empty = no check

    def __bool__(self) -> bool:
        return bool(self._points) or bool(self.controls)

    # ---------------------------------------------------------------- points

    def add(self, point: str, count: int = 0, *, every: int = 1,
            action: Callable[[str], Any] | None = None) -> FaultHandle:
        """A fault at ``point``: fires on every ``every``-th call there, ``count`` times (0: until
        removed); each firing runs ``action(point)`` if given."""
        if count < 0 or every < 1:
            raise ValueError(f"fault {point}: count must be >= 0 and every >= 1 (got {count}, {every})")
        handle = FaultHandle(point, count, every, action, _owner=self)
        self._points.setdefault(point, []).append(handle)
        return handle

    def crash_at(self, point: str) -> FaultHandle:
        """A crash point: SIGKILL this process when ``point`` is reached (once)."""
        return self.add(point, 1, action=sigkill)

    def armed(self, point: str) -> bool:
        """Whether a fault waits at ``point`` (whether or not the next call fires it)."""
        return point in self._points

    def fire(self, point: str) -> bool:
        """A call at ``point``: True if a fault fires (its action, if any, has run)."""
        handles = self._points.get(point)
        if not handles:
            return False
        handle = handles[0]
        handle.calls += 1
        if handle.calls % handle.every:
            return False
        handle._fired += 1
        if handle._spent():
            handle.remove()
        log.warning("fault %s fires (call %d)", point, handle.calls)
        if handle.action is not None:
            handle.action(point)
        return True

    # ---------------------------------------------------------------- control functions

    def control(self, api_key: int, fn: Callable[[Any, Any], Any], count: int = 0) -> FaultHandle:
        """``fn(ctx, request)`` sees each request of ``api_key`` before its handler: it answers
        (returns the answer) or passes it on (returns None). ``count``: answers, 0 = until removed."""
        handle = FaultHandle(api_key, count, action=fn, _owner=self)
        self.controls.setdefault(api_key, []).append(handle)
        return handle

    def answer(self, api_key: int, ctx, request):
        """The first control function of ``api_key`` that answers: its answer; else None."""
        for handle in list(self.controls.get(api_key, ())):
            handle.calls += 1
            result = handle.action(ctx, request)
            if result is not None:
                handle._fired += 1
                if handle._spent():
                    handle.remove()
                return result
        return None

    def _drop(self, handle: FaultHandle) -> None:
        table = self.controls if handle in self.controls.get(handle.point, ()) else self._points
        handles = table.get(handle.point, [])
        if handle in handles:
            handles.remove(handle)
            if not handles:
                del table[handle.point]
        handle._owner = None


def sigkill(point: str) -> None:
    """A crash point's action: flush the log, then SIGKILL this process (no clean shutdown)."""
    log.warning("crash point %s reached: SIGKILL", point)
    for handler in logging.getLogger().handlers:
        handler.flush()
    os.kill(os.getpid(), signal.SIGKILL)


# ``ONCELOG_FAULT`` names and what each means as a fault: (count, every) for a given ``n``.
ENV_FAULTS: dict[str, Callable[[int | None], tuple[int, int]]] = {
    "offsets-txn-write": lambda n: (n or 1, 1),  # the first n calls
    "markers:drop": lambda n: (0, n or 3),  # every n-th call, until removed
}


def parse_fault(text: str) -> tuple[str, int | None]:
    """``<name>[:<n>]`` -> (name, n or None). Names have colons of their own (markers:drop):
    the count is the last part when it is a number."""
    name, _, n = text.rpartition(":")
    if name and n.isdigit():
        return name, int(n) if int(n) > 0 else None
    return text, None


def install_from_env(faults: Faults, environ: Mapping[str, str] = os.environ) -> list[FaultHandle]:
    """The process edge (``oncelog serve``): add the faults ``ONCELOG_FAULT`` and
    ``ONCELOG_CRASH_POINT`` name. Returns the handles added."""
    handles = []
    if point := environ.get("ONCELOG_CRASH_POINT"):
        handles.append(faults.crash_at(point))
    if text := environ.get("ONCELOG_FAULT"):
        name, n = parse_fault(text)
        if name not in ENV_FAULTS:  # no point of that name: nothing fires
            log.warning("ONCELOG_FAULT=%s: no fault of that name (known: %s)", text, ", ".join(ENV_FAULTS))
        else:
            count, every = ENV_FAULTS[name](n)
            handles.append(faults.add(name, count, every=every))
    return handles


def broker_clock(base, environ: Mapping[str, str] = os.environ):
    """The broker's clock: ``base`` itself unless ``ONCELOG_FAULT_CLOCK`` names an offset file."""
    path = environ.get("ONCELOG_FAULT_CLOCK")
    if not path:
        return base
    offset = [0]

    def reload(*_) -> None:
        try:
            with open(path) as f:
                offset[0] = int(f.read().strip() or 0)
        except (OSError, ValueError):
            return
        log.warning("clock offset now %+d ms", offset[0])

    signal.signal(signal.SIGUSR2, reload)
    reload()
    return lambda: base() + offset[0]
