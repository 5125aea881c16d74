"""Apache Kafka 4.4 answering the cases of tests/authorization_leak_cases.py: the
reference that oncelog's run of the same cases (tests/e2e/test_authorization_leaks.py) is held
to. A node of this module's own, its client listener SASL_PLAINTEXT (PLAIN: admin, alice, bob)
with StandardAuthorizer, ``super.users=User:admin`` and ``allow.everyone.if.no.acl.found=false``:
the session's Kafka, shared by the ``both_brokers`` tests, is PLAINTEXT without an authorizer
and may not be reconfigured. ``User:ANONYMOUS`` is a super user too, for the node's own PLAINTEXT
inter-broker and controller listeners (and this module's readiness probe) only."""

from __future__ import annotations

import pytest

from .. import authorization_leak_cases as cases
from ..helpers import start_apache_kafka

pytestmark = [pytest.mark.apache_kafka, pytest.mark.e2e]


@pytest.fixture(scope="module")
def world():
    from oncelog.tools.apache_kafka import KafkaCluster

    config = {**cases.AUTHORIZER_SETTINGS, "super.users": "User:admin;User:ANONYMOUS",
              "sasl.enabled.mechanisms": "PLAIN",
              "listener.name.client.sasl.enabled.mechanisms": "PLAIN",
              "listener.name.client.plain.sasl.jaas.config": cases.JAAS}
    cluster = KafkaCluster(nodes=1, client_protocol="SASL_PLAINTEXT", config=config)
    start_apache_kafka(cluster)
    try:
        yield cases.World(cluster.bootstrap)
    finally:
        cluster.stop(graceful=False)


def test_a_kip848_regex_subscription_is_assigned_only_what_its_principal_may_describe(world):
    assert cases.check_kip848_regex_subscription(world) == cases.EXPECTED_REGEX


def test_a_classic_pattern_subscription_sees_only_what_its_principal_may_describe(world):
    assert cases.check_classic_pattern_subscription(world) == cases.EXPECTED_CLASSIC_PATTERN


def test_metadata_by_topic_id_does_not_name_an_undescribable_topic(world):
    assert cases.check_metadata_by_id(world) == cases.EXPECTED_METADATA_BY_ID


def test_delete_topics_by_id_does_not_name_an_undescribable_topic(world):
    assert cases.check_delete_topics_by_id(world) == cases.EXPECTED_DELETE_BY_ID


def test_describe_cluster_answers_a_principal_without_cluster_acls(world):
    assert cases.check_describe_cluster(world) == cases.EXPECTED_DESCRIBE_CLUSTER
