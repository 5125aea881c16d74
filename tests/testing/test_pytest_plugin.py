"""oncelog's pytest plugin (oncelog.testing.pytest_plugin), as a user meets it.

A user's project is a temporary directory with a test file and nothing else: no conftest, no
pytest configuration. Its run (``python -m pytest`` in a subprocess, as a user would type it)
finds the fixtures through the ``pytest11`` entry point of the installed package. Its tests use
the shared broker (produce with confluent-kafka, read back read_committed, names of each test's
own, faults gone when the test that added them ends) and a fresh broker process (SIGKILL, then
restart with the data kept); in the same run (one pytest start-up costs ~3 s) ``--kafka-bootstrap``
moves its ``any_kafka`` tests to an "external" cluster (a second oncelog broker stands in for
one), which skips, with the reason, those that need faults or kills. The SASL_SSL broker and the
per-test view are used here, in this process: the plugin is loaded in the project's own run too.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer

pytestmark = pytest.mark.e2e  # the user's runs are pytest processes

USER_TESTS = '''
import pytest
from confluent_kafka import Producer

from oncelog.testing import NotSupported

added = []


def produce(broker, topic, values):
    p = Producer(broker.client_config(**{"linger.ms": 0}))
    for v in values:
        p.produce(topic, value=v)
    assert p.flush(10) == 0


def test_produce_then_read_committed(oncelog_broker):
    topic = oncelog_broker.topic("orders")
    produce(oncelog_broker, topic, [b"a", b"b", b"c"])
    assert [r.value for r in oncelog_broker.read_committed(topic)] == [b"a", b"b", b"c"]


def test_names_of_the_tests_own(oncelog_broker):
    a, b = oncelog_broker.topic("orders"), oncelog_broker.unique("orders")
    assert a != b and "test_names_of_the_tests_own" in a
    assert oncelog_broker.read_committed(a, timeout=5) == []


def test_a_fault_lives_as_long_as_its_test(oncelog_broker):
    added.append(oncelog_broker.faults.add("Produce", error="NOT_ENOUGH_REPLICAS"))
    assert added[0].live


def test_the_next_test_finds_it_removed(oncelog_broker):
    assert added and not added[0].live
    topic = oncelog_broker.topic("after-fault")
    produce(oncelog_broker, topic, [b"x"])
    assert [r.value for r in oncelog_broker.read_committed(topic)] == [b"x"]


def test_the_shared_broker_cannot_be_killed(oncelog_broker):
    with pytest.raises(NotSupported, match="oncelog_broker_fresh"):
        oncelog_broker.kill()


def test_kill_and_restart_keep_the_data(oncelog_broker_fresh):
    topic = oncelog_broker_fresh.topic("kept")
    produce(oncelog_broker_fresh, topic, [b"before"])
    oncelog_broker_fresh.kill()
    oncelog_broker_fresh.restart()
    produce(oncelog_broker_fresh, topic, [b"after"])
    assert [r.value for r in oncelog_broker_fresh.read_committed(topic)] == [b"before", b"after"]
'''

EXTERNAL_TESTS = '''
import os

EXTERNAL = os.environ["EXTERNAL_BOOTSTRAP"]


@pytest.mark.any_kafka
def test_runs_on_the_external_cluster(oncelog_broker):
    assert oncelog_broker.external and oncelog_broker.bootstrap_servers == EXTERNAL
    assert oncelog_broker.client_config()["client.id"] == "from-kafka-config"
    topic = oncelog_broker.topic("ext")
    produce(oncelog_broker, topic, [b"e"])
    assert [r.value for r in oncelog_broker.read_committed(topic)] == [b"e"]


@pytest.mark.any_kafka
def test_needs_faults(oncelog_broker):
    oncelog_broker.faults.add("Produce", error="NOT_ENOUGH_REPLICAS")


@pytest.mark.any_kafka
def test_needs_a_kill(oncelog_broker_fresh):
    oncelog_broker_fresh.kill()


def test_unmarked_stays_embedded(oncelog_broker):
    assert not oncelog_broker.external and oncelog_broker.bootstrap_servers != EXTERNAL
'''


def run_user_project(tmp_path, source: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """``python -m pytest`` in a directory holding only ``test_user.py``: what a user runs."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_user.py").write_text(source)
    child_env = {k: v for k, v in os.environ.items()
                 if not k.startswith(("PYTEST_", "PYTHONPATH"))}  # not this run's xdist worker or options
    child_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", "-q", *args,
                           str(project)], cwd=project, env=child_env, capture_output=True, text=True, timeout=120)


def outcome(result: subprocess.CompletedProcess) -> dict[str, int]:
    """``{"passed": n, "skipped": n}`` from pytest's last line."""
    last = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    return {word: int(n) for n, word in re.findall(r"(\d+) (passed|skipped|failed|errors?)", last)}


def test_a_users_project_gets_the_fixtures_from_the_entry_point(tmp_path):
    """One run of a user's project (one pytest start-up, ~3 s of the ~10): the shared and the
    fresh broker, ``--oncelog-data-dir``, and ``--kafka-bootstrap``/``--kafka-config`` moving the
    ``any_kafka`` tests to another cluster while the unmarked ones stay on the embedded broker."""
    from oncelog.testing import Broker

    data = tmp_path / "data"
    config = tmp_path / "client.properties"
    config.write_text("# the external cluster's client settings\nclient.id=from-kafka-config\n")
    with Broker(kind="thread") as external:  # a cheap stand-in for a real cluster
        result = run_user_project(tmp_path, USER_TESTS + EXTERNAL_TESTS, f"--oncelog-data-dir={data}",
                                  f"--kafka-bootstrap={external.bootstrap_servers}", f"--kafka-config={config}",
                                  env={"EXTERNAL_BOOTSTRAP": external.bootstrap_servers})
    assert result.returncode == 0, result.stdout + result.stderr
    assert outcome(result) == {"passed": 8, "skipped": 2}, result.stdout
    # The any_kafka tests that need faults or a kill are skipped there, with the reason.
    skips = [line for line in result.stdout.splitlines() if line.startswith("SKIPPED")]
    assert len(skips) == 2 and all(f"external Kafka at {external.bootstrap_servers}" in s for s in skips), skips
    assert any("faults" in s for s in skips) and any("kill()" in s for s in skips), skips
    # --oncelog-data-dir: the shared broker's and the fresh broker's data, kept and listed.
    kept = sorted(p.name.rsplit("-", 1)[0] for p in data.glob("*/*") if p.is_dir())
    assert kept == ["oncelog-shared", "oncelog-test_kill_and_restart_keep_the_data"], kept
    assert "oncelog: broker data kept" in result.stdout and str(data) in result.stdout


def test_loading_the_plugin_imports_nothing_heavy():
    """Every pytest run where oncelog is installed loads the plugin: it must not import the
    broker, the protocol (kio, whose import also pulls in hypothesis when installed and then
    warns from hypothesis' own plugin), the clients or Spark until a fixture is used."""
    code = ("import sys, oncelog.testing.pytest_plugin; "
            "print(sorted({m.split('.')[0] if not m.startswith('oncelog') else m for m in sys.modules "
            "if m.startswith(('kio', 'hypothesis', 'confluent_kafka', 'pyspark', 'oncelog.apis', "
            "'oncelog.testing.broker'))}))")
    heavy = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert heavy == "[]", f"loading the plugin imported {heavy}: oncelog/testing/__init__.py must import lazily"


def test_the_secure_broker_takes_its_client_config_and_refuses_a_wrong_password(oncelog_secure_broker):
    broker = oncelog_secure_broker
    config = broker.client_config()
    assert config["security.protocol"] == "SASL_SSL" and os.path.isfile(config["ssl.ca.location"])
    topic = f"secure-{os.getpid()}-{time.monotonic_ns()}"
    broker.create_topic(topic)
    p = Producer(broker.client_config(**{"linger.ms": 0}))
    p.produce(topic, value=b"over-tls")
    assert p.flush(15) == 0
    c = Consumer(broker.client_config(**{"group.id": topic, "auto.offset.reset": "earliest"}))
    c.subscribe([topic])
    try:
        deadline = time.monotonic() + 15
        while (m := c.poll(0.5)) is None or m.error():
            assert time.monotonic() < deadline, "nothing read over SASL_SSL"
        assert m.value() == b"over-tls"
    finally:
        c.close()
    errors = []
    wrong = Producer(broker.client_config(**{"sasl.password": "wrong", "error_cb": errors.append}))
    deadline = time.monotonic() + 10
    while not errors and time.monotonic() < deadline:
        wrong.poll(0.2)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors


def test_each_test_gets_names_of_its_own(oncelog_broker, request):
    a, b = oncelog_broker.topic("t"), oncelog_broker.topic("t")
    assert a != b and request.node.name in a
    assert oncelog_broker.read_committed(a, timeout=5) == []


def test_faults_a_test_added_are_removed_at_its_end(oncelog_broker, request):
    from oncelog.testing.pytest_plugin import BrokerView

    other = BrokerView(oncelog_broker.target, "another-test", shared=True, external=False)
    fault = other.faults.add("Produce", error="NOT_ENOUGH_REPLICAS")
    assert fault.live
    other._finish()  # what the fixture does at the end of the test that added it
    assert not fault.live
    topic = oncelog_broker.topic("after")
    p = Producer(oncelog_broker.client_config(**{"linger.ms": 0}))
    p.produce(topic, value=b"v")
    assert p.flush(10) == 0
