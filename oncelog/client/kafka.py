"""A small blocking Kafka protocol client for the Spark connector: metadata, offsets, fetch,
and the transaction requests that confluent-kafka does not expose (a producer id and epoch that
another process can use to end a transaction).

It speaks only the public Kafka protocol (on kio's message classes), so it works against oncelog
and against any Kafka cluster of version 2.8 or later, over PLAINTEXT, SSL, SASL_PLAINTEXT or
SASL_SSL listeners (TLS and SASL: :mod:`oncelog.client.security`, configured with Kafka's client
names; a failed handshake or authentication raises at connect time, never retried). Requests go to
the partition's leader or the key's coordinator, found through Metadata and FindCoordinator and
refreshed when a broker answers NOT_LEADER_OR_FOLLOWER / NOT_COORDINATOR.

Versions: each API is sent at one version we build (see ``VERSIONS``), checked against the
broker's ApiVersions answer; a broker that does not support it gets a clear error naming the
API and both ranges. Transactions use the transaction-version-1 request versions (EndTxn v3,
AddPartitionsToTxn v3, AddOffsetsToTxn v3): a Kafka 4 coordinator keeps the classic rules for
them, which lets a process other than the producer end a transaction with its (producer id,
epoch). Offsets committed inside a transaction (TxnOffsetCommit v3, read back with OffsetFetch
v7 ``require_stable``) serve the sink's per-partition progress markers.

Not thread-safe: one client per thread. Connections are blocking sockets with requests
pipelined in order (responses come back in request order on a Kafka connection).
"""

from __future__ import annotations

import collections
import datetime
import io
import logging
import re
import socket
import ssl
import struct
import time
from dataclasses import dataclass, field

from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from .wire import decode_response, write_request
from . import security as sec_mod
from .security import KafkaSecurityError, SaslAuthenticationError, Security, SslAuthenticationError  # noqa: F401 (re-exported)

log = logging.getLogger("oncelog.client")

# api key: (name, version we send)
VERSIONS: dict[int, tuple[str, int]] = {
    0: ("Produce", 8),
    1: ("Fetch", 11),
    2: ("ListOffsets", 5),
    3: ("Metadata", 9),
    9: ("OffsetFetch", 7),  # v7: require_stable (KIP-447), one group per request
    10: ("FindCoordinator", 3),
    18: ("ApiVersions", 3),
    22: ("InitProducerId", 3),
    24: ("AddPartitionsToTxn", 3),
    25: ("AddOffsetsToTxn", 3),
    26: ("EndTxn", 3),
    28: ("TxnOffsetCommit", 3),  # v3: group metadata (generation -1, member "": producer-only)
    65: ("DescribeTransactions", 0),
    66: ("ListTransactions", 0),
}

EARLIEST = -2
LATEST = -1
READ_UNCOMMITTED = 0
READ_COMMITTED = 1

COORDINATOR_GROUP = 0
COORDINATOR_TRANSACTION = 1

# Errors after which the same request may succeed once metadata/coordinator are refreshed or
# the broker has caught up (Kafka's RetriableException set, restricted to what we send).
RETRIABLE = {
    ErrorCode.not_coordinator, ErrorCode.coordinator_not_available, ErrorCode.coordinator_load_in_progress,
    ErrorCode.concurrent_transactions, ErrorCode.not_leader_or_follower, ErrorCode.leader_not_available,
    ErrorCode.request_timed_out, ErrorCode.network_exception, ErrorCode.unknown_topic_or_partition,
    ErrorCode.not_enough_replicas, ErrorCode.not_enough_replicas_after_append, ErrorCode.kafka_storage_error,
    ErrorCode.fenced_leader_epoch, ErrorCode.unknown_leader_epoch, ErrorCode.offset_not_available,
    ErrorCode.unstable_offset_commit,
}
_REFRESH = {ErrorCode.not_coordinator, ErrorCode.coordinator_not_available, ErrorCode.not_leader_or_follower,
            ErrorCode.leader_not_available, ErrorCode.unknown_topic_or_partition, ErrorCode.fenced_leader_epoch}


class KafkaProtocolError(Exception):
    """A request answered with an error code; ``code`` is the kio ErrorCode."""

    def __init__(self, code: ErrorCode, what: str, message: str | None = None) -> None:
        text = f"{what}: {code.name.upper()} ({int(code)})"
        if message:
            text += f": {message}"
        super().__init__(text)
        self.code = code
        self.what = what


class UnsupportedBroker(Exception):
    """The broker does not offer an API version this client needs."""


def _module(api_key: int, version: int, entity: EntityType):
    return load_payload_module(api_key, version, entity)


def request_module(api_key: int):
    return _module(api_key, VERSIONS[api_key][1], EntityType.request)


def _module_for_request(api_key: int, version: int):
    return _module(api_key, version, EntityType.request)


class Connection:
    """One TCP connection to one broker; requests are pipelined and answered in order.

    Opening it does the listener's whole handshake: TLS (when ``security`` says SSL/SASL_SSL),
    ApiVersions, then SASL (SASL_PLAINTEXT/SASL_SSL). A refused TLS handshake or SASL exchange
    raises :class:`~oncelog.client.security.KafkaSecurityError` (not an OSError: not retried);
    a broker that cannot be reached raises OSError as before (retried by callers)."""

    def __init__(self, host: str, port: int, *, timeout: float, client_id: str,
                 security: Security | None = None) -> None:
        self.address = f"{host}:{port}"
        self.client_id = client_id
        self.correlation_id = 0
        self.pending: collections.deque = collections.deque()
        self.api_versions: dict[int, tuple[int, int]] = {}
        self.expires_at: float | None = None  # KIP-368: reconnect before the SASL session ends
        self.responses = 0
        self.security = security
        self.sock = socket.create_connection((host, port), timeout=timeout)
        try:
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if security is not None and security.tls:
                self.sock = self._tls(host, security)
            self._negotiate()
            if security is not None and security.sasl:
                lifetime = sec_mod.authenticate(self, security, _module_for_request)
                if lifetime:
                    # As Kafka's clients: re-authenticate (here: reconnect) at 85% of the session.
                    self.expires_at = time.monotonic() + 0.85 * lifetime
        except ssl.SSLError as exc:
            self.close()
            if isinstance(exc, ssl.SSLEOFError):
                raise ConnectionError(f"broker {self.address} closed the connection during the TLS handshake "
                                      "(is its listener PLAINTEXT or SASL_PLAINTEXT?)") from exc
            raise SslAuthenticationError(sec_mod.describe_ssl_error(exc, self.address, security)) from None
        except BaseException:
            self.close()
            raise

    def _tls(self, host: str, security: Security) -> ssl.SSLSocket:
        # server_hostname: SNI, and the name the certificate must hold (ssl.endpoint.identification.algorithm).
        return security.ssl_context().wrap_socket(self.sock, server_hostname=host)

    @property
    def expired(self) -> bool:
        return self.expires_at is not None and time.monotonic() >= self.expires_at

    def _negotiate(self) -> None:
        m = _module(18, 3, EntityType.request)
        resp = self.request(m.ApiVersionsRequest(client_software_name="oncelog", client_software_version="1"))
        if resp.error_code != ErrorCode.none:
            raise UnsupportedBroker(f"{self.address}: ApiVersions v3 answered {resp.error_code.name}; "
                                    "this client needs Kafka 2.8 or later")
        self.api_versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}

    def check(self, api_key: int) -> None:
        name, version = VERSIONS[api_key]
        lo, hi = self.api_versions.get(api_key, (None, None))
        if lo is None or not lo <= version <= hi:
            offered = "not offered" if lo is None else f"{lo}-{hi}"
            raise UnsupportedBroker(f"broker {self.address} offers {name} versions {offered}; "
                                    f"this client sends v{version}")

    def send(self, request) -> None:
        self.correlation_id += 1
        buf = io.BytesIO()
        buf.write(b"\0\0\0\0")
        write_request(buf, request, self.correlation_id, self.client_id)
        frame = buf.getbuffer()
        struct.pack_into(">i", frame, 0, len(frame) - 4)
        self.sock.sendall(frame)
        self.pending.append((self.correlation_id, type(request)))

    def receive(self):
        cid, request_cls = self.pending.popleft()
        try:
            head = self._recv_exactly(4)
        except ConnectionError as exc:
            if self.responses == 0 and not (self.security and self.security.tls):
                # Closed before the first answer (ApiVersions): what a TLS listener does with a
                # plaintext request when its TLS stack sends no alert (oncelog's, Python's ssl).
                raise ConnectionError(f"{exc} before answering ApiVersions (if its listener is SSL or SASL_SSL, "
                                      "it expects TLS: set security.protocol accordingly)") from None
            if self.responses == 1 and not (self.security and self.security.sasl):
                # Only ApiVersions answered, then closed at the first real request: what a SASL
                # listener does to a client that did not authenticate (it may also be a restart).
                raise ConnectionError(f"{exc} at the first request after ApiVersions (if its listener is "
                                      "SASL_PLAINTEXT or SASL_SSL, set security.protocol and sasl.mechanism)") from None
            raise
        self.responses += 1
        if sec_mod.looks_like_tls(head) and not (self.security and self.security.tls):
            raise SslAuthenticationError(f"broker {self.address} answered with TLS: its listener is SSL or SASL_SSL; "
                                         "set security.protocol accordingly")
        size = struct.unpack(">i", head)[0]
        if size < 4:
            raise ConnectionError(f"{self.address}: response of {size} bytes")
        raw = self._recv_exactly(size)
        got, resp = decode_response(raw, request_cls)
        if got != cid:
            raise ConnectionError(f"{self.address}: response for correlation id {got}, expected {cid}")
        return resp

    def request(self, request):
        self.send(request)
        return self.receive()

    def _recv_exactly(self, n: int) -> bytes:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self.sock.recv_into(view[got:])
            if not k:
                raise ConnectionError(f"connection to {self.address} closed by the broker")
            got += k
        return bytes(buf)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


@dataclass
class TopicMetadata:
    name: str
    error: ErrorCode
    partitions: dict[int, int] = field(default_factory=dict)  # partition -> leader node id


@dataclass
class PartitionFetch:
    """One partition of a Fetch response."""

    error: ErrorCode
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: list[tuple[int, int]] | None
    records: bytes


@dataclass(frozen=True)
class TxnDescription:
    """One transactional id as its coordinator describes it (DescribeTransactions)."""

    transactional_id: str
    state: str  # Kafka's names: Empty, Ongoing, PrepareCommit, CompleteCommit, ...
    producer_id: int
    producer_epoch: int
    start_ms: int  # when the open (or last) transaction started; -1: none started


class KafkaClient:
    """Blocking protocol client over a set of brokers found from ``bootstrap``.

    ``config`` holds Kafka client settings (``kafka.`` prefix removed); this client honours
    ``client.id``, ``request.timeout.ms`` and the security settings of
    :mod:`oncelog.client.security` (``security.protocol``, ``ssl.*``, ``sasl.*``), and refuses at
    construction security settings it cannot honour (SecurityConfigError, a ValueError).
    """

    def __init__(self, bootstrap: str, config: dict[str, str] | None = None, *, client_id: str = "oncelog-spark",
                 timeout: float | None = None) -> None:
        config = dict(config or {})
        self.config = config
        self.security = sec_mod.resolve(config)
        self.bootstrap = [tuple(h.strip().rsplit(":", 1)) for h in bootstrap.split(",") if h.strip()]
        if not self.bootstrap:
            raise ValueError("kafka.bootstrap.servers is empty")
        self.client_id = config.get("client.id", client_id)
        self.timeout = timeout or int(config.get("request.timeout.ms", 30000)) / 1000
        self.brokers: dict[int, tuple[str, int]] = {}
        self.conns: dict[int | str, Connection] = {}
        self.topics: dict[str, TopicMetadata] = {}
        self.coordinators: dict[tuple[int, str], int] = {}
        # The cluster's id as the last Metadata answer gave it (None before the first): tells a
        # cluster from another that took over the same address (a fresh data directory, a new id).
        self.cluster_id: str | None = None

    # -- connections ---------------------------------------------------------------------------

    def _connect(self, key, host: str, port: int) -> Connection:
        conn = self.conns.get(key)
        if conn is not None and conn.expired:
            self.drop(conn)
            conn = None
        if conn is None:
            conn = self.open_connection(host, port)
            self.conns[key] = conn
        return conn

    def open_connection(self, host: str, port: int | str) -> Connection:
        """A new connection with this client's id, timeout and security (TLS/SASL done)."""
        return Connection(host, int(port), timeout=self.timeout, client_id=self.client_id, security=self.security)

    def node(self, node_id: int) -> Connection:
        if node_id not in self.brokers:
            self.metadata([])
        if node_id not in self.brokers:
            raise KafkaProtocolError(ErrorCode.broker_not_available, f"broker {node_id}")
        host, port = self.brokers[node_id]
        return self._connect(node_id, host, port)

    def any_connection(self) -> Connection:
        for conn in list(self.conns.values()):
            if conn.expired:
                self.drop(conn)
                continue
            return conn
        errors = []
        for host, port in self.bootstrap:
            try:
                return self._connect(f"bootstrap-{host}:{port}", host, int(port))
            except OSError as exc:
                errors.append(f"{host}:{port}: {exc}")
        raise ConnectionError("no broker reachable: " + "; ".join(errors))

    def drop(self, conn: Connection) -> None:
        """Forget a connection after a network error (the next request reconnects)."""
        for key, c in list(self.conns.items()):
            if c is conn:
                del self.conns[key]
        conn.close()

    def close(self) -> None:
        for conn in self.conns.values():
            conn.close()
        self.conns.clear()

    def call(self, conn: Connection, request):
        conn.check(type(request).__api_key__)
        try:
            return conn.request(request)
        except (OSError, ConnectionError):
            self.drop(conn)
            raise

    # -- metadata ------------------------------------------------------------------------------

    def metadata(self, topics: list[str] | None = None, *, auto_create: bool = False) -> dict[str, TopicMetadata]:
        """Refresh broker and topic metadata; ``None`` asks for every topic. ``auto_create`` lets
        a broker with auto.create.topics.enable create missing topics (as a producer does)."""
        m = request_module(3)
        req = m.MetadataRequest(
            topics=None if topics is None else tuple(m.MetadataRequestTopic(name=t) for t in topics),
            allow_auto_topic_creation=auto_create, include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False)
        conn = self.any_connection()
        resp = self.call(conn, req)
        self.brokers = {b.node_id: (b.host, b.port) for b in resp.brokers}
        self.cluster_id = resp.cluster_id or ""
        out = {}
        for t in resp.topics:
            meta = TopicMetadata(t.name, t.error_code, {p.partition_index: p.leader_id for p in t.partitions})
            out[t.name] = meta
            if t.error_code == ErrorCode.none:
                self.topics[t.name] = meta
            else:
                self.topics.pop(t.name, None)
        return out

    def leader(self, topic: str, partition: int) -> Connection:
        meta = self.topics.get(topic)
        if meta is None or partition not in meta.partitions:
            meta = self.metadata([topic]).get(topic)
            if meta is None or meta.error != ErrorCode.none or partition not in meta.partitions:
                code = meta.error if meta is not None and meta.error != ErrorCode.none else ErrorCode.unknown_topic_or_partition
                raise KafkaProtocolError(code, f"{topic}-{partition}")
        return self.node(meta.partitions[partition])

    def coordinator(self, key: str, key_type: int) -> Connection:
        cached = self.coordinators.get((key_type, key))
        if cached is not None:
            return self.node(cached)
        m = request_module(10)
        deadline = time.monotonic() + self.timeout
        while True:
            resp = self.call(self.any_connection(), m.FindCoordinatorRequest(key=key, key_type=key_type))
            if resp.error_code == ErrorCode.none:
                self.brokers[resp.node_id] = (resp.host, resp.port)
                self.coordinators[(key_type, key)] = resp.node_id
                return self.node(resp.node_id)
            if resp.error_code not in RETRIABLE or time.monotonic() > deadline:
                raise KafkaProtocolError(resp.error_code, f"FindCoordinator {key!r}", resp.error_message)
            time.sleep(0.05)

    def forget_coordinator(self, key: str, key_type: int) -> None:
        self.coordinators.pop((key_type, key), None)

    def forget_leaders(self) -> None:
        self.topics.clear()

    # -- offsets and fetch ---------------------------------------------------------------------

    def list_offsets(self, specs: dict[tuple[str, int], int], isolation_level: int = READ_COMMITTED
                     ) -> dict[tuple[str, int], tuple[int, int]]:
        """{(topic, partition): (offset, timestamp)} for each spec (EARLIEST, LATEST or a
        timestamp in ms). LATEST at READ_COMMITTED is the last stable offset; a timestamp past
        the last record gives offset -1, as Kafka answers."""
        out: dict[tuple[str, int], tuple[int, int]] = {}
        todo = dict(specs)
        deadline = time.monotonic() + self.timeout
        m = request_module(2)
        while todo:
            by_leader: dict[int, list[tuple[str, int]]] = collections.defaultdict(list)
            retry: dict[tuple[str, int], int] = {}
            last_error: Exception | None = None
            for (t, p) in todo:
                try:
                    self.leader(t, p)
                except (OSError, ConnectionError) as exc:  # a leader that died: metadata moves it
                    retry[(t, p)], last_error = todo[(t, p)], exc
                    continue
                except KafkaProtocolError as exc:
                    if exc.code not in RETRIABLE and exc.code != ErrorCode.broker_not_available:
                        raise
                    retry[(t, p)], last_error = todo[(t, p)], exc
                    continue
                by_leader[self.topics[t].partitions[p]].append((t, p))
            for node_id, tps in by_leader.items():
                topics: dict[str, list] = collections.defaultdict(list)
                for t, p in tps:
                    topics[t].append(m.ListOffsetsPartition(partition_index=p, current_leader_epoch=-1, timestamp=todo[(t, p)]))
                req = m.ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level, topics=tuple(
                    m.ListOffsetsTopic(name=t, partitions=tuple(ps)) for t, ps in topics.items()))
                try:
                    resp = self.call(self.node(node_id), req)
                except (OSError, ConnectionError) as exc:  # the leader went away: ask again
                    retry.update({tp: todo[tp] for tp in tps})
                    last_error = exc
                    continue
                for rt in resp.topics:
                    for rp in rt.partitions:
                        key = (rt.name, rp.partition_index)
                        if rp.error_code == ErrorCode.none:
                            out[key] = (rp.offset, rp.timestamp)
                        elif rp.error_code in RETRIABLE:
                            retry[key] = todo[key]
                            last_error = KafkaProtocolError(rp.error_code, f"ListOffsets {key[0]}-{key[1]}")
                        else:
                            raise KafkaProtocolError(rp.error_code, f"ListOffsets {key[0]}-{key[1]}")
            todo = retry
            if todo:
                if time.monotonic() > deadline:
                    raise last_error
                self.forget_leaders()
                time.sleep(0.2)
        return out

    def fetch(self, positions: dict[tuple[str, int], int], *, isolation_level: int = READ_COMMITTED,
              max_wait_ms: int = 100, max_bytes: int = 50 * 1024 * 1024,
              partition_max_bytes: int = 8 * 1024 * 1024) -> dict[tuple[str, int], PartitionFetch]:
        """One Fetch round to each leader for the given positions."""
        m = request_module(1)
        by_leader: dict[int, list[tuple[str, int]]] = collections.defaultdict(list)
        for (t, p) in positions:
            self.leader(t, p)
            by_leader[self.topics[t].partitions[p]].append((t, p))
        sent = []
        for node_id, tps in by_leader.items():
            topics: dict[str, list] = collections.defaultdict(list)
            for t, p in tps:
                topics[t].append(m.FetchPartition(partition=p, current_leader_epoch=-1, fetch_offset=positions[(t, p)],
                                                  log_start_offset=-1, partition_max_bytes=partition_max_bytes))
            req = m.FetchRequest(replica_id=-1, max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=1,
                                 max_bytes=max_bytes, isolation_level=isolation_level, session_id=0, session_epoch=-1,
                                 topics=tuple(m.FetchTopic(topic=t, partitions=tuple(ps)) for t, ps in topics.items()),
                                 forgotten_topics_data=(), rack_id="")
            conn = self.node(node_id)
            conn.check(1)
            try:
                conn.send(req)
            except OSError:
                self.drop(conn)
                raise
            sent.append(conn)
        out: dict[tuple[str, int], PartitionFetch] = {}
        for conn in sent:
            try:
                resp = conn.receive()
            except (OSError, ConnectionError):
                self.drop(conn)
                raise
            if resp.error_code != ErrorCode.none:
                raise KafkaProtocolError(resp.error_code, f"Fetch from {conn.address}")
            for rt in resp.responses:
                for rp in rt.partitions:
                    aborted = None
                    if rp.aborted_transactions is not None:
                        aborted = [(a.producer_id, a.first_offset) for a in rp.aborted_transactions]
                    elif isolation_level == READ_COMMITTED:
                        aborted = []
                    out[(rt.topic, rp.partition_index)] = PartitionFetch(
                        rp.error_code, rp.high_watermark, rp.last_stable_offset, rp.log_start_offset, aborted,
                        rp.records or b"")
                    if rp.error_code in _REFRESH:
                        self.forget_leaders()
        return out

    # -- transactions --------------------------------------------------------------------------

    def init_producer_id(self, transactional_id: str | None, transaction_timeout_ms: int) -> tuple[int, int]:
        """(producer id, epoch). For a transactional id this fences earlier producers with it
        and aborts (or completes) their open transaction, retrying while the coordinator is
        busy doing so."""
        m = request_module(22)
        req = m.InitProducerIdRequest(transactional_id=transactional_id,
                                      transaction_timeout=datetime.timedelta(milliseconds=transaction_timeout_ms),
                                      producer_id=-1, producer_epoch=-1)
        resp = self._txn_call(transactional_id, req, f"InitProducerId {transactional_id!r}")
        return resp.producer_id, resp.producer_epoch

    def add_partitions_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                              partitions: list[tuple[str, int]]) -> None:
        m = request_module(24)
        topics: dict[str, list[int]] = collections.defaultdict(list)
        for t, p in partitions:
            topics[t].append(p)
        req = m.AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=transactional_id, v3_and_below_producer_id=producer_id,
            v3_and_below_producer_epoch=producer_epoch,
            v3_and_below_topics=tuple(m.AddPartitionsToTxnTopic(name=t, partitions=tuple(ps)) for t, ps in topics.items()))
        deadline = time.monotonic() + self.timeout
        while True:
            resp = self.call(self.coordinator(transactional_id, COORDINATOR_TRANSACTION), req)
            errors = {(t.name, p.partition_index): p.partition_error_code
                      for t in resp.results_by_topic_v3_and_below for p in t.results_by_partition}
            bad = {k: e for k, e in errors.items() if e != ErrorCode.none}
            if not bad:
                return
            code = next(iter(bad.values()))
            if code == ErrorCode.operation_not_attempted:
                code = next((e for e in bad.values() if e != ErrorCode.operation_not_attempted), code)
            if code not in RETRIABLE or time.monotonic() > deadline:
                raise KafkaProtocolError(code, f"AddPartitionsToTxn {transactional_id!r} {sorted(bad)}")
            if code in _REFRESH:
                self.forget_coordinator(transactional_id, COORDINATOR_TRANSACTION)
            time.sleep(0.02)

    def add_offsets_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str) -> None:
        """Add ``group_id``'s offsets partition to the open transaction, so that
        :meth:`txn_offset_commit` may write there and the transaction's marker reaches it."""
        m = request_module(25)
        req = m.AddOffsetsToTxnRequest(transactional_id=transactional_id, producer_id=producer_id,
                                       producer_epoch=producer_epoch, group_id=group_id)
        self._txn_call(transactional_id, req, f"AddOffsetsToTxn {transactional_id!r} group {group_id!r}")

    def txn_offset_commit(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str,
                          offsets: dict[tuple[str, int], tuple[int, str]]) -> None:
        """Commit ``{(topic, partition): (offset, metadata)}`` for ``group_id`` inside the open
        transaction (after :meth:`add_offsets_to_txn`). Sent to the group's coordinator without
        group metadata (generation -1, member ""): a producer-only commit, which Kafka allows
        and fences by producer epoch only. The offsets stay pending until the transaction ends."""
        m = request_module(28)
        topics: dict[str, list] = collections.defaultdict(list)
        for (t, p), (offset, metadata) in offsets.items():
            topics[t].append(m.TxnOffsetCommitRequestPartition(partition_index=p, committed_offset=offset,
                                                               committed_leader_epoch=-1, committed_metadata=metadata))
        req = m.TxnOffsetCommitRequest(
            transactional_id=transactional_id, group_id=group_id, producer_id=producer_id,
            producer_epoch=producer_epoch, generation_id=-1, member_id="", group_instance_id=None,
            topics=tuple(m.TxnOffsetCommitRequestTopic(name=t, partitions=tuple(ps)) for t, ps in topics.items()))
        what = f"TxnOffsetCommit {transactional_id!r} group {group_id!r}"
        deadline = time.monotonic() + self.timeout
        while True:
            resp = self._call_coordinator(group_id, COORDINATOR_GROUP, req, what, deadline)
            bad = {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions
                   if p.error_code != ErrorCode.none}
            if not bad:
                return
            code = next(iter(bad.values()))
            if code not in RETRIABLE or time.monotonic() > deadline:
                raise KafkaProtocolError(code, f"{what} {sorted(bad)}")
            if code in _REFRESH:
                self.forget_coordinator(group_id, COORDINATOR_GROUP)
            time.sleep(0.02)

    def offset_fetch(self, group_id: str, partitions: list[tuple[str, int]], *, require_stable: bool = True
                     ) -> dict[tuple[str, int], tuple[int, str]]:
        """``{(topic, partition): (committed offset, metadata)}`` of ``group_id`` (offset -1:
        none). With ``require_stable`` only committed offsets count: while a transaction that
        commits one of them is still open, the coordinator answers UNSTABLE_OFFSET_COMMIT and
        this waits (up to the request timeout) until the transaction has ended."""
        m = request_module(9)
        topics: dict[str, list[int]] = collections.defaultdict(list)
        for t, p in partitions:
            topics[t].append(p)
        req = m.OffsetFetchRequest(group_id=group_id, require_stable=require_stable, topics=tuple(
            m.OffsetFetchRequestTopic(name=t, partition_indexes=tuple(ps)) for t, ps in topics.items()))
        what = f"OffsetFetch group {group_id!r}"
        deadline = time.monotonic() + self.timeout
        while True:
            resp = self._call_coordinator(group_id, COORDINATOR_GROUP, req, what, deadline)
            code = resp.error_code
            out: dict[tuple[str, int], tuple[int, str]] = {}
            if code == ErrorCode.none:
                for t in resp.topics:
                    for p in t.partitions:
                        if p.error_code != ErrorCode.none:
                            code = p.error_code
                        out[(t.name, p.partition_index)] = (p.committed_offset, p.metadata or "")
            if code == ErrorCode.none:
                return {tp: out.get(tp, (-1, "")) for tp in partitions}
            if code not in RETRIABLE or time.monotonic() > deadline:
                raise KafkaProtocolError(code, what)
            if code in _REFRESH:
                self.forget_coordinator(group_id, COORDINATOR_GROUP)
            time.sleep(0.02)

    def _call_coordinator(self, key: str, key_type: int, req, what: str, deadline: float):
        """One request to ``key``'s coordinator; a network error or a top-level retriable
        error code is retried (with a fresh coordinator lookup) until ``deadline``."""
        while True:
            try:
                resp = self.call(self.coordinator(key, key_type), req)
            except (OSError, ConnectionError):
                if time.monotonic() > deadline:
                    raise
                self.forget_coordinator(key, key_type)
                time.sleep(0.1)
                continue
            code = getattr(resp, "error_code", ErrorCode.none)
            if code == ErrorCode.none or code not in RETRIABLE or time.monotonic() > deadline:
                return resp
            if code in _REFRESH:
                self.forget_coordinator(key, key_type)
            time.sleep(0.02)

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> ErrorCode:
        """Send EndTxn and return the final error code (NONE on success). Retriable codes are
        retried; others (PRODUCER_FENCED, INVALID_TXN_STATE, ...) are returned for the caller
        to judge, because what they mean depends on what it knows about the transaction."""
        return self.end_txns([(transactional_id, producer_id, producer_epoch)], commit)[transactional_id]

    def end_txns(self, txns: list[tuple[str, int, int]], commit: bool) -> dict[str, ErrorCode]:
        """EndTxn for many transactions, pipelined per coordinator."""
        m = request_module(26)
        todo = {t[0]: t for t in txns}
        result: dict[str, ErrorCode] = {}
        deadline = time.monotonic() + self.timeout
        warned: set[str] = set()
        while todo:
            by_conn: dict[int, tuple[Connection, list[str]]] = {}
            retry = {}
            for txn_id in todo:
                conn = self._txn_coordinator(txn_id, deadline, warned)
                if conn is None:
                    retry[txn_id] = todo[txn_id]
                    continue
                by_conn.setdefault(id(conn), (conn, []))[1].append(txn_id)
            for conn, ids in by_conn.values():
                conn.check(26)
                try:
                    for txn_id in ids:
                        _, pid, epoch = todo[txn_id]
                        conn.send(m.EndTxnRequest(transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
                                                  committed=commit))
                    for txn_id in ids:
                        code = conn.receive().error_code
                        if code in RETRIABLE and time.monotonic() < deadline:
                            retry[txn_id] = todo[txn_id]
                            if code in _REFRESH:
                                self.forget_coordinator(txn_id, COORDINATOR_TRANSACTION)
                        else:
                            result[txn_id] = code
                except (OSError, ConnectionError) as exc:
                    self.drop(conn)
                    if time.monotonic() > deadline:
                        raise
                    log.warning("the transaction coordinator of %s went away, asking for its successor: %s",
                                ", ".join(ids), exc)
                    for txn_id in ids:
                        if txn_id not in result:
                            retry[txn_id] = todo[txn_id]
                            self.forget_coordinator(txn_id, COORDINATOR_TRANSACTION)
            todo = retry
            if todo:
                time.sleep(0.02)
        return result

    def _txn_coordinator(self, transactional_id: str, deadline: float, warned: set[str]) -> Connection | None:
        """A connection to ``transactional_id``'s coordinator, or None (to be asked again) when the
        broker we had cached or asked is unreachable (SIGKILLed: its successor is elected within
        seconds) before ``deadline``, after which the error is raised. Says so once per id in
        ``warned`` (the caller's, per call: it asks every ~0.1 s until the successor answers)."""
        try:
            return self.coordinator(transactional_id, COORDINATOR_TRANSACTION)
        except (OSError, ConnectionError) as exc:
            self.forget_coordinator(transactional_id, COORDINATOR_TRANSACTION)
            if time.monotonic() > deadline:
                raise
            if transactional_id not in warned:
                warned.add(transactional_id)
                log.warning("the transaction coordinator of %s is unreachable, asking for its successor: %s",
                            transactional_id, exc)
            time.sleep(0.1)
            return None

    def list_transactions(self, states: tuple[str, ...] = (), pattern: str | None = None
                          ) -> list[tuple[str, int, str]]:
        """(transactional id, producer id, state) of every transaction every broker
        coordinates (KIP-664); empty when the cluster does not offer ListTransactions.

        ``states`` filters by Kafka's state names (``("Ongoing",)``) on the broker: without it a
        cluster answers every id it holds (all states, until ``transactional.id.expiration.ms``),
        whoever made them. ``pattern``, a regular expression the whole id must match, is applied
        here (ListTransactions v0, which Kafka 2.8+ serves; v2's pattern needs Kafka 4.1)."""
        m = request_module(66)
        self.metadata([])
        matches = re.compile(pattern).fullmatch if pattern else None
        out = []
        for node_id in list(self.brokers):
            conn = self.node(node_id)
            if 66 not in conn.api_versions:
                return []
            resp = self.call(conn, m.ListTransactionsRequest(state_filters=tuple(states), producer_id_filters=()))
            if resp.error_code != ErrorCode.none:
                raise KafkaProtocolError(resp.error_code, f"ListTransactions on {conn.address}")
            out += [(s.transactional_id, s.producer_id, s.transaction_state) for s in resp.transaction_states
                    if matches is None or matches(s.transactional_id)]
        return out

    def describe_transactions(self, transactional_ids: list[str]) -> dict[str, TxnDescription]:
        """DescribeTransactions (KIP-664) of each id at its coordinator, one request per
        coordinator. An id the coordinator does not know (never used, or expired) is left
        out of the answer; any other per-id error raises."""
        m = request_module(65)
        result: dict[str, TxnDescription] = {}
        todo = list(dict.fromkeys(transactional_ids))
        deadline = time.monotonic() + self.timeout
        warned: set[str] = set()
        while todo:
            by_conn: dict[int, tuple[Connection, list[str]]] = {}
            retry = []
            for txn_id in todo:
                conn = self._txn_coordinator(txn_id, deadline, warned)
                if conn is None:
                    retry.append(txn_id)
                    continue
                by_conn.setdefault(id(conn), (conn, []))[1].append(txn_id)
            for conn, ids in by_conn.values():
                try:
                    resp = self.call(conn, m.DescribeTransactionsRequest(transactional_ids=tuple(ids)))
                except (OSError, ConnectionError):
                    if time.monotonic() > deadline:
                        raise
                    for txn_id in ids:
                        self.forget_coordinator(txn_id, COORDINATOR_TRANSACTION)
                    retry += ids
                    continue
                for st in resp.transaction_states:
                    code = st.error_code
                    if code == ErrorCode.none:
                        start = st.transaction_start_time.timestamp()
                        result[st.transactional_id] = TxnDescription(
                            st.transactional_id, st.transaction_state, st.producer_id, st.producer_epoch,
                            int(round(start * 1000)) if start >= 0 else -1)
                    elif code == ErrorCode.transactional_id_not_found:
                        continue
                    elif code in RETRIABLE and time.monotonic() < deadline:
                        if code in _REFRESH:
                            self.forget_coordinator(st.transactional_id, COORDINATOR_TRANSACTION)
                        retry.append(st.transactional_id)
                    else:
                        raise KafkaProtocolError(code, f"DescribeTransactions of {st.transactional_id!r}")
            todo = retry
            if todo:
                time.sleep(0.02)
        return result

    def _txn_call(self, transactional_id: str | None, req, what: str):
        deadline = time.monotonic() + self.timeout
        while True:
            conn = (self.coordinator(transactional_id, COORDINATOR_TRANSACTION) if transactional_id
                    else self.any_connection())
            try:
                resp = self.call(conn, req)
            except (OSError, ConnectionError):
                if time.monotonic() > deadline:
                    raise
                self.forget_coordinator(transactional_id or "", COORDINATOR_TRANSACTION)
                time.sleep(0.1)
                continue
            if resp.error_code == ErrorCode.none:
                return resp
            if resp.error_code not in RETRIABLE or time.monotonic() > deadline:
                raise KafkaProtocolError(resp.error_code, what)
            if resp.error_code in _REFRESH and transactional_id:
                self.forget_coordinator(transactional_id, COORDINATOR_TRANSACTION)
            time.sleep(0.02)


# Clients of this process, reused across calls: a Spark Python worker runs many tasks, and a
# client per task would cost a connection and a Metadata round trip each time.
_CLIENTS: dict[tuple, KafkaClient] = {}


def cached_client(bootstrap: str, config: dict[str, str]) -> KafkaClient:
    """This process's client for ``(bootstrap, config)``, made on first use."""
    key = (bootstrap, tuple(sorted(config.items())))
    client = _CLIENTS.get(key)
    if client is None:
        client = _CLIENTS[key] = KafkaClient(bootstrap, config)
    return client


def evict_client(bootstrap: str, config: dict[str, str]) -> None:
    """Forget (and close) this process's cached client, e.g. after a network error: on a cluster
    it may hold connections to a broker that died and leaders that moved; the next
    :func:`cached_client` starts from the bootstrap servers again."""
    client = _CLIENTS.pop((bootstrap, tuple(sorted(config.items()))), None)
    if client is not None:
        client.close()


class TransactionalProducer:
    """Writes pre-encoded record batches into one transaction and leaves it open.

    The transaction is ended by whoever holds (transactional id, producer id, epoch): the Spark
    driver's commit, or this object (:meth:`abort`). Batches are sent pipelined (up to
    ``max_in_flight`` requests per leader, in order), each partition's sequence numbers start
    at 0 for a fresh producer id. A retriable partition error (a leader that moved or died,
    NOT_ENOUGH_REPLICAS, a timeout) resends the same batch to the current leader until
    ``request.timeout.ms``, as the Java producer does with idempotence. Any other partition error
    fails the whole write: the task fails, Spark retries it with a new attempt and a new
    transactional id, and the abandoned transaction is aborted by the driver's orphan sweep (or
    the coordinator's timeout).
    """

    def __init__(self, client: KafkaClient, transactional_id: str, transaction_timeout_ms: int,
                 *, acks: int = -1, max_in_flight: int = 5) -> None:
        self.client = client
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.acks = acks
        self.max_in_flight = max_in_flight
        self.producer_id = -1
        self.producer_epoch = -1
        self.sequences: dict[tuple[str, int], int] = {}
        self.partitions: set[tuple[str, int]] = set()
        self.in_flight: dict[int, collections.deque] = {}
        self.conns: dict[int, Connection] = {}
        self.records_sent = 0
        self.offsets_sent = False

    def init(self) -> None:
        """InitProducerId: a new epoch (or producer id), whose sequences start at 0 again."""
        self.producer_id, self.producer_epoch = self.client.init_producer_id(self.transactional_id,
                                                                            self.transaction_timeout_ms)
        self.sequences.clear()
        self.partitions.clear()

    def next_sequence(self, topic: str, partition: int, count: int) -> int:
        seq = self.sequences.get((topic, partition), 0)
        self.sequences[(topic, partition)] = (seq + count) % 0x80000000
        return seq

    def add_partitions(self, partitions: list[tuple[str, int]]) -> None:
        new = [tp for tp in partitions if tp not in self.partitions]
        if new:
            self.client.add_partitions_to_txn(self.transactional_id, self.producer_id, self.producer_epoch, new)
            self.partitions.update(new)

    def _produce_connection(self, topic: str, partition: int) -> Connection:
        # Produce requests are pipelined on connections of their own, so the client's
        # request/response calls (metadata, AddPartitionsToTxn, EndTxn) never read a
        # ProduceResponse meant for us.
        self.client.leader(topic, partition)
        node = self.client.topics[topic].partitions[partition]
        conn = self.conns.get(node)
        if conn is not None and conn.expired and not self.in_flight.get(id(conn)):
            conn.close()  # its SASL session ends soon (KIP-368): a new connection authenticates anew
            self.in_flight.pop(id(conn), None)
            conn = None
        if conn is None:
            host, port = self.client.brokers[node]
            conn = self.conns[node] = self.client.open_connection(host, port)
            conn.check(0)
        return conn

    def _produce_request(self, topic: str, partition: int, batch: bytes):
        m = request_module(0)
        return m.ProduceRequest(transactional_id=self.transactional_id or None, acks=self.acks,
                                timeout=datetime.timedelta(milliseconds=int(self.client.timeout * 1000)),
                                topic_data=(m.TopicProduceData(name=topic, partition_data=(
                                    m.PartitionProduceData(index=partition, records=batch),)),))

    def send(self, topic: str, partition: int, batch: bytes, count: int) -> None:
        conn = self._produce_connection(topic, partition)
        queue = self.in_flight.setdefault(id(conn), collections.deque())
        while len(queue) >= self.max_in_flight:
            self._complete(queue)
        if conn not in self.conns.values():  # completing dropped it (its broker went away)
            conn = self._produce_connection(topic, partition)
            queue = self.in_flight.setdefault(id(conn), collections.deque())
        self.records_sent += count
        try:
            conn.send(self._produce_request(topic, partition, batch))
        except (OSError, ConnectionError) as exc:
            self._drop_connection(conn)
            self._settle_all()  # what was sent before this batch goes first
            code, message = self._resend(topic, partition, batch, ErrorCode.network_exception, str(exc))
            if code != ErrorCode.none:
                raise KafkaProtocolError(code, f"Produce to {topic}-{partition} (transactional id "
                                         f"{self.transactional_id!r})", message) from None
            return
        queue.append((conn, topic, partition, count, batch))

    def _complete(self, queue: collections.deque) -> None:
        conn, topic, partition, count, batch = queue.popleft()
        try:
            code, message = self._partition_error(conn.receive())
        except (OSError, ConnectionError) as exc:  # the leader went away (SIGKILL, restart)
            self._drop_connection(conn)
            code, message = ErrorCode.network_exception, str(exc)
        if code in RETRIABLE:
            # As the Java producer with idempotence: resend the same batch (same producer id,
            # epoch and sequence, so a copy the old leader did append is recognised as a
            # duplicate) to the partition's leader once metadata says who that is. Every batch
            # still in flight is settled before anything new is sent, so sequences stay in order.
            code, message = self._resend(topic, partition, batch, code, message)
            self._settle_all()
        if code != ErrorCode.none:
            raise KafkaProtocolError(code, f"Produce to {topic}-{partition} (transactional id "
                                     f"{self.transactional_id!r})", message)

    @staticmethod
    def _partition_error(resp) -> tuple[ErrorCode, str | None]:
        for rt in resp.responses:
            for rp in rt.partition_responses:
                if rp.error_code != ErrorCode.none:
                    return rp.error_code, rp.error_message
        return ErrorCode.none, None

    def _resend(self, topic: str, partition: int, batch: bytes, code: ErrorCode, message: str | None):
        """Retry one batch on a connection of its own until it is answered without a retriable
        error or ``request.timeout.ms`` has passed; returns the last (code, message)."""
        deadline = time.monotonic() + self.client.timeout
        backoff = 0.1
        while code in RETRIABLE and time.monotonic() < deadline:
            time.sleep(backoff)
            backoff = min(backoff * 2, 1.0)
            self.client.forget_leaders()  # later sends look the leader up again too
            conn = None
            try:
                meta = self.client.metadata([topic]).get(topic)
                leader = meta.partitions.get(partition, -1) if meta is not None else -1
                if leader not in self.client.brokers:  # no leader yet (an election is under way)
                    code, message = ErrorCode.leader_not_available, f"no leader for {topic}-{partition} yet"
                    continue
                conn = self.client.open_connection(*self.client.brokers[leader])
                code, message = self._partition_error(conn.request(self._produce_request(topic, partition, batch)))
            except KafkaProtocolError as exc:
                code, message = exc.code, str(exc)
            except (OSError, ConnectionError) as exc:
                code, message = ErrorCode.network_exception, str(exc)
            finally:
                if conn is not None:
                    conn.close()
        return code, message

    def _drop_connection(self, conn: Connection) -> None:
        conn.close()
        for node, c in list(self.conns.items()):
            if c is conn:
                del self.conns[node]

    def _settle_all(self) -> None:
        for queue in list(self.in_flight.values()):
            while queue:
                self._complete(queue)

    def send_record(self, topic: str, partition: int, key: bytes, value: bytes) -> None:
        """One record, in its own batch, in the open transaction (decisions, barriers)."""
        from .recordcodec import binaries, encode_batch, encode_records

        records = encode_records(binaries([key]), binaries([value]), None)
        batch = encode_batch(records, 1, timestamp_ms=int(time.time() * 1000), producer_id=self.producer_id,
                             producer_epoch=self.producer_epoch,
                             base_sequence=self.next_sequence(topic, partition, 1), transactional=True)
        self.send(topic, partition, batch, 1)

    def flush(self) -> None:
        for queue in self.in_flight.values():
            while queue:
                self._complete(queue)

    def close(self) -> None:
        for conn in self.conns.values():
            conn.close()
        self.conns.clear()
        self.in_flight.clear()

    def send_offsets(self, group_id: str, offsets: dict[tuple[str, int], tuple[int, str]]) -> None:
        """Commit ``offsets`` for ``group_id`` inside the open transaction (Kafka's
        sendOffsetsToTransaction without group metadata): AddOffsetsToTxn, then TxnOffsetCommit."""
        self.client.add_offsets_to_txn(self.transactional_id, self.producer_id, self.producer_epoch, group_id)
        self.client.txn_offset_commit(self.transactional_id, self.producer_id, self.producer_epoch, group_id, offsets)
        self.offsets_sent = True

    def commit(self) -> ErrorCode:
        """EndTxn(commit) of our transaction after every send is acknowledged; returns the code
        (NONE on success; PRODUCER_FENCED when a newer producer with our id took over)."""
        self.flush()
        code = self.client.end_txn(self.transactional_id, self.producer_id, self.producer_epoch, commit=True)
        self.partitions.clear()
        self.offsets_sent = False
        return code

    def abort(self) -> None:
        """Best effort: end our open transaction (used when the task fails)."""
        if self.producer_id >= 0 and (self.partitions or self.offsets_sent):
            self.client.end_txn(self.transactional_id, self.producer_id, self.producer_epoch, commit=False)
