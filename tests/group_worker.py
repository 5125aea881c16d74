"""A group consumer process for tests: consumes, logs each batch, commits synchronously.

Output file lines: ``B p:o p:o ...`` before a commit, ``C`` after it succeeded, ``F <error>``
after it failed. The test counts only batches followed by ``C`` (the killed worker's last ``B``
is resolved by the test). Exits when ``stop_file`` exists and nothing arrived for 2 s.
"""

import os
import sys
import time

import confluent_kafka as ck


def main(bootstrap: str, topic: str, group: str, out_path: str, stop_file: str) -> None:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                     "partition.assignment.strategy": "range", "fetch.wait.max.ms": 100})
    c.subscribe([topic])
    idle_since = time.monotonic()
    with open(out_path, "a", buffering=1) as out:
        while True:
            msgs = [m for m in c.consume(200, 0.3) if not m.error()]
            if not msgs:
                if os.path.exists(stop_file) and time.monotonic() - idle_since > 2:
                    break
                continue
            idle_since = time.monotonic()
            out.write("B " + " ".join(f"{m.partition()}:{m.offset()}" for m in msgs) + "\n")
            out.flush()
            os.fsync(out.fileno())
            try:
                c.commit(asynchronous=False)
                out.write("C\n")
            except ck.KafkaException as exc:
                out.write(f"F {exc.args[0]}\n")
            out.flush()
            time.sleep(0.02)  # a little processing time, so the stream overlaps the membership changes
    c.close()


if __name__ == "__main__":
    main(*sys.argv[1:])
