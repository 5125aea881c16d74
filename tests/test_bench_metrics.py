"""``python -m bench metrics`` (bench/metrics.py) small, against the two real oncelog brokers it
starts (one with ``--metrics-listener``, one without): every case ran on both, interleaved, and
each cell's producers had every record acknowledged and in the log; the "on" broker's own
counters saw them (messagesin, Produce requests), its scrapes answered with the idle topics'
series. No timing is asserted: the overhead target lives in BENCHMARKS.md, not in a timed test.

The bench showed a scrape's cost in prometheus_client's exposition writers; the broker now writes
it with :func:`oncelog.metrics.exposition`, which must write exactly what the library writes for
every Accept header Prometheus or a person sends (or leave it to the library)."""

from __future__ import annotations

import json

import pytest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import choose_encoder

from bench import metrics as bench_metrics
from oncelog.metrics import BrokerMetrics, RequestTiming, _Families, exposition

TOPICS, TOPIC_PARTITIONS, ROUNDS = 3, 2, 2


@pytest.mark.e2e  # the bench starts its brokers and producer processes
def test_both_modes_produce_every_record_and_the_report_holds_each_figure(tmp_path):
    out = tmp_path / "metrics.json"
    rc = bench_metrics.main(["--rounds", str(ROUNDS), "--duration", "1", "--warmup", "0", "--processes", "1",
                             "--topics", str(TOPICS), "--topic-partitions", str(TOPIC_PARTITIONS),
                             "--scrape-interval", "0.3", "--idle-scrapes", "2", "--json", str(out)])
    doc = json.loads(out.read_text())
    cells = doc["cells"]
    assert [c["errors"] for c in cells] == [[]] * len(cells)
    assert rc == 0
    assert doc["args"]["fsync"] == "never"
    # every case once per mode per round, the modes' order swapped from round to round
    assert len(cells) == ROUNDS * len(bench_metrics.CASES) * 2
    for case in bench_metrics.CASES:
        order = [[c["mode"] for c in cells if c["case"] == case and c["round"] == r] for r in range(ROUNDS)]
        assert order == [["off", "on"], ["on", "off"]]
    for c in cells:
        assert c["records"] > 0 and c["records"] == c["sent"] == c["in_log"], c
        assert c["failed"] == c["unflushed"] == 0
        assert c["records_per_s"] > 0 and c["broker_cpu_us_per_record"] > 0
        if c["mode"] == "on":
            assert c["metrics_messages_in"] == c["records"]
            assert c["produce_requests"] >= 1 and c["scrapes"] and not c["scrape_errors"]
        else:
            assert "scrapes" not in c
    # the small case sends one record per Produce request at most (what it is there to measure)
    small = [c for c in cells if c["case"] == "small" and c["mode"] == "on"]
    assert all(c["produce_requests"] >= c["records"] for c in small)
    for case, s in doc["summary"].items():
        assert s["rounds"] == ROUNDS and len(s["ratios"]) == ROUNDS
        assert s["ratio_min"] <= s["ratio_median"] <= s["ratio_max"]
        assert s["on"]["median_records_per_s"] > 0 and s["off"]["median_records_per_s"] > 0
        assert s["scrapes_under_load"]["count"] >= 1
    idle = doc["idle_scrape"]
    assert idle["count"] == 2 and idle["wire_bytes"] < idle["bytes"]  # gzip, as Prometheus asks
    # a series per idle partition (kafka_log_log_size and the other partition families)
    assert idle["samples"] > TOPICS * TOPIC_PARTITIONS * 5


ACCEPTS = ["", "text/plain", "text/plain;version=0.0.4", "application/openmetrics-text; version=1.0.0",
           bench_metrics.PROMETHEUS_ACCEPT, "application/openmetrics-text", "*/*",
           "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8",
           "text/plain;version=1.0.0;escaping=underscores"]


def _families() -> list:
    m = BrokerMetrics(None)
    m.request_done(RequestTiming(0, 9, 1.0, 1.0004), 1.002)
    m.request_done(RequestTiming(1, 16, 1.0, 1.5), 2.0)
    m.errors_in(0, [0, 0, 6])
    m.appended("orders", 10, 1_234_567)
    m.appended('we"ird\\to\npic é', 3, 30)
    odd = GaugeMetricFamily("odd_gauge", 'doc with "quotes" \\ and\nnewline', labels=("topic", "partition"))
    for i, v in enumerate([0, -1, 1e300, float("nan"), float("inf"), 12345678.0, 999999.5, 1e-7, 3, 10**12]):
        odd.add_metric(("t", str(i)), v)
    bare = CounterMetricFamily("bare", "no labels")
    bare.add_metric((), 7)
    hist = HistogramMetricFamily("h", "a histogram", labels=("request",))
    hist.add_metric(("Produce",), [("1.0", 2), ("+Inf", 3)], 4.5)
    return [*m.collect(), odd, bare, hist]


@pytest.mark.parametrize("accept", ACCEPTS)
def test_the_fast_exposition_writes_what_prometheus_client_writes(accept):
    encoder, _ = choose_encoder(accept)
    families = _families()
    fast = exposition(families, encoder)
    assert fast is not None
    assert fast == encoder(_Families(families))


def test_what_the_fast_exposition_does_not_write_is_left_to_the_library():
    encoder, _ = choose_encoder("application/openmetrics-text;version=1.0.0;escaping=values")
    assert exposition(_families(), encoder) is None  # another escaping
    encoder, _ = choose_encoder("text/plain")
    created = CounterMetricFamily("c", "with a created sample", created=1.0)
    created.add_metric((), 1, created=1.0)
    assert exposition([created], encoder) is None  # an OpenMetrics-only sample in the text format
    utf8 = GaugeMetricFamily("a.b", "a name outside the legacy set", value=1)
    assert exposition([utf8], encoder) is None
