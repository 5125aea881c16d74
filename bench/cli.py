"""``python -m bench``: throughput and latency of oncelog against Tansu, side by side in one run."""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time

from rich.console import Console

from .brokers import RunningBroker, scan_log, tansu_version
from .modes import ALL_SUITES, DEFAULT_MODES, DEFAULT_TARGETS, EOS_SIZE, MODE_ALIASES, MODES, SUITE_MODES, SUITES, Target
from .report import (comparisons, group_summary, kafka_ratios, machine, mode_ratios, print_report, security_ratios,
                     summarize, support, to_json, txn_latency)
from .runner import GroupOptions, Options, Runner, TxnProbeOptions

# Defaults: 3 targets x 2 sizes x 2 modes = 12 cells a round; at ~7-8 s a cell (5 s produce,
# read-back, topic create/delete) two rounds take ~3-4 minutes. --quick: one round of 1 s cells.
FULL = {"duration": 5.0, "rounds": 2, "warmup": 2.0, "consume_seconds": 5.0,
        "rebalance_reps": 3, "commit_seconds": 3.0, "endtxn_count": 200}
QUICK = {"duration": 1.0, "rounds": 1, "warmup": 0.5, "consume_seconds": 1.0,
         "rebalance_reps": 1, "commit_seconds": 1.0, "endtxn_count": 30}
# A run with the EOS suites has 3x-4x the cells of the produce suite: shorter cells keep
# `--suite all` within ~10 minutes on the 2-core box (see BENCHMARKS-draft.md for the budget).
FULL_MULTI = {**FULL, "duration": 3.0, "consume_seconds": 2.0}


def _csv(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def _size(text: str) -> int:
    t = text.strip().lower().removesuffix("b")
    if t.endswith("k"):
        return int(float(t[:-1]) * 1024)
    return int(t)


def _kv(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, not {text!r}")
    return key.strip(), value.strip()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--suite", default="produce",
                   help="what to measure, comma-separated: produce (oncelog vs Tansu, --sizes x --modes), "
                        "eos (1 KB at-most-once / at-least-once / idempotent), txn (1 KB "
                        "transactional producers committing every 10 ms / 100 ms / 1 s, read_committed vs "
                        "read_uncommitted, EndTxn latency), groups (rebalance 1→4 members, "
                        "OffsetCommit round trips), kafka (1 KB acks=1/acks=all/idempotent/txn 100ms "
                        "with librdkafka, the protocol-level producer and Kafka's own perf tools, plus the EndTxn "
                        "probe and the groups suite; run it with --targets including kafka, kafka+flush1), or all "
                        "(every suite but kafka). Cells of every selected suite are interleaved in "
                        "one matrix; the groups suite runs after them. With more than the produce suite, "
                        f"cells default to {FULL_MULTI['duration']:g} s produce / {FULL_MULTI['consume_seconds']:g} s "
                        "read-back")
    p.add_argument("--quick", action="store_true",
                   help=f"smoke run: {QUICK['duration']:g} s cells, {QUICK['rounds']} round (~30 s)")
    p.add_argument("--duration", type=float, help=f"seconds of producing per cell (default {FULL['duration']:g}, "
                                                  f"--quick {QUICK['duration']:g})")
    p.add_argument("--rounds", type=int, help=f"interleaved rounds over all cells (default {FULL['rounds']}, "
                                              f"--quick {QUICK['rounds']})")
    p.add_argument("--warmup", type=float, help="seconds of unrecorded producing per broker before round 1 "
                                                f"(default {FULL['warmup']:g}, --quick {QUICK['warmup']:g})")
    p.add_argument("--consume-seconds", type=float,
                   help="stop reading a cell back after this long (Python consumers read 100 B records "
                        f"several times slower than they are produced; default {FULL['consume_seconds']:g}, "
                        f"--quick {QUICK['consume_seconds']:g}; 0 = read everything)")
    p.add_argument("--processes", "-p", type=int, default=2, help="producer client processes")
    p.add_argument("--consumer-processes", type=int, help="consumer client processes (default: --processes)")
    p.add_argument("--partitions", type=int, default=3, help="partitions of each benchmark topic")
    p.add_argument("--sizes", default="100,1k", help="record value sizes in bytes (k = 1024) of the produce suite "
                                                     "(eos and txn use 1 KB)")
    p.add_argument("--modes", default=",".join(DEFAULT_MODES),
                   help=f"producer modes of the produce suite, of: {', '.join(MODES)} (eos and txn bring their own)")
    p.add_argument("--targets", default=",".join(DEFAULT_TARGETS),
                   help="brokers: tansu, oncelog-never, oncelog-always, oncelog-interval:MS; "
                        "oncelog-...@DIR runs the broker from the source tree DIR (old vs new side by side); "
                        "oncelog-<fsync>+PROTOCOL (+ssl, +sasl_plaintext, +sasl_ssl; before any @DIR) serves every "
                        "client of its cells (librdkafka and the wire-* modes alike) on a listener of that "
                        "security protocol: TLS with a CA and broker certificate made at run time (trustme), "
                        "SASL with SCRAM-SHA-512; with the same target without +PROTOCOL in the run, a "
                        "'PROTOCOL / PLAINTEXT' ratio row per size, mode and produce/consume is reported, e.g. "
                        "--targets oncelog-never,oncelog-never+ssl,oncelog-never+sasl_ssl")
    p.add_argument("--consume-split", choices=["all", "partitions"], default="all",
                   help="all: every consumer process reads every partition (records/s counts all "
                        "deliveries); partitions: the partitions are shared out round-robin")
    p.add_argument("--rate", type=int, default=0, help="records/s per librdkafka producer process (0 = as fast as possible)")
    p.add_argument("--wire-batch-records", type=int, default=960,
                   help="records per partition batch of the protocol-level producer (the wire-* modes); "
                        "960 x 1 KB is what librdkafka's batch.size of 1,000,000 bytes holds")
    p.add_argument("-X", "--producer-config", type=_kv, action="append", default=[], metavar="KEY=VALUE",
                   help="extra librdkafka producer setting for every mode (repeatable)")
    k = p.add_argument_group("Apache Kafka targets (kafka, kafka+flush1) and the java-* modes (bench/kafka.py)")
    k.add_argument("--kafka-config", type=_kv, action="append", default=[], metavar="KEY=VALUE",
                   help="extra server property of the Apache Kafka targets (repeatable), e.g. num.io.threads=8")
    k.add_argument("--java-config", type=_kv, action="append", default=[], metavar="KEY=VALUE",
                   help="extra Java producer property of the java-* modes (kafka-producer-perf-test "
                        "--command-property; repeatable), e.g. batch.size=1000000")
    p.add_argument("--work-dir", help="broker data and logs (default: a new directory under $TMPDIR)")
    p.add_argument("--keep-data", action="store_true", help="keep oncelog's data directories after the run")
    p.add_argument("--keep-topics", action="store_true", help="do not delete each cell's topic after reading it")
    p.add_argument("--json", metavar="PATH", help="write every figure (per round and pooled) here")
    g = p.add_argument_group("groups suite")
    g.add_argument("--rebalance-reps", type=int, help="repetitions of the 1→4 growth per broker (median reported; "
                                                      f"default {FULL['rebalance_reps']}, --quick {QUICK['rebalance_reps']})")
    g.add_argument("--group-members", type=int, default=4, help="members the group grows to")
    g.add_argument("--heartbeat-ms", type=int, default=100,
                   help="heartbeat.interval.ms of the group members: existing members learn of a rebalance "
                        "from a heartbeat, so this bounds how fast they rejoin (librdkafka's default is 3000)")
    g.add_argument("--session-timeout-ms", type=int, default=6000,
                   help="session.timeout.ms of the group members (6000 is Kafka's minimum; librdkafka's "
                        "default is 45000; Tansu 0.6.0 holds every join for about half of it)")
    g.add_argument("--fetch-wait-ms", type=int,
                   help="fetch.wait.max.ms of the group members (default: librdkafka's, 500)")
    g.add_argument("--commit-consumers", type=int, default=2,
                   help="group members (one process each) committing offsets synchronously")
    g.add_argument("--commit-seconds", type=float, help="seconds of committing per broker per round "
                                                        f"(default {FULL['commit_seconds']:g}, --quick {QUICK['commit_seconds']:g})")
    t = p.add_argument_group("txn suite")
    t.add_argument("--endtxn-count", type=int, help="one-record transactions per broker per round in the idle EndTxn "
                                                    f"probe (default {FULL['endtxn_count']}, --quick {QUICK['endtxn_count']}; 0 = skip)")
    return p


def parse_suites(text: str) -> list[str]:
    out = []
    for name in _csv(text):
        for s in (ALL_SUITES if name == "all" else [name]):
            if s not in SUITES:
                raise SystemExit(f"unknown suite {s!r}; known: {', '.join(SUITES)}, all")
            if s not in out:
                out.append(s)
    return [s for s in SUITES if s in out]


def options_from(args) -> Options:
    suites = parse_suites(args.suite)
    base = QUICK if args.quick else FULL_MULTI if suites != ["produce"] else FULL
    modes = []
    for name in _csv(args.modes):
        name = MODE_ALIASES.get(name, name)
        if name not in MODES:
            raise SystemExit(f"unknown mode {name!r}; known: {', '.join(MODES)}")
        modes.append(MODES[name])
    try:
        targets = [Target.parse(t) for t in _csv(args.targets)]
    except ValueError as exc:
        raise SystemExit(str(exc))
    sizes = [_size(s) for s in _csv(args.sizes)]
    matrix = [(size, mode) for size in sizes for mode in modes] if "produce" in suites else []
    for suite in ("eos", "txn", "kafka"):
        if suite in suites:
            matrix += [(EOS_SIZE, MODES[m]) for m in SUITE_MODES[suite]
                       if (EOS_SIZE, MODES[m]) not in matrix]
    groups = None
    if "groups" in suites or "kafka" in suites:
        groups = GroupOptions(repetitions=_pick(args.rebalance_reps, base["rebalance_reps"]),
                              members=args.group_members, heartbeat_ms=args.heartbeat_ms,
                              session_timeout_ms=args.session_timeout_ms, fetch_wait_ms=args.fetch_wait_ms,
                              commit_consumers=args.commit_consumers,
                              commit_seconds=_pick(args.commit_seconds, base["commit_seconds"]))
    endtxn = _pick(args.endtxn_count, base["endtxn_count"])
    return Options(
        targets=targets, modes=[m for _, m in matrix], sizes=sorted({s for s, _ in matrix}), matrix=matrix,
        suites=suites, groups=groups,
        txn_probe=TxnProbeOptions(count=endtxn) if ("txn" in suites or "kafka" in suites) and endtxn > 0 else None,
        duration=_pick(args.duration, base["duration"]), rounds=_pick(args.rounds, base["rounds"]),
        warmup=_pick(args.warmup, base["warmup"]), consume_seconds=_pick(args.consume_seconds, base["consume_seconds"]),
        processes=args.processes, consumer_processes=args.consumer_processes or args.processes,
        partitions=args.partitions, consume_split=args.consume_split, rate=args.rate,
        producer_config=dict(args.producer_config), keep_topics=args.keep_topics, java_config=dict(args.java_config),
        wire_batch_records=args.wire_batch_records,
    )


def _pick(value, default):
    return default if value is None else value


def _json_safe(x):
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return None
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    return x


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    opts = options_from(args)
    console = Console()
    if not console.is_terminal:  # logs and CI: do not wrap the table at 80 columns
        console = Console(width=max(console.width, 170))
    work_dir = args.work_dir or tempfile.mkdtemp(prefix="oncelog-bench-")
    os.makedirs(work_dir, exist_ok=True)
    meta = machine()
    meta["loadavg_start"] = _loadavg()
    t_run = time.monotonic()
    if any(t.kind == "tansu" for t in opts.targets):
        meta["tansu"] = tansu_version()
    console.print(f"[bold]oncelog bench[/bold]: {meta.get('cpu', '?')} × {meta['nproc']}, "
                  f"librdkafka {meta['librdkafka']}{', ' + meta['tansu'] if meta.get('tansu') else ''}; "
                  f"suites {', '.join(opts.suites)}; load average {meta['loadavg_start']}; work dir {work_dir}")

    brokers: dict[str, RunningBroker] = {}
    try:
        for t in opts.targets:
            b = brokers[t.name] = RunningBroker(t, work_dir, opts.partitions)
            b.kafka_config = dict(args.kafka_config)
            b.start()
            console.print(f"  {t.label} on {b.bootstrap} (log {b.log_path})")
            if b.settings:
                console.print(f"    {b.settings}")
                meta.setdefault("broker_settings", {})[t.name] = b.settings
        if any(m.java for _, m in opts.matrix):
            from . import kafka

            console.print(f"  java-* modes: Kafka's ProducerPerformance / ConsumerPerformance, -Xmx{kafka.CLIENT_HEAP} "
                          f"each, {opts.processes} / {opts.consumer_processes} processes")
        runner = Runner(opts, brokers, console)
        try:
            cells = runner.run()
        except KeyboardInterrupt:
            console.print("[yellow]interrupted: reporting the cells finished so far")
            cells = runner.cells
        meta["broker_restarts"] = runner.restarts
        rss = {name: b.rss_mb() for name, b in brokers.items()}
        meta["loadavg_end"] = _loadavg()
    finally:
        exits = {name: b.stop() for name, b in brokers.items()}
    meta["broker_exit_codes"] = exits
    meta["run_seconds"] = time.monotonic() - t_run
    meta["broker_rss_mb_at_end"] = rss
    logs = {name: scan_log(b.log_path) for name, b in brokers.items()}

    rows = summarize(cells, opts)
    comps = comparisons(cells, opts)
    secured = security_ratios(cells, opts)
    ratios = mode_ratios(cells, opts)
    txn_rows = (txn_latency(cells, opts, runner.txn_probe_results)
                if "txn" in opts.suites or "kafka" in opts.suites else [])
    group_rows = group_summary(runner.group_results, opts)
    supported = support(cells, opts, group_rows, runner.txn_probe_results)
    versus = kafka_ratios(cells, opts, txn_rows, group_rows)
    print_report(console, opts, rows, comps, logs, cells, ratios, txn_rows, group_rows, supported, secured, versus)
    console.print(f"load average (1/5/15 min): at start {meta['loadavg_start']}, at end {meta['loadavg_end']}; "
                  f"run took {meta['run_seconds']:.0f} s")
    if args.json:
        doc = _json_safe(to_json(opts, argv, meta, rows, comps, cells, logs, ratios, txn_rows, group_rows,
                                 runner.txn_probe_results, runner.group_results, supported, secured, versus))
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
        console.print(f"figures written to {args.json}")
    if not args.keep_data:
        for b in brokers.values():
            if b.data_dir():
                shutil.rmtree(b.data_dir(), ignore_errors=True)
    console.print(f"broker logs kept in {work_dir}")
    failed = any(c.errors for c in cells) or any(r["errors"] for r in runner.group_results + runner.txn_probe_results)
    return 0 if (cells or runner.group_results) and not failed else 1


def _loadavg() -> str:
    try:
        return " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "?"
