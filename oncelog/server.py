"""The only module that touches sockets: an asyncio transport in front of :class:`Broker`.

Per connection, requests are processed one at a time, in order, as Kafka's network layer does
(it mutes a connection while one of its requests is being processed): a request is dispatched
only once every earlier request on the connection has finished, so it sees all their effects (a
ListOffsets pipelined right after a DeleteRecords answers the new log start). Clients may still
pipeline; the frames wait here. One exception keeps pipelined producers fast: an acks=all
Produce whose records are appended and that only waits for its fsync (``Applied``) lets the
next *Produce* on the connection start, so consecutive produces share one group-commit fsync;
any other request waits until those produces are answered. Responses are written strictly in
request order.

Bad input only ever closes the connection it came on, and every resource a client can make the
broker hold is bounded (Kafka's names; each is a ``serve`` option and in DescribeConfigs):

* ``socket.request.max.bytes``: a larger size prefix closes the connection before anything is
  allocated for the frame; a frame's buffer grows as its bytes arrive (protocol/framing.py).
* ``queued.max.request.bytes``: the bytes of requests received and not yet answered, over all
  connections (frames being received count as they are allocated). At the limit, a connection
  that reads stops reading (``pause_reading``, Kafka's muted channel) until the total drops;
  one frame already being received may finish meanwhile (the *exceed token*), so a frame larger
  than what is left always completes and the broker never deadlocks on its own memory.
  Bound: the limit + one frame + one read (64 KiB) per connection.
* ``max.connections`` / ``max.connections.per.ip``: a connection over either is closed at once.
  Connections are counted when accepted, before a TLS handshake (Kafka's ConnectionQuotas): the
  handshake runs after the count (:class:`_TlsListener`, at most ``TLS_HANDSHAKE_TIMEOUT_S``), so
  idle half-open TLS connections cannot hold more than the quotas allow.
* ``sasl.server.max.receive.size``: on a SASL listener, until the connection's first
  authentication completes, frames over this size (512 KiB, Kafka's default) close the
  connection, and those frames are held outside ``queued.max.request.bytes`` (Kafka reads them
  outside its memory pool): unauthenticated clients can neither take request memory from
  authenticated ones nor declare 100 MiB frames.
* ``connections.max.idle.ms``: a connection with nothing received, in progress or queued for
  that long is closed (one periodic sweep over the connections, no timer per connection).
* ``oncelog.request.read.timeout.ms`` (oncelog's own): a frame must arrive completely within
  this long of its first byte (slowloris), not counting time the broker itself paused reading.
  The connection is closed and its partial frame freed.

Logging: one WARNING line per offending connection (address, client id when known, API and
version, what was wrong), at most ``BAD_INPUT_LINES_PER_S`` a second overall, the rest
summarised ("suppressed K more"); never a traceback for a client's mistake. A broker bug (an
exception other than :class:`ProtocolViolation` while handling a request) is logged at ERROR,
with a traceback at most once a minute.
"""

from __future__ import annotations

import asyncio
import collections
import ctypes
import datetime
import itertools
import logging
import os
import resource
import signal
import socket
import struct
import time

from kio.schema.errors import ErrorCode

from .apis import HANDLERS, api_versions
from .apis._base import NO_THROTTLE, Applied, CloseConnection, build, response_module
from .broker import ENVELOPE, Broker, ProtocolViolation
from .cluster import CONTROL_LISTENER, NODE_PRINCIPAL
from .config.settings import metrics_address
from .metrics import MetricsEndpoint, RequestTiming
from .security import tls
from .security.sasl import SaslAuthenticationFailed
from .security.session import API_VERSIONS, SASL_APIS, SASL_HANDSHAKE, SaslState, Session, Verdict
from .protocol import codec
from .protocol.framing import SCRATCH_BYTES, BufferedFrameReader, FrameTooLarge, InvalidFrame

log = logging.getLogger("oncelog.server")

MAX_IN_FLIGHT = 1000  # pipelined requests per connection before we stop reading
TLS_HANDSHAKE_TIMEOUT_S = 10.0  # a TLS connection not through its handshake by then is closed
PRODUCE = 0
MIN_READ = 64 * 1024  # a read over queued.max.request.bytes takes at most this much
# glibc keeps freed request buffers on its heap (its mmap threshold rises to the largest buffer
# freed), so memory freed by closed connections would stay resident: the sweep gives it back
# with malloc_trim once this much was freed, at most every TRIM_EVERY_S.
TRIM_AFTER_BYTES = 16 * 1024 * 1024
TRIM_EVERY_S = 5.0
CONNECTION_BYTES = 16 * 1024  # what a closed connection's transport and state are counted as freeing
BAD_INPUT_LINES_PER_S = 10
TRACEBACK_EVERY_S = 60.0
_PAUSE_IN_FLIGHT = 1
_PAUSE_MEMORY = 2


class RateLimitedLog:
    """At most ``per_second`` lines a second through it; the others are counted, and the next
    line written (or :meth:`flush`, called by the server's sweep) says how many were suppressed."""

    def __init__(self, logger: logging.Logger, per_second: int = BAD_INPUT_LINES_PER_S, clock=time.monotonic) -> None:
        self.logger = logger
        self.per_second = per_second
        self.clock = clock
        self.window = 0.0
        self.written = 0
        self.suppressed = 0

    def log(self, level: int, fmt: str, *args, exc_info=None) -> bool:
        now = self.clock()
        if now - self.window >= 1.0:
            self.flush(now)
            self.window, self.written = now, 0
        if self.written >= self.per_second:
            self.suppressed += 1
            return False
        self.written += 1
        self.logger.log(level, fmt, *args, exc_info=exc_info)
        return True

    def flush(self, now: float | None = None) -> None:
        now = self.clock() if now is None else now
        if self.suppressed and now - self.window >= 1.0:
            self.logger.warning("suppressed %d more bad-input or connection warning(s) in the last %.1fs",
                                self.suppressed, now - self.window)
            self.suppressed = 0


class Limits:
    """One server's resource limits and their shared state: the request memory pool
    (queued.max.request.bytes), connection counts, the idle/read-timeout sweep, the scratch
    read buffer every connection's reader shares, and the rate-limited bad-input log."""

    def __init__(self, config) -> None:
        self.max_frame = config.socket_request_max_bytes
        q = config.queued_max_request_bytes
        self.memory_limit = q if q > 0 else None
        self.sasl_max_receive = config.sasl_server_max_receive_size
        self.max_connections = config.max_connections
        self.max_per_ip = config.max_connections_per_ip
        idle = config.connections_max_idle_ms
        self.idle_s = idle / 1000 if idle >= 0 else None
        timeout = config.request_read_timeout_ms
        self.read_timeout_s = timeout / 1000 if timeout > 0 else None
        self.scratch = bytearray(SCRATCH_BYTES)
        self.used = 0  # bytes of requests received and not yet answered, over all connections
        self.waiting: dict[KafkaConnection, None] = {}  # paused for memory, in pause order
        self.exceeder: KafkaConnection | None = None  # may finish its frame over the limit
        self.connections: set[KafkaConnection] = set()
        self.per_ip: collections.Counter = collections.Counter()
        self.bad = RateLimitedLog(log)
        self.last_traceback = -TRACEBACK_EVERY_S
        self.freed = 0  # bytes released since the last malloc_trim
        self.last_trim = -TRIM_EVERY_S

    def budget(self) -> int | None:
        if self.memory_limit is None:
            return None
        return max(self.memory_limit - self.used, MIN_READ)

    def over(self) -> bool:
        return self.memory_limit is not None and self.used >= self.memory_limit

    def release(self, nbytes: int) -> None:
        self.used -= nbytes
        self.freed += nbytes
        if not self.waiting:
            return
        if not self.over():
            waiting, self.waiting = self.waiting, {}
            for conn in waiting:
                conn.resume(_PAUSE_MEMORY)
        elif self.exceeder is None:
            self.pass_token()

    def pass_token(self) -> None:
        """The exceed token is free: hand it to the first connection paused mid-frame, so the
        frames holding memory can complete even when nothing else will free any."""
        self.exceeder = None
        for conn in self.waiting:
            if conn.reader.in_progress:
                self.exceeder = conn
                conn.exceed_frame = conn.reader.completed
                del self.waiting[conn]
                conn.resume(_PAUSE_MEMORY)
                return

    def sweep_interval(self) -> float:
        limits = [x for x in (self.idle_s, self.read_timeout_s) if x is not None]
        return min([1.0] + [x / 4 for x in limits]) if limits else 1.0

    def sweep(self) -> None:
        """Close connections idle or stalled mid-frame too long; flush the log's summary."""
        now = time.monotonic()
        timeout, idle = self.read_timeout_s, self.idle_s
        for conn in list(self.connections):
            if conn.closed:
                continue
            if conn.frame_started is not None:
                if timeout is not None and not conn.pause_reasons and now - conn.frame_started > timeout:
                    got, size = conn.reader.progress
                    declared = f"{size}-byte request frame" if size >= 0 else "request size prefix"
                    conn.bad_input(f"request read timeout (oncelog.request.read.timeout.ms="
                                   f"{int(timeout * 1000)}): {got} bytes of a {declared} received")
            elif idle is not None and now - conn.active_at > idle and not conn.pause_reasons and conn.is_idle():
                log.info("closed idle connection from %s (connections.max.idle.ms=%d)", conn.peer, int(idle * 1000))
                conn.abort()
        self.bad.flush(now)
        if self.freed >= TRIM_AFTER_BYTES and now - self.last_trim >= TRIM_EVERY_S and _malloc_trim is not None:
            self.freed, self.last_trim = 0, now
            _malloc_trim(0)

    def internal_error(self, fmt: str, *args, exc: BaseException) -> None:
        """A broker bug: ERROR, with a traceback at most once every TRACEBACK_EVERY_S."""
        now = time.monotonic()
        if now - self.last_traceback >= TRACEBACK_EVERY_S:
            self.last_traceback = now
            log.error(fmt, *args, exc_info=exc)
        else:
            self.bad.log(logging.ERROR, fmt + ": %r (traceback logged at most once a minute)", *args, exc)

    def loop_exception(self, loop, context) -> None:
        """asyncio's exception handler: network errors (accept hitting the fd limit, a reset)
        are one rate-limited line; anything else is a broker bug."""
        exc = context.get("exception")
        message = context.get("message", "unhandled exception in the event loop")
        if exc is None or isinstance(exc, OSError):
            self.bad.log(logging.WARNING, "%s%s", message, f": {exc!r}" if exc is not None else "")
        else:
            self.internal_error("%s", message, exc=exc)


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, broker: Broker, limits: Limits, listener: str = "PLAINTEXT",
                 security_protocol: str = "PLAINTEXT", principal: str | None = None) -> None:
        self.broker = broker
        self.limits = limits
        # The listener (Metadata answers with its address) and the principal: ANONYMOUS, the TLS
        # client certificate's DN (set in connection_made), or the SASL user once authenticated;
        # on a cluster's control socket, the nodes' own (oncelog.cluster.NODE_PRINCIPAL).
        self.session = Session.for_listener(listener, security_protocol)
        if principal is not None:
            self.session.principal = principal
        self.reader = BufferedFrameReader(limits.max_frame, scratch=limits.scratch)
        # Whether this connection's bytes count in queued.max.request.bytes: from the start, but on
        # a SASL listener only once it has authenticated (before that the frame cap bounds it).
        self.in_pool = not self.session.sasl
        if not self.in_pool:
            self.reader.limit(limits.sasl_max_receive, "sasl.server.max.receive.size")
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.ip: str | None = None  # set once admitted (counted in limits.per_ip)
        self.client_id: str | None = None  # from the last request header seen
        # Responses in request order: each slot is (chunks (ready) or a Task (pending), request bytes).
        # With metrics on, the third item of a slot is its RequestTiming (oncelog.metrics), else None.
        self.slots: collections.deque = collections.deque()
        # Frames received but not yet dispatched (an earlier request is still being processed);
        # with metrics on, queued_at holds each one's arrival time, in the same order.
        self.queued: collections.deque = collections.deque()
        self.metrics = broker.metrics
        self.queued_at: collections.deque = collections.deque()
        self.busy: asyncio.Future | None = None  # the request being processed, if it is async
        self.applied_waits = 0  # Produces appended and waiting for durability only
        self.pause_reasons = 0  # _PAUSE_* bits
        self.closed = False
        self.held = 0  # this connection's share of limits.used: unanswered frames + the reader's buffer
        self.reading = 0  # the reader's buffer, as last counted
        self.exceed_frame = -1  # the frame the exceed token was given for
        self.frame_started: float | None = None  # monotonic time the unfinished frame began
        self.active_at = time.monotonic()

    # ---------------------------------------------------------------- connection life

    def admit(self, peer) -> bool:
        """Count this connection against ``max.connections`` and ``max.connections.per.ip`` as
        it is accepted — before any TLS handshake, as Kafka's ConnectionQuotas — or refuse it
        (False; one rate-limited WARNING)."""
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        ip = peer[0] if peer else "?"
        limits = self.limits
        if len(limits.connections) >= limits.max_connections:
            self.closed = True
            limits.bad.log(logging.WARNING, "refused connection from %s: max.connections=%d reached",
                           self.peer, limits.max_connections)
            return False
        if limits.per_ip[ip] >= limits.max_per_ip:
            self.closed = True
            limits.bad.log(logging.WARNING, "refused connection from %s: max.connections.per.ip=%d reached for %s",
                           self.peer, limits.max_per_ip, ip)
            return False
        self.ip = ip
        limits.per_ip[ip] += 1
        limits.connections.add(self)
        return True

    def connection_made(self, transport) -> None:
        self.transport = transport
        if self.ip is None and not self.admit(transport.get_extra_info("peername")):
            transport.abort()  # a plain listener's connection, counted here as it is accepted
            return
        # Over TLS (_TlsListener: admitted at accept), connection_made comes after the
        # handshake: the client's certificate, if it sent one (ssl.client.auth
        # requested/required), names the principal.
        ssl_object = transport.get_extra_info("ssl_object")
        if ssl_object is not None:
            cert = ssl_object.getpeercert()
            if cert and not self.session.sasl:  # over SASL_SSL, SASL names the principal
                self.session.principal = "User:" + tls.subject_dn(cert)

    def connection_lost(self, exc) -> None:
        self.closed = True
        limits = self.limits
        if self.ip is None:
            return  # refused (admit), or already uncounted
        try:
            self.broker.connection_closed(self.session, self.peer)
        except Exception:  # never lose the accounting below to it
            log.exception("closing the share sessions of %s failed", self.peer)
        limits.connections.discard(self)
        limits.per_ip[self.ip] -= 1
        if not limits.per_ip[self.ip]:
            del limits.per_ip[self.ip]
        self.ip = None
        for slot, _, _ in self.slots:
            if isinstance(slot, asyncio.Future):
                slot.cancel()
        self.slots.clear()
        self.queued.clear()
        self.queued_at.clear()
        self.reader = None  # frees a partial frame now
        limits.waiting.pop(self, None)
        held, self.held, self.reading = self.held, 0, 0
        limits.freed += CONNECTION_BYTES
        if self.in_pool:
            limits.release(held)
        if limits.exceeder is self:
            limits.pass_token()

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def is_idle(self) -> bool:
        return not self.slots and not self.queued and self.busy is None and not self.reader.in_progress

    # ---------------------------------------------------------------- reading

    def get_buffer(self, sizehint: int) -> memoryview:
        limits = self.limits
        # The exceed token's holder may finish its frame over the limit, at full speed; a
        # connection outside the pool (before SASL authentication) is bounded by its frame cap.
        return self.reader.get_buffer(None if limits.exceeder is self or not self.in_pool else limits.budget())

    def buffer_updated(self, nbytes: int) -> None:
        if self.closed:
            return
        reader = self.reader
        limits = self.limits
        try:
            frames = reader.updated(nbytes)
        except (FrameTooLarge, InvalidFrame) as exc:
            self.bad_input(str(exc))
            return
        now = self.active_at = time.monotonic()
        buffered = reader.buffered
        added = buffered - self.reading
        for frame in frames:
            added += len(frame)
        self.reading = buffered
        self.held += added
        if self.in_pool:
            limits.used += added
        if reader.in_progress:
            if self.frame_started is None or frames:
                self.frame_started = now
        else:
            self.frame_started = None
        if frames:
            self.queued.extend(frames)
            if self.metrics is not None:
                self.queued_at.extend(itertools.repeat(now, len(frames)))
            try:
                self._pump()
            except Exception as exc:  # never let a bug escape into the event loop
                limits.internal_error("closing connection from %s: internal error", self.peer, exc=exc)
                self.abort()
                return
        if self.closed:
            return
        if len(self.slots) + len(self.queued) > MAX_IN_FLIGHT:
            self.pause(_PAUSE_IN_FLIGHT)
        if not self.in_pool:
            return
        passed = limits.exceeder is self and reader.completed != self.exceed_frame
        if passed:
            limits.pass_token()  # its frame is complete: another's may finish now, not its next one
        if limits.over():
            if reader.in_progress and not passed and (limits.exceeder is None or limits.exceeder is self):
                limits.exceeder = self
                self.exceed_frame = reader.completed
            else:
                self.pause(_PAUSE_MEMORY)
                limits.waiting[self] = None

    def pause(self, reason: int) -> None:
        if not self.pause_reasons and not self.closed:
            self.transport.pause_reading()
        self.pause_reasons |= reason

    def resume(self, reason: int) -> None:
        if not self.pause_reasons & reason:
            return
        self.pause_reasons &= ~reason
        if not self.pause_reasons and not self.closed:
            if self.frame_started is not None:
                self.frame_started = time.monotonic()  # the time we paused is not the client's
            self.transport.resume_reading()

    # ---------------------------------------------------------------- requests

    def _pump(self) -> None:
        """Dispatch queued frames while nothing earlier on this connection is in progress."""
        queued = self.queued
        while queued and not self.closed and self.busy is None:
            frame = queued[0]
            if self.applied_waits and (len(frame) < 2 or frame[0] != 0 or frame[1] != PRODUCE):
                break  # only another Produce may start while produces wait for their fsync
            queued.popleft()
            self._dispatch(frame, self.queued_at.popleft() if self.metrics is not None else 0.0)

    def _dispatch(self, frame, arrived: float = 0.0) -> None:
        nbytes = len(frame)
        session = self.session
        metrics = self.metrics
        started = time.monotonic() if metrics is not None else 0.0
        if session.raw_tokens and session.state is SaslState.AUTHENTICATE:
            self._raw_sasl_token(frame, nbytes)
            return
        try:
            api_key = _api_key(frame)
            if not session.open or api_key in SASL_APIS:
                verdict = session.admit(api_key, self.broker.clock())
                if verdict is not Verdict.SERVE:
                    self._refuse(frame, nbytes, verdict)
                    return
                if api_key == API_VERSIONS and session.state is SaslState.HANDSHAKE:
                    # Kafka answers one ApiVersions before SaslHandshake; one of a version we
                    # do not know is answered UNSUPPORTED_VERSION and may be retried (KIP-511).
                    session.api_versions_answered = _api_version(frame) <= api_versions.MAX_VERSION
            result = self.broker.handle_frame(frame, self.peer, session)
            if not self.in_pool and self.session.state is SaslState.AUTHENTICATED:
                self._enter_pool()
        except ProtocolViolation as exc:
            self.bad_input(f"malformed or unsupported request: {exc}", frame)
            return
        except Exception as exc:
            self.limits.internal_error("closing connection from %s: internal error handling %s", self.peer,
                                       _describe(frame), exc=exc)
            self.abort()
            return
        timing = None
        if metrics is not None and api_key != ENVELOPE:  # a forwarded request counts as its own API
            handled = time.monotonic()                     # (Broker._open_envelope), as on Kafka
            if result is None or isinstance(result, CloseConnection) or (isinstance(result, list)
                                                                           and not self.slots):
                # answered now, or never (acks=0, a closed connection): nothing to carry to a flush
                metrics.request_times(api_key, _api_version(frame), arrived, started, handled, handled, handled)
            else:
                timing = RequestTiming(api_key, _api_version(frame), arrived, started)
                timing.handled = timing.done = handled
        if result is None:
            self._release(nbytes)
            return
        if isinstance(result, CloseConnection):
            # In order: the answers to the requests before it are written first (_flush).
            self.slots.append((result, nbytes, None))
            self._flush()
            return
        if isinstance(result, list):
            if not self.slots:
                self.transport.writelines(result)
                self._release(nbytes)
            else:
                self.slots.append((result, nbytes, timing))
            if self.session.state is SaslState.FAILED:
                # Kafka's SaslServerAuthenticator: the failure is answered, then the connection
                # closed. SASL requests are answered at once, so nothing is pending before it.
                self.queued.clear()
                self.queued_at.clear()
                self.transport.close()
            return
        applied = isinstance(result, Applied)
        task = asyncio.ensure_future(result.awaitable if applied else result)
        if timing is not None:
            # First: done callbacks run in the order they were added, and the next one flushes
            # (and counts) the answer.
            task.add_done_callback(timing.stamp)
        if applied:
            self.applied_waits += 1
            task.add_done_callback(self._on_applied_done)
        else:
            self.busy = task
            task.add_done_callback(self._on_busy_done)
        self.slots.append((task, nbytes, timing))

    def _refuse(self, frame, nbytes: int, verdict: Verdict) -> None:
        """A request its session's state does not allow (:meth:`Session.admit`): closed without
        an answer, or answered ILLEGAL_SASL_STATE (then closed, for ILLEGAL_STATE_CLOSE)."""
        session = self.session
        chunks = None if verdict is Verdict.CLOSE else _sasl_state_error(frame)
        if chunks is None:
            state = session.state
            if state is SaslState.AUTHENTICATED:
                why = "after the SASL session expired (connections.max.reauth.ms) without re-authentication"
            elif state is SaslState.HANDSHAKE and _api_key(frame) == API_VERSIONS:
                why = "a second ApiVersions before SaslHandshake"
            elif session.reauthenticating and state is SaslState.AUTHENTICATE:
                why = f"during SASL re-authentication ({state.value})"
            else:
                why = f"before SASL authentication completed ({state.value})"
            self.bad_input(f"{_describe(frame)} {why} on listener {session.listener}", frame)
            return
        if verdict is Verdict.ILLEGAL_STATE_CLOSE:
            session.state = SaslState.FAILED
            self.slots.append((chunks, nbytes, None))
            self.slots.append((CloseConnection(f"{_describe(frame)} during SASL authentication: answered "
                                               f"ILLEGAL_SASL_STATE"), 0, None))
            self._flush()
        elif self.slots:  # answered in order (no _flush here: _pump goes on with the next frame)
            self.slots.append((chunks, nbytes, None))
        else:
            self.transport.writelines(chunks)
            self._release(nbytes)

    def _raw_sasl_token(self, frame, nbytes: int) -> None:
        """A SASL token after SaslHandshake v0: the frame is the token itself; the answer is the
        mechanism's token, size-prefixed. A failure closes the connection (Kafka's legacy
        framing has no error answer)."""
        session = self.session
        if session.reauth_bad_mechanism:
            session.state = SaslState.FAILED
            self._release(nbytes)
            self.bad_input("SASL re-authentication with another mechanism than the session's (handshake v0)")
            return
        try:
            answer, done = session.mechanism.step(bytes(frame))
        except SaslAuthenticationFailed as exc:
            session.state = SaslState.FAILED
            if self.metrics is not None:
                self.metrics.authenticated(session.listener, False)
            self._release(nbytes)
            self.bad_input(f"SASL {session.mechanism_name} authentication failed: {exc.detail or exc}")
            return
        if done:
            # The same rules as SaslAuthenticate (Kafka checks them on its legacy branch too): a
            # re-authentication keeps its principal, and the session expires.
            refused, _ = session.authenticated(self.broker.config.connections_max_reauth_ms, self.broker.clock())
            if self.metrics is not None:
                self.metrics.authenticated(session.listener, not refused)
            session.raw_tokens = False
            if refused:
                self._release(nbytes)
                self.bad_input(f"SASL {session.mechanism_name} re-authentication refused (handshake v0): {refused}")
                return
            if not self.in_pool:
                self._enter_pool()
            log.info("%s %s with SASL %s (handshake v0) from %s", session.principal,
                     "re-authenticated" if session.reauthenticating else "authenticated", session.mechanism_name,
                     self.peer)
        chunks = [struct.pack(">i", len(answer)), answer]
        if self.slots:
            self.slots.append((chunks, nbytes, None))
        else:
            self.transport.writelines(chunks)
            self._release(nbytes)

    def _enter_pool(self) -> None:
        """First authentication done: this connection's bytes count in queued.max.request.bytes
        from now on (what it holds already included), and frames may be as large as
        socket.request.max.bytes."""
        self.in_pool = True
        self.limits.used += self.held
        self.reader.limit(self.limits.max_frame, "socket.request.max.bytes")

    def _release(self, nbytes: int) -> None:
        self.held -= nbytes
        if self.in_pool:
            self.limits.release(nbytes)

    def _on_applied_done(self, task: asyncio.Future) -> None:
        self.applied_waits -= 1
        self._on_done(task)

    def _on_busy_done(self, task: asyncio.Future) -> None:
        self.busy = None
        self._on_done(task)

    def _on_done(self, task: asyncio.Future) -> None:
        if self.closed or task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            self.limits.internal_error("closing connection from %s: request failed", self.peer, exc=exc)
            self.abort()
            return
        try:
            self._flush()
        except Exception as exc:  # never let a bug escape into the event loop
            self.limits.internal_error("closing connection from %s: internal error", self.peer, exc=exc)
            self.abort()

    def _flush(self) -> None:
        slots = self.slots
        released = 0
        written = None  # one clock reading for the answers this flush writes
        while slots:
            head, nbytes, timing = slots[0]
            if isinstance(head, asyncio.Future):
                if not head.done():
                    break
                head = head.result()  # its answer's chunks, or a CloseConnection that came late
            if isinstance(head, CloseConnection):
                log.info("closing connection from %s: %s", self.peer, head.reason)
                if released:
                    self._release(released)
                self.closed = True
                self.queued.clear()
                self.queued_at.clear()
                self.transport.close()  # what was written before it still goes out
                return
            chunks = head
            slots.popleft()
            self.transport.writelines(chunks)
            released += nbytes
            if timing is not None:
                if written is None:
                    written = time.monotonic()
                self.metrics.request_done(timing, written)
        if released:
            self.active_at = time.monotonic()
            self._release(released)
        self._pump()
        if self.pause_reasons & _PAUSE_IN_FLIGHT and len(slots) + len(self.queued) < MAX_IN_FLIGHT // 2:
            self.resume(_PAUSE_IN_FLIGHT)

    # ---------------------------------------------------------------- bad input

    def bad_input(self, reason: str, frame=None) -> None:
        """Close this connection for a client's mistake: one WARNING line (rate limited), no
        traceback."""
        if frame is not None:
            what = _describe(frame)
            client_id = _client_id(frame)
            if client_id is not None:
                self.client_id = client_id
        else:
            what = None
        details = ", ".join(x for x in (f"client_id={self.client_id!r}" if self.client_id is not None else None,
                                        what) if x)
        self.limits.bad.log(logging.WARNING, "closing connection from %s%s: %s", self.peer,
                            f" ({details})" if details else "", reason)
        self.abort()


def _libc_malloc_trim():
    try:
        return ctypes.CDLL(None).malloc_trim  # glibc; other C libraries have none (and need none)
    except (OSError, AttributeError):
        return None


_malloc_trim = _libc_malloc_trim()

_CLIENT_ID_LEN = struct.Struct(">h")
_CLIENT_ID_MAX = 100


def _client_id(frame) -> str | None:
    """The client id of a request header (v1 and v2 put it at offset 8), cut to _CLIENT_ID_MAX
    bytes for a log line; None when absent or unreadable."""
    if len(frame) < 10:
        return None
    n = _CLIENT_ID_LEN.unpack_from(frame, 8)[0]
    if n < 0 or len(frame) < 10 + n:
        return None
    text = bytes(frame[10 : 10 + min(n, _CLIENT_ID_MAX)]).decode("utf-8", "replace")
    return text + ("..." if n > _CLIENT_ID_MAX else "")  # logged with repr(): no control character gets through


def _api_key(frame) -> int:
    return int.from_bytes(frame[0:2], "big", signed=True) if len(frame) >= 2 else -1


def _api_version(frame) -> int:
    return int.from_bytes(frame[2:4], "big", signed=True) if len(frame) >= 4 else -1


def _sasl_state_error(frame) -> list[bytes] | None:
    """Kafka's ILLEGAL_SASL_STATE answer: to ApiVersions during a SASL exchange (the request's
    error response, no API listed: SaslServerAuthenticator), to SaslHandshake and SaslAuthenticate
    on an authenticated SASL connection (KafkaApis). None if the frame's version is not served."""
    try:
        api_key, version, correlation_id = codec.peek_header(frame)
    except codec.DecodeError:
        return None
    module = HANDLERS.get(api_key)
    if module is None or not module.MIN_VERSION <= version <= module.MAX_VERSION:
        return None
    m = response_module(api_key, version)
    code = ErrorCode.illegal_sasl_state
    if api_key == API_VERSIONS:
        response = build(m.ApiVersionsResponse, error_code=code, api_keys=(), throttle_time=NO_THROTTLE,
                         supported_features=(), finalized_features_epoch=-1, finalized_features=(),
                         zk_migration_ready=False)
        return codec.encode_response(correlation_id, response, header_v0=True)
    if api_key == SASL_HANDSHAKE:
        return codec.encode_response(correlation_id, build(m.SaslHandshakeResponse, error_code=code, mechanisms=()))
    return codec.encode_response(correlation_id, build(
        m.SaslAuthenticateResponse, error_code=code, auth_bytes=b"", session_lifetime=datetime.timedelta(0),
        error_message="SaslAuthenticate request received after successful authentication"))


def _describe(frame) -> str:
    try:
        api_key, version, correlation_id = codec.peek_header(frame)
    except codec.DecodeError:
        return f"{len(frame)}-byte frame"
    from kio.schema.index import api_key_map

    return f"api={api_key_map.get(api_key, api_key)} v{version} correlation_id={correlation_id}"


def _raise_fd_limit(needed: int) -> None:
    """Each connection is a file descriptor: raise the soft RLIMIT_NOFILE (to at most the hard
    one) so max.connections is reached before accept() fails with EMFILE."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (OSError, ValueError):
            target = soft
        if target < needed:
            log.warning("open file limit %d is below max.connections plus the logs' files (%d): raise ulimit -n",
                        target, needed)


class _TlsListener:
    """A TLS listener's accept loop. asyncio's ``create_server(ssl=...)`` hands a connection to
    the protocol only after its handshake, so idle half-open TLS connections escaped the
    connection quotas; here each accepted socket is counted first (:meth:`KafkaConnection.admit`,
    refused at once over a quota) and only then shakes hands (``connect_accepted_socket``, at
    most ``TLS_HANDSHAKE_TIMEOUT_S``). A failed or timed-out handshake is uncounted here: asyncio
    never reports it to the protocol. The interface is the part of ``asyncio.Server`` that
    :func:`serve` uses."""

    def __init__(self, sockets: list, factory, context, loop) -> None:
        self.sockets = sockets
        self.factory, self.context, self.loop = factory, context, loop
        self.handshakes: set[asyncio.Task] = set()
        self.acceptors = [loop.create_task(self._accept(sock)) for sock in sockets]

    @classmethod
    async def start(cls, host: str, port: int, factory, context) -> "_TlsListener":
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        sockets = []
        try:
            for family, kind, proto, _, address in dict.fromkeys(infos):
                sock = socket.socket(family, kind, proto)
                sockets.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind((address[0], port, *address[2:]))
                if not port:  # one ephemeral port for every address, as asyncio's create_server
                    port = sock.getsockname()[1]
                sock.listen(1024)
                sock.setblocking(False)
        except BaseException:
            for sock in sockets:
                sock.close()
            raise
        return cls(sockets, factory, context, loop)

    async def _accept(self, sock) -> None:
        limits = None
        while True:
            try:
                conn, address = await self.loop.sock_accept(sock)
            except OSError as exc:  # e.g. EMFILE: say so (rate limited), let descriptors free up
                if limits is not None:
                    limits.bad.log(logging.WARNING, "accept failed on %s: %r", sock.getsockname(), exc)
                await asyncio.sleep(0.05)
                continue
            protocol = self.factory()
            limits = protocol.limits
            if not protocol.admit(address):
                conn.close()
                continue
            task = self.loop.create_task(self._handshake(conn, protocol))
            self.handshakes.add(task)
            task.add_done_callback(self.handshakes.discard)

    async def _handshake(self, conn, protocol) -> None:
        try:
            await self.loop.connect_accepted_socket(lambda: protocol, conn, ssl=self.context,
                                                    ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S)
        except BaseException as exc:  # a failed or timed-out handshake, a reset, or shutdown
            conn.close()
            if protocol.transport is None:
                protocol.connection_lost(exc)  # never connected: uncount it
            if isinstance(exc, asyncio.CancelledError):
                raise
            # As Kafka's "Failed authentication with <address> (SSL handshake failed)": INFO,
            # rate limited with the bad-input lines (an open port sees scanners).
            protocol.limits.bad.log(logging.INFO, "TLS handshake with %s failed: %r", protocol.peer, exc)

    def close(self) -> None:
        for task in [*self.acceptors, *self.handshakes]:
            task.cancel()
        for sock in self.sockets:
            sock.close()

    async def wait_closed(self) -> None:
        await asyncio.gather(*self.acceptors, *self.handshakes, return_exceptions=True)


async def serve(broker: Broker, *, ready: asyncio.Event | None = None, stop: asyncio.Event | None = None,
                announce: bool = True) -> None:
    """Run until ``stop`` is set or SIGTERM/SIGINT arrives; then stop accepting, close
    connections, flush and checkpoint every log, and mark the shutdown clean. ``announce``:
    print each listener's "oncelog listening on" line (a parent process reads it; a broker in
    a test's own process, oncelog.testing, does not need it)."""
    loop = asyncio.get_running_loop()
    limits = Limits(broker.config)
    loop.set_exception_handler(limits.loop_exception)
    _raise_fd_limit(min(broker.config.max_connections, 1 << 20) + 1024)
    broker.logs.lock()
    broker.open()
    servers = []
    bound = []
    for lc in broker.config.all_listeners():
        context = tls.server_context(lc.ssl) if lc.ssl is not None else None
        factory = (lambda lc=lc: KafkaConnection(broker, limits, lc.name, lc.security_protocol))
        if context is None:
            server = await loop.create_server(factory, lc.host, lc.port, reuse_address=True, backlog=1024)
        else:  # counted at accept, before the handshake (_TlsListener)
            server = await _TlsListener.start(lc.host, lc.port, factory, context)
        servers.append(server)
        sock = server.sockets[0].getsockname()
        broker.set_listening(sock[0], sock[1], lc.name)
        bound.append((lc, sock))
    if broker.cluster is not None:
        # The other nodes' way in (markers, verification): a Unix socket only this user can open.
        path = broker.cluster.control_socket_path()
        old_umask = os.umask(0o077)
        try:
            servers.append(await loop.create_unix_server(
                lambda: KafkaConnection(broker, limits, CONTROL_LISTENER, "PLAINTEXT", principal=NODE_PRINCIPAL),
                path, backlog=64))
        finally:
            os.umask(old_umask)
        broker.cluster.register()
        broker.cluster.start_background()
    broker.partitions.start_background()
    ticker = loop.create_task(broker.tick_task())
    sweeper = loop.create_task(_sweep(limits))
    stop = stop or asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError, ValueError):
            pass  # not the main thread (oncelog.testing's in-process broker): its owner sets stop
    # The metrics endpoint's line comes before the listening lines: a parent that reads up to
    # the first of those (oncelog.process) has it by then.
    endpoint = None
    metrics_at = metrics_address(broker.config.metrics_listener)
    if broker.metrics is not None and metrics_at is not None:
        broker.metrics.server_state = lambda: (
            collections.Counter(conn.session.listener for conn in limits.connections), limits.used,
            limits.memory_limit)
        endpoint = await MetricsEndpoint(broker.metrics).start(*metrics_at)
        broker.metrics_address = endpoint.address
        log.info("node %d serves metrics on http://%s:%d/metrics", broker.node_id, *endpoint.address)
        if announce:
            print(f"oncelog metrics on http://{endpoint.address[0]}:{endpoint.address[1]}/metrics", flush=True)
    for lc, sock in bound:  # the first line is the first listener's: process.py reads its port
        host, port = broker.advertised_for(lc.name)
        log.info("node %d listening on %s:%d (%s, %s; advertised as %s:%d), data in %s, fsync %s", broker.node_id,
                 sock[0], sock[1], lc.name, lc.security_protocol, host, port, broker.metadata.data_dir,
                 broker.config.fsync)
        if announce:
            print(f"oncelog listening on {sock[0]}:{sock[1]} (advertised {host}:{port}; listener {lc.name}, "
                  f"{lc.security_protocol})", flush=True)
    if ready is not None:
        ready.set()
    await stop.wait()
    log.info("stopping")
    if endpoint is not None:
        await endpoint.close()
    ticker.cancel()
    sweeper.cancel()
    for server in servers:
        server.close()
    for conn in list(limits.connections):
        conn.abort()
    for server in servers:
        await server.wait_closed()
    if broker.cluster is not None:
        await broker.cluster.close()
    await broker.partitions.close()
    log.info("stopped cleanly")


async def _sweep(limits: Limits) -> None:
    interval = limits.sweep_interval()
    while True:
        await asyncio.sleep(interval)
        try:
            limits.sweep()
        except Exception as exc:
            limits.internal_error("connection sweep failed", exc=exc)
