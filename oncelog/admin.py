"""``oncelog topics|groups|producers|transactions|acls|users``: administration over the Kafka
protocol (confluent-kafka's AdminClient, and oncelog's own protocol client where librdkafka does not
expose what a command shows), so it works against oncelog and any Kafka cluster alike.
``groups``, ``acls`` and ``users`` (kafka-consumer-groups, kafka-acls, kafka-configs --entity-type
users) also take Kafka's ``--command-config`` for an authenticated admin connection (SASL, TLS)."""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from rich.console import Console
from rich.markup import escape
from rich.table import Table as _RichTable
from rich.text import Text


class Table(_RichTable):
    """rich's Table with every string cell taken as plain text, never as markup: names come from
    clients (a group id ``evil[/]`` would raise MarkupError; ``[red]x`` would restyle the row)."""

    def add_row(self, *cells, **kwargs):
        return super().add_row(*(Text(c) if isinstance(c, str) else c for c in cells), **kwargs)


# DescribeConfigs config_source values (KIP-226)
CONFIG_SOURCES = {1: "topic", 2: "dynamic broker", 3: "dynamic default broker", 4: "static broker", 5: "default"}


def _admin_conf(args) -> dict:
    """librdkafka settings from ``--bootstrap-server`` and ``--command-config`` (a secured listener's
    security.protocol, sasl.*, ssl.*: oncelog.client.security translates Kafka's Java names).
    librdkafka's own log lines are dropped: a failure is reported in one line (:func:`_fail`)."""
    quiet = logging.getLogger("oncelog.admin.librdkafka.quiet")
    quiet.propagate = False
    quiet.addHandler(logging.NullHandler())
    return {"socket.timeout.ms": 10000, **command_config(getattr(args, "command_config", None)),
            "bootstrap.servers": args.bootstrap, "logger": quiet}


def _protocol_client(args, client_id: str):
    """The project's protocol client over the same settings (it names a security.protocol mismatch)."""
    from .client.kafka import KafkaClient

    return KafkaClient(args.bootstrap, _read_command_config(getattr(args, "command_config", None)),
                       client_id=client_id, timeout=10)


def diagnose(args) -> str | None:
    """Why the listener at ``--bootstrap-server`` does not answer these settings, when the
    protocol client can tell (a TLS listener answered in plaintext, a SASL listener closing the
    connection of a client that did not authenticate, a refused login), else None."""
    from .client.kafka import KafkaProtocolError, KafkaSecurityError, UnsupportedBroker

    try:
        client = _protocol_client(args, "oncelog-diagnose")
        try:
            client.metadata([])
        finally:
            client.close()
    except (CommandError, KafkaProtocolError, KafkaSecurityError, UnsupportedBroker, OSError, ValueError) as exc:
        return str(exc)
    return None


def _fail(command: str, exc, args) -> int:
    why = diagnose(args)
    print(f"oncelog {command}: {exc.args[0] if getattr(exc, 'args', None) else exc}"
          + (f"; {why}" if why else ""), file=sys.stderr)
    return 1


def topics_command(args) -> int:
    console = Console()
    try:
        admin = AdminClient(_admin_conf(args))
        if args.action == "create":
            config = dict(kv.split("=", 1) for kv in args.config)
            admin.create_topics([NewTopic(args.name, args.partitions, 1, config=config)])[args.name].result(30)
            console.print(f"created topic [bold]{escape(args.name)}[/] with {args.partitions} partition(s)")
        elif args.action == "delete":
            admin.delete_topics([args.name])[args.name].result(30)
            console.print(f"deleted topic [bold]{escape(args.name)}[/]")
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

            consumer = Consumer({**_admin_conf(args), "group.id": "oncelog-cli"})
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
        return _fail(f"topics {args.action}", exc, args)
    except CommandError as exc:
        print(f"oncelog topics {args.action}: {exc}", file=sys.stderr)
        return 1
    return 0


def producers_command(args) -> int:
    """``oncelog producers describe TOPIC``: DescribeProducers for every partition."""
    from .client.kafka import KafkaProtocolError, KafkaSecurityError, UnsupportedBroker
    from .client.wire import request_module

    console = Console()
    try:
        admin = AdminClient(_admin_conf(args))
        md = admin.list_topics(args.topic, timeout=10)
        topic = md.topics.get(args.topic)
        if topic is None or topic.error is not None:
            print(f"oncelog producers describe: {topic.error if topic else 'unknown topic'}", file=sys.stderr)
            return 1
        m = request_module(61, 0)
        client = _protocol_client(args, "oncelog-producers")
        try:
            # Each partition is described by its leader (kafka-transactions.sh's describe-producers).
            parts = []
            for partition in sorted(topic.partitions):
                resp = client.leader(args.topic, partition).request(m.DescribeProducersRequest(topics=(
                    m.TopicRequest(name=args.topic, partition_indexes=(partition,)),)))
                parts += list(resp.topics[0].partitions)
        finally:
            client.close()
    except KafkaException as exc:
        return _fail("producers describe", exc, args)
    except (CommandError, KafkaProtocolError, KafkaSecurityError, UnsupportedBroker, OSError) as exc:
        print(f"oncelog producers describe: {exc}", file=sys.stderr)
        return 1
    table = Table("partition", "producer id", "epoch", "last sequence", "last append", title=args.topic)
    import datetime

    for part in parts:
        if part.error_code != 0:
            table.add_row(str(part.partition_index), f"error {part.error_code.name.upper()}", "", "", "")
        for p in part.active_producers:
            when = datetime.datetime.fromtimestamp(p.last_timestamp / 1000).isoformat(sep=" ", timespec="seconds")
            table.add_row(str(part.partition_index), str(p.producer_id), str(p.producer_epoch),
                          str(p.last_sequence), when)
    console.print(table)
    return 0


def txn_describe(client, ids):
    """DescribeTransactions, each id asked of its coordinator (FindCoordinator), as
    kafka-transactions.sh does; ``client``: the protocol client."""
    from .client.wire import request_module

    m = request_module(65, 0)
    by_node: dict[int, list[str]] = {}
    for txn_id in ids:
        conn = client.coordinator(txn_id, 1)
        by_node.setdefault(id(conn), [conn, []])[1].append(txn_id)
    out = []
    for conn, asked in by_node.values():
        out += list(conn.request(m.DescribeTransactionsRequest(transactional_ids=tuple(asked))).transaction_states)
    return out


def _nodes(client):
    """A connection to every broker of the cluster (Metadata's list)."""
    client.metadata([])
    return [client.node(node_id) for node_id in sorted(client.brokers)]


def txn_list(client):
    """ListTransactions of every broker: each lists the ids it coordinates."""
    from .client.wire import request_module

    m = request_module(66, 1)
    return [t for conn in _nodes(client)
            for t in conn.request(m.ListTransactionsRequest(state_filters=(), producer_id_filters=(),
                                                            duration_filter=-1)).transaction_states]


def open_producer_txns(client, admin):
    """(topic, partition, producer id, epoch, txn start offset, LSO...) for every partition with
    an open transaction, from DescribeProducers."""
    from .client.wire import request_module

    md = admin.list_topics(timeout=10)
    m = request_module(61, 0)
    topics = tuple(m.TopicRequest(name=name, partition_indexes=tuple(sorted(t.partitions)))
                   for name, t in sorted(md.topics.items()))
    out = []
    by_leader: dict[int, tuple] = {}  # each partition asked of its leader, one request per leader
    for t in topics:
        for partition in t.partition_indexes:
            conn = client.leader(t.name, partition)
            by_leader.setdefault(id(conn), (conn, {}))[1].setdefault(t.name, []).append(partition)
    answers = []
    for conn, wanted in by_leader.values():
        answers += conn.request(m.DescribeProducersRequest(topics=tuple(
            m.TopicRequest(name=name, partition_indexes=tuple(ps)) for name, ps in wanted.items()))).topics
    for topic in answers:
        for part in topic.partitions:
            for p in part.active_producers:
                if p.current_txn_start_offset >= 0:
                    out.append((topic.name, part.partition_index, p.producer_id, p.producer_epoch,
                                p.current_txn_start_offset, p.last_timestamp))
    return out


def transactions_command(args) -> int:
    """``oncelog transactions list|describe|hanging|abort`` (KIP-664 tools)."""
    from .client.kafka import KafkaProtocolError, KafkaSecurityError, UnsupportedBroker

    try:
        protocol = _protocol_client(args, "oncelog-transactions")
    except (CommandError, KafkaProtocolError, KafkaSecurityError, UnsupportedBroker, OSError) as exc:
        print(f"oncelog transactions {args.action}: {exc}", file=sys.stderr)
        return 1
    try:
        return _transactions(args, protocol, AdminClient(_admin_conf(args)))
    except KafkaException as exc:
        return _fail(f"transactions {args.action}", exc, args)
    except (CommandError, KafkaProtocolError, KafkaSecurityError, UnsupportedBroker, OSError) as exc:
        print(f"oncelog transactions {args.action}: {exc}", file=sys.stderr)
        return 1
    finally:
        protocol.close()


def _transactions(args, client, admin) -> int:
    """The verbs of :func:`transactions_command`; ``client`` is the protocol client: each request goes
    to the broker that answers it (the coordinator, a partition's leader, every broker), as
    kafka-transactions.sh sends them."""
    import datetime
    import time

    from .client.wire import request_module

    console = Console()
    now_ms = int(time.time() * 1000)
    if args.action == "list":
        table = Table("transactional id", "producer id", "state")
        for t in sorted(txn_list(client), key=lambda t: t.transactional_id):
            table.add_row(t.transactional_id, str(t.producer_id), t.transaction_state)
        console.print(table)
        return 0
    if args.action == "describe":
        for t in txn_describe(client, [args.transactional_id]):
            if t.error_code != 0:
                print(f"oncelog transactions describe: {t.error_code.name.upper()}", file=sys.stderr)
                return 1
            # None: Kafka's -1, no transaction started (an Empty id; client.wire decodes it so),
            # which kafka-transactions.sh prints as "None" in its start time and duration columns.
            started = t.transaction_start_time
            # soft_wrap: one line per fact whatever the terminal's width, for scripts that read it
            console.print(f"[bold]{escape(t.transactional_id)}[/]: {t.transaction_state}, producer {t.producer_id} epoch "
                          f"{t.producer_epoch}, timeout {t.transaction_timeout.total_seconds():g}s, started "
                          f"{started.isoformat(sep=' ', timespec='seconds') if started is not None else '-'}",
                          soft_wrap=True)
            for topic in sorted(t.topics, key=lambda topic: topic.topic):  # Kafka sends a set's order
                console.print(f"  {escape(topic.topic)}: partitions {sorted(topic.partitions)}", soft_wrap=True)
        return 0
    if args.action == "hanging":
        found = 0
        ids = [t.transactional_id for t in txn_list(client)]
        by_pid = {}
        for t in txn_describe(client, ids) if ids else ():
            by_pid[t.producer_id] = t
            if t.transaction_state == "Ongoing" and t.transaction_start_time is not None:
                age = now_ms - t.transaction_start_time.timestamp() * 1000
                if age > t.transaction_timeout.total_seconds() * 1000:
                    found += 1
                    console.print(f"[red]hanging[/]: {escape(t.transactional_id)} open for {age / 1000:.1f}s, beyond its "
                                  f"timeout of {t.transaction_timeout.total_seconds():g}s")
        for topic, partition, pid, epoch, start, last in open_producer_txns(client, admin):
            t = by_pid.get(pid)
            if t is None or t.transaction_state != "Ongoing":
                found += 1
                console.print(f"[red]hanging[/]: {escape(topic)}-{partition} has an open transaction of producer {pid} "
                              f"(epoch {epoch}) from offset {start} that no coordinator knows as Ongoing; its LSO "
                              f"is stuck. Abort with: oncelog transactions abort --topic {topic} --partition {partition}")
        if not found:
            console.print("no hanging transactions")
        return 1 if found else 0
    if args.action == "abort":
        open_txns = [x for x in open_producer_txns(client, admin) if (x[0], x[1]) == (args.topic, args.partition)]
        if args.producer_id is not None:
            open_txns = [x for x in open_txns if x[2] == args.producer_id]
        if not open_txns:
            print(f"oncelog transactions abort: no open transaction on {args.topic}-{args.partition}", file=sys.stderr)
            return 1
        m = request_module(27, 1)
        for topic, partition, pid, epoch, start, _ in open_txns:
            resp = client.leader(topic, partition).request(m.WriteTxnMarkersRequest(markers=(m.WritableTxnMarker(
                producer_id=pid, producer_epoch=epoch, transaction_result=False, coordinator_epoch=0,
                topics=(m.WritableTxnMarkerTopic(name=topic, partition_indexes=(partition,)),)),)))
            code = resp.markers[0].topics[0].partitions[0].error_code
            console.print(f"abort marker for producer {pid} on {escape(topic)}-{partition} (open since offset {start}): "
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
            console.print(f"set {args.mechanism.upper()} credential of [bold]{escape(args.user)}[/] "
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
            console.print(f"deleted {names} credential(s) of [bold]{escape(args.user)}[/]")
            return 0
    except CommandError as exc:
        print(f"oncelog users {args.action}: {exc}", file=sys.stderr)
        return 1
    except KafkaException as exc:
        err = exc.args[0]
        print(f"oncelog users {args.action}: {err.str() if hasattr(err, 'str') else err}", file=sys.stderr)
        return 1
    return 2


# ------------------------------------------------------------------------------------------
# ``oncelog groups``: list, describe (with lag) and delete groups of both protocols.
#
# list and describe speak the protocol themselves (oncelog.client.kafka), as Kafka's AdminClient
# does, for what librdkafka does not expose: ListGroups v5's group type, and ConsumerGroupDescribe's
# epochs, subscriptions and target assignments (KIP-848). Each request goes at the highest version
# both this client (kio) and the broker (its ApiVersions answer) support.
#
# describe follows Kafka 4.4's DescribeConsumerGroupsHandler: ConsumerGroupDescribe first; a group
# it answers GROUP_ID_NOT_FOUND for ("Group g is not a consumer group.", or unknown), or a broker
# without the API, is asked again with DescribeGroups (the classic protocol), and a group that this
# does not find either fails with ConsumerGroupDescribe's message. A classic group whose protocol
# type is neither "consumer" nor "" (Connect, ...) is refused as Kafka's admin refuses it.

# api key: (name, highest version this client builds)
GROUP_APIS = {9: ("OffsetFetch", 7), 15: ("DescribeGroups", 6), 16: ("ListGroups", 5),
              69: ("ConsumerGroupDescribe", 1), 77: ("ShareGroupDescribe", 1), 89: ("StreamsGroupDescribe", 0),
              90: ("DescribeShareGroupOffsets", 1)}
AUTHORIZED_OPERATIONS_OMITTED = -2147483648  # INT32_MIN: the client did not ask for them
MEMBER_TYPES = {-1: None, 0: "classic", 1: "consumer"}  # ConsumerGroupDescribe v1 member_type
# Per-group errors after which the same request is sent again (to a coordinator found anew for
# the first two), as Kafka's handler does; anything else fails the command.
_GROUP_REFRESH = {"not_coordinator", "coordinator_not_available"}
_GROUP_RETRY = _GROUP_REFRESH | {"coordinator_load_in_progress"}


class GroupError(CommandError):
    """A group request answered with an error: ``code`` is Kafka's error name (GROUP_ID_NOT_FOUND)."""

    def __init__(self, code: str, message: str | None) -> None:
        super().__init__(f"{code}: {message}" if message else code)
        self.code = code


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    group_type: str | None  # "classic", "consumer" (ListGroups v5+), None from an older broker
    state: str | None  # None before ListGroups v4
    protocol_type: str  # "consumer", "connect", "" (offsets only), ...


@dataclass(frozen=True)
class GroupMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    assignment: dict[str, list[int]]  # topic -> partitions: what the member owns now
    # Consumer groups only (None for a classic group's members):
    member_epoch: int | None = None
    member_type: str | None = None  # "consumer", or "classic" for a classic member of a consumer group
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    target_assignment: dict[str, list[int]] | None = None  # what the coordinator has assigned it

    def pending(self) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
        """(partitions of the target not yet owned, partitions owned not in the target): both
        empty once the member has reconciled with its target assignment."""
        if self.target_assignment is None:
            return {}, {}
        return (_minus(self.target_assignment, self.assignment), _minus(self.assignment, self.target_assignment))


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    group_type: str  # "consumer" (KIP-848, ConsumerGroupDescribe) or "classic" (DescribeGroups)
    protocol_type: str  # a classic group's ("consumer", "" when it only holds offsets); "consumer" else
    state: str
    assignor: str | None  # consumer: the server-side assignor; classic: the chosen protocol (range, ...)
    coordinator: tuple[int, str, int]  # (node id, host, port)
    members: list[GroupMember]
    authorized_operations: list[str] | None  # None when not asked for
    group_epoch: int | None = None  # consumer groups only
    assignment_epoch: int | None = None  # consumer groups only
    api: str = ""  # the request that described it, e.g. "ConsumerGroupDescribe v1"


def _minus(a: dict[str, list[int]], b: dict[str, list[int]]) -> dict[str, list[int]]:
    out = {t: sorted(set(ps) - set(b.get(t, ()))) for t, ps in a.items()}
    return {t: ps for t, ps in sorted(out.items()) if ps}


def _version(conn, api_key: int) -> int | None:
    """The highest version of ``api_key`` both sides support, None if there is none."""
    lo, hi = conn.api_versions.get(api_key, (None, None))
    ours = GROUP_APIS[api_key][1]
    if lo is None or lo > ours:
        return None
    return min(hi, ours)


def _request(api_key: int, version: int, name: str, **fields):
    """A kio request of that version with the fields it has (e.g. DescribeGroups v0-v2 have no
    include_authorized_operations, ListGroups v0-v3 no filters)."""
    import dataclasses

    from .client.wire import request_module

    cls = getattr(request_module(api_key, version), name)
    known = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in fields.items() if k in known})


def _operation_names(bits: int) -> list[str] | None:
    """KIP-430's bit field as kafka-acls' operation names (Read, DescribeConfigs, ...)."""
    from .security.acls import AclOperation

    if bits == AUTHORIZED_OPERATIONS_OMITTED:
        return None
    return [op.name.title().replace("_", "") for op in AclOperation if op > 0 and bits & (1 << op)]


def _consumer_protocol_assignment(member) -> dict[str, list[int]]:
    """A classic consumer's ConsumerProtocolAssignment: topic -> partitions. Empty bytes: no
    assignment yet. Bytes that do not parse are an error, as in Kafka's Admin."""
    from .protocol.consumer_protocol import parse_assignment

    if not member.member_assignment:
        return {}
    parsed = parse_assignment(member.member_assignment)
    if parsed is None:
        raise CommandError(f"member {member.member_id!r}: its assignment is not a ConsumerProtocolAssignment")
    return {t: sorted(ps) for t, ps in sorted(parsed.items())}


def _topic_partitions(assignment) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for t in assignment.topic_partitions:
        out.setdefault(t.topic_name or str(t.topic_id), []).extend(t.partitions)
    return {t: sorted(ps) for t, ps in sorted(out.items())}


def list_groups(client) -> list[GroupListing]:
    """Every broker's groups (each lists those it coordinates), by ListGroups."""
    import time

    from kio.schema.errors import ErrorCode

    from .client.kafka import KafkaProtocolError

    client.metadata([])
    out = {}
    deadline = time.monotonic() + client.timeout
    for node_id in sorted(client.brokers):
        conn = client.node(node_id)
        version = _version(conn, 16)
        if version is None:
            raise CommandError(f"broker {conn.address} does not offer ListGroups")
        while True:  # a coordinator loading its groups (just restarted) answers so for a while
            resp = conn.request(_request(16, version, "ListGroupsRequest", states_filter=(), types_filter=()))
            if resp.error_code.name not in _GROUP_RETRY or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        if resp.error_code != ErrorCode.none:
            raise KafkaProtocolError(resp.error_code, f"ListGroups on {conn.address}")
        for g in resp.groups:
            out[g.group_id] = GroupListing(g.group_id, getattr(g, "group_type", None),
                                           getattr(g, "group_state", None), g.protocol_type)
    return [out[k] for k in sorted(out)]


def describe_group(client, group_id: str, *, include_authorized_operations: bool = False) -> GroupDescription:
    """``group_id`` described by its coordinator: ConsumerGroupDescribe, else DescribeGroups
    (see the section's comment). Raises GroupError with Kafka's error name and message."""
    import time

    from kio.schema.errors import ErrorCode

    from .client.kafka import COORDINATOR_GROUP

    classic = False  # after ConsumerGroupDescribe said GROUP_ID_NOT_FOUND, or is not offered
    not_found_message = None  # ConsumerGroupDescribe's, reported if DescribeGroups finds nothing too
    deadline = time.monotonic() + client.timeout
    while True:
        try:
            conn = client.coordinator(group_id, COORDINATOR_GROUP)
            if not classic and _version(conn, 69) is None:
                classic = True
            if classic:
                version = _version(conn, 15)
                if version is None:
                    raise CommandError(f"broker {conn.address} offers neither ConsumerGroupDescribe nor DescribeGroups")
                resp = conn.request(_request(15, version, "DescribeGroupsRequest", groups=(group_id,),
                                             include_authorized_operations=include_authorized_operations))
            else:
                version = _version(conn, 69)
                resp = conn.request(_request(69, version, "ConsumerGroupDescribeRequest", group_ids=(group_id,),
                                             include_authorized_operations=include_authorized_operations))
        except (OSError, ConnectionError):
            if time.monotonic() > deadline:
                raise
            client.forget_coordinator(group_id, COORDINATOR_GROUP)
            client.close()
            time.sleep(0.1)
            continue
        group = next((g for g in resp.groups if g.group_id == group_id), None)
        if group is None:
            raise CommandError(f"the coordinator's answer does not describe group {group_id!r}")
        code = group.error_code
        if code == ErrorCode.none:
            break
        name = code.name
        if not classic and code in (ErrorCode.group_id_not_found, ErrorCode.unsupported_version):
            other = (_describe_share(client, conn, group_id, include_authorized_operations)
                     or _describe_streams(client, conn, group_id, include_authorized_operations))
            if other is not None:
                return other
            classic, not_found_message = True, group.error_message
            continue
        if name in _GROUP_RETRY and time.monotonic() < deadline:
            if name in _GROUP_REFRESH:
                client.forget_coordinator(group_id, COORDINATOR_GROUP)
            time.sleep(0.1)
            continue
        message = getattr(group, "error_message", None)
        if code == ErrorCode.group_id_not_found:
            message = not_found_message or message
        raise GroupError(name.upper(), message)

    host, port = client.brokers.get(client.coordinators[(COORDINATOR_GROUP, group_id)], ("?", 0))
    coordinator = (client.coordinators[(COORDINATOR_GROUP, group_id)], host, port)
    operations = _operation_names(group.authorized_operations)
    if classic:
        if group.protocol_type not in ("consumer", ""):
            raise GroupError("NOT_A_CONSUMER_GROUP",  # Kafka's admin: an IllegalArgumentException
                             f"GroupId {group_id} is not a consumer group ({group.protocol_type}).")
        members = [GroupMember(m.member_id, m.group_instance_id, None, m.client_id, m.client_host,
                               _consumer_protocol_assignment(m)) for m in group.members]
        return GroupDescription(group_id, "classic", group.protocol_type, group.group_state,
                                group.protocol_data or None, coordinator, members, operations,
                                api=f"DescribeGroups v{version}")
    members = [GroupMember(m.member_id, m.instance_id, m.rack_id, m.client_id, m.client_host,
                           _topic_partitions(m.assignment), member_epoch=m.member_epoch,
                           member_type=MEMBER_TYPES.get(getattr(m, "member_type", -1)),
                           subscribed_topic_names=sorted(m.subscribed_topic_names),
                           subscribed_topic_regex=m.subscribed_topic_regex or None,
                           target_assignment=_topic_partitions(m.target_assignment))
               for m in group.members]
    return GroupDescription(group_id, "consumer", "consumer", group.group_state, group.assignor_name or None,
                            coordinator, members, operations, group_epoch=group.group_epoch,
                            assignment_epoch=group.assignment_epoch, api=f"ConsumerGroupDescribe v{version}")


def _describe_of_type(client, conn, api_key: int, request: str, group_id: str, include_authorized_operations: bool):
    """Ask the coordinator ``conn`` to describe ``group_id`` with a group type's describe API
    (ShareGroupDescribe, StreamsGroupDescribe): (the group's entry, the version, the coordinator as
    (node id, host, port)), or None when the broker does not offer the API or the group is not of
    that type (GROUP_ID_NOT_FOUND); another error raises GroupError."""
    from kio.schema.errors import ErrorCode

    from .client.kafka import COORDINATOR_GROUP

    version = _version(conn, api_key)
    if version is None:
        return None
    resp = conn.request(_request(api_key, version, request, group_ids=(group_id,),
                                 include_authorized_operations=include_authorized_operations))
    group = next((g for g in resp.groups if g.group_id == group_id), None)
    if group is None or group.error_code == ErrorCode.group_id_not_found:
        return None
    if group.error_code != ErrorCode.none:
        raise GroupError(group.error_code.name.upper(), group.error_message)
    node = client.coordinators[(COORDINATOR_GROUP, group_id)]
    return group, version, (node, *client.brokers.get(node, ("?", 0)))


def _describe_share(client, conn, group_id: str, include_authorized_operations: bool) -> GroupDescription | None:
    """``group_id`` as a share group (ShareGroupDescribe), or None when it is not one (or the
    broker serves no share groups): the caller then tries a classic group."""
    found = _describe_of_type(client, conn, 77, "ShareGroupDescribeRequest", group_id, include_authorized_operations)
    if found is None:
        return None
    group, version, coordinator = found
    members = [GroupMember(m.member_id, None, m.rack_id, m.client_id, m.client_host, _topic_partitions(m.assignment),
                           member_epoch=m.member_epoch, member_type="share",
                           subscribed_topic_names=sorted(m.subscribed_topic_names))
               for m in group.members]
    return GroupDescription(group_id, "share", "share", group.group_state, group.assignor_name or None,
                            coordinator, members, _operation_names(group.authorized_operations),
                            group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
                            api=f"ShareGroupDescribe v{version}")


def _describe_streams(client, conn, group_id: str, include_authorized_operations: bool) -> GroupDescription | None:
    """``group_id`` as a streams group (StreamsGroupDescribe, KIP-1071), or None when it is not
    one: each member's active tasks shown as the source-topic partitions they read (a task is a
    subtopology's partition), so the lag rows name their owner."""
    found = _describe_of_type(client, conn, 89, "StreamsGroupDescribeRequest", group_id, include_authorized_operations)
    if found is None:
        return None
    group, version, coordinator = found
    sources = {st.subtopology_id: sorted({*st.source_topics, *(t.name for t in st.repartition_source_topics)})
               for st in ((group.topology.subtopologies or ()) if group.topology is not None else ())}

    def partitions(assignment) -> dict[str, list[int]]:
        out: dict[str, set[int]] = {}
        for task in assignment.active_tasks:
            for topic in sources.get(task.subtopology_id, [f"subtopology {task.subtopology_id}"]):
                out.setdefault(topic, set()).update(task.partitions)
        return {t: sorted(ps) for t, ps in sorted(out.items())}

    members = [GroupMember(m.member_id, m.instance_id, m.rack_id, m.client_id, m.client_host, partitions(m.assignment),
                           member_epoch=m.member_epoch, member_type="streams",
                           subscribed_topic_names=sorted({t for ts in sources.values() for t in ts}),
                           target_assignment=partitions(m.target_assignment))
               for m in group.members]
    return GroupDescription(group_id, "streams", "streams", group.group_state, None, coordinator, members,
                            _operation_names(group.authorized_operations), group_epoch=group.group_epoch,
                            assignment_epoch=group.assignment_epoch, api=f"StreamsGroupDescribe v{version}")


def share_group_offsets(client, description: GroupDescription) -> list[dict]:
    """Every share partition of a share group (DescribeShareGroupOffsets, all topics): its start
    offset (the SPSO: everything before it is acknowledged or archived) and lag, as
    kafka-share-groups --describe shows them, with the members it is assigned to."""
    from kio.schema.errors import ErrorCode

    from .client.kafka import COORDINATOR_GROUP, KafkaProtocolError

    group_id = description.group_id
    conn = client.coordinator(group_id, COORDINATOR_GROUP)
    version = _version(conn, 90)
    if version is None:
        raise CommandError(f"broker {conn.address} does not offer DescribeShareGroupOffsets")
    from .client.wire import request_module

    mod = request_module(90, version)
    resp = conn.request(mod.DescribeShareGroupOffsetsRequest(groups=(
        mod.DescribeShareGroupOffsetsRequestGroup(group_id=group_id, topics=None),)))
    group = resp.groups[0]
    if group.error_code != ErrorCode.none:
        raise KafkaProtocolError(group.error_code, f"DescribeShareGroupOffsets group {group_id!r}")
    owners: dict = {}
    for member in description.members:
        for t, ps in member.assignment.items():
            for p in ps:
                owners.setdefault((t, p), []).append(member.client_id)
    rows = []
    for t in sorted(group.topics, key=lambda t: t.topic_name):
        for p in sorted(t.partitions, key=lambda p: p.partition_index):
            start = p.start_offset if p.start_offset >= 0 else None
            lag = getattr(p, "lag", -1)
            rows.append({"topic": t.topic_name, "partition": p.partition_index, "start_offset": start,
                         "lag": lag if lag >= 0 else None,
                         "error": None if p.error_code == ErrorCode.none else p.error_code.name.upper(),
                         "members": sorted(owners.get((t.topic_name, p.partition_index), []))})
    return rows


def group_offsets(client, description: GroupDescription) -> list[dict]:
    """Committed offset, high watermark and lag of every partition the group has committed or
    its members own (as kafka-consumer-groups --describe), with the owning member; a share
    group's start offsets and lag (:func:`share_group_offsets`)."""
    import time

    if description.group_type == "share":
        return share_group_offsets(client, description)

    from kio.schema.errors import ErrorCode

    from .client.kafka import COORDINATOR_GROUP, LATEST, READ_UNCOMMITTED, KafkaProtocolError

    group_id = description.group_id
    conn = client.coordinator(group_id, COORDINATOR_GROUP)
    version = _version(conn, 9)
    if version is None or version < 2:  # v2: null topics, every committed partition
        raise CommandError(f"broker {conn.address} offers no OffsetFetch version from 2 to 7")
    deadline = time.monotonic() + client.timeout
    while True:  # a coordinator still loading its offsets answers so for a while
        resp = client.coordinator(group_id, COORDINATOR_GROUP).request(
            _request(9, version, "OffsetFetchRequest", group_id=group_id, topics=None, require_stable=False))
        if resp.error_code.name not in _GROUP_RETRY or time.monotonic() > deadline:
            break
        if resp.error_code.name in _GROUP_REFRESH:
            client.forget_coordinator(group_id, COORDINATOR_GROUP)
        time.sleep(0.1)
    if resp.error_code != ErrorCode.none:
        raise KafkaProtocolError(resp.error_code, f"OffsetFetch group {group_id!r}")
    committed = {(t.name, p.partition_index): p.committed_offset for t in resp.topics for p in t.partitions
                 if p.error_code == ErrorCode.none}
    owners = {(t, p): m for m in description.members for t, ps in m.assignment.items() for p in ps}
    partitions = sorted(set(committed) | set(owners))
    # High watermarks of the partitions that still exist (offsets outlive a deleted topic).
    topics = client.metadata(sorted({t for t, _ in partitions}))
    live = [(t, p) for t, p in partitions
            if t in topics and topics[t].error == ErrorCode.none and p in topics[t].partitions]
    highs = {tp: off for tp, (off, _) in client.list_offsets({tp: LATEST for tp in live}, READ_UNCOMMITTED).items()}
    rows = []
    for tp in partitions:
        offset = committed.get(tp, -1)
        high = highs.get(tp)
        owner = owners.get(tp)
        rows.append({"topic": tp[0], "partition": tp[1], "committed": offset if offset >= 0 else None,
                     "high_watermark": high,
                     "lag": high - offset if offset >= 0 and high is not None else None,
                     "member_id": owner.member_id if owner else None, "client_id": owner.client_id if owner else None})
    return rows


def _assignment_text(assignment: dict[str, list[int]] | None) -> str:
    """Kafka's tool's form: ``orders:0,1;refunds:2``."""
    if assignment is None:
        return "-"
    return ";".join(f"{t}:{','.join(map(str, ps))}" for t, ps in sorted(assignment.items()) if ps) or "-"


def _description_json(d: GroupDescription, offsets: list[dict]) -> dict:
    import dataclasses

    doc = dataclasses.asdict(d)
    doc["coordinator"] = dict(zip(("id", "host", "port"), d.coordinator))
    for member, m in zip(doc["members"], d.members):
        if m.target_assignment is not None:
            assign, revoke = m.pending()
            member["pending"] = {"to_assign": assign, "to_revoke": revoke}
    doc["offsets"] = offsets
    return doc


def _print_description(console: Console, d: GroupDescription, offsets: list[dict]) -> None:
    node, host, port = d.coordinator
    protocols = {"consumer": "consumer (KIP-848)", "share": "share (KIP-932)", "streams": "streams (KIP-1071)"}
    what = (f"protocol {protocols[d.group_type]}, state {d.state}, group epoch {d.group_epoch}, assignment epoch "
            f"{d.assignment_epoch}" if d.group_type in protocols
            else f"protocol classic (protocol type {d.protocol_type or '-'}), state {d.state}")
    console.print(f"group [bold]{escape(d.group_id)}[/]: {what}, assignor {d.assignor or '-'}, coordinator {node} "
                  f"({host}:{port})", soft_wrap=True, highlight=False)
    if d.authorized_operations is not None:
        console.print(f"authorized operations: {', '.join(d.authorized_operations) or '-'}", soft_wrap=True,
                      highlight=False)
    if d.group_type == "share":
        members = Table("member", "client id", "host", "epoch", "subscription", "assignment")
        for m in sorted(d.members, key=lambda m: (m.client_id, m.member_id)):
            members.add_row(m.member_id, m.client_id, m.client_host, str(m.member_epoch),
                            ", ".join(m.subscribed_topic_names or []) or "-", _assignment_text(m.assignment))
        console.print(members)
        starts = Table("topic", "partition", "start offset", "lag", "members")
        for row in offsets:
            none = lambda v: "-" if v is None else str(v)  # noqa: E731
            starts.add_row(row["topic"], str(row["partition"]), none(row["start_offset"]),
                           row["error"] or none(row["lag"]), ", ".join(row["members"]) or "-")
        console.print(starts)
        return
    if d.group_type in ("consumer", "streams"):  # a streams member's tasks as the partitions they read
        members = Table("member", "instance id", "client id", "host", "epoch", "subscription", "current assignment",
                        "target assignment", "pending (+ to assign, - to revoke)")
        for m in sorted(d.members, key=lambda m: (m.client_id, m.member_id)):
            subscription = ", ".join(m.subscribed_topic_names or [])
            if m.subscribed_topic_regex:
                subscription = f"{subscription}; regex {m.subscribed_topic_regex}".lstrip("; ")
            assign, revoke = m.pending()
            pending = " ".join(([f"+{_assignment_text(assign)}"] if assign else [])
                               + ([f"-{_assignment_text(revoke)}"] if revoke else []))
            epoch = str(m.member_epoch) + (" (classic member)" if m.member_type == "classic" else "")
            members.add_row(m.member_id, m.instance_id or "-", m.client_id, m.client_host, epoch, subscription or "-",
                            _assignment_text(m.assignment), _assignment_text(m.target_assignment),
                            Text(pending, style="yellow") if pending else "-")
    else:  # the classic describe's table, as before
        members = Table("member", "client id", "host", "partitions")
        for m in d.members:
            members.add_row(m.member_id, m.client_id, m.client_host,
                            ", ".join(f"{t}-{p}" for t, ps in m.assignment.items() for p in ps))
    console.print(members)
    lag = Table("topic", "partition", "committed", "high watermark", "lag", "owner")
    for row in offsets:
        none = lambda v: "-" if v is None else str(v)  # noqa: E731
        lag.add_row(row["topic"], str(row["partition"]), none(row["committed"]), none(row["high_watermark"]),
                    none(row["lag"]), row["client_id"] or "-")
    console.print(lag)


def groups_command(args) -> int:
    """``oncelog groups list|describe|delete``; list shows each group's type (classic, consumer,
    share, streams) and state; describe shows a consumer or streams group's epochs and each member's
    current and target assignment (a streams member's active tasks as the source partitions they
    read), a classic group's members, and for these the lag per partition (committed offset vs high
    watermark); a share group's members and each share partition's start offset and lag."""
    import json

    from .client.kafka import KafkaClient, KafkaProtocolError, KafkaSecurityError, UnsupportedBroker

    console = _console()
    as_json = getattr(args, "json", False)
    try:
        if args.action == "delete":
            conn = _Connection(args)
            conn.wait(conn.admin.delete_consumer_groups([args.group], request_timeout=ADMIN_TIMEOUT)[args.group])
            console.print(f"deleted group [bold]{escape(args.group)}[/]")
            return 0
        client = KafkaClient(args.bootstrap, _read_command_config(args.command_config), client_id="oncelog-groups",
                             timeout=10)
        try:
            if args.action == "list":
                groups = list_groups(client)
                if as_json:
                    print(json.dumps([g.__dict__ for g in groups]))
                    return 0
                table = Table("group", "type", "state", "protocol type")
                for g in groups:
                    table.add_row(g.group_id, g.group_type or "-", g.state or "-", g.protocol_type or "-")
                console.print(table)
            elif args.action == "describe":
                desc = describe_group(client, args.group,
                                      include_authorized_operations=args.include_authorized_operations)
                offsets = group_offsets(client, desc)
                if as_json:
                    print(json.dumps(_description_json(desc, offsets)))
                else:
                    _print_description(console, desc, offsets)
        finally:
            client.close()
    except (CommandError, KafkaProtocolError, KafkaSecurityError, UnsupportedBroker, OSError) as exc:
        print(f"oncelog groups {args.action}: {exc}", file=sys.stderr)
        return 1
    except KafkaException as exc:
        print(f"oncelog groups {args.action}: {exc.args[0]}", file=sys.stderr)
        return 1
    return 0
