"""The broker's metrics, in Prometheus's format, under the names Kafka's dashboards already use.

An operator of a Kafka cluster scrapes Kafka's JMX MBeans through Prometheus's jmx_exporter, whose
rules (lower-cased, as in its example configuration for Kafka) turn
``kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=T`` into
``kafka_server_brokertopicmetrics_messagesin_total{topic="T"}``. oncelog serves the same names
where Kafka has the metric, so the same dashboards and alerts work; what is oncelog's own is under
``oncelog_``. docs/metrics.md maps every name to its MBean and says where a value differs.

Module boundaries (nothing here does I/O but :class:`MetricsEndpoint`):

* :class:`BrokerMetrics` — one per broker. The hot path (a request answered, records appended,
  bytes fetched, an authentication) only adds to plain counters in dicts: no locks, no
  prometheus_client objects, no label lookups. Everything else (logs, groups, transactions,
  lag, connections) is read from the broker's state when scraped (:mod:`oncelog.metrics.state`).
* :meth:`BrokerMetrics.collect` — builds prometheus_client metric families from both; it runs on
  the broker's event loop thread, the only thread that touches the broker's state.
* :class:`MetricsEndpoint` — ``GET /metrics`` on the broker's own event loop (a private registry
  per broker: several in-process brokers of a test each have theirs), the exposition written by
  prometheus_client. prometheus_client's own HTTP server was not used: it starts a thread per
  connection, without a bound, and would read the broker's state from another thread.

Request latency is Kafka's RequestMetrics, split the way the server handles a request
(oncelog.server.KafkaConnection): ``requestqueuetimems`` (the frame waited behind earlier requests
of its connection), ``localtimems`` (the handler ran), ``remotetimems`` (its answer waited on
something else: fsync, a fetch's wait, a coordinator's write), ``responsequeuetimems`` (the answer
waited for earlier answers of the connection) and ``totaltimems`` (received to written). Kafka
exports these as Yammer histograms, which jmx_exporter turns into quantile gauges; here they are
Prometheus histograms (``_bucket``/``_sum``/``_count``): ``histogram_quantile()`` gives the
quantiles, over any window and summed over brokers, which quantile gauges cannot.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import gzip
import logging
import re
import time
import zlib

from .. import notices

log = logging.getLogger("oncelog.metrics")

# Latency buckets in milliseconds: from the cost of an in-memory answer to a long fetch wait.
LATENCY_BUCKETS_MS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0,
                      2500.0, 5000.0, 10000.0, 30000.0)
GROUP_COMMIT_BUCKETS = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 1024.0)
TIMES = ("requestqueuetimems", "localtimems", "remotetimems", "responsequeuetimems", "totaltimems")
# At most this many topic series are kept: a client chooses the names, and a series per name it
# made up must not grow without bound. Past it, new names count under OVERFLOW_LABEL (the metric
# oncelog_metrics_series_dropped_total says how often). API labels are the handlers' (a request of
# an unknown API closes its connection uncounted), versions outside what a handler serves count as
# UNSUPPORTED_VERSION (any int16 a client sends, e.g. ApiVersions v300: KIP-511 answers it), error
# codes are the int16 a response holds: every label set is bounded by what the broker serves.
MAX_TOPIC_SERIES = 10_000
OVERFLOW_LABEL = "__other__"
UNSUPPORTED_VERSION = -1  # shown as version="unsupported"
SCRAPE_SLICE_SAMPLES = 1000  # samples written per loop turn of a scrape (~5 ms)


class Histogram:
    """Bucket counts, sum and count of one series (milliseconds unless ``buckets`` says other
    bounds); observe() is the hot path."""

    __slots__ = ("buckets", "counts", "sum")

    def __init__(self, buckets: tuple[float, ...] = LATENCY_BUCKETS_MS) -> None:
        self.buckets = buckets
        self.counts = [0] * (len(buckets) + 1)
        self.sum = 0.0

    @property
    def count(self) -> int:
        return sum(self.counts)

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.sum += value

    def cumulative(self) -> list[tuple[str, int]]:
        out, running = [], 0
        for bound, n in zip(self.buckets + (float("inf"),), self.counts):
            running += n
            out.append(("+Inf" if bound == float("inf") else repr(bound), running))
        return out


class RequestTiming:
    """One request's times (monotonic seconds), kept with its slot in the connection until its
    answer is written. ``done`` is set when an answer that was awaited becomes ready."""

    __slots__ = ("api_key", "version", "arrived", "started", "handled", "done")

    def __init__(self, api_key: int, version: int, arrived: float, started: float) -> None:
        self.api_key, self.version = api_key, version
        self.arrived, self.started = arrived, started
        self.handled = self.done = started

    def stamp(self, _future=None) -> None:
        self.done = time.monotonic()


def error_codes(api_key: int, response) -> list:
    """The error codes of an answer, as Kafka counts them in ErrorsPerSec. Produce and Fetch (the
    hot path) by their known shape; any other answer by a walk of its fields."""
    try:
        if api_key == 0:
            return [p.error_code for t in response.responses for p in t.partition_responses]
        if api_key == 1:
            codes = [response.error_code]
            codes.extend(p.error_code for t in response.responses for p in t.partitions)
            return codes
        return notices.error_codes(response)
    except (AttributeError, TypeError):  # an answer of another shape (a test's fault answered it)
        return []


class BrokerMetrics:
    """What one broker counts as it serves, and the families a scrape sees (:meth:`collect`)."""

    def __init__(self, broker=None) -> None:
        from ..apis import HANDLERS

        self.broker = broker
        self.versions = {key: (m.MIN_VERSION, m.MAX_VERSION) for key, m in HANDLERS.items()}
        self.requests: collections.Counter = collections.Counter()  # (api_key, version) -> n
        self.errors: collections.Counter = collections.Counter()  # (api_key, error code) -> n
        self.times: dict[int, tuple[Histogram, ...]] = {}  # api_key -> one Histogram per TIMES entry
        self.messages_in: collections.Counter = collections.Counter()  # topic -> records appended
        self.bytes_in: collections.Counter = collections.Counter()  # topic -> batch bytes appended
        self.bytes_out: collections.Counter = collections.Counter()  # topic -> record bytes fetched
        self.authentications: collections.Counter = collections.Counter()  # (listener, ok) -> n
        self.dropped = 0  # topic series not kept (MAX_TOPIC_SERIES)
        self.started = time.time()
        self.flush_ms = Histogram()  # one fsync round (group commit) of the flusher
        self.flush_logs = Histogram(GROUP_COMMIT_BUCKETS)  # logs one round covered
        # Set by the server (oncelog.server.serve), which owns the connections and the request
        # memory pool: () -> (connections per listener, pool bytes in use, pool size or None).
        self.server_state = None

    # ------------------------------------------------------------------ the hot path

    def request_done(self, timing: RequestTiming, written: float) -> None:
        """A request's answer was written (or it needed none) at ``written``."""
        self.request_times(timing.api_key, timing.version, timing.arrived, timing.started, timing.handled,
                           timing.done, written)

    def request_times(self, api_key: int, version: int, arrived: float, started: float, handled: float,
                      done: float, written: float) -> None:
        """The same from the times themselves (a request answered at once needs no RequestTiming).
        The five observations are inlined: this runs once per request."""
        served = self.versions.get(api_key)
        if served is None or not served[0] <= version <= served[1]:
            version = UNSUPPORTED_VERSION
        self.requests[api_key, version] += 1
        hists = self.times.get(api_key)
        if hists is None:
            hists = self.times[api_key] = tuple(Histogram() for _ in TIMES)
        find, first = bisect.bisect_left, LATENCY_BUCKETS_MS[0]
        for h, ms in zip(hists, ((started - arrived) * 1000.0, (handled - started) * 1000.0,
                                 (done - handled) * 1000.0, (written - done) * 1000.0,
                                 (written - arrived) * 1000.0)):
            # most parts of a quick answer are ~0 (no wait, nothing queued): the first bucket
            # without a search
            h.counts[find(LATENCY_BUCKETS_MS, ms) if ms > first else 0] += 1
            h.sum += ms

    def errors_in(self, api_key: int, codes) -> None:
        """The error codes an answer carries (Kafka's AbstractResponse.errorCounts: NONE included)."""
        errors = self.errors
        for code in codes:
            errors[api_key, int(code)] += 1

    def _topic(self, counter: collections.Counter, topic: str) -> str:
        if topic in counter or len(counter) - (OVERFLOW_LABEL in counter) < MAX_TOPIC_SERIES:
            return topic
        self.dropped += 1
        return OVERFLOW_LABEL

    def appended(self, topic: str, records: int, nbytes: int) -> None:
        self.messages_in[self._topic(self.messages_in, topic)] += records
        self.bytes_in[self._topic(self.bytes_in, topic)] += nbytes

    def fetched(self, topic: str, nbytes: int) -> None:
        if nbytes:
            self.bytes_out[self._topic(self.bytes_out, topic)] += nbytes

    def authenticated(self, listener: str, ok: bool) -> None:
        self.authentications[listener, ok] += 1

    def flushed(self, seconds: float, logs: int) -> None:
        """A flush round (oncelog.storage.flusher) fsynced ``logs`` logs in ``seconds``."""
        self.flush_ms.observe(seconds * 1000.0)
        self.flush_logs.observe(logs)

    def forget_topic(self, topic: str) -> None:
        """A deleted topic's series go with it (a client that creates and deletes topics all day
        must not grow them)."""
        for counter in (self.messages_in, self.bytes_in, self.bytes_out):
            counter.pop(topic, None)

    # ------------------------------------------------------------------ a scrape

    def collect(self) -> list:
        """Every metric family, built now (on the broker's event loop thread)."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        from .names import api_name, error_name

        families = []
        requests = CounterMetricFamily("kafka_network_requestmetrics_requests",
                                       "Requests answered, by API and version (RequestsPerSec)",
                                       labels=("request", "version"))
        for (api_key, version), n in sorted(self.requests.items()):
            label = "unsupported" if version == UNSUPPORTED_VERSION else str(version)
            requests.add_metric((api_name(api_key), label), n)
        families.append(requests)
        errors = CounterMetricFamily("kafka_network_requestmetrics_errors",
                                     "Error codes in answers, NONE included, by API (ErrorsPerSec)",
                                     labels=("request", "error"))
        for (api_key, code), n in sorted(self.errors.items()):
            errors.add_metric((api_name(api_key), error_name(code)), n)
        families.append(errors)
        for i, name in enumerate(TIMES):
            fam = HistogramMetricFamily(f"kafka_network_requestmetrics_{name}",
                                        f"Request {name.removesuffix('timems')} time in milliseconds, by API",
                                        labels=("request",))
            for api_key, hists in sorted(self.times.items()):
                h = hists[i]
                fam.add_metric((api_name(api_key),), h.cumulative(), h.sum)
            families.append(fam)
        for metric, counter, doc in (
                ("messagesin", self.messages_in, "Records appended, by topic (MessagesInPerSec)"),
                ("bytesin", self.bytes_in, "Record batch bytes appended, by topic (BytesInPerSec)"),
                ("bytesout", self.bytes_out, "Record bytes answered to fetches, by topic (BytesOutPerSec)")):
            fam = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{metric}", doc, labels=("topic",))
            for topic, n in sorted(counter.items()):
                fam.add_metric((topic,), n)
            families.append(fam)
        auth_ok = CounterMetricFamily("kafka_server_socket_server_metrics_successful_authentication",
                                      "SASL authentications that succeeded, by listener", labels=("listener",))
        auth_failed = CounterMetricFamily("kafka_server_socket_server_metrics_failed_authentication",
                                          "SASL authentications that failed, by listener", labels=("listener",))
        for (listener, ok), n in sorted(self.authentications.items()):
            (auth_ok if ok else auth_failed).add_metric((listener,), n)
        families += [auth_ok, auth_failed]
        if self.server_state is not None:
            per_listener, used, size = self.server_state()
            conns = GaugeMetricFamily("kafka_server_socket_server_metrics_connection_count",
                                      "Open client connections, by listener", labels=("listener",))
            for listener, n in sorted(per_listener.items()):
                conns.add_metric((listener,), n)
            pool_used = GaugeMetricFamily("kafka_network_socketserver_memorypoolused",
                                          "Bytes of requests received and not yet answered (queued.max.request.bytes)")
            pool_used.add_metric((), used)
            families += [conns, pool_used]
            if size is not None:
                pool_free = GaugeMetricFamily("kafka_network_socketserver_memorypoolavailable",
                                              "Bytes left in the request memory pool (queued.max.request.bytes)")
                pool_free.add_metric((), max(size - used, 0))
                families.append(pool_free)
        flush = HistogramMetricFamily("kafka_log_logflushstats_logflushrateandtimems",
                                      "fsync rounds and their time in milliseconds (one round fsyncs every log "
                                      "written since the last: group commit)")
        flush.add_metric((), self.flush_ms.cumulative(), self.flush_ms.sum)
        logs = HistogramMetricFamily("oncelog_log_flush_round_logs", "Logs one fsync round covered (group commit size)")
        logs.add_metric((), self.flush_logs.cumulative(), self.flush_logs.sum)
        families += [flush, logs]
        dropped = CounterMetricFamily("oncelog_metrics_series_dropped",
                                      f"Topic series not kept past {MAX_TOPIC_SERIES} topics (counted under "
                                      f"topic=\"{OVERFLOW_LABEL}\")")
        dropped.add_metric((), self.dropped)
        families.append(dropped)
        up = GaugeMetricFamily("oncelog_start_time_seconds", "When this broker process started (Unix time)")
        up.add_metric((), self.started)
        families.append(up)
        if self.broker is not None:
            from . import state

            families.extend(state.collect(self.broker))
        return families


class _Collector:
    """prometheus_client's collector interface over :meth:`BrokerMetrics.collect`."""

    def __init__(self, metrics: BrokerMetrics) -> None:
        self.metrics = metrics

    def collect(self):
        return self.metrics.collect()


class _Families:
    """A collector of families already built (a scrape collects once, whichever writer writes them)."""

    def __init__(self, families: list) -> None:
        self.families = families

    def collect(self):
        return self.families


_LEGACY_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
_LEGACY_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")


def exposition(families: list, encoder, eof: bool = True) -> bytes | None:
    """The text (0.0.4) or OpenMetrics (1.0) exposition of ``families``, byte for byte what
    prometheus_client's ``encoder`` (from ``choose_encoder``) writes, at a fraction of its cost:
    the library escapes every sample's name and label names character by character (a scrape of
    1,000 partitions is ~8,000 samples: 0.1-0.4 s on the broker's loop); here names are checked
    once per family. None for what only the library writes (another escaping, unit, exemplar,
    timestamp, native histogram, a type other than counter/gauge/histogram, a name outside the
    legacy character set, OpenMetrics-only samples in the text format): the caller uses it."""
    from prometheus_client.openmetrics import exposition as om_exposition
    from prometheus_client.utils import floatToGoString

    keywords = getattr(encoder, "keywords", {})
    if keywords.get("escaping", om_exposition.UNDERSCORES) not in (om_exposition.UNDERSCORES, om_exposition.ALLOWUTF8):
        return None
    om = getattr(encoder, "func", encoder) is om_exposition.generate_latest
    out: list[str] = []
    append = out.append
    label_strings: dict = {}
    try:
        for metric in families:
            mtype, name = metric.type, metric.name
            if mtype not in ("counter", "gauge", "histogram") or metric.unit or not _LEGACY_NAME.match(name):
                return None
            doc = metric.documentation.replace("\\", r"\\").replace("\n", r"\n")
            if om:
                doc = doc.replace('"', r'\"')
            elif mtype == "counter":
                name += "_total"
            append(f"# HELP {name} {doc}\n# TYPE {name} {mtype}\n")
            checked: set = set()
            for s in metric.samples:
                if s.timestamp is not None or s.exemplar is not None or s.native_histogram is not None:
                    return None
                labels = s.labels
                key = (s.name, *labels)
                if key not in checked:
                    if not _LEGACY_NAME.match(s.name) or not all(_LEGACY_LABEL.match(k) for k in labels) \
                            or (not om and s.name in (metric.name + "_created", metric.name + "_gsum",
                                                      metric.name + "_gcount")):
                        return None
                    checked.add(key)
                items = tuple(labels.items())
                labelstr = label_strings.get(items)
                if labelstr is None:  # the same labels recur in many families (a partition's series)
                    labelstr = label_strings[items] = "{" + ",".join(
                        [k + '="' + v.replace("\\", r"\\").replace("\n", r"\n").replace('"', r'\"') + '"'
                         for k, v in sorted(items)]) + "} " if items else " "
                v = s.value
                # floatToGoString's own answer for a finite value under 1e6: repr of the float
                if v.__class__ is float and -1e6 < v < 1e6:
                    value = repr(v)
                elif v.__class__ is int and -1_000_000 < v < 1_000_000:
                    value = repr(float(v))
                else:
                    value = floatToGoString(v)
                append(s.name + labelstr + value + "\n")
    except (AttributeError, TypeError):  # a value or label of a shape the library must judge
        return None
    if om and eof:  # (a scrape written in slices ends once)
        append("# EOF\n")
    return "".join(out).encode("utf-8")


def _accepts_gzip(value: str) -> bool:
    """Whether an Accept-Encoding header takes gzip (``gzip;q=0`` refuses it)."""
    for part in value.split(","):
        name, _, params = part.partition(";")
        if name.strip().lower() in ("gzip", "x-gzip"):
            q = params.strip().lower()
            try:
                return not q.startswith("q=") or float(q[2:]) > 0
            except ValueError:
                return False
    return False


def _encode(families: list, encoder, compress: bool) -> bytes:
    body = exposition(families, encoder)
    if body is None:  # something the fast writer does not write: the library's encoder
        body = encoder(_Families(families))
    return gzip.compress(body, compresslevel=1) if compress else body


class MetricsEndpoint:
    """``GET /metrics`` on ``host:port`` (oncelog.metrics.listener), served on the broker's own
    event loop: a scrape reads the broker's state on the thread that owns it, with no lock, and
    writes the text in slices between the loop's other work (:meth:`_scrape`; :func:`exposition`,
    prometheus_client's format; gzip when accepted); the HTTP around it is this class's, small and bounded as
    every byte from the network is hostile: at most :data:`MAX_CONNECTIONS` at once (more are
    closed at accept), a request head of at most :data:`MAX_HEAD` bytes read within
    :data:`READ_TIMEOUT_S`, one request per connection (``Connection: close``). :attr:`address`
    is the bound (host, port): port 0 picks a free one."""

    MAX_CONNECTIONS = 16
    MAX_HEAD = 8192
    READ_TIMEOUT_S = 10.0

    def __init__(self, metrics: BrokerMetrics) -> None:
        from prometheus_client import CollectorRegistry

        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_Collector(metrics))
        self.server: asyncio.AbstractServer | None = None
        self.address: tuple[str, int] | None = None
        self.open = 0
        self.served = 0
        self._inflight: dict[tuple, asyncio.Future] = {}

    async def _scrape(self, encoder, compress: bool) -> bytes:
        """The broker's state is read on its loop, then the text is written (and gzipped) on the
        loop too, a slice of about :data:`SCRAPE_SLICE_SAMPLES` samples per loop turn: clients
        are served between slices. Not on another thread: a thread writing text holds the GIL
        for its switch interval each time the loop lets go of it for a socket call, and a loop
        answering one small request per call then waits milliseconds per request (measured: the
        small-request produce case fell to 0.8x of metrics off while a scrape was written on a
        thread)."""
        families = list(self.registry.collect())
        slices, batch, size = [], [], 0
        for family in families:
            batch.append(family)
            size += len(family.samples)
            if size >= SCRAPE_SLICE_SAMPLES:
                slices.append(batch)
                batch, size = [], 0
        if batch or not slices:
            slices.append(batch)
        deflate = zlib.compressobj(1, zlib.DEFLATED, 31) if compress else None  # 31: the gzip format
        parts = []
        for i, part in enumerate(slices):
            text = exposition(part, encoder, eof=i == len(slices) - 1)
            if text is None:  # something only the library writes: all of it in one go
                return _encode(families, encoder, compress)
            parts.append(deflate.compress(text) if deflate else text)
            await asyncio.sleep(0)
        if deflate:
            parts.append(deflate.flush())
        return b"".join(parts)

    async def start(self, host: str, port: int) -> "MetricsEndpoint":
        self.server = await asyncio.start_server(self._serve, host, port, limit=self.MAX_HEAD, reuse_address=True)
        self.address = self.server.sockets[0].getsockname()[:2]
        return self

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.open >= self.MAX_CONNECTIONS:
            writer.transport.abort()
            return
        self.open += 1
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.READ_TIMEOUT_S)
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError, ConnectionError):
                return  # closed below, unanswered: not an HTTP request we read
            try:
                status, headers, body = await self._answer(head)
            except Exception:  # never into the loop's handler: whatever the request held
                log.exception("a metrics request failed")
                status, headers, body = b"500 Internal Server Error", [(b"Content-Type", b"text/plain")], b""
            # HEAD: the length a GET would get, and no body
            send = body if not head.startswith(b"HEAD ") else b""
            writer.write(b"HTTP/1.1 " + status + b"\r\n" + b"".join(k + b": " + v + b"\r\n" for k, v in headers)
                         + b"Content-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + send)
            await asyncio.wait_for(writer.drain(), self.READ_TIMEOUT_S)
        except (asyncio.TimeoutError, ConnectionError):
            pass
        finally:
            self.open -= 1
            if writer.transport.get_write_buffer_size():
                writer.transport.abort()  # a reader that stopped reading: nothing more is owed it
            else:
                writer.close()

    async def _answer(self, head: bytes) -> tuple[bytes, list, bytes]:
        from prometheus_client.exposition import choose_encoder

        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            return b"400 Bad Request", [(b"Content-Type", b"text/plain")], b"not an HTTP/1 request line\n"
        method, target = parts[0], parts[1]
        if method not in ("GET", "HEAD"):
            return b"405 Method Not Allowed", [(b"Allow", b"GET, HEAD"), (b"Content-Type", b"text/plain")], \
                b"GET /metrics\n"
        if target.split("?", 1)[0] not in ("/metrics", "/"):
            return b"404 Not Found", [(b"Content-Type", b"text/plain")], b"GET /metrics\n"
        fields = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                fields[name.strip().lower()] = value.strip()
        try:
            encoder, content_type = choose_encoder(fields.get("accept", ""))
        except Exception:  # an Accept header the library cannot parse (version=x): the text format
            encoder, content_type = choose_encoder("")
        compress = _accepts_gzip(fields.get("accept-encoding", ""))
        try:
            # Scrapes that arrive together share one snapshot: however many scrapers there are
            # (at most MAX_CONNECTIONS), the broker builds one scrape at a time per format.
            key = (content_type, compress)
            pending = self._inflight.get(key)
            if pending is None:
                pending = self._inflight[key] = asyncio.ensure_future(self._scrape(encoder, compress))
                pending.add_done_callback(lambda _done, key=key: self._inflight.pop(key, None))
            body = await asyncio.shield(pending)  # a scraper that goes away does not cancel the others'
        except Exception:  # a scrape must never take the broker down; the log says why
            log.exception("a metrics scrape failed")
            return b"500 Internal Server Error", [(b"Content-Type", b"text/plain")], b"scrape failed; see the log\n"
        self.served += 1
        headers = [(b"Content-Type", content_type.encode())]
        if compress:
            headers.append((b"Content-Encoding", b"gzip"))
        return b"200 OK", headers, body


__all__ = ["BrokerMetrics", "MetricsEndpoint", "RequestTiming", "error_codes", "exposition"]
