"""oncelog answering the cases of tests/authorization_leak_cases.py: a broker process
with a SASL_PLAINTEXT listener (PLAIN: admin, alice, bob), Kafka's StandardAuthorizer,
``super.users=User:admin`` and ``allow.everyone.if.no.acl.found=false``. Each answer must be the
one Apache Kafka 4.4 gives with the same users and ACLs (tests/kafka/test_authorization_leaks_kafka.py):
the cases' ``EXPECTED_*``."""

from __future__ import annotations

import pytest

from oncelog.process import BrokerProcess

from .. import authorization_leak_cases as cases
from ..helpers import free_port

pytestmark = pytest.mark.e2e  # starts processes


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    d = tmp_path_factory.mktemp("authz-leaks")
    port = free_port()
    settings = {**cases.AUTHORIZER_SETTINGS,
                "listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{port}",
                "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": cases.JAAS}
    b = BrokerProcess(str(d / "broker"), extra_args=[arg for k, v in settings.items()
                                                     for arg in ("--override", f"{k}={v}")])
    b.start()
    try:
        yield cases.World(f"127.0.0.1:{port}")
    finally:
        b.kill()


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
