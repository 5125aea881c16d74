"""The only module that touches sockets: an asyncio transport in front of :class:`Broker`.

Per connection, requests are pipelined: each frame is dispatched as soon as it arrives, and
responses are written strictly in request order — a slow request (a long-polling Fetch, an
acks=all Produce waiting for fsync) holds back the responses behind it, as Kafka's network
layer does. Bad input only ever closes the connection it came on:

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

from .broker import Broker, ProtocolViolation
from .protocol import codec
from .protocol.framing import BufferedFrameReader, FrameTooLarge, InvalidFrame

log = logging.getLogger("oncelog.server")

MAX_IN_FLIGHT = 1000  # pipelined requests per connection before we stop reading


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, broker: Broker, connections: set) -> None:
        self.broker = broker
        self.connections = connections
        self.reader = BufferedFrameReader(broker.config.socket_request_max_bytes)
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        # Responses in request order: each slot is chunks (ready) or a Task (pending).
        self.slots: collections.deque = collections.deque()
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
        for frame in frames:
            if self.closed:
                return
            self._dispatch(frame)
        if len(self.slots) > MAX_IN_FLIGHT and not self.paused:
            self.paused = True
            self.transport.pause_reading()

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
        task = asyncio.ensure_future(result)
        self.slots.append(task)
        task.add_done_callback(self._on_done)

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
        if self.paused and len(slots) < MAX_IN_FLIGHT // 2:
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
    broker.logs.start_background()
    ticker = loop.create_task(broker.tick_task())
    stop = stop or asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):
            pass
    host, port = broker.advertised
    log.info("listening on %s:%d (advertised as %s:%d), data in %s, fsync %s", sock[0], sock[1], host, port,
             broker.logs.data_dir, broker.config.fsync)
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
    await broker.logs.close()
    log.info("stopped cleanly")
