"""``python -m bench``: throughput and latency of oncelog against Tansu, side by side in one run."""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile

from rich.console import Console

from .brokers import RunningBroker, scan_log, tansu_version
from .modes import DEFAULT_MODES, DEFAULT_TARGETS, MODES, Target
from .report import comparisons, machine, print_report, summarize, to_json
from .runner import Options, Runner

# Defaults: 3 targets x 2 sizes x 2 modes = 12 cells a round; at ~7-8 s a cell (5 s produce,
# read-back, topic create/delete) two rounds take ~3-4 minutes. --quick: one round of 1 s cells.
FULL = {"duration": 5.0, "rounds": 2, "warmup": 2.0, "consume_seconds": 5.0}
QUICK = {"duration": 1.0, "rounds": 1, "warmup": 0.5, "consume_seconds": 1.0}


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
    p.add_argument("--sizes", default="100,1k", help="record value sizes in bytes (k = 1024)")
    p.add_argument("--modes", default=",".join(DEFAULT_MODES), help=f"producer modes, of: {', '.join(MODES)}")
    p.add_argument("--targets", default=",".join(DEFAULT_TARGETS),
                   help="brokers: tansu, oncelog-never, oncelog-always, oncelog-interval:MS")
    p.add_argument("--consume-split", choices=["all", "partitions"], default="all",
                   help="all: every consumer process reads every partition (records/s counts all "
                        "deliveries); partitions: the partitions are shared out round-robin")
    p.add_argument("--rate", type=int, default=0, help="records/s per producer process (0 = as fast as possible)")
    p.add_argument("-X", "--producer-config", type=_kv, action="append", default=[], metavar="KEY=VALUE",
                   help="extra librdkafka producer setting for every mode (repeatable)")
    p.add_argument("--work-dir", help="broker data and logs (default: a new directory under $TMPDIR)")
    p.add_argument("--keep-data", action="store_true", help="keep oncelog's data directories after the run")
    p.add_argument("--keep-topics", action="store_true", help="do not delete each cell's topic after reading it")
    p.add_argument("--json", metavar="PATH", help="write every figure (per round and pooled) here")
    return p


def options_from(args) -> Options:
    base = QUICK if args.quick else FULL
    modes = []
    for name in _csv(args.modes):
        if name not in MODES:
            raise SystemExit(f"unknown mode {name!r}; known: {', '.join(MODES)}")
        modes.append(MODES[name])
    try:
        targets = [Target.parse(t) for t in _csv(args.targets)]
    except ValueError as exc:
        raise SystemExit(str(exc))
    return Options(
        targets=targets, modes=modes, sizes=[_size(s) for s in _csv(args.sizes)],
        duration=args.duration if args.duration is not None else base["duration"],
        rounds=args.rounds if args.rounds is not None else base["rounds"],
        warmup=args.warmup if args.warmup is not None else base["warmup"],
        consume_seconds=args.consume_seconds if args.consume_seconds is not None else base["consume_seconds"],
        processes=args.processes, consumer_processes=args.consumer_processes or args.processes,
        partitions=args.partitions, consume_split=args.consume_split, rate=args.rate,
        producer_config=dict(args.producer_config), keep_topics=args.keep_topics,
    )


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
    if any(t.kind == "tansu" for t in opts.targets):
        meta["tansu"] = tansu_version()
    console.print(f"[bold]oncelog bench[/bold]: {meta.get('cpu', '?')} × {meta['nproc']}, "
                  f"librdkafka {meta['librdkafka']}, {meta.get('tansu', '')}; work dir {work_dir}")

    brokers: dict[str, RunningBroker] = {}
    try:
        for t in opts.targets:
            brokers[t.name] = RunningBroker(t, work_dir, opts.partitions).start()
            console.print(f"  {t.label} on {brokers[t.name].bootstrap} (log {brokers[t.name].log_path})")
        runner = Runner(opts, brokers, console)
        try:
            cells = runner.run()
        except KeyboardInterrupt:
            console.print("[yellow]interrupted: reporting the cells finished so far")
            cells = runner.cells
        meta["broker_restarts"] = runner.restarts
        rss = {name: b.rss_mb() for name, b in brokers.items()}
    finally:
        exits = {name: b.stop() for name, b in brokers.items()}
    meta["broker_exit_codes"] = exits
    meta["broker_rss_mb_at_end"] = rss
    logs = {name: scan_log(b.log_path) for name, b in brokers.items()}

    rows = summarize(cells, opts)
    comps = comparisons(cells, opts)
    print_report(console, opts, rows, comps, logs, cells)
    if args.json:
        doc = _json_safe(to_json(opts, argv, meta, rows, comps, cells, logs))
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
        console.print(f"figures written to {args.json}")
    if not args.keep_data:
        for b in brokers.values():
            if b.data_dir():
                shutil.rmtree(b.data_dir(), ignore_errors=True)
    console.print(f"broker logs kept in {work_dir}")
    return 0 if cells and not any(c.errors for c in cells) else 1
