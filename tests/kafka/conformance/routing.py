"""Where a Kafka client sends each request of a conversation, when the broker is a cluster.

Purpose
    The conformance scenarios speak to "the broker"; a real client of a cluster sends each request
    to the node that must answer it. :class:`Router` does what a client does: a partition's
    requests (Produce, Fetch, ListOffsets, DeleteRecords, OffsetForLeaderEpoch, DescribeProducers)
    go to its leader from Metadata, a group's (JoinGroup ... OffsetFetch, DescribeGroups,
    DeleteGroups, ConsumerGroupHeartbeat/Describe, TxnOffsetCommit) to the group coordinator and a
    transactional id's (InitProducerId with an id, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
    DescribeTransactions) to the transaction coordinator, both from FindCoordinator; a config
    request's BROKER resource to the node it names;
    ListGroups and ListTransactions go to every node and the answers are concatenated; the rest
    (Metadata, admin requests the nodes forward to the controller, ApiVersions...) to the
    bootstrap. A request naming partitions or keys of several nodes is split, one request per
    node, and the answers are merged back in the request's order.

Invariants
    - On a one-node broker nothing changes: :attr:`Router.clustered` is false, every request goes
      on the connection the scenario named, and no request is added to the conversation (the
      broker list is read once per bootstrap, on a connection of its own).
    - A request whose partitions or keys all belong to one node is sent unchanged; one whose
      route is unknown (a missing topic, a coordinator lookup that failed) goes to the bootstrap.
    - Lookups (Metadata, FindCoordinator) use a connection of their own, never an identity's, and
      are cached for the conversation; an answer NOT_LEADER_OR_FOLLOWER / NOT_COORDINATOR drops the
      cache, and the request is sent again once, only if the fresh lookup names another node
      (what a client's retry would do; an answer from the right node is the answer).
    - Each identity (:class:`Identity`: the conversation's client, each ``k.connect()``) keeps its
      own connection per node; the identity itself is its bootstrap connection.
"""

from __future__ import annotations

import dataclasses
import threading
import uuid
from typing import Any

from oncelog.client.wire import RawClient

NOT_LEADER_OR_FOLLOWER, NOT_COORDINATOR = 6, 16
GROUP, TRANSACTION = 0, 1

# Partition-keyed requests: api key -> (request topics, request partitions, partition index field
# (None: the partitions are plain ints), response topics, response partitions, response index field).
PARTITIONED = {
    0: ("topic_data", "partition_data", "index", "responses", "partition_responses", "index"),
    1: ("topics", "partitions", "partition", "responses", "partitions", "partition_index"),
    2: ("topics", "partitions", "partition_index", "topics", "partitions", "partition_index"),
    21: ("topics", "partitions", "partition_index", "topics", "partitions", "partition_index"),
    23: ("topics", "partitions", "partition", "topics", "partitions", "partition"),
    61: ("topics", "partition_indexes", None, "topics", "partitions", "partition_index"),
}
# Requests for one group (field group_id), one transactional id (field transactional_id).
ONE_GROUP = {8, 9, 11, 12, 13, 14, 28, 47, 68}  # TxnOffsetCommit (28) goes to the group's coordinator
ONE_TRANSACTION = {22, 24, 25, 26}
# Requests for several keys, at the versions that have the request list: api key -> (key type,
# request list, key field of an entry (None: plain strings), response list, key field of a response
# entry). (AddPartitionsToTxn v4+ is what a leader sends the coordinators, a transaction each.)
MANY_KEYS = {
    24: (TRANSACTION, "transactions", "transactional_id", "results_by_transaction", "transactional_id"),
    9: (GROUP, "groups", "group_id", "groups", "group_id"),  # OffsetFetch v8+ (v0-v7: one group_id)
    15: (GROUP, "groups", None, "groups", "group_id"),
    42: (GROUP, "groups_names", None, "results", "group_id"),
    69: (GROUP, "group_ids", None, "groups", "group_id"),
    65: (TRANSACTION, "transactional_ids", None, "transaction_states", "transactional_id"),
}
# Config requests (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs): a BROKER or BROKER_LOGGER
# resource naming a node goes to that node, the others to the bootstrap: api key -> (request list,
# response list).
BY_BROKER = {32: ("resources", "results"), 33: ("resources", "responses"), 44: ("resources", "responses")}
BROKER_RESOURCES = {4, 8}
# Requests every node answers for its own part: api key -> the response list to concatenate.
EVERY_NODE = {16: "groups", 66: "transaction_states"}

_brokers: dict[str, dict[int, str]] = {}  # bootstrap -> {node id: "host:port"}, read once per bootstrap
_brokers_lock = threading.Lock()


def brokers(bootstrap: str) -> dict[int, str]:
    """The cluster's nodes as Metadata lists them, read once per bootstrap on a connection of its own."""
    with _brokers_lock:
        if bootstrap not in _brokers:
            from .framework import METADATA, mod

            m = mod(METADATA, 12)
            c = RawClient(bootstrap, timeout=30.0)
            try:
                md = c.request(m.MetadataRequest(topics=(), allow_auto_topic_creation=False,
                                                 include_topic_authorized_operations=False))
            finally:
                c.close()
            _brokers[bootstrap] = {int(b.node_id): f"{b.host}:{b.port}" for b in md.brokers}
        return _brokers[bootstrap]


class Identity(RawClient):
    """One client of the conversation (a producer's, a member's): a connection to the bootstrap
    (itself, so raw frames still go there) and, opened when first needed, one to each other node."""

    def __init__(self, bootstrap: str, timeout: float = 30.0) -> None:
        super().__init__(bootstrap, timeout=timeout)
        self.timeout = timeout
        self.nodes: dict[str, RawClient] = {}

    def on(self, address: str | None) -> RawClient:
        """This identity's connection to ``address`` (None: the bootstrap)."""
        if address is None:
            return self
        if address not in self.nodes:
            self.nodes[address] = RawClient(address, timeout=self.timeout)
        return self.nodes[address]

    def close(self) -> None:
        for c in self.nodes.values():
            try:
                c.close()
            except OSError:
                pass
        super().close()


class Router:
    """The routes of one conversation to ``bootstrap`` (module docstring)."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self._nodes: dict[int, str] | None = None
        self._leaders: dict[tuple[str, int], int] = {}
        self._topic_names: dict[uuid.UUID, str] = {}
        self._coordinators: dict[tuple[int, str], int] = {}
        self._lookup: RawClient | None = None
        self._lock = threading.Lock()

    @property
    def nodes(self) -> dict[int, str]:
        if self._nodes is None:
            self._nodes = brokers(self.bootstrap)
        return self._nodes

    @property
    def clustered(self) -> bool:
        return len(self.nodes) > 1

    def close(self) -> None:
        if self._lookup is not None:
            try:
                self._lookup.close()
            except OSError:
                pass

    @property
    def home(self) -> int | None:
        """The bootstrap's node id (where a request of unknown route goes)."""
        return next((n for n, a in self.nodes.items() if a == self.bootstrap), None)

    def address(self, node: int | None) -> str | None:
        """``node``'s address, None for the bootstrap (or an unknown node)."""
        a = self.nodes.get(node) if node is not None else None
        return None if a == self.bootstrap else a

    # -- lookups ----------------------------------------------------------------------------

    def _ask(self, request):
        with self._lock:
            if self._lookup is None:
                self._lookup = RawClient(self.bootstrap, timeout=30.0)
            return self._lookup.request(request)

    def leader(self, topic: str | uuid.UUID, partition: int) -> int | None:
        """The leader of ``topic`` (a name or a topic id) ``partition`` from Metadata; None if unknown."""
        name = self._topic_names.get(topic, topic) if isinstance(topic, uuid.UUID) else topic
        if isinstance(name, str) and (name, partition) in self._leaders:
            return self._leaders[(name, partition)]
        from .framework import METADATA, mod

        m = mod(METADATA, 12)
        entry = (m.MetadataRequestTopic(name=None, topic_id=topic) if isinstance(name, uuid.UUID)
                 else m.MetadataRequestTopic(name=name, topic_id=uuid.UUID(int=0)))
        md = self._ask(m.MetadataRequest(topics=(entry,), allow_auto_topic_creation=False,
                                         include_topic_authorized_operations=False))
        for t in md.topics:
            if int(t.error_code) != 0 or not t.name:
                continue
            if t.topic_id.int:
                self._topic_names[t.topic_id] = t.name
            for p in t.partitions:
                if int(p.error_code) == 0 and p.leader_id >= 0:
                    self._leaders[(t.name, int(p.partition_index))] = int(p.leader_id)
        name = self._topic_names.get(topic, topic) if isinstance(topic, uuid.UUID) else topic
        return self._leaders.get((name, partition)) if isinstance(name, str) else None

    def coordinator(self, key_type: int, key: str | None) -> int | None:
        """The coordinator of group or transactional id ``key`` from FindCoordinator; None if unknown."""
        if not key:
            return None
        if (key_type, key) in self._coordinators:
            return self._coordinators[(key_type, key)]
        from .framework import FIND_COORDINATOR, mod

        m = mod(FIND_COORDINATOR, 4)
        c = self._ask(m.FindCoordinatorRequest(key_type=key_type, coordinator_keys=(key,))).coordinators[0]
        if int(c.error_code) != 0:
            return None
        self._coordinators[(key_type, key)] = int(c.node_id)
        return int(c.node_id)

    def forget(self) -> None:
        """Drop the cached leaders and coordinators (a node answered that it is not the one)."""
        self._leaders.clear()
        self._coordinators.clear()

    # -- sending ----------------------------------------------------------------------------

    def routes(self, request) -> dict[int | None, Any] | str:
        """``{node: the part of request it must answer}`` (node None: the bootstrap), or "every"."""
        key = request.__api_key__
        if key in EVERY_NODE:
            return "every"
        if key in PARTITIONED:
            return self._split_partitions(request, *PARTITIONED[key][:3])
        if key in MANY_KEYS and hasattr(request, MANY_KEYS[key][1]):
            key_type, field, key_field = MANY_KEYS[key][:3]
            return self._split(request, field, lambda e: self.coordinator(
                key_type, e if key_field is None else getattr(e, key_field)))
        if key in BY_BROKER:
            return self._split(request, BY_BROKER[key][0], lambda r: int(r.resource_name) if (
                int(r.resource_type) in BROKER_RESOURCES and r.resource_name.isdigit()
                and int(r.resource_name) in self.nodes) else None)
        if key in ONE_GROUP:  # (and OffsetFetch v0-v7)
            return {self.coordinator(GROUP, request.group_id): request}
        if key in ONE_TRANSACTION:  # (and AddPartitionsToTxn v0-v3)
            tid = getattr(request, "transactional_id", getattr(request, "v3_and_below_transactional_id", None))
            return {self.coordinator(TRANSACTION, tid): request}
        return {None: request}

    def _split(self, request, field: str, node_of) -> dict[int | None, Any]:
        by_node: dict[int | None, list] = {}
        for e in getattr(request, field):
            node = node_of(e)
            by_node.setdefault(self.home if node is None else node, []).append(e)
        if len(by_node) <= 1:
            return {next(iter(by_node), None): request}
        return {n: dataclasses.replace(request, **{field: tuple(es)}) for n, es in by_node.items()}

    def _split_partitions(self, request, topics_field: str, parts_field: str, index_field: str | None):
        def topic_key(t):
            return next(getattr(t, f) for f in ("topic_id", "name", "topic") if hasattr(t, f))

        by_node: dict[int | None, dict[int, list]] = {}
        for ti, t in enumerate(getattr(request, topics_field)):
            for p in getattr(t, parts_field):
                index = p if index_field is None else getattr(p, index_field)
                node = self.leader(topic_key(t), int(index))
                by_node.setdefault(self.home if node is None else node, {}).setdefault(ti, []).append(p)
        if len(by_node) <= 1:
            return {next(iter(by_node), None): request}
        topics = getattr(request, topics_field)
        return {n: dataclasses.replace(request, **{topics_field: tuple(
            dataclasses.replace(topics[ti], **{parts_field: tuple(ps)}) for ti, ps in parts.items())})
            for n, parts in by_node.items()}

    def send(self, ident: Identity, request, *, retry: bool = True):
        """Send ``request`` as ``ident`` to the node(s) that must answer it; the merged answer."""
        routes = self.routes(request)
        if routes == "every":
            answers = [ident.on(self.address(n)).request(request) for n in sorted(self.nodes)]
            return merge_every(answers, EVERY_NODE[request.__api_key__])
        answers = {n: ident.on(self.address(n)).request(part) for n, part in routes.items()}
        if retry and len(answers) == 1 and _says(next(iter(answers.values())), (NOT_LEADER_OR_FOLLOWER, NOT_COORDINATOR)):
            self.forget()
            fresh = self.routes(request)
            if fresh != "every" and list(fresh) != list(routes):
                return self.send(ident, request, retry=False)
        if len(answers) == 1:
            return next(iter(answers.values()))
        return merge(request, routes, answers)

    def send_frame(self, ident: Identity, request) -> None:
        """Send ``request`` expecting no answer (acks=0 Produce) to the leader of its first partition."""
        routes = self.routes(request)
        node = next(iter(routes)) if isinstance(routes, dict) else None
        c = ident.on(self.address(node))
        c.send_frame(c.encode(request))


def _says(value, codes: tuple[int, ...]) -> bool:
    """True if any error_code in the answer ``value`` is one of ``codes``."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return any((f.name == "error_code" and int(getattr(value, f.name)) in codes)
                   or _says(getattr(value, f.name), codes) for f in dataclasses.fields(value))
    if isinstance(value, (list, tuple)):
        return any(_says(v, codes) for v in value)
    return False


def merge_every(answers: list, field: str):
    """Every node's answer to a list request as one: the lists concatenated, the first error."""
    first = answers[0]
    error = next((a.error_code for a in answers if int(a.error_code) != 0), first.error_code)
    return dataclasses.replace(first, error_code=error,
                               **{field: tuple(e for a in answers for e in getattr(a, field))})


def merge(request, routes: dict, answers: dict):
    """The answers to the parts of a split ``request`` as one answer, in the request's order."""
    key = request.__api_key__
    first = next(iter(answers.values()))
    if key in BY_BROKER:
        field, resp_field = BY_BROKER[key]
        pool = [e for a in answers.values() for e in getattr(a, resp_field)]
        out = []
        for r in getattr(request, field):
            hit = next((e for e in pool if int(e.resource_type) == int(r.resource_type)
                        and e.resource_name == r.resource_name), None)
            if hit is not None:
                pool.remove(hit)
                out.append(hit)
        return dataclasses.replace(first, **{resp_field: tuple(out)})
    if key in MANY_KEYS:
        _, field, key_field, resp_field, resp_key = MANY_KEYS[key]
        pool = [e for a in answers.values() for e in getattr(a, resp_field)]
        out = []
        for e in getattr(request, field):
            k = e if key_field is None else getattr(e, key_field)
            hit = next((r for r in pool if getattr(r, resp_key) == k), None)
            if hit is not None:
                pool.remove(hit)
                out.append(hit)
        return dataclasses.replace(first, **{resp_field: tuple(out)})
    topics_field, parts_field, index_field, resp_topics, resp_parts, resp_index = PARTITIONED[key]

    def topic_key(t):
        return next(getattr(t, f) for f in ("topic_id", "name", "topic") if hasattr(t, f))

    pools = {n: [(t, list(getattr(t, resp_parts))) for t in getattr(a, resp_topics)] for n, a in answers.items()}
    out_topics = []
    for t in getattr(request, topics_field):
        entry, parts = None, []
        for p in getattr(t, parts_field):
            index = int(p if index_field is None else getattr(p, index_field))
            for n, part in routes.items():
                for rt, rps in pools[n]:
                    if topic_key(rt) != topic_key(t):
                        continue
                    hit = next((rp for rp in rps if int(getattr(rp, resp_index)) == index), None)
                    if hit is not None:
                        rps.remove(hit)
                        parts.append(hit)
                        entry = entry or rt
                        break
                else:
                    continue
                break
        if entry is not None:
            out_topics.append(dataclasses.replace(entry, **{resp_parts: tuple(parts)}))
    extra = {}
    if hasattr(first, "error_code"):
        extra["error_code"] = next((a.error_code for a in answers.values() if int(a.error_code) != 0),
                                   first.error_code)
    if hasattr(first, "node_endpoints"):
        seen = {}
        for a in answers.values():
            for e in a.node_endpoints:
                seen.setdefault(int(e.node_id), e)
        extra["node_endpoints"] = tuple(seen.values())
    return dataclasses.replace(first, **{resp_topics: tuple(out_topics)}, **extra)
