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
from .apis._base import Applied, CloseConnection, EncodeAside, RequestContext
from .errors import KafkaError
from .faults import FaultHandle, Faults
from .notices import log_rejections
from .config.settings import BrokerConfig
from .groups.coordinator import GroupCoordinator
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
from .metadata import Metadata
from .storage.log_manager import LogManager

log = logging.getLogger("oncelog.broker")


# OffsetCommit, JoinGroup, Heartbeat, LeaveGroup, SyncGroup, TxnOffsetCommit, DeleteGroups:
# requests that may set or move a group membership deadline.
GROUP_APIS = frozenset({8, 11, 12, 13, 14, 28, 42})


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
        self.node_id = config.node_id
        # What the cluster is: topics, live configs, group configs, producer-id blocks, and the
        # documents of ACLs and SCRAM credentials. Handlers read it; it reaches the logs below
        # through the PartitionManager (the metadata's TopicLogs).
        self.metadata = Metadata(config.data_dir, node_id=config.node_id, default_config=config.log,
                                 static=config.static_layer(), group=config.group)
        live = self.metadata.configs
        self.logs = LogManager(config.data_dir, config.fsync,
                               checkpoint_interval_ms=config.log_flush_offset_checkpoint_interval_ms,
                               retention_check_interval_ms=config.log_retention_check_interval_ms,
                               compaction_interval_ms=lambda: live.compaction_interval_ms, clock=clock)
        # Every partition's log with its producer state and aborted transactions: what handlers use.
        self.partitions = PartitionManager(self.logs, live, self.metadata, node_id=config.node_id)
        self.metadata.topics.logs = self.partitions
        self.advertised: tuple[str, int] = (config.host, config.port)
        self.listening: tuple[str, int] = (config.host, config.port)
        # listener name -> (security protocol, bound (host, port), advertised (host, port)), as bound
        self._bound: dict[str, tuple[str, tuple[str, int], tuple[str, int]]] = {}
        self._sasl: dict[str, SaslServerMechanisms] = {}
        self.groups: GroupCoordinator | None = None
        self.offsets_topic: OffsetsTopic | None = None
        self.txn: TransactionCoordinator | None = None
        self.markers: MarkerWriter | None = None
        # FindCoordinator key types served: 0 = groups, 1 = transactions.
        self.coordinator_key_types = {0, 1}
        self._group_timer: asyncio.TimerHandle | None = None
        self._group_timer_at = 0

    def open(self) -> None:
        self.metadata.open(self.logs)
        self.acls = AclStore.for_broker(self.metadata.store, self.config)  # ACLs and the authorizer
        self.scram_credentials = ScramCredentialStore(self.metadata.store)  # KIP-554, SCRAM's credentials
        # Each SASL listener's mechanisms now, so that a bad JWKS or JAAS text stops the start
        # (cli serve reports JwksConfigError/JaasConfigError as a configuration error).
        for lc in self.config.all_listeners():
            if lc.sasl:
                self.sasl_for(lc.name)
        self.partitions.open()
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
        # The two coordinators meet only here, through callbacks: markers reaching
        # __consumer_offsets settle the group side's pending transactional offsets, and the
        # transaction side asks where a group's offsets live (AddOffsetsToTxn, TxnOffsetCommit).
        self.markers = MarkerWriter(self.partitions, self.clock, on_txn_marker=self.groups.complete_txn_offsets,
                                    faults=self.faults)
        txn_topic = TransactionStateTopic(self.partitions, self.config.transaction_topic_partitions,
                                          self.config.transaction_topic_segment_bytes, faults=self.faults)
        offsets_topic = self.offsets_topic
        self.txn = TransactionCoordinator(
            self.clock, producer_ids.allocate, txn_topic.persist, self.markers.write,
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
            except Exception:
                log.exception("coordinator timer failed")

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

    def handle_frame(self, frame: bytes, peer: str, session: Session | None = None):
        try:
            api_key, version, correlation_id = codec.peek_header(frame)
        except codec.DecodeError as exc:  # a frame shorter than a request header
            raise ProtocolViolation(str(exc)) from None
        module = apis.HANDLERS.get(api_key)
        if module is None:
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
            return Applied(self._finish(correlation_id, result.awaitable, check, request))
        if inspect.isawaitable(result):
            return self._finish(correlation_id, result, check, request)
        if check is not None:
            self._log_rejections(ctx, result, request)
        return codec.encode_response(correlation_id, result)

    async def _finish(self, correlation_id: int, awaitable, ctx=None, request=None):
        response = await awaitable
        aside = isinstance(response, EncodeAside)
        if aside:
            response = response.response
        if ctx is not None:
            self._log_rejections(ctx, response, request)
        if aside:
            return await asyncio.to_thread(codec.encode_response, correlation_id, response)
        return codec.encode_response(correlation_id, response)

    @staticmethod
    def _log_rejections(ctx, response, request) -> None:
        try:
            log_rejections(log, type(response).__name__.removesuffix("Response"), ctx, response, request)
        except Exception:  # logging must never fail a request
            log.debug("could not inspect a %s response for rejections", type(response).__name__, exc_info=True)
