"""Produce (key 0), v3-13: magic-v2 record batches only, exactly one per partition.

A partition named twice counts once, with its last records (Kafka reads the request into a map).
Per partition, as Kafka's KafkaApis and ReplicaManager: an unknown partition is
UNKNOWN_TOPIC_OR_PARTITION; then ProduceRequest.validateRecords (one whole magic-v2 batch, no
zstd below v7) refuses the partition with INVALID_RECORD / UNSUPPORTED_COMPRESSION_TYPE; then
decode, :meth:`oncelog.partition.Partition.append`, map errors, answer. The
partition validates every batch (length, magic, CRC32C, codec, record count,
``max.message.bytes``) and every record in it as Kafka's LogValidator does, decompressing within
a limit (:mod:`oncelog.partition.validation`), before anything is written; a partition with any
bad batch gets CORRUPT_MESSAGE / INVALID_RECORD / MESSAGE_TOO_LARGE and nothing of it is stored.
A zstd batch in a Produce below v7 is UNSUPPORTED_COMPRESSION_TYPE (Kafka's KIP-110 rule). Valid batches
are appended with offsets patched in. acks=0 gets no response (and with an error the connection
is closed, as Kafka does, so the producer refreshes its metadata); acks=1 and acks=-1 (all)
under ``--fsync always`` once a group-commit fsync covering them has finished (see
:mod:`oncelog.storage.flusher`): consumers see only fsynced data there, and on a one-node Kafka an
acknowledged write is visible at once (the leader is the whole ISR), so acks=1 waits too, or a
client reading right after its acknowledged write would miss it (read-your-writes).
Under ``interval``/``never`` both are answered once the bytes are in the log (page cache). Clients may not write to
internal topics (names starting with ``__``).

ACLs (Kafka's KafkaApis.handleProduceRequest), before anything is written: with a transactional
id, WRITE on it, else every partition is TRANSACTIONAL_ID_AUTHORIZATION_FAILED; an idempotent
producer without one needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic (Kafka 3.x+),
else every partition is CLUSTER_AUTHORIZATION_FAILED; then WRITE on each topic, else its
partitions are TOPIC_AUTHORIZATION_FAILED.

Transactional batches are verified with the transaction coordinator before anything is written
(KIP-890 part 1): the producer's epoch must be current and the partition must be in its Ongoing
transaction, else INVALID_PRODUCER_EPOCH / INVALID_TXN_STATE "Partition was not added to the
transaction" (TRANSACTION_ABORTABLE for v11+ clients), as Kafka's AddPartitionsToTxnManager
translates the coordinator's verdict. With v12 (transaction version 2) the partition is added to
the transaction implicitly, before the append. A fenced epoch is INVALID_PRODUCER_EPOCH (the
producer state's and the coordinator's answer alike). v13 names topics by id (KIP-516); an id no
topic has is UNKNOWN_TOPIC_ID for each of its partitions.

The answer, as Kafka's: ``log_start_offset`` is the partition's for record and producer-state
errors (INVALID_RECORD, INVALID_TIMESTAMP, OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH)
and -1 for the rest; ``log_append_time`` is the time stamped on the batch with
``message.timestamp.type=LogAppendTime``, a retried duplicate's original max timestamp, else -1.

A full disk: a partition whose log cannot take the write (ENOSPC) is KAFKA_STORAGE_ERROR, with
nothing of it stored (see :mod:`oncelog.storage.partition_log`), the request's other partitions
answered as usual; clients retry it (it is retriable), and it succeeds once space returns, with
no restart. Kafka answers the same code but marks the log directory offline, and with its only
directory offline the broker halts; oncelog stays up, serves reads and takes writes again.

Topic configs, applied by the partition (:mod:`oncelog.partition.validation`), as Kafka's
Partition.appendRecordsToLeader and LogValidator do:
``min.insync.replicas`` is capped at the replication factor (one), as Kafka's effectiveMinIsr, so
acks=all never gets NOT_ENOUGH_REPLICAS;
``cleanup.policy=compact`` refuses records without a key and ``message.timestamp.*`` refuses
CreateTime records out of bounds, each with per-record errors (KIP-467 ``record_errors``: the
index of the record in its batch) and nothing of the partition stored; ``compression.type``
other than ``producer`` recompresses batches of another codec before they are written. The
record-level reads happen only when a config needs them: the timestamp bounds are first checked
against the batch header's max timestamp (as sent by the producer), so with the default
``message.timestamp.before.max.ms`` a batch's records are read only if that header is already
too far in the future.

Version notes:

Produce: v3-13 (advertised from v0, as Kafka 4.4 does for librdkafka, KAFKA-18659; a request
below v3 closes the connection, as Kafka 4 does, KIP-896)

- v3: the oldest served: magic-v2 batches, ``transactional_id`` in the request.
- v4: the schema of v3 (Kafka added KAFKA_STORAGE_ERROR to the answers).
- v5: ``log_start_offset`` in the answer.
- v6: the schema of v5 (KIP-219: the client, not the broker, applies the throttle).
- v7: zstd batches allowed; below v7 they are UNSUPPORTED_COMPRESSION_TYPE (KIP-110).
- v8: ``record_errors`` and ``error_message`` in the answer (KIP-467).
- v9: flexible versions (compact strings and arrays, tagged fields).
- v10: ``current_leader`` and ``node_endpoints`` tagged fields (KIP-951), left at their defaults:
  a one-broker cluster never answers NOT_LEADER_OR_FOLLOWER.
- v11: a partition not in the transaction is TRANSACTION_ABORTABLE; below v11 INVALID_TXN_STATE
  (KIP-890 part 1).
- v12: transaction version 2: a transactional batch adds its partition to the transaction
  (implicit AddPartitionsToTxn, KIP-890 part 2).
- v13: topics named by id, not name (KIP-516); an unknown id is UNKNOWN_TOPIC_ID.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
import uuid

from .. import errors
from ..notices import notice
from ..protocol import records as rb
from . import _authz
from ._base import NO_THROTTLE, OK, Applied, CloseConnection, build, last_wins, response_module

API_KEY = 0
MIN_VERSION = 3  # v0-2 (message formats 0/1) are refused by closing the connection, as Kafka 4 does (KIP-896)
ADVERTISED_MIN_VERSION = 0  # as Kafka 4.4 advertises it (KAFKA-18659, for librdkafka; api_versions.py)
MAX_VERSION = 13  # v12: transaction version 2 (implicit AddPartitionsToTxn, KIP-890 part 2); v13: topic ids (KIP-516)

log = logging.getLogger("oncelog.produce")


def append_partition(ctx, topic: str, partition: int, records, now_ms: int, acks: int, verify_txn):
    """Append one partition's records. Returns (base_offset, log_start, durable, log_append_time)
    where ``durable`` is a future to await (or None)."""
    partitions = ctx.broker.partitions
    part = partitions.get(topic, partition)
    appended = part.append(records, now_ms=now_ms, acks=acks, verify_txn=verify_txn)
    # A retry of a batch already in the log is acknowledged with its original offset. It may
    # still be waiting for its fsync, so a retry waits for the next round too. acks=1 waits as
    # acks=all does: the answer must not precede the write's visibility (read-your-writes).
    durable = None
    if not appended.duplicate or appended.last_offset >= part.log.flushed_offset:
        durable = partitions.flusher.mark(part.log, wait=acks != 0)
    if not appended.duplicate:
        partitions.after_append(part.log, now_ms)  # flush.messages
        metrics = ctx.broker.metrics
        if metrics is not None:
            metrics.appended(topic, appended.last_offset - appended.first_offset + 1, len(records))
    return appended.first_offset, appended.log_start_offset, durable, appended.log_append_time


def check_one_batch(version: int, records) -> None:
    """Kafka's ProduceRequest.validateRecords (v3+), before anything else of the partition:
    exactly one whole magic-v2 batch, and no zstd below v7 (KIP-110)."""
    view = records if records is not None else b""
    if len(view) < rb.HEADER_SIZE or rb.parse_header(view, 0).size > len(view):
        raise errors.InvalidRecord(f"Produce requests with version {version} must have at least one record batch "
                                   "per partition")
    header = rb.parse_header(view, 0)
    if header.magic != rb.MAGIC_V2:
        raise errors.InvalidRecord(f"Produce requests with version {version} are only allowed to contain record "
                                   "batches with magic version 2")
    if version < 7 and header.compression == rb.COMPRESSION_ZSTD:
        raise errors.UnsupportedCompressionType(
            f"Produce requests with version {version} are not allowed to use ZStandard compression")
    if header.size < len(view):
        raise errors.InvalidRecord(f"Produce requests with version {version} are only allowed to contain exactly "
                                   "one record batch per partition")


def _txn_verifier(txn, transactional_id: str | None, version: int, remote: dict | None = None):
    """KIP-890 part 1, for :meth:`Partition.append`: may this transactional batch be written?
    ``remote``: in a cluster, the verdicts of the transaction coordinator on another node, by
    partition (:func:`_verify_remotely`); a partition it was not asked about had a batch of this
    producer's open transaction verified already."""

    def verify(part, header) -> None:
        if transactional_id is None:
            # Kafka authorizes a transactional write on its transactional id; without one the
            # answer is TRANSACTIONAL_ID_AUTHORIZATION_FAILED (KafkaApis.handleProduceRequest).
            raise errors.TransactionalIdAuthorizationFailed(
                f"{part.name}: transactional records from producer {header.producer_id} in a Produce request "
                "without a transactional id")
        try:
            if remote is None:
                txn.verify_partition(transactional_id, header.producer_id, header.producer_epoch, part.topic,
                                     part.index)
            elif not _verified_here(part, header):
                verdict = remote.get((part.topic, part.index), errors.TransactionAbortable())
                if verdict is not None:
                    raise verdict
        # ReplicaManager's translation of the coordinator's verdict (AddPartitionsToTxnManager):
        # a partition not in the transaction is TRANSACTION_ABORTABLE for Produce v11+ clients,
        # INVALID_TXN_STATE with this message for older ones; a fenced epoch INVALID_PRODUCER_EPOCH;
        # markers being written NOT_ENOUGH_REPLICAS (retriable for every client).
        except errors.TransactionAbortable:
            if version >= 11:
                raise errors.TransactionAbortable() from None
            raise errors.InvalidTxnState("Partition was not added to the transaction") from None
        except errors.ProducerFenced:
            raise errors.InvalidProducerEpoch() from None
        except (errors.ConcurrentTransactions, errors.CoordinatorNotAvailable, errors.NotCoordinator,
                errors.CoordinatorLoadInProgress) as exc:
            # As Kafka's AddPartitionsToTxnManager: a coordinator busy or out of reach is retriable.
            raise errors.NotEnoughReplicas("Unable to verify the partition has been added to the transaction. "
                                           f"Underlying error: {errors.error_code_for(exc).name.upper()}") from None
        except errors.KafkaError as exc:
            raise type(exc)(f"{part.name}: transactional batch of producer {header.producer_id} epoch "
                            f"{header.producer_epoch}: {errors.error_code_for(exc).name}") from None

    return verify


async def _await_durable(futures, timeout_s: float):
    await asyncio.wait_for(asyncio.shield(asyncio.gather(*set(futures))), timeout_s)


def _denied(ctx, request):
    """The ACL verdict: a code for every partition, a set of topics refused, or None."""
    if request.transactional_id is not None:
        if not _authz.transactional_id(ctx, _authz.Op.WRITE, request.transactional_id):
            return _authz.TXN_DENIED
    elif _has_idempotent_batch(request) and not _authz.idempotent_write(ctx):
        return _authz.CLUSTER_DENIED
    names = {t.name for t in request.topic_data if t.name is not None}
    refused = names - _authz.filter_topics(ctx, _authz.Op.WRITE, names)
    return refused or None


def _has_idempotent_batch(request) -> bool:
    for topic_data in request.topic_data:
        for pd in topic_data.partition_data:
            if pd.records is not None and len(pd.records) >= rb.HEADER_SIZE:
                if rb.parse_header(pd.records).producer_id >= 0:
                    return True
    return False


@dataclasses.dataclass
class _PartitionAnswer:
    """One partition's answer as the handler builds it (filled in by the append, then by the wait
    for durability): the fields of a PartitionProduceResponse."""
    index: int
    error_code: object = OK  # a kio ErrorCode
    base_offset: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    record_errors: tuple = ()  # (batch index, message) of each refused record (KIP-467)
    log_append_time: int = -1  # ms; -1: none


@dataclasses.dataclass(frozen=True)
class _TopicById:
    """A v13 request topic with its name looked up (None: no topic has that id)."""
    topic_id: uuid.UUID
    name: str | None
    partition_data: tuple


def _names_for_ids(ctx, request):
    """v13 names topics by id (KIP-516): the request with each topic's name beside its id, so
    the rest of the handler works on names as for v3-12."""
    topics = ctx.broker.metadata.topics.by_id
    return dataclasses.replace(request, topic_data=tuple(
        _TopicById(t.topic_id, topics[t.topic_id].name if t.topic_id in topics else None, t.partition_data)
        for t in request.topic_data))


def handle(ctx, request):
    if ctx.api_version >= 13:
        request = _names_for_ids(ctx, request)
    request = last_wins(request, "topic_data", "partition_data", lambda t: getattr(t, "topic_id", None) or t.name,
                        lambda p: p.index)
    if ctx.broker.acls.enabled:
        denied = _denied(ctx, request)
        if denied is not None:
            return _append_all(ctx, request, denied)
    if _coordinator_elsewhere(ctx, request):
        return _verify_remotely(ctx, request)
    if ctx.api_version >= 12 and request.transactional_id is not None:
        missing = _partitions_to_add(ctx, request)
        if missing:
            return _add_then_append(ctx, request, missing)
    return _append_all(ctx, request)


def _verified_here(part, header) -> bool:
    """The producer's transaction is open on this partition at this epoch: a batch of it was
    verified before (Kafka's verification guard lasts until the transaction's marker)."""
    entry = part.producers.producers.get(header.producer_id)
    return (entry is not None and entry.producer_epoch == header.producer_epoch
            and header.producer_id in part.producers.ongoing)


def _coordinator_elsewhere(ctx, request) -> bool:
    b = ctx.broker
    return (b.cluster is not None and request.transactional_id is not None
            and b.coordinator_node(1, request.transactional_id) != b.node_id)


async def _verify_remotely(ctx, request):
    """A cluster node whose transactions' coordinator is another node (oncelog.cluster): the
    coordinator is asked once per request for the transactional partitions not verified yet
    (AddPartitionsToTxn v5 ``verify_only``; Produce v12, transaction version 2, adds them),
    then the partitions are appended with its verdicts."""
    b = ctx.broker
    asked: dict[tuple[int, int], set] = {}
    for topic_data in request.topic_data:
        for pd in topic_data.partition_data:
            if topic_data.name is None or pd.records is None or len(pd.records) < rb.HEADER_SIZE:
                continue
            h = rb.parse_header(pd.records)
            if not h.is_transactional or not b.partition_exists(topic_data.name, pd.index):
                continue
            try:
                part = b.partitions.get(topic_data.name, pd.index)
            except errors.KafkaError:
                continue  # the append answers it
            if not _verified_here(part, h):
                asked.setdefault((h.producer_id, h.producer_epoch), set()).add((topic_data.name, pd.index))
    verdicts: dict = {}
    for (pid, epoch), parts in asked.items():
        verdicts.update(await b.cluster.verify_remote(request.transactional_id, pid, epoch, parts,
                                                      add=ctx.api_version >= 12))
    result = _append_all(ctx, request, remote=verdicts)
    return (await result.awaitable) if isinstance(result, Applied) else result


def _partitions_to_add(ctx, request) -> dict[tuple[int, int], set]:
    """TV2: partitions with transactional batches that are not yet in the transaction."""
    txn = ctx.broker.txn
    missing: dict[tuple[int, int], set] = {}
    for topic_data in request.topic_data:
        for pd in topic_data.partition_data:
            if pd.records is None or len(pd.records) < rb.HEADER_SIZE:
                continue
            h = rb.parse_header(pd.records)
            if topic_data.name is None or not h.is_transactional or not txn.needs_partition_added(request.transactional_id, h.producer_id,
                                                                       topic_data.name, pd.index):
                continue
            if ctx.broker.partition_exists(topic_data.name, pd.index):
                missing.setdefault((h.producer_id, h.producer_epoch), set()).add((topic_data.name, pd.index))
    return missing


async def _add_then_append(ctx, request, missing):
    loop = asyncio.get_running_loop()
    for (pid, epoch), parts in missing.items():
        fut = loop.create_future()
        ctx.broker.txn.add_partitions(request.transactional_id, pid, epoch, parts,
                                      lambda err, fut=fut: fut.done() or fut.set_result(err), tv2=True)
        await fut  # on an error the append below is refused by verification, with its code
    result = _append_all(ctx, request)
    return (await result.awaitable) if isinstance(result, Applied) else result


def _append_all(ctx, request, denied=None, remote=None):
    """Append every partition; ``denied`` (see :func:`_denied`) answers partitions refused by
    the ACLs with their code, writing nothing of them; ``remote``: see :func:`_txn_verifier`."""
    acks = request.acks
    now_ms = ctx.broker.clock()
    verify_txn = _txn_verifier(ctx.broker.txn, request.transactional_id, ctx.api_version, remote)
    outcome: list[tuple[object, list[_PartitionAnswer]]] = []
    pending = []
    for topic_data in request.topic_data:
        parts = []
        for pd in topic_data.partition_data:
            entry = _PartitionAnswer(pd.index)
            if denied is not None and (not isinstance(denied, set) or topic_data.name in denied):
                entry.error_code = denied if not isinstance(denied, set) else _authz.TOPIC_DENIED
                parts.append(entry)
                continue
            try:
                if topic_data.name is None:  # v13: Kafka's UNKNOWN_TOPIC_ID, before the records are looked at
                    raise errors.UnknownTopicId(f"no topic with id {topic_data.topic_id}")
                if ctx.broker.partition_exists(topic_data.name, pd.index):
                    check_one_batch(ctx.api_version, pd.records)
                if acks not in (0, 1, -1):
                    raise errors.InvalidRequiredAcks(f"acks must be 0, 1 or -1, not {acks}")
                base, start, durable, append_time = append_partition(ctx, topic_data.name, pd.index, pd.records,
                                                                     now_ms, acks, verify_txn)
                entry.base_offset, entry.log_start_offset, entry.log_append_time = base, start, append_time
                if durable is not None:
                    pending.append(durable)
            except errors.KafkaError as exc:
                entry.error_code = errors.error_code_for(exc)
                # set by the partition for record/state errors
                entry.log_start_offset = getattr(exc, "log_start_offset", -1)
                entry.error_message = str(exc) or None
                entry.record_errors = exc.record_errors
                log_rejection(ctx, exc, entry.error_code)
            parts.append(entry)
        outcome.append((topic_data, parts))
    if acks == 0:
        # Kafka's KafkaApis.handleProduceRequest: no response; an error closes the connection.
        failed = [f"{t.name or t.topic_id}-{e.index}: {e.error_code.name.upper()}"
                  for t, parts in outcome for e in parts if e.error_code != OK]
        return CloseConnection(f"acks=0 Produce failed ({', '.join(failed)})") if failed else None
    if not pending:
        return _response(ctx, outcome)
    # Appended: only the wait for durability is left.
    return Applied(_respond_when_durable(ctx, outcome, pending, request.timeout.total_seconds()))


async def _respond_when_durable(ctx, outcome, pending, timeout_s):
    try:
        await _await_durable(pending, max(timeout_s, 0.001))
    except (errors.KafkaStorageError, asyncio.TimeoutError) as exc:
        from kio.schema.errors import ErrorCode

        storage = isinstance(exc, errors.KafkaStorageError)
        code = ErrorCode.kafka_storage_error if storage else ErrorCode.request_timed_out
        for _, parts in outcome:
            for entry in parts:
                if entry.error_code == OK:
                    entry.error_code, entry.error_message = code, "not acknowledged: data not known to be on disk"
    return _response(ctx, outcome)


def _response(ctx, outcome):
    m = response_module(API_KEY, ctx.api_version)
    record_error = getattr(m, "BatchIndexAndErrorMessage", None)  # v8+
    topics = tuple(
        build(
            m.TopicProduceResponse, name=t.name, topic_id=getattr(t, "topic_id", None),
            partition_responses=tuple(
                build(m.PartitionProduceResponse, index=e.index, error_code=e.error_code, base_offset=e.base_offset,
                      log_append_time=None if e.log_append_time < 0 else _utc(e.log_append_time),
                      log_start_offset=e.log_start_offset, error_message=e.error_message,
                      record_errors=tuple(record_error(batch_index=i, batch_index_error_message=text)
                                          for i, text in e.record_errors) if record_error else ())
                for e in parts
            ),
        )
        for t, parts in outcome
    )
    return build(m.ProduceResponse, responses=topics, throttle_time=NO_THROTTLE)


def _utc(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc)


def log_rejection(ctx, exc, code) -> None:
    # Out-of-order sequences and unknown partitions are a normal part of retries and metadata
    # refreshes: debug. Everything else (fencing, UNKNOWN_PRODUCER_ID, too large, corrupt...)
    # is worth an operator's line, once per client and reason within the notice window.
    if isinstance(exc, (errors.UnknownTopicOrPartition, errors.OutOfOrderSequence)):
        log.debug("produce from %s rejected: %s (%s)", ctx.client_id, exc, code.name)
        return
    notice(log, "produce from client %s (%s) rejected: %s (%s)", ctx.client_id, ctx.peer, exc, code.name.upper(),
           key=("produce", ctx.client_id, code, type(exc)))
