"""Crash points for tests: ``ONCELOG_CRASH_POINT=<name>`` makes the broker SIGKILL itself at
that point, so a test can check recovery from an exact coordinator state (a real kill: no
flush, no clean shutdown). Unset in normal operation; checking costs one comparison.

Points: ``txn-durable:<State>`` (right after a ``__transaction_state`` record of that state is
durable, e.g. ``txn-durable:PrepareCommit``) and ``markers:after-first`` (after the first
marker of a transaction is durable, before the others are written).
"""

from __future__ import annotations

import logging
import os
import signal

CRASH_POINT = os.environ.get("ONCELOG_CRASH_POINT") or None


def crash_if(point: str) -> None:
    if CRASH_POINT is not None and CRASH_POINT == point:
        logging.getLogger("oncelog.faults").warning("crash point %s reached: SIGKILL", point)
        for handler in logging.getLogger().handlers:
            handler.flush()
        os.kill(os.getpid(), signal.SIGKILL)
