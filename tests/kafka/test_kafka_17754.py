"""KAFKA-17754's anomaly class on Apache Kafka 4.4: the conversation of
:mod:`tests.chaos.late_produce` (tests/chaos/test_kafka_17754.py runs it on oncelog through the
fault proxy), with txn1's last Produce encoded at once and written to its open connection only
after txn1 ended and txn2 opened — to the broker, the same late arrival the proxy's ``hold``
makes (Kafka's KRaft listeners advertise themselves, so the proxy cannot sit in front of it).

The expected outcomes are the one table both tests assert (``late_produce.expected``): Kafka and
oncelog agree on every case — refused with transactions v2 (INVALID_PRODUCER_EPOCH), appended
into the later transaction with transactions v1 at the same epoch (the anomaly), refused with v1
after a KIP-360 epoch bump or when the later transaction did not add the partition.
"""

from __future__ import annotations

import uuid

import pytest

from ..chaos.late_produce import CASES, LateWrite, check, run
from .conformance.framework import Conversation, warm_up

pytestmark = [pytest.mark.e2e, pytest.mark.apache_kafka]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_late_produce_of_an_ended_transaction(apache_kafka, case):
    warm_up(apache_kafka.bootstrap)
    k = Conversation("apache-kafka", apache_kafka.bootstrap, f"k17754-{uuid.uuid4().hex[:8]}-")
    try:
        outcome = run(k, LateWrite(), case)
    finally:
        k.close()
    check(outcome, case)
