"""What every API module shares: the request context and response-building helpers.

Each API module declares ``API_KEY``, ``MIN_VERSION``, ``MAX_VERSION`` (the range ApiVersions
advertises and dispatch accepts) and ``handle(ctx, request)``, which returns the response, an
awaitable of it, or None for requests that get no response (Produce with acks=0).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Protocol

from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from .. import errors

if TYPE_CHECKING:
    from ..cluster import Placement
    from ..cluster.node import ClusterNode
    from ..config.settings import BrokerConfig
    from ..errors import KafkaError
    from ..groups.coordinator import GroupCoordinator
    from ..groups.share_coordinator import ShareCoordinator
    from ..groups.store import OffsetsTopic
    from ..partition import PartitionManager
    from ..security.acls import AclStore
    from ..security.scram import ScramCredentialStore
    from ..metadata import Metadata
    from ..storage.log_manager import LogManager
    from ..txn.coordinator import TransactionCoordinator
    from ..txn.markers import MarkerWriter

NO_THROTTLE = datetime.timedelta(0)
OK = ErrorCode.none


class BrokerView(Protocol):
    """What a handler may touch of the broker: this and nothing else (``Broker`` implements
    it; tests/apis/test_boundary.py checks every handler's ``broker.<name>`` against it).
    Handlers append and read through ``partitions`` (the :class:`~oncelog.partition.Partition`
    owns producer state, markers and the last stable offset), ask the coordinators through
    their methods, and read topics, configs and the other cluster metadata from ``metadata``
    (``logs``, the storage, only DescribeLogDirs reads)."""

    config: "BrokerConfig"
    node_id: int
    clock: Callable[[], int]  # wall-clock milliseconds, injected (tests drive it)
    advertised: tuple[str, int]
    coordinator_key_types: set[int]  # FindCoordinator key types served (0 groups, 1 transactions)
    metadata: "Metadata"  # topics, live configs, group configs, producer-id blocks
    logs: "LogManager"  # the logs themselves (DescribeLogDirs); appends go through partitions
    partitions: "PartitionManager"
    groups: "GroupCoordinator"
    share: "ShareCoordinator"  # share groups (KIP-932): membership, sessions, share partitions
    offsets_topic: "OffsetsTopic"
    txn: "TransactionCoordinator"
    markers: "MarkerWriter"
    acls: "AclStore"  # the ACLs and the authorizer (authorize() is True when none is configured)
    scram_credentials: "ScramCredentialStore"  # KIP-554 SCRAM credentials, persisted in the data dir
    placement: "Placement"  # which node leads what (one node: this one, everything)
    cluster: "ClusterNode | None"  # a cluster's other nodes (oncelog.cluster); None on one node
    metrics: "BrokerMetrics | None"  # what handlers count (oncelog.metrics); None without an endpoint

    def partition_exists(self, topic: str, partition: int) -> bool: ...

    def advertised_for(self, listener: str) -> tuple[str, int]: ...

    def sasl_for(self, listener: str) -> Any: ...  # the listener's SaslServerMechanisms

    def offset_fetch_error(self, group_id: str, topic: str, partition: int) -> "KafkaError | None": ...

    def describe_config(self) -> dict[str, str | None]: ...

    def coordinator_node(self, key_type: int, key: str) -> int: ...  # the node coordinating a group (0) / txn id (1)

    def coordinator_error(self, key_type: int, key: str) -> "KafkaError | None": ...  # NOT_COORDINATOR elsewhere


@dataclass(frozen=True, slots=True)
class RequestContext:
    broker: BrokerView
    api_version: int
    correlation_id: int
    client_id: str | None
    peer: str
    # The connection's listener (its name in ``listeners``) and authenticated principal
    # (``User:ANONYMOUS`` on PLAINTEXT, as Kafka; the certificate's DN under mTLS).
    listener: str = "PLAINTEXT"
    principal: str = "User:ANONYMOUS"
    # The connection's security state (oncelog.security.session.Session), which the SASL
    # handlers move; None for in-process callers.
    session: Any = None


@functools.cache
def response_module(api_key: int, version: int):
    return load_payload_module(api_key, version, EntityType.response)


@functools.cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


def build(cls: type, **values: Any):
    """Construct ``cls`` from a superset of its fields: handlers describe a response once
    and each version's class keeps the fields it has."""
    names = _field_names(cls)
    return cls(**{k: v for k, v in values.items() if k in names})


def reply_later(make_response: Callable[..., Any]) -> tuple[asyncio.Future, Callable[..., None]]:
    """The bridge from a coordinator's callback to the server: a future for ``handle`` to
    return, and the ``respond(*answer)`` callback to hand the coordinator. The first call
    builds the response with ``make_response(*answer)`` and resolves the future; later calls
    are ignored (a coordinator may answer a request that was already answered, e.g. a join
    superseded by a rebalance timeout)."""
    fut = asyncio.get_running_loop().create_future()

    def respond(*answer) -> None:
        if not fut.done():
            fut.set_result(make_response(*answer))

    return fut, respond


# Every partition has had one leader, this broker, since it was created: its leader epoch is 0
# (as Metadata and ListOffsets answer it).
LEADER_EPOCH = 0
NO_LEADER_EPOCH = -1


def check_leader_epoch(topic: str, partition: int, current_leader_epoch: int) -> None:
    """A request's ``current_leader_epoch`` (-1: none given) against the leader's, as Kafka's
    Partition.checkCurrentLeaderEpoch: older is FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH."""
    if current_leader_epoch == NO_LEADER_EPOCH or current_leader_epoch == LEADER_EPOCH:
        return
    if current_leader_epoch < LEADER_EPOCH:
        raise errors.FencedLeaderEpoch(f"{topic}-{partition}: leader epoch {current_leader_epoch} is older than "
                                       f"the current leader epoch {LEADER_EPOCH}")
    raise errors.UnknownLeaderEpoch(f"{topic}-{partition}: leader epoch {current_leader_epoch} is newer than the "
                                    f"current leader epoch {LEADER_EPOCH}")


def last_wins(request, topics_field: str, partitions_field: str, topic_key, partition_key):
    """``request`` with each partition named once: where a request names a partition twice,
    Kafka reads it into a map, so the last entry counts, in the place of the first (a
    LinkedHashMap). Returns ``request`` itself when nothing repeats (the usual case)."""
    seen: dict = {}
    count = 0
    for t in getattr(request, topics_field):
        for p in getattr(t, partitions_field):
            seen[(topic_key(t), partition_key(p))] = (t, p)
            count += 1
    if len(seen) == count:
        return request
    grouped: dict = {}
    for (key, _), (t, p) in seen.items():
        grouped.setdefault(key, (t, []))[1].append(p)
    return dataclasses.replace(request, **{topics_field: tuple(
        dataclasses.replace(t, **{partitions_field: tuple(ps)}) for t, ps in grouped.values())})


class CloseConnection:
    """A handler's answer meaning: no response, and close the connection once the answers to the
    requests before it are written (Kafka's requestChannel.closeConnection: an acks=0 Produce
    with an error, whose producer learns of it only by reconnecting and refreshing metadata)."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


class Applied:
    """A response still to come for a request whose effects are already applied: all that is
    left is waiting (an acks=all Produce waiting for its fsync). The server lets the next
    Produce on the same connection start during that wait, so pipelined produces share one
    group-commit fsync; any other request waits for it (see :mod:`oncelog.server`)."""

    __slots__ = ("awaitable",)

    def __init__(self, awaitable) -> None:
        self.awaitable = awaitable


class EncodeAside:
    """A response to encode off the event loop (a thread), for an answer with very many entries
    (ListTransactions lists every id a broker holds: a million entries took ~2 s to encode, a
    pause of every connection). The thread still takes turns at the GIL with the loop, which
    keeps serving requests meanwhile."""

    __slots__ = ("response",)

    def __init__(self, response) -> None:
        self.response = response
