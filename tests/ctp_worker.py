"""An exactly-once consume-transform-produce worker, for the crash tests.

Reads ``input`` (read_committed, group ``ctp``, static member so a restart takes over at once),
writes ``<value>-transformed@<partition>:<offset>`` to the same partition of ``output``, and
every ~100 records commits output and input offsets in one transaction
(send_offsets_to_transaction with the consumer's group metadata). A new instance fences the
previous one through the shared transactional id.

It behaves as a supervised worker must, so that the test's restart loop (its supervisor) takes
over instead of the worker idling:

* every consumer error is logged; a fatal one, or one that means this instance is no longer the
  group member its transactions commit offsets for, ends the process (exit 3), as does any
  exception from the producer (fenced, fatal, or a transaction that must be aborted);
* a blocking client call that has not returned ``stall_s`` seconds after it started ends the
  process (exit 1, with a traceback of where it hung), whatever the client's own timeouts say.

Issue 11 (the soak stalled for its full 600 s): librdkafka 2.16's send_offsets_to_transaction()
waits for ever, past its own timeout, in the first transaction after our single broker
restarted. With every broker down librdkafka re-bootstraps and decommissions the broker object
it still caches as group coordinator; the TxnOffsetCommit then waits for that dead object to
come up and is never retried (confluentinc/librdkafka#5456, #5511), while the consumer leaves
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
  A partition revoked or lost (the member was fenced: e.g. its session expired while the broker
  was down) ends the process like the errors above: the records read in this batch and the
  positions to commit may no longer belong to this member.

Usage: ``python -m tests.ctp_worker BOOTSTRAP [STALL_S] [--group-protocol classic|consumer]``.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
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


def consumer_config(bootstrap: str, group_protocol: str) -> dict:
    config = {"bootstrap.servers": bootstrap, "group.id": "ctp", "isolation.level": "read_committed",
              "enable.auto.commit": False, "auto.offset.reset": "earliest", "max.poll.interval.ms": 30000,
              "fetch.wait.max.ms": 50, "error_cb": lambda err: check(err, "consumer")}
    if group_protocol == "classic":
        return {**config, "group.instance.id": "ctp-worker", "session.timeout.ms": 6000}
    # KIP-848: dynamic member, session timeout set by the broker (see the module docstring).
    return {**config, "group.protocol": "consumer"}


def out_of_group(consumer, partitions) -> None:
    """on_revoke / on_lost of the consumer protocol: this instance no longer owns what it read."""
    if partitions:
        raise WorkerExit(f"partitions revoked or lost: {sorted(p.partition for p in partitions)}")


def main(bootstrap: str, stall_s: float, group_protocol: str = "classic") -> None:
    consumer = ck.Consumer(consumer_config(bootstrap, group_protocol))
    producer = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "ctp-txn", "linger.ms": 5,
                            "transaction.timeout.ms": 10000, "message.timeout.ms": 10000,
                            "metadata.recovery.strategy": "none",  # see the module docstring
                            "error_cb": lambda err: check(err, "producer")})
    with returns_within(stall_s):
        producer.init_transactions(API_TIMEOUT_S)
    if group_protocol == "classic":
        consumer.subscribe(["input"])
    else:
        consumer.subscribe(["input"], on_revoke=out_of_group, on_lost=out_of_group)
    while True:
        msgs = []
        with returns_within(stall_s):
            for m in consumer.consume(100, 0.5):
                if m.error():
                    check(m.error(), "consumer")
                else:
                    msgs.append(m)
        producer.poll(0)  # serves error_cb
        if not msgs:
            continue
        producer.begin_transaction()
        for m in msgs:
            producer.produce("output", value=m.value() + f"-transformed@{m.partition()}:{m.offset()}".encode(),
                             partition=m.partition())
        with returns_within(stall_s):
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                 consumer.consumer_group_metadata(), API_TIMEOUT_S)
        with returns_within(stall_s):
            producer.commit_transaction(API_TIMEOUT_S)


if __name__ == "__main__":
    try:
        parser = argparse.ArgumentParser(prog="python -m tests.ctp_worker")
        parser.add_argument("bootstrap")
        parser.add_argument("stall_s", nargs="?", type=float, default=STALL_S)
        parser.add_argument("--group-protocol", choices=("classic", "consumer"), default="classic")
        args = parser.parse_args()
        main(args.bootstrap, args.stall_s, args.group_protocol)
    except Exception as exc:  # any failure: exit and be restarted, as a supervisor would
        log(f"exiting: {exc!r}")
        sys.exit(3)
