"""A client's batches against the topic's :class:`~oncelog.storage.partition_log.LogConfig`
(Kafka's Partition.appendRecordsToLeader and LogValidator).

Step 1 of :meth:`oncelog.partition.Partition.append` for a Produce request's records: the one
place where "may these batches go into this topic as they are" is decided. Every check runs
before anything is written; the first failure rejects the partition's whole records field with
a domain error (:mod:`oncelog.errors`), mapped to its wire code by the Produce handler.

:func:`scan` — the headers, no record is read:

* a null or malformed records field: length, magic, CRC32C, codec (0-4), record count —
  CORRUPT_MESSAGE for damage, INVALID_RECORD for what a producer could not have meant;
* a batch larger than ``max.message.bytes`` — MESSAGE_TOO_LARGE;
* a control batch (only the transaction coordinator writes markers) — INVALID_RECORD.

(The partition then has the transactional batches verified with the transaction coordinator.)

:func:`validate` — what needs the request or the records themselves:

* a client batch's base offset must be 0 (INVALID_RECORD, as Kafka 4.4 answers);
* ``min.insync.replicas`` is capped at the replication factor, 1 (Kafka's
  Partition.effectiveMinIsr since KIP-966): acks=all never gets NOT_ENOUGH_REPLICAS;
* every record of every batch, as Kafka's LogValidator reads it through DefaultRecord.readFrom
  (:func:`oncelog.protocol.records.check_records`): record lengths, key/value/header sizes,
  header count and keys, offset deltas 0..n-1, exactly recordCount records and no trailing
  bytes, a compressed payload that decompresses — INVALID_RECORD with Kafka's message (the
  offset delta error names its record in KIP-467 ``record_errors``); a compressed batch whose
  records decompress to more than min(64 x ``max.message.bytes``, 256 MiB) — MESSAGE_TOO_LARGE;
* ``cleanup.policy=compact`` refuses records without a key, and ``message.timestamp.*``
  refuses CreateTime records out of bounds (and LogAppendTime batches on a CreateTime topic) —
  INVALID_RECORD / INVALID_TIMESTAMP with per-record errors (KIP-467 ``record_errors``: the
  index of the record in its batch). The records' keys and timestamps are kept from the walk
  only when a config needs them: the timestamp bounds are first checked against the batch
  header's max timestamp.

:func:`recompress` — the one conversion, after the producer-state check and before the write:
``compression.type`` other than ``producer`` recompresses batches of another codec.

The broker's own writes (markers, ``__consumer_offsets``, ``__transaction_state``) are built by
the broker and do not come through here.
"""

from __future__ import annotations

from .. import errors
from ..config.registry import LONG_MAX
from ..protocol import records as rb
from ..config.settings import LogConfig


def scan(records, config: LogConfig, *, name: str) -> list[rb.BatchHeader]:
    """The batch headers of ``records`` once the header checks passed; ``name`` is the
    partition's ``topic-index`` for messages."""
    if records is None:
        raise errors.InvalidRecord("records field is null")
    try:
        batches = rb.scan_batches(records, max_batch_bytes=config.max_message_bytes)
    except rb.BatchTooLarge as exc:
        raise errors.MessageTooLarge(str(exc)) from None
    except rb.InvalidBatch as exc:
        cls = errors.CorruptMessage if exc.corrupt else errors.InvalidRecord
        raise cls(f"{name}: {exc.reason}") from None
    for header in batches:
        if header.is_control:
            raise errors.InvalidRecord(f"{name}: clients may not write control batches")
    return batches


def validate(records, batches: list[rb.BatchHeader], config: LogConfig, *, acks: int, now_ms: int, name: str,
             node_id: int) -> None:
    """The checks that need the append time or the records. ``acks`` and ``node_id`` name what
    Kafka's min-ISR check reads: with one replica its effective minimum (min.insync.replicas
    capped at the replication factor) is always met."""
    for header in batches:
        if header.base_offset != 0:
            # Kafka 4.4 refuses it (INVALID_RECORD, with the partition's log start offset)
            raise errors.InvalidRecord(f"The baseOffset of the record batch in the append to {name} should be 0, "
                                       f"but it is {header.base_offset}")
    _validate_records(config, records, batches, now_ms, name)


def _validate_records(cfg: LogConfig, records, batches: list[rb.BatchHeader], now_ms: int, tp: str) -> None:
    """Kafka's LogValidator: every record of every batch is read (decompressed within the
    topic's limit, :func:`oncelog.protocol.records.decompressed_limit`) and its structure checked
    (:func:`oncelog.protocol.records.walk_records`); then, where the topic's config asks, keys
    on compacted topics and CreateTime timestamps within [now - before.max, now + after.max].
    The first batch with bad records fails the partition with its record errors."""
    compacted = cfg.compact
    create_time = cfg.message_timestamp_type == "CreateTime"
    before, after = cfg.message_timestamp_before_max_ms, cfg.message_timestamp_after_max_ms
    limit = rb.decompressed_limit(cfg.max_message_bytes)
    for h in batches:
        log_append_batch = bool(h.attributes & rb.ATTR_TIMESTAMP_TYPE)
        # The records' keys and timestamps are kept only when a config needs them: the timestamp
        # bounds are first checked against the batch header's max timestamp.
        need = (compacted or (log_append_batch and not create_time)
                or (create_time and (before < LONG_MAX or h.max_timestamp - now_ms > after)))
        metas: list | None = [] if need else None
        try:
            rb.check_records(records, h, limit=limit, metas=metas)
        except rb.RecordsTooLarge as exc:
            raise errors.MessageTooLarge(f"{tp}: {exc.reason}") from None
        except rb.InvalidBatch as exc:
            err = errors.InvalidRecord(f"{tp}: {exc.reason}")
            err.record_errors = exc.record_errors
            raise err from None
        if not need:
            continue
        problems: list[tuple[int, str]] = []
        bad_timestamp = False
        for index, (ts_delta, has_key) in enumerate(metas):
            ts = h.max_timestamp if log_append_batch else h.base_timestamp + ts_delta
            if compacted and not has_key:
                problems.append((index, f"Compacted topic cannot accept message without key in topic partition {tp}"))
            elif create_time and ts != -1:
                if now_ms - ts > before or ts - now_ms > after:
                    bad_timestamp = True
                    problems.append((index, f"Timestamp {ts} of message with offset {index} is out of range. The "
                                            f"timestamp should be within [{now_ms - before}, {now_ms + after}]"))
            elif log_append_batch:
                bad_timestamp = True
                problems.append((index, f"Invalid timestamp type in message with offset {index}. Producer should "
                                        "not set timestamp type to LogAppendTime."))
        if problems:
            if bad_timestamp:
                exc = errors.InvalidTimestamp("One or more records have been rejected due to invalid timestamp")
            else:
                shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in problems[:3])
                exc = errors.InvalidRecord(f"One or more records have been rejected due to {len(problems)} record "
                                           f"errors in total, and only showing the first three errors at most: [{shown}]")
            exc.record_errors = tuple(problems)
            raise exc


def recompress(cfg: LogConfig, records, batches: list[rb.BatchHeader]):
    """compression.type: batches of another codec are recompressed (Kafka's LogValidator
    recompresses too when the topic's codec differs from the producer's); the result must
    still fit max.message.bytes. Returns (records, batches), unchanged when nothing differs."""
    codec = rb.CODEC_NAMES[cfg.compression_type]
    if all(h.compression == codec for h in batches):
        return records, batches
    limit = rb.decompressed_limit(cfg.max_message_bytes)
    level = {rb.COMPRESSION_GZIP: cfg.compression_gzip_level, rb.COMPRESSION_LZ4: cfg.compression_lz4_level,
             rb.COMPRESSION_ZSTD: cfg.compression_zstd_level}.get(codec)
    out = bytearray()
    for h in batches:
        batch = records[h.position : h.position + h.size]
        out += batch if h.compression == codec else rb.recompress_batch(batch, codec, level, limit)
    data = bytes(out)
    try:
        return data, rb.scan_batches(data, max_batch_bytes=cfg.max_message_bytes, verify_crc=False)
    except rb.BatchTooLarge as exc:
        raise errors.MessageTooLarge(f"{exc} after recompression to {cfg.compression_type}") from None
