"""The harness of the handler-level tests: a real :class:`~oncelog.broker.Broker` in-process.

No sockets and no broker process: the broker is opened on the test's ``tmp_path`` with its
background tasks (the flusher) running inside ``asyncio.run``, and each request goes straight
to its API module's ``handle(ctx, request)``, as :meth:`Broker.handle_frame` would call it after
decoding, minus the codec. What a handler returns is awaited the way the server does: a
response as is, an awaitable of it, an :class:`~oncelog.apis._base.Applied` (an acks=all
Produce waiting for its fsync), or None (acks=0). Requests are kio's request classes at the
version each helper names; responses are kio's response classes, asserted on directly.

A scenario is an ``async def scenario(api)`` taking an :class:`Api`; a test runs it with
:func:`run`. (There is no fixture named ``broker`` here on purpose: tests/conftest.py marks any
test using a fixture of that name e2e, since it means a broker *process*.)
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import functools
import inspect
import itertools
import time
import uuid
from dataclasses import dataclass

from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from oncelog.apis import HANDLERS
from oncelog.apis._base import Applied, EncodeAside, RequestContext
from oncelog.broker import GROUP_APIS, Broker
from oncelog.config.settings import BrokerConfig
from oncelog.protocol import records as rb

E = ErrorCode

# API keys, as Kafka numbers them.
PRODUCE, FETCH, LIST_OFFSETS, OFFSET_FETCH, CREATE_TOPICS, INIT_PRODUCER_ID = 0, 1, 2, 9, 19, 22
ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 24, 25, 26, 28

READ_UNCOMMITTED, READ_COMMITTED = 0, 1

# The versions the helpers send unless a test names another: what oncelog's own client sends
# (oncelog.client.kafka.VERSIONS; transaction version 1), and Fetch v12, the last version that
# names topics rather than topic ids.
PRODUCE_V, FETCH_V, END_TXN_V = 9, 12, 3

WAIT_S = 5.0  # bound on any wait for the broker: a hung handler fails its test, not the run


@functools.cache
def request_module(api_key: int, version: int):
    return load_payload_module(api_key, version, EntityType.request)


# ---------------------------------------------------------------------- record batches


def batch(values=(b"v",), *, key: bytes | None = b"k", keys=None, pid: int = rb.NO_PRODUCER_ID, epoch: int = -1,
          seq: int = rb.NO_SEQUENCE, transactional: bool = False) -> bytes:
    """One uncompressed magic-v2 batch of ``values``, every record with ``key`` unless ``keys``
    gives each its own; ``pid``/``epoch``/``seq`` as an idempotent or transactional producer
    sends them."""
    keys = keys if keys is not None else [key] * len(values)
    return rb.build_batch(list(zip(keys, values)), timestamp_ms=int(time.time() * 1000), producer_id=pid,
                          producer_epoch=epoch, base_sequence=seq,
                          attributes=rb.ATTR_TRANSACTIONAL if transactional else 0)


@dataclass(frozen=True)
class Record:
    offset: int
    key: bytes | None
    value: bytes | None
    producer_id: int
    transactional: bool
    control: int | None  # rb.CONTROL_COMMIT / rb.CONTROL_ABORT for a marker, else None


def records_of(data) -> list[Record]:
    """Every record of the whole batches in a Fetch response's ``records``, in log order."""
    if not data:
        return []
    out = []
    for header in rb.scan_batches(bytes(data)):
        raw = bytes(data)[header.position : header.position + header.size]
        control = rb.control_type(raw) if header.is_control else None
        for offset, _, key, value in rb.iter_records(raw):
            out.append(Record(offset, key, value, header.producer_id, header.is_transactional, control))
    return out


def committed_view(partition_data) -> list[Record]:
    """What a read_committed consumer keeps of a Fetch partition (Kafka's consumer algorithm):
    control records dropped; from the first offset of each aborted transaction listed, its
    producer's transactional records dropped until that producer's ABORT marker."""
    pending = sorted(((a.first_offset, a.producer_id) for a in partition_data.aborted_transactions or ()),
                     reverse=True)
    aborting: set[int] = set()
    kept = []
    for r in records_of(partition_data.records):
        while pending and pending[-1][0] <= r.offset:
            aborting.add(pending.pop()[1])
        if r.control is not None:
            if r.control == rb.CONTROL_ABORT:
                aborting.discard(r.producer_id)
        elif not (r.transactional and r.producer_id in aborting):
            kept.append(r)
    return kept


# ---------------------------------------------------------------------- the broker


class Api:
    """Calls handlers of one in-process broker, with helpers that build the requests."""

    def __init__(self, broker: Broker, principal: str = "User:ANONYMOUS", peer: str = "in-process") -> None:
        self.broker = broker
        self.principal, self.peer = principal, peer  # the request context's (ACLs are checked on them)
        self._correlation = itertools.count(1)

    def as_principal(self, principal: str, peer: str = "127.0.0.1:40000") -> "Api":
        """The same broker, called as another principal (and client address)."""
        other = Api(self.broker, principal, peer)
        other._correlation = self._correlation
        return other

    async def call(self, api_key: int, version: int, request):
        """``handle(ctx, request)`` of the API, awaited as the server awaits it."""
        ctx = RequestContext(self.broker, version, next(self._correlation), "handler-tests", self.peer,
                             principal=self.principal)
        result = HANDLERS[api_key].handle(ctx, request)
        if api_key in GROUP_APIS:
            self.broker.schedule_group_timer()  # as handle_frame does
        if isinstance(result, Applied):
            result = result.awaitable
        if inspect.isawaitable(result):
            result = await asyncio.wait_for(result, WAIT_S)
        if isinstance(result, EncodeAside):  # what the server encodes off its event loop
            result = result.response
        return result

    def partition(self, topic: str, index: int = 0):
        return self.broker.partitions.get(topic, index)

    def log_end(self, topic: str, index: int = 0) -> int:
        return self.partition(topic, index).log.log_end_offset

    # -- topics

    async def create_topic(self, name: str, partitions: int = 1, **configs: str) -> None:
        """CreateTopics v5; ``configs`` with dots as underscores (``cleanup_policy="compact"``)."""
        m = request_module(CREATE_TOPICS, 5)
        resp = await self.call(CREATE_TOPICS, 5, m.CreateTopicsRequest(
            topics=(m.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1, assignments=(),
                                     configs=tuple(m.CreatableTopicConfig(name=k.replace("_", "."), value=v)
                                                   for k, v in configs.items())),),
            timeout=datetime.timedelta(seconds=5), validate_only=False))
        assert resp.topics[0].error_code == E.none, resp.topics[0]

    # -- produce

    async def produce_request(self, parts: dict[tuple[str, int], bytes | None], *, acks: int = -1,
                              transactional_id: str | None = None, version: int = PRODUCE_V):
        """The whole ProduceResponse (None for acks=0) for ``{(topic, partition): records}``."""
        m = request_module(PRODUCE, version)
        by_topic = _by_topic((topic, m.PartitionProduceData(index=index, records=records))
                             for (topic, index), records in parts.items())
        return await self.call(PRODUCE, version, m.ProduceRequest(
            transactional_id=transactional_id, acks=acks, timeout=datetime.timedelta(seconds=WAIT_S),
            topic_data=tuple(m.TopicProduceData(name=t, partition_data=tuple(ps)) for t, ps in by_topic.items())))

    async def produce(self, topic: str, records: bytes | None, *, index: int = 0, **kwargs):
        """The one PartitionProduceResponse of a single-partition Produce."""
        resp = await self.produce_request({(topic, index): records}, **kwargs)
        assert resp is not None, "acks=0: no response"
        [t] = resp.responses
        [p] = t.partition_responses
        return p

    # -- fetch

    async def fetch_request(self, parts: dict[tuple[str, int], int], *, isolation_level: int = READ_UNCOMMITTED,
                            max_bytes: int = 1 << 20, partition_max_bytes: int = 1 << 20, min_bytes: int = 0,
                            max_wait_ms: int = 0, session_id: int = 0, version: int = FETCH_V):
        """The whole FetchResponse for ``{(topic, partition): fetch offset}``; long-polls only
        with ``min_bytes`` > 0 and a ``max_wait_ms``. From v13 topics go by id: a name is looked
        up, a :class:`uuid.UUID` is sent as it is."""
        m = request_module(FETCH, version)
        by_topic = _by_topic((topic, m.FetchPartition(
            partition=index, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
            log_start_offset=-1, partition_max_bytes=partition_max_bytes)) for (topic, index), offset in parts.items())
        if version >= 13:
            topics = tuple(m.FetchTopic(topic_id=t if isinstance(t, uuid.UUID) else self.broker.metadata.topics.get(t).topic_id,
                                        partitions=tuple(ps)) for t, ps in by_topic.items())
        else:
            topics = tuple(m.FetchTopic(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items())
        return await self.call(FETCH, version, m.FetchRequest(**_known(
            m.FetchRequest, replica_id=-1, max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=min_bytes,
            max_bytes=max_bytes, isolation_level=isolation_level, session_id=session_id, session_epoch=-1,
            topics=topics, forgotten_topics_data=(), rack_id="")))

    async def fetch(self, topic: str, offset: int = 0, *, index: int = 0, **kwargs):
        """The one PartitionData of a single-partition Fetch (top-level error asserted NONE)."""
        resp = await self.fetch_request({(topic, index): offset}, **kwargs)
        assert resp.error_code == E.none
        [t] = resp.responses
        [p] = t.partitions
        return p

    async def list_offsets(self, topic: str, *, index: int = 0, isolation_level: int = READ_UNCOMMITTED,
                           current_leader_epoch: int = -1, timestamp: int = -1):
        """The one partition answer of a ListOffsets v7 of ``topic``-``index`` (timestamp -1: latest)."""
        m = request_module(LIST_OFFSETS, 7)
        resp = await self.call(LIST_OFFSETS, 7, m.ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level, topics=(
            m.ListOffsetsTopic(name=topic, partitions=(m.ListOffsetsPartition(
                partition_index=index, current_leader_epoch=current_leader_epoch, timestamp=timestamp),)),)))
        return resp.topics[0].partitions[0]

    # -- transactions

    async def init_producer_id(self, transactional_id: str | None = None, *, timeout_ms: int = 60_000,
                               version: int = 4, retry: bool = True):
        """InitProducerIdResponse; with ``retry`` a CONCURRENT_TRANSACTIONS answer (the previous
        instance's transaction being aborted) is retried, as clients do."""
        m = request_module(INIT_PRODUCER_ID, version)
        deadline = time.monotonic() + WAIT_S
        while True:
            resp = await self.call(INIT_PRODUCER_ID, version, m.InitProducerIdRequest(
                transactional_id=transactional_id, transaction_timeout=datetime.timedelta(milliseconds=timeout_ms),
                producer_id=-1, producer_epoch=-1))
            if not (retry and resp.error_code == E.concurrent_transactions and time.monotonic() < deadline):
                return resp
            await asyncio.sleep(0.01)

    async def producer(self, transactional_id: str | None = None) -> tuple[int, int]:
        """(producer id, epoch) of a fresh idempotent or transactional producer."""
        resp = await self.init_producer_id(transactional_id)
        assert resp.error_code == E.none, resp
        return resp.producer_id, resp.producer_epoch

    async def begin(self, transactional_id: str, partitions) -> tuple[int, int]:
        """A transactional producer with a transaction open on ``partitions`` (InitProducerId,
        then AddPartitionsToTxn): its (producer id, epoch)."""
        pid, epoch = await self.producer(transactional_id)
        added = await self.add_partitions(transactional_id, pid, epoch, partitions)
        assert set(added.values()) == {E.none}, added
        return pid, epoch

    async def add_partitions(self, transactional_id: str, pid: int, epoch: int, partitions, *,
                             version: int = 3) -> dict[tuple[str, int], ErrorCode]:
        """AddPartitionsToTxn v0-3: each partition's error code."""
        m = request_module(ADD_PARTITIONS_TO_TXN, version)
        by_topic = _by_topic(partitions)
        resp = await self.call(ADD_PARTITIONS_TO_TXN, version, m.AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=transactional_id, v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=tuple(m.AddPartitionsToTxnTopic(name=t, partitions=tuple(ps))
                                      for t, ps in by_topic.items())))
        return {(t.name, p.partition_index): p.partition_error_code
                for t in resp.results_by_topic_v3_and_below for p in t.results_by_partition}

    async def add_offsets(self, transactional_id: str, pid: int, epoch: int, group_id: str, *,
                          version: int = 3) -> ErrorCode:
        m = request_module(ADD_OFFSETS_TO_TXN, version)
        resp = await self.call(ADD_OFFSETS_TO_TXN, version, m.AddOffsetsToTxnRequest(
            transactional_id=transactional_id, producer_id=pid, producer_epoch=epoch, group_id=group_id))
        return resp.error_code

    async def end_txn(self, transactional_id: str, pid: int, epoch: int, commit: bool, *,
                      version: int = END_TXN_V):
        m = request_module(END_TXN, version)
        return await self.call(END_TXN, version, m.EndTxnRequest(
            transactional_id=transactional_id, producer_id=pid, producer_epoch=epoch, committed=commit))

    async def txn_offset_commit(self, transactional_id: str, pid: int, epoch: int, group_id: str,
                                offsets: dict[tuple[str, int], int], *, metadata: str = "",
                                version: int = 3) -> dict[tuple[str, int], ErrorCode]:
        """TxnOffsetCommit without group metadata (generation -1, member ""), as a producer-only
        commit sends it: each partition's error code."""
        m = request_module(TXN_OFFSET_COMMIT, version)
        by_topic = _by_topic((topic, m.TxnOffsetCommitRequestPartition(
            **_known(m.TxnOffsetCommitRequestPartition, partition_index=index, committed_offset=offset,
                     committed_leader_epoch=-1, committed_metadata=metadata)))
            for (topic, index), offset in offsets.items())
        resp = await self.call(TXN_OFFSET_COMMIT, version, m.TxnOffsetCommitRequest(**_known(
            m.TxnOffsetCommitRequest, transactional_id=transactional_id, group_id=group_id, producer_id=pid,
            producer_epoch=epoch, generation_id=-1, member_id="", group_instance_id=None,
            topics=tuple(m.TxnOffsetCommitRequestTopic(name=t, partitions=tuple(ps)) for t, ps in by_topic.items()))))
        return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}

    async def offset_fetch(self, group_id: str, partitions, *, require_stable: bool = True, version: int = 7):
        """OffsetFetch v7 (one group): (top-level error, {(topic, partition): (error, offset, metadata)})."""
        m = request_module(OFFSET_FETCH, version)
        by_topic = _by_topic(partitions)
        resp = await self.call(OFFSET_FETCH, version, m.OffsetFetchRequest(
            group_id=group_id, require_stable=require_stable,
            topics=tuple(m.OffsetFetchRequestTopic(name=t, partition_indexes=tuple(ps)) for t, ps in by_topic.items())))
        return resp.error_code, {(t.name, p.partition_index): (p.error_code, p.committed_offset, p.metadata)
                                 for t in resp.topics for p in t.partitions}


def _by_topic(pairs) -> dict[str, list]:
    """``(topic, item)`` pairs grouped by topic, in first-seen order: the shape of every
    request's topics array."""
    grouped: dict[str, list] = {}
    for topic, item in pairs:
        grouped.setdefault(topic, []).append(item)
    return grouped


def _known(cls, **values):
    """The fields of ``values`` that this version's class has (older versions lack some)."""
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in values.items() if k in names}


async def wait_until(condition, what: str, timeout_s: float = WAIT_S):
    """Poll the async ``condition()`` until it returns something truthy (returned), bounded:
    markers and their durability complete through callbacks on the loop after EndTxn answers."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = await condition()
        if result:
            return result
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


async def settled(api: Api, topic: str, index: int = 0, offset: int = 0):
    """The read_committed Fetch of a partition from ``offset`` once everything in its log is
    stable (last stable offset = high watermark = log end): after EndTxn, its marker is written
    and made durable through callbacks on the loop."""
    async def fetched():
        p = await api.fetch(topic, offset, index=index, isolation_level=READ_COMMITTED)
        return p if p.last_stable_offset == p.high_watermark == api.log_end(topic, index) else None

    return await wait_until(fetched, f"{topic}-{index} to be stable")


async def _run(config: BrokerConfig, scenario):
    broker = Broker(config)
    broker.open()
    broker.partitions.start_background()
    try:
        return await scenario(Api(broker))
    finally:
        await broker.partitions.close()


def run(tmp_path, scenario, **config):
    """Run ``scenario(api)`` against a fresh broker on ``tmp_path`` (``config``: BrokerConfig
    fields); returns what the scenario returns."""
    return asyncio.run(_run(BrokerConfig(data_dir=str(tmp_path / "broker"), **config), scenario))


STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def run_with_authorizer(tmp_path, scenario, *, super_users: str = "User:admin", allow_everyone: bool = False,
                        **config):
    """:func:`run` with Kafka's StandardAuthorizer on (``authorizer.class.name``), ``super.users``
    and ``allow.everyone.if.no.acl.found``; ``api.as_principal("User:admin")`` administers."""
    return run(tmp_path, scenario, authorizer_class_name=STANDARD_AUTHORIZER, super_users=super_users,
               allow_everyone_if_no_acl_found=allow_everyone, **config)
