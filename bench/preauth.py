"""``python -m bench preauth``: what 2,000 hostile sockets on a SASL_SSL listener cost an oncelog
broker and its authenticated clients (the pre-authentication limits).

An authenticated client (SASL_SSL, PLAIN; a process of its own) sends Metadata requests every
10 ms, first alone (the baseline), then while this process holds ``--sockets`` hostile
connections, a quarter of each kind:

- ``tcp``: TCP connected, no TLS handshake ever started (the broker closes them after 10 s);
- ``tls``: TLS handshake done, nothing sent;
- ``partial``: TLS, then 64 KiB of a declared 500 KiB pre-authentication frame (under
  ``sasl.server.max.receive.size``), never finished;
- ``oversize``: TLS, then a 3 MiB pre-authentication size prefix (closed at once).

Printed: the probe's p50/p99 alone and under attack and their ratio (goal: p99 under attack at
most 2x the baseline), the broker's resident memory before and at its peak, its open
descriptors under attack, and how many hostile sockets it admitted (the default
``max.connections`` is 1000: the rest are refused at accept). :func:`attack` is also what
tests/e2e/test_preauth_limits.py runs, asserting only the bounds (memory, descriptors, service).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import resource
import socket
import ssl
import struct
import tempfile
import time

from oncelog.client.wire import RawClient, request_module
from oncelog.process import BrokerProcess

KiB, MiB = 1 << 10, 1 << 20
KINDS = ("tcp", "tls", "partial", "oversize")
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_alice="alice-secret";')


def start_broker(work: str, *extra: str) -> tuple[BrokerProcess, int, str]:
    """A broker with a loopback PLAINTEXT listener and a SASL_SSL one (PLAIN); (broker, SASL_SSL
    port, CA file)."""
    import trustme

    ca = trustme.CA()
    ca_path, keystore = os.path.join(work, "ca.pem"), os.path.join(work, "broker.pem")
    ca.cert_pem.write_to_path(ca_path)
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(keystore)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    broker = BrokerProcess(os.path.join(work, "broker"), extra_args=[
        "--override", f"listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:{port}",
        "--override", f"ssl.keystore.location={keystore}",
        "--override", f"listener.name.sasl_ssl.plain.sasl.jaas.config={JAAS}",
        "--override", "listener.name.sasl_ssl.sasl.enabled.mechanisms=PLAIN", *extra])
    broker.start()
    return broker, port, ca_path


def _tls(port: int, ca_path: str, source_ip: str) -> ssl.SSLSocket:
    ctx = ssl.create_default_context(cafile=ca_path)
    raw = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source_ip, 0))
    return ctx.wrap_socket(raw, server_hostname="127.0.0.1")


def login(port: int, ca_path: str) -> RawClient:
    """An authenticated SASL_SSL connection (alice, PLAIN) as a RawClient."""
    c = RawClient.__new__(RawClient)
    c.sock, c.correlation_id = _tls(port, ca_path, "127.0.0.1"), 0
    assert c.request(request_module(17, 1).SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
    answer = c.request(request_module(36, 2).SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"))
    assert answer.error_code == 0, answer
    return c


def _probe(port: int, ca_path: str, phases, out) -> None:
    """Metadata every 10 ms; one list of latencies per phase (a phase ends when the parent says so)."""
    client = login(port, ca_path)
    request = request_module(3, 1).MetadataRequest(topics=None)
    try:
        for phase in phases:
            samples = []
            while not phase.is_set():
                t = time.monotonic()
                client.request(request)
                samples.append(time.monotonic() - t)
                time.sleep(0.01)
            out.put(samples)
    finally:
        client.close()


def _status(pid: int) -> dict[str, float]:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) / 1024
    out["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    return out


def _open_hostile(kind: str, port: int, ca_path: str, source_ip: str):
    try:
        if kind == "tcp":
            return socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source_ip, 0))
        s = _tls(port, ca_path, source_ip)
        if kind == "partial":
            s.sendall(struct.pack(">i", 500 * KiB) + bytes(64 * KiB))
        elif kind == "oversize":
            s.sendall(struct.pack(">i", 3 * MiB) + bytes(1024))
        return s
    except (OSError, ssl.SSLError):
        return None  # refused at accept (over max.connections) or closed during the handshake


def _alive(s) -> bool:
    try:
        s.setblocking(False)
        return s.recv(1) != b""
    except (BlockingIOError, ssl.SSLWantReadError):
        return True
    except (OSError, ssl.SSLError):
        return False


def attack(broker: BrokerProcess, port: int, ca_path: str, sockets: int, probe_seconds: float = 3.0) -> dict:
    """Baseline probe, then ``sockets`` hostile connections held while the probe runs again;
    returns the figures (latencies in seconds, memory in MiB)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = sockets + 256
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard) if hard != resource.RLIM_INFINITY else want, hard))
    phases = [mp.Event(), mp.Event()]
    out = mp.Queue()
    probe = mp.Process(target=_probe, args=(port, ca_path, phases, out), daemon=True)
    probe.start()
    time.sleep(probe_seconds)
    phases[0].set()
    baseline = out.get(timeout=60)
    before = _status(broker.proc.pid)
    held = []
    for i in range(sockets):
        # Several source addresses: the per-IP quota is not what is measured here.
        held.append((KINDS[i % len(KINDS)], _open_hostile(KINDS[i % len(KINDS)], port, ca_path,
                                                        f"127.0.1.{1 + i % 200}")))
    opened_at = time.monotonic()
    time.sleep(0.5)
    under = _status(broker.proc.pid)
    time.sleep(max(0.0, probe_seconds - 0.5))
    phases[1].set()
    attacked = out.get(timeout=60)
    probe.join(30)
    alive = {k: sum(1 for kind, s in held if kind == k and s is not None and _alive(s)) for k in KINDS}
    peak = _status(broker.proc.pid)
    for _, s in held:
        if s is not None:
            s.close()
    return {"baseline": baseline, "attacked": attacked, "before": before, "under": under, "peak": peak,
            "alive": alive, "sockets": sockets, "held_for_s": time.monotonic() - opened_at}


def _pct(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(q * len(s)))]


def report(r: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"{r['sockets']} hostile sockets on a SASL_SSL listener (python -m bench preauth)")
    t.add_column("figure")
    t.add_column("value", justify="right")
    b50, b99 = _pct(r["baseline"], 0.5) * 1000, _pct(r["baseline"], 0.99) * 1000
    a50, a99 = _pct(r["attacked"], 0.5) * 1000, _pct(r["attacked"], 0.99) * 1000
    t.add_row("Metadata p50 / p99 alone (ms)", f"{b50:.2f} / {b99:.2f} ({len(r['baseline'])} requests)")
    t.add_row("Metadata p50 / p99 under attack (ms)", f"{a50:.2f} / {a99:.2f} ({len(r['attacked'])} requests)")
    t.add_row("p99 under attack / alone (goal <= 2.0)", f"{a99 / b99:.2f}")
    t.add_row("broker RSS before / under attack / peak (MiB)",
              f"{r['before']['VmRSS']:.0f} / {r['under']['VmRSS']:.0f} / {r['peak']['VmHWM']:.0f}")
    t.add_row("broker open descriptors before / under attack", f"{r['before']['fds']} / {r['under']['fds']}")
    t.add_row("hostile sockets still open, by kind", ", ".join(f"{k} {v}" for k, v in r["alive"].items()))
    Console().print(t)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench preauth", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sockets", type=int, default=2000)
    # 8 s: ~700 probes a phase, so that p99 is not one or two slow answers
    parser.add_argument("--probe-seconds", type=float, default=8.0)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-preauth-") as work:
        broker, port, ca_path = start_broker(work)
        try:
            report(attack(broker, port, ca_path, args.sockets, args.probe_seconds))
        finally:
            broker.kill()
    return 0
