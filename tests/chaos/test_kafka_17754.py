"""KAFKA-17754's anomaly class on oncelog, deterministically: a Produce of an earlier transaction,
held by the fault proxy (``hold``) while that transaction ends and the producer's next one opens
on the same partition, then released.

With transactions v2 (KIP-890 part 2: Produce v12, EndTxn v5 bumping the epoch per
transaction) it must be refused — INVALID_PRODUCER_EPOCH, Kafka's code — and nothing of the
earlier transaction may be read in the later one. With transactions v1 the late write is
appended into the later transaction and committed with it, exactly as Apache Kafka 4.4 does
(tests/kafka/test_kafka_17754.py runs the same conversation against it): the anomaly is the
protocol's, and transactions v2 is the fix. The conversation, its variants and the outcome of
each are in :mod:`tests.chaos.late_produce`.
"""

from __future__ import annotations

import pytest

from oncelog.chaos.proxy import FaultProxy

from ..kafka.conformance.framework import Conversation, warm_up
from .late_produce import CASES, ProxyHold, check, run


@pytest.fixture
def proxied(broker_factory):
    """(proxy, its address): an oncelog broker advertising a started fault proxy, warmed up."""
    proxy = FaultProxy(seed=17754)
    broker = broker_factory(extra_args=["--advertise", proxy.address])
    proxy.upstream_port = broker.port
    with proxy:
        warm_up(proxy.address)
        yield proxy


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_late_produce_of_an_ended_transaction(proxied, case):
    k = Conversation("oncelog", proxied.address, "k17754-")
    try:
        outcome = run(k, ProxyHold(proxied), case)
    finally:
        k.close()
    check(outcome, case)
    assert proxied.counts["held"] == proxied.counts["released"] == 1
