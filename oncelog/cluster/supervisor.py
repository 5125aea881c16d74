"""``oncelog serve --nodes N``: the parent process of a cluster's node processes.

It starts node 1 (the controller) and waits until it listens, then nodes 2..N; it prints each
node's ``oncelog listening on HOST:PORT`` line once every node listens, node 1's first (what
:class:`oncelog.process.BrokerProcess` and users read: node 1's address is a bootstrap server
for the whole cluster). A node that dies is started again (Kafka's operators restart a failed
broker; its partitions and coordinators are unavailable meanwhile). SIGTERM/SIGINT stop every
node cleanly; each node dies with the parent (``PR_SET_PDEATHSIG``), so a SIGKILL of the parent
takes the cluster down as a whole, the crash a test asks for.

Each node runs ``python -m oncelog serve`` with the parent's own arguments and
``--cluster-node K``; its listeners' ports are the given ports plus ``K-1`` (0 stays 0: the
node picks one and registers it, :mod:`oncelog.cluster`), each pinned to core ``(K-1) % cores``
when there are at least as many cores as nodes.

State machine of one node slot: STARTING (spawned, its listening line not yet read) ->
RUNNING -> (exit) -> STARTING again after 0.2 s, or after a back-off that doubles up to 5 s while
it keeps exiting by itself (not by a signal) within 10 s of its start; STOPPING once the parent
is told to stop.
"""

from __future__ import annotations

import ctypes
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time

log = logging.getLogger("oncelog.cluster")

_LISTENING = re.compile(r"oncelog listening on ")
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


class _Node:
    def __init__(self, node_id: int, argv: list[str], pin: int | None) -> None:
        self.node_id = node_id
        self.argv = argv
        self.pin = pin
        self.proc: subprocess.Popen | None = None
        self.lines: list[str] = []
        self.listening = threading.Event()
        self.started_at = 0.0
        self.backoff_s = 0.2

    def start(self) -> None:
        self.lines, self.listening = [], threading.Event()
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, text=True, bufsize=1,
                                     preexec_fn=_die_with_parent)
        if self.pin is not None:
            try:
                os.sched_setaffinity(self.proc.pid, {self.pin})
            except OSError:
                pass
        threading.Thread(target=self._read, args=(self.proc,), daemon=True).start()

    def _read(self, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            if _LISTENING.match(line):
                self.lines.append(line)
                self.listening.set()
            else:
                sys.stdout.write(line)
                sys.stdout.flush()


def node_argv(argv: list[str], node_id: int, nodes: int) -> list[str]:
    """Node ``node_id``'s command line: ``serve``'s arguments, the node count said outright (a
    node pinned to one core must not count cores for ``serve``'s default, and a fresh data
    directory has no count recorded yet) and the node's id (argparse: the last one wins)."""
    return [sys.executable, "-m", "oncelog", *argv, "--nodes", str(nodes), "--cluster-node", str(node_id)]


def run(argv: list[str], nodes: int, *, start_timeout_s: float = 60.0) -> int:
    """Run the cluster until SIGTERM/SIGINT; ``argv``: ``serve`` and its arguments."""
    cores = len(os.sched_getaffinity(0))
    slots = [_Node(k, node_argv(argv, k, nodes), (k - 1) % cores if cores >= nodes else None) for k in range(1, nodes + 1)]
    stopping = threading.Event()

    def stop(signum, _frame) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for slot in slots:  # node 1 first: the others follow its metadata
        slot.start()
        if not _wait_listening(slot, start_timeout_s, stopping):
            code = slot.proc.poll()
            print(f"oncelog serve: node {slot.node_id} did not start (exit code {code})", file=sys.stderr)
            _stop_all(slots)
            return 2 if code in (None, 0) else code
    for slot in slots:
        for line in slot.lines:
            sys.stdout.write(line)
    sys.stdout.write(f"oncelog cluster of {nodes} nodes ready (node 1 is the controller)\n")
    sys.stdout.flush()
    while not stopping.wait(0.2):
        for slot in slots:
            code = slot.proc.poll()
            if code is None:
                continue
            # A node that fails on its own soon after starting (a port taken, a full disk) is
            # started again less and less often; one killed by a signal (an operator, the OOM
            # killer, a test's SIGKILL) comes back at once.
            quick = time.monotonic() - slot.started_at < 10 and code >= 0
            slot.backoff_s = min(slot.backoff_s * 2, 5.0) if quick else 0.2
            log.warning("node %d exited with code %s; starting it again in %.1fs", slot.node_id, code, slot.backoff_s)
            if stopping.wait(slot.backoff_s):
                break
            slot.start()
    _stop_all(slots)
    return 0


def _wait_listening(slot: _Node, timeout_s: float, stopping: threading.Event) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not stopping.is_set():
        if slot.listening.wait(0.05):
            return True
        if slot.proc.poll() is not None:
            return False
    return False


def _stop_all(slots: list[_Node]) -> None:
    for slot in reversed(slots):  # the followers first, the controller last
        if slot.proc is not None and slot.proc.poll() is None:
            slot.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 30
    for slot in slots:
        if slot.proc is None:
            continue
        try:
            slot.proc.wait(max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            slot.proc.kill()
            slot.proc.wait()
