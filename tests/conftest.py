"""Shared fixtures: real broker processes over TCP, never mocks.

Markers: a test that starts processes (a broker, Spark, the CLI, the demo) is ``e2e``; it gets
the marker automatically when it uses the ``broker``/``broker_factory``/``spark`` fixtures, or
by its module's ``pytestmark``. ``pytest -m "not e2e"`` is the fast in-process loop, and a
test without the marker that starts a process fails, so the marker stays true.

Two workers (pytest-xdist, ``-n 2 --dist loadgroup`` in pyproject.toml): every test that starts
Spark (``tests/spark/``, ``tests/test_demo.py``) is in one group, so they all run on one worker,
one after the other, in that worker's one SparkSession, and no two Spark JVMs ever compete
for the machine's two cores; the broker's tests run on the other worker meanwhile. ``-n 0`` runs
everything in this process. Spark's group is the longest share, so it is handed out first; the
worker that finishes its share first takes the broker's remaining tests.
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


_SPARK_PATHS = ("tests/spark/", "tests/test_demo.py")  # every test that starts Spark, and only those


def _starts_spark(nodeid: str) -> bool:
    return nodeid.startswith(_SPARK_PATHS)


def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup`` with one group, Spark's, told by the test's path. (xdist's own
    ``xdist_group`` marker is lost under pytest 9.2, which ignores the node id xdist rewrites.)"""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SparkOnOneWorker(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "spark" if _starts_spark(nodeid) else nodeid

    return SparkOnOneWorker(config, log)


def pytest_collection_modifyitems(config, items):
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if _PROCESS_FIXTURES & fixtures:
            item.add_marker(pytest.mark.e2e)
        if "spark" in fixtures and not _starts_spark(item.nodeid):
            raise pytest.UsageError(f"{item.nodeid} uses the spark fixture: put it under {' or '.join(_SPARK_PATHS)}, "
                                    "which run on one worker")
    # Spark's tests first (one group: xdist hands the largest group out first anyway), the broker's
    # in their own order after them. The demo's lead: their first driver makes the class-data
    # archive of Spark's JVM that the later drivers map (tests/spark/conftest.py).
    items.sort(key=lambda item: (not _starts_spark(item.nodeid), not item.nodeid.startswith("tests/test_demo.py")))


@pytest.fixture(autouse=True)
def _no_processes_outside_e2e(request, monkeypatch):
    if request.node.get_closest_marker("e2e") is None:
        def refuse(*args, **kwargs):
            raise AssertionError(f"{request.node.nodeid} starts a process ({args[0] if args else kwargs.get('args')!r}): "
                                 "mark it e2e (pytestmark = pytest.mark.e2e)")

        monkeypatch.setattr(subprocess, "Popen", refuse)
    yield
