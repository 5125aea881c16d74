"""The session attack matrix: every API the broker serves, sent in every state of a
connection's security session, on every kind of listener, with every SASL mechanism and both
SaslHandshake framings, against one real broker process — and the outcome Apache Kafka 4.4 gives.

Axes:

- listener: PLAINTEXT (loopback), SSL, SSL with ``ssl.client.auth=required`` (mTLS),
  SASL_PLAINTEXT, SASL_SSL;
- on the SASL listeners, the mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, unsecured
  OAUTHBEARER) and the framing (SaslHandshake v0 and raw tokens, v1 and SaslAuthenticate);
- the session state the request arrives in: ``before`` (a new connection), ``during`` (after
  SaslHandshake, before the final token: SCRAM's client-first was answered), ``after``
  (authenticated), ``reauth`` (authenticated, then a second SaslHandshake started a KIP-368
  re-authentication), ``expired`` (past ``connections.max.reauth.ms`` without re-authenticating);
  PLAINTEXT and SSL listeners are authenticated from the start (``after`` only);
- the request: every API key the broker's ApiVersions answer lists, at its highest version, with
  a minimal valid body (:func:`minimal`, from kio's request classes) — except five that change
  state (Produce, CreateTopics, InitProducerId, OffsetCommit, AlterUserScramCredentials), which
  name something of their own cell (a record, a topic, a transactional id, a group, a SCRAM
  user), so that :func:`test_refused_requests_change_nothing` can check through an
  authenticated admin connection afterwards that exactly the served ones left a trace.

What Kafka 4.4 does (SaslServerAuthenticator, KafkaChannel, SocketServer, KafkaApis; see
:func:`expected`):

- before authentication, only ApiVersions and SaslHandshake are answered; anything else —
  SaslAuthenticate too — closes the connection without an answer;
- while an exchange (or a re-authentication) is under way with SaslAuthenticate framing, only
  SaslAuthenticate is served; any other request is answered with its error response carrying
  ILLEGAL_SASL_STATE and the connection is closed (oncelog answers so SaslHandshake and
  ApiVersions, and closes on the others without that answer: the cell accepts either); with raw
  tokens (handshake v0) every frame is a token, so a request is a bad token: closed, no answer;
- authenticated, everything is answered (authorization is tests/apis/test_authorization_matrix.py);
  SaslAuthenticate is answered ILLEGAL_SASL_STATE and the connection stays open; SaslHandshake
  begins a re-authentication when the session has a lifetime (here it has), and is answered
  ILLEGAL_SASL_STATE otherwise (:func:`test_no_reauthentication_without_a_session_lifetime`) or
  within a second of the previous re-authentication's start (:func:`test_reauthentication_at_most_once_a_second`);
- past the session's lifetime, only SaslHandshake (a re-authentication) is served; anything
  else — ApiVersions and SaslAuthenticate too — closes the connection without an answer.

These expectations were checked by running this module's :func:`run_matrix` against a one-node
Apache Kafka 4.4 (a SASL_PLAINTEXT listener with the four mechanisms, both framings, the same
connections.max.reauth.ms; oncelog.tools.apache_kafka.KafkaCluster): every cell but ``after`` came out
as :func:`expected` says (in ``after``, Kafka's transaction coordinator leaves the minimal
AddPartitionsToTxn v5 unanswered longer than the pipelined sweep waits: a handler's matter, not
the session's), and so did the separate tests below, the xfail one included.

The whole matrix runs once, concurrently, in the module fixture :func:`matrix`; the tests read
their slice of it. Each cell opens its own connection (a refused request closes it), except
``after``, where the requests are pipelined on one authenticated connection.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import datetime
import os
import socket
import ssl
import struct
import time
import types
import typing
import uuid
from dataclasses import dataclass

import pytest
from kio.schema.errors import ErrorCode

from oncelog.client.security import oauth_client_first, unsecured_jws
from oncelog.client.wire import RawClient, decode_response, request_module
from oncelog.process import BrokerProcess
from oncelog.protocol import codec
from oncelog.protocol import records as rb

from ..helpers import free_port

trustme = pytest.importorskip("trustme")
scramp = pytest.importorskip("scramp")

pytestmark = pytest.mark.e2e

E = ErrorCode
USER, PASSWORD = "alice", "alice-secret"
LIFETIME_MS = 4000  # connections.max.reauth.ms
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
SASL_LISTENERS = ("SASL_PLAINTEXT", "SASL_SSL")
PLAIN_LISTENERS = ("PLAINTEXT", "SSL", "MTLS")  # MTLS: SSL with ssl.client.auth=required
STATES = ("before", "during", "after", "reauth", "expired")
VICTIM = "victim"  # the topic Produce writes to
API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
PRODUCE, OFFSET_COMMIT, CREATE_TOPICS, INIT_PRODUCER_ID, ALTER_SCRAM = 0, 8, 19, 22, 51
MUTATING = (PRODUCE, OFFSET_COMMIT, CREATE_TOPICS, INIT_PRODUCER_ID, ALTER_SCRAM)
SECONDS = datetime.timedelta(seconds=5)
WORKERS = 12
JAAS_PLAIN = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
JAAS_OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"


# ---------------------------------------------------------------------- minimal requests


def minimal(cls, **values):
    """An instance of kio's request (or nested entity) class ``cls``: ``values``, each field's
    default, and for the others the smallest valid value (None where nullable, an empty array,
    0, False, "", b"", a zero duration; a nested entity, minimal itself)."""
    for f in dataclasses.fields(cls):
        if f.name in values or f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
            continue
        values[f.name] = _zero(f.type, f.metadata.get("kafka_type"))
    return cls(**values)


def _zero(tp, kafka_type):
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        return None  # kio's unions are all "X | None"
    if typing.get_origin(tp) is tuple:
        return ()
    if dataclasses.is_dataclass(tp):
        return minimal(tp)
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(0)
    if kafka_type == "uuid":
        return uuid.UUID(int=0)
    if kafka_type == "bool":
        return False
    if kafka_type == "string":
        return ""
    if kafka_type in ("bytes", "records"):
        return b""
    if kafka_type == "float64":
        return 0.0
    if kafka_type and (kafka_type.startswith("int") or kafka_type.startswith("uint")):
        return 0
    raise TypeError(f"no minimal value for {tp} ({kafka_type})")


def _known(cls, **values):
    """``minimal(cls, ...)`` with only the values ``cls`` has a field for (versions differ)."""
    names = {f.name for f in dataclasses.fields(cls)}
    return minimal(cls, **{k: v for k, v in values.items() if k in names})


def cell_name(cell: tuple) -> str:
    """A name for the state a cell's request would create (topic-name safe, unique per cell)."""
    return "atk." + ".".join(str(x).lower().replace("_", "-") for x in cell if x is not None)


def request_for(key: int, version: int, cell: tuple, mechanism: str, victim_id: uuid.UUID):
    """The request a cell sends: a minimal one, except what must be valid to be answered at all
    (ApiVersions names its client, SaslHandshake the cell's mechanism, Produce asks for an
    answer) and the five that create something named after the cell."""
    cls = codec.request_class(key, version)
    m = request_module(key, version)
    name = cell_name(cell)
    if key == PRODUCE:
        batch = rb.build_batch([(None, name.encode())], timestamp_ms=int(time.time() * 1000))
        return minimal(cls, acks=-1, timeout=SECONDS, topic_data=(_known(
            m.TopicProduceData, name=VICTIM, topic_id=victim_id,
            partition_data=(minimal(m.PartitionProduceData, index=0, records=batch),)),))
    if key == API_VERSIONS:
        return _known(cls, client_software_name="oncelog-matrix", client_software_version="1.0")
    if key == SASL_HANDSHAKE:
        return minimal(cls, mechanism=mechanism or "PLAIN")
    if key == CREATE_TOPICS:
        return minimal(cls, timeout=SECONDS, topics=(minimal(m.CreatableTopic, name=name, num_partitions=1,
                                                             replication_factor=1),))
    if key == INIT_PRODUCER_ID:
        return minimal(cls, transactional_id=name, transaction_timeout=datetime.timedelta(seconds=60))
    if key == OFFSET_COMMIT:
        return minimal(cls, group_id=name, topics=(_known(
            m.OffsetCommitRequestTopic, name=VICTIM, topic_id=victim_id,
            partitions=(_known(m.OffsetCommitRequestPartition, partition_index=0, committed_offset=0,
                               committed_leader_epoch=-1, committed_metadata=""),)),))
    if key == ALTER_SCRAM:
        return minimal(cls, upsertions=(minimal(m.ScramCredentialUpsertion, name=name, mechanism=1, iterations=4096,
                                                salt=b"attack-salt", salted_password=bytes(32)),))
    return minimal(cls)


# ---------------------------------------------------------------------- connections and SASL


@dataclass
class Target:
    """A broker under test: per listener kind its port and TLS client context, the versions to
    send (API key -> highest version both the broker and kio know), the session lifetime."""

    ports: dict[str, int]
    contexts: dict[str, ssl.SSLContext | None]
    versions: dict[int, int]
    lifetime_ms: int
    victim_id: uuid.UUID = uuid.UUID(int=0)
    admin_listener: str = "PLAINTEXT"

    def connect(self, listener: str) -> RawClient:
        sock = socket.create_connection(("127.0.0.1", self.ports[listener]), timeout=10)
        context = self.contexts.get(listener)
        if context is not None:
            sock = context.wrap_socket(sock, server_hostname="127.0.0.1")
        c = RawClient.__new__(RawClient)
        c.sock, c.correlation_id = sock, 0
        return c


def _client_tokens(mechanism: str):
    """The client's SASL tokens, a generator: send it each server token."""
    if mechanism == "PLAIN":
        yield f"\0{USER}\0{PASSWORD}".encode()
    elif mechanism.startswith("SCRAM-"):
        client = scramp.ScramClient([mechanism], USER, PASSWORD)
        server_first = yield client.get_client_first().encode()
        client.set_server_first(server_first.decode())
        server_final = yield client.get_client_final().encode()
        client.set_server_final(server_final.decode())
    else:
        token = unsecured_jws({"unsecuredLoginStringClaim_sub": USER, "unsecuredLoginLifetimeSeconds": "3600"})
        yield oauth_client_first(token, {})


TOKENS = {"PLAIN": 1, "SCRAM-SHA-256": 2, "SCRAM-SHA-512": 2, "OAUTHBEARER": 1}


def handshake(target: Target, c: RawClient, mechanism: str, hs: int) -> None:
    answer = c.request(request_module(SASL_HANDSHAKE, hs).SaslHandshakeRequest(mechanism=mechanism))
    assert answer.error_code == E.none, f"SaslHandshake v{hs} {mechanism}: {answer.error_code!r}"


def exchange(target: Target, c: RawClient, mechanism: str, hs: int, tokens: int | None = None) -> None:
    """Send the mechanism's client tokens (the first ``tokens`` of them; all by default) as raw
    frames (hs 0) or SaslAuthenticate requests (hs 1), each answered without an error."""
    m = request_module(SASL_AUTHENTICATE, target.versions[SASL_AUTHENTICATE])
    gen = _client_tokens(mechanism)
    token = next(gen)
    for _ in range(TOKENS[mechanism] if tokens is None else tokens):
        if hs == 0:
            c.send_frame(token)
            server = c.recv_frame()
        else:
            answer = c.request(m.SaslAuthenticateRequest(auth_bytes=token))
            assert answer.error_code == E.none, f"{mechanism}: {answer.error_code!r} {answer.error_message}"
            server = bytes(answer.auth_bytes)
        try:
            token = gen.send(server)
        except StopIteration:
            break


def login(target: Target, c: RawClient, mechanism: str, hs: int) -> float:
    """Authenticate; returns when (time.monotonic) the broker had answered the last token."""
    handshake(target, c, mechanism, hs)
    exchange(target, c, mechanism, hs)
    return time.monotonic()


# ---------------------------------------------------------------------- outcomes


@dataclass(frozen=True)
class Outcome:
    answered: bool
    codes: frozenset = frozenset()  # error code names in the answer, at any depth
    closed: bool = False
    detail: str = ""

    def __str__(self) -> str:
        if not self.answered:
            return "closed without an answer" if self.closed else f"no answer, still open ({self.detail})"
        what = f"answered {{{', '.join(sorted(self.codes))}}}"
        what += ", then closed" if self.closed else ", still open"
        return what + (f" ({self.detail})" if self.detail else "")


def codes_of(resp) -> frozenset:
    found = set()

    def walk(x):
        if dataclasses.is_dataclass(x):
            for f in dataclasses.fields(x):
                v = getattr(x, f.name)
                if f.name.endswith("error_code") and v is not None:
                    found.add(ErrorCode(v).name)
                else:
                    walk(v)
        elif isinstance(x, tuple):
            for item in x:
                walk(item)

    walk(resp)
    return frozenset(found)


def read_answer(c: RawClient, request) -> Outcome | object:
    """The decoded answer to ``request`` (sent last), or an Outcome when there is none."""
    try:
        raw = c.recv_frame()
    except (ConnectionError, OSError) as exc:
        if isinstance(exc, socket.timeout):
            return Outcome(False, closed=False, detail="no answer within 10 s")
        return Outcome(False, closed=True)
    try:
        correlation_id, resp = decode_response(raw, type(request))
    except Exception as exc:
        return Outcome(True, frozenset({"UNDECODABLE"}), c.is_closed(2.0), f"{len(raw)}-byte frame: {exc!r}")
    if correlation_id != c.correlation_id:
        return Outcome(True, frozenset({"WRONG_CORRELATION_ID"}), c.is_closed(2.0))
    return resp


def probe(target: Target, c: RawClient, request, *, then=None) -> Outcome:
    """Send ``request`` and classify what happens. An answered connection is then either shown
    to be closed (``then`` None: EOF within 2 s) or shown to go on (``then(c)``, a follow-up that
    must succeed)."""
    try:
        c.send_frame(c.encode(request))
    except OSError:
        return Outcome(False, closed=True, detail="closed before the request was sent")
    resp = read_answer(c, request)
    if isinstance(resp, Outcome):
        return resp
    codes = codes_of(resp)
    if then is None:
        return Outcome(True, codes, c.is_closed(2.0))
    try:
        then(c)
    except Exception as exc:
        return Outcome(True, codes, True, f"the follow-up failed: {exc!r}")
    return Outcome(True, codes, False)


def api_versions_ok(target: Target):
    def check(c):
        answer = c.request(request_for(API_VERSIONS, target.versions[API_VERSIONS], (), "", target.victim_id))
        assert answer.error_code == E.none, answer.error_code
    return check


# ---------------------------------------------------------------------- Kafka's answers


@dataclass(frozen=True)
class Expect:
    answered: bool | None  # None: an answer is optional
    codes: frozenset | None  # the answer's error codes (None: any)
    closed: bool
    subset: bool = False  # the answer's codes are some of ``codes`` (an empty array has none)

    def matches(self, o: Outcome) -> bool:
        if o.closed != self.closed or (self.answered is not None and o.answered != self.answered):
            return False
        if not o.answered or self.codes is None:
            return True
        return o.codes <= self.codes if self.subset else o.codes == self.codes

    def __str__(self) -> str:
        codes = "any error codes" if self.codes is None else "{" + ", ".join(sorted(self.codes)) + "}"
        if not self.closed:
            return f"answered ({codes}), still open"
        if self.answered is False:
            return "closed without an answer"
        if self.subset:
            codes = f"some of {codes}"
        return f"answered {codes}, then closed" if self.answered else f"closed (an answer, if any: {codes})"


def _codes(*codes: ErrorCode) -> frozenset:
    return frozenset(c.name for c in codes)


SERVED = Expect(True, None, False)
REFUSED = Expect(False, None, True)
ILLEGAL_OPEN = Expect(True, _codes(E.illegal_sasl_state), False)
ILLEGAL_CLOSED = Expect(True, _codes(E.illegal_sasl_state), True)
NONE_OPEN = Expect(True, _codes(E.none), False)


def expected(listener: str, state: str, key: int, hs: int | None) -> Expect:
    """What Apache Kafka 4.4 does with request ``key`` in session ``state``."""
    if listener in PLAIN_LISTENERS:
        return ILLEGAL_OPEN if key in (SASL_HANDSHAKE, SASL_AUTHENTICATE) else SERVED  # KafkaApis
    if state == "before":  # SaslServerAuthenticator.handleKafkaRequest
        return NONE_OPEN if key in (API_VERSIONS, SASL_HANDSHAKE) else REFUSED
    if state in ("during", "reauth"):
        if hs == 0:
            return REFUSED  # the frame is taken as the next token: an invalid one
        if key == SASL_AUTHENTICATE:  # an empty token
            return Expect(True, _codes(E.sasl_authentication_failed), True)
        if key in (SASL_HANDSHAKE, API_VERSIONS):
            return ILLEGAL_CLOSED
        # handleSaslToken: the request's error response (ILLEGAL_SASL_STATE), then closed;
        # oncelog closes without the answer.
        return Expect(None, _codes(E.illegal_sasl_state, E.none), True, subset=True)
    if state == "after":
        if key == SASL_AUTHENTICATE:
            return ILLEGAL_OPEN  # KafkaApis.handleSaslAuthenticateRequest
        if key == SASL_HANDSHAKE:
            return NONE_OPEN  # KafkaChannel.maybeBeginServerReauthentication: the session has a lifetime
        return SERVED
    assert state == "expired"  # SocketServer: only a re-authentication, else closed
    return NONE_OPEN if key == SASL_HANDSHAKE else REFUSED


# ---------------------------------------------------------------------- running the matrix


@dataclass(frozen=True)
class Combo:
    listener: str
    mechanism: str | None = None
    hs: int | None = None

    @property
    def id(self) -> str:
        return self.listener if self.mechanism is None else f"{self.listener}-{self.mechanism}-v{self.hs}"


def combos(listeners=PLAIN_LISTENERS + SASL_LISTENERS, mechanisms=MECHANISMS) -> list[Combo]:
    out = [Combo(x) for x in listeners if x in PLAIN_LISTENERS]
    out += [Combo(x, m, hs) for x in listeners if x in SASL_LISTENERS for m in mechanisms for hs in (0, 1)]
    return out


def _states(combo: Combo) -> tuple[str, ...]:
    return STATES if combo.mechanism else ("after",)


def _open_in_state(target: Target, combo: Combo, state: str) -> tuple[RawClient, float]:
    """A new connection brought to ``state`` (``expired``: authenticated; the caller waits)."""
    c = target.connect(combo.listener)
    try:
        authenticated = 0.0
        if state == "during":
            handshake(target, c, combo.mechanism, combo.hs)
            exchange(target, c, combo.mechanism, combo.hs, TOKENS[combo.mechanism] - 1)
        elif state in ("after", "reauth", "expired") and combo.mechanism:
            authenticated = login(target, c, combo.mechanism, combo.hs)
            if state == "reauth":
                handshake(target, c, combo.mechanism, combo.hs)
        return c, authenticated
    except BaseException:
        c.close()
        raise


def _follow_up(target: Target, combo: Combo, state: str, key: int):
    """How an answered request that must leave the connection open is shown to have done so."""
    if combo.mechanism is None or (state == "after" and key != SASL_HANDSHAKE):
        return api_versions_ok(target)
    if key == API_VERSIONS:  # before: the exchange may go on
        return lambda c: login(target, c, combo.mechanism, 1)

    def authenticate_then_api_versions(c):  # SaslHandshake (v1) was answered: the exchange follows
        exchange(target, c, combo.mechanism, 1)
        api_versions_ok(target)(c)
    return authenticate_then_api_versions


def _probe_cell(target: Target, combo: Combo, state: str, key: int, c: RawClient | None = None) -> Outcome:
    try:
        if c is None:
            c, _ = _open_in_state(target, combo, state)
    except Exception as exc:
        return Outcome(False, detail=f"could not reach the state: {exc!r}")
    try:
        request = request_for(key, target.versions[key], (combo.id, state, key), combo.mechanism, target.victim_id)
        exp = expected(combo.listener, state, key, combo.hs)
        return probe(target, c, request, then=None if exp.closed else _follow_up(target, combo, state, key))
    finally:
        c.close()


def _sweep(target: Target, combo: Combo) -> dict[int, Outcome]:
    """``after``: every request but SaslHandshake and SaslAuthenticate (each probed on a
    connection of its own: the handshake begins a re-authentication) pipelined on one
    authenticated connection, then an ApiVersions that must be answered. A request that closes
    the connection is the first without an answer (the broker answers in order)."""
    keys = [k for k in sorted(target.versions) if k not in (SASL_HANDSHAKE, SASL_AUTHENTICATE)]
    c = target.connect(combo.listener)
    out: dict[int, Outcome] = {}
    try:
        if combo.mechanism:
            login(target, c, combo.mechanism, combo.hs)
        sent = []
        for key in keys:
            request = request_for(key, target.versions[key], (combo.id, "after", key), combo.mechanism,
                                  target.victim_id)
            c.send_frame(c.encode(request))
            sent.append((key, request, c.correlation_id))
        for key, request, correlation_id in sent:
            c.correlation_id = correlation_id
            resp = read_answer(c, request)
            if isinstance(resp, Outcome):
                out[key] = resp
                break
            out[key] = Outcome(True, codes_of(resp), False)
        else:
            try:
                api_versions_ok(target)(c)
            except Exception as exc:
                last = keys[-1]
                out[last] = dataclasses.replace(out[last], closed=True, detail=f"then: {exc!r}")
        for key in keys:
            out.setdefault(key, Outcome(False, closed=True, detail="not answered: the connection closed before"))
    finally:
        c.close()
    for key in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
        out[key] = _probe_cell(target, combo, "after", key)
    return out


def run_matrix(target: Target, all_combos: list[Combo]) -> dict[tuple, Outcome]:
    """Every cell's outcome, keyed (combo id, state, api key)."""
    results: dict[tuple, Outcome] = {}
    keys = sorted(target.versions)
    with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
        # 1. Connections for ``expired``, authenticated first: their lifetime runs meanwhile.
        expiring = {(combo, key): pool.submit(_open_in_state, target, combo, "expired")
                    for combo in all_combos if "expired" in _states(combo) for key in keys}
        # 2. The cells on a connection of their own.
        futures = {(combo.id, state, key): pool.submit(_probe_cell, target, combo, state, key)
                   for combo in all_combos for state in _states(combo) if state not in ("after", "expired")
                   for key in keys}
        for cell, f in futures.items():
            results[cell] = f.result()
        # 3. ``after``, one pipelined connection per combo, with nothing else going on (the
        #    session must not expire during the sweep).
        for combo in all_combos:
            for key, outcome in _sweep(target, combo).items():
                results[(combo.id, "after", key)] = outcome
        # 4. ``expired``: once every session is past its lifetime.
        opened = {}
        for (combo, key), f in expiring.items():
            try:
                opened[(combo, key)] = f.result()
            except Exception as exc:
                results[(combo.id, "expired", key)] = Outcome(False, detail=f"could not authenticate: {exc!r}")
        if opened:
            wake = max(t for _, t in opened.values()) + target.lifetime_ms / 1000 + 0.3
            time.sleep(max(0.0, wake - time.monotonic()))
        futures = {(combo.id, "expired", key): pool.submit(_probe_cell, target, combo, "expired", key, c)
                   for (combo, key), (c, _) in opened.items()}
        for cell, f in futures.items():
            results[cell] = f.result()
    return results


def mismatches(target: Target, results: dict[tuple, Outcome], combo: Combo, states=None) -> list[str]:
    bad = []
    for state in states or _states(combo):
        for key in sorted(target.versions):
            outcome = results[(combo.id, state, key)]
            exp = expected(combo.listener, state, key, combo.hs)
            if not exp.matches(outcome):
                bad.append(f"{combo.id} {state} {_api_name(key)}(key {key}) v{target.versions[key]}: "
                           f"{outcome}; Kafka: {exp}")
    return bad


def _api_name(key: int) -> str:
    from kio.schema.index import api_key_map

    return str(api_key_map.get(key, key)).rpartition(".")[2]


# ---------------------------------------------------------------------- the broker


def _tls_context(ca: str, client_cert: str | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=ca)
    if client_cert:
        context.load_cert_chain(client_cert)
    return context


def _api_versions(target: Target) -> dict[int, int]:
    """API key -> the highest version both the broker's ApiVersions answer and kio know."""
    c = target.connect(target.admin_listener)
    try:
        answer = c.request(request_module(API_VERSIONS, 3).ApiVersionsRequest(
            client_software_name="oncelog-matrix", client_software_version="1.0"))
    finally:
        c.close()
    versions = {}
    for k in answer.api_keys:
        for v in range(k.max_version, k.min_version - 1, -1):
            try:
                codec.request_class(k.api_key, v)
            except Exception:
                continue
            versions[k.api_key] = v
            break
    return versions


def _admin_setup(target: Target) -> None:
    """The victim topic, alice's SCRAM credentials; the victim's topic id."""
    c = target.connect(target.admin_listener)
    try:
        m = request_module(CREATE_TOPICS, 7)
        answer = c.request(m.CreateTopicsRequest(topics=(m.CreatableTopic(
            name=VICTIM, num_partitions=1, replication_factor=1, assignments=(), configs=()),), timeout=SECONDS,
            validate_only=False))
        assert answer.topics[0].error_code in (E.none, E.topic_already_exists), answer
        from oncelog.security.scram import salted_password

        m = request_module(ALTER_SCRAM, 0)
        for mech in (1, 2):  # SCRAM-SHA-256, SCRAM-SHA-512 (one request each: one change per user)
            salt = os.urandom(16)
            answer = c.request(m.AlterUserScramCredentialsRequest(deletions=(), upsertions=(
                m.ScramCredentialUpsertion(name=USER, mechanism=mech, iterations=4096, salt=salt,
                                           salted_password=salted_password(mech, PASSWORD, salt, 4096)),)))
            assert all(r.error_code == E.none for r in answer.results), answer
        m = request_module(3, 12)
        meta = c.request(m.MetadataRequest(topics=(m.MetadataRequestTopic(topic_id=None, name=VICTIM),),
                                           allow_auto_topic_creation=False, include_topic_authorized_operations=False))
        target.victim_id = meta.topics[0].topic_id
    finally:
        c.close()


class Certs:
    def __init__(self, d: str) -> None:
        ca = trustme.CA()
        self.ca = os.path.join(d, "ca.pem")
        ca.cert_pem.write_to_path(self.ca)
        self.broker = os.path.join(d, "broker.pem")
        ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(self.broker)
        self.client = os.path.join(d, "client.pem")
        ca.issue_cert("client.example.com", common_name="alice").private_key_and_cert_chain_pem.write_to_path(
            self.client)


def start_broker(d: str, certs: Certs, *, lifetime_ms: int | None, listeners=PLAIN_LISTENERS + SASL_LISTENERS
                 ) -> tuple[BrokerProcess, Target]:
    ports = {x: free_port() for x in listeners}
    names = {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL", "MTLS": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT",
             "SASL_SSL": "SASL_SSL"}
    args = ["--override", "listeners=" + ",".join(f"{x}://127.0.0.1:{p}" for x, p in ports.items()),
            "--override", "listener.security.protocol.map=" + ",".join(f"{x}:{names[x]}" for x in ports),
            "--override", f"ssl.keystore.location={certs.broker}",
            "--override", "max.connections=5000"]
    if "MTLS" in ports:
        args += ["--override", "listener.name.mtls.ssl.client.auth=required",
                 "--override", f"listener.name.mtls.ssl.truststore.location={certs.ca}"]
    if lifetime_ms:
        args += ["--override", f"connections.max.reauth.ms={lifetime_ms}"]
    for x in ports:
        if x in SASL_LISTENERS:
            prefix = f"listener.name.{x.lower()}."
            args += ["--override", f"{prefix}sasl.enabled.mechanisms={','.join(MECHANISMS)}",
                     "--override", f"{prefix}plain.sasl.jaas.config={JAAS_PLAIN}",
                     "--override", f"{prefix}oauthbearer.sasl.jaas.config={JAAS_OAUTH}"]
    b = BrokerProcess(os.path.join(d, "broker"), extra_args=args)
    b.start()
    contexts = {"SSL": _tls_context(certs.ca), "MTLS": _tls_context(certs.ca, certs.client),
                "SASL_SSL": _tls_context(certs.ca)}
    target = Target(ports, contexts, {}, lifetime_ms or 0)
    target.versions = _api_versions(target)
    _admin_setup(target)
    return b, target


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return Certs(str(tmp_path_factory.mktemp("attack-certs")))


@pytest.fixture(scope="module")
def target(tmp_path_factory, certs):
    b, t = start_broker(str(tmp_path_factory.mktemp("attack")), certs, lifetime_ms=LIFETIME_MS)
    t.broker = b
    yield t
    b.kill()


@pytest.fixture(scope="module")
def matrix(target):
    started = time.monotonic()
    results = run_matrix(target, combos())
    target.matrix_seconds = time.monotonic() - started
    return results


# ---------------------------------------------------------------------- the tests


@pytest.fixture(scope="module")
def no_lifetime_target(tmp_path_factory, certs):
    """A broker without connections.max.reauth.ms: sessions without a lifetime."""
    b, t = start_broker(str(tmp_path_factory.mktemp("attack-no-lifetime")), certs, lifetime_ms=None,
                        listeners=("PLAINTEXT", "SASL_PLAINTEXT"))
    yield t
    b.kill()


# ---------------------------------------------------------------------- the admin's view


def traces(target: Target) -> dict[int, set[str]]:
    """Per mutating API key, the names of what requests of the matrix left behind: records in
    the victim topic, groups, topics, transactional ids, SCRAM users (all named ``atk.*``)."""
    c = target.connect(target.admin_listener)
    try:
        m = request_module(3, 12)
        topics = {t.name for t in c.request(m.MetadataRequest(
            topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)).topics}
        m = request_module(1, 12)
        fetched = c.request(minimal(codec.request_class(1, 12), replica_id=-1, max_wait=datetime.timedelta(0),
                                    min_bytes=0, max_bytes=64 << 20, isolation_level=0, session_epoch=-1,
                                    topics=(minimal(m.FetchTopic, topic=VICTIM, partitions=(minimal(
                                        m.FetchPartition, partition=0, current_leader_epoch=-1, fetch_offset=0,
                                        last_fetched_epoch=-1, log_start_offset=-1,
                                        partition_max_bytes=64 << 20),)),)))
        part = fetched.responses[0].partitions[0]
        assert part.error_code == E.none, part
        records, pos, values = bytes(part.records or b""), 0, set()
        while pos + 12 <= len(records):
            size = 12 + struct.unpack_from(">i", records, pos + 8)[0]
            values.update(v.decode() for _, _, _, v in rb.iter_records(records[pos:pos + size]))
            pos += size
        groups = {g.group_id for g in c.request(minimal(codec.request_class(16, 4))).groups}
        txns = {t.transactional_id for t in c.request(minimal(codec.request_class(66, 0))).transaction_states}
        users = {r.user for r in c.request(minimal(codec.request_class(50, 0), users=None)).results}
    finally:
        c.close()
    found = {PRODUCE: values, OFFSET_COMMIT: groups, CREATE_TOPICS: topics, INIT_PRODUCER_ID: txns,
             ALTER_SCRAM: users}
    return {key: {x for x in names if x.startswith("atk.")} for key, names in found.items()}


# ---------------------------------------------------------------------- the tests


@pytest.mark.parametrize("combo", combos(), ids=lambda c: c.id)
def test_session_matrix(target, matrix, combo):
    bad = mismatches(target, matrix, combo)
    assert not bad, f"{len(bad)} cell(s) differ from Kafka 4.4:\n" + "\n".join(bad)


def test_the_matrix_covers_every_api_the_broker_serves(target, matrix):
    from oncelog.apis import HANDLERS

    assert set(target.versions) == set(HANDLERS), "ApiVersions advertises what the broker routes"
    cells = sum(len(_states(c)) for c in combos()) * len(target.versions)
    assert len(matrix) == cells, (len(matrix), cells)
    print(f"\nsession attack matrix: {cells} cells in {target.matrix_seconds:.1f} s")


def test_refused_requests_change_nothing(target, matrix):
    """Of the requests that would create something (a record, a group's offset, a topic, a
    transactional id, a SCRAM user), exactly those served — authenticated, on every listener —
    left it behind; none sent before, during or after expiry of an authentication did."""
    served = {key: set() for key in MUTATING}
    for (combo_id, state, key), outcome in matrix.items():
        if key in MUTATING and state == "after":
            assert outcome.answered and outcome.codes == {"none"}, (combo_id, key, outcome)
            served[key].add(cell_name((combo_id, state, key)))
    assert all(len(names) == len(combos()) for names in served.values())
    left = traces(target)
    for key in MUTATING:
        assert left[key] == served[key], (
            f"{_api_name(key)}: left by refused requests: {sorted(left[key] - served[key])}; "
            f"missing for served ones: {sorted(served[key] - left[key])}")


@pytest.mark.parametrize("combo", combos(listeners=("SASL_PLAINTEXT",), mechanisms=MECHANISMS[:3]), ids=lambda c: c.id)
def test_no_reauthentication_without_a_session_lifetime(no_lifetime_target, combo):
    """Without connections.max.reauth.ms a PLAIN or SCRAM session has no lifetime and cannot
    re-authenticate: SaslHandshake (either version) and SaslAuthenticate are answered
    ILLEGAL_SASL_STATE by KafkaApis, and the connection goes on as it was. (An OAUTHBEARER
    session lives as long as its token: it can, as in ``after`` of the matrix.)"""
    t = no_lifetime_target
    c = t.connect(combo.listener)
    try:
        login(t, c, combo.mechanism, combo.hs)
        for request in (request_module(SASL_HANDSHAKE, 1).SaslHandshakeRequest(mechanism=combo.mechanism),
                        request_module(SASL_HANDSHAKE, 0).SaslHandshakeRequest(mechanism=combo.mechanism),
                        request_module(SASL_AUTHENTICATE, 2).SaslAuthenticateRequest(auth_bytes=b"\0alice\0x")):
            outcome = probe(t, c, request, then=api_versions_ok(t))
            assert ILLEGAL_OPEN.matches(outcome), f"{type(request).__name__} v{request.__version__}: {outcome}"
    finally:
        c.close()


def test_an_oauthbearer_session_lives_as_long_as_its_token(no_lifetime_target):
    c = no_lifetime_target.connect("SASL_PLAINTEXT")
    try:
        handshake(no_lifetime_target, c, "OAUTHBEARER", 1)
        token = next(_client_tokens("OAUTHBEARER"))
        answer = c.request(request_module(SASL_AUTHENTICATE, 2).SaslAuthenticateRequest(auth_bytes=token))
        assert answer.error_code == E.none and 3590 < answer.session_lifetime.total_seconds() <= 3600
        request = request_module(SASL_HANDSHAKE, 1).SaslHandshakeRequest(mechanism="OAUTHBEARER")
        assert NONE_OPEN.matches(probe(no_lifetime_target, c, request,
                                       then=lambda c: exchange(no_lifetime_target, c, "OAUTHBEARER", 1)))
    finally:
        c.close()


@pytest.mark.parametrize("mechanism, hs", [("PLAIN", 1), ("SCRAM-SHA-512", 0)])
def test_reauthentication_at_most_once_a_second(target, mechanism, hs):
    """KafkaChannel.maybeBeginServerReauthentication: a SaslHandshake within a second of the
    last re-authentication's start is answered ILLEGAL_SASL_STATE (the session goes on); one a
    second later re-authenticates."""
    c = target.connect("SASL_PLAINTEXT")
    try:
        login(target, c, mechanism, hs)
        started = time.monotonic()
        login(target, c, mechanism, hs)  # the first re-authentication: at once is fine
        request = request_module(SASL_HANDSHAKE, hs).SaslHandshakeRequest(mechanism=mechanism)
        outcome = probe(target, c, request, then=api_versions_ok(target))
        assert ILLEGAL_OPEN.matches(outcome), outcome
        time.sleep(max(0.0, started + 1.1 - time.monotonic()))
        login(target, c, mechanism, hs)
        api_versions_ok(target)(c)
    finally:
        c.close()


def test_pipelined_sasl_requests_after_authentication_are_answered_in_order(target):
    """500 SaslAuthenticate requests pipelined on an authenticated connection: each answered
    ILLEGAL_SASL_STATE, in order, then the Metadata after them; the connection stays open (the
    answers are written as the frames are dispatched, without recursing per frame)."""
    c = target.connect("SASL_PLAINTEXT")
    try:
        login(target, c, "PLAIN", 1)
        requests = [request_module(SASL_AUTHENTICATE, 2).SaslAuthenticateRequest(auth_bytes=b"")] * 500
        requests.append(request_for(3, target.versions[3], (), "", target.victim_id))
        first = c.correlation_id + 1
        c.sock.sendall(b"".join(struct.pack(">i", len(f)) + f for f in (c.encode(r) for r in requests)))
        for i, request in enumerate(requests):
            c.correlation_id = first + i
            answer = read_answer(c, request)
            assert not isinstance(answer, Outcome), f"request {i}: {answer}"
            if i < 500:
                assert answer.error_code == E.illegal_sasl_state, (i, answer)
        api_versions_ok(target)(c)
    finally:
        c.close()


def test_one_api_versions_before_the_handshake(target):
    """SaslServerAuthenticator answers one ApiVersions before SaslHandshake; a second closes the
    connection without an answer. One of a version the broker does not know is answered
    UNSUPPORTED_VERSION (KIP-511) and does not count: the client retries lower."""
    c = target.connect("SASL_PLAINTEXT")
    try:
        assert probe(target, c, request_for(API_VERSIONS, 3, (), "", target.victim_id), then=lambda c: None).codes \
            == {"none"}
        assert REFUSED.matches(probe(target, c, request_for(API_VERSIONS, 3, (), "", target.victim_id)))
    finally:
        c.close()
    c = target.connect("SASL_PLAINTEXT")
    try:
        # ApiVersions v99: a v3 request (header v2, as a client sends its newest) renumbered
        frame = bytearray(c.encode(request_for(API_VERSIONS, 3, (), "", target.victim_id)))
        frame[2:4] = (99).to_bytes(2, "big")
        c.send_frame(bytes(frame))
        _, answer = decode_response(c.recv_frame(), request_module(API_VERSIONS, 0).ApiVersionsRequest)
        assert answer.error_code == E.unsupported_version
        assert c.request(request_for(API_VERSIONS, 3, (), "", target.victim_id)).error_code == E.none
        login(target, c, "PLAIN", 1)
        api_versions_ok(target)(c)
    finally:
        c.close()


def test_reauthentication_with_another_mechanism_fails_at_its_first_token(target):
    """Kafka (SaslServerAuthenticator, REAUTH_BAD_MECHANISM) answers the handshake of a
    re-authentication with another mechanism as any other (NONE, the mechanisms), and fails the
    exchange at the next token: the connection is closed without an answer."""
    c = target.connect("SASL_PLAINTEXT")
    try:
        login(target, c, "PLAIN", 1)
        request = request_module(SASL_HANDSHAKE, 1).SaslHandshakeRequest(mechanism="SCRAM-SHA-256")
        assert NONE_OPEN.matches(probe(target, c, request, then=lambda c: None))
        token = request_module(SASL_AUTHENTICATE, 2).SaslAuthenticateRequest(auth_bytes=b"n,,n=alice,r=abc")
        assert REFUSED.matches(probe(target, c, token))
    finally:
        c.close()
