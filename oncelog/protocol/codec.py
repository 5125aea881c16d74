"""Request decoding and response encoding on kio's message classes, sans-IO.

A request frame is ``RequestHeader`` (v1 or v2, chosen by the message's version) followed by
the body. api_key, api_version and correlation_id sit at the same offsets in both header
versions, so they are peeked with ``struct`` before choosing the classes. Trailing bytes after
the body are tolerated (librdkafka sends some on Metadata).

Before kio sees a frame, :func:`.guard.check_request` walks it with the same schema and
refuses any array, string or bytes length the frame cannot hold: kio's native reader allocates
an array's full declared size up front, and an allocation failure there aborts the process
(see :mod:`.guard`). Every refusal and every error kio raises comes out as :class:`DecodeError`.

kio raises ``KeyError`` on an unknown tagged field, where the protocol says to skip it. We
handle that by retrying the decode on a copy of the frame whose unknown tagged fields have been
removed (:func:`.tags.strip_unknown_tags`) – a slow path that real clients do not hit today.
"""

from __future__ import annotations

import functools
import io
import keyword
import struct
from dataclasses import MISSING, dataclass, fields
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import _serialize as kio_serialize
from kio.serial import entity_reader, entity_writer
from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._introspect import EntityField, EntityTupleField, classify_field, get_field_tag, is_optional
from kio.serial import writers as kio_writers
from kio.serial.writers import write_tagged_field, write_unsigned_varint

from .guard import Refused, check_request
from .tags import strip_unknown_tags

_PEEK = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")

API_VERSIONS_KEY = 18


class DecodeError(ValueError):
    """A frame that cannot be decoded; names the API and version when known."""


@dataclass(frozen=True, slots=True)
class RequestHeaderInfo:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


@functools.cache
def request_class(api_key: int, version: int) -> type:
    return load_request_schema(api_key, version)


@functools.cache
def response_class(api_key: int, version: int) -> type:
    return load_response_schema(api_key, version)


@functools.cache
def reader(cls: type):
    return entity_reader(cls)


@functools.cache
def writer(cls: type):
    """The response writer: kio's, byte for byte, without its per-entity costs (see
    :func:`_entity_writer`)."""
    return _entity_writer(cls)


def kio_writer(cls: type):
    """kio's own writer (the reference :func:`writer` is checked against)."""
    return entity_writer(cls)


@functools.cache
def _entity_writer(entity_type: type, nullable: bool = False):
    """kio's ``entity_writer`` (kio.serial._serialize), writing the same bytes, with the costs
    it pays on every entity of every response taken out: the entity's fields are written by a
    function generated for its class, in which each run of fixed-size fields (integers, error
    codes, booleans, durations, times: kio's formats and conversions) is one ``struct.pack``; a
    flexible entity whose tagged fields are all at their defaults (nearly always) ends with a
    single 0 byte where kio opens an ``io.BytesIO`` for its tags. Other primitive fields use
    kio's field writers or :data:`_SAME_BYTES`; nested entities and arrays of them use this
    function's writers. Field names come from kio's schemas, never from the wire."""
    flexible = entity_type.__flexible__
    is_request_header = entity_type.__name__ == "RequestHeader"
    plain, tagged = [], []
    for field in fields(entity_type):
        tag = get_field_tag(field)
        field_writer = _field_writer(field, flexible, is_request_header, tag is not None)
        if tag is not None:
            tagged.append((tag, field, field_writer, get_tagged_field_default(field)))
        else:
            plain.append((field, field_writer))
    if tagged and not flexible:
        raise ValueError("Found tagged fields on a non-flexible model")
    tagged.sort(key=lambda t: t[0])
    tagged_fields = tuple(tagged)

    def write_tags(buffer, entity) -> None:
        present = []
        for tag, field, field_writer, implicit_default in tagged_fields:
            value = getattr(entity, field.name)
            # kio's test for a default-valued (hence omitted) tagged field, as it is written
            if value == field.default or (field.default == MISSING and value == implicit_default):
                continue
            present.append((tag, field_writer, value))
        if not present:
            buffer.write(b"\x00")
            return
        with io.BytesIO() as tag_buffer:
            for tag, field_writer, value in present:
                write_tagged_field(buffer=tag_buffer, tag=tag, writer=field_writer, value=value)
            write_unsigned_varint(buffer, len(present))
            buffer.write(tag_buffer.getvalue())

    # The fields in order, as Python source: a run of fixed-size fields is one struct.pack.
    namespace: dict[str, Any] = {"round": round, "_write_tags": write_tags}
    lines, run_format, run_values = [], [], []

    def end_run() -> None:
        if run_format:
            name = f"_s{len(namespace)}"
            namespace[name] = struct.Struct(">" + "".join(run_format))
            lines.append(f"    buffer.write({name}.pack({', '.join(run_values)}))")
            run_format.clear()
            run_values.clear()

    for field, field_writer in plain:
        value = f"entity.{field.name}" if _plain_name(field.name) else f"getattr(entity, {field.name!r})"
        fixed = _FIXED.get(_kio_primitive_writer(field, flexible, is_request_header))
        if fixed is not None:
            run_format.append(fixed[0])
            run_values.append(fixed[1].format(value))
            continue
        end_run()
        name = f"_w{len(namespace)}"
        namespace[name] = field_writer
        lines.append(f"    {name}(buffer, {value})")
    end_run()
    if flexible:
        lines.append("    _write_tags(buffer, entity)" if tagged_fields else "    buffer.write(b'\\x00')  # no tagged fields")
    source = "def write_entity(buffer, entity):\n" + ("\n".join(lines) or "    pass") + "\n"
    exec(compile(source, f"<response writer {entity_type.__name__}>", "exec"), namespace)
    write_entity = namespace["write_entity"]

    return kio_serialize._wrap_nullable(write_entity) if nullable else write_entity


def _plain_name(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name)


def _kio_primitive_writer(field, flexible: bool, is_request_header: bool):
    """kio's writer of a (non-tagged) primitive field; None for entities and arrays."""
    if isinstance(classify_field(field), (EntityField, EntityTupleField)):
        return None
    return kio_serialize.get_field_writer(field, flexible=flexible, is_request_header=is_request_header, is_tag=False)


def _field_writer(field, flexible: bool, is_request_header: bool, is_tag: bool):
    """kio's ``get_field_writer``, with entity fields written by :func:`_entity_writer` and
    kio's commonest primitive writers replaced by equivalents (:data:`_SAME_BYTES`)."""
    field_class = classify_field(field)
    if isinstance(field_class, EntityField):
        optional = False if is_tag else is_optional(field)
        return _entity_writer(field_class.type_, nullable=optional)
    if isinstance(field_class, EntityTupleField):
        return (_compact_array if flexible else _legacy_array)(_entity_writer(field_class.type_))
    kio_field_writer = kio_serialize.get_field_writer(field, flexible=flexible, is_request_header=is_request_header,
                                                      is_tag=is_tag)
    return _SAME_BYTES.get(kio_field_writer, kio_field_writer)


# kio's primitive writers validate a length by building a phantom-typed integer (uvarint(n),
# i32(n)) on every call. These write the same bytes, and leave anything unusual (a length
# past one varint byte, a None where kio raises) to kio's writer.
_ONE_BYTE = [bytes([i]) for i in range(128)]
_I8, _I16, _I32, _I64 = struct.Struct(">b"), struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")
_NULL_LEGACY_ARRAY = _I32.pack(-1)
_I32_MAX = (1 << 31) - 1


def _compact_array(item_writer):
    def write_compact_array(buffer, items) -> None:
        if items is None:
            buffer.write(b"\x00")
            return
        n = len(items) + 1
        if n < 128:
            buffer.write(_ONE_BYTE[n])
        else:
            kio_writers.write_compact_array_length(buffer, len(items))
        for item in items:
            item_writer(buffer, item)

    return write_compact_array


def _legacy_array(item_writer):
    kio_array = kio_writers.legacy_array_writer(item_writer)

    def write_legacy_array(buffer, items) -> None:
        if items is None:
            buffer.write(_NULL_LEGACY_ARRAY)
            return
        if len(items) > _I32_MAX:
            kio_array(buffer, items)  # raises as kio does
            return
        buffer.write(_I32.pack(len(items)))
        for item in items:
            item_writer(buffer, item)

    return write_legacy_array


def _nullable_compact_string(buffer, value) -> None:
    if value is None:
        buffer.write(b"\x00")
        return
    if isinstance(value, str):
        value = value.encode()
    n = len(value) + 1
    if n < 128:
        buffer.write(_ONE_BYTE[n])
        buffer.write(value)
    else:
        kio_writers.write_nullable_compact_string(buffer, value)


def _compact_string(buffer, value) -> None:
    if value is None:
        kio_writers.write_compact_string(buffer, value)  # raises as kio does
    _nullable_compact_string(buffer, value)


# kio's writers of fixed-size fields: struct format and the value written (kio.serial.writers).
_FIXED = {
    kio_writers.write_int8: ("b", "{}"), kio_writers.write_int16: ("h", "{}"),
    kio_writers.write_int32: ("i", "{}"), kio_writers.write_int64: ("q", "{}"),
    kio_writers.write_uint8: ("B", "{}"), kio_writers.write_uint16: ("H", "{}"),
    kio_writers.write_uint32: ("I", "{}"), kio_writers.write_uint64: ("Q", "{}"),
    kio_writers.write_boolean: ("?", "{}"), kio_writers.write_float64: ("d", "{}"),
    kio_writers.write_error_code: ("h", "{}.value"),
    kio_writers.write_timedelta_i32: ("i", "round({}.total_seconds() * 1000)"),
    kio_writers.write_timedelta_i64: ("q", "round({}.total_seconds() * 1000)"),
    kio_writers.write_datetime_i64: ("q", "round({}.timestamp() * 1000)"),
}

_SAME_BYTES = {
    kio_writers.write_int8: lambda buffer, value: buffer.write(_I8.pack(value)),
    kio_writers.write_int16: lambda buffer, value: buffer.write(_I16.pack(value)),
    kio_writers.write_int32: lambda buffer, value: buffer.write(_I32.pack(value)),
    kio_writers.write_int64: lambda buffer, value: buffer.write(_I64.pack(value)),
    kio_writers.write_error_code: lambda buffer, value: buffer.write(_I16.pack(value.value)),
    kio_writers.write_nullable_compact_string: _nullable_compact_string,
    kio_writers.write_compact_string: _compact_string,
}


def peek_header(frame: bytes) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) without decoding the rest."""
    if len(frame) < 8:
        raise DecodeError(f"request of {len(frame)} bytes is shorter than a request header")
    return _PEEK.unpack_from(frame, 0)


def decode_request(frame: bytes, api_key: int, api_version: int) -> tuple[RequestHeaderInfo, Any]:
    """Decode header and body of a request whose (key, version) the caller has checked."""
    cls = request_class(api_key, api_version)
    header_cls = cls.__header_schema__
    try:
        check_request(cls, frame)
    except Refused as exc:
        raise DecodeError(f"cannot decode {cls.__name__} v{api_version}: {exc}") from None
    try:
        try:
            header, used = reader(header_cls)(frame, 0)
            body, _ = reader(cls)(frame, used)
        except KeyError:
            # Slow path: an unknown tagged field. Copy the frame without them and retry.
            clean = bytearray()
            pos = strip_unknown_tags(header_cls, frame, 0, clean, is_header=True)
            strip_unknown_tags(cls, frame, pos, clean)
            clean = bytes(clean)
            header, used = reader(header_cls)(clean, 0)
            body, _ = reader(cls)(clean, used)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # kio raises assorted errors on garbage; a Rust panic is a BaseException
        raise DecodeError(f"cannot decode {cls.__name__} v{api_version}: {exc!r}") from exc
    info = RequestHeaderInfo(api_key, api_version, header.correlation_id, getattr(header, "client_id", None))
    return info, body


class ChunkWriter:
    """A write-only sink for kio's writers that keeps large payloads (record batches) by
    reference instead of copying them through a BytesIO."""

    __slots__ = ("chunks", "_small")
    LARGE = 4096

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self._small = bytearray()

    def write(self, data) -> int:
        n = len(data)
        if n >= self.LARGE:
            if self._small:
                self.chunks.append(bytes(self._small))
                self._small.clear()
            self.chunks.append(data)
        else:
            self._small += data
        return n

    def finish(self) -> list[bytes]:
        if self._small:
            self.chunks.append(bytes(self._small))
            self._small = bytearray()
        return self.chunks


def encode_response(correlation_id: int, response: Any, *, header_v0: bool = False) -> list[bytes]:
    """Encode header + body and prefix the size; returns chunks ready for ``writelines``."""
    cls = type(response)
    out = ChunkWriter()
    header_cls = cls.__header_schema__
    if header_v0 or header_cls.__version__ == 0:
        out.write(_SIZE.pack(correlation_id))
    else:
        out.write(_SIZE.pack(correlation_id) + b"\x00")  # header v1: correlation id + no tags
    writer(cls)(out, response)
    chunks = out.finish()
    total = sum(len(c) for c in chunks)
    return [_SIZE.pack(total), *chunks]
