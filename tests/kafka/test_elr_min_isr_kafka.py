"""Apache Kafka 4.4's cluster-level min.insync.replicas under KIP-966 ELR (tests/elr_min_isr_cases.py):
the reference that oncelog's run of the same check (tests/config/test_registry.py) is held to."""

from __future__ import annotations

import pytest

pytest.register_assert_rewrite("tests.elr_min_isr_cases")

from .. import elr_min_isr_cases as cases  # noqa: E402
from ..helpers import create_topic, unique  # noqa: E402

pytestmark = [pytest.mark.apache_kafka, pytest.mark.e2e]


def test_cluster_level_min_insync_replicas(apache_kafka):
    topic = unique("elr")
    create_topic(apache_kafka.bootstrap, topic, 1)
    cases.check(apache_kafka.bootstrap, apache_kafka.node_ids()[0], topic)
