"""Differential conformance: one short conversation held with Apache Kafka and with oncelog, the
answers normalised and compared field by field.

Model
    A *scenario* is a function ``fn(k: Conversation) -> answer`` registered with
    :func:`scenario`. It talks to one broker through ``k`` (the project's protocol client,
    :class:`oncelog.client.wire.RawClient`, kio's request classes at versions the scenario names)
    and returns what is to be compared: whole kio responses, chosen fields, lists of them.
    The runner (:func:`run_both`) calls it once against Apache Kafka and once against oncelog,
    each time with a fresh :class:`Conversation`, and normalises both answers with
    :func:`normalise` before comparing them (:func:`differences`).

Invariants
    - A scenario never depends on the other broker's run: its topics, transactional ids and
      group ids come from :meth:`Conversation.name`, unique per run; their prefix is stripped in
      answers, so ``k.name("t")`` reads ``"t"`` on both sides.
    - Answers keep every field that carries meaning (error codes, messages, offsets, epochs,
      states, record contents) and lose only what differs between any two clusters by nature
      (:data:`DROPPED`, :data:`NODE_FIELDS`, timestamps, addresses), or is an opaque id: opaque
      ids (producer ids, member ids, topic ids, any UUID) become ``"pid#1"``, ``"member#1"``,
      ``"uuid#1"``... in order of first appearance, so equalities between them still compare.
    - Records are compared decoded (offset, key, value, headers, producer id and epoch, base
      sequence, transactional, control type), never as bytes: batch timestamps and CRCs differ.
    - A scenario that waits waits for a state (:meth:`Conversation.wait_until`), never for a
      time: Kafka writes transaction markers after answering EndTxn, so a read right after may
      differ from one a moment later on either broker.
    - One rule compares loosely, by design: where Kafka answers ``error_message: null``, oncelog
      may name what was wrong (the project's rule "bad input gets a clear error"); where Kafka
      sends a message, the two are compared exactly.
    - A conversation with a cluster sends each request where a Kafka client sends it
      (routing.py); with one node, everything goes to the one connection it names. Compared with
      a one-node Kafka, a cluster's answers differ by nature only in their lists of brokers, which
      :func:`one_broker_view` collapses (that comparison only: the one-node one keeps them whole).
    - A difference is either fixed in oncelog or declared beside its scenario
      (``differs="by design: ..."``; ``cluster_differs=`` for one the cluster alone shows) with the
      reason; the test of a scenario fails when an undeclared difference appears, and when a
      declared one is gone (the declaration is stale).
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import functools
import itertools
import json
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from kio.index import load_payload_module
from kio.static.constants import EntityType

from oncelog.client.wire import RawClient
from oncelog.protocol import records as rb

from .routing import Identity, Router

# API keys, as Kafka numbers them.
PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 8, 9, 10
JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, DESCRIBE_GROUPS, LIST_GROUPS = 11, 12, 13, 14, 15, 16
API_VERSIONS, CREATE_TOPICS, DELETE_TOPICS, DELETE_RECORDS, INIT_PRODUCER_ID = 18, 19, 20, 21, 22
OFFSET_FOR_LEADER_EPOCH, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN = 23, 24, 25, 26
TXN_OFFSET_COMMIT, DESCRIBE_CONFIGS, ALTER_CONFIGS = 28, 32, 33
CREATE_PARTITIONS, DELETE_GROUPS, INCREMENTAL_ALTER_CONFIGS, OFFSET_DELETE = 37, 42, 44, 47
DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 61, 65, 66

READ_UNCOMMITTED, READ_COMMITTED = 0, 1
EARLIEST, LATEST = -2, -1  # ListOffsets' special timestamps (MAX_TIMESTAMP -3, EARLIEST_LOCAL -4, LATEST_TIERED -5)
COORDINATOR_GROUP, COORDINATOR_TRANSACTION = 0, 1

DROPPED = {"throttle_time_ms", "throttle_time", "session_id", "cluster_id", "controller_id", "rack", "cluster_authorized_operations"}
NODE_FIELDS = {"node_id", "leader_id", "broker_id", "coordinator_id", "preferred_read_replica"}
ADDRESS_FIELDS = {"host", "port"}
OPAQUE_FIELDS = {"producer_id": "pid", "member_id": "member", "leader": "member", "topic_id": "uuid",
                 "group_instance_id": "instance"}
_TIME_FIELD = re.compile(r"(^|_)(timestamp|time_ms|append_time)($|_)|_timestamp$|^log_append_time_ms$|^start_time")


# ---------------------------------------------------------------------- the registry


@dataclass(frozen=True)
class Scenario:
    area: str  # produce, fetch, list_offsets, transactions, groups, offsets, admin, ...
    name: str  # unique: "<area>.<function name>"
    doc: str  # the first line of the function's docstring: what it checks
    fn: Callable[["Conversation"], Any]
    differs: str | None = None  # the declared reason Kafka's answer and oncelog's differ
    cluster_differs: str | None = None  # the declared reason they differ on oncelog's cluster only


SCENARIOS: dict[str, Scenario] = {}


def scenario(area: str, *, differs: str | None = None, cluster_differs: str | None = None):
    """Register ``fn(k) -> answer`` as scenario ``area.<fn name>``; ``differs`` declares that the
    answers differ and why ("by design: ..."), as docs/conformance.md's list of differences says it;
    ``cluster_differs`` that oncelog's two-node cluster answers differently from Kafka where its one
    node does not, and why."""

    def register(fn):
        name = f"{area}.{fn.__name__}"
        if name in SCENARIOS:
            raise ValueError(f"scenario {name} registered twice")
        doc = (fn.__doc__ or "").strip().splitlines()
        if not doc:
            raise ValueError(f"scenario {name} has no docstring saying what it checks")
        SCENARIOS[name] = Scenario(area, name, doc[0].strip(), fn, differs, cluster_differs)
        return fn

    return register


# ---------------------------------------------------------------------- one conversation


@functools.cache
def mod(api_key: int, version: int):
    """kio's request module of ``api_key`` at ``version`` (its request class and nested entities)."""
    return load_payload_module(api_key, version, EntityType.request)


def request_class(api_key: int, version: int):
    m = mod(api_key, version)
    return next(v for k, v in vars(m).items() if k.endswith("Request") and getattr(v, "__api_key__", None) == api_key)


class ScenarioFailed(AssertionError):
    """A scenario's own precondition did not hold (a wait timed out): the answer is this, on that broker."""


class Conversation:
    """One scenario's connection to one broker. ``k.send(request)`` sends a kio request and returns
    kio's response; helpers below build the usual requests. :meth:`connect` opens another identity
    (a second producer's or member's own connections, when a scenario needs one). On a one-node
    broker every request goes to the identity's one connection; on a cluster each goes where a
    Kafka client sends it (:class:`~.routing.Router`: the partition's leader, the coordinator,
    every node, or the bootstrap), on that identity's connection to the node."""

    def __init__(self, broker: str, bootstrap: str, run_id: str) -> None:
        self.broker = broker  # "apache-kafka" | "oncelog" | "oncelog-cluster"
        self.bootstrap = bootstrap
        self.prefix = f"cf{run_id}-"
        self.router = Router(bootstrap)
        self._clients: list[RawClient] = []
        self.client = self.connect()

    def close(self) -> None:
        for c in self._clients:
            try:
                c.close()
            except OSError:
                pass
        self.router.close()

    def connect(self) -> Identity:
        c = Identity(self.bootstrap, timeout=30.0)
        self._clients.append(c)
        return c

    def name(self, base: str) -> str:
        """A topic/transactional id/group id unique to this run; reads as ``base`` in answers."""
        return self.prefix + base

    def send(self, request, *, via: RawClient | None = None):
        """``request`` as identity ``via`` (default: :attr:`client`), to the node that must answer it."""
        ident = via or self.client
        if not isinstance(ident, Identity) or not self.router.clustered:
            return ident.request(request)
        return self.router.send(ident, request)

    def wait_until(self, fn: Callable[[], Any], what: str, timeout: float = 30.0, interval: float = 0.05):
        """Poll ``fn()`` until it returns something truthy, and return that; ScenarioFailed after
        ``timeout`` (the scenario's answer on this broker is then that failure)."""
        deadline = time.monotonic() + timeout
        while True:
            got = fn()
            if got:
                return got
            if time.monotonic() > deadline:
                raise ScenarioFailed(f"timed out waiting for {what}")
            time.sleep(interval)

    # -- requests the scenarios share -----------------------------------------------------

    def create_topic(self, base: str, partitions: int = 1, configs: dict[str, str] | None = None,
                     *, version: int = 5):
        """Create topic ``k.name(base)`` (replication factor 1) and wait until its every partition
        has a leader; returns its name."""
        name = self.name(base)
        m = mod(CREATE_TOPICS, version)
        resp = self.send(m.CreateTopicsRequest(
            topics=(m.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1, assignments=(),
                                     configs=tuple(m.CreatableTopicConfig(name=k, value=v)
                                                   for k, v in (configs or {}).items())),),
            timeout=datetime.timedelta(seconds=30), validate_only=False))
        code = resp.topics[0].error_code
        if int(code) != 0:
            raise ScenarioFailed(f"CreateTopics {base}: {code!r} {resp.topics[0].error_message}")
        self.wait_until(lambda: self._leaders_known(name, partitions), f"leaders of {base}")
        # Kafka's metadata names the leader a moment before the leader's replica manager serves
        # the partition (NOT_LEADER_OR_FOLLOWER meanwhile): wait until each answers ListOffsets.
        for p in range(partitions):
            self.wait_until(lambda: int(self.list_offsets(name, LATEST, partition=p).topics[0].partitions[0]
                                        .error_code) == 0, f"{base}-{p} served")
        return name

    def _leaders_known(self, topic: str, partitions: int) -> bool:
        """Every node's Metadata names a leader for each of the ``partitions`` of ``topic`` (as a
        client of a cluster waits, so a request to any node finds the topic)."""
        return all(int(t.error_code) == 0 and len(t.partitions) == partitions and all(
            p.leader_id >= 0 and int(p.error_code) == 0 for p in t.partitions)
            for t in (md.topics[0] for md in self.every_node_metadata([topic])))

    def every_node_metadata(self, topics: list[str] | None, *, version: int = 12) -> list:
        """Metadata of ``topics`` from each node: on a one-node broker the one answer, on the
        conversation's connection; on a cluster one per node, on :attr:`client`'s connections."""
        if not self.router.clustered:
            return [self.metadata(topics, version=version)]
        m = mod(METADATA, version)
        request = m.MetadataRequest(
            topics=None if topics is None else tuple(m.MetadataRequestTopic(name=t, topic_id=uuid.UUID(int=0))
                                                     for t in topics),
            allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        return [self.client.on(self.router.address(n)).request(request) for n in sorted(self.router.nodes)]

    def metadata(self, topics: list[str] | None, *, version: int = 12):
        m = mod(METADATA, version)
        return self.send(m.MetadataRequest(
            topics=None if topics is None else tuple(m.MetadataRequestTopic(name=t, topic_id=uuid.UUID(int=0))
                                                     for t in topics),
            allow_auto_topic_creation=False, include_topic_authorized_operations=False))

    def produce(self, topic: str, batches: bytes | list[tuple[int, bytes]], *, acks: int = -1,
                transactional_id: str | None = None, version: int = 9, via: RawClient | None = None):
        """Produce ``batches`` (bytes for partition 0, or [(partition, bytes), ...]) to ``topic``."""
        m = mod(PRODUCE, version)
        parts = [(0, batches)] if isinstance(batches, (bytes, bytearray)) else batches
        request = m.ProduceRequest(
            transactional_id=transactional_id, acks=acks, timeout=datetime.timedelta(seconds=30),
            topic_data=(m.TopicProduceData(name=topic, partition_data=tuple(
                m.PartitionProduceData(index=p, records=bytes(b)) for p, b in parts)),))
        if acks == 0:
            ident = via or self.client
            if isinstance(ident, Identity) and self.router.clustered:
                self.router.send_frame(ident, request)
            else:
                ident.send_frame(ident.encode(request))
            return None
        return self.send(request, via=via)

    def fetch(self, topic: str, offset: int = 0, *, partition: int = 0, isolation_level: int = READ_UNCOMMITTED,
              max_bytes: int = 50 << 20, partition_max_bytes: int = 1 << 20, max_wait_ms: int = 0,
              version: int = 12):
        """One sessionless Fetch of one partition (by name: v12 and below)."""
        m = mod(FETCH, version)
        return self.send(m.FetchRequest(
            replica_id=-1, max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=0, max_bytes=max_bytes,
            isolation_level=isolation_level, session_id=0, session_epoch=-1,
            topics=(m.FetchTopic(topic=topic, partitions=(m.FetchPartition(
                partition=partition, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                log_start_offset=-1, partition_max_bytes=partition_max_bytes),)),),
            forgotten_topics_data=(), rack_id=""))

    def list_offsets(self, topic: str, timestamp: int, *, partition: int = 0,
                     isolation_level: int = READ_UNCOMMITTED, version: int = 7):
        m = mod(LIST_OFFSETS, version)
        return self.send(m.ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level, topics=(
            m.ListOffsetsTopic(name=topic, partitions=(m.ListOffsetsPartition(
                partition_index=partition, current_leader_epoch=-1, timestamp=timestamp),)),)))

    def init_producer_id(self, transactional_id: str | None = None, *, timeout_ms: int = 60000,
                         producer_id: int = -1, producer_epoch: int = -1, version: int = 4,
                         via: RawClient | None = None):
        m = mod(INIT_PRODUCER_ID, version)
        return self.send(m.InitProducerIdRequest(
            transactional_id=transactional_id, transaction_timeout=datetime.timedelta(milliseconds=timeout_ms),
            producer_id=producer_id, producer_epoch=producer_epoch), via=via)

    def add_partitions_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                              partitions: dict[str, list[int]], *, version: int = 3, via: RawClient | None = None):
        m = mod(ADD_PARTITIONS_TO_TXN, version)
        return self.send(m.AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=transactional_id, v3_and_below_producer_id=producer_id,
            v3_and_below_producer_epoch=producer_epoch,
            v3_and_below_topics=tuple(m.AddPartitionsToTxnTopic(name=t, partitions=tuple(ps))
                                      for t, ps in partitions.items())), via=via)

    def add_offsets_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str,
                           *, version: int = 3, via: RawClient | None = None):
        m = mod(ADD_OFFSETS_TO_TXN, version)
        return self.send(m.AddOffsetsToTxnRequest(transactional_id=transactional_id, producer_id=producer_id,
                                                  producer_epoch=producer_epoch, group_id=group_id), via=via)

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool,
                *, version: int = 3, via: RawClient | None = None):
        m = mod(END_TXN, version)
        return self.send(m.EndTxnRequest(transactional_id=transactional_id, producer_id=producer_id,
                                         producer_epoch=producer_epoch, committed=committed), via=via)

    def find_coordinator(self, key: str, key_type: int = COORDINATOR_GROUP, *, version: int = 4):
        m = mod(FIND_COORDINATOR, version)
        if version >= 4:
            return self.send(m.FindCoordinatorRequest(key_type=key_type, coordinator_keys=(key,)))
        return self.send(m.FindCoordinatorRequest(key=key, key_type=key_type))

    def wait_stable(self, topic: str, partition: int = 0, timeout: float = 30.0):
        """Wait until the partition's last stable offset equals its high watermark (no open
        transaction: markers written); returns that Fetch partition."""
        def stable():
            p = self.fetch(topic, 0, partition=partition, isolation_level=READ_COMMITTED).responses[0].partitions[0]
            return p if p.last_stable_offset == p.high_watermark else None
        return self.wait_until(stable, f"{topic}-{partition} stable", timeout)

    def wait_txn_complete(self, transactional_id: str, timeout: float = 30.0):
        """Wait until the coordinator has finished the last EndTxn of ``transactional_id`` (its
        markers written: DescribeTransactions says Empty/CompleteCommit/CompleteAbort)."""
        m = mod(DESCRIBE_TRANSACTIONS, 0)

        def done():
            s = self.send(m.DescribeTransactionsRequest(transactional_ids=(transactional_id,))).transaction_states[0]
            return s.transaction_state in ("Empty", "CompleteCommit", "CompleteAbort")
        self.wait_until(done, f"transaction {transactional_id} complete", timeout)


# ---------------------------------------------------------------------- record batches


def batch(values=(b"v",), *, key: bytes | None = b"k", keys=None, pid: int = -1, epoch: int = -1, seq: int = -1,
          transactional: bool = False, timestamp_ms: int | None = None) -> bytes:
    """One uncompressed magic-v2 batch of ``values`` as a client writes it
    (:func:`oncelog.protocol.records.build_batch`); compressed or with headers:
    :mod:`oncelog.client.recordcodec`."""
    keys = keys if keys is not None else [key] * len(values)
    return rb.build_batch(list(zip(keys, values)), timestamp_ms=timestamp_ms or int(time.time() * 1000),
                          producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                          attributes=rb.ATTR_TRANSACTIONAL if transactional else 0)


def decode_records(data) -> list[dict]:
    """Every record of the whole batches in a Fetch's ``records``, flattened, with its batch's
    producer id/epoch, base sequence, transactional flag and control type (None for data)."""
    if not data:
        return []
    raw = bytes(data)
    out = []
    whole = _whole_batches(raw)
    partial, raw = len(raw) - whole, raw[:whole]  # Kafka may end a Fetch inside a batch (consumers skip it)
    for header in (rb.scan_batches(raw) if raw else ()):
        one = raw[header.position: header.position + header.size]
        control = ("COMMIT" if rb.control_type(one) == rb.CONTROL_COMMIT else "ABORT") if header.is_control else None
        for offset, _, key, value in rb.iter_records(one):
            out.append({"offset": offset, "key": None if control else key, "value": None if control else value,
                        "producer_id": header.producer_id, "producer_epoch": header.producer_epoch,
                        "base_sequence": header.base_sequence, "transactional": header.is_transactional,
                        "control": control})
    if partial:
        out.append({"partial_batch_bytes": partial})
    return out


def _whole_batches(raw: bytes) -> int:
    """The length of the leading whole batches of ``raw`` (a Fetch's records may end in a part of one)."""
    pos = 0
    while pos + rb.HEADER_SIZE <= len(raw):
        size = rb.parse_header(raw, pos).size
        if pos + size > len(raw):
            break
        pos += size
    return pos


# ---------------------------------------------------------------------- normalising


class Normaliser:
    """Turns one broker's answer into plain JSON-able data (see the module's invariants)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.ids: dict[str, dict[Any, str]] = {}

    def opaque(self, kind: str, value) -> str:
        seen = self.ids.setdefault(kind, {})
        if value not in seen:
            seen[value] = f"{kind}#{len(seen) + 1}"
        return seen[value]

    def __call__(self, value, field_name: str = ""):
        n = self.__call__
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return {f.name: n(getattr(value, f.name), f.name) for f in dataclasses.fields(value)
                    if f.name not in DROPPED}
        if isinstance(value, dict):
            return {str(k): n(v, str(k)) for k, v in value.items() if k not in DROPPED}
        if isinstance(value, (list, tuple)):
            return [n(v, field_name) for v in value]
        if field_name == "records" and isinstance(value, (bytes, bytearray, memoryview)):
            return [n(r) for r in decode_records(value)]
        if isinstance(value, enum.Enum):
            return value.name
        if isinstance(value, bool) or value is None:
            return value
        if isinstance(value, uuid.UUID):
            return "uuid#0" if value.int == 0 else self.opaque("uuid", value)
        if isinstance(value, datetime.datetime):
            return "<time>"
        if isinstance(value, datetime.timedelta):
            return int(value.total_seconds() * 1000)
        if isinstance(value, int):
            value = int(value)
            if field_name in NODE_FIELDS:
                return "<node>" if value >= 0 else value
            if field_name in ADDRESS_FIELDS:
                return "<port>"
            if field_name in OPAQUE_FIELDS and value >= 0:
                return self.opaque(OPAQUE_FIELDS[field_name], value)
            if _TIME_FIELD.search(field_name) and value >= 0:
                return "<time>"
            return value
        if isinstance(value, str):
            if field_name in ADDRESS_FIELDS:
                return "<host>"
            if field_name in OPAQUE_FIELDS and value:
                return self.opaque(OPAQUE_FIELDS[field_name], value)
            return value.replace(self.prefix, "")
        if isinstance(value, (bytes, bytearray, memoryview)):
            b = bytes(value)
            try:
                return b.decode().replace(self.prefix, "")
            except UnicodeDecodeError:
                return "0x" + b.hex()
        if isinstance(value, float):
            return value
        return repr(value).replace(self.prefix, "")


def normalise(answer, prefix: str):
    return Normaliser(prefix)(answer)


def differences(kafka, oncelog, path: str = "") -> list[str]:
    """The paths where two normalised answers differ, each with both values (short)."""
    if isinstance(kafka, dict) and isinstance(oncelog, dict):
        out = []
        for key in list(kafka) + [k for k in oncelog if k not in kafka]:
            out += differences(kafka.get(key, "<absent>"), oncelog.get(key, "<absent>"), f"{path}.{key}" if path else key)
        return out
    if isinstance(kafka, list) and isinstance(oncelog, list) and len(kafka) == len(oncelog):
        return [d for i, (a, b) in enumerate(zip(kafka, oncelog)) for d in differences(a, b, f"{path}[{i}]")]
    if kafka == oncelog:
        return []
    if path.endswith("error_message") and kafka is None and isinstance(oncelog, str):
        return []  # by design: oncelog may explain an error Kafka leaves bare (module docstring)
    return [f"{path or '<answer>'}: kafka={_short(kafka)} oncelog={_short(oncelog)}"]


def _short(value, limit: int = 160) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= limit else text[:limit - 3] + "..."


# ---------------------------------------------------------------------- running


_run_ids: dict[str, itertools.count] = {}  # per broker: a scenario's nth run has one name length on each


RETRIABLE_AT_START = {"coordinator_load_in_progress", "coordinator_not_available", "not_coordinator"}


def warm_up(bootstrap: str, timeout: float = 120.0) -> None:
    """Bring a fresh broker to the state a scenario expects: producer ids allocatable, the
    offsets and transaction state topics created (Kafka answers COORDINATOR_LOAD_IN_PROGRESS or
    COORDINATOR_NOT_AVAILABLE until they are), so no scenario's answer depends on running first."""
    k = Conversation("warm-up", bootstrap, "warmup")
    try:
        # FindCoordinator creates Kafka's __transaction_state and __consumer_offsets on first use;
        # until then a transactional InitProducerId is NOT_COORDINATOR.
        for key_type, what in ((COORDINATOR_TRANSACTION, "transaction"), (COORDINATOR_GROUP, "group")):
            k.wait_until(lambda: int(k.find_coordinator(k.name(what), key_type).coordinators[0].error_code) == 0,
                         f"{what} coordinator", timeout, 0.2)
        k.wait_until(lambda: int(k.init_producer_id().error_code) == 0, "InitProducerId", timeout, 0.2)
        k.wait_until(lambda: int(k.init_producer_id(k.name("txn")).error_code) == 0, "transactional InitProducerId",
                     timeout, 0.2)
    finally:
        k.close()


def run_one(sc: Scenario, broker: str, bootstrap: str, session: str):
    """``sc`` against one broker: its normalised answer, or ``{"failed": ...}`` if it raised."""
    run_id = f"{session}{next(_run_ids.setdefault(broker, itertools.count()))}"
    k = Conversation(broker, bootstrap, run_id)
    try:
        answer = sc.fn(k)
    except (ScenarioFailed, ConnectionError, OSError) as exc:
        answer = {"failed": f"{type(exc).__name__}: {exc}"}
    finally:
        k.close()
    return normalise(answer, k.prefix)


@dataclass
class Outcome:
    scenario: Scenario
    kafka: Any
    oncelog: Any
    diffs: list[str] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        return not self.diffs


def run_both(sc: Scenario, kafka_bootstrap: str, oncelog_bootstrap: str, session: str, *, kafka=None) -> Outcome:
    """``sc`` on both brokers (Kafka's normalised answer may be given: one run serves two comparisons)."""
    kafka = run_one(sc, "apache-kafka", kafka_bootstrap, session) if kafka is None else kafka
    oncelog = run_one(sc, "oncelog", oncelog_bootstrap, session)
    return Outcome(sc, kafka, oncelog, differences(kafka, oncelog))


BROKER_LISTS = {"brokers", "node_endpoints"}


def one_broker_view(answer):
    """``answer`` (normalised) as a one-node cluster would give it: in each list of brokers
    (:data:`BROKER_LISTS`: Metadata's and DescribeCluster's ``brokers``, Produce's and Fetch's
    ``node_endpoints``) identical entries collapse to one. Normalised, two nodes read
    ``{"node_id": "<node>", "host": "<host>", "port": "<port>"}`` both; their number is the one
    thing a correctly routed conversation sees differ with the cluster's size."""
    if isinstance(answer, dict):
        return {k: (_unique(v) if k in BROKER_LISTS and isinstance(v, list) else one_broker_view(v))
                for k, v in answer.items()}
    if isinstance(answer, list):
        return [one_broker_view(v) for v in answer]
    return answer


def _unique(entries: list) -> list:
    out: list = []
    for e in entries:
        if e not in out:
            out.append(e)
    return out


def table(outcomes: list[Outcome]) -> str:
    """The Markdown table of a run: summary line, then one row per scenario."""
    same = sum(o.identical for o in outcomes)
    lines = [f"**{same} of {len(outcomes)} scenarios identical**; {len(outcomes) - same} differ, each by design "
             "(reason below) or listed as open.", "",
             "| scenario | checks | Apache Kafka | oncelog | equal? |", "|---|---|---|---|---|"]
    for o in sorted(outcomes, key=lambda o: o.scenario.name):
        if o.identical:
            k = n = _cell(o.kafka)
            verdict = "yes"
        else:
            first = o.diffs[0]
            k = _cell(first.split(" kafka=", 1)[1].split(" oncelog=", 1)[0])
            n = _cell(first.split(" oncelog=", 1)[1])
            where = first.split(":", 1)[0]
            verdict = f"no (`{where}`{' +%d' % (len(o.diffs) - 1) if len(o.diffs) > 1 else ''}): {o.scenario.differs or 'UNDECLARED'}"
        lines.append(f"| `{o.scenario.name}` | {o.scenario.doc} | {k} | {n} | {verdict} |")
    return "\n".join(lines) + "\n"


def _cell(value, limit: int = 90) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = text.replace("|", "\\|").replace("\n", " ")
    return "`" + (text if len(text) <= limit else text[:limit - 3] + "...") + "`"


def load_scenarios() -> dict[str, Scenario]:
    """Import every ``scenarios_*.py`` module of this package (registering their scenarios)."""
    import importlib
    import pkgutil

    from . import __path__ as here

    for info in pkgutil.iter_modules(here):
        if info.name.startswith("scenarios_"):
            importlib.import_module(f"{__package__}.{info.name}")
    return SCENARIOS
