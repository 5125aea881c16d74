"""The authorization matrix: for every API the broker routes
(oncelog.apis.HANDLERS), a request, the ACLs that allow it and the error code Kafka answers
without them. With Kafka's StandardAuthorizer on, ``User:alice`` (no ACLs, not a super user) is
refused with that code and the broker's state is unchanged — no record written, no topic, group,
offset, transaction or producer id created or changed; with the ACLs granted the same call
succeeds. The fixture (a topic with a record, a group with a committed offset, a transaction
open) is set up by ``User:admin``, a super user.

An API module without an entry fails :func:`test_every_api_has_an_entry`. An entry may be
``exempt`` (needs no authorization, as in Kafka: ApiVersions and the SASL requests, which run
before a principal exists). Where Kafka answers without the ACLs but withholds part of the
answer — a list filtered silently, a topic named by id whose name stays null, DescribeCluster's
authorized operations — ``refused`` says what the withheld answer is (the last kinds, added with
tests/apis/test_authorization_leaks.py, which has the rest).
"""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

import pytest
from kio.schema.errors import ErrorCode

from oncelog.apis import HANDLERS
from oncelog.security.acls import CLUSTER_NAME, AclBinding, PatternType, PermissionType
from oncelog.security.acls import AclOperation as Op
from oncelog.security.acls import ResourceType as R

from .harness import E, Api, batch, request_module, run_with_authorizer

ALICE, ADMIN = "User:alice", "User:admin"
TOPIC, GROUP, TXN = "t", "g", "tx"
SECONDS = datetime.timedelta(seconds=5)


def _known(cls, **values):
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in names})


# ---------------------------------------------------------------------- the fixture


@dataclass
class Fixture:
    """What ``User:admin`` set up before the entry's calls."""

    pid: int = -1  # the open transaction of TXN (on TOPIC-0 and GROUP's offsets)
    epoch: int = -1
    member_id: str = ""  # a member of the consumer group "jg" (generation below), the leader
    generation: int = -1
    extra: dict = field(default_factory=dict)


async def _setup(admin: Api) -> Fixture:
    fx = Fixture()
    await admin.create_topic(TOPIC)
    await admin.create_topic("doomed")
    p = await admin.produce(TOPIC, batch([b"a", b"b"]))
    assert p.error_code == E.none
    m = request_module(8, 9)
    resp = await admin.call(8, 9, m.OffsetCommitRequest(
        group_id=GROUP, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=(m.OffsetCommitRequestTopic(name=TOPIC, partitions=(m.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=1, committed_leader_epoch=-1, committed_metadata=""),)),)))
    assert resp.topics[0].partitions[0].error_code == E.none
    fx.pid, fx.epoch = await admin.begin(TXN, [(TOPIC, 0)])
    assert await admin.add_offsets(TXN, fx.pid, fx.epoch, GROUP) == E.none
    return fx


async def _join(api: Api, group: str = "jg"):
    m = request_module(11, 9)

    async def join(member_id):
        return await api.call(11, 9, m.JoinGroupRequest(
            group_id=group, session_timeout=datetime.timedelta(seconds=30),
            rebalance_timeout=datetime.timedelta(seconds=30), member_id=member_id, group_instance_id=None,
            protocol_type="consumer", protocols=(m.JoinGroupRequestProtocol(name="range", metadata=b""),),
            reason=None))

    first = await join("")
    if first.error_code != E.member_id_required:
        return first
    return await join(first.member_id)


async def _member(admin: Api, fx: Fixture) -> None:
    joined = await _join(admin)
    assert joined.error_code == E.none, joined
    fx.member_id, fx.generation = joined.member_id, joined.generation_id
    m = request_module(14, 5)
    synced = await admin.call(14, 5, m.SyncGroupRequest(
        group_id="jg", generation_id=fx.generation, member_id=fx.member_id, group_instance_id=None,
        protocol_type="consumer", protocol_name="range",
        assignments=(m.SyncGroupRequestAssignment(member_id=fx.member_id, assignment=b""),)))
    assert synced.error_code == E.none, synced


def snapshot(api: Api):
    """Everything a refused request must leave as it was."""
    b = api.broker
    topics = {t.name: (t.partitions, dict(t.overrides), tuple((lg.log_start_offset, lg.log_end_offset)
                                                              for lg in b.logs.topics[t.name].logs))
              for t in b.metadata.topics.values()}
    groups = {g.group_id: (g.state, getattr(g, "generation", None), getattr(g, "group_epoch", None),
                           tuple(sorted(g.members)), tuple(sorted(g.offsets.items())))
              for g in b.groups.list_groups()}  # classic groups have generations, consumer groups epochs
    txns = {t.transactional_id: (t.state, t.producer_id, t.producer_epoch, tuple(sorted(t.partitions)))
            for t in (b.txn.describe(x.transactional_id) for x in b.txn.list_transactions().transactions)}
    return topics, groups, txns, b.metadata.producer_ids.next_id, len(b.acls), b.scram_credentials.users()


def codes(resp) -> set[ErrorCode]:
    """Every error code in a response, at any depth."""
    found: set[ErrorCode] = set()

    def walk(x):
        if dataclasses.is_dataclass(x):
            for f in dataclasses.fields(x):
                v = getattr(x, f.name)
                if f.name.endswith("error_code") and v is not None:
                    found.add(ErrorCode(v))
                else:
                    walk(v)
        elif isinstance(x, tuple):
            for item in x:
                walk(item)

    walk(resp)
    return found


# ---------------------------------------------------------------------- the entries


@dataclass
class Entry:
    """How to call one API as alice, what allows it and what refuses it."""

    request: Callable[[Api, Fixture], Awaitable[Any]] | None = None  # the response
    acls: tuple[tuple[R, str, Op], ...] = ()
    denied: ErrorCode | None = None  # every code in the refused response is this or NONE
    # Instead of ``denied``, what the answer without the ACLs must be: for lists filtered
    # silently, is it empty? For answers that withhold part (a name, authorized operations),
    # is it withheld?
    refused: Callable[[Any], bool] | None = None
    setup: Callable[[Api, Fixture], Awaitable[None]] | None = None  # more of the fixture, as admin
    allowed: Callable[[Any], bool] | None = None  # the success check (default: every code NONE)
    exempt: str | None = None  # why the API needs no authorization
    pending: str | None = None  # why it is not enforced yet


def call(key, version, make):
    async def request(api, fx):
        m = request_module(key, version)
        return await api.call(key, version, make(m, fx))
    return request


def _produce(m, fx):
    return m.ProduceRequest(transactional_id=None, acks=-1, timeout=SECONDS, topic_data=(m.TopicProduceData(
        name=TOPIC, partition_data=(m.PartitionProduceData(index=0, records=batch([b"x"])),)),))


def _fetch(m, fx):
    return _known(m.FetchRequest, replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=1 << 20,
                  isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=(), rack_id="",
                  topics=(m.FetchTopic(topic=TOPIC, partitions=(m.FetchPartition(
                      partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                      log_start_offset=-1, partition_max_bytes=1 << 20),)),))


def _list_offsets(m, fx):
    return _known(m.ListOffsetsRequest, replica_id=-1, isolation_level=0, timeout=SECONDS, topics=(
        m.ListOffsetsTopic(name=TOPIC, partitions=(m.ListOffsetsPartition(
            partition_index=0, current_leader_epoch=-1, timestamp=-1),)),))


def _metadata_auto_create(m, fx):
    return m.MetadataRequest(topics=(m.MetadataRequestTopic(topic_id=None, name="auto"),),
                             allow_auto_topic_creation=True, include_topic_authorized_operations=True)


def _offset_commit(m, fx):
    return m.OffsetCommitRequest(group_id=GROUP, generation_id_or_member_epoch=-1, member_id="",
                                 group_instance_id=None, topics=(m.OffsetCommitRequestTopic(
                                     name=TOPIC, partitions=(m.OffsetCommitRequestPartition(
                                         partition_index=0, committed_offset=2, committed_leader_epoch=-1,
                                         committed_metadata=""),)),))


def _offset_fetch(m, fx):
    return m.OffsetFetchRequest(group_id=GROUP, topics=(m.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=(0,)),),
                                require_stable=False)


def _join_group(m, fx):
    return m.JoinGroupRequest(group_id="jg2", session_timeout=datetime.timedelta(seconds=30),
                              rebalance_timeout=datetime.timedelta(seconds=30), member_id="", group_instance_id=None,
                              protocol_type="consumer",
                              protocols=(m.JoinGroupRequestProtocol(name="range", metadata=b""),), reason=None)


def _join_allowed(resp):
    return resp.error_code == E.member_id_required and resp.member_id  # KIP-394: the first step of a join


def _heartbeat(m, fx):
    return m.HeartbeatRequest(group_id="jg", generation_id=fx.generation, member_id=fx.member_id,
                              group_instance_id=None)


def _sync(m, fx):
    return m.SyncGroupRequest(group_id="jg", generation_id=fx.generation, member_id=fx.member_id,
                              group_instance_id=None, protocol_type="consumer", protocol_name="range",
                              assignments=(m.SyncGroupRequestAssignment(member_id=fx.member_id, assignment=b""),))


def _leave(m, fx):
    return m.LeaveGroupRequest(group_id="jg", members=(
        m.MemberIdentity(member_id=fx.member_id, group_instance_id=None, reason=None),))


def _create_topics(m, fx):
    return m.CreateTopicsRequest(topics=(m.CreatableTopic(name="fresh", num_partitions=1, replication_factor=1,
                                                          assignments=(), configs=()),),
                                 timeout=SECONDS, validate_only=False)


def _delete_topics(m, fx):
    return m.DeleteTopicsRequest(topics=(m.DeleteTopicState(name="doomed", topic_id=None),), timeout=SECONDS)


def _delete_records(m, fx):
    return m.DeleteRecordsRequest(topics=(m.DeleteRecordsTopic(name=TOPIC, partitions=(
        m.DeleteRecordsPartition(partition_index=0, offset=1),)),), timeout=SECONDS)


def _init_producer_id(m, fx):
    return m.InitProducerIdRequest(transactional_id="tx2", transaction_timeout=datetime.timedelta(seconds=60),
                                   producer_id=-1, producer_epoch=-1)


def _init_idempotent(m, fx):
    return m.InitProducerIdRequest(transactional_id=None, transaction_timeout=datetime.timedelta(seconds=60),
                                   producer_id=-1, producer_epoch=-1)


async def _open_tx3(admin, fx):
    fx.extra["pid"], fx.extra["epoch"] = await admin.producer("tx3")


def _add_partitions(m, fx):
    return m.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="tx3", v3_and_below_producer_id=fx.extra["pid"],
        v3_and_below_producer_epoch=fx.extra["epoch"],
        v3_and_below_topics=(m.AddPartitionsToTxnTopic(name=TOPIC, partitions=(0,)),))


def _add_offsets(m, fx):
    return m.AddOffsetsToTxnRequest(transactional_id="tx3", producer_id=fx.extra["pid"],
                                    producer_epoch=fx.extra["epoch"], group_id=GROUP)


def _end_txn(m, fx):
    return m.EndTxnRequest(transactional_id=TXN, producer_id=fx.pid, producer_epoch=fx.epoch, committed=False)


def _write_txn_markers(m, fx):
    return m.WriteTxnMarkersRequest(markers=(m.WritableTxnMarker(
        producer_id=fx.pid, producer_epoch=fx.epoch, transaction_result=True, coordinator_epoch=0,
        topics=(m.WritableTxnMarkerTopic(name=TOPIC, partition_indexes=(0,)),)),))


def _txn_offset_commit(m, fx):
    return _known(m.TxnOffsetCommitRequest, transactional_id=TXN, group_id=GROUP, producer_id=fx.pid,
                  producer_epoch=fx.epoch, generation_id=-1, member_id="", group_instance_id=None, topics=(
                      m.TxnOffsetCommitRequestTopic(name=TOPIC, partitions=(m.TxnOffsetCommitRequestPartition(
                          partition_index=0, committed_offset=2, committed_leader_epoch=-1,
                          committed_metadata=""),)),))


def _describe_acls(m, fx):
    return m.DescribeAclsRequest(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                                 principal_filter=None, host_filter=None, operation=1, permission_type=1)


def _create_acls(m, fx):
    return m.CreateAclsRequest(creations=(m.AclCreation(
        resource_type=R.TOPIC, resource_name="other", resource_pattern_type=PatternType.LITERAL,
        principal="User:bob", host="*", operation=Op.READ, permission_type=PermissionType.ALLOW),))


def _delete_acls(m, fx):
    return m.DeleteAclsRequest(filters=(m.DeleteAclsFilter(
        resource_type_filter=R.TOPIC, resource_name_filter=TOPIC, pattern_type_filter=PatternType.LITERAL,
        principal_filter=ALICE, host_filter=None, operation=Op.ANY, permission_type=PermissionType.ANY),))


def _describe_configs(m, fx):
    return m.DescribeConfigsRequest(resources=(m.DescribeConfigsResource(
        resource_type=2, resource_name=TOPIC, configuration_keys=None),), include_synonyms=False,
        include_documentation=False)


def _alter_configs(m, fx):
    return m.AlterConfigsRequest(resources=(m.AlterConfigsResource(resource_type=2, resource_name=TOPIC, configs=(
        m.AlterableConfig(name="retention.ms", value="1000"),)),), validate_only=False)


def _incremental_alter_configs(m, fx):
    return m.IncrementalAlterConfigsRequest(resources=(m.AlterConfigsResource(
        resource_type=2, resource_name=TOPIC, configs=(
            m.AlterableConfig(name="retention.ms", config_operation=0, value="1000"),)),), validate_only=False)


def _describe_log_dirs(m, fx):
    return m.DescribeLogDirsRequest(topics=None)


def _create_partitions(m, fx):
    return m.CreatePartitionsRequest(topics=(m.CreatePartitionsTopic(name=TOPIC, count=2, assignments=None),),
                                     timeout=SECONDS, validate_only=False)


def _delete_groups(m, fx):
    return m.DeleteGroupsRequest(groups_names=(GROUP,))


async def _end_admin_txn(admin, fx):
    """Delete a group only once no transaction holds its offsets: the admin's transaction ends."""
    resp = await admin.end_txn(TXN, fx.pid, fx.epoch, False)
    assert resp.error_code == E.none


def _elect_leaders(m, fx):
    return m.ElectLeadersRequest(election_type=0, topic_partitions=(
        m.TopicPartitions(topic=TOPIC, partitions=(0,)),), timeout=SECONDS)


def _elect_allowed(resp):
    # One replica, already the leader: Kafka answers ELECTION_NOT_NEEDED for the partition.
    return codes(resp) <= {E.none, E.election_not_needed}


def _list_partition_reassignments(m, fx):
    return m.ListPartitionReassignmentsRequest(timeout=SECONDS, topics=None)


def _alter_partition_reassignments(m, fx):
    return _known(m.AlterPartitionReassignmentsRequest, timeout=SECONDS, allow_replication_factor_change=True,
                  topics=(m.ReassignableTopic(name=TOPIC, partitions=(
                      m.ReassignablePartition(partition_index=0, replicas=(1,)),)),))


async def _learn_log_dir(admin, fx):
    resp = await admin.call(35, 4, request_module(35, 4).DescribeLogDirsRequest(topics=None))
    fx.extra["log_dir"] = resp.results[0].log_dir


def _alter_replica_log_dirs(m, fx):
    return m.AlterReplicaLogDirsRequest(dirs=(m.AlterReplicaLogDir(path=fx.extra["log_dir"], topics=(
        m.AlterReplicaLogDirTopic(name=TOPIC, partitions=(0,)),)),))


def _describe_quorum(m, fx):
    return m.DescribeQuorumRequest(topics=(m.TopicData(topic_name="__cluster_metadata", partitions=(
        m.PartitionData(partition_index=0),)),))


def _list_config_resources(m, fx):
    return m.ListConfigResourcesRequest(resource_types=())


def _offset_delete(m, fx):
    return m.OffsetDeleteRequest(group_id=GROUP, topics=(m.OffsetDeleteRequestTopic(
        name=TOPIC, partitions=(m.OffsetDeleteRequestPartition(partition_index=0),)),))


def _describe_scram(m, fx):
    return m.DescribeUserScramCredentialsRequest(users=None)


def _alter_scram(m, fx):
    return m.AlterUserScramCredentialsRequest(deletions=(), upsertions=(m.ScramCredentialUpsertion(
        name="carol", mechanism=1, iterations=4096, salt=b"salt" * 4, salted_password=b"p" * 32),))


def _describe_cluster(m, fx):
    return _known(m.DescribeClusterRequest, include_cluster_authorized_operations=True, endpoint_type=1,
                  include_fenced_brokers=False)


def _describe_producers(m, fx):
    return m.DescribeProducersRequest(topics=(m.TopicRequest(name=TOPIC, partition_indexes=(0,)),))


def _describe_transactions(m, fx):
    return m.DescribeTransactionsRequest(transactional_ids=(TXN,))


def _list_transactions(m, fx):
    return _known(m.ListTransactionsRequest, state_filters=(), producer_id_filters=(), duration_filter=-1)


def _list_groups(m, fx):
    return _known(m.ListGroupsRequest, states_filter=(), types_filter=())


def _describe_topic_partitions(m, fx):
    return m.DescribeTopicPartitionsRequest(topics=(m.TopicRequest(name=TOPIC),), response_partition_limit=100,
                                            cursor=None)


def _find_coordinator(m, fx):
    return m.FindCoordinatorRequest(key_type=0, coordinator_keys=(GROUP,))


def _describe_groups(m, fx):
    return m.DescribeGroupsRequest(groups=(GROUP,), include_authorized_operations=True)


def _consumer_group_heartbeat(m, fx):  # a KIP-848 join
    return m.ConsumerGroupHeartbeatRequest(
        group_id="cg", member_id="m-848", member_epoch=0, instance_id=None, rack_id=None,
        rebalance_timeout=datetime.timedelta(seconds=30), subscribed_topic_names=(TOPIC,),
        subscribed_topic_regex=None, server_assignor=None, topic_partitions=())


async def _alice_reads_cg(admin: Api, fx: Fixture) -> None:
    _grant(admin, [(R.GROUP, "cg", Op.READ)])


async def _admin_consumes_t_in_cg2(admin: Api, fx: Fixture) -> None:
    """A KIP-848 group "cg2" whose one member (admin's) is assigned TOPIC; alice may describe the
    group, not the topic."""
    m = request_module(68, 1)
    resp = await admin.call(68, 1, m.ConsumerGroupHeartbeatRequest(
        group_id="cg2", member_id="m-admin", member_epoch=0, instance_id=None, rack_id=None,
        rebalance_timeout=datetime.timedelta(seconds=30), subscribed_topic_names=(TOPIC,),
        subscribed_topic_regex=None, server_assignor=None, topic_partitions=()))
    assert resp.error_code == E.none and resp.assignment.topic_partitions, resp
    _grant(admin, [(R.GROUP, "cg2", Op.DESCRIBE)])


async def _alice_reads_stg(admin: Api, fx: Fixture) -> None:
    _grant(admin, [(R.GROUP, "stg", Op.READ)])


def _share_group_heartbeat(m, fx):  # a share group join
    return m.ShareGroupHeartbeatRequest(group_id="sg", member_id="m-share", member_epoch=0, rack_id=None,
                                        subscribed_topic_names=(TOPIC,))


def _share_group_describe(m, fx):
    return m.ShareGroupDescribeRequest(group_ids=("sg",), include_authorized_operations=False)


def _streams_group_heartbeat(m, fx):  # a KIP-1071 join with a topology reading TOPIC
    return m.StreamsGroupHeartbeatRequest(
        group_id="stg", member_id="m-streams", member_epoch=0, endpoint_information_epoch=-1, instance_id=None,
        rack_id=None, rebalance_timeout=datetime.timedelta(seconds=30), topology=m.Topology(epoch=0, subtopologies=(
            m.Subtopology(subtopology_id="0", source_topics=(TOPIC,), state_changelog_topics=(),
                          repartition_source_topics=(), copartition_groups=()),)),
        active_tasks=(), standby_tasks=(), warmup_tasks=(), process_id="p1", client_tags=(), task_offsets=(),
        task_end_offsets=())


def _streams_group_describe(m, fx):
    return m.StreamsGroupDescribeRequest(group_ids=("stg",), include_authorized_operations=True)


def _share_fetch(m, fx):  # opens a share session on TOPIC-0 (nothing acquired: the group starts at latest)
    return _known(m.ShareFetchRequest, group_id="sg", member_id="m-share", share_session_epoch=0,
                  max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=1 << 20, max_records=10, batch_size=10,
                  share_acquire_mode=0, is_renew_ack=False, forgotten_topics_data=(), topics=(m.FetchTopic(
                      topic_id=fx.extra["ids"][TOPIC], partitions=(m.FetchPartition(
                          partition_index=0, acknowledgement_batches=()),)),))


def _share_acknowledge(m, fx):  # with no session: SHARE_SESSION_NOT_FOUND once authorized
    return _known(m.ShareAcknowledgeRequest, group_id="sg", member_id="m-share", share_session_epoch=1,
                  is_renew_ack=False, topics=(m.AcknowledgeTopic(topic_id=fx.extra["ids"][TOPIC], partitions=(
                      m.AcknowledgePartition(partition_index=0, acknowledgement_batches=(
                          m.AcknowledgementBatch(first_offset=0, last_offset=0, acknowledge_types=(1,)),)),)),))


def _describe_share_group_offsets(m, fx):  # the group has no state: start offset -1, no error
    return m.DescribeShareGroupOffsetsRequest(groups=(m.DescribeShareGroupOffsetsRequestGroup(
        group_id="sg", topics=(m.DescribeShareGroupOffsetsRequestTopic(topic_name=TOPIC, partitions=(0,)),)),))


def _alter_share_group_offsets(m, fx):  # an empty (new) group: its state made at offset 0
    return m.AlterShareGroupOffsetsRequest(group_id="sg", topics=(m.AlterShareGroupOffsetsRequestTopic(
        topic_name=TOPIC, partitions=(m.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=0),)),))


def _delete_share_group_offsets(m, fx):  # a group nobody joined: GROUP_ID_NOT_FOUND once authorized
    return m.DeleteShareGroupOffsetsRequest(group_id="sg", topics=(
        m.DeleteShareGroupOffsetsRequestTopic(topic_name=TOPIC),))


def _delete_share_group_state(m, fx):  # an inter-broker call: CLUSTER_ACTION
    return m.DeleteShareGroupStateRequest(group_id="sg", topics=(m.DeleteStateData(
        topic_id=fx.extra["ids"][TOPIC], partitions=(m.PartitionData(partition=0),)),))


def _read_share_group_state_summary(m, fx):  # an inter-broker call: CLUSTER_ACTION
    return m.ReadShareGroupStateSummaryRequest(group_id="sg", topics=(m.ReadStateSummaryData(
        topic_id=fx.extra["ids"][TOPIC], partitions=(m.PartitionData(partition=0, leader_epoch=0),)),))


def _initialize_share_group_state(m, fx):  # an inter-broker call: CLUSTER_ACTION
    return m.InitializeShareGroupStateRequest(group_id="sg", topics=(m.InitializeStateData(
        topic_id=fx.extra["ids"][TOPIC], partitions=(m.PartitionData(partition=0, state_epoch=0, start_offset=0),)),))


def _topic_ids(m, fx, names):
    return tuple(m.MetadataRequestTopic(topic_id=fx.extra["ids"][n], name=None) for n in names)


async def _learn_topic_ids(admin: Api, fx: Fixture) -> None:
    fx.extra["ids"] = {t.name: t.topic_id for t in admin.broker.metadata.topics.values()}


async def _learn_ids_alice_describes_doomed(admin: Api, fx: Fixture) -> None:
    await _learn_topic_ids(admin, fx)
    _grant(admin, [(R.TOPIC, "doomed", Op.DESCRIBE)])


def _by_id_refused(resp, name=None):
    """One topic (Metadata) or result (DeleteTopics) by id, refused: TOPIC_AUTHORIZATION_FAILED,
    the id echoed, the name ``name`` (None: withheld)."""
    [t] = getattr(resp, "topics", None) or resp.responses
    return (t.error_code, t.name, t.topic_id != uuid.UUID(int=0)) == (E.topic_authorization_failed, name, True)


def _consumer_group_describe(m, fx):
    return m.ConsumerGroupDescribeRequest(group_ids=("cg",), include_authorized_operations=True)


TOPIC_READ, TOPIC_WRITE, TOPIC_DESCRIBE = (R.TOPIC, TOPIC, Op.READ), (R.TOPIC, TOPIC, Op.WRITE), (
    R.TOPIC, TOPIC, Op.DESCRIBE)
GROUP_READ = (R.GROUP, GROUP, Op.READ)


def cluster(op):
    return (R.CLUSTER, CLUSTER_NAME, op)


MATRIX: dict[int, Entry] = {
    0: Entry(call(0, 9, _produce), (TOPIC_WRITE,), E.topic_authorization_failed),
    1: Entry(call(1, 12, _fetch), (TOPIC_READ,), E.topic_authorization_failed),
    2: Entry(call(2, 7, _list_offsets), (TOPIC_DESCRIBE,), E.topic_authorization_failed),
    3: Entry(call(3, 12, _metadata_auto_create), ((R.TOPIC, "auto", Op.DESCRIBE), (R.TOPIC, "auto", Op.CREATE)),
             E.topic_authorization_failed),
    8: Entry(call(8, 9, _offset_commit), (GROUP_READ, TOPIC_READ), E.group_authorization_failed),
    9: Entry(call(9, 7, _offset_fetch), ((R.GROUP, GROUP, Op.DESCRIBE), TOPIC_DESCRIBE),
             E.group_authorization_failed),
    10: Entry(call(10, 4, _find_coordinator), ((R.GROUP, GROUP, Op.DESCRIBE),), E.group_authorization_failed),
    11: Entry(call(11, 9, _join_group), ((R.GROUP, "jg2", Op.READ),), E.group_authorization_failed,
              allowed=_join_allowed),
    12: Entry(call(12, 4, _heartbeat), ((R.GROUP, "jg", Op.READ),), E.group_authorization_failed, setup=_member),
    13: Entry(call(13, 5, _leave), ((R.GROUP, "jg", Op.READ),), E.group_authorization_failed, setup=_member),
    14: Entry(call(14, 5, _sync), ((R.GROUP, "jg", Op.READ),), E.group_authorization_failed, setup=_member),
    15: Entry(call(15, 5, _describe_groups), ((R.GROUP, GROUP, Op.DESCRIBE),), E.group_authorization_failed),
    16: Entry(call(16, 4, _list_groups), ((R.GROUP, GROUP, Op.DESCRIBE),),
              refused=lambda resp: resp.error_code == E.none and not resp.groups,
              allowed=lambda resp: [g.group_id for g in resp.groups] == [GROUP]),
    17: Entry(exempt="SaslHandshake runs before authentication (Kafka authorizes nothing)"),
    18: Entry(exempt="ApiVersions needs no authorization (Kafka)"),
    19: Entry(call(19, 5, _create_topics), ((R.TOPIC, "fresh", Op.CREATE),), E.topic_authorization_failed),
    20: Entry(call(20, 6, _delete_topics), ((R.TOPIC, "doomed", Op.DELETE),), E.topic_authorization_failed),
    21: Entry(call(21, 2, _delete_records), ((R.TOPIC, TOPIC, Op.DELETE),), E.topic_authorization_failed),
    22: Entry(call(22, 4, _init_producer_id), ((R.TRANSACTIONAL_ID, "tx2", Op.WRITE),),
              E.transactional_id_authorization_failed),
    24: Entry(call(24, 3, _add_partitions), ((R.TRANSACTIONAL_ID, "tx3", Op.WRITE), TOPIC_WRITE),
              E.transactional_id_authorization_failed, setup=_open_tx3),
    25: Entry(call(25, 3, _add_offsets), ((R.TRANSACTIONAL_ID, "tx3", Op.WRITE), GROUP_READ),
              E.transactional_id_authorization_failed, setup=_open_tx3),
    26: Entry(call(26, 3, _end_txn), ((R.TRANSACTIONAL_ID, TXN, Op.WRITE),), E.transactional_id_authorization_failed),
    27: Entry(call(27, 1, _write_txn_markers), (cluster(Op.CLUSTER_ACTION),), E.cluster_authorization_failed),
    28: Entry(call(28, 3, _txn_offset_commit), ((R.TRANSACTIONAL_ID, TXN, Op.WRITE), GROUP_READ, TOPIC_READ),
              E.transactional_id_authorization_failed),
    29: Entry(call(29, 3, _describe_acls), (cluster(Op.DESCRIBE),), E.cluster_authorization_failed),
    30: Entry(call(30, 3, _create_acls), (cluster(Op.ALTER),), E.cluster_authorization_failed),
    31: Entry(call(31, 3, _delete_acls), (cluster(Op.ALTER),), E.cluster_authorization_failed),
    32: Entry(call(32, 4, _describe_configs), ((R.TOPIC, TOPIC, Op.DESCRIBE_CONFIGS),), E.topic_authorization_failed),
    33: Entry(call(33, 2, _alter_configs), ((R.TOPIC, TOPIC, Op.ALTER_CONFIGS),), E.topic_authorization_failed),
    35: Entry(call(35, 4, _describe_log_dirs), (cluster(Op.DESCRIBE),), E.cluster_authorization_failed),
    36: Entry(exempt="SaslAuthenticate runs before authentication (Kafka authorizes nothing)"),
    37: Entry(call(37, 3, _create_partitions), ((R.TOPIC, TOPIC, Op.ALTER),), E.topic_authorization_failed),
    42: Entry(call(42, 2, _delete_groups), ((R.GROUP, GROUP, Op.DELETE),), E.group_authorization_failed,
              setup=_end_admin_txn),
    43: Entry(call(43, 2, _elect_leaders), (cluster(Op.ALTER),), E.cluster_authorization_failed,
              allowed=_elect_allowed),
    44: Entry(call(44, 1, _incremental_alter_configs), ((R.TOPIC, TOPIC, Op.ALTER_CONFIGS),),
              E.topic_authorization_failed),
    34: Entry(call(34, 2, _alter_replica_log_dirs), (cluster(Op.ALTER),), E.cluster_authorization_failed,
              setup=_learn_log_dir),
    45: Entry(call(45, 1, _alter_partition_reassignments), (cluster(Op.ALTER),), E.cluster_authorization_failed),
    46: Entry(call(46, 0, _list_partition_reassignments), (cluster(Op.DESCRIBE),), E.cluster_authorization_failed),
    55: Entry(call(55, 2, _describe_quorum), (cluster(Op.DESCRIBE),), E.cluster_authorization_failed),
    74: Entry(call(74, 1, _list_config_resources), (cluster(Op.DESCRIBE_CONFIGS),), E.cluster_authorization_failed,
              allowed=lambda resp: resp.error_code == E.none and (2, TOPIC) in {
                  (int(r.resource_type), r.resource_name) for r in resp.config_resources}),
    47: Entry(call(47, 0, _offset_delete), ((R.GROUP, GROUP, Op.DELETE), TOPIC_READ), E.group_authorization_failed,
              setup=_end_admin_txn),
    50: Entry(call(50, 0, _describe_scram), (cluster(Op.DESCRIBE),), E.cluster_authorization_failed),
    51: Entry(call(51, 0, _alter_scram), (cluster(Op.ALTER),), E.cluster_authorization_failed),
    # Answered to any principal, as Kafka (clients find the cluster with it); only the authorized
    # operations need DESCRIBE on the cluster: 0 without it.
    60: Entry(call(60, 1, _describe_cluster), (cluster(Op.DESCRIBE),),
              refused=lambda resp: (resp.error_code, len(resp.brokers), resp.cluster_authorized_operations) == (
                  E.none, 1, 0),
              allowed=lambda resp: resp.error_code == E.none and resp.cluster_authorized_operations == 1 << Op.DESCRIBE),
    61: Entry(call(61, 0, _describe_producers), (TOPIC_READ,), E.topic_authorization_failed),
    65: Entry(call(65, 0, _describe_transactions), ((R.TRANSACTIONAL_ID, TXN, Op.DESCRIBE),),
              E.transactional_id_authorization_failed),
    66: Entry(call(66, 1, _list_transactions), ((R.TRANSACTIONAL_ID, TXN, Op.DESCRIBE),),
              refused=lambda resp: resp.error_code == E.none and not resp.transaction_states,
              allowed=lambda resp: [t.transactional_id for t in resp.transaction_states] == [TXN]),
    68: Entry(call(68, 1, _consumer_group_heartbeat), ((R.GROUP, "cg", Op.READ), TOPIC_DESCRIBE),
              E.group_authorization_failed, allowed=lambda resp: resp.error_code == E.none and resp.member_epoch == 2),
    69: Entry(call(69, 1, _consumer_group_describe), ((R.GROUP, "cg", Op.DESCRIBE),), E.group_authorization_failed,
              allowed=lambda resp: resp.groups[0].error_code == E.group_id_not_found),
    75: Entry(call(75, 0, _describe_topic_partitions), (TOPIC_DESCRIBE,), E.topic_authorization_failed),
    76: Entry(call(76, 1, _share_group_heartbeat), ((R.GROUP, "sg", Op.READ), TOPIC_DESCRIBE),
              E.group_authorization_failed, allowed=lambda resp: resp.error_code == E.none and resp.member_epoch == 1),
    77: Entry(call(77, 1, _share_group_describe), ((R.GROUP, "sg", Op.DESCRIBE),), E.group_authorization_failed,
              allowed=lambda resp: resp.groups[0].error_code == E.group_id_not_found),
    86: Entry(call(86, 0, _delete_share_group_state), (cluster(Op.CLUSTER_ACTION),), E.cluster_authorization_failed,
              setup=_learn_topic_ids),
    83: Entry(call(83, 0, _initialize_share_group_state), (cluster(Op.CLUSTER_ACTION),),
              E.cluster_authorization_failed, setup=_learn_topic_ids),
    87: Entry(call(87, 1, _read_share_group_state_summary), (cluster(Op.CLUSTER_ACTION),),
              E.cluster_authorization_failed, setup=_learn_topic_ids),
    88: Entry(call(88, 0, _streams_group_heartbeat), ((R.GROUP, "stg", Op.READ), TOPIC_DESCRIBE),
              E.group_authorization_failed, allowed=lambda resp: resp.error_code == E.none),
    89: Entry(call(89, 0, _streams_group_describe), ((R.GROUP, "stg", Op.DESCRIBE),), E.group_authorization_failed,
              allowed=lambda resp: resp.groups[0].error_code == E.group_id_not_found),
    78: Entry(call(78, 2, _share_fetch), ((R.GROUP, "sg", Op.READ), TOPIC_READ), E.group_authorization_failed,
              setup=_learn_topic_ids),
    90: Entry(call(90, 1, _describe_share_group_offsets), ((R.GROUP, "sg", Op.DESCRIBE), TOPIC_DESCRIBE),
              E.group_authorization_failed),
    91: Entry(call(91, 0, _alter_share_group_offsets), ((R.GROUP, "sg", Op.READ), TOPIC_READ),
              E.group_authorization_failed),
    92: Entry(call(92, 0, _delete_share_group_offsets), ((R.GROUP, "sg", Op.DELETE), TOPIC_READ),
              E.group_authorization_failed, allowed=lambda resp: resp.error_code == E.group_id_not_found),
    79: Entry(call(79, 2, _share_acknowledge), ((R.GROUP, "sg", Op.READ), TOPIC_READ), E.group_authorization_failed,
              setup=_learn_topic_ids, allowed=lambda resp: resp.error_code == E.share_session_not_found),
}

# More cases than one per API: each runs like a MATRIX entry.
EXTRA: dict[str, tuple[int, Entry]] = {
    "idempotent InitProducerId": (22, Entry(call(22, 4, _init_idempotent), (cluster(Op.IDEMPOTENT_WRITE),),
                                            E.cluster_authorization_failed)),
    "idempotent InitProducerId with WRITE on a topic": (22, Entry(call(22, 4, _init_idempotent), (TOPIC_WRITE,),
                                                                  E.cluster_authorization_failed)),
    "ConsumerGroupHeartbeat with READ on the group, subscribing to a topic it may not describe": (68, Entry(
        call(68, 1, _consumer_group_heartbeat), (TOPIC_DESCRIBE,), E.topic_authorization_failed,
        setup=_alice_reads_cg, allowed=lambda resp: resp.error_code == E.none)),
    "StreamsGroupHeartbeat with READ on the group, its topology reading a topic it may not describe": (88, Entry(
        call(88, 0, _streams_group_heartbeat), (TOPIC_DESCRIBE,), E.topic_authorization_failed,
        setup=_alice_reads_stg, allowed=lambda resp: resp.error_code == E.none)),
    # KIP-848's GROUP config resource (type 32): DESCRIBE_CONFIGS / ALTER_CONFIGS on the group, as Kafka 4.x.
    "DescribeConfigs of a GROUP resource": (32, Entry(call(32, 4, lambda m, fx: m.DescribeConfigsRequest(
        resources=(m.DescribeConfigsResource(resource_type=32, resource_name=GROUP, configuration_keys=None),),
        include_synonyms=False, include_documentation=False)), ((R.GROUP, GROUP, Op.DESCRIBE_CONFIGS),),
        E.group_authorization_failed,
        allowed=lambda resp: resp.results[0].error_code == E.none and len(resp.results[0].configs) > 3)),
    "AlterConfigs of a GROUP resource": (33, Entry(call(33, 2, lambda m, fx: m.AlterConfigsRequest(
        resources=(m.AlterConfigsResource(resource_type=32, resource_name=GROUP, configs=(
            m.AlterableConfig(name="consumer.assignment.interval.ms", value="2000"),)),), validate_only=False)),
        ((R.GROUP, GROUP, Op.ALTER_CONFIGS),), E.group_authorization_failed)),
    "IncrementalAlterConfigs of a GROUP resource": (44, Entry(call(44, 1, lambda m, fx: m.IncrementalAlterConfigsRequest(
        resources=(m.AlterConfigsResource(resource_type=32, resource_name=GROUP, configs=(
            m.AlterableConfig(name="consumer.assignment.interval.ms", config_operation=0, value="2000"),)),),
        validate_only=False)), ((R.GROUP, GROUP, Op.ALTER_CONFIGS),), E.group_authorization_failed)),
    "Metadata of an existing topic": (3, Entry(call(3, 12, lambda m, fx: m.MetadataRequest(
        topics=(m.MetadataRequestTopic(topic_id=None, name=TOPIC),), allow_auto_topic_creation=False,
        include_topic_authorized_operations=False)), (TOPIC_DESCRIBE,), E.topic_authorization_failed)),
    "Metadata of all topics": (3, Entry(call(3, 12, lambda m, fx: m.MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)),
        (TOPIC_DESCRIBE,), refused=lambda resp: resp.topics == (),
        allowed=lambda resp: [t.name for t in resp.topics] == [TOPIC])),
    # By id, a topic the principal may not DESCRIBE is not named (Kafka: null, id echoed).
    "Metadata of a topic by id": (3, Entry(call(3, 12, lambda m, fx: m.MetadataRequest(
        topics=_topic_ids(m, fx, [TOPIC]), allow_auto_topic_creation=False,
        include_topic_authorized_operations=False)), (TOPIC_DESCRIBE,), refused=_by_id_refused,
        setup=_learn_topic_ids, allowed=lambda resp: [(t.error_code, t.name) for t in resp.topics] == [
            (E.none, TOPIC)])),
    "DeleteTopics of a topic by id": (20, Entry(call(20, 6, lambda m, fx: m.DeleteTopicsRequest(
        topics=(m.DeleteTopicState(name=None, topic_id=fx.extra["ids"]["doomed"]),), timeout=SECONDS)),
        ((R.TOPIC, "doomed", Op.DELETE),), refused=_by_id_refused, setup=_learn_topic_ids)),
    "DeleteTopics by id of a topic the principal may describe, not delete": (20, Entry(
        call(20, 6, lambda m, fx: m.DeleteTopicsRequest(
            topics=(m.DeleteTopicState(name=None, topic_id=fx.extra["ids"]["doomed"]),), timeout=SECONDS)),
        ((R.TOPIC, "doomed", Op.DELETE),), refused=lambda resp: _by_id_refused(resp, "doomed"),
        setup=_learn_ids_alice_describes_doomed)),
    # A group's assignments name topics; describing it needs DESCRIBE on them too.
    "ConsumerGroupDescribe of a group assigned a topic the principal may not describe": (69, Entry(
        call(69, 1, lambda m, fx: m.ConsumerGroupDescribeRequest(group_ids=("cg2",),
                                                                  include_authorized_operations=False)),
        (TOPIC_DESCRIBE,), E.topic_authorization_failed, setup=_admin_consumes_t_in_cg2,
        allowed=lambda resp: resp.groups[0].error_code == E.none and len(resp.groups[0].members) == 1)),
}


def test_every_api_has_an_entry():
    missing = sorted(f"{key} ({module.__name__.rpartition('.')[2]})" for key, module in HANDLERS.items()
                     if key not in MATRIX)
    assert not missing, f"APIs without an entry in the authorization matrix: {missing}"
    assert set(MATRIX) <= set(HANDLERS), sorted(set(MATRIX) - set(HANDLERS))


def _grant(api: Api, acls) -> None:
    errors = api.broker.acls.create([AclBinding(rt, name, PatternType.LITERAL, ALICE, "*", op, PermissionType.ALLOW)
                                     for rt, name, op in acls])
    assert errors == [None] * len(acls), errors


def _check(tmp_path, entry: Entry) -> None:
    if entry.exempt:
        pytest.skip(f"exempt: {entry.exempt}")
    if entry.pending:
        pytest.skip(f"pending: {entry.pending}")

    async def scenario(api: Api):
        admin, alice = api.as_principal(ADMIN), api.as_principal(ALICE)
        fx = await _setup(admin)
        if entry.setup:
            await entry.setup(admin, fx)
        before = snapshot(api)
        # Refused without the ACLs, nothing changed.
        resp = await entry.request(alice, fx)
        if entry.refused is not None:
            assert entry.refused(resp), resp
        else:
            found = codes(resp)
            assert entry.denied in found and found <= {entry.denied, E.none}, (found, resp)
        assert snapshot(api) == before
        # Allowed with them.
        _grant(api, entry.acls)
        resp = await entry.request(alice, fx)
        if entry.allowed is not None:
            assert entry.allowed(resp), resp
        else:
            assert codes(resp) <= {E.none}, (codes(resp), resp)

    run_with_authorizer(tmp_path, scenario, super_users=ADMIN)


@pytest.mark.parametrize("key", sorted(MATRIX), ids=lambda k: f"{k}-{HANDLERS[k].__name__.rpartition('.')[2]}")
def test_refused_without_the_acl_and_allowed_with_it(tmp_path, key):
    _check(tmp_path, MATRIX[key])


@pytest.mark.parametrize("case", sorted(EXTRA))
def test_more_cases(tmp_path, case):
    _check(tmp_path, EXTRA[case][1])


def test_without_an_authorizer_alice_may_do_anything(tmp_path):
    """The default (no ``authorizer.class.name``): nothing is checked, as Kafka with no authorizer."""
    from .harness import run

    async def scenario(api: Api):
        alice = api.as_principal(ALICE)
        await alice.create_topic(TOPIC)
        assert (await alice.produce(TOPIC, batch([b"x"]))).error_code == E.none
        assert (await alice.fetch(TOPIC)).error_code == E.none

    run(tmp_path, scenario)


def test_a_transactional_produce_needs_write_on_the_transactional_id(tmp_path):
    async def scenario(api: Api):
        admin, alice = api.as_principal(ADMIN), api.as_principal(ALICE)
        fx = await _setup(admin)
        _grant(api, [TOPIC_WRITE])
        end = api.log_end(TOPIC)
        records = batch([b"x"], pid=fx.pid, epoch=fx.epoch, seq=0, transactional=True)
        p = await alice.produce(TOPIC, records, transactional_id=TXN)
        assert p.error_code == E.transactional_id_authorization_failed
        assert api.log_end(TOPIC) == end
        _grant(api, [(R.TRANSACTIONAL_ID, TXN, Op.WRITE)])
        assert (await alice.produce(TOPIC, records, transactional_id=TXN)).error_code == E.none

    run_with_authorizer(tmp_path, scenario, super_users=ADMIN)


def test_an_idempotent_produce_needs_idempotent_write_or_write_on_some_topic(tmp_path):
    async def scenario(api: Api):
        admin, alice = api.as_principal(ADMIN), api.as_principal(ALICE)
        await _setup(admin)
        pid, epoch = await admin.producer()
        records = batch([b"x"], pid=pid, epoch=epoch, seq=0)
        end = api.log_end(TOPIC)
        # WRITE on the topic is also "WRITE on some topic" (KIP-679), so a DENY elsewhere is not
        # needed to show the cluster check: without any ACL it is CLUSTER_AUTHORIZATION_FAILED.
        p = await alice.produce(TOPIC, records)
        assert p.error_code == E.cluster_authorization_failed
        assert api.log_end(TOPIC) == end
        _grant(api, [TOPIC_WRITE])
        assert (await alice.produce(TOPIC, records)).error_code == E.none

    run_with_authorizer(tmp_path, scenario, super_users=ADMIN)


def test_authorized_operations_come_from_the_acls(tmp_path):
    async def scenario(api: Api):
        admin, alice = api.as_principal(ADMIN), api.as_principal(ALICE)
        await _setup(admin)
        _grant(api, [TOPIC_READ])
        m = request_module(3, 12)
        resp = await alice.call(3, 12, m.MetadataRequest(topics=(m.MetadataRequestTopic(topic_id=None, name=TOPIC),),
                                                          allow_auto_topic_creation=False,
                                                          include_topic_authorized_operations=True))
        # READ implies DESCRIBE (Kafka's implied operations).
        assert resp.topics[0].topic_authorized_operations == (1 << Op.READ) | (1 << Op.DESCRIBE)

    run_with_authorizer(tmp_path, scenario, super_users=ADMIN)
