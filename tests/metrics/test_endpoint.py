"""The broker's Prometheus endpoint (oncelog.metrics): its setting and its rule, and what a real
broker process counts while real clients use it — each figure checked against what the test did
(requests sent one by one, records appended, bytes in the log), not against itself.
"""

from __future__ import annotations

import datetime
import socket
import time
import urllib.error
import urllib.request

import confluent_kafka as ck
import pytest
from prometheus_client.parser import text_string_to_metric_families

from oncelog.cli import build_parser
from oncelog.client.wire import RawClient, request_module
from oncelog.config.serve_options import ServeConfigError, build_broker_config, settings_from_args
from oncelog.config.settings import metrics_address
from oncelog.metrics import LATENCY_BUCKETS_MS, BrokerMetrics, Histogram, RequestTiming, error_codes
from oncelog.process import BrokerProcess

from ..helpers import create_topic, unique


def build(*argv: str):
    return build_broker_config(settings_from_args(build_parser().parse_args(["serve", *argv])))


def scrape(url: str, **headers) -> dict[tuple[str, tuple], float]:
    """Every sample of a scrape: (name, sorted labels) -> value."""
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as r:
        text = r.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def value(samples, name: str, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def delta(after, before, name: str, **labels) -> float:
    """How much a sample grew between two scrapes."""
    return value(after, name, **labels) - value(before, name, **labels)


# ------------------------------------------------------------------ the setting (no processes)

def test_metrics_are_off_unless_a_listener_is_given():
    config, _ = build("--data-dir", "/tmp/unused")
    assert config.metrics_listener == "" and metrics_address(config.metrics_listener) is None
    config, _ = build("--data-dir", "/tmp/unused", "--metrics-listener", "127.0.0.1:9308")
    assert metrics_address(config.metrics_listener) == ("127.0.0.1", 9308)
    config, _ = build("--data-dir", "/tmp/unused", "--override", "oncelog.metrics.listener=[::1]:0")
    assert metrics_address(config.metrics_listener) == ("::1", 0)


def test_a_malformed_listener_is_refused_naming_the_setting():
    with pytest.raises(ServeConfigError, match="oncelog.metrics.listener"):
        build("--data-dir", "/tmp/unused", "--metrics-listener", "9308")
    with pytest.raises(ServeConfigError, match="oncelog.metrics.listener"):
        build("--data-dir", "/tmp/unused", "--metrics-listener", "host:99999")


def test_beyond_loopback_needs_the_same_consent_as_an_unauthenticated_listener():
    with pytest.raises(ServeConfigError, match=r"metrics endpoint .* has no authentication.*"
                                               r"oncelog.allow.unauthenticated.listeners=true"):
        build("--data-dir", "/tmp/unused", "--metrics-listener", "0.0.0.0:9308")
    config, notes = build("--data-dir", "/tmp/unused", "--metrics-listener", "0.0.0.0:9308",
                          "--override", "oncelog.allow.unauthenticated.listeners=true")
    assert metrics_address(config.metrics_listener) == ("0.0.0.0", 9308)
    assert any("metrics endpoint" in n and n.startswith("WARNING") for n in notes), notes


# ------------------------------------------------------------------ the counters (no processes)

def test_a_histogram_is_cumulative_with_every_observation_in_one_bucket():
    h = Histogram()
    for ms in (0.01, 0.05, 0.3, 7.0, 7.0, 45000.0):
        h.observe(ms)
    cumulative = dict(h.cumulative())
    assert cumulative["0.05"] == 2 and cumulative["0.5"] == 3 and cumulative["10.0"] == 5
    assert cumulative[repr(LATENCY_BUCKETS_MS[-1])] == 5 and cumulative["+Inf"] == 6 == h.count
    assert h.sum == pytest.approx(0.01 + 0.05 + 0.3 + 14.0 + 45000.0)


def test_a_request_time_splits_into_its_parts():
    m = BrokerMetrics()
    t = RequestTiming(api_key=3, version=12, arrived=10.0, started=10.002)
    t.handled, t.done = 10.005, 10.105
    m.request_done(t, written=10.106)
    queue, local, remote, response_queue, total = m.times[3]
    assert [h.sum for h in (queue, local, remote, response_queue, total)] == pytest.approx([2, 3, 100, 1, 106])
    assert m.requests[3, 12] == 1


def test_topic_series_are_bounded_whatever_names_clients_choose(monkeypatch):
    import oncelog.metrics as metrics

    monkeypatch.setattr(metrics, "MAX_TOPIC_SERIES", 3)
    m = BrokerMetrics()
    for i in range(10):
        m.appended(f"t{i}", 1, 10)
    assert set(m.messages_in) == {"t0", "t1", "t2", metrics.OVERFLOW_LABEL}
    assert m.messages_in[metrics.OVERFLOW_LABEL] == 7 and m.dropped == 14  # messages and bytes
    m.forget_topic("t0")
    m.appended("t9", 1, 10)
    assert "t9" in m.messages_in


def test_error_codes_are_counted_as_kafka_counts_them():
    from kio.schema.errors import ErrorCode

    from oncelog.apis._base import response_module

    m = response_module(0, 9)
    produce = m.ProduceResponse(responses=(m.TopicProduceResponse(name="t", partition_responses=tuple(
        m.PartitionProduceResponse(index=i, error_code=code, base_offset=0, record_errors=())
        for i, code in enumerate((ErrorCode.none, ErrorCode.not_leader_or_follower, ErrorCode.none)))),))
    assert [int(c) for c in error_codes(0, produce)] == [0, 6, 0]
    m = response_module(32, 4)
    describe = m.DescribeConfigsResponse(throttle_time=datetime.timedelta(0), results=(
        m.DescribeConfigsResult(error_code=ErrorCode.unknown_topic_or_partition, error_message=None, resource_type=2,
                                resource_name="x", configs=()),
        m.DescribeConfigsResult(error_code=ErrorCode.none, error_message=None, resource_type=4,
                                resource_name="1", configs=())))
    assert [int(c) for c in error_codes(32, describe)] == [3, 0]
    assert error_codes(0, object()) == []  # an answer of another shape (a test's fault) counts nothing


# ------------------------------------------------------------------ a real broker

@pytest.fixture
def metrics_broker(tmp_path):
    b = BrokerProcess(str(tmp_path / "broker"), extra_args=["--metrics-listener", "127.0.0.1:0"])
    b.start()
    try:
        yield b
    finally:
        b.stop()


@pytest.mark.e2e
def test_requests_errors_and_latency_count_what_clients_sent(metrics_broker):
    url = metrics_broker.metrics_url
    assert url and url.startswith("http://127.0.0.1:") and url.endswith("/metrics")
    before = scrape(url)
    metadata, describe = request_module(3, 12), request_module(32, 4)
    c = RawClient(metrics_broker.bootstrap)
    try:
        for _ in range(7):
            c.request(metadata.MetadataRequest(topics=(), allow_auto_topic_creation=False,
                                               include_topic_authorized_operations=False))
        missing = unique("missing")
        for _ in range(3):
            r = c.request(describe.DescribeConfigsRequest(resources=(describe.DescribeConfigsResource(
                resource_type=2, resource_name=missing, configuration_keys=None),), include_synonyms=False,
                include_documentation=False))
            assert r.results[0].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
        during = scrape(url)
        # the connection is open while scraped
        assert value(during, "kafka_server_socket_server_metrics_connection_count", listener="PLAINTEXT") >= 1
    finally:
        c.close()
    after = scrape(url)

    assert delta(after, before, "kafka_network_requestmetrics_requests_total", request="Metadata", version="12") == 7
    assert delta(after, before, "kafka_network_requestmetrics_requests_total", request="DescribeConfigs",
                 version="4") == 3
    assert delta(after, before, "kafka_network_requestmetrics_errors_total", request="DescribeConfigs",
                 error="UNKNOWN_TOPIC_OR_PARTITION") == 3
    assert delta(after, before, "kafka_network_requestmetrics_errors_total", request="DescribeConfigs",
                 error="NONE") == 0
    for part in ("totaltimems", "requestqueuetimems", "localtimems", "remotetimems", "responsequeuetimems"):
        assert delta(after, before, f"kafka_network_requestmetrics_{part}_count", request="Metadata") == 7, part
    total = delta(after, before, "kafka_network_requestmetrics_totaltimems_sum", request="Metadata")
    local = delta(after, before, "kafka_network_requestmetrics_localtimems_sum", request="Metadata")
    assert 0 < local <= total
    buckets = [(float(dict(labels)["le"]), v) for (name, labels), v in after.items()
               if name == "kafka_network_requestmetrics_totaltimems_bucket" and dict(labels)["request"] == "Metadata"]
    counts = [v for _, v in sorted(buckets)]
    assert counts == sorted(counts) and counts[-1] == value(after, "kafka_network_requestmetrics_totaltimems_count",
                                                            request="Metadata")


@pytest.mark.e2e
def test_bytes_and_messages_in_and_out_match_the_log(metrics_broker):
    url = metrics_broker.metrics_url
    topic = unique("metered")
    create_topic(metrics_broker.bootstrap, topic, 1)
    p = ck.Producer({"bootstrap.servers": metrics_broker.bootstrap, "linger.ms": 5})
    for i in range(1000):
        p.produce(topic, value=b"v%d" % i, partition=0)
    assert p.flush(30) == 0
    samples = scrape(url)
    assert value(samples, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == 1000
    size = value(samples, "kafka_log_log_size", topic=topic, partition="0")
    assert size > 1000 and value(samples, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic) == size
    assert value(samples, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic) == 0

    fetch = request_module(1, 12)
    c = RawClient(metrics_broker.bootstrap)
    try:
        r = c.request(fetch.FetchRequest(
            replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=1 << 24, isolation_level=0,
            session_id=0, session_epoch=-1, topics=(fetch.FetchTopic(topic=topic, partitions=(fetch.FetchPartition(
                partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
                partition_max_bytes=1 << 24),)),), forgotten_topics_data=(), rack_id=""))
        fetched = len(r.responses[0].partitions[0].records)
    finally:
        c.close()
    assert fetched == size
    assert value(scrape(url), "kafka_server_brokertopicmetrics_bytesout_total", topic=topic) == size


@pytest.mark.e2e
def test_the_endpoint_answers_http_only_and_survives_hostile_bytes(metrics_broker):
    url = metrics_broker.metrics_url
    host, port = url.removeprefix("http://").split("/")[0].split(":")
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(url.replace("/metrics", "/admin"), timeout=10)
    assert info.value.code == 404
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(urllib.request.Request(url, data=b"x", method="POST"), timeout=10)
    assert info.value.code == 405
    # OpenMetrics when asked for, as Prometheus asks
    with urllib.request.urlopen(urllib.request.Request(
            url, headers={"Accept": "application/openmetrics-text; version=1.0.0"}), timeout=10) as r:
        assert r.headers["Content-Type"].startswith("application/openmetrics-text")
        assert r.read().rstrip().endswith(b"# EOF")
    # garbage, an oversized head, a client that never finishes: each closed, the broker serves on
    for payload in (b"\x00\xff garbage\r\n\r\n", b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 100_000 + b"\r\n\r\n",
                    b"GET /metrics HTTP/1.1\r\n"):
        with socket.create_connection((host, int(port)), timeout=10) as s:
            try:
                s.sendall(payload)
                s.shutdown(socket.SHUT_WR)
                s.recv(65536)
            except OSError:
                pass
    idle = [socket.create_connection((host, int(port)), timeout=10) for _ in range(40)]  # past the bound
    try:
        time.sleep(0.2)
        # while 16 idle ones hold every place, a scrape is refused at once rather than queued
        with pytest.raises(OSError):
            scrape(url)
    finally:
        for s in idle:
            s.close()
    # once they are gone (the endpoint sees each close on its next loop turn), scrapes work again
    deadline = time.monotonic() + 10
    while True:
        try:
            samples = scrape(url)
            break
        except OSError:
            assert time.monotonic() < deadline, "the endpoint did not recover from 40 idle connections"
            time.sleep(0.1)
    assert value(samples, "kafka_server_replicamanager_partitioncount") >= 1
    assert create_topic(metrics_broker.bootstrap, unique("after"), 1) is None  # Kafka still served


@pytest.mark.e2e
def test_each_node_of_a_cluster_serves_its_own_metrics(tmp_path):
    b = BrokerProcess(str(tmp_path / "cluster"), nodes=2, extra_args=["--metrics-listener", "127.0.0.1:0"])
    b.start()
    try:
        assert len(b.metrics_urls) == 2 and len(set(b.metrics_urls)) == 2, b.metrics_urls
        topic = unique("spread")
        create_topic(b.bootstrap, topic, 4)
        assert [value(scrape(u), "kafka_controller_kafkacontroller_activecontrollercount")
                for u in b.metrics_urls] == [1, 0]
        led = [value(scrape(u), "kafka_server_replicamanager_leadercount") for u in b.metrics_urls]
        assert all(n > 0 for n in led) and sum(
            value(scrape(u), "kafka_log_log_logendoffset", topic=topic, partition=str(p)) >= 0
            for u in b.metrics_urls for p in range(4)) >= 4
    finally:
        b.stop()


@pytest.mark.e2e
def test_markers_and_fsync_rounds_are_counted(metrics_broker):
    url = metrics_broker.metrics_url
    topic = unique("txn")
    create_topic(metrics_broker.bootstrap, topic, 2)
    before = scrape(url)
    p = ck.Producer({"bootstrap.servers": metrics_broker.bootstrap, "transactional.id": unique("tid")})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, value=b"a", partition=0)
    p.produce(topic, value=b"b", partition=1)
    p.commit_transaction(30)
    p.begin_transaction()
    p.produce(topic, value=b"c", partition=0)
    p.flush(30)
    p.abort_transaction(30)
    # the markers follow EndTxn's answer: wait until both are in the log (offsets 0..3 of partition 0)
    deadline = time.monotonic() + 30
    while value(after := scrape(url), "kafka_log_log_logendoffset", topic=topic, partition="0") < 4:
        assert time.monotonic() < deadline, "the markers were not written"
        time.sleep(0.1)

    assert delta(after, before, "oncelog_transaction_markers_written_total", result="COMMIT") == 2
    assert delta(after, before, "oncelog_transaction_markers_written_total", result="ABORT") == 1
    # fsync always (the default): the appends and markers went through fsync rounds, each
    # covering at least one log
    rounds = delta(after, before, "kafka_log_logflushstats_logflushrateandtimems_count")
    assert rounds >= 1
    assert delta(after, before, "oncelog_log_flush_round_logs_sum") >= rounds
    assert delta(after, before, "kafka_log_logflushstats_logflushrateandtimems_sum") > 0


@pytest.mark.e2e
def test_a_fetch_wait_is_remote_time_and_deleted_topics_leave_no_series(metrics_broker):
    url = metrics_broker.metrics_url
    topic = unique("waited")
    create_topic(metrics_broker.bootstrap, topic, 1)
    before = scrape(url)
    fetch = request_module(1, 12)
    c = RawClient(metrics_broker.bootstrap)
    try:
        for _ in range(3):  # nothing to read: each waits its max_wait out
            c.request(fetch.FetchRequest(
                replica_id=-1, max_wait=datetime.timedelta(milliseconds=500), min_bytes=1, max_bytes=1 << 20,
                isolation_level=0, session_id=0, session_epoch=-1, topics=(fetch.FetchTopic(topic=topic, partitions=(
                    fetch.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                                         log_start_offset=-1, partition_max_bytes=1 << 20),)),),
                forgotten_topics_data=(), rack_id=""))
    finally:
        c.close()
    after = scrape(url)
    remote = delta(after, before, "kafka_network_requestmetrics_remotetimems_sum", request="Fetch")
    total = delta(after, before, "kafka_network_requestmetrics_totaltimems_sum", request="Fetch")
    assert 3 * 400 <= remote <= total, (remote, total)  # the wait is the fetch's remote time, as Kafka's purgatory

    p = ck.Producer({"bootstrap.servers": metrics_broker.bootstrap})
    p.produce(topic, value=b"x")
    assert p.flush(30) == 0
    assert value(scrape(url), "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == 1
    admin = ck.admin.AdminClient({"bootstrap.servers": metrics_broker.bootstrap})
    admin.delete_topics([topic])[topic].result(30)
    deadline = time.monotonic() + 30
    while left := [key for key in scrape(url) if dict(key[1]).get("topic") == topic]:
        assert time.monotonic() < deadline, left
        time.sleep(0.2)


@pytest.mark.e2e
def test_versions_a_client_makes_up_share_one_series_and_odd_headers_get_text(metrics_broker):
    url = metrics_broker.metrics_url
    c = RawClient(metrics_broker.bootstrap)
    try:
        for version in range(100, 140):  # ApiVersions of versions nobody serves: answered (KIP-511), counted
            c.send_frame(b"\x00\x12" + version.to_bytes(2, "big") + b"\x00\x00\x00\x07\x00\x00")
            c.recv_frame()
    finally:
        c.close()
    samples = scrape(url)
    versions = {dict(labels)["version"] for name, labels in samples
                if name == "kafka_network_requestmetrics_requests_total" and dict(labels)["request"] == "ApiVersions"}
    assert "unsupported" in versions and not versions & {str(v) for v in range(100, 140)}, versions
    assert value(samples, "kafka_network_requestmetrics_requests_total", request="ApiVersions",
                 version="unsupported") == 40
    # an Accept header the exposition library cannot parse: the text format, not an error
    with urllib.request.urlopen(urllib.request.Request(url, headers={"Accept": "text/plain; version=x"}),
                                timeout=10) as r:
        assert r.status == 200 and r.headers["Content-Type"].startswith("text/plain")
        assert b"kafka_server_replicamanager_partitioncount" in r.read()
    # gzip;q=0 refuses gzip; HEAD tells the length and sends nothing
    with urllib.request.urlopen(urllib.request.Request(url, headers={"Accept-Encoding": "gzip;q=0"}), timeout=10) as r:
        assert r.headers.get("Content-Encoding") is None
    with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=10) as r:
        assert int(r.headers["Content-Length"]) > 1000 and r.read() == b""


@pytest.mark.e2e
def test_a_forwarded_request_counts_as_its_api_on_both_nodes(tmp_path):
    from ..helpers import broker_addresses

    b = BrokerProcess(str(tmp_path / "cluster"), nodes=2, extra_args=["--metrics-listener", "127.0.0.1:0"])
    b.start()
    try:
        node1, node2 = b.metrics_urls
        second = broker_addresses(b.bootstrap)[2]
        before1, before2 = scrape(node1), scrape(node2)
        create = request_module(19, 7)
        c = RawClient(second)  # node 2 forwards CreateTopics to the controller, node 1
        try:
            name = unique("fwd")
            for _ in range(2):  # the second is refused: TOPIC_ALREADY_EXISTS
                c.request(create.CreateTopicsRequest(topics=(create.CreatableTopic(
                    name=name, num_partitions=1, replication_factor=1, assignments=(), configs=()),),
                    timeout=datetime.timedelta(seconds=30), validate_only=False))
        finally:
            c.close()
        after1, after2 = scrape(node1), scrape(node2)

        for after, before in ((after2, before2), (after1, before1)):  # the receiving node, the controller
            assert delta(after, before, "kafka_network_requestmetrics_requests_total", request="CreateTopics",
                         version="7") == 2
            assert delta(after, before, "kafka_network_requestmetrics_errors_total", request="CreateTopics",
                         error="TOPIC_ALREADY_EXISTS") == 1
            assert delta(after, before, "kafka_network_requestmetrics_errors_total", request="CreateTopics",
                         error="NONE") == 1
        assert not any(dict(labels).get("request") == "Envelope" for _, labels in after1)
    finally:
        b.stop()
