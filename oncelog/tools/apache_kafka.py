"""Apache Kafka itself, fetched from Maven Central and run on loopback: the reference cluster that
the connector's tests and the demo run against besides oncelog.

Fetch. :func:`fetch` resolves ``org.apache.kafka:kafka_2.13`` (the broker, with its KRaft
controller and ``kafka.tools.StorageTool``) and ``kafka-tools`` (the admin command-line tools,
without Kafka Connect's runtime, which only its plugin-path tool needs) plus a log4j2 binding
for slf4j, with ``mvn dependency:copy-dependencies`` on a small generated pom. The jars land in
``$XDG_CACHE_HOME/oncelog/apache-kafka/<version>/lib`` (``~/.cache/...``), never in the
repository. Invariants: ``lib`` appears whole or not at all (it is built beside and renamed into
place), so a second call, in this process or another, returns at once; a file lock makes
concurrent first calls (two pytest workers, two demos) fetch once. Maven's own local repository
(``~/.m2``) is Maven's cache as usual. Missing Java (17+, as Kafka 4 needs) or Maven, or a
failed resolution, raise :class:`ApacheKafkaUnavailable` with the reason, for callers to skip
or fail on.

Run. :class:`KafkaCluster` runs 1 or 3 combined controller+broker nodes in KRaft mode on
127.0.0.1, each ``java -cp 'lib/*' kafka.Kafka server.properties`` after ``StorageTool format``
with one cluster id and a static quorum (``controller.quorum.voters``). Ports are chosen free
at start and kept across :meth:`KafkaCluster.restart` so clients reconnect to addresses they
know. Each node has three listeners: ``CLIENT`` (the bootstrap handed to clients; its
security protocol can be changed for TLS/SASL tests), ``INTERNAL`` (PLAINTEXT, inter-broker,
and what this module itself queries, so it works whatever ``CLIENT`` demands) and
``CONTROLLER``. Three nodes give the durability of a production cluster: replication factor
3 for new topics and for the offsets and transaction state logs, ``min.insync.replicas=2`` and
``transaction.state.log.min.isr=2``, so one node can be SIGKILLed (:meth:`KafkaCluster.kill`)
and acks=all writes and transactions go on. Readiness is a Metadata answer listing every live
node, polled; no fixed sleeps. JVMs are sized for a 2-core shared machine (a small heap,
SerialGC, C1 only for a fast start; ``quick_start=False`` gives the full JIT for benchmarks).
A node dies with the thread that started it (``PR_SET_PDEATHSIG``): a crashed test run leaves
no JVMs behind, so start and restart nodes from a thread that outlives them (the main thread).
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import datetime
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field

from ..cachedir import user_cache
from ..process import tail_file

DEFAULT_VERSION = "4.4.0"
VERSION_ENV = "ONCELOG_APACHE_KAFKA_VERSION"  # another 4.x, e.g. 4.3.1
MIN_JAVA = 17  # Kafka 4.x brokers and tools need Java 17+
FETCH_TIMEOUT = 900.0  # a first fetch on a slow mirror; the usual one takes seconds

LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
# The full configuration dump of every client and server config: thousands of lines per start.
logger.config.name = org.apache.kafka.common.config.AbstractConfig
logger.config.level = WARN
"""


class ApacheKafkaUnavailable(RuntimeError):
    """Apache Kafka cannot be had here: no Java 17+, no Maven, or Maven Central did not resolve it."""


def version() -> str:
    return os.environ.get(VERSION_ENV) or DEFAULT_VERSION


def cache_dir(kafka_version: str | None = None) -> str:
    return user_cache("apache-kafka", kafka_version or version())


def java() -> str:
    """The ``java`` to run Kafka with (``$JAVA_HOME/bin/java`` first), checked to be 17+."""
    home = os.environ.get("JAVA_HOME")
    path = os.path.join(home, "bin", "java") if home and os.path.exists(os.path.join(home, "bin", "java")) \
        else shutil.which("java")
    if not path:
        raise ApacheKafkaUnavailable("no java on PATH (Apache Kafka 4 needs Java 17+; apt-get install openjdk-17-jre-headless)")
    try:
        out = subprocess.run([path, "-version"], capture_output=True, text=True, timeout=60).stderr
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ApacheKafkaUnavailable(f"{path} -version failed: {exc}") from exc
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    major = int(m.group(1)) if m else 0
    if major == 1 and m.group(2):  # "1.8.0": Java 8
        major = int(m.group(2))
    if major < MIN_JAVA:
        raise ApacheKafkaUnavailable(f"{path} is Java {major or '?'}; Apache Kafka 4 needs Java {MIN_JAVA}+")
    return path


def _pom(kafka_version: str) -> str:
    # log4j-slf4j-impl: Kafka 4 logs through slf4j 1.7 and ships log4j2 but no binding in its pom
    # (the release tarball adds it); without one every log line is dropped.
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>oncelog</groupId><artifactId>apache-kafka-runtime</artifactId><version>{kafka_version}</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>{kafka_version}</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>{kafka_version}</version>
      <exclusions><exclusion><groupId>org.apache.kafka</groupId><artifactId>connect-runtime</artifactId></exclusion></exclusions>
    </dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>2.25.5</version></dependency>
  </dependencies>
</project>
"""


@dataclass
class ClientJars:
    """Jars of one version in the user's cache (``home/lib``): ``org.apache.kafka:kafka-clients``
    and its runtime dependencies alone (:func:`fetch_client`: what an application built on that
    client has on its classpath), or any Maven runtime fetched the same way (Flink, Kafka Streams
    in the tests); :class:`Installation` is Kafka's own. What :func:`compile_java` compiles against."""

    version: str
    home: str  # user_cache(..., version)
    java: str

    @property
    def lib(self) -> str:
        return os.path.join(self.home, "lib")

    @property
    def classpath(self) -> str:
        return os.path.join(self.lib, "*")


@dataclass
class Installation(ClientJars):
    """Apache Kafka's broker, tools and client jars of one release (:func:`fetch`); ``home`` is
    cache_dir(version)."""

    @property
    def log4j_config(self) -> str:
        return os.path.join(self.home, "log4j2.properties")


def fetch(kafka_version: str | None = None, *, quiet: bool = True) -> Installation:
    """The jars of Apache Kafka ``kafka_version`` in the user's cache, fetched with Maven on the
    first call (a few seconds and ~45 MB on a fast mirror). Raises ApacheKafkaUnavailable."""
    kafka_version = kafka_version or version()
    java_path = java()
    home = cache_dir(kafka_version)

    def finish(work: str) -> None:
        with open(os.path.join(home, "log4j2.properties"), "w") as f:
            f.write(LOG4J2)

    maven_fetch(home, _pom(kafka_version), f"Apache Kafka {kafka_version}", quiet=quiet, finish=finish)
    return Installation(kafka_version, home, java_path)


# The Java client versions the compatibility matrix holds against both brokers: what
# production applications still run (Flink 1.20's connector ships 3.4; Spark 3.5 ships 3.4; Kafka
# Streams and Connect deployments lag a release or three) up to today's.
JAVA_CLIENT_VERSIONS = ("2.8.2", "3.0.2", "3.4.0", "3.6.2", "3.9.1", "4.0.1", "4.4.0")


def _client_pom(client_version: str) -> str:
    # slf4j-simple 1.7 binds the slf4j-api 1.7 every client version up to 4.4 depends on, so the
    # client's warnings reach stderr (the program sets the level to WARN).
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>oncelog</groupId><artifactId>kafka-clients-runtime</artifactId><version>{client_version}</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-clients</artifactId><version>{client_version}</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-simple</artifactId><version>1.7.36</version></dependency>
  </dependencies>
</project>
"""


def fetch_client(client_version: str, *, quiet: bool = True) -> ClientJars:
    """kafka-clients ``client_version`` in the user's cache (``.../kafka-clients/<version>/lib``),
    fetched with Maven on the first call (~4 jars, a few MB). Raises ApacheKafkaUnavailable."""
    java_path = java()
    home = user_cache("kafka-clients", client_version)
    maven_fetch(home, _client_pom(client_version), f"kafka-clients {client_version}", quiet=quiet)
    return ClientJars(client_version, home, java_path)


def client_command(jars: ClientJars, classes: str, main_class: str, args=(), *, heap: str = "192m") -> list[str]:
    """``main_class`` from ``classes`` (compiled by :func:`compile_java` against ``jars``) on that
    client version's classpath alone, sized and quick-started as Kafka's tools are here."""
    return [jars.java, f"-Xmx{heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-Dorg.slf4j.simpleLogger.logFile=System.err",
            "-cp", os.pathsep.join([classes, jars.classpath]), main_class, *map(str, args)]


def maven_fetch(home: str, pom: str, what: str, *, quiet: bool = True, finish=None) -> str:
    """``home/lib``: the runtime dependencies of ``pom`` copied there by ``mvn
    dependency:copy-dependencies`` on the first call; later calls return at once. ``lib`` appears
    whole or not at all (built beside, renamed into place) and a file lock in ``home`` makes
    concurrent first calls run Maven once. ``finish(work)`` runs before the rename (more files
    for ``home``). Raises ApacheKafkaUnavailable (no Maven, or Maven did not resolve ``what``)."""
    lib = os.path.join(home, "lib")
    if os.path.isdir(lib):
        return lib
    mvn = shutil.which("mvn")
    if not mvn:
        raise ApacheKafkaUnavailable(f"no mvn on PATH: {what} is fetched from Maven Central with Maven "
                                     "(apt-get install maven)")
    try:
        os.makedirs(home, exist_ok=True)
    except OSError as exc:
        raise ApacheKafkaUnavailable(f"cannot create the cache folder {home}: {exc}") from exc
    import fcntl

    with open(os.path.join(home, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a concurrent first call waits here, then finds lib
        if os.path.isdir(lib):
            return lib
        work = tempfile.mkdtemp(prefix="fetch-", dir=home)
        try:
            with open(os.path.join(work, "pom.xml"), "w") as f:
                f.write(pom)
            out = os.path.join(work, "lib")
            log_path = os.path.join(home, "fetch.log")
            if not quiet:
                print(f"fetching {what} from Maven Central into {home} ...", file=sys.stderr)
            started = time.monotonic()
            try:
                with open(log_path, "w") as log:
                    rc = subprocess.run([mvn, "-B", "-f", os.path.join(work, "pom.xml"), "dependency:copy-dependencies",
                                         f"-DoutputDirectory={out}", "-DincludeScope=runtime"],
                                        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        timeout=FETCH_TIMEOUT, cwd=work).returncode
            except subprocess.TimeoutExpired as exc:
                raise ApacheKafkaUnavailable(f"mvn did not resolve {what} in {FETCH_TIMEOUT:.0f} s "
                                             f"(see {log_path})") from exc
            if rc != 0 or not os.path.isdir(out):
                errors = [line.strip() for line in open(log_path, errors="replace") if "[ERROR]" in line][:5]
                raise ApacheKafkaUnavailable(f"mvn could not resolve {what} (exit {rc}, see "
                                             f"{log_path}): " + " | ".join(errors))
            jars = os.listdir(out)
            with open(os.path.join(work, "fetch.json"), "w") as f:
                json.dump({"what": what, "jars": len(jars),
                           "bytes": sum(os.path.getsize(os.path.join(out, j)) for j in jars),
                           "seconds": round(time.monotonic() - started, 1),
                           "at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}, f)
            os.replace(os.path.join(work, "fetch.json"), os.path.join(home, "fetch.json"))
            if finish is not None:
                finish(work)
            os.rename(out, lib)  # atomic: lib is whole or absent
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return lib


# Kafka's own tools log as the release's bin/kafka-run-class.sh has them do (tools-log4j2.yaml):
# warnings and errors only, to stderr, so a tool's stdout is its output alone (VerifiableProducer's
# JSON lines, ProducerPerformance's summary) and can be parsed.
TOOLS_LOG4J2 = """\
status = warn
appender.err.type = Console
appender.err.name = ERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = ERR
"""


def _write_once(path: str, text: str) -> str:
    """``path`` holding ``text``: written beside and renamed into place when absent or different,
    so a concurrent reader never sees half a file."""
    with contextlib.suppress(OSError), open(path) as f:
        if f.read() == text:
            return path
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
    return path


def tool_command(main_class: str, args=(), *, installation: Installation | None = None, classpath=(),
                 heap: str = "256m", quick_start: bool = True, log4j_config: str | None = None,
                 system_properties: dict[str, str] | None = None) -> list[str]:
    """The command line that runs ``main_class`` (a Kafka tool such as
    ``org.apache.kafka.tools.ProducerPerformance``, or a class of :func:`compile_java`'s output
    given in ``classpath``) with ``args`` on Kafka's jars, as ``bin/kafka-run-class.sh`` would:
    Kafka's ``lib/*`` after ``classpath``, a ``heap`` sized for a shared machine, SerialGC, and
    log4j2 at WARN to stderr unless ``log4j_config`` names another file. ``quick_start`` (C1
    only) suits short functional runs; benchmarks pass False for the full JIT."""
    inst = installation or fetch()
    log4j_config = log4j_config or _write_once(os.path.join(inst.home, "tools-log4j2.properties"), TOOLS_LOG4J2)
    options = [f"-Xmx{heap}", "-XX:+UseSerialGC", "-Djava.awt.headless=true",
               f"-Dlog4j2.configurationFile={log4j_config}"]
    if quick_start:
        options.append("-XX:TieredStopAtLevel=1")
    options += [f"-D{k}={v}" for k, v in (system_properties or {}).items()]
    cp = os.pathsep.join([*classpath, inst.classpath])
    return [inst.java, *options, "-cp", cp, main_class, *map(str, args)]


def start_tool(main_class: str, args=(), *, stdout=None, stderr=None, env: dict[str, str] | None = None,
               text: bool = False, **options) -> subprocess.Popen:
    """:func:`tool_command` started as a child that dies with the thread that started it (as the
    cluster's nodes do), stdin closed. ``options`` go to :func:`tool_command`."""
    return subprocess.Popen(tool_command(main_class, args, **options), stdout=stdout, stderr=stderr,
                            stdin=subprocess.DEVNULL, text=text, env=None if env is None else {**os.environ, **env},
                            preexec_fn=_die_with_parent)


def run_tool(main_class: str, args=(), *, timeout: float = 300.0, **options) -> subprocess.CompletedProcess:
    """:func:`tool_command` run to its end, stdout and stderr captured as text; a tool still
    running after ``timeout`` seconds is killed and TimeoutExpired raised."""
    proc = start_tool(main_class, args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **options)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise subprocess.TimeoutExpired(proc.args, timeout, out, err) from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def javac() -> str:
    """The ``javac`` beside :func:`java` (``$JAVA_HOME/bin/javac`` first, else PATH's)."""
    home = os.environ.get("JAVA_HOME")
    candidates = [os.path.join(home, "bin", "javac")] if home else []
    candidates.append(os.path.join(os.path.dirname(os.path.realpath(java())), "javac"))
    for path in candidates:
        if os.path.exists(path):
            return path
    path = shutil.which("javac")
    if not path:
        raise ApacheKafkaUnavailable("no javac (a JDK 17+ is needed to compile the Java client programs; "
                                     "apt-get install openjdk-17-jdk-headless)")
    return path


def compile_java(sources, *, installation: ClientJars | None = None) -> str:
    """The classes of the Java ``sources`` (paths) compiled against Kafka's jars (or one client
    version's, :func:`fetch_client`), in the cache
    (``cache_dir()/classes/<hash>``), never beside the sources: the folder is keyed by a hash of
    Kafka's version and every source's name and text, so a changed source compiles again and an
    unchanged one is compiled once per machine. The folder appears whole or not at all (compiled
    beside, renamed into place). A compile error raises RuntimeError with javac's output."""
    import hashlib

    inst = installation or fetch()
    digest = hashlib.sha256(inst.version.encode())
    for path in sorted(sources):
        digest.update(os.path.basename(path).encode() + b"\0")
        with open(path, "rb") as f:
            digest.update(f.read() + b"\0")
    root = os.path.join(inst.home, "classes")
    out = os.path.join(root, digest.hexdigest()[:20])
    if os.path.isdir(out):
        return out
    os.makedirs(root, exist_ok=True)
    work = tempfile.mkdtemp(prefix="javac-", dir=root)
    try:
        done = subprocess.run([javac(), "-nowarn", "-encoding", "UTF-8", "-cp", inst.classpath, "-d", work,
                               *sorted(sources)], capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"javac failed (exit {done.returncode}):\n{done.stdout}{done.stderr}")
        try:
            os.rename(work, out)
        except OSError:  # compiled by another process meanwhile: keep theirs
            if not os.path.isdir(out):
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def _cluster_id() -> str:
    # Kafka's Uuid.toString: URL-safe base64 of 16 bytes without padding; Uuid.randomUuid never
    # makes one that starts with "-" (it would read as a command-line flag).
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _die_with_parent() -> None:  # runs in the child between fork and exec
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@dataclass
class KafkaNode:
    node_id: int
    dir: str
    client_port: int
    internal_port: int
    controller_port: int
    proc: subprocess.Popen | None = None
    started_at: float = 0.0
    ready_seconds: float | None = None  # process start to Metadata listing every live node

    @property
    def log_path(self) -> str:
        return os.path.join(self.dir, "kafka.log")

    @property
    def config_path(self) -> str:
        return os.path.join(self.dir, "server.properties")

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def rss_bytes(self) -> int:
        """Resident memory of the node's JVM (0 when it is not running)."""
        if not self.alive:
            return 0
        with contextlib.suppress(OSError), open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def tail_log(self, lines: int = 40) -> str:
        return tail_file(self.log_path, lines)


@dataclass
class KafkaCluster:
    """``nodes`` combined controller+broker nodes of Apache Kafka on 127.0.0.1 (see the module
    docstring). ``config`` adds or overrides server properties (e.g. ``listener.name.client.*``
    for TLS/SASL with ``client_protocol``); ``format_args`` go to ``StorageTool format`` (e.g.
    ``--add-scram``); ``heap`` is each node's -Xmx."""

    nodes: int = 1
    kafka_version: str | None = None
    workdir: str | None = None
    heap: str = "384m"
    quick_start: bool = True
    client_protocol: str = "PLAINTEXT"
    config: dict[str, str] = field(default_factory=dict)
    format_args: list[str] = field(default_factory=list)
    start_timeout: float = 120.0

    def __post_init__(self) -> None:
        if self.nodes < 1:
            raise ValueError("nodes must be >= 1")
        self.installation: Installation | None = None
        self.members: dict[int, KafkaNode] = {}
        self.cluster_id = _cluster_id()
        self._own_workdir = False
        self.start_seconds: float | None = None  # start() to every node ready, format included

    # -- life cycle ---------------------------------------------------------------------------

    def start(self) -> "KafkaCluster":
        self.installation = fetch(self.kafka_version)
        if self.workdir is None:
            self.workdir = tempfile.mkdtemp(prefix="oncelog-apache-kafka-")
            self._own_workdir = True
        started = time.monotonic()
        for attempt in range(3):  # a port taken between choosing and binding: choose again
            self._layout()
            try:
                self._format()
                for node in self.members.values():
                    self._spawn(node)
                self._wait_ready(list(self.members.values()), self.start_timeout)
                break
            except _PortTaken:
                self._kill_all()
                if attempt == 2:
                    raise
        self.start_seconds = time.monotonic() - started
        return self

    def stop(self, timeout: float = 20.0, *, graceful: bool = True) -> None:
        """Stop every node and remove the work folder if start() made it. Graceful: SIGTERM to all
        at once (a node stopped alone would wait for a quorum the others took with them), then
        SIGKILL after ``timeout`` (a 3-node cluster takes ~5.5 s: its controllers' Raft client
        waits to resign); not graceful: SIGKILL at once, for throw-away clusters."""
        live = [n for n in self.members.values() if n.alive]
        for node in live:
            node.proc.send_signal(signal.SIGTERM if graceful else signal.SIGKILL)
        deadline = time.monotonic() + timeout
        for node in live:
            try:
                node.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                node.proc.kill()
                node.proc.wait()
        if self._own_workdir and self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None
            self._own_workdir = False
        self.members = {}  # stopped: start() or ensure_running() makes a new cluster

    def kill(self, node_id: int) -> None:
        """SIGKILL one node: no flush, no controlled shutdown; its ports stay reserved for restart()."""
        node = self.members[node_id]
        if node.alive:
            node.proc.kill()
            node.proc.wait()

    def restart(self, node_id: int, timeout: float | None = None) -> None:
        """Start a stopped or killed node again on its ports and data, and wait until it answers
        Metadata listing every live node (itself included)."""
        node = self.members[node_id]
        if node.alive:
            raise RuntimeError(f"node {node_id} is running; kill() it first")
        self._spawn(node)
        self._wait_ready([node], timeout or self.start_timeout)

    def ensure_running(self, timeout: float | None = None) -> None:
        """Restart every node that is not running (a test that killed one and failed before
        restarting it), so that the next user gets the whole cluster; after stop(), start anew."""
        if not self.members:
            self.start()
            return
        dead = [n for n in self.members.values() if not n.alive]
        for node in dead:
            self._spawn(node)
        if dead:
            self._wait_ready(dead, timeout or self.start_timeout)

    def __enter__(self) -> "KafkaCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- addresses and queries ----------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{n.client_port}" for n in self.members.values())

    def node_ids(self) -> list[int]:
        return sorted(self.members)

    def live_node_ids(self) -> list[int]:
        return sorted(i for i, n in self.members.items() if n.alive)

    def rss_bytes(self) -> dict[int, int]:
        return {i: n.rss_bytes() for i, n in self.members.items()}

    def metadata(self, topics: list[str] | None = None, via: int | None = None):
        """A Metadata (v12) response from node ``via`` (default: any live node) over INTERNAL."""
        from ..client.wire import RawClient, request_module

        m = request_module(3, 12)
        req = m.MetadataRequest(
            topics=None if topics is None else tuple(m.MetadataRequestTopic(topic_id=None, name=t) for t in topics),
            allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        order = [via] if via is not None else self.live_node_ids()
        last: Exception | None = None
        for node_id in order:
            try:
                client = RawClient(f"127.0.0.1:{self.members[node_id].internal_port}", timeout=5.0)
            except OSError as exc:
                last = exc
                continue
            try:
                return client.request(req)
            except (OSError, ConnectionError) as exc:
                last = exc
            finally:
                client.close()
        raise ConnectionError(f"no live node answered Metadata: {last}")

    def leader_of(self, topic: str, partition: int) -> int:
        """The node leading ``topic``-``partition`` now (-1 while it has none), as the cluster's
        metadata says it."""
        resp = self.metadata([topic])
        for t in resp.topics:
            for p in t.partitions:
                if p.partition_index == partition:
                    return p.leader_id if p.error_code == 0 else -1
        return -1

    def wait_for_leader(self, topic: str, partition: int, *, not_on: int | None = None, timeout: float = 60.0) -> int:
        """Poll until ``topic``-``partition`` has a leader other than ``not_on`` on a live node."""
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(ConnectionError):
                leader = self.leader_of(topic, partition)
                if leader >= 0 and leader != not_on and leader in self.live_node_ids():
                    return leader
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}-{partition} has no leader but {not_on} after {timeout:.0f} s")
            time.sleep(0.1)

    def coordinator_of(self, key: str, key_type: int = 1, timeout: float = 60.0) -> int:
        """The node that coordinates ``key``: a transactional id (``key_type=1``, the transaction
        coordinator) or a group id (0). Retries while the coordinator's state log is still
        being created or loaded, as clients do."""
        from ..client.wire import RawClient, request_module

        m = request_module(10, 4)
        req = m.FindCoordinatorRequest(key_type=key_type, coordinator_keys=(key,))
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            for node_id in self.live_node_ids():
                try:
                    client = RawClient(f"127.0.0.1:{self.members[node_id].internal_port}", timeout=5.0)
                    try:
                        coordinator = client.request(req).coordinators[0]
                    finally:
                        client.close()
                except (OSError, ConnectionError) as exc:
                    last = exc
                    continue
                if coordinator.error_code == 0:
                    return coordinator.node_id
                last = f"error {coordinator.error_code} {coordinator.error_message or ''}".strip()
                break
            time.sleep(0.1)
        raise TimeoutError(f"no coordinator for {key!r} after {timeout:.0f} s: {last}")

    def transaction_coordinator(self, transactional_id: str, timeout: float = 60.0) -> int:
        return self.coordinator_of(transactional_id, 1, timeout)

    # -- internals ----------------------------------------------------------------------------

    def _layout(self) -> None:
        ports = _free_ports(3 * self.nodes)
        self.members = {}
        for i in range(self.nodes):
            node_id = i + 1
            node_dir = os.path.join(self.workdir, f"node-{node_id}")
            shutil.rmtree(node_dir, ignore_errors=True)
            os.makedirs(node_dir)
            self.members[node_id] = KafkaNode(node_id, node_dir, *ports[3 * i:3 * i + 3])
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.members.values())
        replicas = str(min(3, self.nodes))
        min_isr = str(min(2, self.nodes))
        for node in self.members.values():
            props = {
                "process.roles": "broker,controller",
                "node.id": str(node.node_id),
                "controller.quorum.voters": voters,
                "listeners": f"CLIENT://127.0.0.1:{node.client_port},INTERNAL://127.0.0.1:{node.internal_port},"
                             f"CONTROLLER://127.0.0.1:{node.controller_port}",
                "advertised.listeners": f"CLIENT://127.0.0.1:{node.client_port},INTERNAL://127.0.0.1:{node.internal_port}",
                "listener.security.protocol.map": f"CLIENT:{self.client_protocol},INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
                "inter.broker.listener.name": "INTERNAL",
                "controller.listener.names": "CONTROLLER",
                "log.dirs": os.path.join(node.dir, "data"),
                "num.partitions": "1",
                "default.replication.factor": replicas,
                "min.insync.replicas": min_isr,
                "offsets.topic.replication.factor": replicas,
                "transaction.state.log.replication.factor": replicas,
                "transaction.state.log.min.isr": min_isr,
                # Share groups (KIP-932): their state topic, sized to the cluster as the two above.
                "share.coordinator.state.topic.replication.factor": replicas,
                "share.coordinator.state.topic.min.isr": min_isr,
                "group.initial.rebalance.delay.ms": "0",
                # KIP-848 groups: only the bounds are lowered (the defaults stay Kafka's 45 s session,
                # 5 s heartbeat), so a test may set a short consumer.session.timeout.ms and
                # consumer.heartbeat.interval.ms on its own group (IncrementalAlterConfigs, GROUP).
                "group.consumer.min.session.timeout.ms": "1000",
                "group.consumer.min.heartbeat.interval.ms": "100",
                # Fewer threads than Kafka's defaults (3 network, 8 I/O): 2 cores shared by everything.
                "num.network.threads": "2",
                "num.io.threads": "2",
                "num.recovery.threads.per.data.dir": "1",
                "background.threads": "2",
                # A SIGKILLed node is fenced (its partitions move) after this instead of 9 s.
                "broker.session.timeout.ms": "4000",
                "broker.heartbeat.interval.ms": "1000",
                **self.config,
            }
            with open(node.config_path, "w") as f:
                f.writelines(f"{k}={v}\n" for k, v in props.items())

    def _jvm_options(self) -> list[str]:
        options = [f"-Xmx{self.heap}", "-Xms64m", "-XX:+UseSerialGC", "-Djava.awt.headless=true",
                   f"-Dlog4j2.configurationFile={self.installation.log4j_config}"]
        if self.quick_start:
            options.append("-XX:TieredStopAtLevel=1")  # C1 only: starts faster, runs slower
        return options

    def _format(self) -> None:
        """``kafka-storage format`` of every node's log dir, all at once (one JVM each)."""
        inst = self.installation
        running = []
        for node in self.members.values():
            cmd = [inst.java, *self._jvm_options(), "-cp", inst.classpath, "kafka.tools.StorageTool", "format",
                   "--config", node.config_path, "--cluster-id", self.cluster_id, *self.format_args]
            out = open(os.path.join(node.dir, "format.log"), "w+")
            running.append((node, out, subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                        preexec_fn=_die_with_parent)))
        failures = []
        for node, out, proc in running:
            try:
                rc = proc.wait(120)
            except subprocess.TimeoutExpired:
                proc.kill()
                rc = proc.wait()
            out.seek(0)
            text = out.read()
            out.close()
            if rc != 0:
                failures.append(f"node {node.node_id} (exit {rc}):\n{text[-2000:]}")
        if failures:
            raise RuntimeError("kafka-storage format failed: " + "\n".join(failures))

    def _spawn(self, node: KafkaNode) -> None:
        inst = self.installation
        cmd = [inst.java, *self._jvm_options(), f"-Dkafka.logs.dir={node.dir}", "-cp", inst.classpath,
               "kafka.Kafka", node.config_path]
        with open(node.log_path, "ab") as log:
            node.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         cwd=node.dir, preexec_fn=_die_with_parent)
        node.started_at = time.monotonic()
        node.ready_seconds = None

    def _wait_ready(self, waiting: list[KafkaNode], timeout: float) -> None:
        """Each node in ``waiting`` answers Metadata over INTERNAL listing every live node."""
        deadline = time.monotonic() + timeout
        pending = list(waiting)
        while pending:
            for node in list(pending):
                if not node.alive:
                    log = node.tail_log()
                    if "Address already in use" in log:
                        raise _PortTaken(node.node_id)
                    raise RuntimeError(f"Apache Kafka node {node.node_id} exited with {node.proc.returncode} "
                                       f"(log {node.log_path}):\n{log}")
                with contextlib.suppress(OSError, ConnectionError):
                    brokers = {b.node_id for b in self.metadata(via=node.node_id).brokers}
                    if brokers >= set(self.live_node_ids()):
                        node.ready_seconds = time.monotonic() - node.started_at
                        pending.remove(node)
            if pending and time.monotonic() > deadline:
                node = pending[0]
                raise TimeoutError(f"Apache Kafka node {node.node_id} not ready after {timeout:.0f} s "
                                   f"(log {node.log_path}):\n{node.tail_log()}")
            if pending:
                time.sleep(0.05)

    def _kill_all(self) -> None:
        for node in self.members.values():
            if node.alive:
                node.proc.kill()
                node.proc.wait()


class _PortTaken(RuntimeError):
    pass


def main(argv: list[str] | None = None) -> int:
    """``python -m oncelog.tools.apache_kafka [--nodes 3] [--fetch-only]``: fetch, start, print the
    bootstrap address and the measured start-up time and memory, run until Ctrl-C."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m oncelog.tools.apache_kafka", description=main.__doc__)
    parser.add_argument("--nodes", type=int, default=1)
    parser.add_argument("--fetch-only", action="store_true")
    parser.add_argument("--heap", default="384m")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        inst = fetch(quiet=False)
    except ApacheKafkaUnavailable as exc:
        print(f"Apache Kafka unavailable: {exc}", file=sys.stderr)
        return 2
    print(f"Apache Kafka {inst.version} in {inst.lib} ({time.monotonic() - started:.1f} s)")
    if args.fetch_only:
        return 0
    cluster = KafkaCluster(nodes=args.nodes, heap=args.heap).start()
    try:
        rss = cluster.rss_bytes()
        print(f"bootstrap {cluster.bootstrap}: {args.nodes} node(s) ready in {cluster.start_seconds:.1f} s; RSS "
              + ", ".join(f"node {i} {b / 2**20:.0f} MiB" for i, b in rss.items()), flush=True)
        signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM stops it as Ctrl-C does
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
