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
process kind's control socket), :mod:`.pytest_plugin` (the fixtures; a ``pytest11`` entry point).
The user guide is docs/testing.md.
"""

from __future__ import annotations

from .broker import Broker, ExternalKafka, Fault, Faults, NotSupported
from .inspect import Group, Record, Transaction, create_topic, groups, read_committed, transactions


def audit(bootstrap_servers: str, inputs, outputs, **kw):
    """``oncelog audit`` as a function (:func:`oncelog.audit.audit`): every committed input has
    exactly one output — lost, duplicated, aborted reads and phantoms counted."""
    from oncelog.audit import audit as _audit

    return _audit(bootstrap_servers, inputs, outputs, **kw)


__all__ = ["Broker", "ExternalKafka", "Fault", "Faults", "NotSupported", "Group", "Record", "Transaction",
           "audit", "create_topic", "groups", "read_committed", "transactions"]
