"""oncelog.testing's Broker and its faults, every verb, with real clients over TCP: an error a
client retries through, a lost answer the idempotent producer de-duplicates, a dropped request,
a delayed answer, the cadence (count, every), the filters (topic, versions), remove/clear, pause,
kill and restart of the process kind (faults over its control socket); plus, in process, the
error answers built for every API and version the broker serves, and the control socket's
decoder under hostile input."""

from __future__ import annotations

import json
import random
import socket
import time

import confluent_kafka as ck
import pytest
from hypothesis import given, settings, strategies as st
from kio.schema.errors import ErrorCode

from oncelog.apis import HANDLERS
from oncelog.protocol import codec
from oncelog.testing import Broker, ExternalKafka, NotSupported
from oncelog.testing._child import MAX_LINE, ControlServer
from oncelog.testing.answers import error_response
from oncelog.testing.faults import FaultSpec

from ..storage.test_response_writer import generate


@pytest.fixture(scope="module")
def broker():
    with Broker() as b:
        yield b


@pytest.fixture
def topic(broker, request):
    name = f"t-{request.node.name[:40]}-{random.randrange(1 << 30)}".replace("[", "-").replace("]", "")
    broker.create_topic(name, partitions=2)
    yield name
    broker.faults.clear()


def _producer(broker, **extra):
    return ck.Producer(broker.client_config(enable_idempotence=True, linger_ms=0, **extra))


def _values(broker, topic):
    return sorted(r.value for r in broker.read_committed(topic))


@pytest.mark.e2e
def test_an_error_is_answered_count_times_and_the_producer_retries_through_it(broker, topic):
    fault = broker.faults.add("Produce", error="NOT_LEADER_OR_FOLLOWER", count=2, topic=topic)
    p = _producer(broker)
    for i in range(5):
        p.produce(topic, b"v%d" % i, partition=0)
    assert p.flush(30) == 0
    assert fault.fired == 2 and not fault.live  # spent: it removed itself
    assert _values(broker, topic) == [b"v%d" % i for i in range(5)]


@pytest.mark.e2e
def test_a_non_retriable_error_reaches_the_client(broker, topic):
    broker.faults.add("Produce", error=ErrorCode.topic_authorization_failed.value, count=1, topic=topic)
    errors = []
    p = ck.Producer(broker.client_config(linger_ms=0, retries=0))
    p.produce(topic, b"x", partition=0, on_delivery=lambda err, msg: errors.append(err))
    p.flush(30)
    assert [e.code() for e in errors] == [ck.KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert _values(broker, topic) == []  # refused as a whole: nothing written


@pytest.mark.e2e
def test_a_lost_answer_is_retried_and_the_idempotent_producer_writes_once(broker, topic):
    fault = broker.faults.add("Produce", drop="response", count=1, topic=topic)
    p = _producer(broker)
    p.produce(topic, b"once", partition=1)
    assert p.flush(30) == 0 and fault.fired == 1
    assert _values(broker, topic) == [b"once"]


@pytest.mark.e2e
def test_a_lost_answer_duplicates_without_idempotence(broker, topic):
    # The same fault without the idempotent producer: the retry writes a second copy. This is
    # what the fault is for, and why the first test's single copy means something.
    broker.faults.add("Produce", drop="response", count=1, topic=topic)
    p = ck.Producer(broker.client_config(enable_idempotence=False, linger_ms=0, acks="all"))
    p.produce(topic, b"twice", partition=1)
    assert p.flush(30) == 0
    assert _values(broker, topic) == [b"twice", b"twice"]


@pytest.mark.e2e
def test_a_dropped_request_is_not_applied_and_the_retry_is(broker, topic):
    fault = broker.faults.add("Produce", drop="request", count=1, topic=topic)
    p = _producer(broker)
    p.produce(topic, b"a", partition=0)
    assert p.flush(30) == 0 and fault.fired == 1
    assert _values(broker, topic) == [b"a"]


@pytest.mark.e2e
def test_a_delay_holds_the_answer_and_every_fires_on_every_nth(broker, topic):
    from oncelog.client.kafka import KafkaClient

    fault = broker.faults.add("Metadata", delay=1.5, every=2, count=1, topic=topic)
    client = KafkaClient(broker.bootstrap_servers, client_id="delay-test", timeout=20)
    timings = []
    for _ in range(3):  # one Metadata request each, naming the topic
        t0 = time.monotonic()
        client.metadata([topic])
        timings.append(time.monotonic() - t0)
    client.close()
    assert fault.fired == 1 and not fault.live
    assert timings[0] < 1.0 and timings[1] >= 1.5 and timings[2] < 1.0  # the second was held 1.5 s, once


@pytest.mark.e2e
def test_the_topic_and_versions_filters_and_remove(broker, topic):
    other = broker.faults.add("Produce", error="NOT_LEADER_OR_FOLLOWER", topic=topic + "-other")
    old = broker.faults.add("Produce", error="NOT_LEADER_OR_FOLLOWER", versions=range(0, 3))
    p = _producer(broker)
    p.produce(topic, b"a", partition=0)
    assert p.flush(30) == 0
    assert other.fired == 0 and old.fired == 0  # another topic; librdkafka speaks Produce v7+
    forever = broker.faults.add("Produce", error="NOT_LEADER_OR_FOLLOWER", topic=topic)
    p.produce(topic, b"b", partition=0)
    assert p.flush(1.5) == 1  # still retrying
    assert forever.fired >= 1 and forever.live
    forever.remove()
    forever.remove()  # twice: harmless
    assert p.flush(30) == 0 and not forever.live
    assert _values(broker, topic) == [b"a", b"b"]


@pytest.mark.e2e
def test_errors_on_coordinator_apis_and_metadata(broker, topic):
    fc = broker.faults.add("FindCoordinator", error="COORDINATOR_NOT_AVAILABLE", count=2)
    p = ck.Producer(broker.client_config(transactional_id=f"tx-{topic}", linger_ms=0))
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"t", partition=0)
    p.commit_transaction(30)
    assert fc.fired == 2
    # commit_transaction returns at EndTxn's answer (PrepareCommit); the markers then complete it
    deadline = time.monotonic() + 20
    while True:
        [txn] = [t for t in broker.transactions() if t.transactional_id == f"tx-{topic}"]
        if txn.state == "CompleteCommit" or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert txn.state == "CompleteCommit"
    md = broker.faults.add("Metadata", error="UNKNOWN_TOPIC_OR_PARTITION", topic=topic, count=1)
    assert _values(broker, topic) == [b"t"]  # the reader's first Metadata is refused, it asks again
    assert md.fired == 1


@pytest.mark.e2e
def test_pause_freezes_the_broker_for_a_while():
    with Broker() as b:
        b.create_topic("p")
        c = ck.Consumer(b.client_config(group_id="unused"))
        b.pause(1.0)
        t0 = time.monotonic()
        c.get_watermark_offsets(ck.TopicPartition("p", 0), timeout=20, cached=False)
        assert time.monotonic() - t0 >= 0.7
        c.close()


@pytest.mark.e2e
def test_the_process_kind_kill_restart_pause_and_faults_over_its_control_socket():
    with Broker(kind="process", fsync="always") as b:
        port = b.port
        b.create_topic("k", partitions=1)
        fault = b.faults.add("Produce", error="NOT_LEADER_OR_FOLLOWER", count=1)
        p = _producer(b)
        for i in range(3):
            p.produce("k", b"%d" % i, partition=0)
        assert p.flush(30) == 0 and fault.fired == 1 and not fault.live
        b.kill()  # SIGKILL: acknowledged records were fsynced (fsync always)
        assert fault.fired == 0 or True  # the process that counted it is gone: no error either way
        b.restart()
        assert b.port == port  # the same address after a restart
        assert _values(b, "k") == [b"0", b"1", b"2"]
        b.pause(1.0)
        c = ck.Consumer(b.client_config(group_id="unused"))
        t0 = time.monotonic()
        c.get_watermark_offsets(ck.TopicPartition("k", 0), timeout=20, cached=False)
        assert time.monotonic() - t0 >= 0.7
        c.close()
        b.faults.add("Produce", drop="request", count=1)
        p.produce("k", b"3", partition=0)
        assert p.flush(30) == 0
        assert _values(b, "k") == [b"0", b"1", b"2", b"3"]


@pytest.mark.e2e
def test_what_a_kind_cannot_do_says_so():
    with Broker() as b:
        with pytest.raises(NotSupported, match="kind='process'"):
            b.kill()
    external = ExternalKafka("127.0.0.1:1")
    with pytest.raises(NotSupported, match="embedded broker"):
        external.faults.add("Produce", error="NOT_LEADER_OR_FOLLOWER")
    with pytest.raises(NotSupported):
        external.kill()


def test_bad_fault_specs_are_refused_with_the_reason():
    for kwargs, words in (({"error": "NO_SUCH_ERROR"}, "not a Kafka error name"), ({}, "exactly one"),
                          ({"error": 6, "delay": 1}, "exactly one"), ({"drop": "both"}, "drop must be"),
                          ({"error": 6, "count": -1}, "count must"), ({"error": 6, "versions": range(3, 3)}, "range")):
        with pytest.raises(ValueError, match=words):
            FaultSpec.make("Produce", **kwargs)
    with pytest.raises(ValueError, match="not an API oncelog serves"):
        FaultSpec.make("Produse", error=6)
    assert FaultSpec.make("find_coordinator", error="coordinator_not_available").api_key == 10
    assert FaultSpec.make(0, delay=0).to_json()["api_key"] == 0


def test_an_error_answer_is_built_for_every_api_and_version_the_broker_serves():
    # Kafka's getErrorResponse, one per request class; here from the schemas: every request
    # shape (generated: empty, null and filled arrays) gets an answer that encodes, and the
    # error reaches each entry the request named.
    rng = random.Random(7)
    for key, module in HANDLERS.items():
        for version in range(module.MIN_VERSION, module.MAX_VERSION + 1):
            for _ in range(8):
                request = generate(codec.request_class(key, version), rng)
                response = error_response(key, version, request, ErrorCode.not_leader_or_follower)
                assert b"".join(codec.encode_response(1, response))
    request = generate(codec.request_class(0, 9), random.Random(3))
    response = error_response(0, 9, request, ErrorCode.not_leader_or_follower)
    asked = [(t.name, p.index) for t in request.topic_data for p in t.partition_data]
    answered = [(t.name, p.index, p.error_code) for t in response.responses for p in t.partition_responses]
    assert answered == [(n, i, ErrorCode.not_leader_or_follower) for n, i in asked] and asked


class _FakeBroker:
    def control(self, api_key, fn, count):
        from oncelog.faults import Faults

        return Faults().control(api_key, fn, count)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=200),
                 st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                              lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=6),
                              max_leaves=20).map(lambda v: json.dumps(v).encode()),
                 st.fixed_dictionaries({"op": st.sampled_from(["add", "fired", "remove", "clear", "x"]),
                                        "spec": st.dictionaries(st.sampled_from(["api_key", "error", "delay", "drop", "count",
                                                                                 "every", "topic", "min_version", "max_version"]),
                                                                st.none() | st.integers(-5, 100) | st.text(max_size=5) | st.floats()),
                                        "id": st.integers()}).map(lambda v: json.dumps(v).encode())))
def test_the_control_socket_answers_any_line_with_a_verdict(line):
    answer = ControlServer(_FakeBroker()).answer(line)
    assert isinstance(answer, dict) and answer["ok"] in (True, False)
    json.dumps(answer)


@pytest.mark.e2e
def test_the_control_socket_closes_on_an_oversized_line_and_survives_garbage():
    with Broker(kind="process") as b:
        path = b._control.sock.getpeername()
        s = socket.socket(socket.AF_UNIX)
        s.connect(path)
        s.sendall(b"\xff\x00garbage\n")
        assert json.loads(s.makefile("rb").readline())["ok"] is False
        s.sendall(b"x" * (MAX_LINE + 10) + b"\n")
        s.settimeout(10)
        rest = s.recv(100)
        while rest and b"\n" in rest:  # an answer to a part, if any, then the close
            rest = s.recv(100)
        assert rest == b""
        s.close()
        b.create_topic("still-up")  # the broker and its own control connection are unharmed
        assert b.faults.add("Produce", error=6, count=1).live


@pytest.mark.e2e
def test_groups_and_audit_helpers_see_what_clients_did(broker, topic):
    p = ck.Producer(broker.client_config(linger_ms=0))
    for i in range(4):
        p.produce(topic, b"%d" % i, partition=i % 2)
    p.flush(30)
    group = f"g-{topic}"
    c = ck.Consumer(broker.client_config(group_id=group, auto_offset_reset="earliest"))
    c.subscribe([topic])
    got, deadline = [], time.monotonic() + 30
    while len(got) < 4 and time.monotonic() < deadline:
        got += [m for m in c.consume(10, 0.5) if m.error() is None]
    [g] = [g for g in broker.groups() if g.group_id == group]
    assert (g.state, g.members) == ("Stable", 1)
    # an "output" topic naming each input by the auditor's header: every input exactly once
    out = f"{topic}-out"
    broker.create_topic(out)
    for m in got:
        p.produce(out, m.value(), headers=[("oncelog.source", f"{m.topic()}:{m.partition()}:{m.offset()}".encode())])
    p.flush(30)
    c.close()
    result = broker.audit(topic, out)
    assert (result.lost, result.duplicated, result.aborted_reads, result.phantom) == (0, 0, 0, 0)
    p.produce(out, got[0].value(), headers=[("oncelog.source", f"{got[0].topic()}:{got[0].partition()}:{got[0].offset()}".encode())])
    p.flush(30)
    assert broker.audit(topic, out).duplicated == 1


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=200),
                 st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                              lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                              max_leaves=20).map(lambda v: json.dumps(v).encode()),
                 st.fixed_dictionaries({"argv": st.lists(st.text(max_size=10), max_size=4),
                                        "env": st.dictionaries(st.text(max_size=6), st.text(max_size=6), max_size=3),
                                        "log": st.text(max_size=20)}).map(lambda v: json.dumps(v).encode())))
def test_the_fork_servers_request_decoder_accepts_requests_and_refuses_the_rest_with_a_reason(line):
    from oncelog.testing._zygote import parse_request

    try:
        argv, env, log = parse_request(line)
    except ValueError as exc:
        assert str(exc)
        return
    assert all(isinstance(a, str) and "\0" not in a for a in argv) and isinstance(log, str) and log
    assert all(k and "=" not in k for k in env)
