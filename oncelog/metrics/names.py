"""Label values as Kafka writes them: an API by its name in Kafka's ApiKeys (``Produce``,
``ListOffsets``, ``InitProducerId``: each handler's docstring opens with it), an error by its
name in Kafka's Errors (``NONE``, ``UNKNOWN_TOPIC_OR_PARTITION``)."""

from __future__ import annotations

import functools

from kio.schema.errors import ErrorCode


@functools.cache
def api_name(api_key: int) -> str:
    from ..apis import HANDLERS

    doc = (getattr(HANDLERS.get(api_key), "__doc__", None) or "").strip()
    name = doc.split(" (key", 1)[0].strip() if " (key" in doc else ""
    if name.isidentifier():
        return name
    return {58: "Envelope"}.get(api_key, f"ApiKey{api_key}")


@functools.cache
def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"UNKNOWN_ERROR_CODE_{code}"
