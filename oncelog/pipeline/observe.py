"""Watching outputs appear: a read_committed reader of one topic in a thread of its own.

It counts the records a downstream consumer can see (what the demo calls "rows processed"),
samples that count over time for the plot, and optionally times each record from its input's
produce time to now (the pipeline's end-to-end latency; the enriched output carries the input
record's timestamp as ``in_ts_ms``). confluent-kafka reconnects by itself across a broker restart.
"""

from __future__ import annotations

import threading
import time
import uuid


class OutputObserver(threading.Thread):
    def __init__(self, bootstrap: str, topic: str, partitions: int, *, latency: bool = False,
                 sample_every: float = 0.5, conf: dict | None = None) -> None:
        super().__init__(daemon=True, name=f"observe-{topic}")
        self.bootstrap = bootstrap
        self.conf = conf  # more librdkafka settings (security)
        self.topic = topic
        self.partitions = partitions
        self.latency = latency
        self.sample_every = sample_every
        self.count = 0
        self.samples: list[tuple[float, int]] = []  # (time.time(), count)
        self.latencies_ms: list[float] = []
        self.latency_times: list[float] = []  # when each latency was observed (time.time())
        self._halt = threading.Event()
        self.error: str | None = None

    def stop(self) -> None:
        self._halt.set()
        self.join(10)

    def run(self) -> None:
        import confluent_kafka as ck

        from .events import client_conf, quiet_logger

        consumer = ck.Consumer({**client_conf(self.bootstrap, self.conf), "group.id": f"oncelog-observer-{uuid.uuid4().hex}",
                                "enable.auto.commit": False, "isolation.level": "read_committed",
                                "auto.offset.reset": "earliest", "fetch.wait.max.ms": 50,
                                "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500,
                                "logger": quiet_logger()})
        consumer.assign([ck.TopicPartition(self.topic, p, ck.OFFSET_BEGINNING) for p in range(self.partitions)])
        next_sample = time.time()
        key = b'"in_ts_ms":'
        try:
            while not self._halt.is_set():
                msgs = consumer.consume(5000, 0.1)
                now = time.time()
                n = 0
                lat = []
                for m in msgs:
                    if m.error() is not None:
                        continue
                    n += 1
                    if self.latency:
                        v = m.value()
                        i = v.rfind(key)
                        if i >= 0:
                            j = i + len(key)
                            k = j
                            while k < len(v) and 48 <= v[k] <= 57:
                                k += 1
                            if k > j:
                                lat.append(now * 1000 - int(v[j:k]))
                self.count += n
                if lat:
                    self.latencies_ms.extend(lat)
                    self.latency_times.extend([now] * len(lat))
                if now >= next_sample:
                    self.samples.append((now, self.count))
                    next_sample = now + self.sample_every
        except Exception as exc:  # reported by the caller; the run goes on without live counts
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self.samples.append((time.time(), self.count))
            consumer.close()


def percentiles(values, qs=(50, 99)) -> dict[str, float]:
    import numpy as np

    if len(values) == 0:
        return {f"p{q}": float("nan") for q in qs}
    arr = np.asarray(values, dtype=float)
    return {f"p{q}": float(np.percentile(arr, q)) for q in qs}
