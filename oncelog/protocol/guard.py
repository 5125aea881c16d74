"""A pre-scan of every request frame, so that decoding it cannot over-allocate.

kio 0.6.5's native reader sizes each array with ``Vec::with_capacity(count)`` straight from
the count on the wire, before reading a single element: a 20-byte Metadata v12 frame that
declares 2^32-2 topics makes it ask for 34 GB, and the allocation failure aborts the whole
process (SIGABRT, no Python exception). A legacy int32 count of 2^31-1 asks for 16 GiB, which
aborts too wherever memory is capped. kio's string/bytes readers are safe: they compare the
declared length with the buffer before slicing, and so are its tagged-field and varint loops.

:func:`check_request` walks a frame with the schema of kio's classes exactly as kio will read
it, without building anything, and refuses (:class:`Refused`, which names the field) before kio
runs when:

- an array declares more elements than the bytes left could hold (each element takes at
  least its schema's minimum size: Kafka's generated readers check ``count > remaining()``),
  or more than :data:`MAX_ARRAY_ELEMENTS` (Kafka's cap on a single array); the request as a
  whole may hold at most :data:`MAX_REQUEST_ELEMENTS` elements, which bounds the Python objects
  one request can make kio build (~100 B each) whatever the frame size;
- a string, bytes or records field, or a tagged field, declares more bytes than are left;
- a tagged-field section declares more fields than the bytes left could hold (2 bytes each),
  or a known tagged field's content does not fill exactly its declared size;
- a length or count is negative other than -1 (null), or a varint runs past 5 bytes.

Responses are bytes from the network too: the project's protocol client (oncelog.client.wire,
under the admin commands, the auditor and the Spark connector) runs :func:`check_response` on
every response before kio, so a broken or hostile broker's frame is an error, not an abort.

The walk is generated once per request class as straight-line Python (nested entities
inlined, fixed-size fields merged into one ``pos +=``), so a small Produce costs about a
microsecond. Unknown tagged fields are skipped by their declared size; codec then strips them
(:mod:`.tags`) on the frame the guard has already bounded. Trailing bytes are not checked:
librdkafka sends some.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

#: Kafka refuses a single array of more elements than this.
MAX_ARRAY_ELEMENTS = 1_000_000
#: All arrays of one request together (real clients send at most tens of thousands).
MAX_REQUEST_ELEMENTS = 1_000_000

_FIXED = {
    "int8": 1, "int16": 2, "int32": 4, "int64": 8,
    "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8,
    "float64": 8, "bool": 1, "uuid": 16, "error_code": 2,
    "timedelta_i32": 4, "timedelta_i64": 8, "datetime_i64": 8,
}
_VARIABLE = {"string", "bytes", "records"}


class Refused(ValueError):
    """A frame the guard refuses; the message names the field and what is wrong."""


# ---------------------------------------------------------------- helpers called by the walk

def _uvarint(buf, pos: int, path: str) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes, as kio reads it; (value, new position)."""
    value = 0
    for i in range(5):
        b = buf[pos + i]
        value |= (b & 0x7F) << (7 * i)
        if b < 0x80:
            return value, pos + i + 1
    raise Refused(f"{path}: varint longer than 5 bytes")


def _array_too_big(path: str, count: int, min_size: int, left: int, budget: int) -> None:
    if count * min_size > left:
        each = "" if min_size == 1 else f" (at least {min_size} bytes each)"
        raise Refused(f"{path}: array of {count} elements{each} but {max(left, 0)} bytes left")
    if count > MAX_ARRAY_ELEMENTS:
        raise Refused(f"{path}: array of {count} elements exceeds the limit of {MAX_ARRAY_ELEMENTS}")
    raise Refused(f"{path}: array of {count} elements takes the request over "
                  f"{MAX_REQUEST_ELEMENTS} elements in all")


def _too_long(path: str, what: str, length: int, left: int) -> None:
    raise Refused(f"{path}: {what} of {length} bytes but {max(left, 0)} bytes left")


def _negative(path: str, what: str, value: int) -> None:
    raise Refused(f"{path}: negative {what} {value}")


def _tag_count(path: str, count: int, left: int) -> None:
    raise Refused(f"{path}: {count} tagged fields but {max(left, 0)} bytes left")


def _skip_tags(buf, pos: int, path: str) -> int:
    """Past a tagged-field section none of whose tags the walk needs to look into."""
    end = len(buf)
    count, pos = _uvarint(buf, pos, path + " tags")
    if count * 2 > end - pos:
        _tag_count(path, count, end - pos)
    for _ in range(count):
        _, pos = _uvarint(buf, pos, path + " tag")
        size, pos = _uvarint(buf, pos, path + " tag size")
        if size > end - pos:
            _too_long(path + " tagged field", "tagged field", size, end - pos)
        pos += size
    return pos


def _tag_size(path: str, tag: int, declared: int, used: int) -> None:
    raise Refused(f"{path}: tagged field {tag} declares {declared} bytes but its value takes {used}")


# ---------------------------------------------------------------- schema → plan

@dataclasses.dataclass(frozen=True)
class _Prim:
    kafka_type: str
    flexible: bool


@dataclasses.dataclass(frozen=True)
class _Entity:
    cls: type
    nullable: bool


@dataclasses.dataclass(frozen=True)
class _Array:
    item: object  # _Prim or _Entity
    flexible: bool


def _field_kind(cls: type, field: dataclasses.Field, is_header: bool, tagged: bool):
    """What kio's build_field_schema makes of ``field`` (same rules, same order)."""
    flexible = cls.__flexible__
    if is_header and field.name == "client_id":
        return _Prim("header_client_id", flexible)
    kind = classify_field(field)
    if isinstance(kind, EntityTupleField):
        return _Array(_Entity(kind.type_, False), flexible)
    if isinstance(kind, PrimitiveTupleField):
        return _Array(_Prim(get_schema_field_type(field), flexible), flexible)
    if isinstance(kind, EntityField):
        return _Entity(kind.type_, is_optional(field))
    return _Prim(get_schema_field_type(field), flexible)


def _fields(cls: type, is_header: bool):
    """(untagged kinds, {tag: kind}) for one entity class, with kio's RequestHeader rule."""
    is_header = is_header and cls.__name__ == "RequestHeader"
    plain, tagged = [], {}
    for field in dataclasses.fields(cls):
        tag = get_field_tag(field)
        kind = _field_kind(cls, field, is_header, tag is not None)
        if tag is None:
            plain.append((field.name, kind))
        else:
            tagged[int(tag)] = (field.name, kind)
    return plain, tagged


@functools.cache
def _min_size(kind) -> int:
    """Fewest bytes a value of ``kind`` takes on the wire."""
    if isinstance(kind, _Prim):
        if kind.kafka_type in _FIXED:
            return _FIXED[kind.kafka_type]
        if kind.kafka_type == "header_client_id":
            return 2
        if kind.flexible:
            return 1
        return 2 if kind.kafka_type == "string" else 4
    if isinstance(kind, _Array):
        return 1 if kind.flexible else 4
    if kind.nullable:
        return 1
    plain, _ = _fields(kind.cls, False)
    return sum(_min_size(k) for _, k in plain) + (1 if kind.cls.__flexible__ else 0)


# ---------------------------------------------------------------- plan → Python source

class _Gen:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.pending = 0  # fixed-size bytes not yet added to pos

    def emit(self, depth: int, line: str) -> None:
        self.lines.append("    " * depth + line)

    def flush(self, depth: int) -> None:
        if self.pending:
            self.emit(depth, f"pos += {self.pending}")
            self.pending = 0

    # -- readers of lengths, leaving the value in ``n``
    def uvarint(self, depth: int, path: str) -> None:
        self.emit(depth, "b = buf[pos]")
        self.emit(depth, "if b < 128:")
        self.emit(depth + 1, "n = b; pos += 1")
        self.emit(depth, "else:")
        # Two bytes inline too: a record batch of 128 B..16 KiB has a 2-byte length.
        self.emit(depth + 1, "c = buf[pos + 1]")
        self.emit(depth + 1, "if c < 128:")
        self.emit(depth + 2, "n = (b & 127) | c << 7; pos += 2")
        self.emit(depth + 1, "else:")
        self.emit(depth + 2, f"n, pos = _uvarint(buf, pos, {path!r})")

    def int16(self, depth: int) -> None:
        self.emit(depth, "n = buf[pos] << 8 | buf[pos + 1]; pos += 2")
        self.emit(depth, "if n >= 32768: n -= 65536")

    def int32(self, depth: int) -> None:
        self.emit(depth, "n = buf[pos] << 24 | buf[pos + 1] << 16 | buf[pos + 2] << 8 | buf[pos + 3]; pos += 4")
        self.emit(depth, "if n >= 2147483648: n -= 4294967296")

    # -- one value of ``kind`` at ``pos``
    def value(self, kind, depth: int, path: str) -> None:
        if isinstance(kind, _Prim):
            self.prim(kind, depth, path)
        elif isinstance(kind, _Array):
            self.array(kind, depth, path)
        else:
            self.entity(kind, depth, path)

    def prim(self, kind: _Prim, depth: int, path: str) -> None:
        t = kind.kafka_type
        if t in _FIXED:
            self.pending += _FIXED[t]
            return
        if t not in _VARIABLE and t != "header_client_id":
            raise NotImplementedError(f"{path}: kafka type {t}")
        self.flush(depth)
        what = "string" if t in ("string", "header_client_id") else t
        if kind.flexible and t != "header_client_id":
            self.uvarint(depth, path)
            self.emit(depth, "if n > 1:")
            self.emit(depth + 1, "n -= 1")
        else:
            if what == "string":
                self.int16(depth)
            else:
                self.int32(depth)
            self.emit(depth, "if n < -1:")
            self.emit(depth + 1, f"_negative({path!r}, {what + ' length'!r}, n)")
            self.emit(depth, "if n > 0:")
        self.emit(depth + 1, "if n > end - pos:")
        self.emit(depth + 2, f"_too_long({path!r}, {what!r}, n, end - pos)")
        self.emit(depth + 1, "pos += n")

    def array(self, kind: _Array, depth: int, path: str) -> None:
        self.flush(depth)
        if kind.flexible:
            self.uvarint(depth, path)
            self.emit(depth, "if n > 1:")
            self.emit(depth + 1, "n -= 1")
        else:
            self.int32(depth)
            self.emit(depth, "if n < -1:")
            self.emit(depth + 1, f"_negative({path!r}, 'array length', n)")
            self.emit(depth, "if n > 0:")
        item = kind.item
        size = _min_size(item)
        d = depth + 1
        self.emit(d, f"if n > {MAX_ARRAY_ELEMENTS} or n > budget or n * {size} > end - pos:")
        self.emit(d + 1, f"_array_too_big({path!r}, n, {size}, end - pos, budget)")
        self.emit(d, "budget -= n")
        if isinstance(item, _Prim) and item.kafka_type in _FIXED:
            self.emit(d, f"pos += n * {size}")
            return
        self.emit(d, "for _ in range(n):")
        self.value(item, d + 1, path + "[]")
        self.flush(d + 1)

    def entity(self, kind: _Entity, depth: int, path: str, is_header: bool = False) -> None:
        if kind.nullable:
            self.flush(depth)
            self.emit(depth, "if buf[pos] == 255:")
            self.emit(depth + 1, "pos += 1")
            self.emit(depth, "else:")
            self.emit(depth + 1, "pos += 1")
            depth += 1
        plain, tagged = _fields(kind.cls, is_header)
        prefix = "" if not path else path + "."
        for name, k in plain:
            self.value(k, depth, prefix + name)
        if kind.cls.__flexible__:
            self.tags(tagged, depth, path or kind.cls.__name__)
        self.flush(depth)

    def tags(self, tagged: dict, depth: int, path: str) -> None:
        self.flush(depth)
        if not tagged:
            # Nearly always a single 0 byte; anything else is skipped by declared sizes.
            self.emit(depth, "if buf[pos] == 0:")
            self.emit(depth + 1, "pos += 1")
            self.emit(depth, "else:")
            self.emit(depth + 1, f"pos = _skip_tags(buf, pos, {path!r})")
            return
        self.uvarint(depth, path + " tags")
        self.emit(depth, "if n:")
        d = depth + 1
        self.emit(d, "if n * 2 > end - pos:")
        self.emit(d + 1, f"_tag_count({path!r}, n, end - pos)")
        self.emit(d, "for _ in range(n):")
        d += 1
        self.uvarint(d, path + " tag")
        self.emit(d, "tag = n")
        self.uvarint(d, path + " tag size")
        self.emit(d, "if n > end - pos:")
        self.emit(d + 1, f"_too_long({path + ' tagged field'!r}, 'tagged field', n, end - pos)")
        for i, (tag, (name, k)) in enumerate(sorted(tagged.items())):
            self.emit(d, f"{'elif' if i else 'if'} tag == {tag}:")
            # Nested tagged sections reuse n and tag: keep this level's in names of its own.
            self.emit(d + 1, f"start{d} = pos; size{d} = n")
            self.value(k, d + 1, (path + "." if path else "") + name)
            self.flush(d + 1)
            self.emit(d + 1, f"if pos - start{d} != size{d}:")
            self.emit(d + 2, f"_tag_size({path!r}, {tag}, size{d}, pos - start{d})")
        self.emit(d, "else:")
        self.emit(d + 1, "pos += n")


@functools.cache
def _checker(cls: type) -> Callable:
    """The generated walk of header + body for one request or response class."""
    gen = _Gen()
    gen.emit(0, "def check(buf):")
    gen.emit(1, "end = len(buf); pos = 0; budget = MAX_REQUEST_ELEMENTS")
    gen.entity(_Entity(cls.__header_schema__, False), 1, "", is_header=True)
    gen.entity(_Entity(cls, False), 1, "")
    gen.emit(1, "return pos")
    source = "\n".join(gen.lines)
    namespace = {
        "_uvarint": _uvarint, "_array_too_big": _array_too_big, "_too_long": _too_long,
        "_negative": _negative, "_tag_count": _tag_count, "_tag_size": _tag_size,
        "_skip_tags": _skip_tags,
        "MAX_REQUEST_ELEMENTS": MAX_REQUEST_ELEMENTS,
    }
    exec(compile(source, f"<guard {cls.__name__} v{cls.__version__}>", "exec"), namespace)
    check = namespace["check"]
    check.source = source
    return check


def check_request(cls: type, frame) -> int:
    """Walk ``frame`` (request header + body of ``cls``) as kio will; raise :class:`Refused` if
    decoding it could allocate more than the frame justifies. Returns the end of the body."""
    return _check(cls, frame, "request")


def check_response(cls: type, frame) -> int:
    """:func:`check_request` for a response frame (response header + body of ``cls``)."""
    return _check(cls, frame, "response")


def _check(cls: type, frame, what: str) -> int:
    try:
        end = _checker(cls)(frame)
    except IndexError:
        end = len(frame) + 1
    if end > len(frame):
        raise Refused(f"truncated: the frame of {len(frame)} bytes ends inside the {what}")
    return end
