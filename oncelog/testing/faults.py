"""Faults a test adds to a running broker, in franz-go kfake's manner (``AddFault``): match a
request, misbehave, count, remove.

``broker.faults.add("Produce", error="NOT_LEADER_OR_FOLLOWER", count=2, topic="orders")`` makes
the next two Produce requests that name ``orders`` fail as a Kafka broker refusing them would (the
records are not written) and returns a :class:`Fault` whose ``fired`` counts the firings.

What a fault does (exactly one of):

* ``error=`` — answer with that Kafka error (name or code) instead of handling the request: the
  whole request is refused, every topic/partition/key in it gets the error
  (:mod:`oncelog.testing.answers`); nothing is applied;
* ``delay=`` seconds — handle the request, then hold its answer that long (the connection's
  later requests wait behind it, as on a Kafka broker, which handles a connection's requests in
  order);
* ``drop="request"`` — close the connection instead of handling the request (nothing applied;
  the client sees a broken connection and retries);
* ``drop="response"`` — handle the request, then close the connection without answering: the
  request *is* applied but its answer is lost — the fault behind duplicates that the idempotent
  producer exists to prevent.

Which requests: ``api`` (a name such as ``"Produce"`` or an API key), optionally ``versions``
(a range), ``topic`` (only requests that name the topic, by name or id). Cadence: it fires on
every ``every``-th matching request, ``count`` times (0: until removed or the test ends).

The spec (:class:`FaultSpec`) is plain data so the same fault can be added to a broker in
another process (the ``process`` kind sends it over its control socket, :mod:`._child`). The
machinery under it is the broker's control-function seam (:meth:`oncelog.broker.Broker.control`,
:mod:`oncelog.faults`); this module only turns a spec into a control function.
"""

from __future__ import annotations

import asyncio
import inspect
import uuid
from dataclasses import asdict, dataclass, fields, is_dataclass
from typing import Any, Callable

from kio.schema.errors import ErrorCode

from oncelog.apis._base import Applied, CloseConnection

DROPS = ("request", "response")


def api_key_of(api: str | int) -> int:
    """An API's key from its name (``"Produce"``, ``"produce"``, ``"FindCoordinator"``) or key;
    ValueError naming the known ones if oncelog does not serve it."""
    from oncelog.apis import HANDLERS

    names = api_names()
    if isinstance(api, int) and not isinstance(api, bool):
        if api in HANDLERS:
            return api
        raise ValueError(f"api {api}: oncelog serves no API with that key")
    key = names.get(str(api).replace("_", "").lower())
    if key is None:
        raise ValueError(f"api {api!r}: not an API oncelog serves (known: {', '.join(sorted(_pretty(names)))})")
    return key


def api_names() -> dict[str, int]:
    """Lower-case API names without separators (``produce``, ``findcoordinator``) -> key."""
    from oncelog.apis import HANDLERS

    return {m.__name__.rsplit(".", 1)[-1].replace("_", ""): k for k, m in HANDLERS.items()}


def _pretty(names: dict[str, int]) -> list[str]:
    from oncelog.apis import HANDLERS

    return ["".join(p.title() for p in HANDLERS[k].__name__.rsplit(".", 1)[-1].split("_")) for k in names.values()]


def error_of(error: str | int) -> ErrorCode:
    """A Kafka error code from its name (``"NOT_LEADER_OR_FOLLOWER"``, any case) or number."""
    if isinstance(error, int) and not isinstance(error, bool):
        try:
            return ErrorCode(error)
        except ValueError:
            raise ValueError(f"error {error}: not a Kafka error code") from None
    try:
        return ErrorCode[str(error).strip().lower()]
    except KeyError:
        raise ValueError(f"error {error!r}: not a Kafka error name (e.g. NOT_LEADER_OR_FOLLOWER)") from None


@dataclass(frozen=True)
class FaultSpec:
    """What one fault matches and does; plain data (it crosses to a child process as JSON).
    :meth:`checked` validates it and is what every constructor goes through."""

    api_key: int
    error: int | None = None
    delay: float | None = None
    drop: str | None = None
    count: int = 0
    every: int = 1
    topic: str | None = None
    min_version: int | None = None
    max_version: int | None = None

    @classmethod
    def make(cls, api: str | int, *, error: str | int | None = None, delay: float | None = None,
             drop: str | None = None, count: int = 0, every: int = 1, topic: str | None = None,
             versions: range | None = None) -> "FaultSpec":
        if versions is not None and (not isinstance(versions, range) or versions.step != 1 or not versions):
            raise ValueError(f"versions must be a non-empty range such as range(3, 10) (got {versions!r})")
        return cls(api_key_of(api), int(error_of(error)) if error is not None else None,
                   None if delay is None else float(delay), drop, int(count), int(every), topic,
                   versions.start if versions is not None else None,
                   versions.stop - 1 if versions is not None else None).checked()

    def checked(self) -> "FaultSpec":
        api_key_of(self.api_key)
        chosen = [name for name, v in (("error", self.error), ("delay", self.delay), ("drop", self.drop)) if v is not None]
        if len(chosen) != 1:
            raise ValueError(f"a fault does exactly one of error=, delay=, drop= (got {', '.join(chosen) or 'none'})")
        if self.error is not None:
            error_of(self.error)
        if self.delay is not None and not 0 <= self.delay <= 3600:
            raise ValueError(f"delay must be 0..3600 seconds (got {self.delay})")
        if self.drop is not None and self.drop not in DROPS:
            raise ValueError(f"drop must be one of {', '.join(DROPS)} (got {self.drop!r})")
        if self.count < 0 or self.every < 1:
            raise ValueError(f"count must be >= 0 and every >= 1 (got {self.count}, {self.every})")
        if self.topic is not None and (not isinstance(self.topic, str) or not self.topic):
            raise ValueError("topic must be a topic name")
        return self

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> "FaultSpec":
        """A spec from a child process's control socket: ValueError for anything else than
        the fields of a spec with values of their types."""
        if not isinstance(data, dict) or set(data) - {f.name for f in fields(cls)}:
            raise ValueError("a fault spec is an object with the fields of FaultSpec")
        types = {"api_key": int, "error": (int, type(None)), "delay": (int, float, type(None)),
                 "drop": (str, type(None)), "count": int, "every": int, "topic": (str, type(None)),
                 "min_version": (int, type(None)), "max_version": (int, type(None))}
        for name, value in data.items():
            if isinstance(value, bool) or not isinstance(value, types[name]):
                raise ValueError(f"fault spec field {name}: wrong type")
        if "api_key" not in data:
            raise ValueError("a fault spec names its api_key")
        return cls(**data).checked()


def names_topic(request: Any, topic: str, ids: Callable[[uuid.UUID], str | None]) -> bool:
    """Whether a decoded request names ``topic``: a field ``name``/``topic``/``topic_name`` with
    that value, a ``topic_id`` that ``ids`` maps to it, or a plain list of topic names."""
    stack = [request]
    while stack:
        item = stack.pop()
        if not is_dataclass(item):
            continue
        for f in fields(item):
            value = getattr(item, f.name)
            if isinstance(value, tuple):
                if f.name in ("topics", "topic_names") and any(v == topic for v in value if isinstance(v, str)):
                    return True
                stack.extend(v for v in value if is_dataclass(v))
            elif f.name in ("name", "topic", "topic_name") and value == topic:
                return True
            elif f.name == "topic_id" and isinstance(value, uuid.UUID) and ids(value) == topic:
                return True
            elif is_dataclass(value):
                stack.append(value)
    return False


def control_function(spec: FaultSpec) -> Callable[[Any, Any], Any]:
    """The broker control function (``fn(ctx, request)``) that carries ``spec`` out: it answers
    the requests it fires on and passes the others on (None)."""
    from oncelog.apis import HANDLERS

    from .answers import error_response

    module = HANDLERS[spec.api_key]
    matched = [0]

    def fn(ctx, request):
        version = ctx.api_version
        if spec.min_version is not None and not spec.min_version <= version <= spec.max_version:
            return None
        if spec.topic is not None:
            by_id = ctx.broker.metadata.topics.by_id

            def ids(topic_id):
                t = by_id.get(topic_id)
                return t.name if t is not None else None

            if not names_topic(request, spec.topic, ids):
                return None
        matched[0] += 1
        if matched[0] % spec.every:
            return None
        if spec.error is not None:
            return error_response(spec.api_key, version, request, ErrorCode(spec.error))
        if spec.drop == "request":
            return CloseConnection(f"fault: drop the {module.__name__.rsplit('.', 1)[-1]} request")
        return _handled_then(module, ctx, request, spec)

    return fn


async def _handled_then(module, ctx, request, spec: FaultSpec):
    """Handle the request as usual, then hold the answer (delay) or lose it (drop=response)."""
    result = module.handle(ctx, request)
    if isinstance(result, Applied):
        result = result.awaitable
    if inspect.isawaitable(result):
        result = await result
    if spec.drop == "response":
        return CloseConnection(f"fault: the answer to {module.__name__.rsplit('.', 1)[-1]} is dropped")
    await asyncio.sleep(spec.delay)
    return result
