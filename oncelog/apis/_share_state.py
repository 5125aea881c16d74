"""The share-group offsets APIs' persister calls on a cluster of nodes (:mod:`oncelog.cluster`):
each node keeps the state of the share partitions it leads (docs/share-groups.md), so the
group's coordinator reads another leader's with ReadShareGroupStateSummary (key 87), writes a
new start offset there with InitializeShareGroupState (key 83) and reads its high watermark with
ListOffsets (Kafka's PartitionMetadataClient does the same for the lag), over the nodes' control
link. A node that does not answer makes its partitions' entries COORDINATOR_NOT_AVAILABLE
errors (:class:`~oncelog.errors.CoordinatorNotAvailable`), as a persister call that fails."""

from __future__ import annotations

import asyncio

from .. import errors
from ..protocol.requests import request_module

SUMMARY_VERSION = 1
LIST_OFFSETS_VERSION = 7
LATEST = -1  # ListOffsets' latest timestamp: the high watermark (read_uncommitted)


def remote_leaders(ctx, parts) -> dict:
    """``parts`` [(topic, partition)] another node leads, grouped {node: [(topic, partition)]}."""
    placement = ctx.broker.placement
    by_node: dict = {}
    for topic, index in parts:
        by_node.setdefault(placement.leader(topic.name, index), []).append((topic, index))
    return by_node


def every_remote_partition(ctx) -> dict:
    """Every partition of every non-internal topic another node leads, {node: [(topic, partition)]}:
    what the coordinator asks when it needs to know where a group has state."""
    placement = ctx.broker.placement
    parts = [(t, i) for t in ctx.broker.metadata.topics.values() if not t.internal
             for i in range(t.partitions) if not placement.leads(t.name, i)]
    return remote_leaders(ctx, parts)


def _down(node, exc) -> errors.KafkaError:
    return errors.CoordinatorNotAvailable(f"node {node} did not answer for the share state it keeps: {exc}")


async def _each(by_node, ask) -> dict:
    out: dict = {}
    for part in await asyncio.gather(*(ask(node, parts) for node, parts in sorted(by_node.items()))):
        out.update(part)
    return out


async def read_summaries(ctx, group_id: str, by_node: dict) -> dict:
    """{(topic id, partition): (start offset, delivery-complete count) | None (no state) | KafkaError}."""
    m = request_module(87, SUMMARY_VERSION)

    async def ask(node, parts):
        by_topic: dict = {}
        for topic, index in parts:
            by_topic.setdefault(topic.topic_id, []).append(index)
        try:
            answer = await ctx.broker.cluster.link(node).request(m.ReadShareGroupStateSummaryRequest(
                group_id=group_id, topics=tuple(m.ReadStateSummaryData(topic_id=tid, partitions=tuple(
                    m.PartitionData(partition=i, leader_epoch=0) for i in ps)) for tid, ps in by_topic.items())))
        except Exception as exc:  # noqa: BLE001 - the node is down: its partitions' state is not known
            return {(t.topic_id, i): _down(node, exc) for t, i in parts}
        out = {}
        for r in answer.results:
            for p in r.partitions:
                if p.error_code != 0:
                    out[(r.topic_id, p.partition)] = _down(node, repr(p.error_code))
                elif p.state_epoch < 0:
                    out[(r.topic_id, p.partition)] = None
                else:
                    out[(r.topic_id, p.partition)] = (p.start_offset, p.delivery_complete_count)
        return out
    return await _each(by_node, ask)


async def high_watermarks(ctx, by_node: dict) -> dict:
    """{(topic name, partition): high watermark | KafkaError}, from each leader (ListOffsets latest)."""
    m = request_module(2, LIST_OFFSETS_VERSION)

    async def ask(node, parts):
        by_topic: dict = {}
        for topic, index in parts:
            by_topic.setdefault(topic.name, []).append(index)
        try:
            answer = await ctx.broker.cluster.link(node).request(m.ListOffsetsRequest(
                replica_id=-1, isolation_level=0, topics=tuple(m.ListOffsetsTopic(name=n, partitions=tuple(
                    m.ListOffsetsPartition(partition_index=i, current_leader_epoch=-1, timestamp=LATEST)
                    for i in ps)) for n, ps in by_topic.items())))
        except Exception as exc:  # noqa: BLE001
            return {(t.name, i): _down(node, exc) for t, i in parts}
        return {(t.name, p.partition_index): p.offset if p.error_code == 0 else _down(node, repr(p.error_code))
                for t in answer.topics for p in t.partitions}
    return await _each(by_node, ask)


async def initialize(ctx, group_id: str, by_node: dict) -> dict:
    """InitializeShareGroupState at each leader: ``by_node`` {node: [(topic, partition, start offset)]};
    {(topic id, partition): KafkaError | None}."""
    m = request_module(83, 0)

    async def ask(node, parts):
        by_topic: dict = {}
        for topic, index, start in parts:
            by_topic.setdefault(topic.topic_id, []).append((index, start))
        try:
            answer = await ctx.broker.cluster.link(node).request(m.InitializeShareGroupStateRequest(
                group_id=group_id, topics=tuple(m.InitializeStateData(topic_id=tid, partitions=tuple(
                    m.PartitionData(partition=i, state_epoch=0, start_offset=s) for i, s in ps))
                    for tid, ps in by_topic.items())))
        except Exception as exc:  # noqa: BLE001 - the node is down: not altered there
            return {(t.topic_id, i): _down(node, exc) for t, i, _s in parts}
        return {(r.topic_id, p.partition): None if p.error_code == 0 else _down(node, repr(p.error_code))
                for r in answer.results for p in r.partitions}
    return await _each(by_node, ask)
