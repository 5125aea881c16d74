"""The process kind of :class:`oncelog.testing.Broker`: ``python -m oncelog.testing._child`` takes
``oncelog serve``'s arguments (one node) and runs the same broker, plus a **control socket** over
which the test process adds and removes faults.

The control socket is a Unix socket (mode 0600: only this user) whose path the parent gives in
``ONCELOG_TESTING_CONTROL``. Its protocol is one JSON object per line, each answered by one line:

* ``{"op": "add", "spec": {...FaultSpec...}}`` -> ``{"ok": true, "id": N}``
* ``{"op": "fired", "id": N}`` -> ``{"ok": true, "fired": k, "live": bool}``
* ``{"op": "remove", "id": N}`` / ``{"op": "clear"}`` -> ``{"ok": true}``
* anything else -> ``{"ok": false, "error": "..."}`` (the connection stays usable).

Hostile input is bounded: a line over 64 KiB closes the connection, a spec is checked field by
field (:meth:`FaultSpec.from_json`), at most 10,000 faults live at once.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys

from .faults import FaultSpec, control_function

CONTROL_ENV = "ONCELOG_TESTING_CONTROL"
MAX_LINE = 64 * 1024
MAX_FAULTS = 10_000


class ControlServer:
    """The child's side: fault specs in, the broker's fault handles kept by id."""

    def __init__(self, broker) -> None:
        self.broker = broker
        self.handles: dict[int, object] = {}
        self.next_id = 1

    def answer(self, line: bytes) -> dict:
        try:
            message = json.loads(line)
            if not isinstance(message, dict):
                raise ValueError("a request is a JSON object")
            op = message.get("op")
            if op == "add":
                if len([h for h in self.handles.values() if h.live]) >= MAX_FAULTS:
                    raise ValueError(f"at most {MAX_FAULTS} faults at once")
                self.handles = {k: h for k, h in self.handles.items() if h.live}
                spec = FaultSpec.from_json(message.get("spec"))
                handle = self.broker.control(spec.api_key, control_function(spec), spec.count)
                fault_id, self.next_id = self.next_id, self.next_id + 1
                self.handles[fault_id] = handle
                return {"ok": True, "id": fault_id}
            if op in ("fired", "remove"):
                handle = self.handles.get(message.get("id"))
                if handle is None:
                    return {"ok": True, "fired": 0, "live": False} if op == "fired" else {"ok": True}
                if op == "remove":
                    handle.remove()
                    return {"ok": True}
                return {"ok": True, "fired": handle.fired(), "live": handle.live}
            if op == "clear":
                for handle in self.handles.values():
                    handle.remove()
                self.handles.clear()
                return {"ok": True}
            raise ValueError(f"unknown op {op!r}")
        except (ValueError, TypeError, RecursionError) as exc:
            return {"ok": False, "error": str(exc)[:500]}

    async def serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    line = await reader.readline()
                except (asyncio.LimitOverrunError, ValueError):
                    break  # a line over the limit: hostile or broken, close
                if not line:
                    break
                writer.write(json.dumps(self.answer(line)).encode() + b"\n")
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()


class ControlClient:
    """The test's side: one blocking connection to the child's control socket."""

    def __init__(self, path: str, timeout: float = 30.0) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.file = self.sock.makefile("rb")

    def call(self, op: str, **fields) -> dict:
        self.sock.sendall(json.dumps({"op": op, **fields}).encode() + b"\n")
        line = self.file.readline(MAX_LINE)
        if not line:
            raise ConnectionError("the broker process closed its control socket (killed or stopped?)")
        answer = json.loads(line)
        if not answer.get("ok"):
            raise ValueError(answer.get("error", "refused"))
        return answer

    def close(self) -> None:
        try:
            self.file.close()
            self.sock.close()
        except OSError:
            pass


def main(argv: list[str]) -> int:
    from oncelog.broker import Broker, wall_clock_ms
    from oncelog.cli import _install_uvloop, build_parser, setup_logging
    from oncelog.config.serve_options import ServeConfigError, build_broker_config, settings_from_args
    from oncelog.server import serve

    args = build_parser().parse_args(argv if argv[:1] == ["serve"] else ["serve", *argv])
    setup_logging(args.log_format, args.log_level)
    try:
        config, _notes = build_broker_config(settings_from_args(args))
    except ServeConfigError as exc:
        print(f"oncelog testing broker: {exc}", file=sys.stderr)
        return 2
    path = os.environ[CONTROL_ENV]
    _install_uvloop()
    broker = Broker(config, clock=wall_clock_ms)
    control = ControlServer(broker)

    async def run() -> None:
        if os.path.exists(path):
            os.unlink(path)
        old_umask = os.umask(0o077)
        try:
            server = await asyncio.start_unix_server(control.serve_connection, path, limit=MAX_LINE)
        finally:
            os.umask(old_umask)
        try:
            await serve(broker)
        finally:
            server.close()
            try:
                os.unlink(path)
            except OSError:
                pass

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
