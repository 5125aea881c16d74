"""Checks of a client's batches against the topic's :class:`~oncelog.storage.partition_log.LogConfig`.

Step 1 of :meth:`oncelog.partition.Partition.append` for a Produce request's records: the one
place where "may these batches go into this topic as they are" is decided. Every check here is
header-only and runs before anything is written; the first failure rejects the partition's
whole records field with a domain error (:mod:`oncelog.errors`), mapped to its wire code by the
Produce handler:

* a null or malformed records field: length, magic, CRC32C, record count — CORRUPT_MESSAGE
  for damage, INVALID_RECORD for what a producer could not have meant;
* a batch larger than ``max.message.bytes`` — MESSAGE_TOO_LARGE;
* a control batch (only the transaction coordinator writes markers) — INVALID_RECORD.

Checks that need more than the headers and the config get what they need as arguments: the
request's ``acks`` (min.insync.replicas), the append time ``now_ms`` (timestamp bounds).

The broker's own writes (markers, ``__consumer_offsets``, ``__transaction_state``) are built by
the broker and do not come through here.
"""

from __future__ import annotations

from .. import errors
from ..protocol import records as rb
from ..storage.partition_log import LogConfig


def validate(records, config: LogConfig, *, acks: int, now_ms: int, name: str) -> list[rb.BatchHeader]:
    """The batch headers of ``records``, once every check of a client append passed;
    ``name`` is the partition's ``topic-index`` for messages."""
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
