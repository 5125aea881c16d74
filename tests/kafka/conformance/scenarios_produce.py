"""Produce edge cases: acks, sequences, epochs, fencing, record errors."""

from __future__ import annotations

from .framework import batch, scenario


@scenario("produce")
def plain_acks_all(k):
    """Two plain batches with acks=all: base offsets 0 and 2, log start 0."""
    t = k.create_topic("t")
    first = k.produce(t, batch([b"a", b"b"]))
    second = k.produce(t, batch([b"c"]))
    return [first, second, k.fetch(t)]


@scenario("produce")
def unknown_topic(k):
    """Produce to a topic that does not exist (no auto-creation on Produce)."""
    return k.produce(k.name("missing"), batch())


@scenario("produce")
def idempotent_duplicate(k):
    """An idempotent producer's batch sent twice: the second answer is the first's offset, stored once."""
    t = k.create_topic("t")
    init = k.init_producer_id()
    pid, epoch = init.producer_id, init.producer_epoch
    b = batch([b"a", b"b"], pid=pid, epoch=epoch, seq=0)
    return [init, k.produce(t, b), k.produce(t, b), k.fetch(t)]
