"""A warm fork server for the process kind: ``Broker(kind="process")`` in well under a second.

Starting ``python -m oncelog.testing._child`` costs ~1.5 s here, most of it imports (kio's
schemas, the ~70 API modules, numpy). The zygote pays that once per test process: a child of
the test process that imports the broker, then waits on a Unix socket (0600) for requests, one
JSON line each — ``{"argv": [...serve args], "env": {...}, "log": PATH}`` — and answers
``{"pid": N}`` after forking a broker with those arguments (its stdout and stderr to ``log``,
where the parent reads the "oncelog listening on" line). The zygote is single-threaded (a fork
of a threaded process may inherit a held lock), reaps its children, and ends within half a
second of the test process (it polls its parent); each broker dies with the zygote
(``PR_SET_PDEATHSIG``), so nothing outlives the test run. (multiprocessing's forkserver is the same idea; this one takes serve's
argv and environment per broker and leaves the pid to the caller for SIGKILL/SIGSTOP.)
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading

MAX_LINE = 1 << 20


def _reap(*_) -> None:
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def parse_request(line: bytes) -> tuple[list[str], dict[str, str], str]:
    """One request line -> (serve's argv, the environment to add, the log's path); ValueError
    for anything else (the socket is this user's alone, but a decoder is a decoder)."""
    try:
        ask = json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(ask, dict) or set(ask) != {"argv", "env", "log"}:
        raise ValueError("a request is an object with argv, env and log")
    argv, env, log = ask["argv"], ask["env"], ask["log"]
    if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv) and len(argv) <= 1000
            and isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) and k for k, v in env.items())
            and isinstance(log, str) and log and "\0" not in log
            and not any("\0" in a for a in argv) and not any("\0" in k + v or "=" in k for k, v in env.items())):
        raise ValueError("argv is a list of strings, env an object of strings, log a path")
    return argv, env, log


def _serve(path: str) -> None:
    # Not PR_SET_PDEATHSIG for itself: that signal follows the parent *thread*, and a test may
    # start the fork server from a thread that ends at once (the plugin warms it in one). The
    # parent process's end is seen by polling instead; the brokers die with the fork server.
    parent = os.getppid()
    # Warm: what every broker imports, once.
    import oncelog.broker  # noqa: F401
    import oncelog.cli  # noqa: F401
    import oncelog.server  # noqa: F401
    from oncelog.cluster.supervisor import _die_with_parent  # each broker dies with this process
    from oncelog.testing import _child

    signal.signal(signal.SIGCHLD, _reap)
    old_umask = os.umask(0o077)
    try:
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(path)
        server.listen(16)
    finally:
        os.umask(old_umask)
    print("zygote ready", flush=True)
    server.settimeout(0.5)
    while True:
        try:
            conn, _ = server.accept()
        except TimeoutError:
            if os.getppid() != parent:  # the test process is gone: so is this, and its brokers with it
                return
            continue
        conn.settimeout(None)
        with conn:
            try:
                argv, env, log = parse_request(conn.makefile("rb").readline(MAX_LINE))
            except (ValueError, OSError) as exc:
                conn.sendall(json.dumps({"error": str(exc)[:200]}).encode() + b"\n")
                continue
            pid = os.fork()
            if pid == 0:  # the broker
                code = 1
                try:
                    server.close()
                    conn.close()
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    _die_with_parent()
                    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                    os.dup2(fd, 1)
                    os.dup2(fd, 2)
                    os.close(fd)
                    sys.stdout = os.fdopen(1, "w", buffering=1)
                    sys.stderr = os.fdopen(2, "w", buffering=1)
                    os.environ.update({str(k): str(v) for k, v in env.items()})
                    code = _child.main(argv)
                except SystemExit as exc:
                    code = exc.code if isinstance(exc.code, int) else 1
                except BaseException:  # noqa: BLE001 — reported in the broker's log
                    import traceback

                    traceback.print_exc()
                finally:
                    sys.stdout.flush()
                    sys.stderr.flush()
                    os._exit(code)
            conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")


class Zygote:
    """The test process's side: start the fork server once, ask it for brokers."""

    _lock = threading.Lock()
    _instance: "Zygote | None" = None

    def __init__(self) -> None:
        self.path = os.path.join(tempfile.gettempdir(), f"oncelog-zygote-{os.getpid()}-{id(self):x}.sock")
        self.proc = subprocess.Popen([sys.executable, "-m", "oncelog.testing._zygote", self.path],
                                     stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
        line = self.proc.stdout.readline()
        if b"zygote ready" not in line:
            raise RuntimeError(f"the testing broker's fork server did not start (exit {self.proc.poll()})")
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()
        atexit.register(_unlink, self.path)

    @classmethod
    def get(cls) -> "Zygote":
        """The one fork server of this process (started on first use; again if it died)."""
        with cls._lock:
            if cls._instance is None or cls._instance.proc.poll() is not None:
                cls._instance = cls()
            return cls._instance

    def fork(self, argv: list[str], env: dict[str, str], log: str) -> int:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(30)
        try:
            s.connect(self.path)
            s.sendall(json.dumps({"argv": argv, "env": env, "log": log}).encode() + b"\n")
            answer = json.loads(s.makefile("rb").readline(MAX_LINE))
        finally:
            s.close()
        if "pid" not in answer:
            raise RuntimeError(f"the fork server refused: {answer.get('error')}")
        return int(answer["pid"])


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


if __name__ == "__main__":
    _serve(sys.argv[1])
