"""oncelog's pytest plugin: Kafka brokers as fixtures, with no conftest.

Registered through the ``pytest11`` entry point, so ``pip install oncelog`` is enough for a test
to ask for one of these fixtures:

``oncelog_broker``
    A view of the test session's one embedded broker (``oncelog.testing.Broker(kind="thread")``,
    one per session, per xdist worker, started on first use). Tests share it, so the view hands
    out names of the test's own (``topic()``, ``unique()``) and removes the faults the test added
    when it ends. ``kill``/``restart``/``stop`` would break every later test and are refused:
    ``oncelog_broker_fresh`` gives a test a broker of its own. With ``--kafka-bootstrap``, a test
    marked ``any_kafka`` gets the same view over that cluster (``oncelog.testing.ExternalKafka``)
    instead; what an external cluster cannot do (faults, kills) skips the test with the reason.
``oncelog_broker_fresh``
    A new broker process for this test alone (``kind="process"``): ``kill()`` (SIGKILL) and
    ``restart()`` (same port, same data) work.
``oncelog_secure_broker``
    One SASL_SSL broker per session: a throwaway CA made by ``trustme``, a PLAIN user;
    ``client_config()`` gives confluent-kafka's settings for it.
``spark_session``
    A local SparkSession with the connector (``format("oncelog")``) registered; an already
    active session is reused (one Spark JVM per test session).

Options: ``--oncelog-data-dir=DIR`` (broker data under DIR, kept), ``--oncelog-keep`` (keep the
temporary data directories and list them at the end), ``--kafka-bootstrap=HOST:PORT`` and
``--kafka-config=FILE`` (client properties of that cluster, Java's or librdkafka's names).

Invariant: loading this plugin costs nothing — no broker, no Spark, no import of oncelog's
modules — until a test asks for one of its fixtures (it is loaded in every pytest run of an
environment where oncelog is installed).
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

_ANY_KAFKA = ("any_kafka: the test holds for any Kafka cluster; with --kafka-bootstrap=HOST:PORT its "
              "oncelog_broker is that cluster (oncelog.testing.ExternalKafka) instead of the embedded broker")
_DATA_DIRS = pytest.StashKey[list]()  # data directories kept in this process, listed at the end


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("oncelog", "oncelog test brokers (oncelog.testing)")
    group.addoption("--oncelog-data-dir", metavar="DIR", default=None,
                    help="put the data of the brokers the oncelog fixtures start under DIR, and keep it")
    group.addoption("--oncelog-keep", action="store_true", default=False,
                    help="keep the brokers' temporary data directories and list them at the end")
    group.addoption("--kafka-bootstrap", metavar="HOST:PORT", default=None,
                    help="run the tests marked any_kafka against this Kafka cluster instead of the embedded broker")
    group.addoption("--kafka-config", metavar="FILE", default=None,
                    help="client properties for --kafka-bootstrap (security settings, Java or librdkafka names)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", _ANY_KAFKA)
    config.stash[_DATA_DIRS] = []
    if config.getoption("kafka_config") and not config.getoption("kafka_bootstrap"):
        raise pytest.UsageError("--kafka-config needs --kafka-bootstrap=HOST:PORT")


def pytest_collection_finish(session: pytest.Session) -> None:
    """A test that will ask for ``oncelog_broker_fresh``: warm the process kind's fork server now,
    beside the collection's end, so the first fresh broker starts as fast as the others (the
    fork server imports the broker once, ~1 s)."""
    if session.config.getoption("collectonly") or not any(
            "oncelog_broker_fresh" in getattr(item, "fixturenames", ()) for item in session.items):
        return
    import threading

    from oncelog.testing._zygote import Zygote

    threading.Thread(target=_warm, args=(Zygote,), name="oncelog-zygote-warm", daemon=True).start()


def _warm(zygote) -> None:
    try:
        zygote.get()
    except Exception:  # noqa: BLE001 — the first fresh broker starts it again and reports why
        pass


def pytest_report_header(config: pytest.Config) -> list[str]:
    bootstrap = config.getoption("kafka_bootstrap")
    return [f"oncelog: tests marked any_kafka run against {bootstrap} (--kafka-bootstrap)"] if bootstrap else []


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    """Where the kept broker data is: this process's brokers' directories. Under xdist the
    workers' summaries are not shown, so the controller names ``--oncelog-data-dir`` itself, or
    lists the ``oncelog-*`` directories under the workers' temporary directories."""
    if hasattr(config, "workerinput"):
        return
    root, keep = config.getoption("oncelog_data_dir"), config.getoption("oncelog_keep")
    if not (root or keep):
        return
    dirs = list(config.stash.get(_DATA_DIRS, []))
    if not dirs and config.pluginmanager.has_plugin("dsession"):  # xdist's controller
        if root:
            dirs = [f"{Path(root).absolute()} (a directory per worker)"]
        else:
            base = config._tmp_path_factory.getbasetemp()  # the parent of the workers' basetemps
            dirs = sorted(str(p) for p in base.glob("*/oncelog-*") if p.is_dir() and not p.is_symlink())
    if dirs:
        terminalreporter.write_sep("-", "oncelog: broker data kept")
        for d in dirs:
            terminalreporter.write_line(d)


# ---------------------------------------------------------------------------------------------
# Helpers


def _worker() -> str:
    return os.environ.get("PYTEST_XDIST_WORKER", "main")


def _slug(text: str, limit: int = 60) -> str:
    """A piece of a Kafka name (``[a-zA-Z0-9._-]``) from a test's name."""
    return re.sub(r"[^a-zA-Z0-9._-]+", "-", text).strip("-.")[:limit] or "test"


def _data_dir(config: pytest.Config, tmp_path_factory, name: str) -> tuple[str | None, bool]:
    """A broker's data directory and whether to keep it: under ``--oncelog-data-dir`` (one
    directory per worker, a new one per broker), under pytest's temporary directory with
    ``--oncelog-keep``, else None (the broker makes a temporary one and removes it at stop)."""
    root = config.getoption("oncelog_data_dir")
    if root:
        parent = Path(root).absolute() / _worker()
        parent.mkdir(parents=True, exist_ok=True)
        path = tempfile.mkdtemp(prefix=f"{_slug(name)}-", dir=parent)
        config.stash[_DATA_DIRS].append(path)
        return path, True
    if config.getoption("oncelog_keep"):
        path = str(tmp_path_factory.mktemp(_slug(name), numbered=True))  # name: "oncelog-..."
        config.stash[_DATA_DIRS].append(path)
        return path, True
    return None, False


# confluent-kafka settings whose names have underscores (callbacks, the logger).
_CALLBACKS = frozenset({"error_cb", "throttle_cb", "stats_cb", "oauth_cb", "on_delivery", "on_commit", "logger"})


def _read_client_properties(path: str) -> dict[str, str]:
    """``--kafka-config``: a Java properties file of client settings. Security settings (Java's
    names such as ``sasl.jaas.config`` and ``ssl.truststore.location``, or librdkafka's) become
    confluent-kafka's through ``oncelog.client.security.librdkafka_config``; the rest are kept."""
    from oncelog.client.security import librdkafka_config
    from oncelog.config.serve_options import read_properties

    if not os.path.isfile(path):
        raise pytest.UsageError(f"--kafka-config {path}: no such file")
    props = {s.name: s.value for s in read_properties(path)}
    plain = {k: v for k, v in props.items()
             if not k.startswith(("ssl.", "sasl.", "security.")) and k != "bootstrap.servers"}
    if any(k.startswith(("ssl.", "sasl.", "security.")) for k in props):
        plain.update(librdkafka_config(props))
        plain.pop("bootstrap.servers", None)
    return plain


def _external_reason(exc: BaseException, bootstrap: str) -> str:
    return f"{exc} (this run's any_kafka tests use the external Kafka at {bootstrap}, --kafka-bootstrap)"


# ---------------------------------------------------------------------------------------------
# The per-test views


class _TestFaults:
    """The faults of one test on a broker: ``add`` and ``clear`` as ``Broker.faults``; every fault
    added through it is removed when the test ends (``_remove_all``), so no fault outlives it."""

    def __init__(self, faults, on_unsupported) -> None:
        self._faults = faults
        self._on_unsupported = on_unsupported
        self._added: list = []

    def add(self, api, **kwargs):
        from oncelog.testing import NotSupported

        try:
            fault = self._faults.add(api, **kwargs)
        except NotSupported as exc:
            self._on_unsupported(exc)
            raise
        self._added.append(fault)
        return fault

    def clear(self) -> None:
        """Remove this test's faults (those of other tests are gone already)."""
        self._remove_all()

    def _remove_all(self) -> None:
        added, self._added = self._added, []
        for fault in added:
            fault.remove()

    def __repr__(self) -> str:
        return f"<faults of this test: {len(self._added)}>"


class BrokerView:
    """What a test gets from ``oncelog_broker`` and ``oncelog_broker_fresh``: the broker's
    helpers (``bootstrap_servers``, ``client_config``, ``create_topic``, ``read_committed``,
    ``transactions``, ``groups``, ``audit``, ``faults``) plus names of the test's own.

    ``topic(name)`` creates a topic whose name no other test (or run, on a shared external
    cluster) uses and returns that name; ``unique(name)`` only makes such a name (group ids,
    transactional ids). ``target`` is the ``Broker`` or ``ExternalKafka`` behind the view.

    Lifecycle (``kill``, ``restart``, ``stop``, ``pause``) only on a broker of the test's own
    (``oncelog_broker_fresh``); on the shared one they raise ``NotSupported`` naming that
    fixture. On an external cluster whatever raises ``NotSupported`` skips the test instead,
    with the reason: a suite moved to a real cluster runs what it can there."""

    def __init__(self, target, test_name: str, *, shared: bool, external: bool) -> None:
        self.target = target
        self._test = _slug(test_name, 40)
        self._shared = shared
        self._external = external
        self._count = 0
        self._faults: _TestFaults | None = None
        self._paused_until = 0.0

    # -- names -------------------------------------------------------------------------------
    def unique(self, name: str = "t") -> str:
        """``<name>-<test>-<n>-<random>``: a legal Kafka name of this test alone."""
        self._count += 1
        return f"{_slug(name, 100)}-{self._test}-{self._count}-{uuid.uuid4().hex[:6]}"

    def topic(self, name: str = "t", partitions: int = 1, config: dict | None = None) -> str:
        """Create a topic of this test's own (usable when this returns) and return its name."""
        topic = self.unique(name)
        self.create_topic(topic, partitions=partitions, config=config)
        return topic

    # -- the broker's helpers ----------------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        return self.target.bootstrap_servers

    @property
    def external(self) -> bool:
        """True when the test runs against an external cluster (``--kafka-bootstrap``)."""
        return self._external

    def client_config(self, **extra) -> dict:
        return self.target.client_config(**extra)

    def create_topic(self, name: str, partitions: int = 1, config: dict | None = None) -> None:
        return self._call(self.target.create_topic, name, partitions=partitions, config=config)

    def read_committed(self, topic: str, timeout: float = 30.0):
        return self._call(self.target.read_committed, topic, timeout=timeout)

    def transactions(self):
        return self._call(self.target.transactions)

    def groups(self):
        return self._call(self.target.groups)

    def audit(self, inputs, outputs, **kw):
        return self._call(self.target.audit, inputs, outputs, **kw)

    @property
    def faults(self) -> _TestFaults:
        if self._faults is None:
            from oncelog.testing import NotSupported

            try:
                faults = self.target.faults
            except NotSupported as exc:
                self._unsupported(exc)
                raise
            self._faults = _TestFaults(faults, self._unsupported)
        return self._faults

    # -- lifecycle ---------------------------------------------------------------------------
    def kill(self) -> None:
        self._lifecycle("kill")
        return self._call(self.target.kill)

    def restart(self):
        self._lifecycle("restart")
        self._call(self.target.restart)
        return self

    def stop(self) -> None:
        self._lifecycle("stop")
        return self._call(self.target.stop)

    def pause(self, seconds: float) -> None:
        """The broker stops answering for ``seconds``. On the shared broker the test's end
        waits until the pause is over, so the next test finds it answering."""
        self._paused_until = max(self._paused_until, time.monotonic() + seconds)
        return self._call(self.target.pause, seconds)

    def __getattr__(self, name: str):
        # data_dir, port, kind ... of the broker behind the view.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.target, name)

    def __repr__(self) -> str:
        kind = "external" if self._external else "shared" if self._shared else "fresh"
        return f"<oncelog {kind} broker {self.bootstrap_servers} for {self._test}>"

    # -- internals ---------------------------------------------------------------------------
    def _lifecycle(self, what: str) -> None:
        from oncelog.testing import NotSupported

        if self._external:
            self._unsupported(NotSupported(f"{what}() needs a broker of the test's own, not an external cluster"))
        if self._shared:
            raise NotSupported(f"oncelog_broker is the test session's shared broker: {what}() on it would change "
                               f"every later test; use the oncelog_broker_fresh fixture (a broker process of "
                               f"this test's own, where kill() and restart() work)")

    def _unsupported(self, exc: BaseException) -> None:
        if self._external:
            pytest.skip(_external_reason(exc, self.bootstrap_servers))

    def _call(self, fn, *args, **kwargs):
        from oncelog.testing import NotSupported

        try:
            return fn(*args, **kwargs)
        except NotSupported as exc:
            self._unsupported(exc)
            raise

    def _finish(self) -> None:
        """The test's end: its faults removed, a pause of the shared broker waited out."""
        if self._faults is not None:
            self._faults._remove_all()
        if self._shared:
            left = self._paused_until - time.monotonic()
            if left > 0:
                time.sleep(left)


# ---------------------------------------------------------------------------------------------
# Fixtures


def _external_wanted(request) -> bool:
    return bool(request.config.getoption("kafka_bootstrap")) and \
        request.node.get_closest_marker("any_kafka") is not None


@pytest.fixture(scope="session")
def _oncelog_shared_broker(request, tmp_path_factory):
    """The session's embedded broker (per xdist worker), started when a test first needs it."""
    from oncelog.testing import Broker

    data_dir, keep = _data_dir(request.config, tmp_path_factory, "oncelog-shared")
    broker = Broker(kind="thread", data_dir=data_dir, keep=keep)
    broker.start()
    yield broker
    broker.close()  # stop, and remove a temporary data directory unless kept


@pytest.fixture(scope="session")
def _oncelog_external_kafka(request):
    """``--kafka-bootstrap``'s cluster, with ``--kafka-config``'s client settings."""
    from oncelog.testing import ExternalKafka

    config_file = request.config.getoption("kafka_config")
    client = _read_client_properties(config_file) if config_file else None
    return ExternalKafka(request.config.getoption("kafka_bootstrap"), client_config=client)


def _external_view(request) -> BrokerView:
    return BrokerView(request.getfixturevalue("_oncelog_external_kafka"), request.node.name,
                      shared=True, external=True)


@pytest.fixture
def oncelog_broker(request):
    """This test's view of the session's shared broker (or, for an ``any_kafka`` test run with
    ``--kafka-bootstrap``, of that cluster): see ``BrokerView``. Faults the test adds are removed
    when it ends; use ``topic()``/``unique()`` for names, as other tests share the broker."""
    if _external_wanted(request):
        view = _external_view(request)
    else:
        view = BrokerView(request.getfixturevalue("_oncelog_shared_broker"), request.node.name,
                          shared=True, external=False)
    yield view
    view._finish()


@pytest.fixture
def oncelog_broker_fresh(request, tmp_path_factory):
    """A broker process of this test's own (``kind="process"``: ``kill()`` is a real SIGKILL,
    ``restart()`` comes back on the same port with the same data), stopped at the test's end.
    An ``any_kafka`` test run with ``--kafka-bootstrap`` gets the external cluster's view, where
    ``kill()``/``restart()`` skip the test."""
    if _external_wanted(request):
        view = _external_view(request)
        yield view
        view._finish()
        return
    from oncelog.testing import Broker

    data_dir, keep = _data_dir(request.config, tmp_path_factory, f"oncelog-{request.node.name}")
    broker = Broker(kind="process", data_dir=data_dir, keep=keep)
    broker.start()
    view = BrokerView(broker, request.node.name, shared=False, external=False)
    try:
        yield view
    finally:
        try:
            view._finish()
        finally:
            if not keep:
                broker.kill()  # its data goes: no clean shutdown to wait for (~0.8 s)
            broker.close()  # stop (if it runs), and remove a temporary data directory unless kept


class SecureBroker:
    """``oncelog_secure_broker``: an embedded broker whose ``bootstrap_servers`` is a SASL_SSL
    listener (a certificate for 127.0.0.1/localhost from a throwaway CA, SASL PLAIN with one
    user), and the confluent-kafka settings that reach it (``client_config``). The broker also
    listens on a PLAINTEXT loopback port, ``plaintext_bootstrap_servers``, which the helpers
    (``create_topic``, ``read_committed``, ...) of ``broker`` use."""

    mechanism = "PLAIN"

    def __init__(self, broker, bootstrap_servers: str, ca_location: str, username: str, password: str) -> None:
        self.broker = broker
        self.bootstrap_servers = bootstrap_servers
        self.plaintext_bootstrap_servers = broker.bootstrap_servers
        self.ca_location = ca_location
        self.username = username
        self.password = password

    def client_config(self, **extra) -> dict:
        """confluent-kafka settings for the SASL_SSL listener, updated with ``extra``
        (``group_id="g"`` becomes ``group.id``, as ``Broker.client_config``; confluent-kafka's
        callbacks such as ``error_cb`` keep their names)."""
        config = {"bootstrap.servers": self.bootstrap_servers, "security.protocol": "SASL_SSL",
                  "sasl.mechanism": self.mechanism, "sasl.username": self.username,
                  "sasl.password": self.password, "ssl.ca.location": self.ca_location}
        config.update({k if k in _CALLBACKS else k.replace("_", "."): v for k, v in extra.items()})
        return config

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.broker, name)

    def __repr__(self) -> str:
        return f"<oncelog SASL_SSL broker {self.bootstrap_servers} user {self.username}>"


@pytest.fixture(scope="session")
def oncelog_secure_broker(request, tmp_path_factory):
    """One SASL_SSL broker per session: see ``SecureBroker``. Needs ``trustme`` (a test extra of
    oncelog, not a dependency): without it the test fails saying how to install it."""
    try:
        import trustme
    except ImportError:
        trustme = None
    if trustme is None:
        pytest.fail("oncelog_secure_broker makes its certificates with trustme, which is not installed: "
                    "pip install trustme (or pip install 'oncelog[test]')", pytrace=False)
    from oncelog.testing import Broker

    certs = tmp_path_factory.mktemp("oncelog-secure-certs")
    ca = trustme.CA()
    ca_path = str(certs / "ca.pem")
    ca.cert_pem.write_to_path(ca_path)
    keystore = str(certs / "broker.pem")
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(keystore)
    username, password = "alice", f"alice-{uuid.uuid4().hex[:12]}"
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            f'username="{username}" password="{password}" user_{username}="{password}";')
    data_dir, keep = _data_dir(request.config, tmp_path_factory, "oncelog-secure")
    broker = Broker(kind="thread", data_dir=data_dir, keep=keep, config={
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": keystore,
    })
    broker.start()
    yield SecureBroker(broker, broker.addresses["SASL_SSL"], ca_path, username, password)
    broker.close()


@pytest.fixture(scope="session")
def spark_session():
    """A local SparkSession (``local[2,3]``: two cores, a failed task tried up to 3 times) with
    ``format("oncelog")`` registered, the UI off, 2 shuffle partitions and Python workers running
    this interpreter (``oncelog.spark.session.local_session``). A SparkSession already active in
    this process is reused and left running: one Spark JVM per test session. One made here is
    stopped at the session's end."""
    from pyspark.sql import SparkSession

    from oncelog.spark.datasource import OncelogDataSource

    active = SparkSession.getActiveSession() or getattr(SparkSession, "_instantiatedSession", None)
    if active is not None:
        active.dataSource.register(OncelogDataSource)
        yield active
        return
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from oncelog.spark.session import local_session

    java_options = ""
    try:  # the class-data archive of Spark's driver JVM, when `oncelog demo` made one: a faster start
        from oncelog.pipeline.jvmcache import JvmCache

        cache = JvmCache.locate()
        java_options = cache.java_options() if cache.ready() else ""
    except Exception:  # noqa: BLE001 - an optimisation only
        java_options = ""
    session = local_session("local[2,3]", app_name="oncelog-pytest", java_options=java_options)
    yield session
    session.stop()
