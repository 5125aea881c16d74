"""What the decode guard costs: kio's decode alone vs ``codec.decode_request`` (guard + kio).

    .venv/bin/python -m tests.fuzz.guard_cost

Prints, per request, the best of several timeit repeats in µs: the guard's walk alone, kio's
decode alone (header + body), ``decode_request`` with the guard replaced by a no-op (before)
and ``decode_request`` as it is (after).
Requests: Produce v9 with one 1 KiB batch and with 10 (one per partition), Fetch v12 of one
partition and of 10 (librdkafka's shape), Metadata v12 of 3 topics, and every frame of the
seed corpus in aggregate.
"""

from __future__ import annotations

import datetime
import io
import os
import timeit

from oncelog.protocol import codec, guard
from oncelog.client.wire import request_module, write_request

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "requests")


def _frame(request) -> bytes:
    out = io.BytesIO()
    write_request(out, request, 7, "rdkafka")
    return out.getvalue()


def _batch() -> bytes:
    return os.urandom(1024)  # the request decoder does not look inside the records


def frames() -> dict[str, bytes]:
    m = request_module(0, 9)
    batch = _batch()
    produce = lambda n: m.ProduceRequest(  # noqa: E731
        transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=30),
        topic_data=(m.TopicProduceData(name="events", partition_data=tuple(
            m.PartitionProduceData(index=i, records=batch) for i in range(n))),))
    f = request_module(1, 12)
    fetch = lambda n: f.FetchRequest(  # noqa: E731
        replica_id=-1, max_wait=datetime.timedelta(milliseconds=500), min_bytes=1, max_bytes=52428800,
        isolation_level=0, session_id=0, session_epoch=-1,
        topics=(f.FetchTopic(topic="events", partitions=tuple(
            f.FetchPartition(partition=i, current_leader_epoch=-1, fetch_offset=100, last_fetched_epoch=-1,
                             log_start_offset=-1, partition_max_bytes=1048576) for i in range(n))),),
        forgotten_topics_data=(), rack_id="")
    md = request_module(3, 12)
    metadata = md.MetadataRequest(topics=tuple(md.MetadataRequestTopic(topic_id=None, name=f"topic-{i}")
                                               for i in range(3)),
                                  allow_auto_topic_creation=True, include_topic_authorized_operations=False)
    return {"Produce v9, 1 x 1 KiB": _frame(produce(1)), "Produce v9, 10 x 1 KiB": _frame(produce(10)),
            "Fetch v12, 1 partition": _frame(fetch(1)), "Fetch v12, 10 partitions": _frame(fetch(10)),
            "Metadata v12, 3 topics": _frame(metadata)}


def _best(fn, number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=7)) / number * 1e6


def kio_only(frame: bytes, key: int, version: int):
    cls = codec.request_class(key, version)
    header, used = codec.reader(cls.__header_schema__)(frame, 0)
    return codec.reader(cls)(frame, used)


def measure(frame: bytes, number: int = 20000) -> tuple[float, float, float, float]:
    key, version, _ = codec.peek_header(frame)
    cls = codec.request_class(key, version)
    codec.decode_request(frame, key, version)  # warm the caches
    g = _best(lambda: guard.check_request(cls, frame), number)
    k = _best(lambda: kio_only(frame, key, version), number)
    real = codec.check_request
    codec.check_request = lambda cls, frame: None
    try:
        before = _best(lambda: codec.decode_request(frame, key, version), number)
    finally:
        codec.check_request = real
    after = _best(lambda: codec.decode_request(frame, key, version), number)
    return g, k, before, after


def main() -> None:
    print(f"{'request':28} {'bytes':>6} {'guard':>7} {'kio':>7} {'before':>7} {'after':>7}  (µs, best of 7)")
    for name, frame in frames().items():
        g, k, b, a = measure(frame)
        print(f"{name:28} {len(frame):6d} {g:7.2f} {k:7.2f} {b:7.2f} {a:7.2f}")
    corpus = [open(os.path.join(CORPUS, n), "rb").read() for n in sorted(os.listdir(CORPUS))]
    totals = [0.0] * 4
    for frame in corpus:
        for i, v in enumerate(measure(frame, 2000)):
            totals[i] += v
    n = len(corpus)
    print(f"{f'corpus, mean of {n} frames':28} {'':6} " + " ".join(f"{t / n:7.2f}" for t in totals))


if __name__ == "__main__":
    main()
