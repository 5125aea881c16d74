"""A partition can never be bricked: a real broker process restarted on a log that holds a
planted 2^31-record batch followed by batches beyond its segment's int32 offset range (the
state a broker before record validation left after accepting such a batch) repairs the log at start-up,
says so in its log, loses nothing, and serves producers and consumers again."""

from __future__ import annotations

import os

import confluent_kafka as ck
import pytest

from oncelog.protocol import records as rb

from ..helpers import consume_all, create_topic
from ..storage.test_offset_overflow import HUGE, lying_batch

TOPIC = "planted"


def _produce(bootstrap: str, values: list[bytes]) -> None:
    p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for v in values:
        p.produce(TOPIC, key=b"k", value=v)
    assert p.flush(30) == 0


@pytest.mark.parametrize("shutdown", ["sigkill", "clean"])
def test_planted_overflow_is_repaired_at_start_up_and_the_partition_serves(broker_factory, shutdown):
    broker = broker_factory()
    create_topic(broker.bootstrap, TOPIC)
    before = [b"before-%d" % i for i in range(3)]
    _produce(broker.bootstrap, before)
    if shutdown == "sigkill":
        broker.kill()
    else:
        assert broker.stop() == 0
    segment = os.path.join(broker.data_dir, f"{TOPIC}-0", f"{0:020d}.log")
    planted = [b"planted-%02d" % i for i in range(30)]
    with open(segment, "ab") as f:  # what an older broker wrote: offsets 3 .. 3+2^31+29 in one segment
        f.write(lying_batch(HUGE, base_offset=3, value=b"lie"))
        for i, v in enumerate(planted):
            f.write(rb.build_batch([(b"k", v)], timestamp_ms=1000, base_offset=3 + HUGE + i))
    broker.restart()
    assert "recovery split" in broker.tail_log(200)
    after = [b"after-%d" % i for i in range(5)]
    _produce(broker.bootstrap, after)  # appends work: this failed for ever before
    expected = before + [b"lie"] + planted + after
    got = consume_all(broker.bootstrap, TOPIC, 1, expected=len(expected), timeout=60)[0]
    assert [v for _, _, v, _ in got] == expected
    offsets = [o for o, _, _, _ in got]
    assert offsets[:4] == [0, 1, 2, 3] and offsets[4] == 3 + HUGE
    assert offsets[-1] == 3 + HUGE + len(planted) + len(after) - 1
    # and again after one more SIGKILL: the repaired log recovers as it is
    broker.kill()
    broker.restart()
    _produce(broker.bootstrap, [b"last"])
    got = consume_all(broker.bootstrap, TOPIC, 1, expected=len(expected) + 1, timeout=60)[0]
    assert [v for _, _, v, _ in got] == expected + [b"last"]
