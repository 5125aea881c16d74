"""Helpers of the sample suite: waits that end as soon as they can."""

from __future__ import annotations

import os
import time

# Waits: generous upper bounds (a loaded 2-core machine, a JVM broker), but every wait ends as
# soon as its condition holds. ONCELOG_SAMPLE_TIMEOUT lowers them where tests are expected to
# hang (python -m bench testing on librdkafka's mock cluster).
TIMEOUT = float(os.environ.get("ONCELOG_SAMPLE_TIMEOUT", "30"))


def consume(consumer, n: int, timeout: float = TIMEOUT) -> list:
    """``n`` messages from a confluent-kafka consumer (errors fail the test), or fail after
    ``timeout`` with what was read."""
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        for m in consumer.consume(n - len(got), 0.2):
            if m.error() is not None:
                if m.error().code() == -191:  # _PARTITION_EOF: only when enable.partition.eof is set
                    continue
                raise AssertionError(f"consumer error: {m.error()}")
            got.append(m)
    assert len(got) == n, f"read {len(got)} of {n} messages in {timeout:.0f} s"
    return got


def consume_quiet(consumer, seconds: float) -> list:
    """Whatever arrives within ``seconds`` (to check that nothing more does)."""
    got = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        got += [m for m in consumer.consume(100, 0.1) if m.error() is None]
    return got


def wait_for(condition, timeout: float = TIMEOUT, what: str = "condition", interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met in {timeout:.0f} s")
        time.sleep(interval)
