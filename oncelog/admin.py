"""``oncelog topics|groups|producers|transactions|acls|users``: administration over the Kafka
protocol (confluent-kafka's AdminClient), so it works against oncelog and any Kafka cluster alike.
``acls`` and ``users`` (kafka-acls, kafka-configs --entity-type users) also take Kafka's
``--command-config`` for an authenticated admin connection (SASL, TLS)."""

from __future__ import annotations

import logging
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
            table.add_row(str(part.partition_index), f"error {part.error_code.name.upper()}", "", "", "")
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
                print(f"oncelog transactions describe: {t.error_code.name.upper()}", file=sys.stderr)
                return 1
            # None: Kafka's -1, no transaction started (an Empty id; client.wire decodes it so),
            # which kafka-transactions.sh prints as "None" in its start time and duration columns.
            started = t.transaction_start_time
            # soft_wrap: one line per fact whatever the terminal's width, for scripts that read it
            console.print(f"[bold]{t.transactional_id}[/]: {t.transaction_state}, producer {t.producer_id} epoch "
                          f"{t.producer_epoch}, timeout {t.transaction_timeout.total_seconds():g}s, started "
                          f"{started.isoformat(sep=' ', timespec='seconds') if started is not None else '-'}",
                          soft_wrap=True)
            for topic in sorted(t.topics, key=lambda topic: topic.topic):  # Kafka sends a set's order
                console.print(f"  {topic.topic}: partitions {sorted(topic.partitions)}", soft_wrap=True)
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
                          f"{code.name.upper()}")
        return 0
    return 2


# ------------------------------------------------------------------------------------------
# ``oncelog acls`` and ``oncelog users``: kafka-acls and kafka-configs --entity-type users.
#
# Both connect with Kafka's ``--command-config client.properties`` (a Java properties file of
# client settings, translated by oncelog.client.security), so they work over SASL_SSL against
# oncelog and Apache Kafka alike. A refused login (wrong password, untrusted certificate) is
# reported by librdkafka through error_cb (served by poll()), not through the request's future:
# the futures are waited on in short polling steps, and such an error ends the command at once
# with one line and exit status 1. librdkafka's own log lines are kept, not printed.

CLUSTER_NAME = "kafka-cluster"  # the one cluster resource's name, as Kafka's
ADMIN_TIMEOUT = 15.0

# kafka-acls' operation names (Read, ClusterAction, ...), matched ignoring case and _ / -.
ACL_OPERATIONS = ("All", "Read", "Write", "Create", "Delete", "Alter", "Describe", "ClusterAction",
                  "DescribeConfigs", "AlterConfigs", "IdempotentWrite")
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


class CommandError(Exception):
    """A failure to report in one line on stderr (exit status 1)."""


class _Connection:
    """An AdminClient from ``--bootstrap-server`` and ``--command-config``, with the login
    errors librdkafka reports out of band collected so waits can end on them."""

    def __init__(self, args) -> None:
        self.errors: list = []
        self.bootstrap = args.bootstrap
        self.properties = _read_command_config(args.command_config)
        self.log: list[str] = []  # librdkafka's log lines, kept for the error message, not printed
        logger = logging.getLogger(f"oncelog.admin.librdkafka.{id(self)}")
        logger.propagate = False
        logger.addHandler(_ListHandler(self.log))
        conf = {"socket.timeout.ms": 10000, **command_config(args.command_config),
                "bootstrap.servers": args.bootstrap, "error_cb": self.errors.append, "logger": logger}
        self.admin = AdminClient(conf)

    def wait(self, future, timeout: float = ADMIN_TIMEOUT):
        """``future.result()``, ending early (CommandError) on a refused login."""
        import concurrent.futures
        import time

        deadline = time.monotonic() + timeout
        while True:
            self.admin.poll(0.1)  # serves error_cb and the log
            self._raise_login_error()
            done, _ = concurrent.futures.wait([future], timeout=0.1)
            if done:
                try:
                    return future.result()
                except KafkaException:
                    self.admin.poll(0)
                    self._raise_login_error()  # a timeout caused by a refused login: say so
                    raise
            if time.monotonic() > deadline:
                last = f"; last: {self.log[-1]}" if self.log else ""
                raise CommandError(f"no answer from {self.bootstrap} within {timeout:g}s (is the address "
                                   f"right, and security.protocol the listener's?){last}")

    def _raise_login_error(self) -> None:
        from confluent_kafka import KafkaError

        for err in self.errors:
            if err.code() in (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED, KafkaError._SSL):
                raise CommandError(f"cannot log in to {self.bootstrap}: {err.str()}")


class _ListHandler(logging.Handler):
    def __init__(self, lines: list[str]) -> None:
        super().__init__()
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _read_command_config(path: str | None) -> dict[str, str]:
    if not path:
        return {}
    import os

    from .config.serve_options import ServeConfigError, read_properties

    if not os.path.isfile(path):
        raise CommandError(f"--command-config {path}: no such file")
    try:
        return {s.name: s.value for s in read_properties(path)}
    except ServeConfigError as exc:
        raise CommandError(str(exc).replace("--config", "--command-config", 1)) from None


def command_config(path: str | None) -> dict:
    """librdkafka settings for a Kafka tool's ``--command-config`` file: the security settings
    (Java names or librdkafka's) translated by :func:`oncelog.client.security.librdkafka_config`,
    plus ``client.id``; other client settings (timeouts, retries) are Java-client tuning the
    admin tools do not need and are left out."""
    from .client.security import KafkaSecurityError, librdkafka_config

    props = _read_command_config(path)
    try:
        return librdkafka_config(props)
    except (KafkaSecurityError, ValueError) as exc:
        raise CommandError(f"--command-config {path}: {exc}") from None


def _operation(name: str):
    from confluent_kafka.admin import AclOperation

    key = name.replace("_", "").replace("-", "").lower()
    for op in ACL_OPERATIONS:
        if op.lower() == key:
            return AclOperation[{"ClusterAction": "CLUSTER_ACTION", "DescribeConfigs": "DESCRIBE_CONFIGS",
                                 "AlterConfigs": "ALTER_CONFIGS", "IdempotentWrite": "IDEMPOTENT_WRITE"}
                                .get(op, op.upper())]
    raise CommandError(f"unknown operation {name!r}; one of: {', '.join(ACL_OPERATIONS)}")


def _resources(args) -> list[tuple]:
    """[(ResourceType, name)] from --topic/--group/--transactional-id/--cluster."""
    from confluent_kafka.admin import ResourceType

    out = [(ResourceType.TOPIC, t) for t in args.topic]
    out += [(ResourceType.GROUP, g) for g in args.group]
    out += [(ResourceType.TRANSACTIONAL_ID, t) for t in args.transactional_id]
    if args.cluster:
        out.append((ResourceType.BROKER, CLUSTER_NAME))
    return out


def _principals(args) -> list[tuple]:
    """[(AclPermissionType, principal, [hosts])]: allow principals with --allow-host (default
    ``*``), deny principals with --deny-host (default ``*``), as kafka-acls."""
    from confluent_kafka.admin import AclPermissionType

    for p in args.allow_principal + args.deny_principal:
        if ":" not in p:
            raise CommandError(f"principal {p!r} must be TYPE:NAME, e.g. User:alice (User:* for everyone)")
    return ([(AclPermissionType.ALLOW, p, args.allow_host or ["*"]) for p in args.allow_principal]
            + [(AclPermissionType.DENY, p, args.deny_host or ["*"]) for p in args.deny_principal])


def _convenience_operations(args, resources: list[tuple]) -> list[tuple]:
    """kafka-acls' --producer / --consumer: [(ResourceType, name, operation)] they grant."""
    from confluent_kafka.admin import AclOperation as Op, ResourceType as R

    out = []
    if args.producer:
        for rt, name in resources:
            if rt == R.TOPIC:
                out += [(rt, name, Op.WRITE), (rt, name, Op.DESCRIBE), (rt, name, Op.CREATE)]
            elif rt == R.TRANSACTIONAL_ID:
                out += [(rt, name, Op.WRITE), (rt, name, Op.DESCRIBE)]
        if args.idempotent:
            out.append((R.BROKER, CLUSTER_NAME, Op.IDEMPOTENT_WRITE))
    if args.consumer:
        if not any(rt == R.GROUP for rt, _ in resources):
            raise CommandError("--consumer needs --group too")
        for rt, name in resources:
            if rt == R.TOPIC:
                out += [(rt, name, Op.READ), (rt, name, Op.DESCRIBE)]
            elif rt == R.GROUP:
                out.append((rt, name, Op.READ))
    return out


def _pattern(args, *, binding: bool):
    from confluent_kafka.admin import ResourcePatternType

    kind = (args.resource_pattern_type or "literal").lower()
    if binding and kind not in ("literal", "prefixed"):
        raise CommandError(f"acls add: --resource-pattern-type {kind} is a filter; an ACL is literal or prefixed")
    return ResourcePatternType[kind.upper()]


def _acl_row(b) -> tuple[str, ...]:
    from confluent_kafka.admin import ResourceType

    kind = "Cluster" if b.restype == ResourceType.BROKER else {
        "TOPIC": "Topic", "GROUP": "Group", "TRANSACTIONAL_ID": "TransactionalId"}.get(b.restype.name, b.restype.name)
    op = next((o for o in ACL_OPERATIONS if o.upper() == b.operation.name.replace("_", "")), b.operation.name)
    return (kind, b.resource_pattern_type.name.lower(), b.name, b.principal, b.host, op,
            b.permission_type.name.capitalize())


def _acl_table(bindings, title: str | None = None) -> Table:
    table = Table("resource", "pattern", "name", "principal", "host", "operation", "permission", title=title)
    for row in sorted(_acl_row(b) for b in bindings):
        table.add_row(*row)
    return table


def _console() -> Console:
    """A console whose tables are not cut to 80 columns when the output is a pipe or a file."""
    return Console() if sys.stdout.isatty() else Console(width=200)


def _security_disabled(conn: _Connection) -> str | None:
    """The DescribeAcls top-level error, read on the wire: librdkafka drops it and answers an
    empty list, so "no ACLs" and "no authorizer" look alike. None when it cannot be read."""
    from .client.kafka import KafkaClient
    from .client.wire import request_module

    try:
        client = KafkaClient(conn.bootstrap, conn.properties, client_id="oncelog-acls",
                             timeout=10)
        try:
            m = request_module(29, 1)
            resp = client.any_connection().request(m.DescribeAclsRequest(
                resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
                host_filter=None, operation=1, permission_type=1))
        finally:
            client.close()
    except Exception:  # noqa: BLE001 - a best-effort check: unknown stays unknown
        return None
    if resp.error_code != 0:
        return f"{resp.error_code.name.upper()}: {resp.error_message or ''}".rstrip(": ")
    return None


def acls_command(args) -> int:
    """``oncelog acls add|list|remove``, as kafka-acls --add/--list/--remove."""
    from confluent_kafka.admin import (
        AclBinding, AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType, ResourceType,
    )

    console = _console()
    try:
        resources = _resources(args)
        principals = _principals(args)
        if args.action == "add":
            if not resources:
                raise CommandError("acls add: give a resource: --topic, --group, --transactional-id or --cluster")
            if not principals:
                raise CommandError("acls add: give --allow-principal or --deny-principal")
            pattern = _pattern(args, binding=True)
            triples = [(rt, name, _operation(op)) for rt, name in resources for op in args.operation]
            triples += _convenience_operations(args, resources)
            if not triples:
                triples = [(rt, name, AclOperation.ALL) for rt, name in resources]
            bindings = list(dict.fromkeys(
                AclBinding(rt, name, pattern if rt != ResourceType.BROKER else ResourcePatternType.LITERAL,
                           principal, host, op, perm)
                for rt, name, op in triples for perm, principal, hosts in principals for host in hosts))
            conn = _Connection(args)
            added = []
            for binding, future in conn.admin.create_acls(bindings, request_timeout=ADMIN_TIMEOUT).items():
                try:
                    conn.wait(future)
                    added.append(binding)
                except KafkaException as exc:
                    print(f"oncelog acls add: {' '.join(_acl_row(binding))}: {exc.args[0].str()}", file=sys.stderr)
            console.print(_acl_table(added, title=f"added {len(added)} ACL(s)") if added else "no ACL added")
            return 0 if len(added) == len(bindings) else 1

        pattern = _pattern(args, binding=False) if resources else None
        operations = [_operation(op) for op in args.operation] or [AclOperation.ANY]
        who = [(perm, p, hosts if (args.allow_host if perm == AclPermissionType.ALLOW else args.deny_host)
                else [None]) for perm, p, hosts in principals]
        if args.action == "list" and args.principal:
            who += [(AclPermissionType.ANY, p, [None]) for p in args.principal]
        who = who or [(AclPermissionType.ANY, None, [None])]
        targets = resources or [(ResourceType.ANY, None)]
        filters = list(dict.fromkeys(
            AclBindingFilter(rt, name, pattern if rt != ResourceType.ANY else ResourcePatternType.ANY, principal,
                             host, op, perm)
            for rt, name in targets for op in operations for perm, principal, hosts in who for host in hosts))
        conn = _Connection(args)
        if args.action == "list":
            found = []
            for f in filters:
                found += conn.wait(conn.admin.describe_acls(f, request_timeout=ADMIN_TIMEOUT))
            found = list(dict.fromkeys(found))
            if found:
                console.print(_acl_table(found))
                return 0
            refused = _security_disabled(conn)
            if refused:
                raise CommandError(f"acls list: the broker answered {refused}")
            console.print("no ACLs match")
            return 0
        if args.action == "remove":
            if not resources and not principals:
                raise CommandError("acls remove: give a resource (--topic, --group, --transactional-id, "
                                   "--cluster) or a principal, or both")
            removed = []
            for f, future in conn.admin.delete_acls(filters, request_timeout=ADMIN_TIMEOUT).items():
                removed += conn.wait(future)
            console.print(_acl_table(removed, title=f"removed {len(removed)} ACL(s)") if removed
                          else "no ACLs matched: nothing removed")
            return 0
    except CommandError as exc:
        print(f"oncelog acls {args.action}: {exc}", file=sys.stderr)
        return 1
    except KafkaException as exc:
        print(f"oncelog acls {args.action}: {exc.args[0].str() if hasattr(exc.args[0], 'str') else exc}",
              file=sys.stderr)
        return 1
    return 2


def _scram_mechanism(name: str):
    from confluent_kafka.admin import ScramMechanism

    key = name.upper().replace("_", "-")
    if key not in SCRAM_MECHANISMS:
        raise CommandError(f"unknown mechanism {name!r}; one of: {', '.join(SCRAM_MECHANISMS)}")
    return ScramMechanism[key.replace("-", "_")]


def _read_password(args) -> bytes:
    if args.password is not None and args.password_stdin:
        raise CommandError("give --password or --password-stdin, not both")
    if args.password_stdin:
        line = sys.stdin.readline()
        password = line[:-1] if line.endswith("\n") else line
    elif args.password is not None:
        password = args.password
    else:
        import getpass

        if not sys.stdin.isatty():
            raise CommandError("no password: give --password-stdin (and the password on stdin) or --password")
        password = getpass.getpass(f"password for {args.user}: ")
    if not password:
        raise CommandError("the password is empty")
    return password.encode()


def users_command(args) -> int:
    """``oncelog users add|list|delete``: SCRAM credentials (KIP-554), as kafka-configs
    --entity-type users --alter --add-config / --describe / --delete-config."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import ScramCredentialInfo, UserScramCredentialDeletion, UserScramCredentialUpsertion

    console = _console()
    try:
        if args.action == "add":
            mechanism = _scram_mechanism(args.mechanism)
            password = _read_password(args)
            conn = _Connection(args)
            upsert = UserScramCredentialUpsertion(args.user, ScramCredentialInfo(mechanism, args.iterations), password)
            futures = conn.admin.alter_user_scram_credentials([upsert], request_timeout=ADMIN_TIMEOUT)
            conn.wait(futures[args.user])
            console.print(f"set {args.mechanism.upper()} credential of [bold]{args.user}[/] "
                          f"({args.iterations} iterations)")
            return 0
        conn = _Connection(args)
        if args.action == "list":
            if args.user:
                result = {}
                for user, future in conn.admin.describe_user_scram_credentials(
                        args.user, request_timeout=ADMIN_TIMEOUT).items():
                    result[user] = conn.wait(future)
            else:
                result = conn.wait(conn.admin.describe_user_scram_credentials(request_timeout=ADMIN_TIMEOUT))
            table = Table("user", "mechanism", "iterations")
            for user in sorted(result):
                for info in sorted(result[user].scram_credential_infos, key=lambda i: i.mechanism.value):
                    table.add_row(user, info.mechanism.name.replace("_", "-"), str(info.iterations))
            console.print(table if result else "no SCRAM credentials")
            return 0
        if args.action == "delete":
            if args.mechanism:
                mechanisms = [_scram_mechanism(args.mechanism)]
            else:
                try:
                    described = conn.wait(conn.admin.describe_user_scram_credentials(
                        [args.user], request_timeout=ADMIN_TIMEOUT)[args.user])
                except KafkaException as exc:
                    if exc.args[0].code() == KafkaError.RESOURCE_NOT_FOUND:
                        raise CommandError(f"user {args.user} has no SCRAM credential") from None
                    raise
                mechanisms = [i.mechanism for i in described.scram_credential_infos]
            deletions = [UserScramCredentialDeletion(args.user, m) for m in mechanisms]
            if len(deletions) > 1:  # one alteration per user and request (Kafka refuses duplicates)
                for d in deletions:
                    conn.wait(conn.admin.alter_user_scram_credentials([d], request_timeout=ADMIN_TIMEOUT)[args.user])
            else:
                conn.wait(conn.admin.alter_user_scram_credentials(deletions, request_timeout=ADMIN_TIMEOUT)[args.user])
            names = ", ".join(m.name.replace("_", "-") for m in mechanisms)
            console.print(f"deleted {names} credential(s) of [bold]{args.user}[/]")
            return 0
    except CommandError as exc:
        print(f"oncelog users {args.action}: {exc}", file=sys.stderr)
        return 1
    except KafkaException as exc:
        err = exc.args[0]
        print(f"oncelog users {args.action}: {err.str() if hasattr(err, 'str') else err}", file=sys.stderr)
        return 1
    return 2
