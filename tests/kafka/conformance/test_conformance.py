"""The differential conformance suite: every scenario of ``scenarios_*.py`` held with a
one-node Apache Kafka and with oncelog in the same run, the normalised answers compared field by
field (tests/kafka/conformance/framework.py says how). A scenario passes when the answers are
identical, or when they differ and the scenario declares why (``differs=``); an undeclared
difference fails, and so does a declared one that is gone.

The run writes its table to ``build/conformance.md`` (and the answers to ``build/conformance.json``);
docs/conformance.md holds the committed copy below its prose, and
``test_committed_table_matches_the_registry`` keeps its verdicts equal to the declarations."""

from __future__ import annotations

import json
import os
import uuid

import pytest

from oncelog.process import BrokerProcess

from .framework import load_scenarios, run_both, table, warm_up

pytestmark = [pytest.mark.e2e, pytest.mark.apache_kafka]

SCENARIOS = load_scenarios()
SESSION = uuid.uuid4().hex[:6]
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


@pytest.fixture(scope="module")
def oncelog_broker(tmp_path_factory):
    """One oncelog broker for the whole suite, set as the session's Apache Kafka is (groups form
    at once: group.initial.rebalance.delay.ms=0; num.partitions=1 is both defaults)."""
    b = BrokerProcess(str(tmp_path_factory.mktemp("conformance") / "oncelog"), fsync="never")
    b.start()
    warm_up(b.bootstrap)
    yield b
    b.kill()


@pytest.fixture(scope="module")
def outcomes():
    done: list = []
    yield done
    if done:
        out = os.path.join(REPO, "build")
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "conformance.md"), "w") as f:
            f.write(table(done))
        with open(os.path.join(out, "conformance.json"), "w") as f:
            json.dump({o.scenario.name: {"kafka": o.kafka, "oncelog": o.oncelog, "diffs": o.diffs} for o in done},
                      f, indent=1, default=str)


_warmed: set = set()


def _warm(cluster) -> None:
    if cluster.bootstrap not in _warmed:  # once per start of the session's Apache Kafka
        _warmed.add(cluster.bootstrap)  # first: a failed warm-up fails one test, not every one for 2 minutes
        warm_up(cluster.bootstrap)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario(name, apache_kafka, oncelog_broker, outcomes):
    _warm(apache_kafka)
    sc = SCENARIOS[name]
    o = run_both(sc, apache_kafka.bootstrap, oncelog_broker.bootstrap, SESSION)
    outcomes.append(o)
    if sc.differs:
        assert o.diffs, f"{name} is declared to differ ({sc.differs}) but both brokers answer {o.kafka}: remove differs="
    else:
        assert not o.diffs, (f"{name}: oncelog answers differently from Apache Kafka:\n  " + "\n  ".join(o.diffs)
                             + f"\nkafka:   {json.dumps(o.kafka, default=str)}\noncelog: {json.dumps(o.oncelog, default=str)}")
