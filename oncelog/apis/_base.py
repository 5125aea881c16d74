"""What every API module shares: the request context and response-building helpers.

Each API module declares ``API_KEY``, ``MIN_VERSION``, ``MAX_VERSION`` (the range ApiVersions
advertises and dispatch accepts) and ``handle(ctx, request)``, which returns the response, an
awaitable of it, or None for requests that get no response (Produce with acks=0).
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

if TYPE_CHECKING:
    from ..broker import Broker

NO_THROTTLE = datetime.timedelta(0)
OK = ErrorCode.none


@dataclass(frozen=True, slots=True)
class RequestContext:
    broker: "Broker"
    api_version: int
    correlation_id: int
    client_id: str | None
    peer: str


@functools.cache
def response_module(api_key: int, version: int):
    return load_payload_module(api_key, version, EntityType.response)


@functools.cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


def build(cls: type, **values: Any):
    """Construct ``cls`` from a superset of its fields: handlers describe a response once
    and each version's class keeps the fields it has."""
    names = _field_names(cls)
    return cls(**{k: v for k, v in values.items() if k in names})
