"""The differential conformance suite: every scenario of ``scenarios_*.py`` held with a
one-node Apache Kafka and with oncelog in the same run, the normalised answers compared field by
field (tests/kafka/conformance/framework.py says how). A scenario passes when the answers are
identical, or when they differ and the scenario declares why (``differs=``); an undeclared
difference fails, and so does a declared one that is gone.

``test_scenario_on_cluster`` holds every scenario with oncelog's two-node cluster too, against the
same Apache Kafka answer (Kafka runs each scenario once, for whichever of the two tests comes
first: :data:`_kafka_answers`). The conversation routes as a Kafka client does (routing.py), so each
answer is what the one node gives but for one thing that differs with the cluster's size by
nature: the lists of brokers (Metadata's and DescribeCluster's ``brokers``, ``node_endpoints``),
whose identical normalised entries collapse to one on both sides before the comparison
(framework.one_broker_view). A scenario declared to differ (``differs=``) must differ on the
cluster too; one that differs on the cluster only declares it (``cluster_differs=``), and fails
when the declaration is stale.

The run writes its table to ``build/conformance.md`` (and the answers to ``build/conformance.json``,
the cluster's to ``build/conformance-cluster.json``);
docs/conformance.md holds the committed copy below its prose, and
``test_committed_table_matches_the_registry`` keeps its verdicts equal to the declarations."""

from __future__ import annotations

import json
import os
import uuid

import pytest

from oncelog.process import BrokerProcess

from .framework import differences, load_scenarios, one_broker_view, run_both, run_one, table, warm_up

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
def oncelog_cluster(tmp_path_factory):
    """oncelog's two-node cluster for the whole suite, set as the one-node broker is."""
    b = BrokerProcess(str(tmp_path_factory.mktemp("conformance") / "cluster"), nodes=2, fsync="never")
    b.start()
    warm_up(b.bootstrap)
    yield b
    b.kill()


@pytest.fixture(scope="module")
def cluster_answers():
    """The cluster run's answers, written to build/conformance-cluster.json (for reading, not committed)."""
    done: dict = {}
    yield done
    if done:
        os.makedirs(os.path.join(REPO, "build"), exist_ok=True)
        with open(os.path.join(REPO, "build", "conformance-cluster.json"), "w") as f:
            json.dump(done, f, indent=1, default=str)


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


_kafka_answers: dict = {}  # scenario name -> Apache Kafka's normalised answer, computed once


def _kafka_answer(sc, apache_kafka):
    _warm(apache_kafka)
    if sc.name not in _kafka_answers:
        _kafka_answers[sc.name] = run_one(sc, "apache-kafka", apache_kafka.bootstrap, SESSION)
    answer = _kafka_answers[sc.name]
    # A scenario that did not run to its end on Kafka compares nothing (the same failure on both
    # brokers would read as "identical"): its own precondition or wait is wrong.
    assert not (isinstance(answer, dict) and "failed" in answer), \
        f"{sc.name} did not complete on Apache Kafka ({answer['failed']}): it compares nothing; fix the scenario"
    return answer


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario(name, apache_kafka, oncelog_broker, outcomes):
    sc = SCENARIOS[name]
    o = run_both(sc, apache_kafka.bootstrap, oncelog_broker.bootstrap, SESSION, kafka=_kafka_answer(sc, apache_kafka))
    outcomes.append(o)
    if sc.differs:
        assert o.diffs, f"{name} is declared to differ ({sc.differs}) but both brokers answer {o.kafka}: remove differs="
    else:
        assert not o.diffs, (f"{name}: oncelog answers differently from Apache Kafka:\n  " + "\n  ".join(o.diffs)
                             + f"\nkafka:   {json.dumps(o.kafka, default=str)}\noncelog: {json.dumps(o.oncelog, default=str)}")


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_on_cluster(name, apache_kafka, oncelog_cluster, cluster_answers):
    sc = SCENARIOS[name]
    kafka = one_broker_view(_kafka_answer(sc, apache_kafka))
    cluster = one_broker_view(run_one(sc, "oncelog-cluster", oncelog_cluster.bootstrap, SESSION))
    diffs = differences(kafka, cluster)
    cluster_answers[name] = {"kafka": kafka, "cluster": cluster, "diffs": diffs}
    declared = sc.differs or sc.cluster_differs
    if declared:
        assert diffs, (f"{name} is declared to differ ({declared}) but Kafka and the oncelog cluster both answer "
                       f"{kafka}: remove {'differs=' if sc.differs else 'cluster_differs='}")
    else:
        assert not diffs, (f"{name}: the oncelog cluster answers differently from Apache Kafka:\n  " + "\n  ".join(diffs)
                           + f"\nkafka:   {json.dumps(kafka, default=str)}\ncluster: {json.dumps(cluster, default=str)}")
