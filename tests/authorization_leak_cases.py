"""What a principal learns of topics it may not DESCRIBE, as clients see it over
SASL/PLAIN with ACLs on and ``allow.everyone.if.no.acl.found=false``: the cases run against Apache
Kafka 4.4 (the reference, tests/kafka/test_authorization_leaks_kafka.py: a node of its own with
SASL_PLAINTEXT and StandardAuthorizer) and against oncelog (tests/e2e/test_authorization_leaks.py)
with the same users and ACLs, and each must give the same answer on both: the ``EXPECTED_*``
values here. (The ``both_brokers`` machinery runs its tests on the session's shared PLAINTEXT
Kafka without an authorizer, which a test may not reconfigure; hence these two modules, as for
tests/txn_id_expiry_cases.py.)

Users (PLAIN): ``admin`` (a super user) sets everything up; ``alice`` may READ her groups and
one topic (``mine-*``); ``bob`` may only DESCRIBE a group. The other topics (``secret-*``,
``__consumer_offsets``) are not hers to know of.

- A KIP-848 consumer (librdkafka, ``group.protocol=consumer``) of alice's subscribing to ``^.*``
  is assigned ``mine`` only: the broker resolves the regex to what she may DESCRIBE (Kafka's
  TopicRegexResolver). ConsumerGroupDescribe shows her that topic only, and bob, who may describe
  the group but not the topic, is refused the group (TOPIC_AUTHORIZATION_FAILED).
- A classic consumer of hers subscribing to ``^.*`` (resolved client-side from Metadata of all
  topics) is assigned ``mine`` only.
- Metadata v12 and DeleteTopics v6 naming ``secret`` by id: TOPIC_AUTHORIZATION_FAILED, the id
  echoed, the name null; an unknown id: UNKNOWN_TOPIC_ID, name null.
- confluent-kafka's ``AdminClient.describe_cluster`` as alice (no ACL on the cluster) succeeds;
  the authorized operations she is told are none.
"""

from __future__ import annotations

import datetime
import time
import uuid

import confluent_kafka as ck
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kio.schema.errors import ErrorCode

from oncelog.client.wire import RawClient, request_module

from .helpers import unique

PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        + " ".join(f'user_{u}="{p}"' for u, p in PASSWORDS.items()) + ";")
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
# The broker settings both runs share (each adds its listener's jaas config under its own name).
AUTHORIZER_SETTINGS = {"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:admin",
                       "allow.everyone.if.no.acl.found": "false"}
TIMEOUT = 60.0


def client_config(bootstrap: str, user: str, **extra) -> dict:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": PASSWORDS[user], **extra}


def raw(bootstrap: str, user: str) -> RawClient:
    """A protocol client logged in as ``user`` (SaslHandshake v1, SaslAuthenticate v2, PLAIN)."""
    c = RawClient(bootstrap)
    hs = c.request(request_module(17, 1).SaslHandshakeRequest(mechanism="PLAIN"))
    assert hs.error_code == ErrorCode.none, hs
    auth = c.request(request_module(36, 2).SaslAuthenticateRequest(
        auth_bytes=f"\0{user}\0{PASSWORDS[user]}".encode()))
    assert auth.error_code == ErrorCode.none, auth
    return c


class World:
    """What admin set up on one broker: topics ``mine``/``secret`` (unique names), their ids, the
    internal ``__consumer_offsets``, and alice's and bob's ACLs."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.mine, self.secret = unique("mine"), unique("secret")
        self.kip848_group, self.classic_group = unique("g848"), unique("gclassic")
        admin = AdminClient(client_config(bootstrap, "admin"))
        for f in admin.create_topics([NewTopic(self.mine, 2, 1), NewTopic(self.secret, 1, 1)]).values():
            f.result(TIMEOUT)
        # An offset commit makes __consumer_offsets exist (Kafka creates it on first use, and
        # answers NOT_COORDINATOR until its coordinator has loaded it: retried).
        c = ck.Consumer(client_config(bootstrap, "admin", **{"group.id": unique("warmup")}))
        try:
            _wait("a first offset commit", lambda: _commit(c, ck.TopicPartition(self.secret, 0, 0)))
        finally:
            c.close()
        acls = [(ResourceType.GROUP, self.kip848_group, "alice", AclOperation.READ),
                (ResourceType.GROUP, self.classic_group, "alice", AclOperation.READ),
                (ResourceType.TOPIC, self.mine, "alice", AclOperation.READ),
                (ResourceType.GROUP, self.kip848_group, "bob", AclOperation.DESCRIBE)]
        bindings = [AclBinding(rt, name, ResourcePatternType.LITERAL, f"User:{user}", "*", op,
                               AclPermissionType.ALLOW) for rt, name, user, op in acls]
        for f in admin.create_acls(bindings).values():
            f.result(TIMEOUT)
        # Kafka's authorizer learns ACLs from its metadata log: wait until the broker lists them.
        everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                      AclOperation.ANY, AclPermissionType.ANY)
        _wait("the ACLs to be in force",
              lambda: set(bindings) <= set(admin.describe_acls(everything).result(TIMEOUT)))
        self.ids = {}
        c = raw(bootstrap, "admin")
        try:
            m = request_module(3, 12)
            resp = c.request(m.MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                               include_topic_authorized_operations=False))
            self.ids = {t.name: t.topic_id for t in resp.topics}
        finally:
            c.close()
        assert {self.mine, self.secret, "__consumer_offsets"} <= set(self.ids), self.ids


def _commit(c: ck.Consumer, tp: ck.TopicPartition) -> bool:
    """One synchronous commit: done, or False after a retriable refusal (the coordinator is not
    ready yet)."""
    try:
        c.commit(offsets=[tp], asynchronous=False)
        return True
    except ck.KafkaException as exc:
        if exc.args[0].retriable() or exc.args[0].code() in (
                ck.KafkaError.NOT_COORDINATOR, ck.KafkaError.COORDINATOR_NOT_AVAILABLE,
                ck.KafkaError.COORDINATOR_LOAD_IN_PROGRESS):
            return False
        raise


def _wait(what: str, predicate, timeout: float = TIMEOUT):
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def _pattern_consumer(w: World, group: str, protocol: str):
    """Alice's consumer on ``protocol`` subscribed to ``^.*``, polled until its assignment is
    ``mine``'s two partitions (or the deadline), then a few seconds more to see that nothing else
    arrives: (the open consumer, its assignment). The caller closes it."""
    c = ck.Consumer(client_config(w.bootstrap, "alice", **{
        "group.id": group, "group.protocol": protocol, "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 1000}))
    c.subscribe(["^.*"])
    want = frozenset({(w.mine, 0), (w.mine, 1)})
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        c.poll(0.1)
        if frozenset((p.topic, p.partition) for p in c.assignment()) == want:
            break
    settle = time.monotonic() + 3.0
    while time.monotonic() < settle:
        c.poll(0.1)
    return c, frozenset((p.topic, p.partition) for p in c.assignment())


def _mine_or(w: World, assignment: frozenset):
    return "mine's two partitions" if assignment == {(w.mine, 0), (w.mine, 1)} else sorted(assignment)


def _describe_group(bootstrap: str, user: str, group: str):
    c = raw(bootstrap, user)
    try:
        m = request_module(69, 0)
        [g] = c.request(m.ConsumerGroupDescribeRequest(group_ids=(group,),
                                                       include_authorized_operations=False)).groups
        return g
    finally:
        c.close()


# ---------------------------------------------------------------------- the cases

EXPECTED_REGEX = {"assignment": "mine's two partitions", "alice_describes": ["mine"],
                  "bob_describes": (ErrorCode.topic_authorization_failed,
                                    "The group has described topic(s) that the client is not authorized to describe.",
                                    0)}


def check_kip848_regex_subscription(w: World) -> dict:
    """Alice's KIP-848 consumer subscribing to ``^.*``; ConsumerGroupDescribe of its group, while
    it is a member, by alice and by bob."""
    c, assignment = _pattern_consumer(w, w.kip848_group, "consumer")
    try:
        alice = _describe_group(w.bootstrap, "alice", w.kip848_group)
        bob = _describe_group(w.bootstrap, "bob", w.kip848_group)
    finally:
        c.close()
    assert alice.error_code == ErrorCode.none and alice.members, alice
    seen = [(tp.topic_name, tp.topic_id) for mem in alice.members for a in (mem.assignment, mem.target_assignment)
            for tp in a.topic_partitions]
    assert {tid for _, tid in seen} <= {w.ids[w.mine]}, (seen, w.ids)
    return {"assignment": _mine_or(w, assignment),
            "alice_describes": sorted({"mine" if name == w.mine else name for name, _ in seen}),
            "bob_describes": (bob.error_code, bob.error_message, len(bob.members))}


EXPECTED_CLASSIC_PATTERN = "mine's two partitions"


def check_classic_pattern_subscription(w: World):
    """Alice's classic consumer subscribing to ``^.*``: librdkafka matches it against Metadata of
    all topics, which leaves out what she may not describe."""
    c, assignment = _pattern_consumer(w, w.classic_group, "classic")
    c.close()
    return _mine_or(w, assignment)


EXPECTED_METADATA_BY_ID = [
    ("secret", ErrorCode.topic_authorization_failed, None, True, 0),
    ("mine", ErrorCode.none, "mine", True, 2),
    ("unknown", ErrorCode.unknown_topic_id, None, True, 0)]


def check_metadata_by_id(w: World) -> list:
    """Metadata v12 naming ``secret``, ``mine`` and an unknown id by id, as alice: per topic
    (which, error, name, id echoed, partitions)."""
    unknown = uuid.uuid4()
    asked = [("secret", w.ids[w.secret]), ("mine", w.ids[w.mine]), ("unknown", unknown)]
    c = raw(w.bootstrap, "alice")
    try:
        m = request_module(3, 12)
        resp = c.request(m.MetadataRequest(
            topics=tuple(m.MetadataRequestTopic(topic_id=tid, name=None) for _, tid in asked),
            allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    finally:
        c.close()
    by_id = {t.topic_id: t for t in resp.topics}
    assert w.secret not in repr(resp)
    return [(which, by_id[tid].error_code, "mine" if by_id[tid].name == w.mine else by_id[tid].name,
             by_id[tid].topic_id == tid, len(by_id[tid].partitions)) for which, tid in asked]


DENIED_MESSAGE = "Topic authorization failed."  # Kafka 4.4's, by name and by id
EXPECTED_DELETE_BY_ID = [("secret", ErrorCode.topic_authorization_failed, None, True, DENIED_MESSAGE),
                         ("unknown", ErrorCode.unknown_topic_id, None, True, "This server does not host this topic ID."),
                         ("secret by name", ErrorCode.topic_authorization_failed, "secret", False, DENIED_MESSAGE)]


def check_delete_topics_by_id(w: World) -> list:
    """DeleteTopics v6 as alice of ``secret`` and of an unknown id, by id, then of ``secret`` by
    name: per topic (which, error, name, id echoed, message); ``secret`` still exists."""
    unknown = uuid.uuid4()
    asked = [("secret", w.ids[w.secret]), ("unknown", unknown)]
    c = raw(w.bootstrap, "alice")
    try:
        m = request_module(20, 6)
        by_id = c.request(m.DeleteTopicsRequest(topics=tuple(m.DeleteTopicState(name=None, topic_id=tid)
                                                             for _, tid in asked),
                                                timeout=datetime.timedelta(seconds=30)))
        by_name = c.request(m.DeleteTopicsRequest(topics=(m.DeleteTopicState(name=w.secret, topic_id=uuid.UUID(int=0)),),
                                                  timeout=datetime.timedelta(seconds=30)))
    finally:
        c.close()
    results = {r.topic_id: r for r in by_id.responses}
    assert w.secret not in repr(by_id)
    admin = AdminClient(client_config(w.bootstrap, "admin"))
    assert w.secret in admin.list_topics(timeout=TIMEOUT).topics
    [named] = by_name.responses
    return [(which, results[tid].error_code, results[tid].name, results[tid].topic_id == tid,
             results[tid].error_message) for which, tid in asked] + [
        ("secret by name", named.error_code, "secret" if named.name == w.secret else named.name,
         named.topic_id not in (None, uuid.UUID(int=0)), named.error_message)]


EXPECTED_DESCRIBE_CLUSTER = {"nodes": 1, "cluster_id": True, "authorized_operations": [],
                             "raw": [(ErrorCode.none, -2147483648), (ErrorCode.none, 0)]}


def check_describe_cluster(w: World) -> dict:
    """confluent-kafka's AdminClient.describe_cluster as alice (no ACL on the cluster), and the
    raw DescribeCluster v1 without and with authorized operations asked for."""
    admin = AdminClient(client_config(w.bootstrap, "alice"))
    described = admin.describe_cluster(include_authorized_operations=True, request_timeout=30).result(TIMEOUT)
    c = raw(w.bootstrap, "alice")
    try:
        m = request_module(60, 1)
        answers = [c.request(m.DescribeClusterRequest(include_cluster_authorized_operations=asked, endpoint_type=1))
                   for asked in (False, True)]
    finally:
        c.close()
    assert all(a.cluster_id == described.cluster_id and len(a.brokers) == 1 for a in answers), answers
    return {"nodes": len(described.nodes), "cluster_id": bool(described.cluster_id),
            "authorized_operations": list(described.authorized_operations or []),
            "raw": [(a.error_code, a.cluster_authorized_operations) for a in answers]}
