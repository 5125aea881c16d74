"""Metadata, ApiVersions and the cluster APIs a one-node Kafka answers (ListConfigResources,
DescribeQuorum, partition reassignments, log dirs), with :mod:`.scenarios_admin`'s invariants
and helpers.
"""

from __future__ import annotations

import datetime
import uuid

from .framework import API_VERSIONS, INCREMENTAL_ALTER_CONFIGS, METADATA, mod
from .scenarios_admin import GROUP, create_partitions, metadata, topic_view
from .scenarios_groups import build, scenario


# ---------------------------------------------------------------------- Metadata


@scenario("admin")
def metadata_unknown_topic(k):
    """Metadata v12 of an unknown topic without auto-creation: UNKNOWN_TOPIC_OR_PARTITION."""
    return topic_view(metadata(k, [k.name("missing")]).topics[0])


@scenario("admin", differs="by design: oncelog creates the topic within the Metadata request, so its first answer "
                           "lists it; Kafka forwards the creation to the KRaft controller and answers "
                           "UNKNOWN_TOPIC_OR_PARTITION until the new metadata reaches the broker")
def metadata_auto_create(k):
    """Metadata v12 of an unknown topic with allow_auto_topic_creation: created (auto.create.topics.enable), 1 partition."""
    name = k.name("auto")
    first = metadata(k, [name], auto_create=True).topics[0]
    k.wait_until(lambda: k._leaders_known(name, 1), "auto-created topic")
    return [first.error_code, topic_view(metadata(k, [name]).topics[0])]


@scenario("admin")
def metadata_auto_create_invalid_name(k):
    """Metadata v12 with allow_auto_topic_creation of an invalid name: INVALID_TOPIC_EXCEPTION, nothing created."""
    return topic_view(metadata(k, [k.name("a b")], auto_create=True).topics[0])


@scenario("admin")
def metadata_v4_auto_create_unknown(k):
    """Metadata v4 with allow_auto_topic_creation false of an unknown topic: UNKNOWN_TOPIC_OR_PARTITION."""
    return topic_view(metadata(k, [k.name("missing")], version=4).topics[0])


@scenario("admin")
def metadata_all_topics(k):
    """Metadata v12 of all topics (null list), this run's topics: names, partitions, not internal."""
    k.create_topic("a", partitions=2)
    k.create_topic("b")
    topics = metadata(k, None).topics
    return sorted((topic_view(t) for t in topics if t.name.startswith(k.prefix)), key=lambda t: t["name"])


@scenario("admin")
def metadata_internal_topics(k):
    """Metadata v12 of __consumer_offsets and __transaction_state: internal."""
    return [{"name": t.name, "error_code": t.error_code, "is_internal": t.is_internal}
            for t in metadata(k, ["__consumer_offsets", "__transaction_state"]).topics]


@scenario("admin")
def metadata_authorized_operations(k):
    """Metadata v12 with include_topic_authorized_operations, no authorizer configured."""
    name = k.create_topic("t")
    m = mod(METADATA, 12)
    resp = k.send(m.MetadataRequest(topics=(m.MetadataRequestTopic(name=name, topic_id=uuid.UUID(int=0)),),
                                    allow_auto_topic_creation=False, include_topic_authorized_operations=True))
    return [(t.name, t.topic_authorized_operations) for t in resp.topics]


@scenario("admin")
def metadata_after_create_partitions(k):
    """Metadata after CreatePartitions 1 -> 2: the new partition's leader epoch and replicas."""
    name = k.create_topic("t")
    create_partitions(k, name, 2)
    k.wait_until(lambda: k._leaders_known(name, 2), "two partitions")
    return topic_view(metadata(k, [name]).topics[0])


@scenario("admin")
def metadata_by_topic_id(k):
    """Metadata v12 naming a topic by id only: Kafka answers INVALID_REQUEST (ids are for v13 DescribeTopicPartitions)."""
    name = k.create_topic("t")
    tid = metadata(k, [name]).topics[0].topic_id
    m = mod(METADATA, 12)
    try:
        resp = k.send(m.MetadataRequest(topics=(m.MetadataRequestTopic(name=None, topic_id=tid),),
                                        allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    except ConnectionError as exc:
        return {"connection": str(exc)}
    return [{"name": t.name, "error_code": t.error_code} for t in resp.topics]


# ---------------------------------------------------------------------- ApiVersions

# The versions the Java client 4.4 sends at most (its own ApiVersions table, equal to the broker's
# of the same release) for the APIs oncelog serves.
JAVA_CLIENT_4_4 = {0: 13, 1: 18, 2: 11, 3: 13, 8: 10, 9: 10, 10: 6, 11: 9, 12: 4, 13: 5, 14: 5, 15: 6, 16: 5, 17: 1,
                   18: 5, 19: 7, 20: 6, 21: 2, 22: 5, 24: 5, 25: 4, 26: 5, 28: 6, 29: 3, 30: 3, 31: 3, 32: 4, 33: 2,
                   35: 5, 36: 2, 37: 3, 42: 3, 43: 2, 44: 1, 46: 0, 47: 0, 50: 0, 51: 0, 60: 2, 61: 0, 65: 0,
                   66: 2, 68: 1, 69: 1, 75: 0}


def _api_versions(k):
    m = mod(API_VERSIONS, 3)
    return k.send(m.ApiVersionsRequest(client_software_name="oncelog-conformance", client_software_version="1"))


@scenario("admin", differs="by design: Kafka also serves replication (OffsetForLeaderEpoch 23), KRaft "
                           "(UpdateFeatures 57, UnregisterBroker 64, Add/RemoveRaftVoter 80/81), delegation tokens "
                           "(38-41), client quotas (48/49), share groups' state APIs (84-85), streams groups' topology description update (93, KIP-1331): docs/broker.md "
                           "'Not implemented' and docs/conformance.md's differences")
def api_versions_keys(k):
    """ApiVersions v3: the API keys each broker serves."""
    return sorted(int(a.api_key) for a in _api_versions(k).api_keys)


@scenario("admin", differs="open: three APIs are served below the Java client 4.4's newest version, which the "
                           "client negotiates down to: ApiVersions v5, TxnOffsetCommit v6, DeleteGroups v3 — kio "
                           "0.6.5, the protocol library (its newest release), has no schemas for them")
def api_versions_client_versions(k):
    """ApiVersions v3: for each API oncelog serves, whether the broker's newest version reaches the Java client 4.4's."""
    served = {int(a.api_key): int(a.max_version) for a in _api_versions(k).api_keys}
    return {str(key): "ok" if served.get(key, -1) >= v else f"v{served.get(key)} < client v{v}"
            for key, v in sorted(JAVA_CLIENT_4_4.items())}


def _api_versions_at(k, version: int):
    m = mod(API_VERSIONS, version)
    fields = {"client_software_name": "apache-kafka-java", "client_software_version": "3.4.0"} if version >= 3 else {}
    return k.send(m.ApiVersionsRequest(**fields))


def _served_keys():
    from oncelog import apis
    return sorted(apis.HANDLERS)


@scenario("admin")
def api_versions_min_versions(k):
    """ApiVersions v0-v4: the lowest version advertised for each API oncelog serves (Produce from v0, KAFKA-18659; JoinGroup from v0)."""
    out = {}
    for v in range(0, 5):
        r = _api_versions_at(k, v)
        got = {int(a.api_key): int(a.min_version) for a in r.api_keys}
        out[f"v{v}"] = [int(r.error_code), {str(key): got.get(key) for key in _served_keys()}]
    return out


def _oncelog_feature_names():
    from oncelog.apis.api_versions import FEATURES
    return [f.name for f in FEATURES]


@scenario("admin")
def api_versions_features_by_version(k):
    """ApiVersions v0-v4: the features oncelog implements, supported and finalized, as each version carries them (no supported feature with minimum 0 below v4, KAFKA-17492)."""
    out = {}
    names = _oncelog_feature_names()
    for v in range(0, 5):
        r = _api_versions_at(k, v)
        supported = {f.name: [int(f.min_version), int(f.max_version)] for f in getattr(r, "supported_features", ())}
        finalized = {f.name: [int(f.min_version_level), int(f.max_version_level)]
                     for f in getattr(r, "finalized_features", ())}
        out[f"v{v}"] = {"supported": {n: supported.get(n) for n in names},
                        "finalized": {n: finalized.get(n) for n in names},
                        "supported_with_min_0": sorted(n for n, (lo, _) in supported.items() if lo == 0),
                        "finalized_at_level_0": sorted(n for n, (lo, _) in finalized.items() if lo == 0),
                        "epoch_known": getattr(r, "finalized_features_epoch", -1) >= 0 if v >= 3 else None}
    # which features with minimum 0 are left out below v4 is compared for those both brokers share
    for v in ("v3", "v4"):
        out[v]["supported_with_min_0"] = [n for n in out[v]["supported_with_min_0"] if n in names]
    return out


@scenario("admin", differs="by design: Kafka also advertises metadata.version, kraft.version, share.version, "
                           "streams.version and eligible.leader.replicas.version (KRaft metadata, share and streams "
                           "groups, ELR): oncelog has no KRaft metadata or ELR, and serves share and streams groups without "
                           "claiming their features, which only Kafka's broker reads (to switch the APIs off) and no "
                           "client or tool of 4.4 does (docs/conformance.md's differences)")
def api_versions_feature_names(k):
    """ApiVersions v4: the names of the supported and finalized features."""
    r = _api_versions_at(k, 4)
    return {"supported": sorted(f.name for f in r.supported_features),
            "finalized": sorted(f.name for f in r.finalized_features)}


@scenario("admin")
def produce_removed_versions(k):
    """Produce v0-v2 (message formats 0 and 1, removed in Kafka 4, KIP-896) although ApiVersions advertises v0: the connection is closed."""
    import struct

    def s(x: str) -> bytes:
        return struct.pack(">h", len(x)) + x.encode()

    out = {}
    for v in (0, 1, 2):
        body = struct.pack(">hi", 1, 5000) + struct.pack(">i", 1) + s(k.name("t")) + struct.pack(">iii", 1, 0, -1)
        c = k.connect()
        try:
            c.send_frame(struct.pack(">hhi", 0, v, 7) + s("conformance") + body)
            out[f"v{v}"] = f"answered {len(c.recv_frame())} bytes"
        except (ConnectionError, OSError) as exc:
            out[f"v{v}"] = "connection closed" if "closed" in str(exc) or isinstance(exc, ConnectionError) else repr(exc)
    return out


@scenario("admin")
def api_versions_error_and_features(k):
    """ApiVersions v3: error NONE and transaction.version finalized at 2 (TV2)."""
    r = _api_versions(k)
    return [r.error_code, [(f.name, f.max_version_level) for f in r.finalized_features if f.name == "transaction.version"]]


@scenario("admin")
def api_versions_unsupported_version(k):
    """ApiVersions at a version the broker does not know (v127): UNSUPPORTED_VERSION, a v0 answer with ApiVersions' own range (from v0, to v3 or more)."""
    from oncelog.client.wire import decode_response, write_request
    import io
    import struct

    m = mod(API_VERSIONS, 3)
    req = m.ApiVersionsRequest(client_software_name="x", client_software_version="1")
    buf = io.BytesIO()
    write_request(buf, req, 7, "conformance")
    raw = bytearray(buf.getvalue())
    struct.pack_into(">h", raw, 2, 127)  # request_api_version
    c = k.client
    c.send_frame(bytes(raw))
    frame = c.recv_frame()
    _, resp = decode_response(frame, request_class_v0())
    return [resp.error_code, [(int(a.api_key), int(a.min_version), int(a.max_version) >= 3)
                              for a in resp.api_keys if int(a.api_key) == API_VERSIONS]]


def request_class_v0():
    from .framework import request_class
    return request_class(API_VERSIONS, 0)


# ---------------------------------------------------------------------- the cluster APIs a one-node Kafka answers

LIST_CONFIG_RESOURCES, DESCRIBE_QUORUM, ALTER_PARTITION_REASSIGNMENTS, LIST_PARTITION_REASSIGNMENTS = 74, 55, 45, 46
ALTER_REPLICA_LOG_DIRS, DESCRIBE_LOG_DIRS = 34, 35


def _node_id(k) -> int:
    return int(k.metadata([]).brokers[0].node_id)


def _set_group_config(k, group: str):
    m = mod(INCREMENTAL_ALTER_CONFIGS, 1)
    r = k.send(m.IncrementalAlterConfigsRequest(validate_only=False, resources=(m.AlterConfigsResource(
        resource_type=GROUP, resource_name=group, configs=(m.AlterableConfig(
            name="consumer.session.timeout.ms", config_operation=0, value="50000"),)),)))
    assert r.responses[0].error_code == 0, r


def _config_resources(k, version: int, types=()):
    """ListConfigResources, this run's topics and groups only (the session's Kafka holds other
    scenarios' too), this broker's node id as "node"."""
    m = mod(LIST_CONFIG_RESOURCES, version)
    r = k.send(m.ListConfigResourcesRequest(resource_types=tuple(types)) if version >= 1 else m.ListConfigResourcesRequest())
    node = str(_node_id(k))
    mine = []
    for res in r.config_resources:
        name, rtype = res.resource_name, int(res.resource_type)
        if rtype in (4, 8):
            mine.append((rtype, "node" if name == node else name))
        elif name.startswith(k.prefix):
            mine.append((rtype, name))
    return [int(r.error_code), sorted(mine)]


@scenario("admin")
def list_config_resources(k):
    """ListConfigResources v0 (client metrics: none) and v1 by type: topics without the internal ones, the broker and its loggers by node id, only groups with configs of their own, a type twice once, an unknown type UNSUPPORTED_VERSION."""
    k.create_topic("t", partitions=2)
    from .scenarios_groups import simple_commit
    simple_commit(k, k.name("plain-group"), k.name("t"), 1)  # a group without configs: not listed
    _set_group_config(k, k.name("configured-group"))
    return {"v0": _config_resources(k, 0),
            **{f"v1 {list(types)}": _config_resources(k, 1, types)
               for types in ((), (2,), (4,), (8,), (16,), (32,), (2, 2), (2, 32), (99,))}}


def _quorum(k, version: int, topic: str = "__cluster_metadata", partition: int = 0):
    m = mod(DESCRIBE_QUORUM, version)
    r = k.send(m.DescribeQuorumRequest(topics=(m.TopicData(topic_name=topic, partitions=(
        m.PartitionData(partition_index=partition),)),)))
    out = {"error_code": r.error_code, "topics": []}
    for t in r.topics:
        for p in t.partitions:
            voters = [v.replica_id for v in p.current_voters]
            out["topics"].append({
                "topic": t.topic_name, "partition": p.partition_index, "error_code": p.error_code,
                "error_message": getattr(p, "error_message", None), "leader_is_the_voter": voters == [p.leader_id],
                "leader_epoch": p.leader_epoch, "voters": len(voters), "observers": len(p.observers),
                "voter_at_high_watermark": [v.log_end_offset == p.high_watermark for v in p.current_voters]})
    if hasattr(r, "nodes"):
        out["nodes"] = [[lst.name for lst in n.listeners] for n in r.nodes]
    return out


@scenario("admin")
def describe_quorum(k):
    """DescribeQuorum v0-v2 of __cluster_metadata-0: a one-voter quorum, the voter its leader at epoch 1, no observers, (v2) the node under listener CONTROLLER."""
    return {f"v{v}": _quorum(k, v) for v in (0, 1, 2)}


@scenario("admin")
def describe_quorum_other_partitions(k):
    """DescribeQuorum of another topic, and of partition 1 of __cluster_metadata: UNKNOWN_TOPIC_OR_PARTITION for the partition asked, no error at the top."""
    return [_quorum(k, 2, "other", 0), _quorum(k, 2, "__cluster_metadata", 1), _quorum(k, 0, "other", 0)]


def _reassign(k, version: int, cases):
    m = mod(ALTER_PARTITION_REASSIGNMENTS, version)
    topics = {}
    for topic, partition, replicas in cases:
        topics.setdefault(topic, []).append(m.ReassignablePartition(partition_index=partition, replicas=replicas))
    r = k.send(build(ALTER_PARTITION_REASSIGNMENTS, version, timeout=datetime.timedelta(seconds=30),
                     allow_replication_factor_change=True, topics=tuple(
                         m.ReassignableTopic(name=t, partitions=tuple(ps)) for t, ps in topics.items())))
    return r


@scenario("admin", cluster_differs="by design: on a two-node cluster node+1 exists and t-0 is led by the other "
          "node; oncelog's partitions keep their one replica on their leader (docs/multicore.md), so the moves "
          "to this node or to node+1 are INVALID_REPLICA_ASSIGNMENT where a one-node Kafka answers NONE and "
          "'no such broker'")
def alter_partition_reassignments(k):
    """AlterPartitionReassignments v0 and v1 on one node: to the replica it has NONE, cancel NO_REASSIGNMENT_IN_PROGRESS, another or a doubled or no broker INVALID_REPLICA_ASSIGNMENT, unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION, each with Kafka's message; then nothing is reassigning."""
    k.create_topic("t", partitions=2)
    node = _node_id(k)
    t = k.name("t")
    cases = [(t, 0, (node,)), (t, 1, None), (t, 0, (node + 1,)), (t, 0, (node, node + 1)), (t, 0, (node, node)),
             (t, 1, ()), (t, 0, (-1,)), (t, 5, (node,)), (k.name("nope"), 0, (node,))]
    answers = {f"v{v}": _reassign(k, v, cases) for v in (0, 1)}
    m = mod(LIST_PARTITION_REASSIGNMENTS, 0)
    listed = k.send(m.ListPartitionReassignmentsRequest(timeout=datetime.timedelta(seconds=30), topics=None))
    return {**answers, "listed": [listed.error_code, [x.name for x in listed.topics if x.name.startswith(k.prefix)]]}


@scenario("admin")
def alter_replica_log_dirs(k):
    """AlterReplicaLogDirs v1/v2: to the broker's own log directory NONE (unknown topic UNKNOWN_TOPIC_OR_PARTITION), to any other path LOG_DIR_NOT_FOUND for every partition."""
    k.create_topic("t", partitions=2)
    dirs = k.send(mod(DESCRIBE_LOG_DIRS, 4).DescribeLogDirsRequest(topics=None))
    here = dirs.results[0].log_dir
    out = {}
    for v in (1, 2):
        m = mod(ALTER_REPLICA_LOG_DIRS, v)
        for label, path in (("own dir", here), ("other dir", "/nonexistent/oncelog-conformance")):
            r = k.send(m.AlterReplicaLogDirsRequest(dirs=(m.AlterReplicaLogDir(path=path, topics=(
                m.AlterReplicaLogDirTopic(name=k.name("t"), partitions=(0, 1, 7)),
                m.AlterReplicaLogDirTopic(name=k.name("nope"), partitions=(0,)))),)))
            # per topic, partitions sorted: Kafka answers in its hash map's order
            out[f"v{v} {label}"] = {t.topic_name[len(k.prefix):]: sorted((p.partition_index, p.error_code) for p in t.partitions)
                                    for t in r.results}
    return out
