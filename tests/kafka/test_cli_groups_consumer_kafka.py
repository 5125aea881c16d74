"""``oncelog groups list|describe|delete`` against Apache Kafka 4.4, the reference for consumer
groups (KIP-848): the scenarios of tests/test_cli_groups_consumer.py (see its docstring for the
invariants), run unchanged on the session's one-node Kafka, so the command's reading of
ListGroups v5, ConsumerGroupDescribe and the DescribeGroups fallback is checked on the broker
oncelog follows."""

from __future__ import annotations

import pytest

from .. import test_cli_groups_consumer as scenarios

pytestmark = [pytest.mark.e2e, pytest.mark.apache_kafka]


def test_list_shows_type_and_state(apache_kafka):
    scenarios.check_list_shows_type_and_state(apache_kafka.bootstrap)


def test_describe_consumer_group(apache_kafka):
    scenarios.check_describe_consumer_group(apache_kafka.bootstrap)


def test_describe_shows_pending_assignment(apache_kafka):
    scenarios.check_describe_shows_pending_assignment(apache_kafka.bootstrap)


def test_describe_regex_subscription(apache_kafka):
    scenarios.check_describe_regex_subscription(apache_kafka.bootstrap)


def test_describe_mixed_group(apache_kafka):
    scenarios.check_describe_mixed_group(apache_kafka.bootstrap)


def test_describe_classic_group(apache_kafka):
    scenarios.check_describe_classic_group(apache_kafka.bootstrap)


def test_describe_unknown_group(apache_kafka):
    scenarios.check_describe_unknown_group(apache_kafka.bootstrap)


def test_delete_consumer_group(apache_kafka):
    scenarios.check_delete_consumer_group(apache_kafka.bootstrap)
