"""oncelog in your own tests: a real Kafka-protocol broker that starts in a fraction of a second,
with faults a test can switch on, and helpers to assert what a read_committed reader sees.

    from oncelog.testing import Broker

    with Broker() as broker:                       # a temporary data dir, a free loopback port
        broker.create_topic("orders", partitions=3)
        fault = broker.faults.add("Produce", error="NOT_LEADER_OR_FOLLOWER", count=2)
        ...                                        # your producer retries through it
        assert fault.fired == 2
        assert len(broker.read_committed("orders")) == 10

Modules (each with its own docstring): :mod:`.broker` (``Broker``: the thread and process
kinds, their lifecycle; ``ExternalKafka``: the same helpers on any cluster), :mod:`.faults`
(what a fault matches and does), :mod:`.answers` (the error answers, built from the schemas),
:mod:`.inspect` (read_committed, transactions, groups: clients only), :mod:`._child` (the
process kind's control socket), :mod:`._zygote` (its warm fork server), :mod:`.pytest_plugin`
(the fixtures; a ``pytest11`` entry point). The user guide is docs/testing.md.

The names below are imported on first use: pytest loads the plugin (and so this package) in
every run, and the broker's imports (kio's schemas, every API module) cost a second or more.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "Broker": ".broker", "ExternalKafka": ".broker", "Fault": ".broker", "Faults": ".broker",
    "NotSupported": ".broker",
    "Group": ".inspect", "Record": ".inspect", "Transaction": ".inspect", "create_topic": ".inspect",
    "groups": ".inspect", "read_committed": ".inspect", "transactions": ".inspect",
}


def audit(bootstrap_servers: str, inputs, outputs, **kw):
    """``oncelog audit`` as a function (:func:`oncelog.audit.audit`): every committed input has
    exactly one output — lost, duplicated, aborted reads and phantoms counted."""
    from oncelog.audit import audit as _audit

    return _audit(bootstrap_servers, inputs, outputs, **kw)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted([*globals(), *_EXPORTS])


__all__ = ["audit", *_EXPORTS]
