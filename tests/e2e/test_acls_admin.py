"""CreateAcls, DescribeAcls and DeleteAcls from confluent-kafka's AdminClient against a real broker
process: SECURITY_DISABLED without ``authorizer.class.name``; with Kafka's
StandardAuthorizer named, ACLs created, listed with MATCH filters, deleted, and still there after a
restart; without ALTER on the cluster, CLUSTER_AUTHORIZATION_FAILED. The anonymous PLAINTEXT client
is made a super user (``super.users=User:ANONYMOUS``) where it must administer ACLs."""

from __future__ import annotations

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from kio.schema.errors import ErrorCode

from oncelog.client.wire import RawClient, request_module

pytestmark = pytest.mark.e2e  # starts processes

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
AUTHORIZER_ARGS = ["--override", f"authorizer.class.name={STANDARD_AUTHORIZER}",
                   "--override", "super.users=User:ANONYMOUS"]
TIMEOUT = 15


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def _wait(futures):
    return {k: f.result(timeout=TIMEOUT) for k, f in futures.items()}


READ_ORDERS = AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
WRITE_ORD_PREFIX = AclBinding(ResourceType.TOPIC, "ord", ResourcePatternType.PREFIXED, "User:alice", "*",
                              AclOperation.WRITE, AclPermissionType.ALLOW)
DENY_BOB = AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:bob", "10.0.0.9",
                      AclOperation.WRITE, AclPermissionType.DENY)
GROUP_READ = AclBinding(ResourceType.GROUP, "billing", ResourcePatternType.LITERAL, "User:*", "*",
                        AclOperation.READ, AclPermissionType.ALLOW)
TXN_WRITE = AclBinding(ResourceType.TRANSACTIONAL_ID, "tx-", ResourcePatternType.PREFIXED, "User:alice", "*",
                       AclOperation.WRITE, AclPermissionType.ALLOW)
EVERYTHING = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                              AclPermissionType.ANY)


def test_without_an_authorizer_the_acl_apis_answer_security_disabled(broker):
    admin = _admin(broker.bootstrap)
    for future in admin.create_acls([READ_ORDERS]).values():
        with pytest.raises(ck.KafkaException) as raised:
            future.result(timeout=TIMEOUT)
        assert raised.value.args[0].code() == ck.KafkaError.SECURITY_DISABLED
    # librdkafka ignores DescribeAcls' top-level error (rd_kafka_DescribeAclsResponse_parse reads
    # it and answers the resources, none): the error itself is checked on the wire.
    assert admin.describe_acls(EVERYTHING).result(timeout=TIMEOUT) == []
    client = RawClient(broker.bootstrap)
    try:
        m = request_module(29, 3)
        resp = client.request(m.DescribeAclsRequest(
            resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
            host_filter=None, operation=1, permission_type=1))
        assert (resp.error_code, resp.error_message) == (
            ErrorCode.security_disabled, "No Authorizer is configured on the broker")
    finally:
        client.close()
    for future in admin.delete_acls([EVERYTHING]).values():
        with pytest.raises(ck.KafkaException) as raised:
            future.result(timeout=TIMEOUT)
        assert raised.value.args[0].code() == ck.KafkaError.SECURITY_DISABLED


def test_create_describe_delete_and_restart(broker_factory):
    broker = broker_factory(extra_args=AUTHORIZER_ARGS)
    admin = _admin(broker.bootstrap)
    created = _wait(admin.create_acls([READ_ORDERS, WRITE_ORD_PREFIX, DENY_BOB, GROUP_READ, TXN_WRITE]))
    assert list(created.values()) == [None] * 5

    everything = admin.describe_acls(EVERYTHING).result(timeout=TIMEOUT)
    assert set(everything) == {READ_ORDERS, WRITE_ORD_PREFIX, DENY_BOB, GROUP_READ, TXN_WRITE}
    # MATCH: the ACLs that apply to the topic "orders-eu" (a literal "orders" does not)
    match = AclBindingFilter(ResourceType.TOPIC, "orders-eu", ResourcePatternType.MATCH, None, None,
                             AclOperation.ANY, AclPermissionType.ANY)
    assert set(admin.describe_acls(match).result(timeout=TIMEOUT)) == {WRITE_ORD_PREFIX}
    bob = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:bob", None, AclOperation.ANY,
                           AclPermissionType.ANY)
    assert admin.describe_acls(bob).result(timeout=TIMEOUT) == [DENY_BOB]

    # A refused binding fails alone, with Kafka's message.
    bad_cluster = AclBinding(ResourceType.BROKER, "not-the-cluster", ResourcePatternType.LITERAL, "User:alice",
                             "*", AclOperation.ALTER, AclPermissionType.ALLOW)
    results = admin.create_acls([bad_cluster])
    with pytest.raises(ck.KafkaException) as raised:
        results[bad_cluster].result(timeout=TIMEOUT)
    assert raised.value.args[0].code() == ck.KafkaError.INVALID_REQUEST
    assert "kafka-cluster" in raised.value.args[0].str()

    # Survives a restart of the broker on the same data dir.
    broker.stop()
    broker.start()
    admin = _admin(broker.bootstrap)
    assert set(admin.describe_acls(EVERYTHING).result(timeout=TIMEOUT)) == {
        READ_ORDERS, WRITE_ORD_PREFIX, DENY_BOB, GROUP_READ, TXN_WRITE}

    # DeleteAcls: each filter's matches.
    orders = AclBindingFilter(ResourceType.TOPIC, "orders", ResourcePatternType.MATCH, None, None,
                              AclOperation.ANY, AclPermissionType.ANY)
    groups = AclBindingFilter(ResourceType.GROUP, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                              AclPermissionType.ANY)
    deleted = _wait(admin.delete_acls([orders, groups]))
    assert set(deleted[orders]) == {READ_ORDERS, WRITE_ORD_PREFIX, DENY_BOB}
    assert deleted[groups] == [GROUP_READ]
    assert admin.describe_acls(EVERYTHING).result(timeout=TIMEOUT) == [TXN_WRITE]


def test_without_alter_on_the_cluster_the_acl_apis_are_refused(broker_factory):
    broker = broker_factory(extra_args=["--override", f"authorizer.class.name={STANDARD_AUTHORIZER}"])
    admin = _admin(broker.bootstrap)  # User:ANONYMOUS, no ACL: denied (allow.everyone.if.no.acl.found=false)
    for future in admin.create_acls([READ_ORDERS]).values():
        with pytest.raises(ck.KafkaException) as raised:
            future.result(timeout=TIMEOUT)
        assert raised.value.args[0].code() == ck.KafkaError.CLUSTER_AUTHORIZATION_FAILED
    for future in admin.delete_acls([EVERYTHING]).values():
        with pytest.raises(ck.KafkaException) as raised:
            future.result(timeout=TIMEOUT)
        assert raised.value.args[0].code() == ck.KafkaError.CLUSTER_AUTHORIZATION_FAILED
