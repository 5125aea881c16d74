"""``oncelog topics ...``: topic administration over the Kafka protocol (confluent-kafka's
AdminClient), so it works against oncelog and any Kafka cluster alike."""

from __future__ import annotations

import sys

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from rich.console import Console
from rich.table import Table


# DescribeConfigs config_source values (KIP-226)
CONFIG_SOURCES = {1: "topic", 2: "dynamic broker", 3: "dynamic default broker", 4: "static broker", 5: "default"}


def topics_command(args) -> int:
    admin = AdminClient({"bootstrap.servers": args.bootstrap, "socket.timeout.ms": 10000})
    console = Console()
    try:
        if args.action == "create":
            config = dict(kv.split("=", 1) for kv in args.config)
            admin.create_topics([NewTopic(args.name, args.partitions, 1, config=config)])[args.name].result(30)
            console.print(f"created topic [bold]{args.name}[/] with {args.partitions} partition(s)")
        elif args.action == "delete":
            admin.delete_topics([args.name])[args.name].result(30)
            console.print(f"deleted topic [bold]{args.name}[/]")
        elif args.action == "list":
            md = admin.list_topics(timeout=10)
            table = Table("topic", "partitions")
            for name in sorted(md.topics):
                table.add_row(name, str(len(md.topics[name].partitions)))
            console.print(table)
        elif args.action == "describe":
            md = admin.list_topics(args.name, timeout=10)
            topic = md.topics.get(args.name)
            if topic is None or topic.error is not None:
                raise KafkaException(topic.error if topic else f"unknown topic {args.name}")
            from confluent_kafka import Consumer, TopicPartition

            consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": "oncelog-cli"})
            table = Table("partition", "leader", "log start", "high watermark", title=args.name)
            for p in sorted(topic.partitions):
                low, high = consumer.get_watermark_offsets(TopicPartition(args.name, p), timeout=10)
                table.add_row(str(p), str(topic.partitions[p].leader), str(low), str(high))
            consumer.close()
            console.print(table)
            res = ConfigResource("topic", args.name)
            configs = admin.describe_configs([res])[res].result(10)
            ctable = Table("config", "value", "source")
            for name in sorted(configs):
                entry = configs[name]
                ctable.add_row(name, str(entry.value), CONFIG_SOURCES.get(int(entry.source), str(entry.source)))
            console.print(ctable)
    except KafkaException as exc:
        print(f"oncelog topics {args.action}: {exc.args[0]}", file=sys.stderr)
        return 1
    return 0


def producers_command(args) -> int:
    """``oncelog producers describe TOPIC``: DescribeProducers for every partition."""
    from .client.wire import RawClient, request_module

    console = Console()
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    md = admin.list_topics(args.topic, timeout=10)
    topic = md.topics.get(args.topic)
    if topic is None or topic.error is not None:
        print(f"oncelog producers describe: {topic.error if topic else 'unknown topic'}", file=sys.stderr)
        return 1
    m = request_module(61, 0)
    client = RawClient(args.bootstrap)
    resp = client.request(m.DescribeProducersRequest(topics=(
        m.TopicRequest(name=args.topic, partition_indexes=tuple(sorted(topic.partitions))),)))
    client.close()
    table = Table("partition", "producer id", "epoch", "last sequence", "last append", title=args.topic)
    import datetime

    for part in resp.topics[0].partitions:
        if part.error_code != 0:
            table.add_row(str(part.partition_index), f"error {part.error_code.name}", "", "", "")
        for p in part.active_producers:
            when = datetime.datetime.fromtimestamp(p.last_timestamp / 1000).isoformat(sep=" ", timespec="seconds")
            table.add_row(str(part.partition_index), str(p.producer_id), str(p.producer_epoch),
                          str(p.last_sequence), when)
    console.print(table)
    return 0


def groups_command(args) -> int:
    """``oncelog groups list|describe|delete``; describe shows lag per partition (committed
    offset vs high watermark)."""
    from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition

    console = Console()
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    try:
        if args.action == "list":
            result = admin.list_consumer_groups().result(10)
            table = Table("group", "state", "type")
            for g in sorted(result.valid, key=lambda g: g.group_id):
                table.add_row(g.group_id, str(g.state).split(".")[-1], "consumer" if g.is_simple_consumer_group is False else "simple")
            console.print(table)
        elif args.action == "delete":
            admin.delete_consumer_groups([args.group])[args.group].result(10)
            console.print(f"deleted group [bold]{args.group}[/]")
        elif args.action == "describe":
            desc = admin.describe_consumer_groups([args.group])[args.group].result(10)
            console.print(f"group [bold]{desc.group_id}[/]: state {str(desc.state).split('.')[-1]}, "
                          f"assignor {desc.partition_assignor or '-'}, coordinator {desc.coordinator.id if desc.coordinator else '-'}")
            owners = {}
            members = Table("member", "client id", "host", "partitions")
            for m in desc.members:
                parts = m.assignment.topic_partitions if m.assignment else []
                for tp in parts:
                    owners[(tp.topic, tp.partition)] = m.client_id
                members.add_row(m.member_id, m.client_id, m.host,
                                ", ".join(f"{tp.topic}-{tp.partition}" for tp in parts))
            console.print(members)
            offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(args.group)])[args.group].result(10)
            consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": "oncelog-cli-lag"})
            lag = Table("topic", "partition", "committed", "high watermark", "lag", "owner")
            for tp in sorted(offsets.topic_partitions, key=lambda t: (t.topic, t.partition)):
                _, high = consumer.get_watermark_offsets(TopicPartition(tp.topic, tp.partition), timeout=10)
                committed = tp.offset if tp.offset >= 0 else None
                lag.add_row(tp.topic, str(tp.partition), "-" if committed is None else str(committed), str(high),
                            "-" if committed is None else str(high - committed), owners.get((tp.topic, tp.partition), "-"))
            consumer.close()
            console.print(lag)
    except KafkaException as exc:
        print(f"oncelog groups {args.action}: {exc.args[0]}", file=sys.stderr)
        return 1
    return 0


def _txn_describe(client, ids):
    from .client.wire import request_module

    m = request_module(65, 0)
    return client.request(m.DescribeTransactionsRequest(transactional_ids=tuple(ids))).transaction_states


def _txn_list(client):
    from .client.wire import request_module

    m = request_module(66, 1)
    return client.request(m.ListTransactionsRequest(state_filters=(), producer_id_filters=(), duration_filter=-1)).transaction_states


def _open_producer_txns(client, admin):
    """(topic, partition, producer id, epoch, txn start offset, LSO...) for every partition with
    an open transaction, from DescribeProducers."""
    from .client.wire import request_module

    md = admin.list_topics(timeout=10)
    m = request_module(61, 0)
    topics = tuple(m.TopicRequest(name=name, partition_indexes=tuple(sorted(t.partitions)))
                   for name, t in sorted(md.topics.items()))
    out = []
    for topic in client.request(m.DescribeProducersRequest(topics=topics)).topics:
        for part in topic.partitions:
            for p in part.active_producers:
                if p.current_txn_start_offset >= 0:
                    out.append((topic.name, part.partition_index, p.producer_id, p.producer_epoch,
                                p.current_txn_start_offset, p.last_timestamp))
    return out


def transactions_command(args) -> int:
    """``oncelog transactions list|describe|hanging|abort`` (KIP-664 tools)."""
    import datetime
    import time

    from .client.wire import RawClient, request_module

    console = Console()
    client = RawClient(args.bootstrap)
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    now_ms = int(time.time() * 1000)
    if args.action == "list":
        table = Table("transactional id", "producer id", "state")
        for t in sorted(_txn_list(client), key=lambda t: t.transactional_id):
            table.add_row(t.transactional_id, str(t.producer_id), t.transaction_state)
        console.print(table)
        return 0
    if args.action == "describe":
        for t in _txn_describe(client, [args.transactional_id]):
            if t.error_code != 0:
                print(f"oncelog transactions describe: {t.error_code.name}", file=sys.stderr)
                return 1
            started = t.transaction_start_time
            console.print(f"[bold]{t.transactional_id}[/]: {t.transaction_state}, producer {t.producer_id} epoch "
                          f"{t.producer_epoch}, timeout {t.transaction_timeout.total_seconds():g}s, started "
                          f"{started.isoformat(sep=' ', timespec='seconds') if started else '-'}")
            for topic in t.topics:
                console.print(f"  {topic.topic}: partitions {list(topic.partitions)}")
        return 0
    if args.action == "hanging":
        found = 0
        ids = [t.transactional_id for t in _txn_list(client)]
        by_pid = {}
        for t in _txn_describe(client, ids) if ids else ():
            by_pid[t.producer_id] = t
            if t.transaction_state == "Ongoing" and t.transaction_start_time is not None:
                age = now_ms - t.transaction_start_time.timestamp() * 1000
                if age > t.transaction_timeout.total_seconds() * 1000:
                    found += 1
                    console.print(f"[red]hanging[/]: {t.transactional_id} open for {age / 1000:.1f}s, beyond its "
                                  f"timeout of {t.transaction_timeout.total_seconds():g}s")
        for topic, partition, pid, epoch, start, last in _open_producer_txns(client, admin):
            t = by_pid.get(pid)
            if t is None or t.transaction_state != "Ongoing":
                found += 1
                console.print(f"[red]hanging[/]: {topic}-{partition} has an open transaction of producer {pid} "
                              f"(epoch {epoch}) from offset {start} that no coordinator knows as Ongoing; its LSO "
                              f"is stuck. Abort with: oncelog transactions abort --topic {topic} --partition {partition}")
        if not found:
            console.print("no hanging transactions")
        return 1 if found else 0
    if args.action == "abort":
        open_txns = [x for x in _open_producer_txns(client, admin) if (x[0], x[1]) == (args.topic, args.partition)]
        if args.producer_id is not None:
            open_txns = [x for x in open_txns if x[2] == args.producer_id]
        if not open_txns:
            print(f"oncelog transactions abort: no open transaction on {args.topic}-{args.partition}", file=sys.stderr)
            return 1
        m = request_module(27, 1)
        for topic, partition, pid, epoch, start, _ in open_txns:
            resp = client.request(m.WriteTxnMarkersRequest(markers=(m.WritableTxnMarker(
                producer_id=pid, producer_epoch=epoch, transaction_result=False, coordinator_epoch=0,
                topics=(m.WritableTxnMarkerTopic(name=topic, partition_indexes=(partition,)),)),)))
            code = resp.markers[0].topics[0].partitions[0].error_code
            console.print(f"abort marker for producer {pid} on {topic}-{partition} (open since offset {start}): "
                          f"{code.name}")
        return 0
    return 2
