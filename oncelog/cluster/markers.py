"""Transaction markers across nodes: the transaction coordinator's ``write_markers`` in a cluster.

The partitions of a transaction are split by leader. This node's get their markers from the
local :class:`~oncelog.txn.markers.MarkerWriter` as on one node; each other leader gets one
WriteTxnMarkers request (v1) over the node link, sent again until it answers every partition
(Kafka's TransactionMarkerChannelManager retries the same way: a leader that is down or
restarting holds the transaction in Prepare* until it is back). ``on_done`` runs once, after
every node: with None when all markers are durable, else the first error that is not
retriable (a storage error), so the coordinator retries as it does on one node.

A partition whose topic was deleted meanwhile (UNKNOWN_TOPIC_OR_PARTITION) needs no marker, as
in :class:`~oncelog.txn.markers.MarkerWriter`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Callable

from kio.schema.errors import ErrorCode

from .. import errors
from ..protocol.requests import request_module
from ..errors import KafkaError
from .link import LinkDown

if TYPE_CHECKING:
    from .node import ClusterNode

log = logging.getLogger("oncelog.cluster")

RETRY_BACKOFF_S = (0.05, 0.1, 0.2, 0.5, 1.0)
_DONE = (ErrorCode.none, ErrorCode.unknown_topic_or_partition)


class ClusterMarkerWriter:
    def __init__(self, local, node: "ClusterNode") -> None:
        self.local = local
        self.node = node
        self._tasks: set[asyncio.Task] = set()

    def write(self, producer_id: int, producer_epoch: int, commit: bool, partitions: set[tuple[str, int]],
              on_done: Callable[[KafkaError | None], None],
              coordinator_epoch: int = 0) -> dict[tuple[str, int], KafkaError | None]:
        placement = self.node.placement
        by_node: dict[int, set[tuple[str, int]]] = {}
        for tp in partitions:
            by_node.setdefault(placement.leader(*tp), set()).add(tp)
        local = by_node.pop(placement.node_id, set())
        waiting = [len(by_node) + 1]
        first_error: list[KafkaError | None] = [None]

        def one_done(error: KafkaError | None) -> None:
            if error is not None and first_error[0] is None:
                first_error[0] = error
            waiting[0] -= 1
            if waiting[0] == 0:
                on_done(first_error[0])

        results: dict[tuple[str, int], KafkaError | None] = {}
        if local:
            results.update(self.local.write(producer_id, producer_epoch, commit, local, one_done, coordinator_epoch))
        else:
            one_done(None)
        for node_id, parts in sorted(by_node.items()):
            results.update({tp: None for tp in parts})
            task = asyncio.get_running_loop().create_task(
                self._send(node_id, producer_id, producer_epoch, commit, parts, coordinator_epoch, one_done))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return results

    async def _send(self, node_id: int, producer_id: int, producer_epoch: int, commit: bool,
                    parts: set[tuple[str, int]], coordinator_epoch: int,
                    done: Callable[[KafkaError | None], None]) -> None:
        m = request_module(27, 1)
        remaining = set(parts)
        attempt = 0
        while remaining:
            by_topic: dict[str, list[int]] = {}
            for topic, p in sorted(remaining):
                by_topic.setdefault(topic, []).append(p)
            request = m.WriteTxnMarkersRequest(markers=(m.WritableTxnMarker(
                producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=commit,
                topics=tuple(m.WritableTxnMarkerTopic(name=t, partition_indexes=tuple(ps))
                             for t, ps in by_topic.items()),
                coordinator_epoch=coordinator_epoch),))
            try:
                answer = await self.node.link(node_id).request(request)
            except asyncio.CancelledError:
                raise  # the node is stopping: a restarted coordinator sends the markers again
            except Exception as exc:  # LinkDown, or anything unforeseen: the transaction must not stay pending
                if attempt % 20 == 0:
                    log.warning("markers of producer %d for node %d: %r; retrying", producer_id, node_id, exc)
            else:
                storage_error = None
                for marker in answer.markers:
                    for topic in marker.topics:
                        for pr in topic.partitions:
                            if pr.error_code in _DONE:
                                remaining.discard((topic.name, pr.partition_index))
                            elif pr.error_code == ErrorCode.kafka_storage_error:
                                storage_error = errors.KafkaStorageError(
                                    f"node {node_id} could not make the marker of producer {producer_id} on "
                                    f"{topic.name}-{pr.partition_index} durable")
                if storage_error is not None:
                    return done(storage_error)
            if remaining:
                await asyncio.sleep(RETRY_BACKOFF_S[min(attempt, len(RETRY_BACKOFF_S) - 1)])
                attempt += 1
        done(None)
