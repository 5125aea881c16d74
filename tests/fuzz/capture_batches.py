"""Capture the record-batch seed corpus: real batches of confluent-kafka, kafka-python and
aiokafka in every codec, read back from a real broker's segment files.

Each client produces a few records (keys, null values, headers, several sizes) to its own topic per
codec on a real ``oncelog serve``; every batch of every segment file is then written to
``tests/fuzz/corpus/batches/<client>-<codec>-<n>.bin`` (one batch per file, as a Produce request's
records field carries it), plus the reproducers of tests/bad_batches.py as ``bad-<name>``.

Re-run (replaces those files; about a minute, starts one broker)::

    .venv/bin/python -m tests.fuzz.capture_batches
"""

from __future__ import annotations

import asyncio
import glob
import os
import tempfile

from oncelog.process import BrokerProcess
from oncelog.protocol import records as rb

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "batches")
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def _records():
    yield b"k0", b"v" * 10, []
    yield None, b"no key", [("h", b"x")]
    yield b"k2", None, []
    yield b"k3", os.urandom(300), [("a", b"1"), ("b", None)]
    yield b"k4", b"x" * 3000, []


def _confluent(bootstrap: str, topic: str, codec: str) -> None:
    import confluent_kafka as ck

    p = ck.Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 50})
    for k, v, h in _records():
        p.produce(topic, key=k, value=v, headers=h or None)
    assert p.flush(20) == 0


def _kafka_python(bootstrap: str, topic: str, codec: str) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec,
                      linger_ms=50)
    for k, v, h in _records():
        p.send(topic, key=k, value=v, headers=[(hk, hv or b"") for hk, hv in h])  # no null header values
    p.flush(20)
    p.close()


def _aiokafka(bootstrap: str, topic: str, codec: str) -> None:
    from aiokafka import AIOKafkaProducer

    async def go():
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec,
                             linger_ms=50)
        await p.start()
        try:
            futures = [await p.send(topic, key=k, value=v, headers=h) for k, v, h in _records()]
            await asyncio.gather(*futures)
        finally:
            await p.stop()

    asyncio.run(go())


CLIENTS = {"confluent": _confluent, "kafkapython": _kafka_python, "aiokafka": _aiokafka}


def main() -> None:
    os.makedirs(CORPUS, exist_ok=True)
    for old in glob.glob(os.path.join(CORPUS, "*")):
        os.unlink(old)
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(os.path.join(tmp, "data"), fsync="never",
                               ).start()
        try:
            for client, produce in CLIENTS.items():
                for codec in CODECS:
                    topic = f"seed-{client}-{codec}"
                    from tests.helpers import create_topic

                    create_topic(broker.bootstrap, topic, 1)
                    try:
                        produce(broker.bootstrap, topic, codec)
                    except Exception as exc:  # a client without that codec: say so, go on
                        print(f"{client} {codec}: {type(exc).__name__}: {exc}")
        finally:
            broker.stop()
        for path in sorted(glob.glob(os.path.join(tmp, "data", "seed-*", "*.log"))):
            name = os.path.basename(os.path.dirname(path)).removeprefix("seed-").rsplit("-", 2)[0]
            with open(path, "rb") as f:
                data = f.read()
            pos = n = 0
            while pos + rb.HEADER_SIZE <= len(data):
                h = rb.parse_header(data, pos)
                codec = CODECS[h.compression]
                with open(os.path.join(CORPUS, f"{name}-{codec}-{n}.bin"), "wb") as out:
                    out.write(data[pos : pos + h.size])
                pos += h.size
                n += 1
    from tests import bad_batches

    for name, data in bad_batches.seed_dir_batches().items():
        with open(os.path.join(CORPUS, f"bad-{name}"), "wb") as f:
            f.write(data)
    print(f"{len(os.listdir(CORPUS))} files in {CORPUS}")


if __name__ == "__main__":
    main()
