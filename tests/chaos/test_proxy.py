"""The fault proxy (oncelog.chaos.proxy) against a real oncelog broker that advertises it.

Each mode is shown to really happen, with the protocol client's raw requests (oncelog.client.wire:
exact frames, correlation ids, socket-level observations) and the broker's own log as witness:

* ``delay``  — every response arrives at least the delay after its request, in request order;
* ``drop``   — the connection is cut without an answer, and the write is in the log;
* ``reset``  — the connection is cut in the middle of the request: nothing of it is in the log,
  and the broker goes on serving;
* ``blackhole("to_broker")`` — the request never reaches the broker, the connection stays open
  and serves again after the blackhole; ``"to_client"`` — the broker processed it, the client
  never hears of it;
* ``hold``   — one connection's Produce (and what follows it on that connection) waits while
  another connection's Produce proceeds; ``release()`` forwards it, in order;
* ``heal``   — every mode off at once, held requests released;
* a frame size above the bound cuts the connection (the proxy reads hostile bytes).

Then, for each mode, two transactional writers — confluent-kafka and the project's protocol
client (the Spark sink's ``TransactionalProducer``) — run through the fault and after ``heal()``
finish their transactions, and an independent read_committed reader sees every committed value
exactly once, no aborted value, and nothing nobody wrote.

Oncelog only: the broker must advertise the proxy (``--advertise``); Kafka in KRaft mode cannot
be re-advertised through it without reconfiguring its listeners.
"""

from __future__ import annotations

import socket
import struct
import time

import pytest

from oncelog.chaos.proxy import PRODUCE, FaultProxy
from oncelog.client.wire import RawClient, decode_response, list_offsets_latest, produce_request, request_module

from ..helpers import create_topic
from ..kafka.conformance.framework import batch
from .net_clients import ConfluentTxnWriter, ProtocolTxnWriter, assert_exactly_once, log_end_offset, read_committed

TOPIC = "t"


@pytest.fixture
def behind_proxy(broker_factory):
    """(broker, proxy): an oncelog broker advertising a started fault proxy, topic ``t`` (1 partition)."""
    proxy = FaultProxy(seed=23)
    broker = broker_factory(extra_args=["--advertise", proxy.address])
    proxy.upstream_port = broker.port
    proxy.start()
    create_topic(proxy.address, TOPIC, 1)
    yield broker, proxy
    proxy.close()


def wait_for(what: str, fn, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while not (got := fn()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)
    return got


def send_produce(client: RawClient, value: bytes):
    """Send a Produce (acks=all) of one record to t-0 without reading its answer; returns its request."""
    request = produce_request(TOPIC, 0, batch([value]))
    client.send_frame(client.encode(request))
    return request


def produced_offset(client: RawClient, request) -> int:
    resp = client.read_response(type(request))
    part = resp.responses[0].partition_responses[0]
    assert int(part.error_code) == 0, part
    return part.base_offset


def answered_within(client: RawClient, seconds: float) -> bool:
    """Whether any byte arrives on the connection within ``seconds`` (False: none came, still open)."""
    client.sock.settimeout(seconds)
    try:
        data = client.sock.recv(1, socket.MSG_PEEK)
        if not data:
            raise ConnectionError("connection closed")
        return True
    except socket.timeout:
        return False
    finally:
        client.sock.settimeout(10)


def api_versions(client: RawClient):
    m = request_module(18, 3)
    return m.ApiVersionsRequest(client_software_name="proxy-test", client_software_version="1")


# -------------------------------------------------------------------- each mode happens


def test_delay_holds_every_response_back_and_keeps_their_order(behind_proxy):
    _, proxy = behind_proxy
    c = RawClient(proxy.address)
    proxy.delay(0.3)
    sent = []
    for _ in range(5):  # pipelined on one connection
        request = api_versions(c)
        c.send_frame(c.encode(request))
        sent.append((c.correlation_id, time.monotonic(), type(request)))
    for correlation_id, at, cls in sent:
        got, resp = decode_response(c.recv_frame(), cls)
        assert got == correlation_id  # in request order
        assert int(resp.error_code) == 0
        assert time.monotonic() - at >= 0.29  # (asyncio may wake a clock tick early)
    assert proxy.counts["delayed"] == 5
    proxy.delay(0)
    assert int(c.request(api_versions(c)).error_code) == 0
    assert proxy.counts["delayed"] == 5
    c.close()


def test_drop_cuts_the_connection_after_the_broker_processed_the_request(behind_proxy):
    broker, proxy = behind_proxy
    c = RawClient(proxy.address)
    proxy.drop(1.0)
    send_produce(c, b"written-but-unacknowledged")
    with pytest.raises(ConnectionError):
        c.recv_frame()
    assert proxy.counts["dropped"] == 1
    proxy.heal()
    assert log_end_offset(proxy.address, TOPIC) == 1  # the write happened
    assert read_committed(proxy.address, TOPIC, 1)[0] == [(0, b"written-but-unacknowledged")]


def test_reset_cuts_a_request_in_the_middle_and_the_broker_goes_on(behind_proxy):
    broker, proxy = behind_proxy
    for n in range(3):  # three cuts at three random points of the frame
        c = RawClient(proxy.address)
        proxy.reset(1.0)
        send_produce(c, b"cut-%d" % n)
        with pytest.raises(ConnectionError):
            c.recv_frame()
        c.close()
    assert proxy.counts["reset"] == 3
    proxy.heal()
    # The broker saw part of a frame, then the end of the stream, three times: nothing appended,
    # and it still serves.
    assert log_end_offset(broker.bootstrap, TOPIC) == 0
    c = RawClient(proxy.address)
    assert produced_offset(c, send_produce(c, b"after")) == 0
    c.close()


def test_blackhole_to_broker_discards_requests_and_keeps_the_connection(behind_proxy):
    broker, proxy = behind_proxy
    c = RawClient(proxy.address)
    proxy.blackhole("to_broker")
    send_produce(c, b"never-arrives")
    wait_for("the Produce blackholed", lambda: proxy.counts["blackholed_to_broker"] == 1)
    assert not answered_within(c, 0.3)
    assert log_end_offset(broker.bootstrap, TOPIC) == 0  # straight to the broker: nothing arrived
    proxy.blackhole(None)
    # the same connection serves again (the lost request's answer never comes; the next one's does)
    assert list_offsets_latest(c, TOPIC) == 0
    assert produced_offset(c, send_produce(c, b"after")) == 0
    c.close()


def test_blackhole_to_client_discards_answers_of_processed_requests(behind_proxy):
    broker, proxy = behind_proxy
    c = RawClient(proxy.address)
    proxy.blackhole("to_client")
    send_produce(c, b"written-unheard")
    wait_for("the broker's append", lambda: log_end_offset(broker.bootstrap, TOPIC) == 1)
    wait_for("the answer blackholed", lambda: proxy.counts["blackholed_to_client"] == 1)
    assert not answered_within(c, 0.3)
    proxy.blackhole(None)
    assert list_offsets_latest(c, TOPIC) == 1
    c.close()


def test_blackhole_of_one_client_cuts_it_off_and_not_the_others(behind_proxy):
    """One client (by the client id its requests carry) is cut off from the broker one way; a
    client with another id, through the same proxy, goes on; after heal both write."""
    import confluent_kafka as ck

    broker, proxy = behind_proxy

    def producer(client_id: str):
        return ck.Producer({"bootstrap.servers": proxy.address, "client.id": client_id, "acks": "all",
                            "message.timeout.ms": 4000, "socket.timeout.ms": 2000})

    cut, free = producer("cut-off"), producer("free")
    for p in (cut, free):  # both connected (metadata) before the fault
        p.produce(TOPIC, b"warm-up")
        assert p.flush(15) == 0
    proxy.blackhole("to_broker", client_id="cut-off")
    delivered = {}

    def report(err, msg):
        delivered[msg.value()] = err

    cut.produce(TOPIC, b"from-cut", on_delivery=report)
    free.produce(TOPIC, b"from-free", on_delivery=report)
    free.flush(15)
    cut.flush(15)
    assert delivered[b"from-free"] is None
    assert delivered[b"from-cut"] is not None  # timed out: nothing of it reached the broker
    assert proxy.counts["blackholed_to_broker"] >= 1
    proxy.heal()
    cut.produce(TOPIC, b"after-heal", on_delivery=report)
    assert cut.flush(15) == 0 and delivered[b"after-heal"] is None
    assert log_end_offset(broker.bootstrap, TOPIC) == 4  # 2 warm-ups, from-free, after-heal


def test_hold_holds_one_connection_while_others_proceed(behind_proxy):
    broker, proxy = behind_proxy
    a, b = RawClient(proxy.address), RawClient(proxy.address)
    proxy.hold(PRODUCE)
    held = send_produce(a, b"held")
    proxy.wait_held(1)
    a.send_frame(a.encode(api_versions(a)))  # queued behind the held Produce on a
    assert produced_offset(b, send_produce(b, b"other connection")) == 0  # b proceeds
    assert not answered_within(a, 0.3)
    assert log_end_offset(broker.bootstrap, TOPIC) == 1
    assert proxy.release() == 1
    correlation_id, resp = decode_response(a.recv_frame(), type(held))
    assert correlation_id == 1 and resp.responses[0].partition_responses[0].base_offset == 1
    correlation_id, resp = decode_response(a.recv_frame(), type(api_versions(a)))
    assert correlation_id == 2 and int(resp.error_code) == 0
    assert (proxy.counts["held"], proxy.counts["released"], proxy.held) == (1, 1, 0)
    # the hold was for one request: the next Produce on a goes through
    assert produced_offset(a, send_produce(a, b"next")) == 2


def test_heal_turns_every_mode_off_and_releases_what_is_held(behind_proxy):
    broker, proxy = behind_proxy
    a = RawClient(proxy.address)
    proxy.hold(PRODUCE, count=3)
    held = send_produce(a, b"held")
    proxy.wait_held(1)
    proxy.delay(5.0)
    proxy.drop(0.5)
    proxy.reset(0.5)
    assert proxy.describe()["hold_remaining"] == 2
    proxy.heal()
    assert proxy.describe() == {"delay_s": 0.0, "delay_rate": 1.0, "delay_jitter": False, "drop_rate": 0.0,
                                "reset_rate": 0.0, "blackhole": None, "blackhole_client": None,
                                "hold_api_key": None, "hold_remaining": 0}
    assert produced_offset(a, held) == 0
    for n in range(20):  # pass-through: no fault at all
        assert produced_offset(a, send_produce(a, b"%d" % n)) == n + 1
    counts = proxy.counts
    assert (counts["delayed"], counts["dropped"], counts["reset"], counts["released"]) == (0, 0, 0, 1)


def test_a_frame_size_above_the_bound_cuts_the_connection(behind_proxy):
    broker, _ = behind_proxy
    with FaultProxy(broker.port, max_frame_bytes=1 << 20) as proxy:
        for size in (2 << 20, -5):
            with socket.create_connection(("127.0.0.1", proxy.listen_port), timeout=10) as s:
                s.sendall(struct.pack(">i", size) + b"\0" * 64)
                assert s.recv(1) == b""  # closed by the proxy without waiting for 2 MiB
        assert proxy.counts["refused_frames"] == 2
        c = RawClient(proxy.address)  # and it goes on proxying
        assert int(c.request(api_versions(c)).error_code) == 0
        c.close()


def test_mode_arguments_are_checked():
    proxy = FaultProxy()
    for bad in (lambda: proxy.blackhole("sideways"), lambda: proxy.drop(1.5), lambda: proxy.reset(-0.1),
                lambda: proxy.delay(-1), lambda: proxy.hold(PRODUCE, count=0), proxy.start):
        with pytest.raises(ValueError):
            bad()


# -------------------------------------------------------------------- clients recover


MODES = {
    # mode: (switch it on, the counter that shows it happened, how many of it to wait for)
    "delay": (lambda p: p.delay(0.2), "delayed", 30),
    "drop": (lambda p: p.drop(0.3), "dropped", 3),
    "reset": (lambda p: p.reset(0.3), "reset", 3),
    "blackhole_to_broker": (lambda p: p.blackhole("to_broker"), "blackholed_to_broker", 3),
    "blackhole_to_client": (lambda p: p.blackhole("to_client"), "blackholed_to_client", 3),
    "hold": (lambda p: p.hold(PRODUCE, count=2), "held", 2),
}
PARTITIONS = 3
TXNS = 12


@pytest.mark.parametrize("mode", list(MODES))
def test_transactional_clients_recover_after_heal_and_every_commit_is_read_once(broker_factory, mode):
    proxy = FaultProxy(seed=list(MODES).index(mode) + 1)
    broker = broker_factory(extra_args=["--advertise", proxy.address])
    proxy.upstream_port = broker.port
    with proxy:
        create_topic(proxy.address, "txns", PARTITIONS)
        writers = [ConfluentTxnWriter("ck", proxy.address, "txns", PARTITIONS, TXNS),
                   ProtocolTxnWriter("oc", proxy.address, "txns", PARTITIONS, TXNS)]
        for w in writers:
            w.start()
        wait_for("a first commit by each writer", lambda: all(w.outcomes.committed_txns or w.failure for w in writers), 60)
        switch_on, counter, needed = MODES[mode]
        connections = proxy.counts["connections"]
        switch_on(proxy)
        wait_for(f"{needed} {counter}", lambda: proxy.counts[counter] >= needed or not any(w.is_alive() for w in writers), 60)
        if mode == "hold":  # keep them held until a writer gave up on its connection and retried elsewhere
            wait_for("a reconnection", lambda: proxy.counts["connections"] > connections, 60)
        faults = proxy.counts
        proxy.heal()
        for w in writers:
            w.join(240)
            assert not w.is_alive(), f"{w.name} still running; errors: {w.outcomes.errors[-3:]}"
            assert w.failure is None, f"{w.name}: {w.failure!r}"
            assert w.outcomes.committed_txns == TXNS
        assert faults[counter] >= needed, faults
        totals = assert_exactly_once(writers, read_committed(proxy.address, "txns", PARTITIONS))
        print(f"{mode}: faults {faults}; values by outcome {totals}; "
              f"errors {[(w.name, len(w.outcomes.errors)) for w in writers]}")
