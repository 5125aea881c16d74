"""An exactly-once consume-transform-produce worker, for the crash tests.

Reads ``input`` (read_committed, group ``ctp``, static member so a restart takes over at once),
writes ``<value>-transformed@<partition>:<offset>`` to the same partition of ``output``, and
every ~100 records commits output and input offsets in one transaction
(send_offsets_to_transaction with the consumer's group metadata). On any error it exits; the
test restarts it. A new instance fences the previous one through the shared transactional id.
"""

import sys

import confluent_kafka as ck


def main(bootstrap: str) -> None:
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "ctp", "group.instance.id": "ctp-worker",
                            "isolation.level": "read_committed", "enable.auto.commit": False,
                            "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                            "max.poll.interval.ms": 30000, "fetch.wait.max.ms": 50})
    producer = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "ctp-txn", "linger.ms": 5,
                            "transaction.timeout.ms": 10000, "message.timeout.ms": 10000})
    producer.init_transactions(30)
    consumer.subscribe(["input"])
    while True:
        msgs = [m for m in consumer.consume(100, 0.5) if not m.error()]
        if not msgs:
            continue
        producer.begin_transaction()
        for m in msgs:
            producer.produce("output", value=m.value() + f"-transformed@{m.partition()}:{m.offset()}".encode(),
                             partition=m.partition())
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                             consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)


if __name__ == "__main__":
    try:
        main(sys.argv[1])
    except Exception as exc:  # any failure: exit and be restarted, as a supervisor would
        print(f"worker exiting: {exc!r}", file=sys.stderr)
        sys.exit(3)
