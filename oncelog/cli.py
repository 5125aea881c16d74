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
    _bootstrap_option(t, [c, tl, d, x])

    g = sub.add_parser("groups", help="list, describe (with lag) or delete consumer groups")
    gsub = g.add_subparsers(dest="action", required=True)
    gl = gsub.add_parser("list")
    gd = gsub.add_parser("describe")
    gd.add_argument("group")
    gx = gsub.add_parser("delete")
    gx.add_argument("group")
    _bootstrap_option(g, [gl, gd, gx])

    pr = sub.add_parser("producers", help="describe a topic's active idempotent producers")
    prsub = pr.add_subparsers(dest="action", required=True)
    prd = prsub.add_parser("describe")
    prd.add_argument("topic")
    _bootstrap_option(pr, [prd])

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
    _bootstrap_option(tx, [txl, txd, txh, txa])

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
    return p


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
    # Admin commands talk to a broker over the protocol; imported lazily to keep serve light.
    from . import admin

    return getattr(admin, f"{args.command}_command")(args)
    return 2


def cmd_serve(args) -> int:
    from .broker import Broker
    from .server import serve
    from .storage.log_manager import DataDirMismatch

    try:
        config, notes = build_broker_config(settings_from_args(args))
    except ServeConfigError as exc:
        print(f"oncelog serve: {exc}", file=sys.stderr)
        return 2
    for note in notes:
        logging.getLogger("oncelog.config").info("%s", note)
    _install_uvloop()
    try:
        asyncio.run(serve(Broker(config)))
    except DataDirMismatch as exc:
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
