"""DescribeQuorum (key 55), v0-2: oncelog is one process with no KRaft controller, so it answers
as a one-node Kafka 4.4 (combined mode) describes its one-voter metadata quorum: partition 0 of
``__cluster_metadata``, this node the leader and only voter at epoch 1, no observers, and (v2) the
node's endpoint under the listener name ``CONTROLLER`` — the address a tool such as
``kafka-metadata-quorum.sh --bootstrap-controller`` would reach, which is this broker. oncelog keeps
no metadata log: the high watermark and the voter's log end offset are 0 (Kafka's count its
metadata records), and the voter's last fetch / caught-up times are now.

Anything but exactly one partition, 0 of ``__cluster_metadata``, is answered as Kafka's
KafkaRaftClient does: no error at the top, the (first) partition asked UNKNOWN_TOPIC_OR_PARTITION
"This server does not host this topic-partition." with leader 0, epoch 0, no voters, no nodes.

ACLs (Kafka's KafkaApis.handleDescribeQuorum): DESCRIBE on the cluster, else
CLUSTER_AUTHORIZATION_FAILED at the top.

Version notes:

DescribeQuorum: v0-2

- v0: the oldest served (KIP-595), flexible versions (compact strings and arrays, tagged fields).
- v1: each replica's last fetch and last caught-up timestamps (KIP-836).
- v2: error messages, the voters' nodes and endpoints, each replica's directory id (KIP-853).
"""

from __future__ import annotations

import time

from kio.schema.errors import ErrorCode

from . import _authz
from ._base import OK, build, response_module

API_KEY = 55
MIN_VERSION = 0
MAX_VERSION = 2

METADATA_TOPIC = "__cluster_metadata"
LEADER_EPOCH = 1
NOT_HOSTED = "This server does not host this topic-partition."


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    if not _authz.cluster(ctx, _authz.Op.DESCRIBE):
        return build(m.DescribeQuorumResponse, error_code=_authz.CLUSTER_DENIED, error_message=None, topics=(),
                     nodes=())
    topics = request.topics
    first_topic = topics[0] if topics else None
    first_part = first_topic.partitions[0] if first_topic and first_topic.partitions else None
    valid = (len(topics) == 1 and first_topic.topic_name == METADATA_TOPIC and len(first_topic.partitions) == 1
             and first_part.partition_index == 0)
    if not valid:
        name = first_topic.topic_name if first_topic else METADATA_TOPIC
        index = first_part.partition_index if first_part else 0
        partition = build(m.PartitionData, partition_index=index, error_code=ErrorCode.unknown_topic_or_partition,
                          error_message=NOT_HOSTED, leader_id=0, leader_epoch=0, high_watermark=0,
                          current_voters=(), observers=())
        return build(m.DescribeQuorumResponse, error_code=OK, error_message="", nodes=(),
                     topics=(m.TopicData(topic_name=name, partitions=(partition,)),))
    node = ctx.broker.node_id
    now_ms = int(time.time() * 1000)
    voter = build(m.ReplicaState, replica_id=node, replica_directory_id=None, log_end_offset=0,
                  last_fetch_timestamp=now_ms, last_caught_up_timestamp=now_ms)
    partition = build(m.PartitionData, partition_index=0, error_code=OK, error_message="", leader_id=node,
                      leader_epoch=LEADER_EPOCH, high_watermark=0, current_voters=(voter,), observers=())
    nodes = ()
    if hasattr(m, "Node"):
        host, port = ctx.broker.advertised_for(ctx.listener)
        nodes = (m.Node(node_id=node, listeners=(m.Listener(name="CONTROLLER", host=host, port=port),)),)
    return build(m.DescribeQuorumResponse, error_code=OK, error_message="", nodes=nodes,
                 topics=(m.TopicData(topic_name=METADATA_TOPIC, partitions=(partition,)),))
