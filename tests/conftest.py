"""Shared fixtures: real broker processes over TCP, never mocks.

Markers: a test that starts processes (a broker, Spark, the CLI, the demo) is ``e2e``; it gets
the marker automatically when it uses the ``broker``/``broker_factory``/``spark`` fixtures, or
by its module's ``pytestmark``. ``pytest -m "not e2e"`` is the fast in-process loop, and a
test without the marker that starts a process fails, so the marker stays true.

Three workers (pytest-xdist, ``-n 3 --dist loadgroup`` in pyproject.toml; on two cores, as three
overlap the tests' waits: docs/testing.md has the measured runs): every test that starts
Spark (``tests/spark/``, ``tests/test_demo.py``) is in one group, so they all run on one worker,
one after the other, in that worker's one SparkSession, and no two Spark JVMs ever compete
for the machine's cores; the Apache Kafka tests are another group (one Kafka per session), and
the broker's tests are shared by the workers meanwhile. ``-n 0`` runs everything in this process.
Spark's group is the longest share, so it is handed out first; a worker that finishes its share
takes the broker's remaining tests.

Both brokers: a module marked ``both_brokers`` runs each of its tests that uses the ``broker``
fixture twice, ids ``oncelog`` (a fresh oncelog process, as everywhere) and ``apache-kafka``
(tests/helpers.ApacheKafkaBroker over the session's one-node Apache Kafka, shared with every other
such test: names are tests/helpers.unique). The Apache Kafka variant is an ``apache_kafka`` test:
it runs in that xdist scope, on the worker beside Spark's, and under CI=true it must run. A test
that crashes, restarts or configures the broker, or reads oncelog's own files or log, is marked
``oncelog_only(reason)`` and keeps one variant; in a ``both_brokers`` module every test that
starts a broker is one or the other, so the list of oncelog-only tests, with their reasons, is
``pytest --collect-only -m oncelog_only`` and the markers' reasons.

A third variant, ``oncelog-2-nodes``, is oncelog as ``serve`` starts it on a two-core machine: a
cluster of two node processes. A test that sends its own requests routes them as a Kafka client
does (tests/helpers: ``leader_address``, ``coordinator_address``, ``broker_addresses``). A test
about one broker process as such is marked ``one_node(reason)`` and skips that variant; one where
oncelog is wrong on a cluster is marked ``cluster_xfail(reason)`` (strict: the fix shows). A
``crash`` test (it SIGKILLs oncelog and checks the data afterwards) runs with ``broker_factory``
making one process and, as ``oncelog-2-nodes``, a two-node cluster (``oncelog_nodes``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from oncelog.process import BrokerProcess


def soak_scale(full: int, short: int) -> int:
    """Record counts for soak-style tests: the full figure with ONCELOG_SOAK=full."""
    return full if os.environ.get("ONCELOG_SOAK") == "full" else short


@pytest.fixture
def oncelog_nodes(request) -> int:
    """How many node processes ``broker_factory`` starts unless told: 1, or 2 in a ``crash``
    test's ``oncelog-2-nodes`` variant."""
    return getattr(request, "param", 1)


@pytest.fixture
def broker_factory(tmp_path, oncelog_nodes):
    started: list[BrokerProcess] = []

    def make(name: str = "broker", **kwargs) -> BrokerProcess:
        kwargs.setdefault("nodes", oncelog_nodes)
        b = BrokerProcess(str(tmp_path / name), **kwargs)
        started.append(b)
        return b.start()

    yield make
    for b in started:
        b.kill()


# The `broker` fixture's variants (ids): one oncelog process; oncelog as serve starts it on a
# two-core machine, a cluster of two node processes (oncelog.cluster); the session's Apache Kafka.
ONCELOG, ONCELOG_NODES, APACHE_KAFKA = "oncelog", "oncelog-2-nodes", "apache-kafka"


@pytest.fixture
def broker(request, broker_factory):
    """A fresh oncelog broker process; in a ``both_brokers`` module also, as the ``apache-kafka``
    variant, the session's one-node Apache Kafka behind the same few attributes."""
    variant = getattr(request, "param", ONCELOG)
    if variant == APACHE_KAFKA:
        from .helpers import ApacheKafkaBroker

        return ApacheKafkaBroker(request.getfixturevalue("apache_kafka"))
    return broker_factory(nodes=2) if variant == ONCELOG_NODES else broker_factory()


def pytest_generate_tests(metafunc):
    """A ``both_brokers`` test's variants. ``one_node(reason)`` leaves out ``oncelog-2-nodes`` (the
    test is about one broker process as such); ``cluster_xfail(reason)`` marks that variant
    ``xfail(strict=True)``: oncelog is wrong on a cluster there (the reason says how), and the
    strictness reports the fix."""
    definition = metafunc.definition
    if definition.get_closest_marker("crash") is not None:
        # A crash test runs on one node and on the two-node cluster (the kills take the whole
        # cluster, the supervisor and every node), unless it is about one process as such.
        one_node = definition.get_closest_marker("one_node")
        if one_node is not None and not one_node.args:
            raise pytest.UsageError(f"{definition.nodeid}: one_node needs its reason")
        metafunc.parametrize("oncelog_nodes", [1] if one_node else [1, 2], indirect=True,
                             ids=[ONCELOG] if one_node else [ONCELOG, ONCELOG_NODES])
        return
    if definition.get_closest_marker("both_brokers") is None or "broker" not in metafunc.fixturenames:
        return
    if definition.get_closest_marker("oncelog_only") is not None:
        return
    variants = [ONCELOG, ONCELOG_NODES, APACHE_KAFKA]
    if (one_node := definition.get_closest_marker("one_node")) is not None:
        if not one_node.args:
            raise pytest.UsageError(f"{definition.nodeid}: one_node needs its reason")
        variants.remove(ONCELOG_NODES)
    elif (wrong := definition.get_closest_marker("cluster_xfail")) is not None:
        if not wrong.args:
            raise pytest.UsageError(f"{definition.nodeid}: cluster_xfail needs its reason")
        variants[1] = pytest.param(ONCELOG_NODES, id=ONCELOG_NODES,
                                   marks=pytest.mark.xfail(strict=True, reason=f"oncelog on a cluster: {wrong.args[0]}"))
    metafunc.parametrize("broker", variants, indirect=True)


_VARIANT = re.compile(r"\[(?:.*-)?apache-kafka(?:-.*)?\]$")


def _on_apache_kafka(nodeid: str) -> bool:
    """The test uses Apache Kafka: it lives under tests/kafka/, or it is a `broker` fixture's
    ``apache-kafka`` variant."""
    return nodeid.startswith(_APACHE_KAFKA_PATHS) or bool(_VARIANT.search(nodeid))


# Apache Kafka itself (oncelog.tools.apache_kafka): one single node and one 3-node cluster per test
# session (per xdist worker), each started on first use and shared by the tests that ask for it;
# a test that kills a node need not restart it (the next user gets every node running again).
# Tests using them are marked `apache_kafka` (and e2e) and must live under tests/kafka/, which
# runs on one worker as its own xdist scope: beside Spark's group, the longest share, not after it
# (a Spark test that needs Apache Kafka too runs in Spark's scope and starts its own there). Without
# Java 17+ or Maven, or when Maven Central does not resolve Kafka, they skip with the reason, except
# under CI=true, where that fails: CI must really run them.
_APACHE_KAFKA_PATHS = ("tests/kafka/",)
_APACHE_KAFKA_FIXTURES = {"apache_kafka", "apache_kafka_cluster"}
_APACHE_KAFKA_NODES = {"apache_kafka": 1, "apache_kafka_cluster": 3}  # fixture -> nodes
_apache_kafka_clusters: dict = {}  # nodes -> this session's KafkaCluster


def _apache_kafka_session(nodes: int):
    from oncelog.tools.apache_kafka import KafkaCluster

    from .helpers import start_apache_kafka

    cluster = KafkaCluster(nodes=nodes)
    start_apache_kafka(cluster)
    _apache_kafka_clusters[nodes] = cluster
    yield cluster
    _apache_kafka_clusters.pop(nodes, None)
    cluster.stop(graceful=False)


def pytest_runtest_teardown(item, nextitem):
    """Stop a session's Apache Kafka once the next test does not use it (their tests run in a row):
    an idle 3-node cluster costs ~7% of a core for the rest of the run. A later user starts it anew."""
    wanted = {_APACHE_KAFKA_NODES[f] for f in getattr(nextitem, "fixturenames", ()) if f in _APACHE_KAFKA_NODES}
    if nextitem is not None and _is_variant(nextitem):
        wanted.add(1)
    for nodes, cluster in _apache_kafka_clusters.items():
        if nodes not in wanted and cluster.members:
            cluster.stop(graceful=False)


@pytest.fixture(scope="session")
def _apache_kafka_1():
    yield from _apache_kafka_session(1)


@pytest.fixture(scope="session")
def _apache_kafka_3():
    yield from _apache_kafka_session(3)


@pytest.fixture
def apache_kafka(_apache_kafka_1):
    """A single-node Apache Kafka (KafkaCluster): ``.bootstrap``, ``.kill(1)``, ``.restart(1)``."""
    _apache_kafka_1.ensure_running()
    return _apache_kafka_1


@pytest.fixture
def apache_kafka_cluster(_apache_kafka_3):
    """A 3-node Apache Kafka (RF 3, min.insync.replicas=2) with every node running."""
    _apache_kafka_3.ensure_running()
    return _apache_kafka_3


# (the testing plugin's too: oncelog_broker_fresh forks broker processes, spark_session is Spark)
_PROCESS_FIXTURES = {"broker", "broker_factory", "spark", "oncelog_broker_fresh", "spark_session"} | _APACHE_KAFKA_FIXTURES


_SPARK_PATHS = ("tests/spark/", "tests/test_demo.py", "tests/test_demo_kafka.py",
                "tests/test_bench_endurance.py",
                "tests/sample_suite/test_spark_read.py")  # every test that starts Spark, and only those


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
            if _starts_spark(nodeid):
                return "spark"
            return "apache_kafka" if _on_apache_kafka(nodeid) else nodeid

    return SparkOnOneWorker(config, log)


def _is_variant(item) -> bool:
    """The ``apache-kafka`` variant of a ``both_brokers`` test."""
    callspec = getattr(item, "callspec", None)
    return callspec is not None and callspec.params.get("broker") == APACHE_KAFKA


def _cluster_variant_left_out(item) -> bool:
    """``cluster_only(reason, **values)``: the ``oncelog-2-nodes`` variant of a parametrized test
    runs only for these parameter values (e.g. one codec: compression does not depend on the node
    count, the routing does)."""
    marker = item.get_closest_marker("cluster_only")
    params = getattr(getattr(item, "callspec", None), "params", {})
    if marker is None or params.get("broker") != ONCELOG_NODES:
        return False
    if not marker.args:
        raise pytest.UsageError(f"{item.nodeid}: cluster_only needs its reason")
    return any(params.get(name) not in allowed for name, allowed in marker.kwargs.items())


def pytest_collection_modifyitems(config, items):
    left_out = [item for item in items if _cluster_variant_left_out(item)]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if item not in left_out]
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if _PROCESS_FIXTURES & fixtures:
            item.add_marker(pytest.mark.e2e)
        if item.get_closest_marker("both_brokers") and {"broker", "broker_factory"} & fixtures \
                and not item.get_closest_marker("oncelog_only") \
                and "broker" not in getattr(getattr(item, "callspec", None), "params", {}):
            raise pytest.UsageError(f"{item.nodeid} starts a broker in a both_brokers module without the broker "
                                    "fixture: mark it pytest.mark.oncelog_only(reason)")
        if _is_variant(item):
            item.add_marker(pytest.mark.apache_kafka)
        if {"spark", "spark_session"} & fixtures and not _starts_spark(item.nodeid):
            raise pytest.UsageError(f"{item.nodeid} uses Spark: put it under {' or '.join(_SPARK_PATHS)}, "
                                    "which run on one worker")
        if _APACHE_KAFKA_FIXTURES & fixtures:
            item.add_marker(pytest.mark.apache_kafka)
            if not item.nodeid.startswith(_APACHE_KAFKA_PATHS + _SPARK_PATHS):
                raise pytest.UsageError(f"{item.nodeid} uses Apache Kafka: put it under {_APACHE_KAFKA_PATHS[0]}, "
                                        "which runs on one worker (one Apache Kafka per session)")
    # Spark's tests first (one group: xdist hands the largest group out first anyway), the broker's
    # in their own order after them. The demo's lead: their first driver makes the class-data
    # archive of Spark's JVM that the later drivers map (tests/spark/conftest.py).
    # Apache Kafka's tests next: one long scope, handed out early to the other worker.
    items.sort(key=lambda item: (not _starts_spark(item.nodeid), not item.nodeid.startswith("tests/test_demo.py"),
                                 not _on_apache_kafka(item.nodeid)))


@pytest.fixture(autouse=True)
def _no_processes_outside_e2e(request, monkeypatch):
    if request.node.get_closest_marker("e2e") is None:
        def refuse(*args, **kwargs):
            raise AssertionError(f"{request.node.nodeid} starts a process ({args[0] if args else kwargs.get('args')!r}): "
                                 "mark it e2e (pytestmark = pytest.mark.e2e)")

        monkeypatch.setattr(subprocess, "Popen", refuse)
    yield


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Bytecode, whatever PYTHONDONTWRITEBYTECODE says (CI's environment sets it). The tests start
# hundreds of broker processes (one run's temporary directories held 703 broker logs) and hundreds
# of other Python processes (Spark's workers, crash tests' drivers, fuzz harnesses) from this tree,
# which pip never compiles: each would compile the modules it imports again (~0.3 s of CPU for a
# broker), and each pytest worker would rewrite and compile every test module again at collection
# (~8 of its ~16 CPU-s). So the tree is compiled once, before the first test (pytest_configure;
# oncelog.spark.session.compile_connector does it for oncelog/ alone, in a process that writes no
# bytecode, once Spark starts), and pytest keeps its rewritten test modules.
sys.dont_write_bytecode = False


def pytest_configure(config):
    from . import cpu_accounting

    config.pluginmanager.register(cpu_accounting.Plugin(), "oncelog-cpu-accounting")
    if not hasattr(config, "workerinput"):  # once, in the controller (or the only process)
        import compileall

        for part in ("oncelog", "bench", "tests"):
            compileall.compile_dir(os.path.join(ROOT, part), quiet=2)
