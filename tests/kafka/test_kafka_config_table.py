"""The connector checks kafka.* options against oncelog/spark/kafka_client_configs.json: it must be
what kafka-clients 4.4's own ConfigDefs say (regenerate: python -m tests.kafka.kafka_config_table)."""

import json

import pytest

from oncelog.spark.kafka_configs import TABLE_CLIENT_VERSION, TABLE_PATH

from ..helpers import need_apache_kafka
from .kafka_config_table import generate

pytestmark = [pytest.mark.e2e, pytest.mark.apache_kafka]


def test_committed_table_equals_the_java_clients_config_defs():
    fresh = need_apache_kafka(f"kafka-clients {TABLE_CLIENT_VERSION}", generate)
    with open(TABLE_PATH) as f:
        committed = json.load(f)
    assert committed == fresh, (f"{TABLE_PATH} differs from kafka-clients {TABLE_CLIENT_VERSION}'s ConfigDefs: "
                                f"{sorted(set(committed) ^ set(fresh))[:10]}; run python -m tests.kafka.kafka_config_table")
