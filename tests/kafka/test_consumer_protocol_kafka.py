"""The KIP-848 consumer group scenarios (tests/consumer_protocol_cases.py) against Apache Kafka 4.4,
the reference: each must pass here, and oncelog must then pass the same ones
(tests/e2e/test_consumer_protocol.py).

The session's one-node Kafka is shared: topics and groups are unique, and each group gets the
case's session timeout and heartbeat interval as group configs (IncrementalAlterConfigs on the
GROUP resource; the fixture's broker lowers only the group.consumer.min.* bounds that allow it).
The broker-restart case SIGKILLs and restarts the shared node (the fixture hands the next test a
running one either way)."""

from __future__ import annotations

import pytest

# The cases' plain asserts report their values (the module is not a test module of its own).
pytest.register_assert_rewrite("tests.consumer_protocol_cases", "tests.consumer_protocol_harness")

from .. import consumer_protocol_cases as cases  # noqa: E402

pytestmark = [pytest.mark.apache_kafka, pytest.mark.e2e]


@pytest.mark.parametrize("name", list(cases.CASES))
def test_consumer_protocol(apache_kafka, name):
    case = cases.CASES[name]

    def restart() -> None:
        apache_kafka.kill(1)
        apache_kafka.restart(1)

    target = cases.Target(apache_kafka.bootstrap, case.timing, "apache-kafka",
                          configure_group=cases.kafka_group_configurer(apache_kafka.bootstrap), restart=restart)
    case.run(target)
