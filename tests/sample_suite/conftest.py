"""A sample suite: what the tests of a user's Kafka code look like with ``oncelog.testing``'s
pytest plugin (fixtures ``oncelog_broker``, ``oncelog_broker_fresh``, ``spark_session``).

Every test here is marked ``any_kafka`` and uses ``oncelog_broker`` with topics, groups and
transactional ids of its own (``oncelog_broker.topic()``, ``oncelog_broker.unique()``), so the
same suite runs against any Kafka cluster: ``python -m pytest tests/sample_suite -m any_kafka
--kafka-bootstrap=HOST:PORT`` moves it there (tests/kafka/test_sample_suite_on_apache_kafka.py
runs it on Apache Kafka). The few
tests that kill the broker use ``oncelog_broker_fresh`` and are not ``any_kafka``.

``ONCELOG_SAMPLE_FRESH=1`` makes ``oncelog_broker`` a fresh broker per test (the plugin's
``oncelog_broker_fresh``) instead of the session's one: ``python -m bench testing`` times the
suite both ways. ``ONCELOG_SAMPLE_TEST_LIMIT=S`` fails a test still running after S seconds (a
cluster where calls hang, e.g. librdkafka's mock cluster in that benchmark).
"""

from __future__ import annotations

import os
import signal

import pytest

FRESH = os.environ.get("ONCELOG_SAMPLE_FRESH") == "1"

if FRESH:
    @pytest.fixture
    def oncelog_broker(oncelog_broker_fresh):
        """A fresh broker for this test alone (ONCELOG_SAMPLE_FRESH=1)."""
        return oncelog_broker_fresh


LIMIT = float(os.environ.get("ONCELOG_SAMPLE_TEST_LIMIT", "0"))

if LIMIT:
    @pytest.fixture(autouse=True)
    def _test_limit():
        def over(signum, frame):
            where = []  # the innermost calls of the suite and of oncelog: what did not answer
            while frame is not None and len(where) < 2:
                path = frame.f_code.co_filename
                if "sample_suite" in path or "oncelog" in path:
                    where.append(f"{frame.f_code.co_name} ({os.path.basename(path)}:{frame.f_lineno})")
                frame = frame.f_back
            raise TimeoutError(f"the test ran over ONCELOG_SAMPLE_TEST_LIMIT={LIMIT:g} s in {' < '.join(where)}")

        previous = signal.signal(signal.SIGALRM, over)
        signal.setitimer(signal.ITIMER_REAL, LIMIT)
        yield
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
