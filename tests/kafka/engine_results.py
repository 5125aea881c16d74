"""Results of the exactly-once engine tests (Flink, Kafka Streams, Kafka Connect) for the
compatibility table: each test runs its body inside :func:`engine_cell`, which records pass or
failure per (engine, version, check, broker) in ``build/engines.json``; ``python -m
tests.kafka.compat_report`` renders them into docs/COMPATIBILITY.md beside the client matrix.

Two pytest-xdist workers write the file at once: a read-merge-write under an exclusive lock keeps
both workers' cells. A skipped test records nothing (it did not run)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN = os.path.join(REPO, "build", "engines.json")


def key(engine: str, version: str, check: str) -> str:
    return f"{engine}|{version}|{check}"


def _record(engine: str, version: str, check: str, kind: str, ok: bool, detail: str) -> None:
    os.makedirs(os.path.dirname(RUN), exist_ok=True)
    with open(RUN + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            with open(RUN) as f:
                known = json.load(f)
        except (OSError, ValueError):
            known = {}
        known.setdefault(key(engine, version, check), {})[kind] = {"ok": ok, "detail": detail}
        tmp = RUN + ".tmp"
        with open(tmp, "w") as f:
            json.dump(known, f, indent=1, sort_keys=True)
        os.replace(tmp, RUN)


@contextlib.contextmanager
def engine_cell(engine: str, version: str, check: str, kind: str):
    """Run a test's body as one cell: ``kind`` is "oncelog" or "apache-kafka"."""
    try:
        yield
    except pytest.skip.Exception:
        raise
    except BaseException as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        _record(engine, version, check, kind, False, first[:200])
        raise
    _record(engine, version, check, kind, True, "")
