"""Removing unknown tagged fields from a flexible message, so kio can decode it.

The protocol says a receiver skips tagged fields it does not know (KIP-482); kio raises
``KeyError`` instead. This module walks a frame with the schema of kio's classes and copies it
without the unknown tags. It is the slow path: it runs only after kio refused a frame. Asked
to, the same walk also writes negative ``datetime_i64`` values as 0 and says where
(:mod:`.timestamps`, for responses).

It trusts the lengths and counts it reads (its loops and kio's array readers allocate by them):
that is safe only because codec runs it on frames :mod:`.guard` has already bounded.
"""

from __future__ import annotations

import dataclasses
import functools
import struct

from kio._kio_native import get_field_reader, read_unsigned_varint
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

from .records import encode_uvarint

_INT64 = struct.Struct(">q")
_ZERO = _INT64.pack(0)


@functools.cache
def _plan(cls: type, is_header: bool):
    """Per class: (untagged steps as (kind, field name, arg), known tag numbers)."""
    steps = []
    known = set()
    for field in dataclasses.fields(cls):
        tag = get_field_tag(field)
        if tag is not None:
            known.add(int(tag))
            continue
        kind = classify_field(field)
        if isinstance(kind, EntityTupleField):
            steps.append(("array", field.name, kind.type_))
        elif isinstance(kind, EntityField):
            steps.append(("nullable" if is_optional(field) else "entity", field.name, kind.type_))
        elif not kind.is_array and get_schema_field_type(field) == "datetime_i64":
            steps.append(("datetime", field.name, is_optional(field)))
        else:
            steps.append(("primitive", field.name, get_field_reader(cls, field, is_header, False)))
    return steps, frozenset(known)


def strip_unknown_tags(cls: type, buf: bytes, pos: int, out: bytearray, *, is_header: bool = False,
                       negative_timestamps: list | None = None, path: tuple = ()) -> int:
    """Copy one entity of ``cls`` from ``buf[pos:]`` into ``out``, minus unknown tagged
    fields; return the position after it.

    With a list as ``negative_timestamps``, also write each negative ``datetime_i64`` as 0 (kio
    refuses negative instants) and append ``(path, milliseconds)`` to the list for it, the path
    being field names and array indexes from the top entity (:mod:`.timestamps` puts the
    values back). A nullable field's -1 is kept: kio reads it as ``None`` already."""
    steps, known = _plan(cls, is_header)
    flexible = cls.__flexible__
    found = negative_timestamps
    for kind, name, arg in steps:
        if kind == "datetime":
            millis = _INT64.unpack_from(buf, pos)[0]
            if found is not None and millis < 0 and not (arg and millis == -1):
                found.append(((*path, name), millis))
                out += _ZERO
            else:
                out += buf[pos : pos + 8]
            pos += 8
        elif kind == "primitive":
            _, size = arg(buf, pos)
            out += buf[pos : pos + size]
            pos += size
        elif kind == "entity":
            pos = strip_unknown_tags(arg, buf, pos, out, negative_timestamps=found, path=(*path, name))
        elif kind == "nullable":
            marker = buf[pos]
            out.append(marker)
            pos += 1
            if marker != 0xFF:
                pos = strip_unknown_tags(arg, buf, pos, out, negative_timestamps=found, path=(*path, name))
        else:  # array of entities
            if flexible:
                length, size = read_unsigned_varint(buf, pos)
                out += buf[pos : pos + size]
                pos += size
                count = length - 1
            else:
                count = int.from_bytes(buf[pos : pos + 4], "big", signed=True)
                out += buf[pos : pos + 4]
                pos += 4
            for index in range(max(count, 0)):
                pos = strip_unknown_tags(arg, buf, pos, out, negative_timestamps=found, path=(*path, name, index))
    if flexible:
        num_tags, size = read_unsigned_varint(buf, pos)
        pos += size
        kept = bytearray()
        kept_count = 0
        for _ in range(num_tags):
            start = pos
            tag, size = read_unsigned_varint(buf, pos)
            pos += size
            length, size = read_unsigned_varint(buf, pos)
            pos += size + length
            if tag in known:
                kept += buf[start:pos]
                kept_count += 1
        out += encode_uvarint(kept_count) + kept
    return pos
