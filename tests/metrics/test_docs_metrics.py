"""docs/metrics.md and docs/grafana/oncelog.json stay true to what a real broker serves.

A broker process with a metrics endpoint is given records, a group's committed offsets and an open
transaction (so the labelled families have samples), then scraped: every family in the scrape has
a row in the doc's tables with its type and labels, every row names a family the broker serves,
and every metric the example Grafana dashboard queries is one the scrape has.
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request

import confluent_kafka as ck
import pytest
from prometheus_client.parser import text_string_to_metric_families

from oncelog.process import BrokerProcess

from ..helpers import create_topic, unique

pytestmark = pytest.mark.e2e

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = os.path.join(REPO, "docs", "metrics.md")
DASHBOARD = os.path.join(REPO, "docs", "grafana", "oncelog.json")


def read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


@pytest.fixture(scope="module")
def scrape(tmp_path_factory) -> str:
    """The text exposition of a broker with records, a group's offsets and an open transaction."""
    b = BrokerProcess(str(tmp_path_factory.mktemp("broker")), extra_args=["--metrics-listener", "127.0.0.1:0"])
    b.start()
    try:
        return scraped_after_a_workload(b)  # its clients are gone by the time the broker stops
    finally:
        b.stop()


def scraped_after_a_workload(b: BrokerProcess) -> str:
    topic = unique("documented")
    create_topic(b.bootstrap, topic, 2)
    p = ck.Producer({"bootstrap.servers": b.bootstrap})
    for i in range(10):
        p.produce(topic, value=b"v%d" % i, partition=i % 2)
    assert p.flush(10) == 0
    c = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": unique("documented"), "enable.auto.commit": False})
    try:
        c.commit(offsets=[ck.TopicPartition(topic, 0, 2), ck.TopicPartition(topic, 1, 1)], asynchronous=False)
    finally:
        c.close()
    tx = ck.Producer({"bootstrap.servers": b.bootstrap, "transactional.id": unique("documented")})
    tx.init_transactions(10)
    tx.begin_transaction()
    tx.produce(topic, value=b"open", partition=1)
    assert tx.flush(10) == 0
    # a fetch, for bytes out
    reader = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": unique("reader"),
                          "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        reader.assign([ck.TopicPartition(topic, 0, 0)])
        assert reader.consume(1, timeout=10)
    finally:
        reader.close()
    try:
        with urllib.request.urlopen(b.metrics_url, timeout=10) as r:
            text = r.read().decode()
    except urllib.error.HTTPError as e:  # a scrape that failed: the broker's log says why
        with open(b.log_path, errors="replace") as log:
            pytest.fail(f"the scrape answered {e.code}; the broker's log ends:\n{log.read()[-4000:]}")
    tx.abort_transaction(10)
    return text


def served(text: str) -> dict[str, str]:
    """{name as the exposition's TYPE line gives it (counters with _total): type}."""
    return dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))


def served_labels(text: str) -> dict[str, set[str]]:
    """{TYPE name: label names of its samples (histograms' le left out)}, families with samples only."""
    out: dict[str, set[str]] = {}
    for fam in text_string_to_metric_families(text):
        name = fam.name + "_total" if fam.type == "counter" else fam.name
        for s in fam.samples:
            out.setdefault(name, set()).update(k for k in s.labels if k != "le")
    return out


def documented() -> dict[str, tuple[str, set[str]]]:
    """The doc's table rows: {name: (type, label names)}."""
    rows = {}
    for line in read(DOC).splitlines():
        m = re.match(r"\| `([a-z_:][a-z0-9_:]*)` \| (\w+) \|([^|]*)\|", line)
        if m:
            assert m.group(1) not in rows, f"{m.group(1)} has two rows in docs/metrics.md"
            rows[m.group(1)] = (m.group(2), set(re.findall(r"`(\w+)`", m.group(3))))
    return rows


def test_every_family_the_broker_serves_is_documented(scrape):
    families = served(scrape)
    assert len(families) >= 40, families  # the scrape is the whole one
    doc = read(DOC)
    missing = [name for name in families if not re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", doc)]
    assert not missing, f"docs/metrics.md does not mention {missing}"
    rows = documented()
    assert set(families) - set(rows) == set(), f"no table row for {sorted(set(families) - set(rows))}"
    assert set(rows) - set(families) == set(), f"docs/metrics.md documents families not served: " \
                                               f"{sorted(set(rows) - set(families))}"
    wrong_type = {n: (rows[n][0], t) for n, t in families.items() if rows[n][0] != t}
    assert not wrong_type, f"documented type != served type: {wrong_type}"
    labels = served_labels(scrape)
    # the labelled families have samples (the workload made them), and their labels are the doc's
    for name in ("kafka_network_requestmetrics_requests_total", "kafka_network_requestmetrics_totaltimems",
                 "kafka_server_brokertopicmetrics_messagesin_total", "kafka_server_brokertopicmetrics_bytesout_total",
                 "kafka_log_log_size", "kafka_consumergroup_lag", "kafka_consumergroup_lag_sum",
                 "oncelog_consumergroup_lag_stable", "kafka_consumergroup_members", "oncelog_transactions",
                 "kafka_server_group_coordinator_metrics_classic_group_count"):
        assert name in labels, f"{name} has no samples: the workload should have made some"
    wrong_labels = {n: (rows[n][1], found) for n, found in labels.items() if rows[n][1] != found}
    assert not wrong_labels, f"documented labels != served labels: {wrong_labels}"
    assert re.search(r'oncelog_transactions\{state="Ongoing"\} 1\.0', scrape), "the transaction was open"


# ------------------------------------------------------------------ the Grafana dashboard

FUNCTION_OR_KEYWORD = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
                       "unless", "offset", "inf", "nan"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (a light parse: enough for dashboards)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # string literals
    text = re.sub(r"\{[^}]*\}", " ", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", " ", text)  # ranges
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)  # label lists
    text = re.sub(r"\$\w+", " ", text)  # Grafana's variables
    names = set()
    for m in re.finditer(r"(?<![\w.])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?", text):
        if m.group(2) is None and m.group(1).lower() not in FUNCTION_OR_KEYWORD:
            names.add(m.group(1))
    return names


def test_the_query_parser_finds_metric_names():
    assert metric_names('histogram_quantile(0.99, sum by (request, le) (rate(a_bucket{x=~"$i", y!="by"}'
                        '[$__rate_interval])))') == {"a_bucket"}
    assert metric_names("sum without (topic) (b) / on (instance) group_left c > 0") == {"b", "c"}
    assert metric_names("max(d offset 5m) and e") == {"d", "e"}


def dashboard() -> dict:
    return json.loads(read(DASHBOARD))


def queries(dash: dict) -> list[str]:
    exprs = []

    def walk(panels):
        for p in panels:
            exprs.extend(t["expr"] for t in p.get("targets", ()) if t.get("expr"))
            walk(p.get("panels", ()))  # a row's panels

    walk(dash.get("panels", ()))
    for var in dash.get("templating", {}).get("list", ()):
        q = var.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        m = re.fullmatch(r"label_values\((.*),\s*\w+\)", q or "")
        if m:
            exprs.append(m.group(1))
    return exprs


def test_the_dashboard_queries_only_metrics_the_broker_serves(scrape):
    dash = dashboard()
    assert dash["panels"] and dash["title"]
    exprs = queries(dash)
    families = served(scrape)
    samples = set(families)
    for name, kind in families.items():
        if kind == "histogram":
            samples |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
    used = set().union(*(metric_names(e) for e in exprs))
    assert used, exprs
    assert used <= samples, f"docs/grafana/oncelog.json queries metrics the broker does not serve: {used - samples}"
    # the panels the doc promises
    for name in ("kafka_server_brokertopicmetrics_messagesin_total", "kafka_server_brokertopicmetrics_bytesin_total",
                 "kafka_server_brokertopicmetrics_bytesout_total", "kafka_network_requestmetrics_requests_total",
                 "kafka_network_requestmetrics_totaltimems_bucket", "kafka_consumergroup_lag_sum",
                 "oncelog_transactions", "oncelog_transaction_oldest_open_seconds",
                 "kafka_cluster_partition_laststableoffsetlag"):
        assert name in used, f"the dashboard has no panel on {name}"
    assert any(e.startswith("histogram_quantile(0.99,") and "by (request, le)" in e for e in exprs), exprs
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    assert "docs/grafana/oncelog.json" in read(DOC) and "(grafana/oncelog.json)" in read(DOC)
