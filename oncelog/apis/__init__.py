"""The Kafka APIs oncelog implements: one module per API, each declaring its key and version range
(``API_KEY``, ``MIN_VERSION``, ``MAX_VERSION``) and ``handle(ctx, request)``. A module registers
itself by being here: every module of this package whose name does not start with ``_`` is a
handler (``_base``, ``_groups`` ... are shared helpers). Each handler's docstring opens with
``<Name> (key <k>), v<MIN>-<MAX>`` and lists ``Version notes:`` (tests/apis/test_registry.py).

``HANDLERS`` (API key -> module) feeds both request dispatch and the ApiVersions response, so
the broker advertises exactly what it implements.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType


def _discover() -> dict[int, ModuleType]:
    handlers: dict[int, ModuleType] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        other = handlers.setdefault(module.API_KEY, module)
        if other is not module:
            raise ImportError(f"API key {module.API_KEY} served twice: {other.__name__} and {module.__name__}")
    return dict(sorted(handlers.items()))


HANDLERS = _discover()
