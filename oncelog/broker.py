"""The broker: configuration, state, and request dispatch — no sockets.

:meth:`Broker.handle_frame` takes one request frame and returns what to send back: encoded
response chunks, an awaitable of them, an :class:`~oncelog.apis._base.Applied` wrapping such an
awaitable (the request's effects are applied; only its response waits), None (no response,
as for Produce with acks=0), or a :class:`~oncelog.apis._base.CloseConnection` (no response,
and the connection is to be closed once the answers before it are written).
It raises :class:`ProtocolViolation` for a frame that cannot be answered; the server then
closes that connection (and only that one).

Dispatch rules:
* An ApiVersions request of a version we do not know is answered with a v0 response carrying
  UNSUPPORTED_VERSION and our ranges (KIP-511).
* Any other unknown API key or version outside the advertised range is a protocol violation.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import socket
import time
from typing import Callable

from kio.schema.errors import ErrorCode

from . import apis
from .config import registry
from .apis import api_versions
from .apis._base import Applied, CloseConnection, EncodeAside, RequestContext, response_module
from .errors import KafkaError
from .faults import FaultHandle, Faults
from .notices import log_rejections
from .config.settings import BrokerConfig
from .groups.coordinator import GroupCoordinator
from .groups.share_coordinator import ShareCoordinator
from .groups.store import OffsetsTopic
from .partition import PartitionManager
from .txn.coordinator import TransactionCoordinator
from .txn.markers import MarkerWriter
from .txn.store import TransactionStateTopic
from .security.acls import AclStore
from .security.jwt import JWKS_ENDPOINT_URL, JwksValidator
from .security.sasl import SaslServerMechanisms, UnsecuredJwsValidator, plain_users_from_jaas
from .security.session import Session
from .security.scram import ScramCredentialStore
from .protocol import codec
from .protocol.requests import decode_response
from .cluster import CONTROL_LISTENER, CONTROLLER_ID, NODE_PRINCIPAL, Placement, logs_dir
from .cluster.node import ClusterNode
from .metadata import Metadata
from .config.settings import metrics_address
from .metrics import BrokerMetrics, error_codes
from .storage.log_manager import LogManager

log = logging.getLogger("oncelog.broker")


# OffsetCommit, JoinGroup, Heartbeat, LeaveGroup, SyncGroup, TxnOffsetCommit, DeleteGroups:
# requests that may set or move a group membership deadline.
GROUP_APIS = frozenset({8, 11, 12, 13, 14, 28, 42})


# Requests that change the cluster's metadata: a follower node forwards them to the controller.
# CreateTopics, DeleteTopics, CreateAcls, DeleteAcls, AlterConfigs, CreatePartitions,
# IncrementalAlterConfigs, AlterUserScramCredentials.
FORWARDED_APIS = frozenset({19, 20, 30, 31, 33, 37, 44, 51})
ENVELOPE = 58


def _from_node(session: Session | None) -> bool:
    """A request on a cluster's control socket (another node's)."""
    return session is not None and session.listener == CONTROL_LISTENER and session.principal == NODE_PRINCIPAL


class ProtocolViolation(Exception):
    pass


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


class Broker:
    def __init__(self, config: BrokerConfig, clock: Callable[[], int] = wall_clock_ms) -> None:
        self.config = config
        self.clock = clock  # milliseconds; the coordinators, the markers and handlers take time from it
        # Faults a test injects (in-process, or ``oncelog serve`` from its environment): the
        # stores and the markers consult it at named points; handle_frame its control functions.
        self.faults = Faults()
        # Counted only with a metrics endpoint (oncelog.metrics.listener): off, the hot path pays nothing.
        self.metrics = BrokerMetrics(self) if metrics_address(config.metrics_listener) is not None else None
        self.metrics_address: tuple[str, int] | None = None  # the endpoint's bound address, once serving
        self.node_id = config.node_id
        # One node, or node ``node_id`` of a cluster of processes (oncelog.cluster): which
        # partitions and coordinators are this process's.
        self.placement = Placement(config.nodes, config.node_id)
        clustered = self.placement.clustered
        # What the cluster is: topics, live configs, group configs, producer-id blocks, and the
        # documents of ACLs and SCRAM credentials. Handlers read it; it reaches the logs below
        # through the PartitionManager (the metadata's TopicLogs). A cluster's controller
        # (node 1) writes it; the other nodes follow it.
        self.metadata = Metadata(config.data_dir, node_id=CONTROLLER_ID if clustered else config.node_id,
                                 default_config=config.log, static=config.static_layer(), group=config.group,
                                 follower=clustered and not self.placement.is_controller, nodes=config.nodes)
        live = self.metadata.configs
        self.logs = LogManager(logs_dir(config.data_dir, self.placement), config.fsync,
                               checkpoint_interval_ms=config.log_flush_offset_checkpoint_interval_ms,
                               retention_check_interval_ms=config.log_retention_check_interval_ms,
                               compaction_interval_ms=lambda: live.compaction_interval_ms, clock=clock,
                               here=self.placement.leads if clustered else None)
        if self.metrics is not None:
            self.logs.flusher.on_round = self.metrics.flushed
        # Every partition's log with its producer state and aborted transactions: what handlers use.
        self.partitions = PartitionManager(self.logs, live, self.metadata, node_id=config.node_id,
                                           placement=self.placement)
        if self.metrics is not None:
            self.partitions.on_topic_deleted = self.metrics.forget_topic
        self.cluster: ClusterNode | None = ClusterNode(self) if clustered else None
        self.metadata.topics.logs = self.partitions
        self.advertised: tuple[str, int] = (config.host, config.port)
        self.listening: tuple[str, int] = (config.host, config.port)
        # listener name -> (security protocol, bound (host, port), advertised (host, port)), as bound
        self._bound: dict[str, tuple[str, tuple[str, int], tuple[str, int]]] = {}
        self._sasl: dict[str, SaslServerMechanisms] = {}
        self.groups: GroupCoordinator | None = None
        self.offsets_topic: OffsetsTopic | None = None
        self.txn: TransactionCoordinator | None = None
        self.txn_topic: TransactionStateTopic | None = None
        self.markers: MarkerWriter | None = None
        # FindCoordinator key types served: 0 = groups, 1 = transactions.
        self.coordinator_key_types = {0, 1}
        self._group_timer: asyncio.TimerHandle | None = None
        self._group_timer_at = 0

    def open(self) -> None:
        if self.placement.clustered and not self.placement.is_controller:
            self.metadata.open_follower(self.logs)
        else:
            self.metadata.open(self.logs)
        self.acls = AclStore.for_broker(self.metadata.store, self.config)  # ACLs and the authorizer
        self.scram_credentials = ScramCredentialStore(self.metadata.store)  # KIP-554, SCRAM's credentials
        # Each SASL listener's mechanisms now, so that a bad JWKS or JAAS text stops the start
        # (cli serve reports JwksConfigError/JaasConfigError as a configuration error).
        for lc in self.config.all_listeners():
            if lc.sasl:
                self.sasl_for(lc.name)
        self.partitions.open()
        if self.cluster is not None:
            self.cluster.opened()
        if self.placement.clustered:
            self.metadata.producer_ids = self.cluster.producer_ids()
            self.acls.authorizer.super_users = self.acls.authorizer.super_users | {NODE_PRINCIPAL}
        else:
            self.node_id = self.metadata.node_id
        producer_ids = self.metadata.producer_ids
        self.offsets_topic = OffsetsTopic(self.partitions, self.config.offsets_topic_partitions,
                                          self.config.offsets_topic_segment_bytes, faults=self.faults)
        topics = self.metadata.topics
        # KIP-848's GROUP config resource: each group's own consumer.* settings, which the
        # coordinator reads at every use (so an IncrementalAlterConfigs applies at once).
        self.groups = GroupCoordinator(
            self.clock, self.offsets_topic.persist, self.config.group,
            topics=lambda: {t.name: (t.topic_id, t.partitions) for t in topics.values()},
            group_configs=self.metadata.group_configs.consumer_settings)
        loaded = self.offsets_topic.replay(self.groups)
        self.groups.finish_load()
        log.info("group coordinator loaded %d record(s): %d group(s)", loaded, len(self.groups.groups))
        # Share groups (KIP-932): membership in the same namespace of group ids, share partitions
        # and their state (__share_group_state) on the partitions' leader.
        classic_or_consumer = self.groups.groups
        self.share = ShareCoordinator(
            self.partitions, self.clock, self.placement,
            topics=lambda: {t.name: (t.topic_id, t.partitions) for t in topics.values() if not t.internal},
            settings=self.metadata.group_configs.share_settings,
            other_type=lambda g: None if g not in classic_or_consumer else type(classic_or_consumer[g]).__name__,
            topic_ids=lambda: set(topics.by_id), max_size=self.config.group.share_max_size,
            max_sessions=self.config.group.share_max_share_sessions)
        # The two coordinators meet only here, through callbacks: markers reaching
        # __consumer_offsets settle the group side's pending transactional offsets, and the
        # transaction side asks where a group's offsets live (AddOffsetsToTxn, TxnOffsetCommit).
        self.markers = MarkerWriter(self.partitions, self.clock, on_txn_marker=self.groups.complete_txn_offsets,
                                    faults=self.faults)
        txn_topic = self.txn_topic = TransactionStateTopic(
            self.partitions, self.config.transaction_topic_partitions, self.config.transaction_topic_segment_bytes,
            faults=self.faults)
        offsets_topic = self.offsets_topic
        write_markers = self.cluster.marker_writer(self.markers).write if self.cluster else self.markers.write
        self.txn = TransactionCoordinator(
            self.clock, producer_ids.allocate, txn_topic.persist, write_markers,
            offsets_partition=lambda group_id: (offsets_topic.name, offsets_topic.partition_for(group_id)),
            persist_expired=txn_topic.persist_expired, config=self.config.txn)
        loaded = txn_topic.replay(self.txn)
        self.txn.recover()
        log.info("transaction coordinator loaded %d record(s): %d transactional id(s)", loaded, len(self.txn))

    def schedule_group_timer(self) -> None:
        """Arm one loop timer (``loop.call_at``) for the group coordinator's next deadline, so
        session, rebalance and initial-delay deadlines fire on time rather than on a poll."""
        deadline = self.groups.next_deadline_ms()
        if deadline is None:
            return
        if self._group_timer is not None:
            if self._group_timer_at <= deadline:
                return  # an earlier (or the same) wake-up is armed; it re-arms after ticking
            self._group_timer.cancel()
        loop = asyncio.get_running_loop()
        delay_s = max(deadline - self.clock() + 1, 0) / 1000
        self._group_timer_at = deadline
        self._group_timer = loop.call_at(loop.time() + delay_s, self._on_group_timer)

    def _on_group_timer(self) -> None:
        self._group_timer = None
        try:
            self.groups.tick()
        except Exception:
            log.exception("group coordinator timer failed")
        self.schedule_group_timer()

    async def tick_task(self, interval_s: float = 0.1) -> None:
        """Drives the transaction coordinator's timeouts, and the group coordinator's offset
        expiry (its membership deadlines have a timer of their own: schedule_group_timer)."""
        group_every = max(int(1.0 / interval_s), 1)
        n = 0
        while True:
            await asyncio.sleep(interval_s)
            n += 1
            try:
                if n % group_every == 0:
                    self.groups.tick()
                    self.schedule_group_timer()
                for txn_id in self.txn.tick():
                    log.info("transaction %s timed out: aborting it and fencing its producer", txn_id)
                self.share.tick()  # acquisition locks and share group members (100 ms is precise enough)
            except Exception:
                log.exception("coordinator timer failed")

    def coordinator_node(self, key_type: int, key: str) -> int:
        """The node coordinating a group (key type 0) or transactional id (1): the leader of
        its ``__consumer_offsets`` / ``__transaction_state`` partition (Kafka's placement)."""
        if not self.placement.clustered:
            return self.node_id
        internal = self.offsets_topic if key_type == 0 else self.txn_topic
        return self.placement.leader(internal.name, internal.partition_for(key))

    def coordinator_error(self, key_type: int, key: str) -> KafkaError | None:
        """NOT_COORDINATOR for a group or transactional id another node of the cluster
        coordinates (a client with a stale FindCoordinator answer, or a hostile one), else None."""
        if not self.placement.clustered or key is None:
            return None
        node = self.coordinator_node(key_type, key)
        if node == self.node_id:
            return None
        from .errors import NotCoordinator

        what = "group" if key_type == 0 else "transactional id"
        return NotCoordinator(f"node {node} coordinates {what} {key!r}, not node {self.node_id}")

    def partition_exists(self, topic: str, partition: int) -> bool:
        t = self.metadata.topics.get(topic)
        return t is not None and 0 <= partition < t.partitions

    def offset_fetch_error(self, group_id: str, topic: str, partition: int) -> KafkaError | None:
        """require_stable OffsetFetch: UnstableOffsetCommit while a transactional commit of
        this partition's offset awaits its marker, else None."""
        try:
            self.groups.check_stable_offset(group_id, topic, partition)
        except KafkaError as exc:
            return exc
        return None

    def set_listening(self, host: str, port: int, listener: str | None = None) -> None:
        """A listener is bound (``port`` is the real one when 0 was asked): what Metadata hands
        out to its clients is its ``advertised.listeners`` entry, else this address (the host's
        name for a wildcard, as Kafka). The first listener's is also :attr:`advertised`."""
        listeners = {lc.name: lc for lc in self.config.all_listeners()}
        lc = listeners[listener] if listener is not None else next(iter(listeners.values()))
        if lc.advertised:
            advertised = lc.advertised
        elif host in ("0.0.0.0", "::", ""):
            # Listening on every interface, nothing advertised: Kafka hands out the machine's
            # canonical host name (InetAddress.getCanonicalHostName), never the wildcard.
            advertised = (socket.getfqdn(), port)
        else:
            advertised = (host, port)
        self._bound[lc.name] = (lc.security_protocol, (host, port), advertised)
        first = next(iter(listeners))
        if lc.name == first:
            self.listening, self.advertised = (host, port), advertised
        static = self.metadata.configs.layers.static
        static["listeners"] = self._listeners_text(1)
        if any(lc.advertised for lc in listeners.values()):
            static["advertised.listeners"] = self._listeners_text(2)

    def _listeners_text(self, which: int) -> str:
        return ",".join(f"{name}://{bound[which][0]}:{bound[which][1]}" for name, bound in self._bound.items())

    def sasl_for(self, listener: str) -> SaslServerMechanisms:
        """The SASL mechanisms a listener offers, with what each checks credentials against
        (OAUTHBEARER: signed tokens against the JWKS of sasl.oauthbearer.jwks.endpoint.url, read
        here once, else unsecured JWS)."""
        found = self._sasl.get(listener)
        if found is None:
            lc = next((lc for lc in self.config.all_listeners() if lc.name == listener), None)
            jaas = dict(lc.jaas) if lc is not None else {}
            oauthbearer = None
            if "OAUTHBEARER" in jaas:
                oauth_settings = dict(lc.oauthbearer) if lc is not None else {}
                oauthbearer = (JwksValidator.from_configs(oauth_settings) if oauth_settings.get(JWKS_ENDPOINT_URL)
                               else UnsecuredJwsValidator.from_jaas(jaas["OAUTHBEARER"]))
            found = SaslServerMechanisms(
                enabled=lc.sasl_mechanisms if lc is not None else (),
                plain_users=plain_users_from_jaas(jaas["PLAIN"]) if "PLAIN" in jaas else None,
                scram_credentials=self.scram_credentials,
                oauthbearer=oauthbearer,
                clock=self.clock)
            self._sasl[listener] = found
        return found

    def advertised_for(self, listener: str) -> tuple[str, int]:
        """The address Metadata, FindCoordinator and DescribeCluster give a client of this listener."""
        bound = self._bound.get(listener)
        return bound[2] if bound is not None else self.advertised

    def describe_config(self) -> dict[str, str | None]:
        """Broker config name -> value in force, for DescribeConfigs: the settings, the real
        listeners, and from the config layers the topic defaults (log.*) and the dynamic ones."""
        values: dict[str, str | None] = dict(self.config.describe())
        values["listeners"] = self._listeners_text(1) or f"PLAINTEXT://{self.listening[0]}:{self.listening[1]}"
        values["advertised.listeners"] = (self._listeners_text(2)
                                          or f"PLAINTEXT://{self.advertised[0]}:{self.advertised[1]}")
        layers = self.metadata.configs.layers
        for name, d in registry.BROKER_CONFIGS.items():
            if name in registry.TOPIC_SYNONYM_NAMES or (d.dynamic and name in values) or name not in values:
                # The rest (ssl.*, sasl.*, ...) as given at start, else the default; a PASSWORD's
                # value is never shown (registry.describe_broker).
                values[name] = layers.value(name)
        return values

    # ------------------------------------------------------------------ dispatch

    def control(self, api_key: int, fn, count: int = 0) -> FaultHandle:
        """Intercept requests of ``api_key`` (franz-go kfake's ControlKey): ``fn(ctx, request)``
        runs before the API's handler and answers (returns what a handler returns) or passes the
        request on (None). ``count`` answers, 0 = until ``handle.remove()``."""
        return self.faults.control(api_key, fn, count)

    def connection_closed(self, session: Session | None, peer: str) -> None:
        """A client connection closed: the share sessions it made end, and their members'
        acquired records become available again (Kafka's ShareSessionCache on a disconnect)."""
        self.share.connection_closed(id(session) if session is not None else peer)  # as apis._share.connection_of

    def handle_frame(self, frame: bytes, peer: str, session: Session | None = None):
        try:
            api_key, version, correlation_id = codec.peek_header(frame)
        except codec.DecodeError as exc:  # a frame shorter than a request header
            raise ProtocolViolation(str(exc)) from None
        module = apis.HANDLERS.get(api_key)
        if module is None:
            if api_key == ENVELOPE and version == 0 and self.cluster is not None and _from_node(session):
                try:
                    _, envelope = codec.decode_request(frame, api_key, version)
                except codec.DecodeError as exc:
                    raise ProtocolViolation(str(exc)) from None
                return self._open_envelope(correlation_id, envelope, peer)
            raise ProtocolViolation(f"unknown API key {api_key}")
        if not module.MIN_VERSION <= version <= module.MAX_VERSION:
            if api_key == api_versions.API_KEY:
                response = api_versions.response_for(0, ErrorCode.unsupported_version)
                return codec.encode_response(correlation_id, response, header_v0=True)
            raise ProtocolViolation(f"{module.__name__.rsplit('.', 1)[-1]} v{version} is not supported "
                                    f"(v{module.MIN_VERSION}-{module.MAX_VERSION})")
        try:
            header, request = codec.decode_request(frame, api_key, version)
        except codec.DecodeError as exc:
            raise ProtocolViolation(str(exc)) from None
        if self.cluster is not None:
            # A cluster's metadata changes are the controller's (KIP-590's forwarding, in an
            # Envelope that carries the client's principal); a node's Envelope is answered here.
            if api_key in FORWARDED_APIS and not self.placement.is_controller and not _from_node(session):
                forwarded = self.cluster.forward(frame, peer, session)
                if self.metrics is not None:  # its errors, from the controller's answer (Kafka's count)
                    return self._count_forwarded(forwarded, api_key, version)
                return forwarded
        if session is None:
            ctx = RequestContext(self, version, correlation_id, header.client_id, peer)
        else:
            ctx = RequestContext(self, version, correlation_id, header.client_id, peer, session.listener,
                                 session.principal, session)
        # A test's control function answers first, or passes the request on (oncelog.faults).
        result = self.faults.answer(api_key, ctx, request) if self.faults.controls else None
        if result is None:
            result = module.handle(ctx, request)
        if api_key in GROUP_APIS:
            self.schedule_group_timer()
        if result is None or isinstance(result, CloseConnection):
            return result
        # Produce logs its own rejections (with the reason); Fetch is the hot path.
        check = ctx if api_key not in (0, 1) else None
        if isinstance(result, Applied):
            return Applied(self._finish(correlation_id, result.awaitable, check, request, api_key))
        if inspect.isawaitable(result):
            return self._finish(correlation_id, result, check, request, api_key)
        if check is not None:
            self._log_rejections(ctx, result, request)
        if self.metrics is not None:
            self.metrics.errors_in(api_key, error_codes(api_key, result))
        return codec.encode_response(correlation_id, result)

    async def _count_forwarded(self, forwarded, api_key: int, version: int):
        chunks = await forwarded
        try:
            _, response = decode_response(b"".join(chunks)[4:], codec.request_class(api_key, version))
            self.metrics.errors_in(api_key, error_codes(api_key, response))
        except Exception:  # counting must never fail the answer
            log.debug("could not count the errors of a forwarded answer", exc_info=True)
        return chunks

    async def _open_envelope(self, correlation_id: int, envelope, peer: str):
        """A request another node forwarded (see handle_frame), handled as its client's
        principal; the answer goes back inside an EnvelopeResponse. With metrics it counts as
        its own API, not as an Envelope (Kafka's controller counts it so)."""
        began = time.monotonic()
        principal = (envelope.request_principal or b"").decode("utf-8", "replace")
        m = response_module(ENVELOPE, 0)
        if not principal or principal.startswith("Node:"):
            return codec.encode_response(correlation_id, m.EnvelopeResponse(
                response_data=None, error_code=ErrorCode.principal_deserialization_failure))
        host = envelope.client_host_address.decode("ascii", "replace") or peer
        inner = Session("FORWARDED", False, principal)
        try:
            result = self.handle_frame(envelope.request_data, host, inner)
        except ProtocolViolation as exc:
            log.warning("a forwarded request from %s could not be handled: %s", host, exc)
            return codec.encode_response(correlation_id, m.EnvelopeResponse(
                response_data=None, error_code=ErrorCode.invalid_request))
        if isinstance(result, Applied):
            result = result.awaitable
        handled = time.monotonic()
        if inspect.isawaitable(result):
            result = await result
        if self.metrics is not None:
            try:
                inner_key, inner_version, _ = codec.peek_header(envelope.request_data)
                done = time.monotonic()
                self.metrics.request_times(inner_key, inner_version, began, began, handled, done, done)
            except codec.DecodeError:
                pass
        data = b"".join(result)[4:] if result else None
        return codec.encode_response(correlation_id, m.EnvelopeResponse(response_data=data, error_code=ErrorCode.none))

    async def _finish(self, correlation_id: int, awaitable, ctx=None, request=None, api_key: int = -1):
        response = await awaitable
        if response is None or isinstance(response, CloseConnection):
            # A test's fault that handled the request (oncelog.testing.faults): an acks=0 Produce
            # answers nothing; a lost answer closes the connection once those before it are out.
            return response or []
        aside = isinstance(response, EncodeAside)
        if aside:
            response = response.response
        if ctx is not None:
            self._log_rejections(ctx, response, request)
        if self.metrics is not None and api_key >= 0:
            self.metrics.errors_in(api_key, error_codes(api_key, response))
        if aside:
            return await asyncio.to_thread(codec.encode_response, correlation_id, response)
        return codec.encode_response(correlation_id, response)

    @staticmethod
    def _log_rejections(ctx, response, request) -> None:
        try:
            log_rejections(log, type(response).__name__.removesuffix("Response"), ctx, response, request)
        except Exception:  # logging must never fail a request
            log.debug("could not inspect a %s response for rejections", type(response).__name__, exc_info=True)
