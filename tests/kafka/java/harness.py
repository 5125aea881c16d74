"""The Python side of the Java client programs (this folder) and Kafka's own tools: the two
brokers a test holds them against, the programs compiled, their JSON output read, and the log
of the requests the Java client sent.

``target`` (a fixture, parametrised ``oncelog`` / ``apache-kafka``): a fresh oncelog broker
process, or the session's one-node Apache Kafka, behind one small interface, :class:`Target`:
``bootstrap``, ``kill()`` (SIGKILL: no flush, no controlled shutdown) and ``restart()`` on the
same port and data, and the broker's log. Names on the shared Apache Kafka must be unique
(:func:`tests.helpers.unique`): it outlives the test.

The Java programs are compiled once per source text into the user's cache
(``oncelog.tools.apache_kafka.compile_java``), never into the repository. :data:`REQUEST_LOG4J` is a
log4j2 configuration under which the Java client logs every request it sends with its API and
version (``org.apache.kafka.clients.NetworkClient`` at DEBUG, to stderr); :func:`sent_requests`
counts them, which is how a test shows the client used Produce v12 and EndTxn v5 (transaction
version 2) rather than assuming it.
"""

from __future__ import annotations

import collections
import datetime
import json
import os
import re
from dataclasses import dataclass

import pytest

from oncelog.tools import apache_kafka
from oncelog.client.wire import RawClient, request_module
from oncelog.protocol.records import HEADER_SIZE, BatchHeader, control_type, parse_header

from ...helpers import need_apache_kafka

JAVA_DIR = os.path.dirname(os.path.abspath(__file__))
SOURCES = [os.path.join(JAVA_DIR, name) for name in sorted(os.listdir(JAVA_DIR)) if name.endswith(".java")]

# Kafka's tools configuration (warnings to stderr) plus the client's request log at DEBUG.
REQUEST_LOG4J = apache_kafka.TOOLS_LOG4J2 + """\
logger.network.name = org.apache.kafka.clients.NetworkClient
logger.network.level = DEBUG
"""

_SENDING = re.compile(r"Sending \w+ request with header RequestHeader\(apiKey=(\w+), apiVersion=(\d+)")

ONCELOG, APACHE_KAFKA = "oncelog", "apache-kafka"


def java_classes() -> str:
    """The compiled Java programs of this folder (a folder for the classpath)."""
    return need_apache_kafka("Apache Kafka's jars and javac", lambda: apache_kafka.compile_java(SOURCES))


def sent_requests(stderr: str) -> collections.Counter:
    """{(API name, version): requests sent} from a Java client run under :data:`REQUEST_LOG4J`."""
    return collections.Counter((api, int(v)) for api, v in _SENDING.findall(stderr))


def json_lines(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


@dataclass
class Target:
    """One broker a test runs against: oncelog (``process``) or Apache Kafka's node 1 (``cluster``)."""

    kind: str
    process: object = None  # oncelog.process.BrokerProcess
    cluster: object = None  # oncelog.tools.apache_kafka.KafkaCluster, one node

    @property
    def bootstrap(self) -> str:
        return self.process.bootstrap if self.cluster is None else self.cluster.bootstrap

    def kill(self) -> None:
        if self.cluster is None:
            self.process.kill()
        else:
            self.cluster.kill(1)

    def restart(self) -> None:
        """Start the killed broker again on its port and data, ready to answer."""
        if self.cluster is None:
            self.process.restart()
        else:
            self.cluster.restart(1)

    def tail_log(self, lines: int = 60) -> str:
        return self.process.tail_log(lines) if self.cluster is None else self.cluster.members[1].tail_log(lines)


@pytest.fixture(params=[ONCELOG, APACHE_KAFKA])
def target(request, broker_factory, apache_kafka) -> Target:
    """A fresh oncelog broker, or the session's Apache Kafka (the fixture is named in both cases so
    the test is an ``apache_kafka`` test and runs in that scope whichever variant it is)."""
    if request.param == APACHE_KAFKA:
        return Target(APACHE_KAFKA, cluster=apache_kafka)
    return Target(ONCELOG, process=broker_factory())


def fetch_batches(bootstrap: str, topic: str, partition: int, *, isolation_level: int = 0) -> list[tuple[BatchHeader, bytes]]:
    """Every record batch of ``topic``-``partition`` from offset 0 to the high watermark (read
    uncommitted by default), with its bytes, through the project's protocol client (Fetch v12)."""
    m = request_module(1, 12)
    client = RawClient(bootstrap)
    out: list[tuple[BatchHeader, bytes]] = []
    offset = 0
    try:
        while True:
            resp = client.request(m.FetchRequest(
                replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=16 << 20,
                isolation_level=isolation_level, session_id=0, session_epoch=-1,
                topics=(m.FetchTopic(topic=topic, partitions=(m.FetchPartition(
                    partition=partition, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                    log_start_offset=-1, partition_max_bytes=16 << 20),)),),
                forgotten_topics_data=(), rack_id=""))
            answer = resp.responses[0].partitions[0]
            assert answer.error_code == 0, answer
            view = memoryview(answer.records or b"")
            pos = 0
            while pos + HEADER_SIZE <= len(view):
                header = parse_header(view, pos)
                if pos + header.size > len(view):
                    break  # a partial batch at the end of the answer: fetched again from its offset
                out.append((header, bytes(view[pos:pos + header.size])))
                pos += header.size
            end = out[-1][0].last_offset + 1 if out else 0
            if end >= answer.high_watermark:
                return out
            offset = end
    finally:
        client.close()


def offset_layout(batches: list[tuple[BatchHeader, bytes]]) -> list[tuple]:
    """Per offset: ``(offset, "data", producer_epoch)`` or ``(offset, "commit"|"abort",
    producer_epoch)`` for a transaction marker; the batching itself (which the client decides)
    left out."""
    out = []
    for header, raw in batches:
        if header.is_control:
            out.append((header.base_offset, "commit" if control_type(raw) == 1 else "abort", header.producer_epoch))
        else:
            out.extend((o, "data", header.producer_epoch) for o in range(header.base_offset, header.last_offset + 1))
    return out
