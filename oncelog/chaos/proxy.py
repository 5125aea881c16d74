"""The fault proxy: a TCP proxy between Kafka clients and one broker, aware of Kafka's framing,
with network faults a nemesis switches on and off at run time.

The broker advertises the proxy's address (oncelog's ``--advertise``), so every connection a
client makes, bootstrap and leader alike, crosses it. Each client connection gets its own
connection to the broker (a *link*); the proxy reads whole frames — a 4-byte big-endian size,
then that many bytes — in both directions. A request's header starts with ``api_key`` (int16),
``api_version`` (int16), ``correlation_id`` (int32); a response's with ``correlation_id``, which
maps it back to its request's API.

Modes (each a switch; they combine; :meth:`FaultProxy.heal` turns them all off)::

    delay(seconds)        every response waits `seconds` after it left the broker; order kept
                          (optionally only a `rate` of them, optionally a random part of it)
    drop(rate)            a response is dropped after the broker processed the request, and
                          the link is cut: the write happened, the client never hears of it
    reset(rate)           a request is cut in the middle: part of its bytes reach the broker,
                          then both sides are closed
    blackhole(direction)  one way: "to_broker" discards client frames, "to_client" discards
                          broker frames ("both": a partition); connections stay open
    hold(api_key, count)  the next `count` requests of that API are held back, each blocking
                          its own connection behind it (TCP order); other connections proceed;
                          release() forwards them, in the order they were held
    heal()                pass-through: every mode off, held requests released

``drop`` and ``reset`` hit Produce at `rate` and every other API at ``rate * others``
(``others`` = 0.1 by default), so clients keep their metadata and coordinators while their writes
suffer. Every fault that happens is counted (:attr:`FaultProxy.counts`), so a test can assert
that it really happened. Random choices come from ``random.Random`` seeded with the proxy's
``seed`` and the link's number: a link's faults depend only on its own traffic.

Invariants
    - The proxy forwards whole frames or nothing, except a ``reset`` (its point) — never a
      frame of one request glued to another, never two frames reordered on a link.
    - Bytes from either side are untrusted: a size below zero or above ``max_frame_bytes``
      cuts the link (``refused_frames``), and memory per link is bounded (one frame in the
      request path; at most ``QUEUED_RESPONSES`` frames waiting out a delay; the
      correlation map at ``MAX_IN_FLIGHT`` entries).
    - One owner: every piece of mutable state lives on the proxy's event loop (one daemon
      thread). A mode method called from another thread runs on that loop and returns once the
      mode is in effect: a request that reaches the proxy after ``hold(...)`` returned is held.
    - No mode change touches a frame already forwarded; ``heal`` lets responses waiting out a
      delay go at once.

Example::

    proxy = FaultProxy(seed=7)                     # listens on a free port
    broker = BrokerProcess(..., extra_args=["--advertise", proxy.address]).start()
    proxy.upstream_port = broker.port
    proxy.start()
    proxy.drop(0.05); proxy.delay(0.1)             # from the nemesis' thread
    ...
    proxy.heal(); print(proxy.counts)
    proxy.close()
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import random
import socket
import struct
import threading
import time

PRODUCE = 0  # Kafka's API key of Produce

DIRECTIONS = ("to_broker", "to_client", "both")

# Above Kafka's socket.request.max.bytes (100 MiB) and a 50 MiB fetch.max.bytes response with its
# overhead: a larger size is not Kafka traffic.
DEFAULT_MAX_FRAME_BYTES = 128 << 20
QUEUED_RESPONSES = 256  # responses per link waiting out a delay; the broker's reads wait beyond it
MAX_IN_FLIGHT = 4096  # requests per link whose response is awaited (correlation id -> api key)

COUNTERS = ("connections", "requests", "responses", "delayed", "dropped", "reset", "blackholed_to_broker",
            "blackholed_to_client", "held", "released", "refused_frames", "upstream_refused")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free at the moment of asking (the broker must advertise the proxy's port before
    the proxy starts: choose it first)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class FrameRefused(Exception):
    """A size prefix no Kafka frame has: the link is cut."""


async def read_frame(reader: asyncio.StreamReader, max_bytes: int) -> bytes:
    """One whole frame, its 4-byte size prefix included."""
    head = await reader.readexactly(4)
    (size,) = struct.unpack(">i", head)
    if size < 0 or size > max_bytes:
        raise FrameRefused(f"frame of {size} bytes (limit {max_bytes})")
    return head + await reader.readexactly(size)


def request_header(frame: bytes) -> tuple[int | None, int | None]:
    """(api_key, correlation_id) of a request frame, (None, None) if it is too short to have them:
    the broker, not the proxy, decides what a malformed request gets."""
    if len(frame) < 12:
        return None, None
    api_key, _, correlation_id = struct.unpack_from(">hhi", frame, 4)
    return api_key, correlation_id


def request_client_id(frame: bytes) -> str | None:
    """The client id of a request frame (request header v1+: an int16 length after the
    correlation id, -1 for null), or None when the frame is too short or the id malformed."""
    if len(frame) < 14:
        return None
    (length,) = struct.unpack_from(">h", frame, 12)
    if length < 0 or 14 + length > len(frame):
        return None
    return frame[14:14 + length].decode("utf-8", "replace")


class _Modes:
    """The switches (read by the links on every frame; written only on the proxy's loop)."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.delay_s = 0.0
        self.delay_rate = 1.0
        self.delay_jitter = False
        self.drop_rate = 0.0
        self.drop_others = 0.1
        self.reset_rate = 0.0
        self.reset_others = 0.1
        self.blackhole: str | None = None
        self.blackhole_client: str | None = None  # only the links of this client id (None: every link)
        self.hold_api_key: int | None = None
        self.hold_remaining = 0

    def describe(self) -> dict:
        return {"delay_s": self.delay_s, "delay_rate": self.delay_rate, "delay_jitter": self.delay_jitter,
                "drop_rate": self.drop_rate, "reset_rate": self.reset_rate, "blackhole": self.blackhole,
                "blackhole_client": self.blackhole_client,
                "hold_api_key": self.hold_api_key if self.hold_remaining else None,
                "hold_remaining": self.hold_remaining}


class _Link:
    """One client connection and its connection to the broker: two pumps and a response writer."""

    def __init__(self, proxy: "FaultProxy", number: int, client_r, client_w) -> None:
        self.proxy = proxy
        self.number = number
        self.rng = random.Random(f"{proxy.seed}:{number}")
        self.client_r, self.client_w = client_r, client_w
        self.broker_r = self.broker_w = None
        self.api_of: dict[int, int] = {}  # correlation id -> api key, requests awaiting a response
        self.client_id: str | None = None  # from the link's first request that names one
        self.responses: asyncio.Queue = asyncio.Queue(QUEUED_RESPONSES)  # (arrival time, delay, frame)
        self.closed = asyncio.Event()
        self.finished = asyncio.Event()  # run() has returned: its tasks are done

    # -- life ---------------------------------------------------------------------------------

    async def run(self) -> None:
        p = self.proxy
        try:
            self.broker_r, self.broker_w = await asyncio.open_connection(p.upstream_host, p.upstream_port)
        except OSError:
            p._count("upstream_refused")
            self.client_w.transport.abort()
            return
        tasks = [asyncio.ensure_future(f) for f in (self.requests(), self.responses_in(), self.responses_out())]
        await self.closed.wait()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def cut(self) -> None:
        """Close both sides at once (unsent bytes are discarded)."""
        for w in (self.client_w, self.broker_w):
            if w is not None:
                w.transport.abort()
        self.closed.set()

    def blackholed(self, m: "_Modes") -> bool:
        """Whether the blackhole covers this link: every link, or the links of its one client."""
        return m.blackhole_client is None or self.client_id == m.blackhole_client

    def scale(self, api_key: int | None, others: float) -> float:
        return 1.0 if api_key == PRODUCE else others

    # -- client -> broker ---------------------------------------------------------------------

    async def requests(self) -> None:
        p, m = self.proxy, self.proxy.modes
        try:
            while True:
                frame = await read_frame(self.client_r, p.max_frame_bytes)
                api_key, correlation_id = request_header(frame)
                if self.client_id is None:
                    self.client_id = request_client_id(frame)
                if m.blackhole in ("to_broker", "both") and self.blackholed(m):
                    p._count("blackholed_to_broker")
                    continue
                if m.hold_remaining and api_key == m.hold_api_key:
                    m.hold_remaining -= 1
                    released = asyncio.Event()
                    p._held.append(released)
                    p._count("held")
                    await released.wait()  # this connection's later requests wait behind it
                    if self.closed.is_set():
                        return
                elif m.reset_rate and self.rng.random() < m.reset_rate * self.scale(api_key, m.reset_others):
                    await self.reset_mid_request(frame)
                    return
                if api_key is not None:
                    if len(self.api_of) >= MAX_IN_FLIGHT:
                        self.api_of.pop(next(iter(self.api_of)))
                    self.api_of[correlation_id] = api_key
                self.broker_w.write(frame)
                p._count("requests")
                await self.broker_w.drain()
        except FrameRefused:
            p._count("refused_frames")
            self.cut()
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            self.cut()

    async def reset_mid_request(self, frame: bytes) -> None:
        """Part of ``frame`` reaches the broker (flushed to the socket first), then both sides close."""
        self.proxy._count("reset")
        part = frame[:self.rng.randint(1, len(frame) - 1)]
        try:
            self.broker_w.transport.set_write_buffer_limits(0)  # drain() returns once it is all sent
            self.broker_w.write(part)
            await self.broker_w.drain()
            self.broker_w.close()  # after the partial frame: end of stream
        except (ConnectionError, OSError):
            pass
        self.client_w.transport.abort()
        self.closed.set()

    # -- broker -> client ---------------------------------------------------------------------

    async def responses_in(self) -> None:
        p, m = self.proxy, self.proxy.modes
        try:
            while True:
                frame = await read_frame(self.broker_r, p.max_frame_bytes)
                arrived = time.monotonic()
                api_key = self.api_of.pop(struct.unpack_from(">i", frame, 4)[0], None) if len(frame) >= 8 else None
                if m.blackhole in ("to_client", "both") and self.blackholed(m):
                    p._count("blackholed_to_client")
                    continue
                if m.drop_rate and self.rng.random() < m.drop_rate * self.scale(api_key, m.drop_others):
                    p._count("dropped")
                    self.cut()
                    return
                delay = 0.0
                if m.delay_s and (m.delay_rate >= 1.0 or self.rng.random() < m.delay_rate):
                    delay = m.delay_s * (self.rng.random() if m.delay_jitter else 1.0)
                    p._count("delayed")
                await self.responses.put((arrived, delay, frame))
        except FrameRefused:
            p._count("refused_frames")
            self.cut()
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            self.cut()

    async def responses_out(self) -> None:
        """Writes responses in arrival order, each not before its arrival + its delay (a delay
        switched off meanwhile, by heal() or delay(0), no longer holds it back)."""
        p = self.proxy
        try:
            while True:
                arrived, delay, frame = await self.responses.get()
                if delay and p.modes.delay_s:
                    wait = arrived + delay - time.monotonic()
                    if wait > 0:
                        await asyncio.sleep(wait)
                self.client_w.write(frame)
                p._count("responses")
                await self.client_w.drain()
        except (ConnectionError, OSError):
            self.cut()


class FaultProxy:
    """A fault-injecting Kafka proxy in front of ``upstream_host:upstream_port`` (see the module).

    ``upstream_port`` may be set after construction, before :meth:`start` (the broker must be
    started knowing the proxy's address). Runs its own event loop in a daemon thread.
    """

    def __init__(self, upstream_port: int | None = None, *, upstream_host: str = "127.0.0.1",
                 listen_host: str = "127.0.0.1", listen_port: int | None = None, seed: int = 1,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.upstream_host, self.upstream_port = upstream_host, upstream_port
        self.listen_host = listen_host
        self.listen_port = listen_port or free_port(listen_host)
        self.seed = seed
        self.max_frame_bytes = max_frame_bytes
        self.modes = _Modes()
        self._counts = dict.fromkeys(COUNTERS, 0)
        self._held: list[asyncio.Event] = []
        self._links: set[_Link] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=f"fault-proxy-{self.listen_port}", daemon=True)
        self._server = None
        self._started = concurrent.futures.Future()

    # -- life ---------------------------------------------------------------------------------

    @property
    def address(self) -> str:
        return f"{self.listen_host}:{self.listen_port}"

    def start(self, timeout: float = 10.0) -> "FaultProxy":
        if self.upstream_port is None:
            raise ValueError("FaultProxy.start: upstream_port is not set")
        self._thread.start()
        self._started.result(timeout)  # raises what binding the port raised
        return self

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._server = self._loop.run_until_complete(
                asyncio.start_server(self._accept, self.listen_host, self.listen_port, reuse_address=True))
        except BaseException as exc:
            self._started.set_exception(exc)
            return
        self._started.set_result(None)
        self._loop.run_forever()

    def close(self) -> None:
        """Stop listening, cut every link, stop the loop."""
        if not self._thread.is_alive():
            return

        async def stop():
            self._server.close()
            links = list(self._links)
            for link in links:
                link.cut()
            for event in self._held:
                event.set()
            if links:
                await asyncio.wait([asyncio.ensure_future(link.finished.wait()) for link in links], timeout=5)
            self._loop.stop()

        asyncio.run_coroutine_threadsafe(stop(), self._loop)
        self._thread.join(10)

    def __enter__(self) -> "FaultProxy":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    async def _accept(self, client_r, client_w) -> None:
        self._count("connections")
        link = _Link(self, self._counts["connections"], client_r, client_w)
        self._links.add(link)
        try:
            await link.run()
        finally:
            self._links.discard(link)
            link.finished.set()

    def _count(self, what: str, n: int = 1) -> None:
        self._counts[what] += n

    # -- observation (any thread) ---------------------------------------------------------------

    @property
    def counts(self) -> dict[str, int]:
        """Faults and frames so far, by kind (a copy)."""
        return dict(self._counts)

    @property
    def held(self) -> int:
        """Requests held right now."""
        return len(self._held)

    @property
    def links(self) -> int:
        """Client connections open right now."""
        return len(self._links)

    def describe(self) -> dict:
        """The modes in effect (for a run's history of faults)."""
        return self.modes.describe()

    def wait_held(self, n: int = 1, timeout: float = 30.0) -> None:
        """Block until at least ``n`` requests are held (a state, not a time); TimeoutError after ``timeout``."""
        deadline = time.monotonic() + timeout
        while len(self._held) < n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(self._held)} requests held after {timeout} s, waiting for {n}")
            time.sleep(0.005)

    # -- modes (any thread; each returns once in effect) ------------------------------------------

    def _apply(self, fn) -> None:
        if not self._thread.is_alive() or threading.current_thread() is self._thread:
            fn()
            return
        done = concurrent.futures.Future()

        def run():
            try:
                fn()
                done.set_result(None)
            except BaseException as exc:
                done.set_exception(exc)

        self._loop.call_soon_threadsafe(run)
        done.result(10)

    def delay(self, seconds: float, *, rate: float = 1.0, jitter: bool = False) -> None:
        """Delay responses by ``seconds`` (every one, or a ``rate`` of them; with ``jitter`` by a
        uniform part of ``seconds``), order kept. ``delay(0)`` turns it off."""
        if seconds < 0 or not 0 <= rate <= 1:
            raise ValueError(f"delay({seconds}, rate={rate})")

        def set_():
            self.modes.delay_s, self.modes.delay_rate, self.modes.delay_jitter = float(seconds), float(rate), jitter
        self._apply(set_)

    def drop(self, rate: float, *, others: float = 0.1) -> None:
        """Drop a response (after the broker processed its request) and cut its link, at ``rate``
        for Produce and ``rate * others`` for other APIs. ``drop(0)`` turns it off."""
        _check_rate("drop", rate, others)

        def set_():
            self.modes.drop_rate, self.modes.drop_others = float(rate), float(others)
        self._apply(set_)

    def reset(self, rate: float, *, others: float = 0.1) -> None:
        """Cut a request in the middle (part of it forwarded, then both sides closed), at ``rate``
        for Produce and ``rate * others`` for other APIs. ``reset(0)`` turns it off."""
        _check_rate("reset", rate, others)

        def set_():
            self.modes.reset_rate, self.modes.reset_others = float(rate), float(others)
        self._apply(set_)

    def blackhole(self, direction: str | None, *, client_id: str | None = None) -> None:
        """Discard every frame going ``direction`` ("to_broker", "to_client" or "both"),
        connections kept open — on every link, or with ``client_id`` only on the links of the
        client that sends that id (one client cut off from the broker one way, the others not);
        ``None`` turns it off."""
        if direction is not None and direction not in DIRECTIONS:
            raise ValueError(f"blackhole direction {direction!r}: one of {DIRECTIONS} or None")

        def set_():
            self.modes.blackhole = direction
            self.modes.blackhole_client = client_id if direction is not None else None
        self._apply(set_)

    def hold(self, api_key: int, count: int = 1) -> None:
        """Hold back the next ``count`` requests of ``api_key`` until :meth:`release` (each blocks
        its own connection; others proceed)."""
        if count < 1:
            raise ValueError(f"hold count {count}")

        def set_():
            self.modes.hold_api_key, self.modes.hold_remaining = int(api_key), int(count)
        self._apply(set_)

    def release(self) -> int:
        """Forward every held request (in the order they were held) and stop holding; returns
        how many were released. A held request whose client closed its connection meanwhile is
        gone with that connection (counted as released, never forwarded)."""
        released = []

        def set_():
            self.modes.hold_api_key, self.modes.hold_remaining = None, 0
            released.extend(self._held)
            self._held.clear()
            for event in released:
                event.set()
            self._count("released", len(released))
        self._apply(set_)
        return len(released)

    def heal(self) -> None:
        """Back to pass-through: every mode off, held requests released."""
        def set_():
            held = self._held[:]
            self.modes.clear()  # in place: the links hold this object
            self._held.clear()
            for event in held:
                event.set()
            self._count("released", len(held))
        self._apply(set_)


def _check_rate(what: str, rate: float, others: float) -> None:
    if not 0 <= rate <= 1 or not 0 <= others <= 1:
        raise ValueError(f"{what}({rate}, others={others}): rates are in [0, 1]")


class ProxyGroup:
    """One :class:`FaultProxy` per node of a cluster: proxy ``k`` listens on ``listen_port + k-1``
    and forwards to ``upstream_port + k-1`` (node ``k``), as each node advertises the port given
    to ``serve --advertise`` plus ``k-1``. A mode switched on the group is switched on every
    proxy (a fault of the whole network; a client's blackhole cuts it off from every node)."""

    def __init__(self, count: int, listen_port: int, *, seed: int = 0, host: str = "127.0.0.1") -> None:
        # each proxy its own seed, so two links numbered alike on two proxies draw differently
        self.proxies = [FaultProxy(listen_port=listen_port + k, listen_host=host, seed=seed * 1000 + k)
                        for k in range(count)]

    @property
    def address(self) -> str:
        """Every node's proxy, node 1's first: a bootstrap list for the whole cluster."""
        return ",".join(p.address for p in self.proxies)

    @property
    def upstream_port(self) -> int | None:
        return self.proxies[0].upstream_port

    @upstream_port.setter
    def upstream_port(self, port: int) -> None:
        for k, p in enumerate(self.proxies):
            p.upstream_port = port + k

    @property
    def counts(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for p in self.proxies:
            for what, n in p.counts.items():
                total[what] = total.get(what, 0) + n
        return total

    def connections_per_node(self) -> list[int]:
        """Client connections each node's proxy accepted so far (node 1's first)."""
        return [p.counts["connections"] for p in self.proxies]

    def start(self, timeout: float = 10.0) -> "ProxyGroup":
        for p in self.proxies:
            p.start(timeout)
        return self

    def close(self) -> None:
        for p in self.proxies:
            p.close()

    def delay(self, seconds: float, **kw) -> None:
        for p in self.proxies:
            p.delay(seconds, **kw)

    def drop(self, rate: float, **kw) -> None:
        for p in self.proxies:
            p.drop(rate, **kw)

    def reset(self, rate: float, **kw) -> None:
        for p in self.proxies:
            p.reset(rate, **kw)

    def blackhole(self, direction: str | None, **kw) -> None:
        for p in self.proxies:
            p.blackhole(direction, **kw)

    def heal(self) -> None:
        for p in self.proxies:
            p.heal()
