"""The only module that touches sockets: an asyncio transport in front of :class:`Broker`.

Per connection, requests are processed one at a time, in order, as Kafka's network layer does
(it mutes a connection while one of its requests is being processed): a request is dispatched
only once every earlier request on the connection has finished, so it sees all their effects (a
ListOffsets pipelined right after a DeleteRecords answers the new log start). Clients may still
pipeline; the frames wait here. One exception keeps pipelined producers fast: an acks=all
Produce whose records are appended and that only waits for its fsync (``Applied``) lets the
next *Produce* on the connection start, so consecutive produces share one group-commit fsync;
any other request waits until those produces are answered. Responses are written strictly in
request order. Bad input only ever closes the connection it came on:

* a frame whose size prefix exceeds ``socket.request.max.bytes`` is refused before any buffer
  for it is allocated;
* a request that cannot be decoded, or names an API/version we do not serve, is logged with the
  client's address, client id (when known) and API, and the connection is closed.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import signal

from .apis._base import Applied
from .broker import Broker, ProtocolViolation
from .protocol import codec
from .protocol.framing import BufferedFrameReader, FrameTooLarge, InvalidFrame

log = logging.getLogger("oncelog.server")

MAX_IN_FLIGHT = 1000  # pipelined requests per connection before we stop reading
PRODUCE = 0


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, broker: Broker, connections: set) -> None:
        self.broker = broker
        self.connections = connections
        self.reader = BufferedFrameReader(broker.config.socket_request_max_bytes)
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        # Responses in request order: each slot is chunks (ready) or a Task (pending).
        self.slots: collections.deque = collections.deque()
        # Frames received but not yet dispatched (an earlier request is still being processed).
        self.queued: collections.deque = collections.deque()
        self.busy: asyncio.Future | None = None  # the request being processed, if it is async
        self.applied_waits = 0  # Produces appended and waiting for durability only
        self.paused = False
        self.closed = False

    def connection_made(self, transport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.connections.add(self)

    def connection_lost(self, exc) -> None:
        self.closed = True
        self.connections.discard(self)
        for slot in self.slots:
            if isinstance(slot, asyncio.Future):
                slot.cancel()
        self.slots.clear()
        self.queued.clear()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.reader.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        if self.closed:
            return
        try:
            frames = self.reader.updated(nbytes)
        except (FrameTooLarge, InvalidFrame) as exc:
            log.warning("closing connection from %s: %s", self.peer, exc)
            self.abort()
            return
        self.queued.extend(frames)
        self._pump()
        if len(self.slots) + len(self.queued) > MAX_IN_FLIGHT and not self.paused and not self.closed:
            self.paused = True
            self.transport.pause_reading()

    def _pump(self) -> None:
        """Dispatch queued frames while nothing earlier on this connection is in progress."""
        queued = self.queued
        while queued and not self.closed and self.busy is None:
            frame = queued[0]
            if self.applied_waits and (len(frame) < 2 or frame[0] != 0 or frame[1] != PRODUCE):
                break  # only another Produce may start while produces wait for their fsync
            queued.popleft()
            self._dispatch(frame)

    def _dispatch(self, frame: bytes) -> None:
        try:
            result = self.broker.handle_frame(frame, self.peer)
        except ProtocolViolation as exc:
            self._reject(frame, str(exc))
            return
        except Exception:
            log.exception("closing connection from %s: internal error handling %s", self.peer, _describe(frame))
            self.abort()
            return
        if result is None:
            return
        if isinstance(result, list):
            if not self.slots:
                self.transport.writelines(result)
                return
            self.slots.append(result)
            return
        if isinstance(result, Applied):
            task = asyncio.ensure_future(result.awaitable)
            self.applied_waits += 1
            task.add_done_callback(self._on_applied_done)
        else:
            task = asyncio.ensure_future(result)
            self.busy = task
            task.add_done_callback(self._on_busy_done)
        self.slots.append(task)

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
            log.error("closing connection from %s: request failed: %r", self.peer, exc, exc_info=exc)
            self.abort()
            return
        self._flush()

    def _flush(self) -> None:
        slots = self.slots
        while slots:
            head = slots[0]
            if isinstance(head, asyncio.Future):
                if not head.done():
                    break
                chunks = head.result()
            else:
                chunks = head
            slots.popleft()
            self.transport.writelines(chunks)
        self._pump()
        if self.paused and not self.closed and len(slots) + len(self.queued) < MAX_IN_FLIGHT // 2:
            self.paused = False
            self.transport.resume_reading()

    def _reject(self, frame: bytes, reason: str) -> None:
        log.warning("closing connection from %s: malformed or unsupported request (%s): %s",
                    self.peer, _describe(frame), reason)
        self.abort()

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


def _describe(frame: bytes) -> str:
    try:
        api_key, version, correlation_id = codec.peek_header(frame)
    except codec.DecodeError:
        return f"{len(frame)}-byte frame"
    from kio.schema.index import api_key_map

    return f"api={api_key_map.get(api_key, api_key)} v{version} correlation_id={correlation_id}"


async def serve(broker: Broker, *, ready: asyncio.Event | None = None, stop: asyncio.Event | None = None) -> None:
    """Run until ``stop`` is set or SIGTERM/SIGINT arrives; then stop accepting, close
    connections, flush and checkpoint every log, and mark the shutdown clean."""
    loop = asyncio.get_running_loop()
    broker.open()
    connections: set[KafkaConnection] = set()
    server = await loop.create_server(lambda: KafkaConnection(broker, connections),
                                      broker.config.host, broker.config.port, reuse_address=True, backlog=1024)
    sock = server.sockets[0].getsockname()
    broker.set_listening(sock[0], sock[1])
    broker.partitions.start_background()
    ticker = loop.create_task(broker.tick_task())
    stop = stop or asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):
            pass
    host, port = broker.advertised
    log.info("node %d listening on %s:%d (advertised as %s:%d), data in %s, fsync %s", broker.node_id, sock[0],
             sock[1], host, port, broker.logs.data_dir, broker.config.fsync)
    print(f"oncelog listening on {sock[0]}:{sock[1]} (advertised {host}:{port})", flush=True)
    if ready is not None:
        ready.set()
    await stop.wait()
    log.info("stopping")
    ticker.cancel()
    server.close()
    for conn in list(connections):
        conn.abort()
    await server.wait_closed()
    await broker.partitions.close()
    log.info("stopped cleanly")
