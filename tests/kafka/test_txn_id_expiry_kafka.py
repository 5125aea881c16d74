"""Apache Kafka 4.4 expiring transactional ids and producer ids (tests/txn_id_expiry_cases.py):
the reference that oncelog's run of the same cases (tests/e2e/test_txn_id_expiry.py) is held
to. A node of this module's own, started with the cases' short expirations
(``transactional.id.expiration.ms`` and ``producer.id.expiration.ms`` 2 s, checked every 0.3 s):
the session's Kafka keeps Kafka's defaults."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from .. import txn_id_expiry_cases as cases
from ..helpers import create_topic, start_apache_kafka, unique

pytestmark = [pytest.mark.apache_kafka, pytest.mark.e2e]


@pytest.fixture(scope="module")
def kafka():
    from oncelog.tools.apache_kafka import KafkaCluster

    cluster = KafkaCluster(nodes=1, config=dict(cases.SETTINGS))
    start_apache_kafka(cluster)
    yield cluster
    cluster.stop(graceful=False)


def test_an_idle_id_expires_and_a_touched_one_stays(kafka):
    topic = unique("t")
    create_topic(kafka.bootstrap, topic, 1)
    answers = cases.check_an_idle_id_expires_and_a_touched_one_stays(kafka.bootstrap, topic, unique("expired"),
                                                                     unique("live"))
    assert answers == {"add": ErrorCode.invalid_producer_id_mapping, "end": ErrorCode.invalid_producer_id_mapping,
                       "new_epoch": 0}


def test_a_transactional_producer_idle_past_the_expiration_recovers(kafka):
    topic = unique("t")
    create_topic(kafka.bootstrap, topic, 1)
    assert cases.check_a_transactional_producer_idle_past_the_expiration_recovers(
        kafka.bootstrap, topic, unique("idle")) == [b"first", b"third"]


def test_an_idle_producer_id_expires_on_its_partition(kafka):
    topic = unique("t")
    create_topic(kafka.bootstrap, topic, 1)
    cases.check_an_idle_producer_id_expires_on_its_partition(kafka.bootstrap, topic)
