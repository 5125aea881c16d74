"""``oncelog`` command line: serve a broker, manage topics, run the demo job."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys

from .config.serve_options import ServeConfigError, add_serve_options, build_broker_config, settings_from_args


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc = {"ts": round(record.created, 3), "level": record.levelname.lower(), "logger": record.name,
               "msg": record.getMessage()}
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc)


def setup_logging(fmt: str, level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)


def _bootstrap_option(command: argparse.ArgumentParser, verbs: list[argparse.ArgumentParser]) -> None:
    """``--bootstrap-server`` (Kafka's tools' name; ``--bootstrap`` kept as an alias), accepted
    before the verb and after it: ``topics --bootstrap-server X list`` = ``topics list
    --bootstrap-server X``. After the verb it has no default, so it never hides one given before."""
    command.add_argument("--bootstrap-server", "--bootstrap", dest="bootstrap", default="127.0.0.1:9092",
                         metavar="HOST:PORT", help="broker address (default 127.0.0.1:9092)")
    for verb in verbs:
        verb.add_argument("--bootstrap-server", "--bootstrap", dest="bootstrap", default=argparse.SUPPRESS,
                          metavar="HOST:PORT", help="broker address (default 127.0.0.1:9092)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="oncelog", description="An exactly-once log that speaks the Kafka protocol.")
    p.add_argument("--log-format", choices=["text", "json"], default="text", help="log line format (stderr)")
    p.add_argument("--log-level", default="info", help="debug, info, warning, error")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("serve", help="run a broker",
                       description="Run a broker. Settings are Kafka's broker configs: from a server.properties "
                                   "(--config), the options below (shorthands for the configs they name), and "
                                   "--override NAME=VALUE, later ones winning.")
    add_serve_options(s)

    t = sub.add_parser("topics", help="create, list, describe or delete topics (over the Kafka protocol)")
    tsub = t.add_subparsers(dest="action", required=True)
    c = tsub.add_parser("create")
    c.add_argument("name")
    c.add_argument("--partitions", type=int, default=1)
    c.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    tl = tsub.add_parser("list")
    d = tsub.add_parser("describe")
    d.add_argument("name")
    x = tsub.add_parser("delete")
    x.add_argument("name")
    _command_config_option(t, [c, tl, d, x])

    g = sub.add_parser("groups", help="list, describe (with lag) or delete groups: classic, KIP-848, share and streams groups",
                       description="Consumer groups of both protocols: classic (JoinGroup/SyncGroup) and consumer "
                                   "(KIP-848, ConsumerGroupHeartbeat); share groups (KIP-932, queues) and streams groups "
                                   "(KIP-1071). describe tries ConsumerGroupDescribe first, then ShareGroupDescribe "
                                   "and StreamsGroupDescribe, and falls back to "
                                   "DescribeGroups, as Kafka's admin client does; a share group's lag is per share "
                                   "partition, from its start offset (DescribeShareGroupOffsets).")
    gsub = g.add_subparsers(dest="action", required=True)
    gl = gsub.add_parser("list", help="every group with its type (classic, consumer, share, ...) and state")
    gl.add_argument("--json", action="store_true", help="print a JSON array instead of a table")
    gd = gsub.add_parser("describe", help="a group's state and members (a consumer group's epochs and each "
                                          "member's current vs target assignment), and its lag per partition")
    gd.add_argument("group")
    gd.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    gd.add_argument("--include-authorized-operations", action="store_true",
                    help="ask for and show the operations the caller may perform on the group (KIP-430)")
    gx = gsub.add_parser("delete")
    gx.add_argument("group")
    _command_config_option(g, [gl, gd, gx])

    pr = sub.add_parser("producers", help="describe a topic's active idempotent producers")
    prsub = pr.add_subparsers(dest="action", required=True)
    prd = prsub.add_parser("describe")
    prd.add_argument("topic")
    _command_config_option(pr, [prd])

    tx = sub.add_parser("transactions", help="list, describe, find hanging, or abort transactions (KIP-664)")
    txsub = tx.add_subparsers(dest="action", required=True)
    txl = txsub.add_parser("list")
    txd = txsub.add_parser("describe")
    txd.add_argument("transactional_id")
    txh = txsub.add_parser("hanging", help="open transactions beyond their timeout, or partitions whose LSO is stuck")
    txa = txsub.add_parser("abort", help="write an ABORT marker for a partition's open transaction")
    txa.add_argument("--topic", required=True)
    txa.add_argument("--partition", type=int, required=True)
    txa.add_argument("--producer-id", type=int, default=None)
    _command_config_option(tx, [txl, txd, txh, txa])

    top = sub.add_parser("top", help="the on-call view: throughput, lag per group, open transactions, held-back LSOs",
                         description="A live view of one oncelog broker or any Kafka cluster, over the Kafka "
                                     "protocol: records/s and bytes/s per topic, each group's lag (vs the high "
                                     "watermark, and vs the last stable offset for read_committed), open "
                                     "transactions and their age, and the partitions whose LSO an open "
                                     "transaction holds back (with that transaction's first offset and id).")
    top.add_argument("--interval", type=float, default=2.0, metavar="SECONDS",
                     help="seconds between refreshes (default 2); with --once, between the two reads "
                          "the rates come from (0: one read, no rates)")
    top.add_argument("--once", action="store_true", help="print one snapshot as tables and exit")
    top.add_argument("--json", action="store_true", help="with --once: print the snapshot as one JSON object")
    _command_config_option(top, [])

    _security_parsers(sub)

    au = sub.add_parser("audit", help="check a pipeline's outputs against its inputs (exactly-once auditor)",
                        description="Match output records to input records by a source header "
                                    "(topic:partition:offset). Exit 0 clean, 1 anomalies, 2 error.")
    au.add_argument("--bootstrap", "--bootstrap-server", dest="bootstrap", default="127.0.0.1:9092",
                    help="any Kafka-protocol cluster")
    au.add_argument("--input", action="append", required=True, metavar="TOPIC", help="input topic (repeatable)")
    au.add_argument("--output", action="append", required=True, metavar="TOPIC", help="output topic (repeatable)")
    au.add_argument("--header", default="oncelog.source", help="header naming an output's input record")
    au.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    au.add_argument("--timeout", type=float, default=30.0,
                    help="seconds for the cluster to answer and the reading to progress (default 30)")
    au.add_argument("--wait-stable", type=float, default=None, metavar="SECONDS",
                    help="wait this long for open transactions to finish first (default: --timeout)")
    au.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="extra client property")

    demo = sub.add_parser("demo", help="the main job: an exactly-once Spark pipeline through crashes, audited",
                          description="Start a broker, write an orders stream (some transactions aborted), run "
                                      "a Spark streaming job (enrichment + stateful aggregates) through the "
                                      "connector while SIGKILLing the driver and the broker, then prove "
                                      "exactly-once. Exit 0 only if it held.")
    from .demo import add_arguments as _demo_arguments

    _demo_arguments(demo)

    from .chaos.cli import DESCRIPTION as _chaos_description, add_arguments as _chaos_arguments

    chaos = sub.add_parser("chaos", help="a Jepsen-class workload, nemesis and checker, for oncelog or any "
                                         "Kafka cluster", description=_chaos_description)
    _chaos_arguments(chaos)
    return p


def _command_config_option(command: argparse.ArgumentParser, verbs: list[argparse.ArgumentParser]) -> None:
    """``--bootstrap-server`` and Kafka's tools' ``--command-config``, before or after the verb."""
    _bootstrap_option(command, verbs)
    text = ("a Java properties file of client settings for an authenticated admin connection, as Kafka's "
            "tools take it (security.protocol, sasl.mechanism, sasl.jaas.config, ssl.truststore.location, ...)")
    command.add_argument("--command-config", metavar="FILE", default=None, help=text)
    for verb in verbs:
        verb.add_argument("--command-config", metavar="FILE", default=argparse.SUPPRESS, help=text)


def _security_parsers(sub) -> None:
    """``acls add|list|remove`` (as kafka-acls) and ``users add|list|delete`` (SCRAM credentials,
    as kafka-configs --entity-type users)."""
    acls = sub.add_parser(
        "acls", help="add, list or remove ACLs (as kafka-acls)",
        description="ACLs as Kafka's kafka-acls: each ACL is (resource, pattern type, principal, host, operation, "
                    "allow|deny). Works against oncelog with authorizer.class.name set, and against Apache Kafka.",
        epilog="examples:\n"
               "  oncelog acls add --allow-principal User:alice --operation Write --operation Describe "
               "--topic orders\n"
               "  oncelog acls add --allow-principal User:alice --consumer --topic orders --group billing\n"
               "  oncelog acls add --deny-principal User:bob --deny-host 10.0.0.9 --operation All "
               "--topic orders- --resource-pattern-type prefixed\n"
               "  oncelog acls list --topic orders-eu --resource-pattern-type match\n"
               "  oncelog acls remove --allow-principal User:alice --topic orders\n"
               "all take --bootstrap-server HOST:PORT and --command-config admin.properties",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    asub = acls.add_subparsers(dest="action", required=True)
    verbs = {
        "add": asub.add_parser("add", help="add ACLs: every resource x principal x host x operation given"),
        "list": asub.add_parser("list", help="list ACLs (all, or those of the resources/principals given)"),
        "remove": asub.add_parser("remove", help="remove the ACLs matching the options (all of a resource's "
                                                 "when only the resource is given)"),
    }
    for verb, v in verbs.items():
        v.add_argument("--topic", action="append", default=[], metavar="NAME", help="a topic (repeatable)")
        v.add_argument("--group", action="append", default=[], metavar="NAME", help="a consumer group (repeatable)")
        v.add_argument("--transactional-id", action="append", default=[], metavar="ID",
                       help="a transactional id (repeatable)")
        v.add_argument("--cluster", action="store_true", help="the cluster (kafka-cluster)")
        v.add_argument("--resource-pattern-type", choices=["literal", "prefixed", "match", "any"],
                       type=str.lower, default=None,
                       help="literal (default) or prefixed; for list/remove also the filters match (every "
                            "ACL that applies to the name) and any (any pattern type, this exact name)")
        v.add_argument("--allow-principal", action="append", default=[], metavar="TYPE:NAME",
                       help="e.g. User:alice, User:* for everyone (repeatable)")
        v.add_argument("--deny-principal", action="append", default=[], metavar="TYPE:NAME",
                       help="a principal denied; deny wins over allow (repeatable)")
        v.add_argument("--allow-host", action="append", default=[], metavar="HOST",
                       help="host of --allow-principal (repeatable; default * on add)")
        v.add_argument("--deny-host", action="append", default=[], metavar="HOST",
                       help="host of --deny-principal (repeatable; default * on add)")
        v.add_argument("--operation", action="append", default=[], metavar="OP",
                       help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
                            "AlterConfigs, IdempotentWrite, All (repeatable; add's default All)")
        if verb == "add":
            v.add_argument("--producer", action="store_true",
                           help="the producer's ACLs: Write, Describe, Create on the topics (Write, Describe on "
                                "the transactional ids)")
            v.add_argument("--idempotent", action="store_true",
                           help="with --producer: IdempotentWrite on the cluster")
            v.add_argument("--consumer", action="store_true",
                           help="the consumer's ACLs: Read, Describe on the topics, Read on the group")
        if verb == "list":
            v.add_argument("--principal", action="append", default=[], metavar="TYPE:NAME",
                           help="only the ACLs of this principal (repeatable)")
    for verb, v in verbs.items():
        if verb != "add":
            v.set_defaults(producer=False, consumer=False, idempotent=False)
        if verb != "list":
            v.set_defaults(principal=[])
    _command_config_option(acls, list(verbs.values()))

    users = sub.add_parser(
        "users", help="add, list or delete SCRAM credentials (as kafka-configs --entity-type users)",
        description="SCRAM credentials (KIP-554), as kafka-configs --entity-type users --alter --add-config "
                    "'SCRAM-SHA-256=[iterations=8192,password=...]'. The broker stores them salted and hashed.",
        epilog="examples:\n"
               "  echo alice-secret | oncelog users add alice --mechanism SCRAM-SHA-256 --iterations 8192 "
               "--password-stdin\n"
               "  oncelog users list\n"
               "  oncelog users delete alice --mechanism SCRAM-SHA-512\n"
               "all take --bootstrap-server HOST:PORT and --command-config admin.properties",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    usub = users.add_subparsers(dest="action", required=True)
    ua = usub.add_parser("add", help="add or replace a user's credential for one mechanism")
    ua.add_argument("user")
    ua.add_argument("--mechanism", type=str.upper, choices=["SCRAM-SHA-256", "SCRAM-SHA-512"], default="SCRAM-SHA-256",
                    help="SCRAM-SHA-256 (default) or SCRAM-SHA-512")
    ua.add_argument("--iterations", type=int, default=8192, help="4096 to 16384 (default 8192)")
    ua.add_argument("--password-stdin", action="store_true", help="read the password from the first line of stdin")
    ua.add_argument("--password", default=None,
                    help="the password (visible in the process list and shell history: prefer --password-stdin)")
    ul = usub.add_parser("list", help="users and their mechanisms and iterations (never passwords)")
    ul.add_argument("user", nargs="*", help="only these users (default: all)")
    ud = usub.add_parser("delete", help="delete a user's credential for one mechanism, or all of them")
    ud.add_argument("user")
    ud.add_argument("--mechanism", type=str.upper, choices=["SCRAM-SHA-256", "SCRAM-SHA-512"], default=None,
                    help="only this mechanism (default: every mechanism the user has)")
    _command_config_option(users, [ua, ul, ud])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    kafka_options: dict[str, str] = {}
    if "demo" in argv:  # --kafka.NAME VALUE: argparse has no wildcard options
        from .demo import extract_kafka_options

        argv, kafka_options = extract_kafka_options(argv)
    args = build_parser().parse_args(argv)
    args.kafka_options = kafka_options
    setup_logging(args.log_format, args.log_level)
    if args.command == "serve":
        return cmd_serve(args)
    if args.command == "audit":
        from .audit import audit_command

        return audit_command(args)
    if args.command == "demo":
        from . import demo

        return demo.run(args)
    if args.command == "top":
        from . import top

        return top.run(args)
    if args.command == "chaos":
        from .chaos import cli as chaos_cli

        return chaos_cli.run(args)
    # Admin commands talk to a broker over the protocol; imported lazily to keep serve light.
    from . import admin

    return getattr(admin, f"{args.command}_command")(args)
    return 2


def keep_hypothesis_out() -> None:
    """For a process of oncelog's own (``python -m oncelog``, ``serve``): kio registers a
    hypothesis strategy for each of its types whenever hypothesis is importable (a developer's
    or a test environment), ~40% of a broker process's start-up CPU here, for examples no command
    draws. Not once kio is loaded (hypothesis came with it, then)."""
    if "kio" not in sys.modules:
        sys.modules.setdefault("hypothesis", None)


def cmd_serve(args) -> int:
    keep_hypothesis_out()  # the console script's serve; python -m oncelog did it already
    try:
        config, notes = build_broker_config(settings_from_args(args))
    except ServeConfigError as exc:
        print(f"oncelog serve: {exc}", file=sys.stderr)
        return 2
    from .cluster import default_nodes

    nodes = args.nodes if args.nodes is not None else default_nodes(config.data_dir)
    if not 1 <= nodes <= 256 or (args.cluster_node is not None and not 1 <= args.cluster_node <= nodes):
        print(f"oncelog serve: --nodes must be 1..256 (got {nodes})", file=sys.stderr)
        return 2
    if nodes > 1 and args.cluster_node is None:
        from .cluster import supervisor

        return supervisor.run(sys.argv[1:], nodes)  # the supervisor never loads the broker
    from .broker import Broker
    from .server import serve
    import ssl

    from .security.jaas import JaasConfigError
    from .security.jwt import JwksConfigError
    from .metadata import DataDirMismatch
    from .storage.log_manager import DirectoryInUse
    if nodes > 1:
        from .cluster import node_config

        config = node_config(config, nodes, args.cluster_node)
    for note in notes:
        warning = note.startswith("WARNING: ")
        logging.getLogger("oncelog.config").log(logging.WARNING if warning else logging.INFO, "%s",
                                                note.removeprefix("WARNING: "))
    _install_uvloop()
    try:
        from . import faults
        from .broker import wall_clock_ms

        # The process edge: the fault variables of the environment become the broker's faults.
        broker = Broker(config, clock=faults.broker_clock(wall_clock_ms))
        faults.install_from_env(broker.faults)
        asyncio.run(serve(broker))
    except (DataDirMismatch, DirectoryInUse, JwksConfigError, JaasConfigError, ssl.SSLError) as exc:
        print(f"oncelog serve: {exc}", file=sys.stderr)
        return 2
    return 0


def _install_uvloop() -> None:
    try:
        import uvloop
    except ImportError:
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


if __name__ == "__main__":
    sys.exit(main())
