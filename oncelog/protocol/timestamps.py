"""Decoding a message whose ``datetime_i64`` fields hold negative values, which kio refuses.

Kafka writes -1 in a timestamp field for "no time": DescribeTransactions' ``transaction_start_time``
of a transactional id in state Empty (Apache Kafka and oncelog alike), Produce's
``log_append_time_ms`` under CreateTime. kio 0.6.5 reads a ``datetime_i64`` as a non-negative
instant: its nullable reader maps -1 to ``None``, but a non-nullable field with -1 (and any field
with another negative value) raises ``OutOfBoundValue("Cannot parse negative timestamp")``.

:func:`decode_with_negative_timestamps` is the slow path that runs only after kio refused a frame.
It walks the frame with the schema of kio's classes (:func:`.tags.strip_unknown_tags`, the one walker
for both), copies it with every negative ``datetime_i64`` rewritten to 0 and unknown tagged fields dropped (KIP-482 says a receiver
skips them; kio raises ``KeyError``), remembers where it rewrote, decodes the copy with kio, and
puts back at each place the value Kafka meant:

- -1 becomes ``None``: Kafka's null timestamp, and what kio itself returns for -1 in a nullable
  ``datetime_i64`` — one spelling of "no time" for every field, that callers test with
  ``is None``. A sentinel datetime (oncelog's server writes -1 as one millisecond before the epoch)
  would read as a real instant in 1969 and pass unnoticed through arithmetic; ``None`` fails loudly
  where a time is required. kio's dataclasses do not check types on construction, so ``None``
  fits a field typed ``TZAware``; the one cost is that kio cannot re-encode such a message (its
  non-nullable writer calls ``.timestamp()``) — decoded responses are read, not re-sent.
- another negative value (no Kafka field defines one) becomes the exact UTC instant before the
  epoch it encodes, so nothing is lost.

Invariants: the copy has the same layout as the frame except for dropped unknown tags, so kio's
decode of the copy differs from the frame's meaning only at the recorded paths; a path is a tuple of
field names and array indexes from the top entity. Tagged fields are copied as they are (no kio
response declares a ``datetime_i64`` tagged field). Like :mod:`.tags`, it trusts the lengths and
counts it reads: use it on responses from a broker the caller connected to, or on bounded frames.
"""

from __future__ import annotations

import dataclasses
import datetime

from .tags import strip_unknown_tags

# A place in a decoded message: field names and array indexes from the top entity.
Path = tuple[str | int, ...]


def meant(millis: int) -> datetime.datetime | None:
    """The value Kafka means by a negative ``datetime_i64``: ``None`` for -1, else the instant."""
    if millis == -1:
        return None
    return datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(milliseconds=millis)


def _replace(obj, path: Path, value):
    """``obj`` (a kio entity or a tuple of them) with the field at ``path`` set to ``value``."""
    head, rest = path[0], path[1:]
    if isinstance(head, int):
        items = list(obj)
        items[head] = _replace(items[head], rest, value)
        return tuple(items)
    if not rest:
        return dataclasses.replace(obj, **{head: value})
    return dataclasses.replace(obj, **{head: _replace(getattr(obj, head), rest, value)})


def decode_with_negative_timestamps(cls: type, read, frame: bytes, pos: int):
    """Decode the entity of ``cls`` at ``frame[pos:]`` with kio's reader ``read`` (for ``cls``),
    reading each negative ``datetime_i64`` as :func:`meant` says and skipping unknown tags."""
    clean = bytearray()
    found: list[tuple[Path, int]] = []
    strip_unknown_tags(cls, frame, pos, clean, negative_timestamps=found)
    entity, _ = read(bytes(clean), 0)
    for path, millis in found:
        entity = _replace(entity, path, meant(millis))
    return entity
