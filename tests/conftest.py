"""Shared fixtures: real broker processes over TCP, never mocks.

Markers: a test that starts processes (a broker, Spark, the CLI, the demo) is ``e2e``; it gets
the marker automatically when it uses the ``broker``/``broker_factory``/``spark`` fixtures, or
by its module's ``pytestmark``. ``pytest -m "not e2e"`` is the fast in-process loop, and a
test without the marker that starts a process fails, so the marker stays true.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from oncelog.process import BrokerProcess


def soak_scale(full: int, short: int) -> int:
    """Record counts for soak-style tests: the full figure with ONCELOG_SOAK=full."""
    return full if os.environ.get("ONCELOG_SOAK") == "full" else short


@pytest.fixture
def broker_factory(tmp_path):
    started: list[BrokerProcess] = []

    def make(name: str = "broker", **kwargs) -> BrokerProcess:
        b = BrokerProcess(str(tmp_path / name), **kwargs)
        started.append(b)
        return b.start()

    yield make
    for b in started:
        b.kill()


@pytest.fixture
def broker(broker_factory) -> BrokerProcess:
    return broker_factory()


_PROCESS_FIXTURES = {"broker", "broker_factory", "spark"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _PROCESS_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(autouse=True)
def _no_processes_outside_e2e(request, monkeypatch):
    if request.node.get_closest_marker("e2e") is None:
        def refuse(*args, **kwargs):
            raise AssertionError(f"{request.node.nodeid} starts a process ({args[0] if args else kwargs.get('args')!r}): "
                                 "mark it e2e (pytestmark = pytest.mark.e2e)")

        monkeypatch.setattr(subprocess, "Popen", refuse)
    yield
