"""``oncelog`` command line: serve a broker, manage topics, run the demo job."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import time

from .storage.flusher import FsyncPolicy
from .storage.partition_log import LogConfig

_DEFAULTS = LogConfig()


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


def _size(text: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    t = text.strip().lower().rstrip("b").rstrip("i")
    if t and t[-1] in units:
        return int(float(t[:-1]) * units[t[-1]])
    return int(t)


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

    s = sub.add_parser("serve", help="run a broker")
    s.add_argument("--data-dir", required=True, help="directory for logs and metadata")
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (default loopback)")
    s.add_argument("--port", type=int, default=9092, help="port (0 picks a free one)")
    s.add_argument("--node-id", type=int, default=1,
                   help="Kafka's node.id: this broker's id in Metadata and replica assignments (default 1; "
                        "recorded in the data dir, which then refuses another id)")
    s.add_argument("--advertise", metavar="HOST:PORT", help="address handed to clients in Metadata")
    s.add_argument("--fsync", default="always", help="always | interval:MS | never (default always)")
    s.add_argument("--no-auto-create-topics", action="store_true", help="refuse Metadata for unknown topics")
    s.add_argument("--num-partitions", type=int, default=1, help="partitions of auto-created topics")
    s.add_argument("--segment-bytes", type=_size, default=_DEFAULTS.segment_bytes, help="segment size, e.g. 1g")
    s.add_argument("--segment-ms", type=int, default=_DEFAULTS.segment_ms, help="segment age before rolling")
    s.add_argument("--retention-ms", type=int, default=_DEFAULTS.retention_ms, help="-1 keeps forever")
    s.add_argument("--retention-bytes", type=_size, default=_DEFAULTS.retention_bytes, help="per partition; -1 = no limit")
    s.add_argument("--retention-check-ms", type=int, default=300_000, help="how often retention runs")
    s.add_argument("--max-message-bytes", type=_size, default=_DEFAULTS.max_message_bytes)
    s.add_argument("--socket-request-max-bytes", type=_size, default=100 * 1024 * 1024,
                   help="socket.request.max.bytes: a request frame declaring more closes the connection before "
                        "anything is allocated for it (default 100m, as Kafka)")
    s.add_argument("--queued-max-request-bytes", type=_size, default=100 * 1024 * 1024,
                   help="queued.max.request.bytes: bytes of requests received and not yet answered, over all "
                        "connections; at the limit the broker stops reading until answers free memory "
                        "(default 100m; Kafka's -1 is unbounded; <= 0 unbounded)")
    s.add_argument("--max-connections", type=int, default=1000,
                   help="max.connections: connections at once; one more is closed at once (default 1000; "
                        "Kafka's is unbounded)")
    s.add_argument("--max-connections-per-ip", type=int, default=(1 << 31) - 1,
                   help="max.connections.per.ip: connections at once from one address; one more is closed at "
                        "once (default 2147483647, as Kafka)")
    s.add_argument("--connections-max-idle-ms", type=int, default=600_000,
                   help="connections.max.idle.ms: close a connection with nothing received, in progress or "
                        "unanswered for this long (default 600000, as Kafka; -1 never)")
    s.add_argument("--request-read-timeout-ms", type=int, default=30_000,
                   help="oncelog.request.read.timeout.ms (oncelog's own): a request frame must arrive completely "
                        "within this long of its first byte, else the connection is closed (slowloris; "
                        "default 30000; <= 0 never)")
    s.add_argument("--offsets-topic-partitions", type=int, default=10, help="partitions of __consumer_offsets")
    s.add_argument("--offsets-topic-segment-bytes", type=_size, default=16 << 20,
                   help="segment size of __consumer_offsets (compaction works on closed segments)")
    s.add_argument("--log-cleaner-interval-ms", type=int, default=30_000, help="how often compaction runs")
    s.add_argument("--group-initial-rebalance-delay-ms", type=int, default=3000,
                   help="group.initial.rebalance.delay.ms: how long the first rebalance of an empty group "
                        "waits for more members (default 3000, as Kafka; 0 = none)")
    s.add_argument("--group-min-session-timeout-ms", type=int, default=6000,
                   help="group.min.session.timeout.ms: the shortest session.timeout.ms a JoinGroup may ask for "
                        "(INVALID_SESSION_TIMEOUT below it; default 6000, as Kafka)")
    s.add_argument("--group-max-session-timeout-ms", type=int, default=1_800_000,
                   help="group.max.session.timeout.ms: the longest session.timeout.ms a JoinGroup may ask for "
                        "(INVALID_SESSION_TIMEOUT above it; default 1800000, as Kafka)")

    p.serve_parser = s  # for explicit_serve_options

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


# ``serve`` option (argparse dest) -> the Kafka broker configs it sets: given explicitly, they are
# STATIC_BROKER_CONFIG in DescribeConfigs.
SERVE_OPTION_CONFIGS = {
    "data_dir": ("log.dirs",), "host": ("listeners",), "port": ("listeners",), "node_id": ("node.id", "broker.id"),
    "advertise": ("advertised.listeners",), "fsync": ("oncelog.fsync",),
    "no_auto_create_topics": ("auto.create.topics.enable",), "num_partitions": ("num.partitions",),
    "segment_bytes": ("log.segment.bytes",), "segment_ms": ("log.roll.ms",), "retention_ms": ("log.retention.ms",),
    "retention_bytes": ("log.retention.bytes",), "retention_check_ms": ("log.retention.check.interval.ms",),
    "max_message_bytes": ("message.max.bytes",), "socket_request_max_bytes": ("socket.request.max.bytes",),
    "queued_max_request_bytes": ("queued.max.request.bytes",), "max_connections": ("max.connections",),
    "max_connections_per_ip": ("max.connections.per.ip",), "connections_max_idle_ms": ("connections.max.idle.ms",),
    "request_read_timeout_ms": ("oncelog.request.read.timeout.ms",),
    "offsets_topic_partitions": ("offsets.topic.num.partitions",),
    "offsets_topic_segment_bytes": ("offsets.topic.segment.bytes",),
    "log_cleaner_interval_ms": ("log.cleaner.backoff.ms",),
    "group_initial_rebalance_delay_ms": ("group.initial.rebalance.delay.ms",),
    "group_min_session_timeout_ms": ("group.min.session.timeout.ms",),
    "group_max_session_timeout_ms": ("group.max.session.timeout.ms",),
}


def explicit_serve_options(argv: list[str] | None) -> frozenset[str]:
    """The broker configs set by ``serve`` options given on the command line (parsed again with
    every default suppressed, so abbreviations and ``--opt=value`` count too)."""
    parser = build_parser()
    for action in parser.serve_parser._actions:
        if action.dest != "help":
            action.default = argparse.SUPPRESS
    given = vars(parser.parse_args(argv))
    return frozenset(name for dest in given for name in SERVE_OPTION_CONFIGS.get(dest, ()))


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
        args.explicit = explicit_serve_options(argv)
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
    from .broker import Broker, BrokerConfig
    from .groups.coordinator import GroupConfig
    from .server import serve
    from .storage.log_manager import DataDirMismatch

    try:
        fsync = FsyncPolicy.parse(args.fsync)
        log_config = LogConfig(segment_bytes=args.segment_bytes, segment_ms=args.segment_ms,
                               retention_ms=args.retention_ms, retention_bytes=args.retention_bytes,
                               max_message_bytes=args.max_message_bytes)
        log_config.validate()
        if args.max_connections < 0 or args.max_connections_per_ip < 0:
            raise ValueError("--max-connections and --max-connections-per-ip must be >= 0")
        if args.node_id < 0:
            raise ValueError(f"--node-id must be >= 0, not {args.node_id}")
        if args.group_min_session_timeout_ms > args.group_max_session_timeout_ms:
            # Kafka accepts this and then refuses every JoinGroup; refusing to start says why at once.
            raise ValueError(f"--group-min-session-timeout-ms ({args.group_min_session_timeout_ms}) is above "
                             f"--group-max-session-timeout-ms ({args.group_max_session_timeout_ms})")
    except ValueError as exc:
        print(f"oncelog serve: {exc}", file=sys.stderr)
        return 2
    config = BrokerConfig(data_dir=args.data_dir, host=args.host, port=args.port, advertise=args.advertise,
                          fsync=fsync, auto_create_topics=not args.no_auto_create_topics,
                          num_partitions=args.num_partitions, socket_request_max_bytes=args.socket_request_max_bytes,
                          queued_max_request_bytes=args.queued_max_request_bytes,
                          max_connections=args.max_connections, max_connections_per_ip=args.max_connections_per_ip,
                          connections_max_idle_ms=args.connections_max_idle_ms,
                          request_read_timeout_ms=args.request_read_timeout_ms,
                          log=log_config, retention_check_interval_s=args.retention_check_ms / 1000,
                          offsets_topic_partitions=args.offsets_topic_partitions,
                          offsets_topic_segment_bytes=args.offsets_topic_segment_bytes,
                          log_cleaner_interval_s=args.log_cleaner_interval_ms / 1000,
                          group=GroupConfig(initial_rebalance_delay_ms=args.group_initial_rebalance_delay_ms,
                                            min_session_timeout_ms=args.group_min_session_timeout_ms,
                                            max_session_timeout_ms=args.group_max_session_timeout_ms),
                          node_id=args.node_id, explicit=getattr(args, "explicit", frozenset()))
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
