"""Shared fixtures: real broker processes over TCP, never mocks."""

from __future__ import annotations

import os

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
