"""``Broker(metrics=True)``: a test reads the broker's Prometheus metrics at ``metrics_url``, both
kinds, and the URL survives a restart (the endpoint binds its port again, as the listeners do)."""

from __future__ import annotations

import urllib.request

import confluent_kafka as ck
import pytest
from prometheus_client.parser import text_string_to_metric_families

from oncelog.testing import Broker

pytestmark = pytest.mark.e2e


def _messages_in(url: str, topic: str) -> float:
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    return sum(s.value for fam in text_string_to_metric_families(text) for s in fam.samples
               if s.name == "kafka_server_brokertopicmetrics_messagesin_total" and s.labels.get("topic") == topic)


def _produce(bootstrap: str, topic: str, n: int) -> None:
    p = ck.Producer({"bootstrap.servers": bootstrap})
    for i in range(n):
        p.produce(topic, value=b"%d" % i)
    assert p.flush(30) == 0


@pytest.mark.parametrize("kind", ["thread", "process"])
def test_metrics_url_counts_what_the_test_produced_and_survives_a_restart(kind):
    with Broker(kind=kind, metrics=True) as broker:
        url = broker.metrics_url
        assert url and url.startswith("http://127.0.0.1:") and url.endswith("/metrics")
        broker.create_topic("metered")
        _produce(broker.bootstrap_servers, "metered", 5)
        assert _messages_in(url, "metered") == 5
        broker.restart()
        assert broker.metrics_url == url
        _produce(broker.bootstrap_servers, "metered", 2)
        assert _messages_in(url, "metered") == 2  # counters start again with the process, as Kafka's


def test_no_metrics_unless_asked():
    with Broker() as broker:
        assert broker.metrics_url is None
