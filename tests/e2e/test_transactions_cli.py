"""``oncelog transactions describe`` (the CLI, a subprocess) on a transactional id in each of its
states: Empty, Ongoing, and completed (CompleteCommit / CompleteAbort).

An Empty id has no transaction started, which the broker says with a start time of -1 (Apache
Kafka's TransactionMetadata, and oncelog alike); kio refuses that value, and before
oncelog.protocol.timestamps the command died on a kio traceback. Now it prints ``started -``
(kafka-transactions.sh prints "None"). A started transaction shows its start time and its
partitions; a completed one keeps the start time of the transaction it ended and no partitions, as
Kafka's prepareComplete does.

Each test runs against oncelog and against the session's one-node Apache Kafka (``both_brokers``):
the command decodes both brokers' answers, and both answer alike. Ids and topics are unique.
"""

from __future__ import annotations

import datetime
import re
import subprocess
import sys
import time

import confluent_kafka as ck
import pytest

from ..helpers import COORDINATOR_TRANSACTION, create_topic, unique, unique_away_from_bootstrap

pytestmark = pytest.mark.both_brokers

TIMEOUT_MS = 45_000
LINE = re.compile(r"^(?P<id>\S+): (?P<state>\w*), producer (?P<pid>-?\d+) epoch (?P<epoch>-?\d+), "
                  r"timeout (?P<timeout>\S+)s, started (?P<started>.+)$")


def describe(bootstrap: str, transactional_id: str) -> tuple[dict, list[str]]:
    """The CLI's description: the fields of its first line, and its partition lines."""
    proc = subprocess.run([sys.executable, "-m", "oncelog", "transactions", "--bootstrap-server", bootstrap,
                           "describe", transactional_id], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    first, *rest = proc.stdout.rstrip("\n").split("\n")
    match = LINE.match(first)
    assert match, proc.stdout
    return match.groupdict(), rest


def started_at(fields: dict) -> datetime.datetime:
    return datetime.datetime.fromisoformat(fields["started"])


def describe_until(bootstrap: str, transactional_id: str, state: str, timeout: float = 30.0):
    """Describe until the coordinator reports ``state`` (completion after EndTxn is asynchronous)."""
    deadline = time.monotonic() + timeout
    while True:
        fields, rest = describe(bootstrap, transactional_id)
        if fields["state"] == state or time.monotonic() > deadline:
            return fields, rest
        time.sleep(0.2)


def producer(bootstrap: str, transactional_id: str) -> ck.Producer:
    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                     "transaction.timeout.ms": TIMEOUT_MS})
    p.init_transactions(30)
    return p


# On a cluster the id is coordinated by another node than the bootstrap's, which the command must
# find with FindCoordinator as kafka-transactions.sh does.
@pytest.mark.parametrize("end", ["commit", "abort"])
def test_describe_empty_ongoing_and_completed(broker, end):
    topic, txn_id = unique("txcli"), unique_away_from_bootstrap(broker, "txcli-id", COORDINATOR_TRANSACTION)
    create_topic(broker.bootstrap, topic, 2)
    p = producer(broker.bootstrap, txn_id)

    # Empty: InitProducerId done, no transaction started: start time -1 on the wire
    empty, rest = describe(broker.bootstrap, txn_id)
    assert (empty["id"], empty["state"], empty["started"]) == (txn_id, "Empty", "-")
    assert int(empty["pid"]) >= 0 and empty["timeout"] == str(TIMEOUT_MS // 1000)
    assert rest == []

    # Ongoing: the start time is when the first partition joined, in this test's window
    before = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    p.begin_transaction()
    for partition in (0, 1):
        p.produce(topic, value=b"v", partition=partition)
    p.flush(30)
    after = datetime.datetime.now(datetime.timezone.utc)
    ongoing, rest = describe(broker.bootstrap, txn_id)
    assert (ongoing["state"], ongoing["pid"]) == ("Ongoing", empty["pid"])
    assert before <= started_at(ongoing) <= after
    assert rest == [f"  {topic}: partitions [0, 1]"]

    # completed: no partitions, the ended transaction's start time kept
    if end == "commit":
        p.commit_transaction(30)
    else:
        p.abort_transaction(30)
    state = "CompleteCommit" if end == "commit" else "CompleteAbort"
    done, rest = describe_until(broker.bootstrap, txn_id, state)
    assert done["state"] == state and done["pid"] == empty["pid"]
    assert int(done["epoch"]) in (int(ongoing["epoch"]), int(ongoing["epoch"]) + 1)  # +1: transaction version 2
    assert done["started"] == ongoing["started"]
    assert rest == []


def test_describe_an_unknown_id_fails_with_kafkas_error(broker):
    never_used = unique_away_from_bootstrap(broker, "never-used", COORDINATOR_TRANSACTION)
    proc = subprocess.run([sys.executable, "-m", "oncelog", "transactions", "--bootstrap-server", broker.bootstrap,
                           "describe", never_used], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.strip() == "oncelog transactions describe: TRANSACTIONAL_ID_NOT_FOUND"
