"""Security on the cluster ``serve`` starts by default: a 2-node cluster with a SASL_SSL listener
(SCRAM-SHA-512, PLAIN for the administrator, a throwaway CA from trustme) beside an
administrator's PLAINTEXT one, and Kafka's StandardAuthorizer.

SCRAM credentials and ACLs are made with the AdminClient (librdkafka sends them to the controller
Metadata names, node 1; tests/cluster/test_two_nodes.py sends them to node 2, which forwards) and
hold on both nodes once node 2 has followed them — within its follow interval, as a Kafka broker
applies ACLs from the metadata log after the controller answered: a user with ACLs runs
transactions whose partitions and coordinator span both nodes over SASL_SSL and reads them back
read_committed; a user without ACLs is refused at either node's partitions
(TOPIC_AUTHORIZATION_FAILED) and for a transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
a wrong password is refused at node 2's listener; an ACL deleted stops being honoured by node 2.
Every node's SASL_SSL address comes from its registration (port 0: each node's own)."""

from __future__ import annotations

import os
import time

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
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from ..helpers import create_topic, unique
from .conftest import Cluster

trustme = pytest.importorskip("trustme")

pytestmark = pytest.mark.e2e

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret";')
PARTITIONS = 4
TIMEOUT = 20


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    d = tmp_path_factory.mktemp("secure-cluster")
    ca = trustme.CA()
    ca_path = os.path.join(d, "ca.pem")
    ca.cert_pem.write_to_path(ca_path)
    keystore = os.path.join(d, "broker.pem")
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(keystore)
    c = Cluster(str(d / "data"), 2, extra_args=[
        "--override", "listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "--override", f"listener.name.sasl_ssl.plain.sasl.jaas.config={JAAS}",
        "--override", f"ssl.keystore.location={keystore}",
        "--override", f"authorizer.class.name={STANDARD_AUTHORIZER}",
        "--override", "super.users=User:ANONYMOUS;User:admin"]).start()
    c.ca = ca_path
    yield c
    c.kill()


def sasl_ssl_address(cluster: Cluster, node_id: int) -> str:
    _proto, host, port = cluster.registration(node_id)["listeners"]["SASL_SSL"]
    return f"{host}:{port}"


def conf(cluster: Cluster, user: str, password: str, *, node: int = 1, mechanism: str = "SCRAM-SHA-512") -> dict:
    return {"bootstrap.servers": sasl_ssl_address(cluster, node), "security.protocol": "SASL_SSL",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
            "ssl.ca.location": cluster.ca}


def wait_for(what: str, check, timeout: float = TIMEOUT):
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.1)


def produce_error(cfg: dict, topic: str, partition: int) -> ck.KafkaError | None:
    p = ck.Producer({**cfg, "message.timeout.ms": 8000, "enable.idempotence": False, "acks": "all"})
    errors: list = []
    p.produce(topic, value=b"x", partition=partition, on_delivery=lambda err, msg: errors.append(err))
    p.flush(15)
    return errors[0] if errors else ck.KafkaError(ck.KafkaError._MSG_TIMED_OUT)


def test_credentials_and_acls_hold_on_both_nodes_over_sasl_ssl(secure):
    admin = AdminClient({"bootstrap.servers": secure.address(2)})
    for user in ("alice", "bob"):
        for f in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
                user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), f"{user}-pw".encode())]).values():
            f.result(TIMEOUT)
    topic = secure.topic_spanning(PARTITIONS, "sec")
    create_topic(secure.address(2), topic, PARTITIONS)
    txn_id = secure.txn_id_on(2, "tx")  # the transaction coordinator on node 2
    group = unique("g")
    acls = [AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*", op,
                       AclPermissionType.ALLOW) for op in (AclOperation.WRITE, AclOperation.READ, AclOperation.DESCRIBE)]
    acls += [AclBinding(ResourceType.TRANSACTIONAL_ID, txn_id, ResourcePatternType.LITERAL, "User:alice", "*", op,
                        AclPermissionType.ALLOW) for op in (AclOperation.WRITE, AclOperation.DESCRIBE)]
    acls += [AclBinding(ResourceType.GROUP, group, ResourcePatternType.LITERAL, "User:alice", "*",
                        AclOperation.READ, AclPermissionType.ALLOW)]
    for f in admin.create_acls(acls).values():
        f.result(TIMEOUT)

    # Alice's transactions span both nodes' partitions; every node authenticates her (node 1's
    # listener for the bootstrap, node 2's as the coordinator and a leader).
    alice = conf(secure, "alice", "alice-pw")
    p = wait_for("alice's InitProducerId at node 2", lambda: _init(alice, txn_id))
    sent = []
    for t in range(3):
        p.begin_transaction()
        for part in range(PARTITIONS):
            v = b"t%d-p%d" % (t, part)
            p.produce(topic, value=v, partition=part)
            sent.append(v)
        p.commit_transaction(TIMEOUT)
    c = ck.Consumer({**alice, "group.id": group, "isolation.level": "read_committed",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + 60
    while len(got) < len(sent) and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.commit(asynchronous=False)
    c.close()
    assert sorted(got) == sorted(sent)

    # Bob authenticates on both nodes but holds no ACL: refused at each node's partitions.
    bob = conf(secure, "bob", "bob-pw", node=2)
    leaders = {secure.leader(topic, part): part for part in range(PARTITIONS)}
    assert set(leaders) == {1, 2}
    for node, part in sorted(leaders.items()):
        err = produce_error(bob, topic, part)
        assert err is not None and err.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED, (node, err)
    tp = ck.Producer({**bob, "transactional.id": txn_id})
    with pytest.raises(ck.KafkaException) as refused:
        tp.init_transactions(TIMEOUT)
    assert refused.value.args[0].code() == ck.KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

    # A wrong password, at node 2's listener.
    err = produce_error(conf(secure, "alice", "wrong", node=2), topic, 0)
    assert err is not None and err.code() in (ck.KafkaError._AUTHENTICATION, ck.KafkaError._MSG_TIMED_OUT), err

    # Alice's WRITE on the topic deleted: node 2 follows, and refuses at its partition.
    node_2_partition = leaders[2]
    for f in admin.delete_acls([AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice",
                                                 "*", AclOperation.WRITE, AclPermissionType.ALLOW)]).values():
        assert len(f.result(TIMEOUT)) == 1

    def refused_on_node_2():
        err = produce_error(alice, topic, node_2_partition)
        return err is not None and err.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    wait_for("the deleted ACL no longer honoured by node 2", refused_on_node_2)


def _init(cfg: dict, txn_id: str) -> ck.Producer | None:
    """A transactional producer whose InitProducerId succeeded; None while node 2 (the
    coordinator) has not yet followed the new ACL (the producer's error is then fatal: a new one
    tries again)."""
    p = ck.Producer({**cfg, "transactional.id": txn_id, "linger.ms": 2})
    try:
        p.init_transactions(TIMEOUT)
        return p
    except ck.KafkaException as exc:
        if exc.args[0].code() != ck.KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
            raise
        return None
