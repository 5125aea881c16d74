"""What a principal learns of topics it may not DESCRIBE, in-process with Kafka's
StandardAuthorizer on and ``allow.everyone.if.no.acl.found=false`` (tests/apis/harness.py):
nothing — no name, and no id or partition count through a group — as Kafka 4.4 answers.

- A KIP-848 regex subscription resolves only to topics its member's principal may DESCRIBE
  (Kafka's TopicRegexResolver.filterTopicDescribeAuthorizedTopics): ``.*`` from ``User:alice``,
  with READ on her group and one topic, is assigned that topic only — no other topic, no
  internal one — and ConsumerGroupDescribe shows her nothing else. Describing a group assigned a
  topic the describer may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED with nothing of the group.
- Metadata of all topics (what a classic consumer's pattern subscription resolves against,
  client-side) leaves out what she may not describe.
- By topic id (Metadata v12, DeleteTopics v6), a topic she may not DESCRIBE is
  TOPIC_AUTHORIZATION_FAILED with its id echoed and a null name; an unknown id is
  UNKNOWN_TOPIC_ID (ids are not secret, as in Kafka).
- DescribeCluster answers any principal (Kafka does); only the authorized operations, when
  asked for, need DESCRIBE on the cluster (0 without it).

The same cases against a real broker over SASL, and against Apache Kafka 4.4 with the same ACLs:
tests/authorization_leak_cases.py.
"""

from __future__ import annotations

import datetime
import uuid

from oncelog.security.acls import CLUSTER_NAME, AclBinding, PatternType, PermissionType
from oncelog.security.acls import AclOperation as Op
from oncelog.security.acls import ResourceType as R

from .harness import E, Api, request_module, run_with_authorizer

ADMIN, ALICE, BOB = "User:admin", "User:alice", "User:bob"
MINE, SECRET, VISIBLE = "mine", "secret", "visible"
INT32_MIN = -2147483648
INTERNAL = ("__consumer_offsets", "__transaction_state", "__share_group_state")


def grant(api: Api, principal: str, *acls) -> None:
    errors = api.broker.acls.create([AclBinding(rt, name, PatternType.LITERAL, principal, "*", op,
                                                PermissionType.ALLOW) for rt, name, op in acls])
    assert errors == [None] * len(acls), errors


def topic_id(api: Api, name: str) -> uuid.UUID:
    return api.broker.metadata.topics.get(name).topic_id


async def setup(admin: Api) -> None:
    """Three topics, and both internal ones (an offset commit and a transaction make them)."""
    for name in (MINE, SECRET, VISIBLE):
        await admin.create_topic(name, 2)
    m = request_module(8, 9)
    resp = await admin.call(8, 9, m.OffsetCommitRequest(
        group_id="other", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=(m.OffsetCommitRequestTopic(name=SECRET, partitions=(m.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=0, committed_leader_epoch=-1, committed_metadata=""),)),)))
    assert resp.topics[0].partitions[0].error_code == E.none
    await admin.begin("tx", [(SECRET, 0)])
    assert set(INTERNAL) <= set(admin.broker.metadata.topics)


async def heartbeat(api: Api, group: str, member_id: str, regex: str):
    m = request_module(68, 1)
    return await api.call(68, 1, m.ConsumerGroupHeartbeatRequest(
        group_id=group, member_id=member_id, member_epoch=0, instance_id=None, rack_id=None,
        rebalance_timeout=datetime.timedelta(seconds=30), subscribed_topic_names=None,
        subscribed_topic_regex=regex, server_assignor=None, topic_partitions=()))


async def describe_group(api: Api, group: str):
    m = request_module(69, 1)
    resp = await api.call(69, 1, m.ConsumerGroupDescribeRequest(group_ids=(group,),
                                                                include_authorized_operations=False))
    [described] = resp.groups
    return described


def test_a_regex_subscription_is_assigned_only_topics_its_principal_may_describe(tmp_path):
    async def scenario(api: Api):
        admin, alice = api.as_principal(ADMIN), api.as_principal(ALICE)
        await setup(admin)
        grant(api, ALICE, (R.GROUP, "rx", Op.READ), (R.TOPIC, MINE, Op.READ))
        resp = await heartbeat(alice, "rx", "alice-1", ".*")
        assert resp.error_code == E.none
        assert {tp.topic_id: tp.partitions for tp in resp.assignment.topic_partitions} == {
            topic_id(api, MINE): (0, 1)}
        # What she can learn of her group: her topic only, by name and id.
        described = await describe_group(alice, "rx")
        assert described.error_code == E.none
        [member] = described.members
        for assignment in (member.assignment, member.target_assignment):
            assert [(tp.topic_name, tp.topic_id) for tp in assignment.topic_partitions] == [
                (MINE, topic_id(api, MINE))]
        text = repr(described)
        for name in (SECRET, VISIBLE, *INTERNAL):
            assert name not in text and str(topic_id(api, name)) not in text
        # A super user (may describe everything) resolves ".*" to every topic, internal ones too.
        resp = await heartbeat(admin, "all", "admin-1", ".*")
        assert {tp.topic_id for tp in resp.assignment.topic_partitions} == {
            topic_id(api, n) for n in (MINE, SECRET, VISIBLE, *INTERNAL)}

    run_with_authorizer(tmp_path, scenario, super_users=ADMIN)


def test_describing_a_group_assigned_a_topic_the_describer_may_not_describe_is_refused(tmp_path):
    async def scenario(api: Api):
        admin, bob = api.as_principal(ADMIN), api.as_principal(BOB)
        await setup(admin)
        assert (await heartbeat(admin, "g", "admin-1", f"{MINE}|{SECRET}")).error_code == E.none
        grant(api, BOB, (R.GROUP, "g", Op.DESCRIBE), (R.TOPIC, MINE, Op.DESCRIBE))
        described = await describe_group(bob, "g")
        assert (described.error_code, described.error_message, described.members, described.group_state,
                described.group_epoch, described.assignor_name) == (
            E.topic_authorization_failed,
            "The group has described topic(s) that the client is not authorized to describe.", (), "", 0, "")
        grant(api, BOB, (R.TOPIC, SECRET, Op.DESCRIBE))
        described = await describe_group(bob, "g")
        assert described.error_code == E.none and len(described.members) == 1

    run_with_authorizer(tmp_path, scenario, super_users=ADMIN)


def test_metadata_of_all_topics_leaves_out_what_the_principal_may_not_describe(tmp_path):
    """A classic consumer's pattern subscription (``subscribe(Pattern)``, librdkafka's ``^...``)
    is resolved by the client against this answer."""
    async def scenario(api: Api):
        admin, alice = api.as_principal(ADMIN), api.as_principal(ALICE)
        await setup(admin)
        grant(api, ALICE, (R.TOPIC, MINE, Op.READ))
        for version in (1, 9, 12, 13):
            m = request_module(3, version)
            resp = await alice.call(3, version, m.MetadataRequest(**{
                k: v for k, v in dict(topics=None, allow_auto_topic_creation=False,
                                      include_topic_authorized_operations=False,
                                      include_cluster_authorized_operations=False).items()
                if k in m.MetadataRequest.__dataclass_fields__}))
            assert [(t.name, t.error_code) for t in resp.topics] == [(MINE, E.none)], version

    run_with_authorizer(tmp_path, scenario, super_users=ADMIN)


def test_metadata_by_topic_id_does_not_name_a_topic_the_principal_may_not_describe(tmp_path):
    async def scenario(api: Api):
        admin, alice = api.as_principal(ADMIN), api.as_principal(ALICE)
        await setup(admin)
        grant(api, ALICE, (R.TOPIC, MINE, Op.DESCRIBE))
        unknown = uuid.uuid4()
        for version in (12, 13):
            m = request_module(3, version)
            resp = await alice.call(3, version, m.MetadataRequest(
                topics=tuple(m.MetadataRequestTopic(topic_id=tid, name=None)
                             for tid in (topic_id(api, SECRET), topic_id(api, MINE), unknown)),
                allow_auto_topic_creation=False, include_topic_authorized_operations=False))
            secret, mine, missing = resp.topics
            assert (secret.error_code, secret.name, secret.topic_id, secret.is_internal, secret.partitions) == (
                E.topic_authorization_failed, None, topic_id(api, SECRET), False, ())
            assert (mine.error_code, mine.name, len(mine.partitions)) == (E.none, MINE, 2)
            assert (missing.error_code, missing.name, missing.topic_id) == (E.unknown_topic_id, None, unknown)
            assert SECRET not in repr(resp)

    run_with_authorizer(tmp_path, scenario, super_users=ADMIN)


def test_delete_topics_by_id_does_not_name_a_topic_the_principal_may_not_describe(tmp_path):
    async def scenario(api: Api):
        admin, alice = api.as_principal(ADMIN), api.as_principal(ALICE)
        await setup(admin)
        grant(api, ALICE, (R.TOPIC, VISIBLE, Op.DESCRIBE))
        m = request_module(20, 6)
        unknown = uuid.uuid4()
        resp = await alice.call(20, 6, m.DeleteTopicsRequest(topics=tuple(
            m.DeleteTopicState(name=None, topic_id=tid)
            for tid in (topic_id(api, SECRET), topic_id(api, VISIBLE), unknown)), timeout=datetime.timedelta(seconds=5)))
        secret, visible, missing = resp.responses
        # May not describe it: no name. May describe but not delete it: its name, as Kafka.
        assert (secret.error_code, secret.name, secret.topic_id) == (
            E.topic_authorization_failed, None, topic_id(api, SECRET))
        assert (visible.error_code, visible.name, visible.topic_id) == (
            E.topic_authorization_failed, VISIBLE, topic_id(api, VISIBLE))
        assert (missing.error_code, missing.name, missing.topic_id) == (E.unknown_topic_id, None, unknown)
        assert SECRET not in repr(resp)
        assert {SECRET, VISIBLE} <= set(api.broker.metadata.topics)  # nothing deleted
        # By name the client told the name itself: it is echoed.
        resp = await alice.call(20, 6, m.DeleteTopicsRequest(topics=(m.DeleteTopicState(
            name=SECRET, topic_id=uuid.UUID(int=0)),), timeout=datetime.timedelta(seconds=5)))
        assert [(r.error_code, r.name) for r in resp.responses] == [(E.topic_authorization_failed, SECRET)]

    run_with_authorizer(tmp_path, scenario, super_users=ADMIN)


def test_describe_cluster_answers_any_principal_and_limits_only_the_authorized_operations(tmp_path):
    async def scenario(api: Api):
        alice = api.as_principal(ALICE)
        for version in (0, 1, 2):
            m = request_module(60, version)
            for asked in (False, True):
                resp = await alice.call(60, version, m.DescribeClusterRequest(**{
                    k: v for k, v in dict(include_cluster_authorized_operations=asked, endpoint_type=1,
                                          include_fenced_brokers=False).items()
                    if k in m.DescribeClusterRequest.__dataclass_fields__}))
                assert (resp.error_code, resp.cluster_id, resp.controller_id, len(resp.brokers)) == (
                    E.none, api.broker.metadata.cluster_id, api.broker.node_id, 1), resp
                assert resp.cluster_authorized_operations == (0 if asked else INT32_MIN)
        grant(api, ALICE, (R.CLUSTER, CLUSTER_NAME, Op.DESCRIBE))
        m = request_module(60, 1)
        resp = await alice.call(60, 1, m.DescribeClusterRequest(include_cluster_authorized_operations=True,
                                                                endpoint_type=1))
        assert resp.cluster_authorized_operations == 1 << Op.DESCRIBE

    run_with_authorizer(tmp_path, scenario, super_users=ADMIN)
