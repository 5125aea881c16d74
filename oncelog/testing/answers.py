"""Error answers a fault sends instead of the broker's: the response a Kafka broker would give
to a request it refuses as a whole (Kafka's ``AbstractRequest.getErrorResponse``), for any API
and version, built from the request itself.

Kafka writes one ``getErrorResponse`` per request class; the shape is always the same — the
response mirrors the request's topics and partitions, each with the error, and carries the
error at the top where the response has a top-level ``error_code``. This module builds that
shape from the schemas instead (kio's dataclasses): for each field of the response,

* ``error_code`` (and ``partition_error_code`` ...) -> the error; ``error_message`` -> None;
* a key the request has at the same level (a topic's ``name``/``topic``, ``topic_id``, a
  partition's ``partition_index``/``index``/``partition``, a ``group_id``, a ``key`` ...) ->
  copied from the request;
* an array of entities -> one entry per entry of the request's matching array (the one of the
  same name, else the request's only array at that level; an array of plain partition numbers
  becomes entries with those numbers), otherwise empty;
* anything else -> its default, else a neutral value (-1 for offsets, ids and epochs, 0, "",
  empty, null).

An array of plain strings in the request (FindCoordinator's keys, DeleteTopics' names) is
answered as entries whose name or key is that string.

So a Produce fault answers every partition the request named with the error and writes
nothing; a Metadata fault answers each named topic with the error (and no brokers); a
FindCoordinator fault answers each key with the error. Pure: no broker, no I/O.
"""

from __future__ import annotations

import datetime
import uuid
from dataclasses import MISSING, fields, is_dataclass
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._introspect import (EntityField, EntityTupleField, PrimitiveTupleField, classify_field,
                                    get_field_tag, get_schema_field_type, is_optional)

from oncelog.protocol import codec

# A response key -> the request fields that may hold its value at the same level.
_KEYS: dict[str, tuple[str, ...]] = {
    "name": ("name", "topic", "topic_name"),
    "topic": ("topic", "name", "topic_name"),
    "topic_name": ("topic_name", "name", "topic"),
    "topic_id": ("topic_id",),
    "partition_index": ("partition_index", "partition", "index"),
    "partition": ("partition", "partition_index", "index"),
    "index": ("index", "partition_index", "partition"),
    "group_id": ("group_id", "group"),
    "key": ("key",),
    "transactional_id": ("transactional_id",),
    "member_id": ("member_id",),
    "producer_id": ("producer_id",),
    "resource_type": ("resource_type",),
    "resource_name": ("resource_name",),
}
_PARTITION_KEYS = ("partition_index", "partition", "index")
# Keys an entry answering a plain string of the request (a topic name, a coordinator key) takes.
_STRING_KEYS = ("name", "topic", "topic_name", "key", "group_id", "transactional_id")
# Integer fields that mean "none" at -1 in Kafka's responses (offsets, ids, epochs, leaders).
_MINUS_ONE = ("offset", "watermark", "_id", "epoch", "leader", "node", "coordinator", "timestamp")


def error_response(api_key: int, version: int, request: Any, error: ErrorCode) -> Any:
    """The response of ``api_key``/``version`` refusing ``request`` as a whole with ``error``."""
    return _build(codec.response_class(api_key, version), request, error)


def _build(cls: type, source: Any, error: ErrorCode) -> Any:
    values: dict[str, Any] = {}
    for field in fields(cls):
        name = field.name
        if name == "error_code" or name.endswith("_error_code"):
            values[name] = error
            continue
        copied = _copy_key(name, source)
        if copied is not MISSING and (copied is not None or is_optional(field)):
            values[name] = copied
            continue
        fc = classify_field(field)
        if isinstance(fc, EntityTupleField):
            values[name] = tuple(_build(fc.type_, item, error) for item in _mirror(name, fc.type_, source))
            continue
        default = _default(field)
        if default is not MISSING:
            values[name] = default
            continue
        if is_optional(field):
            values[name] = None
        elif isinstance(fc, EntityField):
            values[name] = _build(fc.type_, None, error)
        elif isinstance(fc, PrimitiveTupleField):
            values[name] = ()
        else:
            values[name] = _neutral(name, get_schema_field_type(field))
    return cls(**values)


def _copy_key(name: str, source: Any) -> Any:
    if source is None:
        return MISSING
    if isinstance(source, int) and not isinstance(source, bool):  # a plain partition number
        return source if name in _PARTITION_KEYS else MISSING
    if isinstance(source, str):  # a plain topic name or coordinator key
        return source if name in _STRING_KEYS else MISSING
    for candidate in _KEYS.get(name, ()):
        value = getattr(source, candidate, MISSING)
        if value is not MISSING and not isinstance(value, tuple):
            return value
    return MISSING


def _mirror(name: str, item_cls: type, source: Any) -> tuple:
    """The request entries a response array answers: the request's array of the same name, else
    the one whose entries carry a key the response's entries carry too, else nothing."""
    if source is None or not is_dataclass(source):
        return ()
    arrays = {f.name: getattr(source, f.name) for f in fields(source) if isinstance(getattr(source, f.name), tuple)}
    if name in arrays:
        return arrays[name] or ()
    candidates = [v for v in arrays.values() if v]
    keys = {f.name for f in fields(item_cls)}
    for items in candidates:
        first = items[0]
        if isinstance(first, int) and not isinstance(first, bool):
            if keys & set(_PARTITION_KEYS):
                return items
        elif isinstance(first, str):
            if keys & set(_STRING_KEYS):
                return items
        elif is_dataclass(first) and any(_copy_key(k, first) is not MISSING for k in keys):
            return items
    return ()


def _default(field) -> Any:
    if field.default is not MISSING:
        return field.default
    if field.default_factory is not MISSING:
        return field.default_factory()
    if get_field_tag(field) is not None:
        return get_tagged_field_default(field)
    return MISSING


def _neutral(name: str, kafka_type: str) -> Any:
    if kafka_type.startswith(("int", "uint")):
        return -1 if not kafka_type.startswith("u") and any(k in name for k in _MINUS_ONE) else 0
    if kafka_type == "float64":
        return 0.0
    if kafka_type == "string":
        return ""
    if kafka_type in ("bytes", "records"):
        return b""
    if kafka_type == "uuid":
        return uuid.UUID(int=0)
    if kafka_type == "bool":
        return False
    if kafka_type == "error_code":
        return ErrorCode.none
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(0)
    if kafka_type == "datetime_i64":
        return datetime.datetime.fromtimestamp(0, tz=datetime.timezone.utc)
    raise ValueError(f"no neutral value for a field {name} of type {kafka_type}")
