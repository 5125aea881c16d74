"""The broker's metrics as a real Prometheus sees them: one oncelog broker process with a metrics
listener, one ``prometheus`` scraping it every second (one per module), a workload whose figures
the test knows, and Prometheus's own HTTP API asked what it stored and computed:

* ``up`` of the job is 1 and the target is healthy;
* the messages-in counter rose by exactly the records produced (its values at the window's two
  ends), and ``increase()`` over the window says so within 1% (the edge extrapolation it does),
  and ``rate()`` in the middle of the steady run matches the paced rate within 35%;
* Produce requests rose by exactly one per record (each record was flushed on its own);
* the p99 Produce time that ``histogram_quantile()`` gives is finite, above 0, and no more than
  the upper bound of the bucket holding the slowest round trip the client measured (the broker's
  time of a request lies inside the client's round trip);
* ``kafka_consumergroup_lag`` of the group sums to exactly what its commit left unread;
* every query of the example Grafana dashboard (docs/grafana/oncelog.json) is one Prometheus runs,
  and those on throughput and requests return data;
* ``promtool check metrics`` finds no error in a real scrape (its only complaints are the lint
  of the names kept for Kafka's dashboards, listed below).

Without ``prometheus``/``promtool`` (Debian's ``prometheus`` package; .ci/run installs it) these
tests skip saying so, except under ``CI=true``, where they fail: CI must really run them.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

import confluent_kafka as ck
import pytest

from oncelog.metrics import LATENCY_BUCKETS_MS
from oncelog.process import BrokerProcess

from ..helpers import create_topic, free_port, unique

pytestmark = [pytest.mark.e2e, pytest.mark.prometheus]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
JOB = "oncelog"
SCRAPE_INTERVAL_S = 1
RECORDS = 300  # produced one by one, each flushed: one Produce request per record
PACE_S = 0.035  # one record every 35 ms: 300 records in ~10.5 s
PARTITIONS = 2
CONSUMED = 120  # the group consumes and commits this many: its lag is the rest

# promtool's lint (exit code 3, "non-histogram and non-summary metrics should not have "_count" /
# "_sum" suffix") of names kept as Kafka's tools spell them, so that their dashboards work:
# jmx_exporter's rendering of socket-server-metrics connection-count and of group-coordinator-metrics
# *-count, and kafka_exporter's consumer group sums. Any other complaint, or a parse error, fails.
KEPT_FOR_KAFKA_DASHBOARDS = {
    "kafka_server_socket_server_metrics_connection_count",
    "kafka_server_group_coordinator_metrics_group_count",
    "kafka_server_group_coordinator_metrics_classic_group_count",
    "kafka_server_group_coordinator_metrics_consumer_group_count",
    "kafka_server_group_coordinator_metrics_share_group_count",
    "kafka_server_group_coordinator_metrics_streams_group_count",
    "kafka_server_group_coordinator_metrics_offset_count",
    "kafka_server_group_coordinator_metrics_group_completed_rebalance_count",
    "kafka_server_group_coordinator_metrics_consumer_group_rebalance_count",
    "kafka_consumergroup_lag_sum",
    "kafka_consumergroup_current_offset_sum",
}


def need(program: str) -> str:
    """The path of ``program``; without it skip saying why, or under CI=true fail (as the
    ``apache_kafka`` tests do: tests/helpers.need_apache_kafka)."""
    path = shutil.which(program)
    if path is None:
        why = f"{program} is not installed (Debian's prometheus package provides it; .ci/run installs it as root)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{why}, and CI=true requires the prometheus tests to run", pytrace=False)
        pytest.skip(why)
    return path


# ------------------------------------------------------------------ the broker and its Prometheus

@pytest.fixture(scope="module")
def prometheus_binary() -> str:
    return need("prometheus")


@pytest.fixture
def promtool() -> str:
    return need("promtool")


@pytest.fixture(scope="module")
def metrics_broker(tmp_path_factory):
    b = BrokerProcess(str(tmp_path_factory.mktemp("broker")), extra_args=["--metrics-listener", "127.0.0.1:0"])
    b.start()
    try:
        yield b
    finally:
        b.stop()


class Prometheus:
    """A ``prometheus`` process scraping one target every second; :meth:`query` asks its API."""

    def __init__(self, binary: str, workdir, target: str) -> None:
        self.binary, self.workdir, self.target = binary, workdir, target
        self.proc: subprocess.Popen | None = None
        self.url = ""
        self.log_path = workdir / "prometheus.log"

    def start(self, timeout: float = 30.0) -> "Prometheus":
        config = self.workdir / "prometheus.yml"
        config.write_text(
            "global:\n"
            f"  scrape_interval: {SCRAPE_INTERVAL_S}s\n"
            f"  scrape_timeout: {SCRAPE_INTERVAL_S}s\n"
            f"  evaluation_interval: {SCRAPE_INTERVAL_S}s\n"
            "scrape_configs:\n"
            f"  - job_name: {JOB}\n"
            "    metrics_path: /metrics\n"
            "    static_configs:\n"
            f"      - targets: ['{self.target}']\n")
        for attempt in range(3):  # a free port taken meanwhile: another one
            port = free_port()
            self.url = f"http://127.0.0.1:{port}"
            with open(self.log_path, "ab") as log:
                self.proc = subprocess.Popen(
                    [self.binary, f"--config.file={config}", f"--storage.tsdb.path={self.workdir / 'tsdb'}",
                     f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            deadline = time.monotonic() + timeout
            while self.proc.poll() is None and time.monotonic() < deadline:
                try:
                    with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as r:
                        if r.status == 200:
                            return self
                except OSError:
                    pass
                time.sleep(0.2)
            self.stop()
        raise AssertionError(f"prometheus did not become ready; its log:\n{self.log_path.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def api(self, path: str, **params) -> dict:
        url = f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                answer = json.load(r)
        except urllib.error.HTTPError as e:  # a bad query: Prometheus says why in the body
            answer = json.load(e)
        assert answer.get("status") == "success", f"{path} {params}: {answer}"
        return answer["data"]

    def query(self, expr: str, at: float | None = None) -> list[tuple[dict, float]]:
        """An instant query's vector: [(labels, value)]."""
        params = {"query": expr} if at is None else {"query": expr, "time": f"{at:.3f}"}
        data = self.api("query", **params)
        if data["resultType"] == "scalar":
            return [({}, float(data["result"][1]))]
        assert data["resultType"] == "vector", data
        return [(s["metric"], float(s["value"][1])) for s in data["result"]]

    def one(self, expr: str, at: float | None = None) -> float | None:
        """The single value of ``expr`` (None if it has no sample)."""
        result = self.query(expr, at)
        assert len(result) <= 1, f"{expr}: more than one series: {result}"
        return result[0][1] if result else None

    def wait_for(self, expr: str, check, timeout: float = 15.0) -> float | None:
        """Ask until ``check(value)`` holds (the next scrape brings it); the last value either way."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.one(expr)
            if (value is not None and check(value)) or time.monotonic() > deadline:
                return value
            time.sleep(0.2)


@pytest.fixture(scope="module")
def prometheus(prometheus_binary, metrics_broker, tmp_path_factory):
    binary = prometheus_binary
    target = metrics_broker.metrics_url.removeprefix("http://").split("/", 1)[0]
    p = Prometheus(binary, tmp_path_factory.mktemp("prometheus"), target).start()
    try:
        yield p
    finally:
        p.stop()


# ------------------------------------------------------------------ the workload and its figures

def test_prometheus_computes_what_the_workload_did(prometheus, metrics_broker):
    topic, group = unique("scraped"), unique("lagging")
    create_topic(metrics_broker.bootstrap, topic, PARTITIONS)
    messages_in = f'kafka_server_brokertopicmetrics_messagesin_total{{job="{JOB}",topic="{topic}"}}'
    produce_requests = f'sum(kafka_network_requestmetrics_requests_total{{job="{JOB}",request="Produce"}})'

    # Prometheus scrapes the broker.
    assert prometheus.wait_for(f'up{{job="{JOB}"}}', lambda v: v == 1) == 1
    targets = prometheus.api("targets")["activeTargets"]
    assert [(t["labels"]["job"], t["health"]) for t in targets] == [(JOB, "up")], targets

    producer = ck.Producer({"bootstrap.servers": metrics_broker.bootstrap, "linger.ms": 0, "acks": "all"})
    round_trips: list[float] = []

    def produce_one(i: int) -> None:
        sent = time.monotonic()
        producer.produce(topic, value=b"record-%d" % i, partition=i % PARTITIONS)
        assert producer.flush(10) == 0
        round_trips.append((time.monotonic() - sent) * 1000.0)

    # One seed record, so that the topic's series exists; the window starts at the latest sample
    # Prometheus has of it before any other record was produced: its value there is 1. (A request
    # is counted once its answer is written, a moment after the record's append: both are awaited.)
    produce_one(0)
    assert prometheus.wait_for(messages_in, lambda v: v == 1) == 1
    assert prometheus.wait_for(produce_requests, lambda v: v == 1) == 1
    window_start = prometheus.one(f"timestamp({messages_in})")

    # RECORDS more at a steady pace (each at its planned time: a slow round trip is caught up).
    begun = time.monotonic()
    for i in range(1, RECORDS + 1):
        time.sleep(max(0.0, begun + (i - 1) * PACE_S - time.monotonic()))
        produce_one(i)
    produced_for = time.monotonic() - begun
    midpoint = time.time() - produced_for / 2  # wall-clock time in the middle of the run

    # The window ends at the first sample that has them all.
    assert prometheus.wait_for(messages_in, lambda v: v == RECORDS + 1) == RECORDS + 1
    assert prometheus.wait_for(produce_requests, lambda v: v == RECORDS + 1) == RECORDS + 1
    window_end = prometheus.one(f"timestamp({messages_in})")
    window = window_end - window_start
    # half a scrape interval more: the window's first sample is the one at window_start whether the
    # range is closed on the left (Prometheus 2) or open (Prometheus 3), and not the one before it
    window_ms = int(round(window * 1000)) + SCRAPE_INTERVAL_S * 500

    # Exactly RECORDS between the window's two ends, as Prometheus stored them.
    assert prometheus.one(messages_in, at=window_start) == 1
    assert prometheus.one(messages_in, at=window_end) == RECORDS + 1
    # increase() takes the change from the first to the last sample in the window (exactly
    # RECORDS) and extrapolates it to the window's edges: to the end, none (it is a sample); to
    # the start, half an interval, but for a counter no further than where it would have been 0,
    # 1/RECORDS of the window before its first sample: +1 record at most, within 1%.
    increase = prometheus.one(f"increase({messages_in}[{window_ms}ms])", at=window_end)
    assert increase == pytest.approx(RECORDS, rel=0.01), (increase, window)
    # rate() over 6 s in the middle of the run: the paced rate, within 35% (which samples fall in
    # so short a window, and the pace slipping when a round trip is slow, move it).
    paced = RECORDS / produced_for
    mid_rate = prometheus.one(f"rate({messages_in}[6s])", at=midpoint + 3)
    assert mid_rate == pytest.approx(paced, rel=0.35), (mid_rate, paced)

    # One Produce request per record: each was flushed on its own.
    assert prometheus.one(produce_requests, at=window_start) == 1
    assert prometheus.one(produce_requests, at=window_end) == RECORDS + 1

    # p99 of Produce's total time in the window, from the histogram's buckets. The broker times a
    # request from its arrival to its answer written, inside the client's round trip; the estimate
    # lies in the bucket of the true p99, so it is at most the bound of the slowest round trip's.
    p99 = prometheus.one('histogram_quantile(0.99, sum by (le) (rate(kafka_network_requestmetrics_totaltimems_bucket'
                         f'{{job="{JOB}",request="Produce"}}[{window_ms}ms])))', at=window_end)
    slowest = max(round_trips)
    bound = next((b for b in LATENCY_BUCKETS_MS if b >= slowest), LATENCY_BUCKETS_MS[-1])
    client_p99 = sorted(round_trips)[int(0.99 * (len(round_trips) - 1))]
    print(f"window {window:.1f} s, increase {increase}, mid rate {mid_rate} vs paced {paced:.1f}/s, "
          f"p99 Produce {p99} ms (client round trip p99 {client_p99:.2f} ms, slowest {slowest:.2f} ms)")
    assert p99 is not None and math.isfinite(p99) and 0 < p99 <= bound, (p99, bound, client_p99, slowest)
    assert p99 < 5000, f"p99 Produce time {p99} ms: no sane broker takes that for one small record"

    # A group reads CONSUMED records (from both partitions, however they come) and commits where
    # it is in each (0 in one it read nothing of): its lag is the rest of what was produced.
    consumer = ck.Consumer({"bootstrap.servers": metrics_broker.bootstrap, "group.id": group,
                            "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(PARTITIONS)])
        position, deadline = dict.fromkeys(range(PARTITIONS), 0), time.monotonic() + 20
        for _ in range(CONSUMED):
            m = None
            while m is None:
                assert time.monotonic() < deadline, f"consumed only {sum(position.values())} of {CONSUMED}"
                m = consumer.poll(0.5)
            assert m.error() is None, m.error()
            assert m.offset() == position[m.partition()]
            position[m.partition()] = m.offset() + 1
        consumer.commit(offsets=[ck.TopicPartition(topic, p, o) for p, o in position.items()], asynchronous=False)
    finally:
        consumer.close()
    lag = RECORDS + 1 - CONSUMED
    lag_expr = f'sum(kafka_consumergroup_lag{{job="{JOB}",consumergroup="{group}"}})'
    assert prometheus.wait_for(lag_expr, lambda v: v == lag) == lag
    assert prometheus.one(f'sum(kafka_consumergroup_lag_sum{{job="{JOB}",consumergroup="{group}"}})') == lag

    assert prometheus.one(f'up{{job="{JOB}"}}') == 1
    check_dashboard_queries(prometheus)


def dashboard_queries() -> list[str]:
    with open(os.path.join(REPO, "docs", "grafana", "oncelog.json"), encoding="utf-8") as f:
        dashboard = json.load(f)
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", ())]
    for var in dashboard["templating"]["list"]:
        m = re.fullmatch(r"label_values\((.*),\s*\w+\)", var.get("definition", ""))
        if m:
            exprs.append(m.group(1))  # what label_values() reads: a selector Prometheus must know
    return exprs


def check_dashboard_queries(prometheus: Prometheus) -> None:
    """Each query of docs/grafana/oncelog.json, with Grafana's variables as a dashboard would set
    them, is valid PromQL, and those over series every broker has return data. (Part of the
    workload's test rather than a test of its own: xdist may run two tests of a module on two
    workers, and this module starts one Prometheus.)"""
    for expr in dashboard_queries():
        concrete = expr.replace("$__rate_interval", "1m").replace("$instance", ".*")
        result = prometheus.query(concrete)  # asserts Prometheus accepted it
        if "requests_total" in expr or "oncelog_start_time_seconds" in expr or "messagesin" in expr:
            assert result, f"{concrete}: no data from a scraped broker"


# ------------------------------------------------------------------ promtool

def test_promtool_finds_no_error_in_a_real_scrape(promtool, metrics_broker):
    # samples in the request, topic, log and lag families
    topic = unique("linted")
    create_topic(metrics_broker.bootstrap, topic, 1)
    p = ck.Producer({"bootstrap.servers": metrics_broker.bootstrap})
    p.produce(topic, value=b"x")
    assert p.flush(10) == 0
    c = ck.Consumer({"bootstrap.servers": metrics_broker.bootstrap, "group.id": unique("linted")})
    try:
        c.commit(offsets=[ck.TopicPartition(topic, 0, 0)], asynchronous=False)
    finally:
        c.close()
    with urllib.request.urlopen(metrics_broker.metrics_url, timeout=10) as r:
        scrape = r.read()
    assert b"# TYPE kafka_network_requestmetrics_totaltimems histogram" in scrape
    done = subprocess.run([promtool, "check", "metrics"], input=scrape, capture_output=True, timeout=30)
    out = (done.stdout + done.stderr).decode()
    # 0: clean; 3: lint problems only (1 would be a scrape promtool cannot parse)
    assert done.returncode in (0, 3), f"promtool check metrics exited {done.returncode}:\n{out}"
    assert "error" not in out.lower(), out
    complaints = [line for line in out.splitlines() if line.strip()]
    linted = {line.split()[0] for line in complaints}
    assert linted <= KEPT_FOR_KAFKA_DASHBOARDS, "promtool complains of: " + "\n".join(
        line for line in complaints if line.split()[0] not in KEPT_FOR_KAFKA_DASHBOARDS)
    assert all(re.search(r'should not have "_(count|sum)" suffix', line) for line in complaints), out
    assert (done.returncode == 0) == (not complaints), out
