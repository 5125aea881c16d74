"""Broker limits and the admin APIs a one-broker Kafka answers (issue 11, items 9 and 10),
against real broker processes with real clients (confluent-kafka, kafka-python) or, where no
client sends a version, the project's own wire client."""

from __future__ import annotations

import subprocess
import sys
import time

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from .helpers import create_topic


def _join(bootstrap: str, session_timeout_ms: int, topic: str = "sessions", timeout: float = 10.0):
    """Subscribe a consumer with ``session.timeout.ms``; the JoinGroup error, or None once assigned."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{session_timeout_ms}",
                     "session.timeout.ms": session_timeout_ms, "heartbeat.interval.ms": 500,
                     "auto.offset.reset": "earliest"})
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = c.poll(0.1)
            if m is not None and m.error():
                return m.error().code()
            if c.assignment():
                return None
        raise AssertionError("neither an assignment nor an error")
    finally:
        c.close()


def test_session_timeout_outside_the_group_limits_is_invalid_session_timeout(broker_factory):
    default = broker_factory("default")
    create_topic(default.bootstrap, "sessions")
    assert _join(default.bootstrap, 3000) == ck.KafkaError.INVALID_SESSION_TIMEOUT  # below Kafka's 6000
    assert _join(default.bootstrap, 6000) is None

    tuned = broker_factory("tuned", group_min_session_timeout_ms=1000, group_max_session_timeout_ms=5000)
    create_topic(tuned.bootstrap, "sessions")
    assert _join(tuned.bootstrap, 3000) is None
    assert _join(tuned.bootstrap, 6000) == ck.KafkaError.INVALID_SESSION_TIMEOUT  # above the maximum
    admin = AdminClient({"bootstrap.servers": tuned.bootstrap})
    resource = ConfigResource(ResourceType.BROKER, "1")
    configs = admin.describe_configs([resource])[resource].result(timeout=10)
    assert configs["group.min.session.timeout.ms"].value == "1000"
    assert configs["group.max.session.timeout.ms"].value == "5000"


def test_serve_refuses_a_minimum_session_timeout_above_the_maximum(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "oncelog", "serve", "--data-dir", str(tmp_path / "d"), "--port", "0",
                           "--group-min-session-timeout-ms", "7000", "--group-max-session-timeout-ms", "6000"],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and "--group-min-session-timeout-ms (7000)" in proc.stderr
