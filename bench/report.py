"""Summaries, the rich results tables, and the JSON document."""

from __future__ import annotations

import math
import os
import platform
import subprocess
import sys

import confluent_kafka
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from . import stats
from .modes import BASE_PRODUCER, COMPARISONS, MODES, Comparison
from .runner import Cell, Options, size_label


def summarize(cells: list[Cell], opts: Options) -> list[dict]:
    """One row per (target, size, mode), pooled over rounds, in table order."""
    rows = []
    for size in opts.sizes:
        for mode in opts.modes:
            for target in opts.targets:
                mine = [c for c in cells if (c.target, c.size, c.mode) == (target.name, size, mode.name)]
                rows.append({
                    "target": target.name, "target_label": target.label, "size": size, "mode": mode.name,
                    "mode_label": mode.label,
                    "produce": stats.pool([c.produce for c in mine], latencies=True),
                    "consume": stats.pool([c.consume for c in mine], latencies=False),
                    "cells": len(mine), "cells_with_errors": sum(1 for c in mine if c.errors),
                })
    return rows


def _figure(cells: list[Cell], comp: Comparison, target: str) -> tuple[float | None, dict[int, float]]:
    """Pooled records/s of ``target`` for the comparison, and per-round figures."""
    mine = [c for c in cells if c.target == target and c.size == comp.size
            and (comp.mode is None or c.mode == comp.mode)]
    figs = [getattr(c, comp.metric) for c in mine]
    pooled = stats.pool(figs, latencies=False)
    by_round: dict[int, list] = {}
    for c in mine:
        f = getattr(c, comp.metric)
        if f:
            by_round.setdefault(c.round, []).append(f)
    per_round = {r: sum(f["records"] for f in fs) / sum(f["seconds"] for f in fs) for r, fs in by_round.items()}
    return (pooled["records_per_s"] if pooled else None), per_round


def comparisons(cells: list[Cell], opts: Options) -> list[dict]:
    names = {t.name for t in opts.targets}
    sizes = set(opts.sizes)
    modes = {m.name for m in opts.modes}
    out = []
    for comp in COMPARISONS:
        if comp.numerator not in names or comp.denominator not in names or comp.size not in sizes \
                or (comp.mode and comp.mode not in modes):
            continue
        num, num_rounds = _figure(cells, comp, comp.numerator)
        den, den_rounds = _figure(cells, comp, comp.denominator)
        ratio = num / den if num and den else None
        per_round = [num_rounds[r] / den_rounds[r] for r in sorted(num_rounds) if den_rounds.get(r)]
        out.append({"label": comp.label, "metric": comp.metric, "size": comp.size, "mode": comp.mode,
                    "numerator": comp.numerator, "denominator": comp.denominator,
                    "numerator_records_per_s": num, "denominator_records_per_s": den,
                    "ratio": ratio, "ratio_by_round": per_round, "goal": comp.goal,
                    "meets_goal": None if ratio is None or comp.goal is None else ratio >= comp.goal})
    return out


def _n(x, fmt: str = ",.0f") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return format(x, fmt)


def results_table(rows: list[dict], opts: Options) -> Table:
    t = Table(title=f"oncelog vs Tansu — {opts.processes} producer / {opts.consumer_processes} consumer "
                    f"processes, {opts.partitions} partitions, {opts.duration:g} s produce × {opts.rounds} round(s)",
              title_justify="left", header_style="bold")
    for col, just in [("broker", "left"), ("record", "right"), ("mode", "left"), ("produce rec/s", "right"),
                      ("MB/s", "right"), ("p50 ms", "right"), ("p99 ms", "right"), ("broker CPU", "right"),
                      ("consume rec/s", "right"), ("MB/s", "right"), ("broker CPU", "right"), ("errors", "right")]:
        t.add_column(col, justify=just)
    last_group = None
    for row in rows:
        group = (row["size"], row["mode"])
        if last_group is not None and group != last_group:
            t.add_section()
        last_group = group
        p, c = row["produce"] or {}, row["consume"] or {}
        err = row["cells_with_errors"]
        t.add_row(row["target_label"], size_label(row["size"]), row["mode_label"],
                  _n(p.get("records_per_s")), _n(p.get("mb_per_s"), ".1f"),
                  _n(p.get("latency_p50_ms"), ".1f"), _n(p.get("latency_p99_ms"), ".1f"),
                  _n(p.get("broker_cpu_pct"), ".0f") + "%" if p else "—",
                  _n(c.get("records_per_s")), _n(c.get("mb_per_s"), ".1f"),
                  _n(c.get("broker_cpu_pct"), ".0f") + "%" if c else "—",
                  f"[red]{err}/{row['cells']}[/red]" if err else "0")
    return t


def ratio_table(comps: list[dict]) -> Table:
    t = Table(title="oncelog / Tansu (records/s)", title_justify="left", header_style="bold")
    for col, just in [("comparison", "left"), ("oncelog rec/s", "right"), ("Tansu rec/s", "right"),
                      ("ratio", "right"), ("by round", "right"), ("target", "right"), ("meets", "center")]:
        t.add_column(col, justify=just)
    for c in comps:
        meets = {True: "[green]yes[/green]", False: "[red]no[/red]", None: "—"}[c["meets_goal"]]
        t.add_row(c["label"], _n(c["numerator_records_per_s"]), _n(c["denominator_records_per_s"]),
                  _n(c["ratio"], ".2f") + ("×" if c["ratio"] else ""),
                  " ".join(f"{r:.2f}" for r in c["ratio_by_round"]) or "—",
                  f"≥ {c['goal']:.1f}×" if c["goal"] else "—", meets)
    return t


def print_report(console: Console, opts: Options, rows, comps, logs: dict, cells: list[Cell]) -> None:
    console.print()
    console.print(results_table(rows, opts))
    if comps:
        console.print(ratio_table(comps))
    for name, scan in logs.items():
        colour = "green" if not scan["problem_lines"] else "yellow"
        console.print(f"[{colour}]broker log {name}: {scan['problem_lines']} warning/error line(s)[/{colour}] "
                      f"({escape(scan['path'])})")
        for line in scan["examples"]:
            console.print(f"    {escape(line)}")
    noted = [c for c in cells if c.notes]
    if noted:
        console.print(f"[cyan]{len(noted)} cell(s) with notes (figures still valid):")
        for c in noted[:10]:
            console.print(f"    r{c.round + 1} {c.target} {size_label(c.size)} {c.mode}: {escape(c.notes[0][:200])}"
                          + (f" (+{len(c.notes) - 1} more)" if len(c.notes) > 1 else ""))
    bad = [c for c in cells if c.errors]
    if bad:
        console.print(f"[yellow]{len(bad)} cell(s) reported client-side errors:")
        for c in bad[:10]:
            console.print(f"    r{c.round + 1} {c.target} {size_label(c.size)} {c.mode}: {escape(c.errors[0][:200])}"
                          + (f" (+{len(c.errors) - 1} more)" if len(c.errors) > 1 else ""))


def machine() -> dict:
    info = {"nproc": os.cpu_count(), "platform": platform.platform(), "python": sys.version.split()[0],
            "confluent_kafka": getattr(confluent_kafka, "__version__", None) or str(confluent_kafka.version()), "librdkafka": confluent_kafka.libversion()[0]}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            info["mem_gb"] = round(int(f.readline().split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    try:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        head = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
        info["oncelog_commit"] = head + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return info


def to_json(opts: Options, argv: list[str], meta: dict, rows, comps, cells: list[Cell], logs: dict) -> dict:
    return {
        "command": "python -m bench " + " ".join(argv),
        "machine": meta,
        "options": {"targets": [t.name for t in opts.targets], "modes": [m.to_json() for m in opts.modes],
                    "sizes": opts.sizes, "duration_s": opts.duration, "rounds": opts.rounds,
                    "producer_processes": opts.processes, "consumer_processes": opts.consumer_processes,
                    "partitions": opts.partitions, "consume_split": opts.consume_split,
                    "rate_per_process": opts.rate, "warmup_s": opts.warmup,
                    "consume_seconds_cap": opts.consume_seconds,
                    "base_producer_config": BASE_PRODUCER, "producer_config": opts.producer_config},
        "units": {"mb_per_s": "10^6 bytes of record values per second", "latency": "ms, produce() to delivery report"},
        "results": [{k: v for k, v in r.items()} for r in rows],
        "comparisons": comps,
        "cells": [c.to_json() for c in cells],
        "broker_logs": logs,
        "available_modes": sorted(MODES),
    }
