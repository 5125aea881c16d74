"""Zombie fencing by member epoch (tests/txn_member_epoch_cases.py) against oncelog: the same cases
that Apache Kafka 4.4 passes (tests/kafka/test_txn_member_epoch_kafka.py) — a consumer-protocol
member's stale group metadata is refused in OffsetCommit and TxnOffsetCommit as Kafka refuses it,
and nothing of the zombie's transaction becomes visible or committed.

Each test starts its own broker with the case's group timing as broker settings
(``group.consumer.session.timeout.ms``, ``group.consumer.heartbeat.interval.ms``). The
broker-restart case SIGKILLs the broker and starts it again on the same data and port: the
member epochs that fence must come back from ``__consumer_offsets``."""

from __future__ import annotations

import pytest

# The cases' plain asserts report their values (the module is not a test module of its own).
pytest.register_assert_rewrite("tests.txn_member_epoch_cases")

from .. import consumer_protocol_cases  # noqa: E402
from .. import txn_member_epoch_cases as cases  # noqa: E402

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("name", list(cases.CASES))
def test_txn_member_epoch(broker_factory, name):
    case = cases.CASES[name]
    broker = broker_factory(extra_args=case.timing.oncelog_overrides())

    def restart() -> None:
        broker.kill()
        broker.restart()

    case.run(consumer_protocol_cases.Target(broker.bootstrap, case.timing, "oncelog", restart=restart))
