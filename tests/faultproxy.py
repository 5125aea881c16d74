"""A fault-injecting TCP proxy that understands Kafka framing.

It sits between clients and a broker (the broker advertises the proxy's address, so every
connection a client makes goes through it). Per response frame, at random, it:

* **drops** the response after the broker has processed the request, and cuts the connection —
  the classic lost acknowledgement: the write happened, the client does not know;
* **delays** the response (order on the connection is kept, as TCP would);
* **cuts** the connection before forwarding a request.

Faults hit Produce requests and their responses at the given rates (that is where idempotence
matters) and every other API at a tenth of them, so clients still get their metadata.

Counts of each fault are kept so tests can assert faults really happened. Runs its own event
loop in a daemon thread; :meth:`close` stops it.
"""

from __future__ import annotations

import asyncio
import random
import socket
import struct
import threading


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class FaultProxy:
    def __init__(self, upstream_port: int | None = None, *, listen_port: int | None = None, seed: int = 1,
                 drop_response: float = 0.03, delay_response: float = 0.05, cut_request: float = 0.01,
                 max_delay_s: float = 0.2) -> None:
        self.listen_port = listen_port or free_port()
        self.upstream_port = upstream_port
        self.rng = random.Random(seed)
        self.p_drop, self.p_delay, self.p_cut = drop_response, delay_response, cut_request
        self.max_delay_s = max_delay_s
        self.counts = {"dropped": 0, "delayed": 0, "cut": 0, "connections": 0}
        self.enabled = True
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._server = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.listen_port}"

    def start(self) -> "FaultProxy":
        self._thread.start()
        self._ready.wait(10)
        return self

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._handle, "127.0.0.1", self.listen_port, reuse_address=True))
        self._ready.set()
        self._loop.run_forever()

    def close(self) -> None:
        def stop():
            self._server.close()
            self._loop.stop()
        self._loop.call_soon_threadsafe(stop)
        self._thread.join(5)

    async def _handle(self, client_r, client_w) -> None:
        self.counts["connections"] += 1
        try:
            broker_r, broker_w = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            client_w.close()
            return
        done = asyncio.Event()

        def cut():
            for w in (client_w, broker_w):
                w.transport.abort()
            done.set()

        api_of: dict[int, int] = {}  # correlation id -> api key of the request in flight

        def scale(correlation_id: int) -> float:
            return 1.0 if api_of.pop(correlation_id, None) == 0 else 0.1

        async def requests():
            try:
                while True:
                    frame = await _read_frame(client_r)
                    api_key, _, correlation_id = struct.unpack_from(">hhi", frame, 4)
                    api_of[correlation_id] = api_key
                    if self.enabled and self.rng.random() < self.p_cut * (1.0 if api_key == 0 else 0.1):
                        self.counts["cut"] += 1
                        cut()
                        return
                    broker_w.write(frame)
            except (asyncio.IncompleteReadError, ConnectionError, OSError):
                cut()

        async def responses():
            try:
                while True:
                    frame = await _read_frame(broker_r)
                    factor = scale(struct.unpack_from(">i", frame, 4)[0])
                    if self.enabled:
                        r = self.rng.random() / factor
                        if r < self.p_drop:
                            self.counts["dropped"] += 1
                            cut()
                            return
                        if r < self.p_drop + self.p_delay:
                            self.counts["delayed"] += 1
                            await asyncio.sleep(self.rng.random() * self.max_delay_s)
                    client_w.write(frame)
            except (asyncio.IncompleteReadError, ConnectionError, OSError):
                cut()

        tasks = [asyncio.ensure_future(requests()), asyncio.ensure_future(responses())]
        await done.wait()
        for t in tasks:
            t.cancel()


async def _read_frame(reader) -> bytes:
    head = await reader.readexactly(4)
    size = struct.unpack(">i", head)[0]
    return head + await reader.readexactly(size)
