"""The handlers' boundary: every ``broker.<name>`` a handler uses is part of
:class:`oncelog.apis._base.BrokerView`, and a real ``Broker`` provides all of it. A handler that
reaches for more fails here, so the protocol stays the list of what handlers may touch."""

from __future__ import annotations

import ast
import pathlib

from oncelog.apis import _base
from oncelog.broker import Broker
from oncelog.config.settings import BrokerConfig

APIS = pathlib.Path(_base.__file__).parent


def _view_names() -> set[str]:
    names = set(_base.BrokerView.__annotations__)
    names |= {n for n, v in vars(_base.BrokerView).items() if callable(v) and not n.startswith("_")}
    return names


def _broker_attribute_uses() -> dict[str, set[str]]:
    """Attribute names read from ``ctx.broker`` or a local bound to it, per handler module."""
    uses: dict[str, set[str]] = {}
    for path in sorted(APIS.glob("*.py")):
        tree = ast.parse(path.read_text())
        aliases = {"broker"}
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute) and node.value.attr == "broker":
                aliases |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute):
                continue
            v = node.value
            direct = isinstance(v, ast.Attribute) and v.attr == "broker"  # ctx.broker.X
            alias = isinstance(v, ast.Name) and v.id in aliases  # broker.X
            if direct or alias:
                uses.setdefault(path.name, set()).add(node.attr)
    return uses


def test_handlers_use_only_the_broker_view():
    allowed = _view_names()
    outside = {module: sorted(names - allowed) for module, names in _broker_attribute_uses().items() if names - allowed}
    assert not outside, f"handlers use broker attributes outside BrokerView: {outside}"
    assert sum(len(n) for n in _broker_attribute_uses().values()) > 50  # the scan sees the handlers


def test_a_real_broker_provides_the_whole_view(tmp_path):
    broker = Broker(BrokerConfig(data_dir=str(tmp_path)))
    broker.open()  # no background tasks started: nothing to stop
    # ``cluster`` is None on one node (the cluster's other nodes: oncelog.cluster), ``metrics``
    # without a metrics endpoint (oncelog.metrics.listener): both attributes are there all the same.
    missing = sorted(n for n in _view_names() if getattr(broker, n, None) is None and n not in ("cluster", "metrics"))
    assert not missing, missing
    assert hasattr(broker, "cluster") and hasattr(broker, "metrics")
    with_metrics = Broker(BrokerConfig(data_dir=str(tmp_path / "m"), metrics_listener="127.0.0.1:0"))
    assert with_metrics.metrics is not None
    assert len(_view_names()) >= 15
