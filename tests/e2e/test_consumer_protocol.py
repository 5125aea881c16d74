"""The KIP-848 consumer group scenarios (tests/consumer_protocol_cases.py) against oncelog: the same
cases that Apache Kafka 4.4 passes (tests/kafka/test_consumer_protocol_kafka.py).

Each test starts its own broker with the case's group timing as broker settings
(``group.consumer.session.timeout.ms``, ``group.consumer.heartbeat.interval.ms``: KIP-848 puts
them on the broker, not the client). The broker-restart case SIGKILLs the broker and starts it
again on the same data directory and port: the members' assignments, epochs and committed
offsets must come back from ``__consumer_offsets``."""

from __future__ import annotations

import pytest

# The cases' plain asserts report their values (the module is not a test module of its own).
pytest.register_assert_rewrite("tests.consumer_protocol_cases", "tests.consumer_protocol_harness")

from .. import consumer_protocol_cases as cases  # noqa: E402

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("name", list(cases.CASES))
def test_consumer_protocol(broker_factory, name):
    case = cases.CASES[name]
    broker = broker_factory(extra_args=case.timing.oncelog_overrides())

    def restart() -> None:
        broker.kill()
        broker.restart()

    case.run(cases.Target(broker.bootstrap, case.timing, "oncelog", restart=restart))
