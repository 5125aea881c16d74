"""Crash points for tests: ``ONCELOG_CRASH_POINT=<name>`` makes the broker SIGKILL itself at
that point, so a test can check recovery from an exact coordinator state (a real kill: no
flush, no clean shutdown). Unset in normal operation; checking costs one comparison.

Points: ``txn-durable:<State>`` (right after a ``__transaction_state`` record of that state is
durable, e.g. ``txn-durable:PrepareCommit``) and ``markers:after-first`` (after the first
marker of a transaction is durable, before the others are written).

Fault switches, for the chaos checker's sensitivity tests: ``ONCELOG_FAULT=<name>[:<n>]``
makes the broker misbehave at one named point, on purpose, so a test can show that a check
catches it. Never set in normal operation.

* ``offsets-txn-write[:n]`` — the first ``n`` (default 1) transactional writes to
  ``__consumer_offsets`` (TxnOffsetCommit) fail as a failed disk write would.
* ``markers:drop[:n]`` — every ``n``-th (default 3) transaction with two or more data partitions
  loses one partition's marker: the coordinator believes it written, the partition never sees
  it (the class of bug behind partial or aborted reads).

Clock jumps (``oncelog chaos --faults clock``): with ``ONCELOG_FAULT_CLOCK=<file>`` the broker's
injected clock is the wall clock plus an offset in milliseconds read from that file at start
and at every SIGUSR2 — transaction timeouts, group sessions and timestamps see the jump.
"""

from __future__ import annotations

import logging
import os
import signal

CRASH_POINT = os.environ.get("ONCELOG_CRASH_POINT") or None


_FAULT = os.environ.get("ONCELOG_FAULT") or ""
# "<name>[:<n>]": names have colons of their own (markers:drop), the count is the last part.
FAULT, _, _FAULT_N = _FAULT.rpartition(":") if _FAULT.rsplit(":", 1)[-1].isdigit() else (_FAULT, "", "")
_fault_counts: dict[str, int] = {}


def fault_fires(name: str, default_n: int, *, every: bool = False) -> bool:
    """Whether the switched-on fault ``name`` fires now: its first ``n`` calls (or, with
    ``every``, each ``n``-th call). Off (one comparison) unless ``ONCELOG_FAULT`` names it."""
    if FAULT != name:
        return False
    n = int(_FAULT_N) if _FAULT_N.isdigit() and int(_FAULT_N) > 0 else default_n
    count = _fault_counts[name] = _fault_counts.get(name, 0) + 1
    fires = count % n == 0 if every else count <= n
    if fires:
        logging.getLogger("oncelog.faults").warning("fault %s fires (call %d)", name, count)
    return fires


def crash_if(point: str) -> None:
    if CRASH_POINT is not None and CRASH_POINT == point:
        logging.getLogger("oncelog.faults").warning("crash point %s reached: SIGKILL", point)
        for handler in logging.getLogger().handlers:
            handler.flush()
        os.kill(os.getpid(), signal.SIGKILL)


def broker_clock(base):
    """The broker's clock: ``base`` itself unless ``ONCELOG_FAULT_CLOCK`` names an offset file."""
    path = os.environ.get("ONCELOG_FAULT_CLOCK")
    if not path:
        return base
    offset = [0]

    def reload(*_) -> None:
        try:
            with open(path) as f:
                offset[0] = int(f.read().strip() or 0)
        except (OSError, ValueError):
            return
        logging.getLogger("oncelog.faults").warning("clock offset now %+d ms", offset[0])

    signal.signal(signal.SIGUSR2, reload)
    reload()
    return lambda: base() + offset[0]
