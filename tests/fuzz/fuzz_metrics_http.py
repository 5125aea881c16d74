"""Fuzz the broker's metrics endpoint's HTTP decoding (``oncelog.metrics.MetricsEndpoint``): the
request head as the endpoint reads it off the socket (``readuntil`` of the blank line, at most
``MAX_HEAD`` bytes), parsed and answered by ``_answer``.

    .venv/bin/python -m tests.fuzz.fuzz_metrics_http -runs=1000000
    .venv/bin/python -m tests.fuzz.fuzz_metrics_http crash-file          # replay one input

The input is either raw bytes or a head built from a method, a target and headers the input picks
(Accept and Accept-Encoding values among them, so the exposition's negotiation is reached). A bug
is: any exception out of ``_answer``; a status other than 200/400/404/405; a 200 that is not a
GET or HEAD of /metrics or /; a 200 body that is not the text or OpenMetrics exposition (gzipped
when asked for); an answer over 4 MiB (a scrape of an empty broker is a few KB).
"""

from __future__ import annotations

import asyncio
import gzip
import sys

import atheris

with atheris.instrument_imports(include=["oncelog.metrics"]):
    from oncelog.metrics import BrokerMetrics, MetricsEndpoint

from ._runner import main as run

METHODS = [b"GET", b"HEAD", b"POST", b"get", b"", b"GET GET", b"\xff"]
TARGETS = [b"/metrics", b"/", b"/metrics?x=1", b"/admin", b"", b"*", b"/metrics/../x", b"//"]
VERSIONS = [b"HTTP/1.1", b"HTTP/1.0", b"HTTP/2", b"", b"HTTP/1.1 extra"]
ACCEPTS = [b"text/plain", b"text/plain; version=0.0.4", b"text/plain; version=x",
           b"application/openmetrics-text; version=1.0.0", b"application/openmetrics-text; version=abc",
           b"application/openmetrics-text; version=1.0.0; escaping=values", b"*/*", b";;;", b"\xff\xfe"]
ENCODINGS = [b"gzip", b"gzip;q=0", b"x-gzip", b"gzip;q=abc", b"deflate, gzip;q=0.5", b"identity", b""]

metrics = BrokerMetrics()
endpoint = MetricsEndpoint(metrics)
loop = asyncio.new_event_loop()


def build(fdp) -> bytes:
    if fdp.ConsumeBool():
        head = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, MetricsEndpoint.MAX_HEAD - 4))
    else:
        head = b" ".join((fdp.PickValueInList(METHODS), fdp.PickValueInList(TARGETS), fdp.PickValueInList(VERSIONS)))
        for _ in range(fdp.ConsumeIntInRange(0, 6)):
            kind = fdp.ConsumeIntInRange(0, 3)
            if kind == 0:
                head += b"\r\nAccept: " + fdp.PickValueInList(ACCEPTS)
            elif kind == 1:
                head += b"\r\nAccept-Encoding: " + fdp.PickValueInList(ENCODINGS)
            else:
                head += b"\r\n" + fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 200))
    return head[:MetricsEndpoint.MAX_HEAD - 4] + b"\r\n\r\n"  # what readuntil hands over


def check(head: bytes) -> None:
    status, headers, body = loop.run_until_complete(endpoint._answer(head))
    if status not in (b"200 OK", b"400 Bad Request", b"404 Not Found", b"405 Method Not Allowed"):
        raise AssertionError(f"status {status!r}")
    if len(body) > 4 << 20:
        raise AssertionError(f"an answer of {len(body)} bytes")
    if status != b"200 OK":
        return
    parts = head.decode("latin-1").split("\r\n")[0].split(" ")
    if parts[0] not in ("GET", "HEAD") or parts[1].split("?", 1)[0] not in ("/metrics", "/"):
        raise AssertionError(f"200 for {parts!r}")
    fields = dict(headers)
    if fields.get(b"Content-Encoding") == b"gzip":
        body = gzip.decompress(body)
    text = body.decode("utf-8")
    if fields[b"Content-Type"].startswith(b"application/openmetrics-text"):
        if not text.endswith("# EOF\n"):
            raise AssertionError("an OpenMetrics exposition without its # EOF")
    elif not fields[b"Content-Type"].startswith(b"text/plain") or "# EOF" in text:
        raise AssertionError(f"content type {fields[b'Content-Type']!r}")
    if "# TYPE kafka_network_requestmetrics_requests_total counter" not in text \
            and "# TYPE kafka_network_requestmetrics_requests counter" not in text:
        raise AssertionError("the exposition lacks the request counter's family")


def test_one_input(data: bytes) -> None:
    check(build(atheris.FuzzedDataProvider(data)))


if __name__ == "__main__":
    run("metrics_http", test_one_input, [])
    sys.exit(0)
