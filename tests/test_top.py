"""``oncelog top``: the snapshot arithmetic (rates between two reads, lag vs HWM and vs LSO,
held-back partitions and the transaction holding them) on made-up fetches, without a broker; and
the command end to end (``--once --json`` as a subprocess) against oncelog and, as the
``apache-kafka`` variant (``both_brokers``), Apache Kafka: real confluent-kafka producers, a group
that committed part of its input, and one transaction left open so that one partition's LSO is
held back, then committed so that it is not."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from oncelog import top
from oncelog.top import Fetch, GroupOffsets, ProducerTxn, Transaction


def _fetch(offsets, *, at=100.0, wall=1_000_000, sizes=None, groups=(), txns=(), producers=(), errors=()):
    return Fetch(at, wall, offsets, sizes, tuple(groups), tuple(txns), tuple(producers), tuple(errors))


# -- pure --------------------------------------------------------------------------------------


def test_rate_needs_two_reads_and_a_counter_that_did_not_go_down():
    assert top.rate(100, 160, 2.0) == 30.0
    assert top.rate(None, 160, 2.0) is None
    assert top.rate(100, 160, None) is None
    assert top.rate(100, 160, 0.0) is None
    assert top.rate(160, 100, 2.0) is None  # a topic made anew, or retention deleting segments
    assert top.rate(5, 5, 2.0) == 0.0


def test_topics_rates_from_the_sum_of_end_offsets_and_leader_sizes_between_two_fetches():
    prev = _fetch({("a", 0): (10, 10), ("a", 1): (5, 5), ("b", 0): (7, 7)}, at=100.0,
                  sizes={("a", 0): 1000, ("a", 1): 500, ("b", 0): 700})
    cur = _fetch({("a", 0): (30, 30), ("a", 1): (25, 20), ("b", 0): (7, 7), ("c", 0): (3, 3),
                  ("__consumer_offsets", 0): (9, 9)}, at=104.0,
                 sizes={("a", 0): 3000, ("a", 1): 2500, ("b", 0): 700, ("c", 0): 300})
    rows = top.topics(cur, prev)
    assert rows == [
        {"topic": "a", "partitions": 2, "end_offset": 55, "stable_offset": 50, "log_bytes": 5500,
         "records_per_s": 10.0, "bytes_per_s": 1000.0},
        {"topic": "b", "partitions": 1, "end_offset": 7, "stable_offset": 7, "log_bytes": 700,
         "records_per_s": 0.0, "bytes_per_s": 0.0},
        # new since the previous read: its offsets may predate it, so no rate
        {"topic": "c", "partitions": 1, "end_offset": 3, "stable_offset": 3, "log_bytes": 300,
         "records_per_s": None, "bytes_per_s": None},
    ]  # internal topics are left out
    assert [r["records_per_s"] for r in top.topics(cur)] == [None, None, None]


def test_topics_without_log_sizes_have_no_bytes():
    rows = top.topics(_fetch({("a", 0): (4, 4)}, at=2.0), _fetch({("a", 0): (2, 2)}, at=1.0))
    assert rows[0]["log_bytes"] is None and rows[0]["bytes_per_s"] is None and rows[0]["records_per_s"] == 2.0


def test_group_lag_vs_high_watermark_and_vs_last_stable_offset():
    offsets = {("in", 0): (10, 10), ("in", 1): (6, 6), ("txn", 0): (6, 4)}
    g = GroupOffsets("g", "classic", "Empty", (
        {"topic": "in", "partition": 0, "committed": 4, "high_watermark": 10},
        {"topic": "in", "partition": 1, "committed": 6, "high_watermark": 6},
        {"topic": "txn", "partition": 0, "committed": 2, "high_watermark": 6},
        {"topic": "txn", "partition": 1, "committed": None, "high_watermark": 3},  # owned, never committed
        {"topic": "gone", "partition": 0, "committed": 8, "high_watermark": None},  # topic deleted
    ))
    assert top.group_lag(g, offsets) == {"group": "g", "type": "classic", "state": "Empty", "partitions": 5,
                                         "lag": 6 + 0 + 4, "lag_stable": 6 + 0 + 2, "error": None}


def test_group_lag_past_the_lso_is_zero_and_the_rows_own_hwm_stands_in():
    # committed past the LSO (a read_uncommitted member): nothing left to read_committed, not negative
    g = GroupOffsets("g", "consumer", "Stable", (
        {"topic": "t", "partition": 0, "committed": 5, "high_watermark": 6},
        {"topic": "u", "partition": 0, "committed": 1, "high_watermark": 9},  # not in this fetch
    ))
    lag = top.group_lag(g, {("t", 0): (6, 3)})
    assert (lag["lag"], lag["lag_stable"]) == (1 + 8, 0 + 8)


def test_share_group_lag_is_its_rows_and_an_error_has_no_lag():
    share = GroupOffsets("s", "share", "Stable", ({"topic": "t", "partition": 0, "start_offset": 3, "lag": 4},
                                                  {"topic": "t", "partition": 1, "start_offset": None, "lag": None}))
    assert (top.group_lag(share, {})["lag"], top.group_lag(share, {})["lag_stable"]) == (4, None)
    broken = top.group_lag(GroupOffsets("x", "classic", None, error="GROUP_AUTHORIZATION_FAILED"), {})
    assert (broken["lag"], broken["lag_stable"], broken["error"]) == (None, None, "GROUP_AUTHORIZATION_FAILED")


def test_held_back_names_the_oldest_open_transaction_and_its_id():
    txns = [Transaction("app-1", "Ongoing", 41, 0, 990_000, 60_000, (("txn", 0), ("txn", 1))),
            Transaction("app-2", "Ongoing", 42, 3, 995_000, 60_000, (("txn", 0),))]
    producers = [ProducerTxn("txn", 0, 42, 3, 9, 0), ProducerTxn("txn", 0, 41, 0, 4, 0),
                 ProducerTxn("txn", 1, 41, 0, 2, 0),
                 ProducerTxn("other", 0, 77, 0, 1, 0)]  # no coordinator lists it as open: hanging
    cur = _fetch({("txn", 0): (12, 4), ("txn", 1): (5, 2), ("plain", 0): (8, 8), ("other", 0): (3, 1),
                  ("gone", 0): (6, 5)},  # ended between the reads: no producer named
                 wall=1_000_000, txns=txns, producers=producers)
    assert top.held_back(cur) == [
        {"topic": "gone", "partition": 0, "last_stable_offset": 5, "high_watermark": 6, "held_records": 1,
         "first_offset": None, "producer_id": None, "producer_epoch": None, "transactional_id": None, "age_ms": None},
        {"topic": "other", "partition": 0, "last_stable_offset": 1, "high_watermark": 3, "held_records": 2,
         "first_offset": 1, "producer_id": 77, "producer_epoch": 0, "transactional_id": None, "age_ms": None},
        {"topic": "txn", "partition": 0, "last_stable_offset": 4, "high_watermark": 12, "held_records": 8,
         "first_offset": 4, "producer_id": 41, "producer_epoch": 0, "transactional_id": "app-1", "age_ms": 10_000},
        {"topic": "txn", "partition": 1, "last_stable_offset": 2, "high_watermark": 5, "held_records": 3,
         "first_offset": 2, "producer_id": 41, "producer_epoch": 0, "transactional_id": "app-1", "age_ms": 10_000},
    ]


def test_transactions_oldest_first_with_overdue_ones_marked():
    cur = _fetch({}, wall=1_000_000, txns=[
        Transaction("young", "Ongoing", 1, 0, 999_000, 60_000, (("t", 1), ("t", 0))),
        Transaction("old", "PrepareCommit", 2, 5, 900_000, 60_000, ()),
        Transaction("unknown-start", "Ongoing", 3, 0, -1, 60_000, ())])
    rows = top.transactions(cur)
    assert [(r["transactional_id"], r["age_ms"], r["overdue"]) for r in rows] == [
        ("old", 100_000, True), ("young", 1_000, False), ("unknown-start", None, False)]
    assert rows[1]["partitions"] == [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 1}]


def test_snapshot_is_json_and_renders():
    from rich.console import Console

    prev = _fetch({("a", 0): (0, 0)}, at=1.0)
    cur = _fetch({("a", 0): (6, 4), ("a", 1): (0, 0)}, at=3.0, wall=1_000_000,
                 groups=[GroupOffsets("g", "classic", "Empty", ({"topic": "a", "partition": 0, "committed": 1},))],
                 txns=[Transaction("tx", "Ongoing", 9, 0, 998_000, 60_000, (("a", 0),))],
                 producers=[ProducerTxn("a", 0, 9, 0, 4, 0)], errors=["log sizes (DescribeLogDirs): refused"])
    snap = top.snapshot(cur, prev)
    assert json.loads(json.dumps(snap)) == snap
    assert snap["interval_s"] == 2.0 and snap["topics"][0]["records_per_s"] == 3.0
    assert snap["groups"][0]["lag"] == 5 and snap["groups"][0]["lag_stable"] == 3
    console = Console(width=200, record=True, file=open("/dev/null", "w"))
    console.print(top.render(snap))
    text = console.export_text()
    for shown in ("throughput", "consumer lag", "open transactions", "held back", "a-0", "tx", "refused"):
        assert shown in text


def test_render_shows_client_chosen_names_verbatim_not_as_markup():
    """Group ids, transactional ids, topic names and error text are the clients' choice: rendered as
    text, so ``evil[/]`` (rich's MarkupError as markup) and ``[bold red]x`` show as they are."""
    from rich.console import Console

    group, styled, txn_id, topic = "evil[/]", "[bold red]x", "tx[/]", "t[red]"
    cur = _fetch({(topic, 0): (6, 4)}, wall=1_000_000,
                 groups=[GroupOffsets(group, "classic", "Empty", ({"topic": topic, "partition": 0, "committed": 1},)),
                         GroupOffsets(styled, "classic", "Empty", ()),
                         GroupOffsets("broken", "classic", None, error="refused [/] [bold]:smile:")],
                 txns=[Transaction(txn_id, "Ongoing", 9, 0, 900_000, 60_000, ((topic, 0),))],
                 producers=[ProducerTxn(topic, 0, 9, 0, 4, 0)], errors=["groups: [/oops]"])
    console = Console(width=250, record=True, file=open("/dev/null", "w"))
    console.print(top.render(top.snapshot(cur)))
    text = console.export_text()
    for shown in (group, styled, txn_id, f"{topic}-0", "refused [/] [bold]:smile:", "[/oops]", "(overdue)"):
        assert shown in text, shown  # as markup, the tags would be gone (or raise)


def test_json_needs_once():
    from oncelog.cli import build_parser

    args = build_parser().parse_args(["top", "--json"])
    assert top.run(args) == 2


# -- end to end --------------------------------------------------------------------------------


def _top(bootstrap: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "oncelog", "top", "--once", "--json", "--interval", "0",
                           "--bootstrap-server", bootstrap], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.e2e
@pytest.mark.both_brokers
def test_top_shows_lag_the_open_transaction_and_the_partition_it_holds_back(broker):
    import confluent_kafka as ck

    from .helpers import create_topic, unique, wait_for_partitions

    bootstrap = broker.bootstrap
    plain, txn_topic, group, txn_id = unique("top-in"), unique("top-txn"), unique("top-group"), unique("top-tx")
    create_topic(bootstrap, plain, 2)
    create_topic(bootstrap, txn_topic, 1)
    wait_for_partitions(bootstrap, plain, 2)
    wait_for_partitions(bootstrap, txn_topic, 1)

    p = ck.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 1})
    for i in range(10):
        p.produce(plain, value=b"a%d" % i, partition=0)
    for i in range(6):
        p.produce(plain, value=b"b%d" % i, partition=1)
    assert p.flush(30) == 0

    tp = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 1})
    tp.init_transactions(30)
    tp.begin_transaction()
    for i in range(3):
        tp.produce(txn_topic, value=b"c%d" % i, partition=0)
    tp.commit_transaction(30)  # offsets 0-2, the commit marker 3
    tp.begin_transaction()
    committed = False
    try:
        _check_through_the_open_transaction(bootstrap, tp, plain, txn_topic, group, txn_id)
        committed = True
    finally:
        if not committed:  # leave no open transaction on a shared Apache Kafka
            tp.abort_transaction(30)


def _check_through_the_open_transaction(bootstrap, tp, plain, txn_topic, group, txn_id):
    """With ``tp``'s transaction begun: two records in it, a group's commits, ``oncelog top``
    while it is open, then after ``tp`` commits it."""
    import confluent_kafka as ck

    for i in range(2):
        tp.produce(txn_topic, value=b"o%d" % i, partition=0)  # offsets 4-5, left open
    assert tp.flush(30) == 0

    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    deadline = time.monotonic() + 30
    while True:  # a fresh Apache Kafka makes __consumer_offsets at the first group: NOT_COORDINATOR meanwhile
        try:
            c.commit(offsets=[ck.TopicPartition(plain, 0, 4), ck.TopicPartition(plain, 1, 6),
                              ck.TopicPartition(txn_topic, 0, 2)], asynchronous=False)
            break
        except ck.KafkaException as exc:
            # NOT_COORDINATOR, then COORDINATOR_LOAD_IN_PROGRESS while the new partition loads
            # (librdkafka calls neither retriable on a commit)
            if not exc.args[0].retriable() and exc.args[0].code() not in (
                    ck.KafkaError.NOT_COORDINATOR, ck.KafkaError.COORDINATOR_LOAD_IN_PROGRESS) \
                    or time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    c.close()

    def mine(snap):
        return ({t["topic"]: t for t in snap["topics"] if t["topic"] in (plain, txn_topic)},
                [g for g in snap["groups"] if g["group"] == group],
                [t for t in snap["transactions"] if t["transactional_id"] == txn_id],
                [h for h in snap["held_back"] if h["topic"] in (plain, txn_topic)])

    snap = _top(bootstrap)
    assert snap["errors"] == []
    topics, groups, txns, held = mine(snap)
    assert topics[plain]["log_bytes"] > 0 and topics[txn_topic]["log_bytes"] > 0  # DescribeLogDirs answered
    assert (topics[plain]["end_offset"], topics[plain]["stable_offset"]) == (16, 16)
    assert (topics[txn_topic]["end_offset"], topics[txn_topic]["stable_offset"]) == (6, 4)
    assert topics[plain]["records_per_s"] is None  # one read (--interval 0): no rate
    # plain: (10 - 4) + (6 - 6); txn: 6 - 2 against the HWM, 4 - 2 against the LSO
    assert [(g["lag"], g["lag_stable"], g["partitions"]) for g in groups] == [(10, 8, 3)]
    assert len(txns) == 1, snap["transactions"]
    assert txns[0]["state"] == "Ongoing"
    assert txns[0]["partitions"] == [{"topic": txn_topic, "partition": 0}]
    assert txns[0]["age_ms"] is not None and 0 <= txns[0]["age_ms"] < 120_000 and not txns[0]["overdue"]
    assert [(h["partition"], h["last_stable_offset"], h["high_watermark"], h["first_offset"],
             h["transactional_id"], h["producer_id"]) for h in held] == [
        (0, 4, 6, 4, txn_id, txns[0]["producer_id"])]
    assert held[0]["topic"] == txn_topic

    tp.commit_transaction(30)  # the marker at 6
    # Kafka answers EndTxn before its markers are written: the LSO moves a moment later.
    deadline = time.monotonic() + 30
    while True:
        snap = _top(bootstrap)
        topics, groups, txns, held = mine(snap)
        if not txns and not held or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert (txns, held) == ([], [])
    assert (topics[txn_topic]["end_offset"], topics[txn_topic]["stable_offset"]) == (7, 7)
    assert [(g["lag"], g["lag_stable"]) for g in groups] == [(6 + 5, 6 + 5)]


@pytest.mark.e2e
def test_top_once_prints_tables_and_rates(broker_factory):
    """Two reads ``--interval`` apart: an idle topic's rate is exactly 0, and the tables show."""
    from .helpers import create_topic

    b = broker_factory()
    create_topic(b.bootstrap, "idle", 1)
    proc = subprocess.run([sys.executable, "-m", "oncelog", "top", "--once", "--interval", "0.3",
                           "--bootstrap-server", b.bootstrap], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    for shown in ("throughput", "consumer lag", "open transactions", "held back", "idle", "rates over"):
        assert shown in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "oncelog", "top", "--once", "--json", "--interval", "0.3",
                           "--bootstrap-server", b.bootstrap], capture_output=True, text=True, timeout=120)
    snap = json.loads(proc.stdout)
    [idle] = [t for t in snap["topics"] if t["topic"] == "idle"]
    assert (idle["records_per_s"], idle["bytes_per_s"]) == (0.0, 0.0)
    assert snap["errors"] == []


@pytest.mark.e2e
def test_top_fails_in_one_line_when_nothing_answers():
    from oncelog.process import free_ports

    port = free_ports()
    proc = subprocess.run([sys.executable, "-m", "oncelog", "top", "--once", "--bootstrap-server",
                           f"127.0.0.1:{port}"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr.startswith("oncelog top: ") and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


@pytest.mark.e2e
def test_top_over_sasl_ssl_with_command_config(oncelog_secure_broker, tmp_path):
    """``--command-config`` as the other admin commands take it (Kafka's Java names): the view
    reads a SASL_SSL listener; without it, a one-line error and exit 1."""
    import confluent_kafka as ck

    from .helpers import create_topic, unique

    b = oncelog_secure_broker
    topic = unique("top-secure")
    create_topic(b.plaintext_bootstrap_servers, topic, 1)
    p = ck.Producer(b.client_config())
    for i in range(3):
        p.produce(topic, value=b"s%d" % i, partition=0)
    assert p.flush(30) == 0
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
                      "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                      f'username="{b.username}" password="{b.password}";\n'
                      f"ssl.truststore.type=PEM\nssl.truststore.location={b.ca_location}\n")
    args = [sys.executable, "-m", "oncelog", "top", "--once", "--json", "--interval", "0",
            "--bootstrap-server", b.bootstrap_servers]
    proc = subprocess.run(args + ["--command-config", str(config)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    snap = json.loads(proc.stdout)
    assert [(t["end_offset"], t["stable_offset"]) for t in snap["topics"] if t["topic"] == topic] == [(3, 3)]
    assert snap["errors"] == []
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr.startswith("oncelog top: ") and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
