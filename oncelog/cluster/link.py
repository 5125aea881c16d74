"""A connection from this node to another node's control socket: Kafka requests out, their
answers back, pipelined by correlation id.

One :class:`NodeLink` per peer node, opened on first use and again after any failure (a peer
that restarts closes it). :meth:`NodeLink.request` raises :class:`LinkDown` when the peer cannot
be reached or does not answer within the timeout; the callers (markers, verification) decide
whether to retry. Answers are decoded by the project's own client codec, guarded as every
response is (:func:`oncelog.client.wire.decode_response`).
"""

from __future__ import annotations

import asyncio
import io
import logging
import struct
from typing import Callable

from ..protocol.requests import decode_response, write_request

log = logging.getLogger("oncelog.cluster")

MAX_ANSWER = 16 << 20  # inter-node answers are small (markers, verification); a bigger one is a broken peer


class LinkDown(Exception):
    """The peer node could not be reached, or closed the connection before answering."""


class NodeLink:
    def __init__(self, node_id: int, socket_path: Callable[[], str | None], *, timeout_s: float = 10.0) -> None:
        self.node_id = node_id
        self._socket_path = socket_path  # read again at each connect: a restarted peer may move it
        self.timeout_s = timeout_s
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._connecting: asyncio.Lock | None = None
        self._pending: dict[int, tuple[asyncio.Future, type]] = {}
        self._next_id = 0
        self._read_task: asyncio.Task | None = None

    async def request(self, request):
        """Send ``request`` (a kio request object) and return its decoded answer."""
        await self._connect()
        self._next_id = (self._next_id + 1) & 0x7FFFFFFF
        cid = self._next_id
        buf = io.BytesIO()
        write_request(buf, request, cid, f"oncelog-node-{self.node_id}")
        payload = buf.getvalue()
        fut = asyncio.get_running_loop().create_future()
        self._pending[cid] = (fut, type(request))
        try:
            self._writer.write(struct.pack(">i", len(payload)) + payload)
            return await asyncio.wait_for(fut, self.timeout_s)
        except (OSError, asyncio.TimeoutError) as exc:
            self._close(LinkDown(f"node {self.node_id}: {exc!r}"))
            raise LinkDown(f"node {self.node_id} did not answer: {exc!r}") from None
        finally:
            self._pending.pop(cid, None)

    async def _connect(self) -> None:
        if self._writer is not None and not self._writer.is_closing():
            return
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if self._writer is not None and not self._writer.is_closing():
                return
            path = self._socket_path()
            if path is None:
                raise LinkDown(f"node {self.node_id} has not registered (not started yet)")
            try:
                self._reader, self._writer = await asyncio.wait_for(
                    asyncio.open_unix_connection(path), self.timeout_s)
            except (OSError, asyncio.TimeoutError) as exc:
                raise LinkDown(f"node {self.node_id} at {path}: {exc!r}") from None
            self._read_task = asyncio.get_running_loop().create_task(self._read_answers(self._reader))

    async def _read_answers(self, reader: asyncio.StreamReader) -> None:
        error: Exception = LinkDown(f"node {self.node_id} closed the connection")
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                if not 4 <= size <= MAX_ANSWER:
                    error = LinkDown(f"node {self.node_id} sent a frame of {size} bytes")
                    break
                frame = await reader.readexactly(size)
                cid = struct.unpack_from(">i", frame)[0]
                entry = self._pending.get(cid)
                if entry is None:
                    continue  # its request timed out meanwhile
                fut, request_cls = entry
                try:
                    _, answer = decode_response(frame, request_cls)
                except Exception as exc:  # a peer's answer we cannot read: that request fails
                    if not fut.done():
                        fut.set_exception(LinkDown(f"node {self.node_id}: undecodable answer: {exc!r}"))
                    continue
                if not fut.done():
                    fut.set_result(answer)
        except (asyncio.IncompleteReadError, OSError) as exc:
            error = LinkDown(f"node {self.node_id}: {exc!r}")
        except asyncio.CancelledError:
            return
        self._close(error)

    def _close(self, error: Exception) -> None:
        if self._writer is not None:
            self._writer.close()
        self._writer = self._reader = None
        for fut, _ in list(self._pending.values()):
            if not fut.done():
                fut.set_exception(error)
        self._pending.clear()

    def close(self) -> None:
        if self._read_task is not None:
            self._read_task.cancel()
        self._close(LinkDown("closing"))
