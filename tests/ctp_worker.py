"""An exactly-once consume-transform-produce worker, for the crash tests.

Reads ``input`` (read_committed, group ``ctp``; on the classic protocol a static member, so a
restart takes over at once), writes ``<value>-transformed@<partition>:<offset>`` to the same
partition of ``output``, and every ~100 records commits output and input offsets in one transaction
(send_offsets_to_transaction with the consumer's group metadata). A new instance fences the
previous one through the shared transactional id.

It behaves as a supervised worker must, so that the test's restart loop (its supervisor) takes
over instead of the worker idling:

* every consumer error is logged; a fatal one, or one that means this instance is no longer the
  group member its transactions commit offsets for, ends the process (exit 3), as does any
  exception from the producer (fenced, fatal, or a transaction that must be aborted);
* a blocking client call that has not returned ``stall_s`` seconds after it started ends the
  process (exit 1, with a traceback of where it hung), whatever the client's own timeouts say.

Once the soak stalled for its full 600 s: librdkafka 2.16's send_offsets_to_transaction()
waits for ever, past its own timeout, in the first transaction after our single broker
restarted. With every broker down librdkafka re-bootstraps and decommissions the broker object
it still caches as group coordinator; the TxnOffsetCommit then waits for that dead object to
come up and is never retried (confluentinc/librdkafka#5456 and librdkafka#5511), while the consumer leaves
the group (max.poll.interval.ms). Hence the producer does not re-bootstrap
(``metadata.recovery.strategy=none``: one broker at a fixed address has nothing to
re-discover), and the stall limit covers client hangs we do not know of.

Two group protocols (``--group-protocol``):

* ``classic`` (the default): JoinGroup/SyncGroup, static member ``ctp-worker``, so that a restart
  takes over the crashed instance's partitions at once (session.timeout.ms 6 s otherwise).
* ``consumer`` (KIP-848, ``group.protocol=consumer``): ConsumerGroupHeartbeat, and the group
  metadata handed to send_offsets_to_transaction carries the member epoch, by which the broker
  fences a zombie's TxnOffsetCommit. The member is dynamic: KIP-848 lets a static member's
  replacement in only after the old one left with epoch -2 (a SIGKILLed one never does), and
  librdkafka 2.16 makes the UNRELEASED_INSTANCE_ID answer a fatal consumer error, so a static
  restart would only fail again and again until the broker expires the dead member; a dynamic
  one joins at once and is given the partitions when the dead member's session expires (the
  broker's group.consumer.session.timeout.ms: no session timeout on the client in KIP-848).
  Several workers may share the group (each with its own ``--transactional-id``): partitions
  move between them incrementally. The group metadata is taken right after each consume(), so
  that it names the member epoch under which the batch was read (KIP-447's rule), and the
  offsets committed are those after the batch's own records; records of a partition revoked or
  lost during that consume() are dropped. A worker that stalls while its partitions move on
  is then refused when it sends the offsets (and exits, see above), instead of committing a
  batch that its partitions' new owner reads again.

The names (``--input``, ``--output``, ``--group``, ``--transactional-id``) default to ``input``,
``output``, ``ctp``, ``ctp-txn``. A test hook: SIGUSR1 or SIGUSR2 makes the worker stop itself
(SIGSTOP) in its next transaction, its output flushed to the log and its offsets not yet sent,
so a test can make it a zombie at that exact point (see ZombieHook).

``CTP_DEBUG`` in the environment is handed to the producer as librdkafka's ``debug`` (e.g.
``eos,broker,protocol``), to see where a transaction waits.

Usage: ``python -m tests.ctp_worker BOOTSTRAP [STALL_S] [--group-protocol classic|consumer]
[--input NAME] [--output NAME] [--group NAME] [--transactional-id ID]``.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import os
import signal
import sys
import time

import confluent_kafka as ck

API_TIMEOUT_S = 30
STALL_S = API_TIMEOUT_S + 10  # a call may use its whole timeout; past that it is stuck

# Consumer errors after which this instance must not go on: it left the group or was replaced,
# so the group metadata its transactions carry is stale (KIP-447 would fence them anyway).
OUT_OF_GROUP = frozenset({ck.KafkaError._MAX_POLL_EXCEEDED, ck.KafkaError._FENCED, ck.KafkaError.FENCED_INSTANCE_ID,
                          ck.KafkaError.UNKNOWN_MEMBER_ID, ck.KafkaError.ILLEGAL_GENERATION})


class WorkerExit(Exception):
    pass


def log(what: str) -> None:
    print(f"worker {time.time():.3f}: {what}", file=sys.stderr, flush=True)


def check(err: ck.KafkaError, source: str) -> None:
    """Log a client error; raise WorkerExit when the worker must not continue after it."""
    log(f"{source} error: {err}")
    # error_cb reports a fatal error as _FATAL without setting fatal() on it
    if err.fatal() or err.code() == ck.KafkaError._FATAL or err.code() in OUT_OF_GROUP:
        raise WorkerExit(f"{source}: {err}")


@contextlib.contextmanager
def returns_within(seconds: float):
    """Exit the process (status 1, tracebacks on stderr) unless the block ends in ``seconds``.
    A watchdog thread of faulthandler does it, so a call blocked in C code is covered too."""
    faulthandler.dump_traceback_later(seconds, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def consumer_config(args) -> dict:
    config = {"bootstrap.servers": args.bootstrap, "group.id": args.group, "isolation.level": "read_committed",
              "enable.auto.commit": False, "auto.offset.reset": "earliest", "max.poll.interval.ms": 30000,
              "fetch.wait.max.ms": 50, "error_cb": lambda err: check(err, "consumer")}
    if args.group_protocol == "classic":
        return {**config, "group.instance.id": "ctp-worker", "session.timeout.ms": 6000}
    # KIP-848: dynamic member, session timeout set by the broker (see the module docstring).
    return {**config, "group.protocol": "consumer"}


class ZombieHook:
    """A test hook: a signal asks the worker to become a zombie. In its next transaction, once the
    output is in the log and before the offsets are sent, it stops itself (SIGSTOP) until the
    test resumes it (SIGCONT), e.g. once the broker has removed it from the group. On SIGUSR1 it
    sends the offsets at once when resumed; on SIGUSR2 it first polls (up to 15 s) until its
    consumer has rejoined the group (its group metadata changed: a new member epoch), so the
    offsets go out with the old metadata of a member the broker knows again under a newer epoch
    (had the worker taken the group metadata at send time, this batch would commit: KIP-848
    accepts any partition from a member's current epoch)."""

    def __init__(self) -> None:
        self.requested: int | None = None
        signal.signal(signal.SIGUSR1, self._request)
        signal.signal(signal.SIGUSR2, self._request)

    def _request(self, signum, frame) -> None:
        self.requested = signum

    def maybe_stop(self, producer, consumer, stall_s: float) -> None:
        if self.requested is None:
            return
        wait_for_rejoin, self.requested = self.requested == signal.SIGUSR2, None
        with returns_within(stall_s):
            producer.flush(API_TIMEOUT_S)
        before = consumer.consumer_group_metadata()
        log("stopping mid-transaction (zombie hook)")
        os.kill(os.getpid(), signal.SIGSTOP)
        log("resumed")
        if not wait_for_rejoin:
            return
        # librdkafka rejoins only when the application polls (as a worker that polls while it
        # processes a long batch does): poll with the partitions paused, and put back any record
        # that a newly assigned partition delivers all the same.
        consumer.pause(consumer.assignment())
        deadline = time.monotonic() + 15
        while consumer.consumer_group_metadata() == before and time.monotonic() < deadline:
            m = consumer.poll(0.1)
            if m is not None and m.error():
                check(m.error(), "consumer")
            elif m is not None:
                consumer.seek(ck.TopicPartition(m.topic(), m.partition(), m.offset()))
        consumer.resume(consumer.assignment())
        changed = consumer.consumer_group_metadata() != before
        log(f"{'rejoined' if changed else 'not rejoined within 15 s'}: {consumer.consumer_group_metadata()!r}")


def main(args) -> None:
    stall_s, consumer_protocol = args.stall_s, args.group_protocol == "consumer"
    consumer = ck.Consumer(consumer_config(args))
    producer = ck.Producer({"bootstrap.servers": args.bootstrap, "transactional.id": args.transactional_id,
                            "linger.ms": 5, "transaction.timeout.ms": 10000, "message.timeout.ms": 10000,
                            "metadata.recovery.strategy": "none",  # see the module docstring
                            "error_cb": lambda err: check(err, "producer"),
                            **({"debug": os.environ["CTP_DEBUG"]} if os.environ.get("CTP_DEBUG") else {})})
    zombie = ZombieHook()
    with returns_within(stall_s):
        producer.init_transactions(API_TIMEOUT_S)
    taken_away: set[int] = set()  # partitions revoked or lost during the current consume()

    def give_up(consumer, partitions) -> None:
        taken_away.update(p.partition for p in partitions)

    if consumer_protocol:
        consumer.subscribe([args.input], on_revoke=give_up, on_lost=give_up)
    else:
        consumer.subscribe([args.input])
    while True:
        msgs = []
        taken_away.clear()
        with returns_within(stall_s):
            for m in consumer.consume(100, 0.5):
                if m.error():
                    check(m.error(), "consumer")
                else:
                    msgs.append(m)
        if consumer_protocol:
            # The group metadata of the member that read these records, taken now: sent with their
            # offsets, it fences this batch if the member is removed or rebalanced before the
            # offsets reach the broker (taken at send time, after a stall librdkafka may have
            # rejoined, and a fresh epoch would let a zombie's batch commit). Records of a
            # partition given up during this consume() are dropped (its new owner reads them).
            group_metadata = consumer.consumer_group_metadata()
            owned = {p.partition for p in consumer.assignment()}
            msgs = [m for m in msgs if m.partition() in owned and m.partition() not in taken_away]
        producer.poll(0)  # serves error_cb
        if not msgs:
            continue
        producer.begin_transaction()
        for m in msgs:
            producer.produce(args.output, value=m.value() + f"-transformed@{m.partition()}:{m.offset()}".encode(),
                             partition=m.partition())
        zombie.maybe_stop(producer, consumer, stall_s)
        if consumer_protocol:
            offsets = {}  # the offset after each partition's last record of this batch
            for m in msgs:
                offsets[m.partition()] = m.offset() + 1
            offsets = [ck.TopicPartition(args.input, q, o) for q, o in sorted(offsets.items())]
        else:
            offsets, group_metadata = consumer.position(consumer.assignment()), consumer.consumer_group_metadata()
        with returns_within(stall_s):
            producer.send_offsets_to_transaction(offsets, group_metadata, API_TIMEOUT_S)
        with returns_within(stall_s):
            producer.commit_transaction(API_TIMEOUT_S)


if __name__ == "__main__":
    try:
        parser = argparse.ArgumentParser(prog="python -m tests.ctp_worker")
        parser.add_argument("bootstrap")
        parser.add_argument("stall_s", nargs="?", type=float, default=STALL_S)
        parser.add_argument("--group-protocol", choices=("classic", "consumer"), default="classic")
        parser.add_argument("--input", default="input")
        parser.add_argument("--output", default="output")
        parser.add_argument("--group", default="ctp")
        parser.add_argument("--transactional-id", default="ctp-txn")
        main(parser.parse_args())
    except Exception as exc:  # any failure: exit and be restarted, as a supervisor would
        log(f"exiting: {exc!r}")
        sys.exit(3)
