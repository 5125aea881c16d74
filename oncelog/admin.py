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
    from .wire_client import RawClient, request_module

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
