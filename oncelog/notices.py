"""Operator-facing log lines: what the broker refused and why, and consumer group events,
once per event at INFO, without flooding. An identical line (same text: same client, same
resource, same reason) within ``WINDOW_S`` of the last one is counted instead of written; the
next one written after the window says how many were suppressed."""

from __future__ import annotations

import logging
import time

WINDOW_S = 60.0
_MAX_KEYS = 4096

_last: dict[object, list] = {}  # key -> [last written (monotonic), suppressed since]


def notice(logger: logging.Logger, fmt: str, *args, level: int = logging.INFO, key=None,
           clock=time.monotonic) -> bool:
    """Log ``fmt % args`` unless the same line (or the same ``key``, when given: for lines
    whose text varies, such as sequence numbers) was written less than WINDOW_S ago. Returns
    whether it was written."""
    if not logger.isEnabledFor(level):
        return False
    line = fmt % args if args else fmt
    if key is None:
        key = line
    now = clock()
    entry = _last.get(key)
    if entry is not None and now - entry[0] < WINDOW_S:
        entry[1] += 1
        return False
    suppressed = entry[1] if entry is not None else 0
    if entry is None and len(_last) >= _MAX_KEYS:
        for old in [k for k, e in _last.items() if now - e[0] >= WINDOW_S] or list(_last)[: _MAX_KEYS // 2]:
            del _last[old]
    _last[key] = [now, 0]
    if suppressed:
        logger.log(level, "%s (repeated %d more time(s) in the last %.0fs)", line, suppressed, WINDOW_S)
    else:
        logger.log(level, "%s", line)
    return True


# ---------------------------------------------------------------------------------------------
# Rejections a client will care about, found in any response (Produce logs its own, with the
# reason; Fetch has none of these).

import dataclasses  # noqa: E402
import functools  # noqa: E402
import typing  # noqa: E402

from kio.schema.errors import ErrorCode  # noqa: E402

NOTABLE = frozenset({
    ErrorCode.producer_fenced, ErrorCode.invalid_producer_epoch, ErrorCode.fenced_instance_id,
    ErrorCode.unknown_producer_id, ErrorCode.invalid_producer_id_mapping, ErrorCode.invalid_txn_state,
    ErrorCode.invalid_transaction_timeout, ErrorCode.invalid_config, ErrorCode.non_empty_group,
    ErrorCode.invalid_replica_assignment, ErrorCode.group_max_size_reached, ErrorCode.inconsistent_group_protocol,
    ErrorCode.invalid_session_timeout,
})
# Fields naming what a (sub-)entry of a response is about, kept as the context of a line.
_NAMING = ("name", "topic", "group_id", "transactional_id", "partition_index", "index", "member_id",
           "group_instance_id", "resource_name", "producer_id")


@functools.cache
def _fields(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def notable_errors(response) -> list[tuple[ErrorCode, str, str | None]]:
    """(code, context, error_message) of every notable error code in a response."""
    found: list = []
    _walk(response, (), found)
    return found


@functools.cache
def _may_hold_codes(cls: type) -> bool:
    """Whether an instance of the dataclass ``cls`` can hold an ``error_code`` at any depth (from
    its type hints; when they cannot be read, yes). A response listing a million entries without
    codes (ListTransactions, every id a broker holds) is then not walked entry by entry: that
    walk held the event loop ~1 s per 500,000 entries."""
    if "error_code" in _fields(cls):
        return True
    try:
        hints = typing.get_type_hints(cls)
    except Exception:
        return True

    def nested(tp) -> bool:
        if dataclasses.is_dataclass(tp) and isinstance(tp, type):
            return _may_hold_codes(tp)
        return any(nested(a) for a in typing.get_args(tp))

    return any(nested(hints.get(n)) for n in _fields(cls) if hints.get(n) is not None)


def _walk(obj, context: tuple, found: list) -> None:
    names = _fields(type(obj))
    here = context + tuple(f"{n}={getattr(obj, n)}" for n in _NAMING
                           if n in names and getattr(obj, n) not in (None, ""))
    code = getattr(obj, "error_code", None) if "error_code" in names else None
    if code in NOTABLE:
        found.append((code, " ".join(here), getattr(obj, "error_message", None) if "error_message" in names else None))
    for n in names:
        value = getattr(obj, n)
        if isinstance(value, tuple):
            if value and dataclasses.is_dataclass(value[0]) and not _may_hold_codes(type(value[0])):
                continue  # entries of one type (a schema's array): none holds a code
            for item in value:
                if dataclasses.is_dataclass(item):
                    _walk(item, here, found)
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            _walk(value, here, found)


def error_codes(obj, out: list | None = None) -> list:
    """Every ``error_code`` in a response, at any depth, NONE included (what Kafka's
    AbstractResponse.errorCounts counts); arrays whose entries cannot hold a code are skipped
    (:func:`_may_hold_codes`)."""
    if out is None:
        out = []
    names = _fields(type(obj))
    if "error_code" in names:
        out.append(obj.error_code)
    for n in names:
        value = getattr(obj, n)
        if isinstance(value, tuple):
            if value and dataclasses.is_dataclass(value[0]) and _may_hold_codes(type(value[0])):
                for item in value:
                    error_codes(item, out)
        elif dataclasses.is_dataclass(value) and not isinstance(value, type) and _may_hold_codes(type(value)):
            error_codes(value, out)
    return out


# Top-level request fields that say what a request was about, for responses that do not.
_REQUEST_NAMING = ("transactional_id", "group_id", "producer_id", "producer_epoch", "group_instance_id")


def log_rejections(logger: logging.Logger, api: str, ctx, response, request=None) -> None:
    found = notable_errors(response)
    if not found:
        return
    about = ""
    if request is not None:
        names = _fields(type(request))
        about = " ".join(f"{n}={getattr(request, n)}" for n in _REQUEST_NAMING
                         if n in names and getattr(request, n) not in (None, ""))
    for code, where, message in found:
        where = " ".join(w for w in (about, where) if w)
        notice(logger, "%s from client %s (%s) rejected: %s%s%s", api, ctx.client_id, ctx.peer, code.name.upper(),
               f" [{where}]" if where else "", f": {message}" if message else "")
