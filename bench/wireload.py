"""A protocol-level producer that measures the *broker's* cost of each delivery mode.

Why it exists. The reference client cannot show the broker's idempotence cost: librdkafka's
idempotent producer keeps at most one ProduceRequest in flight per partition whatever
``max.in.flight`` says (``rd_kafka_toppar_producer_serve`` limits requests to
``RD_KAFKA_IDEMP_MAX_INFLIGHT - rktp_msgs_inflight``, and that counter holds *messages*, so any
batch of 5+ messages in flight stops the partition; open PR confluentinc/librdkafka#4989), and
while a ready batch waits behind it the broker thread wakes up without sleeping (~10× the poll
calls of an at-least-once producer, measured with ``strace -c``). On two cores that CPU is taken
from the broker under test. Kafka's published 3% was measured with the Java client, which
pipelines up to 5 requests per connection and costs little per batch.

This generator plays that role. Every mode sends the *same* pre-encoded 1 KB records in the same
batches, so the client's work is identical and small (one CRC-32C and one copy per batch); what
changes is only what the mode asks of the broker:

* ``acks`` (1 or all) and how many requests may be in flight on the connection;
* ``idempotent``: a producer id from InitProducerId, epoch and per-partition base sequences;
* ``txn_commit_ms``: a transactional id, AddPartitionsToTxn at the start of each transaction
  (transaction version 1, as the Java client without KIP-890), transactional batches, and
  EndTxn(commit) every that many milliseconds after draining the in-flight requests (what
  ``commitTransaction`` does).

One Produce request carries one batch per partition of the topic (the Java client's shape: one
request per broker, all ready partitions). Responses are checked: any partition error stops the
run with that error, so a figure is never taken from failed produces. The bench reads every
cell back afterwards, which checks that what was acknowledged is there.

Clusters. The producer routes as a Kafka client does: Metadata names each partition's leader,
and each leader gets a connection of its own with its own window of ``max_in_flight`` requests,
each request carrying one batch for every partition of the topic that node leads (the same
pre-encoded batches). A transactional producer finds its coordinator with FindCoordinator and
sends it InitProducerId, AddPartitionsToTxn (every partition, whichever node leads it) and EndTxn;
a commit waits for every node's outstanding Produce requests before the EndTxn, and no node
sends again until the next transaction's partitions are added. Against a single broker (one
broker in Metadata: oncelog with one node, Tansu, one Kafka node) nothing of this changes what
is sent: one connection, the bootstrap one, which is also the coordinator (no FindCoordinator).

Security: ``security`` is a client config in confluent-kafka's names (``security.protocol``,
``ssl.ca.location``, ``sasl.mechanism``, ``sasl.username``/``sasl.password``), read by
:func:`oncelog.client.security.resolve`; TLS is asyncio's (the standard library's ``ssl``), and
SASL is SaslHandshake v1 + SaslAuthenticate (PLAIN or SCRAM-SHA-256/512 through ``scramp``)
right after ApiVersions, so the wire-* modes run over every protocol the librdkafka modes do.
"""

from __future__ import annotations

import asyncio
import datetime
import heapq
import io
import struct
import time
from collections import deque
from dataclasses import dataclass

import crc32c
from oncelog.protocol.records import build_batch
from oncelog.client.wire import decode_response, request_module, write_request

API_PRODUCE, API_FETCH, API_METADATA, API_VERSIONS = 0, 1, 3, 18
API_SASL_HANDSHAKE, API_SASL_AUTHENTICATE = 17, 36
API_INIT_PRODUCER_ID, API_ADD_PARTITIONS, API_END_TXN = 22, 24, 26
API_FIND_COORDINATOR = 10
# The newest versions this generator speaks (classic, pre-KIP-890 clients' choices).
WANTED = {API_PRODUCE: 9, API_FETCH: 11, API_METADATA: 7, API_INIT_PRODUCER_ID: 4, API_ADD_PARTITIONS: 3, API_END_TXN: 3}
# Spoken where the broker offers it (a cluster's transactional producer needs it).
OPTIONAL = {API_FIND_COORDINATOR: 3}
TXN_TIMEOUT_MS = 60_000
_FRAME = struct.Struct(">i")
_STAMP = struct.Struct(">hiqqqhi")  # attributes .. base sequence, at batch offset 21
_CRC = struct.Struct(">I")
_BATCH_HEAD = struct.Struct(">qi")  # base offset, batch length
_ATTRS_DELTA = struct.Struct(">hi")  # attributes, last offset delta (batch offset 21)
_PID = struct.Struct(">q")  # producer id (batch offset 43)
_COUNT = struct.Struct(">i")  # record count (batch offset 57)
CONTROL_BIT = 0x20
READ_ISOLATION = {"read_uncommitted": 0, "read_committed": 1}
TRANSACTIONAL_BIT = 0x10


class WireLoadError(RuntimeError):
    """A request failed: the broker's error code or a connection problem, named."""


@dataclass(frozen=True)
class WireMode:
    acks: int  # 1 or -1
    max_in_flight: int
    idempotent: bool = False
    txn_commit_ms: int | None = None

    @classmethod
    def from_dict(cls, d: dict) -> "WireMode":
        return cls(acks=int(d["acks"]), max_in_flight=int(d["max_in_flight"]),
                   idempotent=bool(d.get("idempotent")), txn_commit_ms=d.get("txn_commit_ms"))


class BatchTemplate:
    """One partition's batch of ``count`` identical records, encoded once.

    :meth:`stamp` returns a copy with the producer id, epoch, base sequence, transactional bit
    and timestamps of this send, and its CRC recomputed: the per-batch client work, the same in
    every mode (a non-idempotent batch carries producer id -1 and sequence -1)."""

    def __init__(self, count: int, value: bytes) -> None:
        self.count = count
        self.buf = bytearray(build_batch([(None, value)] * count))

    def stamp(self, producer_id: int, epoch: int, base_sequence: int, transactional: bool, now_ms: int) -> bytes:
        buf = self.buf
        _STAMP.pack_into(buf, 21, TRANSACTIONAL_BIT if transactional else 0, self.count - 1, now_ms, now_ms,
                         producer_id, epoch, base_sequence)
        _CRC.pack_into(buf, 17, crc32c.crc32c(memoryview(buf)[21:]))
        return bytes(buf)


class Connection:
    """Pipelined request/response on one socket: responses arrive in request order (the
    protocol's guarantee per connection), so pending requests are a FIFO of futures."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str) -> None:
        self.reader, self.writer = reader, writer
        self.client_id = client_id
        self.correlation_id = 0
        self.pending: deque[tuple[int, type, asyncio.Future]] = deque()
        self.versions: dict[int, int] = {}
        self._task = asyncio.get_running_loop().create_task(self._read_loop())

    @classmethod
    async def open(cls, bootstrap: str, client_id: str, security: dict | None = None) -> "Connection":
        from oncelog.client.security import resolve

        host, port = bootstrap.rsplit(":", 1)
        sec = resolve(security or {})
        tls = {"ssl": sec.ssl_context(), "server_hostname": host} if sec.tls else {}
        reader, writer = await asyncio.open_connection(host, int(port), limit=1 << 20, **tls)
        conn = cls(reader, writer, client_id)
        m = request_module(API_VERSIONS, 3)
        resp = await conn.request(m.ApiVersionsRequest(client_software_name="oncelog-bench-wireload",
                                                       client_software_version="1"))
        offered = {k.api_key: k.max_version for k in resp.api_keys}
        for key, wanted in WANTED.items():
            if key not in offered:
                raise WireLoadError(f"broker does not offer API key {key}")
            conn.versions[key] = min(wanted, offered[key])
        for key, wanted in OPTIONAL.items():
            if key in offered:
                conn.versions[key] = min(wanted, offered[key])
        if sec.sasl:
            await conn._authenticate(sec.mechanism, sec.username, sec.password)
        return conn

    async def _authenticate(self, mechanism: str, username: str, password: str) -> None:
        """SaslHandshake v1, then the mechanism's SaslAuthenticate v1 exchange."""
        hs = await self.request(request_module(API_SASL_HANDSHAKE, 1).SaslHandshakeRequest(mechanism=mechanism))
        _check(hs.error_code, f"SaslHandshake {mechanism}")
        m = request_module(API_SASL_AUTHENTICATE, 1)

        async def step(data: bytes) -> bytes:
            r = await self.request(m.SaslAuthenticateRequest(auth_bytes=data))
            _check(r.error_code, f"SaslAuthenticate {mechanism} ({r.error_message})")
            return r.auth_bytes or b""

        if mechanism == "PLAIN":
            await step(f"\0{username}\0{password}".encode())
            return
        if not mechanism.startswith("SCRAM-"):
            raise WireLoadError(f"wireload speaks SASL PLAIN and SCRAM only, not {mechanism}")
        import scramp

        client = scramp.ScramClient([mechanism], username, password)
        client.set_server_first((await step(client.get_client_first().encode())).decode())
        client.set_server_final((await step(client.get_client_final().encode())).decode())

    def module(self, api_key: int):
        return request_module(api_key, self.versions[api_key])

    def send(self, request) -> asyncio.Future:
        self.correlation_id += 1
        out = io.BytesIO()
        out.write(b"\0\0\0\0")  # the size, patched below: no copy of a multi-MB frame
        write_request(out, request, self.correlation_id, self.client_id)
        frame = out.getbuffer()
        _FRAME.pack_into(frame, 0, len(frame) - 4)
        self.writer.write(frame)
        del frame
        fut = asyncio.get_running_loop().create_future()
        self.pending.append((self.correlation_id, type(request), fut))
        return fut

    async def request(self, request):
        fut = self.send(request)
        await self.writer.drain()
        return await fut

    async def _read_loop(self) -> None:
        try:
            while True:
                size = _FRAME.unpack(await self.reader.readexactly(4))[0]
                raw = await self.reader.readexactly(size)
                correlation_id, cls, fut = self.pending.popleft()
                got, resp = decode_response(raw, cls)
                if got != correlation_id:
                    raise WireLoadError(f"response for correlation id {got}, expected {correlation_id}")
                if not fut.done():
                    fut.set_result(resp)
        except Exception as exc:  # connection closed or broken: fail everything pending
            err = exc if isinstance(exc, WireLoadError) else WireLoadError(f"connection: {exc!r}")
            while self.pending:
                _, _, fut = self.pending.popleft()
                if not fut.done():
                    fut.set_exception(err)

    async def close(self) -> None:
        self._task.cancel()
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except Exception:
            pass


def _check(code: int, what: str) -> None:
    if code:
        raise WireLoadError(f"{what}: error code {code}")


class WireProducer:
    """Produces pre-encoded batches for ``duration`` seconds in one :class:`WireMode`.

    ``conn`` is the bootstrap connection; ``leaders`` maps each leader node to its connection
    and the partitions it leads (one entry, the bootstrap connection, against a single broker);
    ``coordinator`` is the transaction coordinator's connection (the bootstrap one when there
    is no transaction or one broker)."""

    def __init__(self, conn: Connection, topic: str, partitions: list[int], mode: WireMode,
                 batch_records: int, value: bytes, transactional_id: str | None,
                 leaders: dict[int, tuple[Connection, list[int]]] | None = None,
                 coordinator: Connection | None = None) -> None:
        self.conn, self.topic, self.partitions, self.mode = conn, topic, partitions, mode
        self.leaders = leaders or {-1: (conn, partitions)}
        self.coordinator = coordinator or conn
        self.templates = {p: BatchTemplate(batch_records, value) for p in partitions}
        self.batch_records = batch_records
        self.transactional_id = transactional_id if mode.txn_commit_ms else None
        self.producer_id, self.epoch = -1, -1
        self.sequence = dict.fromkeys(partitions, 0)
        self.acked = self.requests = self.requests_acked = self.transactions = 0
        self.acked_by_partition = dict.fromkeys(partitions, 0)
        self.max_in_flight_seen = 0  # most Produce requests outstanding at once on one connection
        self.add_partitions_retries = 0  # AddPartitionsToTxn answered CONCURRENT_TRANSACTIONS
        self.latencies: list[float] = []  # per Produce request, seconds
        self.commit_latencies: list[float] = []  # drain + EndTxn, as a committing application waits
        self.endtxn_latencies: list[float] = []  # the EndTxn round trip alone
        self.error: BaseException | None = None

    @property
    def nodes(self) -> int:
        """How many leader nodes (connections) the produce requests go to."""
        return len(self.leaders)

    @classmethod
    async def create(cls, bootstrap: str, topic: str, mode: WireMode, *, batch_records: int, value: bytes,
                     client_id: str, transactional_id: str | None, security: dict | None = None) -> "WireProducer":
        conn = await Connection.open(bootstrap, client_id, security)
        try:
            m = conn.module(API_METADATA)
            meta = await conn.request(m.MetadataRequest(topics=(m.MetadataRequestTopic(name=topic),),
                                                        allow_auto_topic_creation=False))
            (t,) = meta.topics
            _check(t.error_code, f"Metadata {topic}")
            partitions = sorted(p.partition_index for p in t.partitions)
            if len(meta.brokers) == 1:  # a single broker: it leads everything and coordinates
                producer = cls(conn, topic, partitions, mode, batch_records, value, transactional_id)
            else:
                producer = await cls._routed(conn, meta, t, mode, batch_records, value, client_id,
                                             transactional_id, security)
            if mode.idempotent or mode.txn_commit_ms:
                await producer._init_producer_id()
        except BaseException:
            await conn.close()
            raise
        return producer

    @classmethod
    async def _routed(cls, conn: Connection, meta, t, mode: WireMode, batch_records: int, value: bytes,
                      client_id: str, transactional_id: str | None, security: dict | None) -> "WireProducer":
        """A producer over a cluster: a connection per leader node of the topic's partitions
        (the bootstrap connection reused for the node it reached), the coordinator's found."""
        addresses = {b.node_id: f"{b.host}:{b.port}" for b in meta.brokers}
        bootstrap_node = next((n for n, a in addresses.items() if _same_address(a, conn)), None)
        by_leader: dict[int, list[int]] = {}
        for p in sorted(t.partitions, key=lambda p: p.partition_index):
            _check(p.error_code, f"Metadata {t.name}-{p.partition_index}")
            if p.leader_id not in addresses:
                raise WireLoadError(f"Metadata {t.name}-{p.partition_index}: leader {p.leader_id} is not a listed broker")
            by_leader.setdefault(p.leader_id, []).append(p.partition_index)
        conns: dict[int, Connection] = {} if bootstrap_node is None else {bootstrap_node: conn}
        try:
            for node in by_leader:
                if node not in conns:
                    conns[node] = await Connection.open(addresses[node], client_id, security)
            coordinator = conn
            if mode.txn_commit_ms:
                node, address = await _find_coordinator(conn, transactional_id)
                addresses.setdefault(node, address)
                if node not in conns:
                    conns[node] = await Connection.open(addresses[node], client_id, security)
                coordinator = conns[node]
        except BaseException:
            for c in conns.values():
                if c is not conn:
                    await c.close()
            raise
        producer = cls(conn, t.name, sorted(p for ps in by_leader.values() for p in ps), mode, batch_records, value,
                       transactional_id, leaders={n: (conns[n], ps) for n, ps in sorted(by_leader.items())},
                       coordinator=coordinator)
        producer._extra = [c for c in conns.values() if c is not conn]
        return producer

    async def close(self) -> None:
        """Close every connection (the bootstrap one and those to the other nodes)."""
        for c in getattr(self, "_extra", []):
            await c.close()
        await self.conn.close()

    async def _init_producer_id(self) -> None:
        conn = self.coordinator
        m = conn.module(API_INIT_PRODUCER_ID)
        kwargs = {}
        if conn.versions[API_INIT_PRODUCER_ID] >= 3:
            kwargs = {"producer_id": -1, "producer_epoch": -1}
        for _ in range(50):  # CONCURRENT_TRANSACTIONS / COORDINATOR_LOAD_IN_PROGRESS: retry
            resp = await conn.request(m.InitProducerIdRequest(
                transactional_id=self.transactional_id, transaction_timeout=datetime.timedelta(milliseconds=TXN_TIMEOUT_MS),
                **kwargs))
            if resp.error_code in (14, 51):
                await asyncio.sleep(0.1)
                continue
            _check(resp.error_code, "InitProducerId")
            self.producer_id, self.epoch = resp.producer_id, resp.producer_epoch
            return
        raise WireLoadError("InitProducerId: coordinator kept answering retriable errors")

    async def _add_partitions(self) -> None:
        """AddPartitionsToTxn for every partition. CONCURRENT_TRANSACTIONS (51) is retried after
        20 ms, as the Java client does (TransactionManager: ADD_PARTITIONS_RETRY_BACKOFF_MS): a
        broker answers it while the previous transaction's markers are still being written (EndTxn
        is answered once PrepareCommit is logged; the markers and CompleteCommit follow). Apache
        Kafka does so after nearly every commit here (its markers go through the inter-broker
        send thread); the retries count in the cell's time, as they do for a client."""
        conn = self.coordinator
        m = conn.module(API_ADD_PARTITIONS)
        for _ in range(3000):
            resp = await conn.request(m.AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=self.transactional_id, v3_and_below_producer_id=self.producer_id,
                v3_and_below_producer_epoch=self.epoch,
                v3_and_below_topics=(m.AddPartitionsToTxnTopic(name=self.topic, partitions=tuple(self.partitions)),)))
            codes = {r.partition_error_code for t in resp.results_by_topic_v3_and_below for r in t.results_by_partition}
            if codes == {51}:
                self.add_partitions_retries += 1
                await asyncio.sleep(0.02)
                continue
            for topic in resp.results_by_topic_v3_and_below:
                for r in topic.results_by_partition:
                    _check(r.partition_error_code, f"AddPartitionsToTxn {topic.name}-{r.partition_index}")
            return
        raise WireLoadError("AddPartitionsToTxn: CONCURRENT_TRANSACTIONS for a minute")

    async def _end_txn(self) -> float:
        conn = self.coordinator
        m = conn.module(API_END_TXN)
        t0 = time.monotonic()
        resp = await conn.request(m.EndTxnRequest(transactional_id=self.transactional_id,
                                                  producer_id=self.producer_id, producer_epoch=self.epoch,
                                                  committed=True))
        _check(resp.error_code, "EndTxn")
        return time.monotonic() - t0

    def _produce_request(self, conn: Connection, partitions: list[int]):
        m = conn.module(API_PRODUCE)
        now_ms = int(time.time() * 1000)
        transactional = self.transactional_id is not None
        parts = []
        for p in partitions:
            seq = self.sequence[p] if self.producer_id >= 0 else -1
            parts.append(m.PartitionProduceData(index=p, records=self.templates[p].stamp(
                self.producer_id, self.epoch, seq, transactional, now_ms)))
            if self.producer_id >= 0:
                self.sequence[p] = (self.sequence[p] + self.batch_records) & 0x7FFFFFFF
        return m.ProduceRequest(transactional_id=self.transactional_id, acks=self.mode.acks,
                                timeout=datetime.timedelta(seconds=30),
                                topic_data=(m.TopicProduceData(name=self.topic, partition_data=tuple(parts)),))

    def _on_response(self, fut: asyncio.Future, sent_at: float, slots: asyncio.Semaphore, partitions: list[int]) -> None:
        slots.release()
        if fut.cancelled():
            return
        if fut.exception() is not None:
            self.error = self.error or fut.exception()
            return
        for topic in fut.result().responses:
            for r in topic.partition_responses:
                if r.error_code:
                    self.error = self.error or WireLoadError(f"Produce {topic.name}-{r.index}: error code {r.error_code}")
                    return
        self.requests_acked += 1
        self.acked += self.batch_records * len(partitions)
        for p in partitions:
            self.acked_by_partition[p] += self.batch_records
        self.latencies.append(time.monotonic() - sent_at)

    async def _drain(self, windows: list[asyncio.Semaphore]) -> None:
        """Wait until no Produce request is outstanding on any connection."""
        for slots in windows:
            for _ in range(self.mode.max_in_flight):
                await slots.acquire()
        for slots in windows:
            for _ in range(self.mode.max_in_flight):
                slots.release()

    async def run(self, duration: float) -> tuple[float, float, float]:
        """Produce until ``duration`` has passed, then wait for the last responses (and commit the
        open transaction). Returns (t_start, t_sent, t_end) on CLOCK_MONOTONIC.

        One sender per leader connection, each with its window of ``max_in_flight`` requests.
        A transactional commit (taken by whichever sender sees it is due) closes the gate: no
        sender sends until every connection's requests are answered, EndTxn is answered, and the
        next transaction's AddPartitionsToTxn is (or the time is up)."""
        windows = {node: asyncio.Semaphore(self.mode.max_in_flight) for node in self.leaders}
        txn_ms = self.mode.txn_commit_ms
        self._gate = asyncio.Event()
        self._gate.set()
        t_start = time.monotonic()
        deadline = t_start + duration
        self._txn_open = False
        if txn_ms:
            await self._add_partitions()
            self._txn_open, self._next_commit = True, t_start + txn_ms / 1000
        senders = [self._send_loop(conn, partitions, windows[node], windows, deadline)
                   for node, (conn, partitions) in self.leaders.items()]
        if len(senders) == 1:
            await senders[0]
        else:
            await asyncio.gather(*senders)
        t_sent = time.monotonic()
        if self._txn_open and self.error is None:
            await self._commit(list(windows.values()))
        await self._drain(list(windows.values()))
        if self.error is not None:
            raise self.error
        return t_start, t_sent, time.monotonic()

    async def _send_loop(self, conn: Connection, partitions: list[int], slots: asyncio.Semaphore,
                         windows: dict[int, asyncio.Semaphore], deadline: float) -> None:
        txn_ms = self.mode.txn_commit_ms
        gate = self._gate
        try:
            while self.error is None:
                if not gate.is_set():
                    await gate.wait()
                if time.monotonic() >= deadline:
                    break
                await slots.acquire()
                if not gate.is_set() or (txn_ms and not self._txn_open) or self.error is not None:
                    slots.release()  # a commit began (or ended the run) while this sender waited
                    continue
                sent_at = time.monotonic()
                fut = conn.send(self._produce_request(conn, partitions))
                self.requests += 1
                self.max_in_flight_seen = max(self.max_in_flight_seen, len(conn.pending))
                fut.add_done_callback(lambda f, s=sent_at: self._on_response(f, s, slots, partitions))
                await conn.writer.drain()
                if txn_ms and gate.is_set() and self._txn_open and time.monotonic() >= self._next_commit:
                    gate.clear()
                    try:
                        await self._commit(list(windows.values()))
                        self._txn_open = False
                        now = time.monotonic()
                        if now < deadline:
                            await self._add_partitions()
                            self._txn_open, self._next_commit = True, now + txn_ms / 1000
                    finally:
                        gate.set()
        except Exception as exc:  # noqa: BLE001 - reported by run(), the other senders stop
            self.error = self.error or exc
            gate.set()

    async def _commit(self, windows: list[asyncio.Semaphore]) -> None:
        """commitTransaction(): every produce of the transaction answered (on every connection),
        then EndTxn."""
        t0 = time.monotonic()
        await self._drain(windows)
        if self.error is not None:
            raise self.error
        self.endtxn_latencies.append(await self._end_txn())
        self.commit_latencies.append(time.monotonic() - t0)
        self.transactions += 1


def _same_address(address: str, conn: Connection) -> bool:
    """Whether ``conn`` is connected to ``address`` (host:port as Metadata lists it)."""
    peer = conn.writer.get_extra_info("peername")
    host, _, port = address.rpartition(":")
    return bool(peer) and int(port) == peer[1] and host in (peer[0], "localhost" if peer[0] == "127.0.0.1" else peer[0])


async def _find_coordinator(conn: Connection, transactional_id: str) -> tuple[int, str]:
    """The transaction coordinator of ``transactional_id``: (node id, host:port)."""
    if API_FIND_COORDINATOR not in conn.versions:
        raise WireLoadError("a transactional producer over a cluster needs FindCoordinator, not offered")
    m = conn.module(API_FIND_COORDINATOR)
    for _ in range(100):  # COORDINATOR_LOAD_IN_PROGRESS / COORDINATOR_NOT_AVAILABLE: retry
        resp = await conn.request(m.FindCoordinatorRequest(key=transactional_id, key_type=1))
        if resp.error_code in (14, 15):
            await asyncio.sleep(0.1)
            continue
        _check(resp.error_code, f"FindCoordinator {transactional_id}")
        return resp.node_id, f"{resp.host}:{resp.port}"
    raise WireLoadError("FindCoordinator: coordinator kept answering retriable errors")


class WireFetcher:
    """A consumer's Fetch loop without the consumer: one Fetch in flight for all partitions
    (as librdkafka and the Java consumer keep per broker), 1 MB per partition and 50 MB per
    response (both clients' defaults), records counted from the batch headers without decoding
    them. At read_committed, batches of aborted transactions are skipped with the response's
    aborted-transactions list, as a client must; control batches are never counted.

    Reading back with it measures what the broker spends per isolation level (the LSO bound and
    the aborted-transactions lookup) rather than a Python consumer loop, which on two cores read
    the same topic at anywhere between 0.3 and 0.9 million records/s with the broker at 7-23% CPU.
    """

    def __init__(self, conn: Connection, topic: str, partitions: list[int], isolation: str) -> None:
        self.conn, self.topic, self.partitions = conn, topic, partitions
        self.isolation = READ_ISOLATION[isolation]
        self.records = self.bytes = self.fetches = 0
        self.by_partition = dict.fromkeys(partitions, 0)

    @classmethod
    async def create(cls, bootstrap: str, topic: str, partitions: list[int], isolation: str,
                     client_id: str, security: dict | None = None) -> "WireFetcher | RoutedFetcher":
        """A fetch loop on the bootstrap connection against a single broker; against a cluster
        (more than one broker in Metadata) a :class:`RoutedFetcher`: one loop per leader node,
        each on its own connection with its own Fetch in flight (as both clients do per broker)."""
        conn = await Connection.open(bootstrap, client_id, security)
        try:
            m = conn.module(API_METADATA)
            meta = await conn.request(m.MetadataRequest(topics=(m.MetadataRequestTopic(name=topic),),
                                                        allow_auto_topic_creation=False))
            if len(meta.brokers) == 1:
                return cls(conn, topic, partitions, isolation)
            (t,) = meta.topics
            _check(t.error_code, f"Metadata {topic}")
            addresses = {b.node_id: f"{b.host}:{b.port}" for b in meta.brokers}
            leaders = {p.partition_index: p.leader_id for p in t.partitions}
            by_node: dict[int, list[int]] = {}
            for p in partitions:
                if leaders.get(p) not in addresses:
                    raise WireLoadError(f"Metadata {topic}-{p}: no listed leader ({leaders.get(p)})")
                by_node.setdefault(leaders[p], []).append(p)
            fetchers = []
            try:
                for node, parts in sorted(by_node.items()):
                    c = conn if _same_address(addresses[node], conn) else \
                        await Connection.open(addresses[node], client_id, security)
                    fetchers.append(cls(c, topic, parts, isolation))
            except BaseException:
                for f in fetchers:
                    if f.conn is not conn:
                        await f.conn.close()
                raise
            return RoutedFetcher(conn, fetchers)
        except BaseException:
            await conn.close()
            raise

    async def close(self) -> None:
        await self.conn.close()

    def _count(self, part: int, records, pending: list[tuple[int, int]], aborting: set[int]) -> int:
        """Count the data records of one partition's records bytes; returns the next offset (or
        -1 if there was no complete batch). Aborted batches are skipped as Kafka's consumer does:
        ``pending`` holds (first offset, producer id) of aborted transactions not reached yet,
        sorted; a producer enters ``aborting`` once its first offset is reached, and leaves it
        at its next control batch (the abort marker)."""
        buf = memoryview(records) if records else memoryview(b"")
        pos, end, next_offset = 0, len(buf), -1
        while pos + 61 <= end:
            base, length = _BATCH_HEAD.unpack_from(buf, pos)
            if pos + 12 + length > end:
                break  # a partial batch at the end of the response: fetched again next time
            attrs, delta = _ATTRS_DELTA.unpack_from(buf, pos + 21)
            pid = _PID.unpack_from(buf, pos + 43)[0]
            while pending and pending[0][0] <= base:
                aborting.add(heapq.heappop(pending)[1])
            if attrs & CONTROL_BIT:
                aborting.discard(pid)
            elif not (attrs & TRANSACTIONAL_BIT and pid in aborting):
                n = _COUNT.unpack_from(buf, pos + 57)[0]
                self.records += n
                self.by_partition[part] += n
                self.bytes += length + 12
            next_offset = base + delta + 1
            pos += 12 + length
        return next_offset

    async def run(self, expected: dict[int, int], max_seconds: float, timeout: float) -> tuple[float, float, bool]:
        """Fetch from offset 0 until ``expected`` data records per partition have arrived, or
        ``max_seconds`` have passed (capped), or ``timeout``. Returns (t_start, t_end, capped)."""
        m = self.conn.module(API_FETCH)
        offsets = dict.fromkeys(self.partitions, 0)
        want = sum(expected.get(p, 0) for p in self.partitions)
        t_start = time.monotonic()
        cap, deadline = t_start + max_seconds if max_seconds else float("inf"), t_start + timeout
        capped = False
        while self.records < want:
            resp = await self.conn.request(m.FetchRequest(
                replica_id=-1, max_wait=datetime.timedelta(milliseconds=100), min_bytes=1, max_bytes=50 << 20,
                isolation_level=self.isolation, session_id=0, session_epoch=-1, forgotten_topics_data=(), rack_id="",
                topics=(m.FetchTopic(topic=self.topic, partitions=tuple(
                    m.FetchPartition(partition=p, current_leader_epoch=-1, fetch_offset=offsets[p],
                                     log_start_offset=-1, partition_max_bytes=1 << 20)
                    for p in self.partitions)),)))
            self.fetches += 1
            now = time.monotonic()
            if now > cap:
                capped = True
                break
            if now > deadline:
                break
            _check(resp.error_code, "Fetch")
            for topic in resp.responses:
                for pd in topic.partitions:
                    _check(pd.error_code, f"Fetch {self.topic}-{pd.partition_index}")
                    # per response, as Kafka's consumer (CompletedFetch): the list covers the
                    # range this response returns
                    pending = sorted((a.first_offset, a.producer_id) for a in pd.aborted_transactions or ())
                    nxt = self._count(pd.partition_index, pd.records, pending, set())
                    if nxt >= 0:
                        offsets[pd.partition_index] = nxt
        return t_start, time.monotonic(), capped



class RoutedFetcher:
    """:class:`WireFetcher` over a cluster: one per leader node, run at once; the same figures."""

    def __init__(self, conn: Connection, fetchers: list[WireFetcher]) -> None:
        self.conn, self.fetchers = conn, fetchers

    records = property(lambda self: sum(f.records for f in self.fetchers))
    bytes = property(lambda self: sum(f.bytes for f in self.fetchers))
    fetches = property(lambda self: sum(f.fetches for f in self.fetchers))
    by_partition = property(lambda self: {p: n for f in self.fetchers for p, n in f.by_partition.items()})

    async def run(self, expected: dict[int, int], max_seconds: float, timeout: float) -> tuple[float, float, bool]:
        outs = await asyncio.gather(*(f.run(expected, max_seconds, timeout) for f in self.fetchers))
        return min(o[0] for o in outs), max(o[1] for o in outs), any(o[2] for o in outs)

    async def close(self) -> None:
        for f in self.fetchers:
            if f.conn is not self.conn:
                await f.conn.close()
        await self.conn.close()


def leader_offsets(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    """{partition: (leader node, log end offset)}, each partition's offset asked of its leader
    (Metadata from ``bootstrap``, then ListOffsets per leader). Raises WireLoadError naming the
    error code if Metadata or a leader answers one."""
    from oncelog.client.wire import RawClient

    meta_m, lo_m = request_module(API_METADATA, 7), request_module(2, 7)
    client = RawClient(bootstrap, timeout=5.0)
    try:
        meta = client.request(meta_m.MetadataRequest(topics=(meta_m.MetadataRequestTopic(name=topic),),
                                                     allow_auto_topic_creation=False))
    finally:
        client.close()
    addresses = {b.node_id: f"{b.host}:{b.port}" for b in meta.brokers}
    (t,) = meta.topics
    _check(t.error_code, f"Metadata {topic}")
    by_node: dict[int, list[int]] = {}
    for p in t.partitions:
        if p.leader_id not in addresses:
            raise WireLoadError(f"Metadata {topic}-{p.partition_index}: leader {p.leader_id} is not a listed broker")
        by_node.setdefault(p.leader_id, []).append(p.partition_index)
    out = {}
    for node, parts in by_node.items():
        client = RawClient(addresses[node], timeout=5.0)
        try:
            resp = client.request(lo_m.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(
                lo_m.ListOffsetsTopic(name=topic, partitions=tuple(
                    lo_m.ListOffsetsPartition(partition_index=p, current_leader_epoch=-1, timestamp=-1)
                    for p in parts)),)))
        finally:
            client.close()
        for x in resp.topics:
            for p in x.partitions:
                _check(p.error_code, f"ListOffsets {topic}-{p.partition_index} on node {node}")
                out[p.partition_index] = (node, p.offset)
    return out


def wait_until_led(bootstrap: str, topic: str, partitions: int, timeout: float = 30.0) -> dict[int, int]:
    """Wait until every partition of a new ``topic`` is served by the leader Metadata names
    (ListOffsets, which only the leader answers, asked of each leader); returns {partition:
    leader node}. Needed before a measured cell on a cluster: Metadata can name a leader a
    moment before that node knows the topic (oncelog's followers refresh the controller's
    metadata, Apache Kafka's node updates its cache before it leads), and a Produce sent then is
    answered UNKNOWN_TOPIC_OR_PARTITION or NOT_LEADER_OR_FOLLOWER (seen on ``serve --nodes 2``)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            got = leader_offsets(bootstrap, topic)
            if len(got) == partitions:
                return {p: node for p, (node, _) in got.items()}
            last = f"{len(got)} of {partitions} partitions in Metadata"
        except (OSError, ConnectionError, WireLoadError) as exc:
            last = str(exc)
        if time.monotonic() > deadline:
            raise WireLoadError(f"{topic}: not every partition served by its leader within {timeout:g}s ({last})")
        time.sleep(0.05)
