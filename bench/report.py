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
from .modes import BASE_PRODUCER, COMPARISONS, EOS_SIZE, MODE_RATIOS, MODES, security_comparisons
from .runner import Cell, Options, size_label


def summarize(cells: list[Cell], opts: Options) -> list[dict]:
    """One row per (target, size, mode), pooled over rounds, in table order."""
    rows = []
    for size, mode in opts.matrix:
        for target in opts.targets:
            mine = [c for c in cells if (c.target, c.size, c.mode) == (target.name, size, mode.name)]
            rows.append({
                "target": target.name, "target_label": target.label, "size": size, "mode": mode.name,
                "mode_label": mode.label,
                "produce": stats.pool([c.produce for c in mine], latencies=True),
                "consume": stats.pool([c.consume for c in mine], latencies=False),
                "reads": {iso: stats.pool([c.reads.get(iso) for c in mine], latencies=False)
                          for iso in mode.isolations} if len(mode.isolations) > 1 else None,
                "cells": len(mine), "cells_with_errors": sum(1 for c in mine if c.errors),
            })
    return rows


def _rate(cells: list[Cell], target: str, size: int, modes, figure) -> tuple[float | None, dict[int, float]]:
    """Pooled records/s over the cells of ``target``/``size``/``modes`` (every mode if empty),
    where ``figure(cell)`` picks the cell's figures; and the same per round."""
    mine = [c for c in cells if c.target == target and c.size == size and (not modes or c.mode in modes)]
    figs = [figure(c) for c in mine]
    pooled = stats.pool(figs, latencies=False)
    by_round: dict[int, list] = {}
    for c, f in zip(mine, figs):
        if f:
            by_round.setdefault(c.round, []).append(f)
    per_round = {r: sum(f["records"] for f in fs) / sum(f["seconds"] for f in fs) for r, fs in by_round.items()}
    return (pooled["records_per_s"] if pooled else None), per_round


def _ratio(num, num_rounds, den, den_rounds, goal) -> dict:
    ratio = num / den if num and den else None
    return {"numerator_records_per_s": num, "denominator_records_per_s": den, "ratio": ratio,
            "ratio_by_round": [num_rounds[r] / den_rounds[r] for r in sorted(num_rounds) if den_rounds.get(r)],
            "goal": goal, "meets_goal": None if ratio is None or goal is None else ratio >= goal}


def comparisons(cells: list[Cell], opts: Options) -> list[dict]:
    """The broker-vs-broker ratio rows (:data:`COMPARISONS`) whose brokers and modes were run."""
    return _comparison_rows(COMPARISONS, cells, opts)


def security_ratios(cells: list[Cell], opts: Options) -> list[dict]:
    """Each ``+<protocol>`` target over the same broker on PLAINTEXT, per size, mode and metric
    (:func:`bench.modes.security_comparisons`)."""
    return _comparison_rows(security_comparisons(opts.targets, opts.matrix), cells, opts)


def _comparison_rows(comparisons_: list, cells: list[Cell], opts: Options) -> list[dict]:
    names = {t.name for t in opts.targets}
    run = {(size, mode.name) for size, mode in opts.matrix}
    out = []
    for comp in comparisons_:
        if comp.numerator not in names or comp.denominator not in names \
                or not all((comp.size, m) in run for m in comp.modes) \
                or not any(size == comp.size for size, _ in run):
            continue
        figure = (lambda c: c.produce) if comp.metric == "produce" else (lambda c: c.consume)
        num, num_rounds = _rate(cells, comp.numerator, comp.size, comp.modes, figure)
        den, den_rounds = _rate(cells, comp.denominator, comp.size, comp.modes, figure)
        out.append({"label": comp.label, "metric": comp.metric, "size": comp.size, "modes": list(comp.modes),
                    "numerator": comp.numerator, "denominator": comp.denominator,
                    **_ratio(num, num_rounds, den, den_rounds, comp.goal)})
    return out


def _pooled(cells: list[Cell], target: str, size: int, mode: str, figure) -> tuple[dict | None, dict[int, dict]]:
    mine = [c for c in cells if (c.target, c.size, c.mode) == (target, size, mode)]
    by_round = {c.round: figure(c) for c in mine if figure(c)}
    return stats.pool(list(by_round.values()), latencies=False), by_round


def kafka_ratios(cells: list[Cell], opts: Options, txn_rows: list[dict] | None = None,
                 group_rows: list[dict] | None = None) -> list[dict]:
    """oncelog beside Apache Kafka: for each pair of :data:`bench.kafka.PAIRS`
    in the run (oncelog --fsync never / Kafka's default; --fsync always / flush.messages=1), per
    record size and mode, produce and every read-back isolation level: records/s and broker CPU
    per record of both and their ratios oncelog/Kafka (goals: throughput ≥ 1.0×, CPU per record
    ≤ 1.5×); then the EndTxn probe, the rebalance and the offset commits side by side."""
    from .kafka import PAIRS

    names = {t.name for t in opts.targets}
    out = []
    for ours, theirs in PAIRS.items():
        if ours not in names or theirs not in names:
            continue
        for size, mode in opts.matrix:
            metrics = [("produce", lambda c: c.produce)]
            metrics += [(f"consume {iso}" if len(mode.isolations) > 1 else "consume",
                         (lambda i: lambda c: c.reads.get(i))(iso)) for iso in mode.isolations]
            for metric, figure in metrics:
                a, a_rounds = _pooled(cells, ours, size, mode.name, figure)
                b, b_rounds = _pooled(cells, theirs, size, mode.name, figure)
                rate = _ratio(a and a["records_per_s"], {r: f["records_per_s"] for r, f in a_rounds.items()},
                              b and b["records_per_s"], {r: f["records_per_s"] for r, f in b_rounds.items()}, 1.0)
                cpu_a = a["broker_cpu_us_per_record"] if a else None
                cpu_b = b["broker_cpu_us_per_record"] if b else None
                cpu_ratio = cpu_a / cpu_b if cpu_a and cpu_b and not math.isnan(cpu_a) and not math.isnan(cpu_b) else None
                out.append({"kind": "throughput", "oncelog": ours, "kafka": theirs, "size": size, "mode": mode.name,
                            "mode_label": mode.label, "metric": metric, **rate,
                            "oncelog_cpu_us_per_record": cpu_a, "kafka_cpu_us_per_record": cpu_b,
                            "cpu_ratio": cpu_ratio, "cpu_goal": 1.5,
                            "cpu_meets_goal": None if cpu_ratio is None else cpu_ratio <= 1.5,
                            "oncelog_cpu_pct": a["broker_cpu_pct"] if a else None,
                            "kafka_cpu_pct": b["broker_cpu_pct"] if b else None})
        latency = []
        for r in txn_rows or []:
            if r["kind"] == "idle probe" and r["target"] in (ours, theirs):
                latency.append(("EndTxn p50 ms (idle probe, 1-record txns)", r["target"], r.get("p50_ms")))
                latency.append(("EndTxn p99 ms (idle probe)", r["target"], r.get("p99_ms")))
            elif r["kind"] == "under load" and r["target"] in (ours, theirs):
                latency.append((f"EndTxn p50 ms under load, {r['mode_label']}", r["target"], r.get("p50_ms")))
        for g in group_rows or []:
            if g["target"] in (ours, theirs):
                latency.append((f"rebalance →{opts.groups.members} members, median ms", g["target"],
                                g["rebalance_median_s"] * 1000 if g["rebalance_median_s"] == g["rebalance_median_s"]
                                else None))
                latency.append(("offset commits/s (synchronous)", g["target"], g["commits_per_s"]))
        for label in dict.fromkeys(x[0] for x in latency):
            va = next((v for l, t, v in latency if l == label and t == ours), None)
            vb = next((v for l, t, v in latency if l == label and t == theirs), None)
            out.append({"kind": "latency", "oncelog": ours, "kafka": theirs, "metric": label,
                        "oncelog_value": va, "kafka_value": vb,
                        "ratio": va / vb if va is not None and vb else None})
    return out


def mode_ratios(cells: list[Cell], opts: Options) -> list[dict]:
    """The within-broker ratio rows (:data:`MODE_RATIOS`) whose modes were run, per broker."""
    run = {mode.name for size, mode in opts.matrix if size == EOS_SIZE}
    out = []
    for mr in MODE_RATIOS:
        if mr.numerator not in run or mr.denominator not in run:
            continue
        for target in opts.targets:
            if mr.metric == "produce":
                num, num_rounds = _rate(cells, target.name, EOS_SIZE, (mr.numerator,), lambda c: c.produce)
                den, den_rounds = _rate(cells, target.name, EOS_SIZE, (mr.denominator,), lambda c: c.produce)
            else:
                iso_num, iso_den = mr.isolations
                num, num_rounds = _rate(cells, target.name, EOS_SIZE, (mr.numerator,), lambda c: c.reads.get(iso_num))
                den, den_rounds = _rate(cells, target.name, EOS_SIZE, (mr.denominator,), lambda c: c.reads.get(iso_den))
            out.append({"suite": mr.suite, "label": mr.label, "metric": mr.metric, "target": target.name,
                        "target_label": target.label, "numerator": mr.numerator, "denominator": mr.denominator,
                        "isolations": list(mr.isolations) if mr.isolations else None,
                        "reference": mr.reference, **_ratio(num, num_rounds, den, den_rounds, mr.goal)})
    return out


def txn_latency(cells: list[Cell], opts: Options, probe: list[dict]) -> list[dict]:
    """EndTxn latency per broker: commit_transaction() durations inside the txn cells (under
    load, including the flush of the transaction's queued records) and from the idle probe."""
    out = []
    for size, mode in opts.matrix:
        if not mode.txn_commit_ms:
            continue
        for target in opts.targets:
            mine = [c.produce for c in cells if (c.target, c.size, c.mode) == (target.name, size, mode.name)
                    and c.produce]
            commit = [x / 1000 for p in mine for x in p.get("commit_latencies_ms", [])]
            endtxn = [x / 1000 for p in mine for x in p.get("endtxn_latencies_ms", [])]
            out.append({"kind": "under load", "mode": mode.name, "mode_label": mode.label, "size": size,
                        "target": target.name, "target_label": target.label,
                        "transactions_per_s": (sum(p["transactions"] for p in mine) / sum(p["seconds"] for p in mine)
                                               if mine else None),
                        "commit": stats.latency_figures(commit), **stats.latency_figures(endtxn)})
    for target in opts.targets:
        rows = [r for r in probe if r["target"] == target.name]
        if not rows:
            continue
        lats = sorted(x / 1000 for r in rows for x in r.get("latencies_ms", []))
        out.append({"kind": "idle probe", "mode": None, "mode_label": "1-record txns", "size": 1024,
                    "target": target.name, "target_label": target.label, "transactions_per_s": None, "commit": None,
                    "errors": [e for r in rows for e in r["errors"]], **stats.latency_figures(lats)})
    return out


def group_summary(results: list[dict], opts: Options) -> list[dict]:
    """Per broker: median time of each growth step over the repetitions, and commit figures
    pooled over rounds."""
    out = []
    if not opts.groups:
        return out
    for target in opts.targets:
        reb = [r for r in results if r["target"] == target.name and r["kind"] == "rebalance"]
        com = [r for r in results if r["target"] == target.name and r["kind"] == "commits"]
        setup = [e for r in results if r["target"] == target.name and r["kind"] == "setup" for e in r["errors"]]
        steps = {}
        for k in range(1, opts.groups.members + 1):
            mine = [s for r in reb for s in r["steps"] if s["members"] == k]
            times = [s["seconds"] for s in mine]
            steps[k] = {"median_s": stats.median(times), "all_s": times,
                        "notice_median_s": stats.median([s["notice_s"] for s in mine if s.get("notice_s") is not None]),
                        "rejoin_median_s": stats.median([s["rejoin_s"] for s in mine if s.get("rejoin_s") is not None])}
        states = sorted({f"{s['state']}/{s['described_members']}" for r in reb for s in r["steps"]
                         if s["members"] == opts.groups.members})
        ok = [r for r in com if "commits_per_s" in r]
        commits = sum(r["commits"] for r in ok)
        seconds = sum(r["seconds"] for r in ok)
        out.append({
            "target": target.name, "target_label": target.label, "steps": steps,
            "rebalance_median_s": steps[opts.groups.members]["median_s"],
            "rebalance_s": steps[opts.groups.members]["all_s"],
            "repetitions": len(reb), "rebalance_errors": [e for r in reb for e in r["errors"]] + setup,
            "late_events": [e for r in reb for e in r.get("late_events", [])],
            "final_state": states,
            "commits_per_s": commits / seconds if seconds else None,
            "commits_per_s_by_round": [r["commits_per_s"] for r in ok],
            **{f"commit_{k}": v for k, v in stats.latency_figures(
                [x / 1000 for r in ok for x in r["latencies_ms"]]).items()},
            "commit_broker_cpu_pct": (100 * sum(r["broker_cpu_s"] for r in ok) / seconds) if seconds else None,
            "committed_ok": all(r["committed_ok"] for r in ok) if ok else None,
            "commit_errors": [e for r in com for e in r["errors"]] + setup,
        })
    return out


def _n(x, fmt: str = ",.0f") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return format(x, fmt)


def results_table(rows: list[dict], opts: Options) -> Table:
    t = Table(title=f"Results — {opts.processes} producer / {opts.consumer_processes} consumer "
                    f"processes, {opts.partitions} partitions, {opts.duration:g} s produce × {opts.rounds} round(s)",
              title_justify="left", header_style="bold")
    for col, just in [("broker", "left"), ("record", "right"), ("mode", "left"), ("produce rec/s", "right"),
                      ("MB/s", "right"), ("p50 ms", "right"), ("p99 ms", "right"), ("broker CPU", "right"),
                      ("µs/rec", "right"), ("consume rec/s", "right"), ("MB/s", "right"), ("broker CPU", "right"),
                      ("µs/rec", "right"), ("errors", "right")]:
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
                  _n(p.get("broker_cpu_pct"), ".0f") + "%" if p else "—", _n(p.get("broker_cpu_us_per_record"), ".2f"),
                  _n(c.get("records_per_s")), _n(c.get("mb_per_s"), ".1f"),
                  _n(c.get("broker_cpu_pct"), ".0f") + "%" if c else "—", _n(c.get("broker_cpu_us_per_record"), ".2f"),
                  f"[red]{err}/{row['cells']}[/red]" if err else "0")
    return t


def ratio_table(comps: list[dict], title: str = "oncelog / Tansu (records/s)",
                numerator: str = "oncelog", denominator: str = "Tansu") -> Table:
    t = Table(title=title, title_justify="left", header_style="bold")
    for col, just in [("comparison", "left"), (f"{numerator} rec/s", "right"), (f"{denominator} rec/s", "right"),
                      ("ratio", "right"), ("by round", "right"), ("target", "right"), ("meets", "center")]:
        t.add_column(col, justify=just)
    for c in comps:
        meets = {True: "[green]yes[/green]", False: "[red]no[/red]", None: "—"}[c["meets_goal"]]
        t.add_row(c["label"], _n(c["numerator_records_per_s"]), _n(c["denominator_records_per_s"]),
                  _n(c["ratio"], ".2f") + ("×" if c["ratio"] else ""),
                  " ".join(f"{r:.2f}" for r in c["ratio_by_round"]) or "—",
                  f"≥ {c['goal']:.1f}×" if c["goal"] else "—", meets)
    return t


def kafka_table(rows: list[dict]) -> Table:
    t = Table(title="oncelog / Apache Kafka: records/s and broker CPU per record (all the broker's "
                    "threads) side by side; goals: throughput ≥ 1.0×, CPU per record ≤ 1.5×",
              title_justify="left", header_style="bold",
              caption="Pairs: oncelog --fsync never with Kafka's default (no fsync per ack); oncelog --fsync always "
                      "with Kafka log.flush.interval.messages=1 (an fsync per append). Ratios are oncelog/Kafka "
                      "of pooled rates; 'by round' per interleaved round.", caption_justify="left")
    for col, just in [("pair", "left"), ("record", "right"), ("mode", "left"), ("metric", "left"),
                      ("oncelog rec/s", "right"), ("Kafka rec/s", "right"), ("ratio", "right"), ("by round", "right"),
                      ("oncelog µs/rec", "right"), ("Kafka µs/rec", "right"), ("CPU ratio", "right"),
                      ("meets", "center")]:
        t.add_column(col, justify=just)
    last = None
    for r in rows:
        if r["kind"] != "throughput":
            continue
        pair = f"{r['oncelog'].removeprefix('oncelog-')}/{r['kafka']}"
        if last is not None and (r["oncelog"], r["mode"]) != last:
            t.add_section()
        last = (r["oncelog"], r["mode"])
        both = [x for x in (r["meets_goal"], r["cpu_meets_goal"]) if x is not None]
        t.add_row(pair, size_label(r["size"]), r["mode_label"], r["metric"],
                  _n(r["numerator_records_per_s"]), _n(r["denominator_records_per_s"]),
                  _n(r["ratio"], ".2f") + ("×" if r["ratio"] else ""),
                  " ".join(f"{x:.2f}" for x in r["ratio_by_round"]) or "—",
                  _n(r["oncelog_cpu_us_per_record"], ".2f"), _n(r["kafka_cpu_us_per_record"], ".2f"),
                  _n(r["cpu_ratio"], ".2f") + ("×" if r["cpu_ratio"] else ""),
                  _meets(all(both) if both else None) if len(both) == 2 else _meets(None))
    return t


def kafka_latency_table(rows: list[dict]) -> Table:
    t = Table(title="oncelog / Apache Kafka: transactions and groups (lower ms is better)", title_justify="left",
              header_style="bold")
    for col, just in [("pair", "left"), ("figure", "left"), ("oncelog", "right"), ("Kafka", "right"), ("ratio", "right")]:
        t.add_column(col, justify=just)
    for r in rows:
        if r["kind"] == "latency":
            t.add_row(f"{r['oncelog'].removeprefix('oncelog-')}/{r['kafka']}", r["metric"],
                      _n(r["oncelog_value"], ",.2f"), _n(r["kafka_value"], ",.2f"),
                      _n(r["ratio"], ".2f") + ("×" if r["ratio"] else ""))
    return t


def _meets(flag) -> str:
    return {True: "[green]yes[/green]", False: "[red]no[/red]", None: "—"}[flag]


def mode_ratio_table(ratios: list[dict]) -> Table:
    t = Table(title="Within each broker: EOS mode ratios, 1 KB records/s (idempotence, "
                    "transactions)", title_justify="left", header_style="bold")
    for col, just in [("ratio", "left"), ("broker", "left"), ("numerator rec/s", "right"),
                      ("denominator rec/s", "right"), ("ratio", "right"), ("by round", "right"), ("target", "right"),
                      ("meets", "center"), ("published", "left")]:
        t.add_column(col, justify=just)
    last = None
    for r in ratios:
        if last is not None and r["label"] != last:
            t.add_section()
        t.add_row(r["label"] if r["label"] != last else "", r["target_label"], _n(r["numerator_records_per_s"]),
                  _n(r["denominator_records_per_s"]), _n(r["ratio"], ".2f") + ("×" if r["ratio"] else ""),
                  " ".join(f"{x:.2f}" for x in r["ratio_by_round"]) or "—",
                  f"≥ {r['goal']:.2f}×" if r["goal"] else "—", _meets(r["meets_goal"]), r["reference"])
        last = r["label"]
    return t


def txn_latency_table(rows: list[dict]) -> Table:
    t = Table(title="EndTxn latency: commit_transaction() after an explicit flush() = the EndTxn round "
                    "trip; 'flush + commit' = what a plain commit_transaction() waits under load",
              title_justify="left", header_style="bold")
    for col, just in [("broker", "left"), ("transactions", "left"), ("txn/s", "right"), ("commits", "right"),
                      ("EndTxn p50 ms", "right"), ("p99 ms", "right"), ("max ms", "right"),
                      ("flush + commit p50 ms", "right"), ("p99 ms", "right"), ("errors", "left")]:
        t.add_column(col, justify=just)
    last = None
    for r in rows:
        key = (r["kind"], r["mode"])
        if last is not None and key != last:
            t.add_section()
        last = key
        what = f"{r['mode_label']}, {r['kind']}"
        errs = r.get("errors") or []
        c = r.get("commit") or {}
        t.add_row(r["target_label"], what, _n(r["transactions_per_s"], ",.1f"), _n(r.get("count")),
                  _n(r.get("p50_ms"), ".2f"), _n(r.get("p99_ms"), ".2f"), _n(r.get("max_ms"), ".1f"),
                  _n(c.get("p50_ms"), ".1f"), _n(c.get("p99_ms"), ".1f"),
                  f"[red]{escape(errs[0][:60])}[/red]" if errs else "")
    return t


def groups_table(rows: list[dict], opts: Options) -> Table:
    g = opts.groups
    last = g.members
    t = Table(title=f"Consumer groups, rebalance: a group growing 1→{last} confluent-kafka consumers (one "
                    f"thread each; heartbeat.interval.ms={g.heartbeat_ms}, session.timeout.ms={g.session_timeout_ms}"
                    f"{f', fetch.wait.max.ms={g.fetch_wait_ms}' if g.fetch_wait_ms is not None else ''}; eager range "
                    f"assignor; {last} partitions); median of "
                    f"{g.repetitions}, in ms",
              title_justify="left", header_style="bold",
              caption=f"A step: from the new member's subscribe() until every member holds its new assignment and "
                      f"DescribeGroups says Stable. 'noticed': until the last existing member learnt of the "
                      f"rebalance (its revoke, after a Heartbeat answered REBALANCE_IN_PROGRESS: librdkafka 2.16 "
                      f"heartbeats about every 0.5 s in steady state, whatever heartbeat.interval.ms below that); "
                      f"'rejoin+sync': from then until all were assigned (the JoinGroup/SyncGroup round).",
              caption_justify="left")
    cols = [("broker", "left"), ("first join", "right")] + [(f"→{k}", "right") for k in range(2, last + 1)] \
        + [(f"→{last} each repetition", "right"), (f"→{last} noticed", "right"), (f"→{last} rejoin+sync", "right"),
           ("group after", "left"), ("errors", "left")]
    for col, just in cols:
        t.add_column(col, justify=just)
    for r in rows:
        errs = r["rebalance_errors"]
        t.add_row(r["target_label"],
                  *[_n(r["steps"][k]["median_s"] * 1000 if r["steps"][k]["all_s"] else None, ",.0f")
                    for k in range(1, last + 1)],
                  " ".join(f"{x * 1000:,.0f}" for x in r["rebalance_s"]) or "—",
                  _n(r["steps"][last]["notice_median_s"] * 1000, ",.0f"),
                  _n(r["steps"][last]["rejoin_median_s"] * 1000, ",.1f"),
                  ", ".join(r["final_state"]) or "—",
                  f"[red]{len(errs)}: {escape(errs[0][:80])}[/red]" if errs else "0")
    return t


def commits_table(rows: list[dict], opts: Options) -> Table:
    g = opts.groups
    t = Table(title=f"Consumer groups, OffsetCommit round trips: {g.commit_consumers} members of one group "
                    f"(one process each, {g.commit_consumers} partitions each), each commit(asynchronous=False) of "
                    f"its partitions in a loop for {g.commit_seconds:g} s × {opts.rounds} round(s)",
              title_justify="left", header_style="bold")
    for col, just in [("broker", "left"), ("commits/s", "right"), ("by round", "right"), ("p50 ms", "right"),
                      ("p99 ms", "right"), ("max ms", "right"), ("broker CPU", "right"), ("OffsetFetch check", "left"),
                      ("errors", "left")]:
        t.add_column(col, justify=just)
    for r in rows:
        errs = r["commit_errors"]
        t.add_row(r["target_label"], _n(r["commits_per_s"]),
                  " ".join(f"{x:,.0f}" for x in r["commits_per_s_by_round"]) or "—",
                  _n(r.get("commit_p50_ms"), ".2f"), _n(r.get("commit_p99_ms"), ".2f"), _n(r.get("commit_max_ms"), ".1f"),
                  _n(r["commit_broker_cpu_pct"], ".0f") + "%" if r["commit_broker_cpu_pct"] is not None else "—",
                  {True: "last offsets read back", False: "[red]MISMATCH[/red]", None: "—"}[r["committed_ok"]],
                  f"[red]{len(errs)}: {escape(errs[0][:80])}[/red]" if errs else "0")
    return t


def print_report(console: Console, opts: Options, rows, comps, logs: dict, cells: list[Cell],
                 ratios: list[dict] | None = None, txn_rows: list[dict] | None = None,
                 group_rows: list[dict] | None = None, supported: list[dict] | None = None,
                 security_rows: list[dict] | None = None, kafka_rows: list[dict] | None = None) -> None:
    console.print()
    if rows:
        console.print(results_table(rows, opts))
    if comps:
        console.print(ratio_table(comps))
    if security_rows:
        console.print(ratio_table(security_rows, "Security protocols: the same broker over PLAINTEXT (records/s; "
                                                 "TLS rows: the goal is < 30% cost)", "secured", "PLAINTEXT"))
    if ratios:
        console.print(mode_ratio_table(ratios))
    if txn_rows:
        console.print(txn_latency_table(txn_rows))
    if group_rows:
        console.print(groups_table(group_rows, opts))
        console.print(commits_table(group_rows, opts))
        for r in group_rows:
            for line in group_notes(r, opts):
                console.print(f"  {escape(r['target_label'])}: {escape(line)}")
    if kafka_rows:
        console.print(kafka_table(kafka_rows))
        if any(r["kind"] == "latency" for r in kafka_rows):
            console.print(kafka_latency_table(kafka_rows))
    if supported and any(r["features"] for r in supported):
        console.print("[bold]EOS features in this run[/bold]")
        for r in supported:
            for name, text in r["features"].items():
                colour = "red" if "FAILED" in text else "green"
                console.print(f"  {escape(r['target_label']):<22} {name}: [{colour}]{escape(text)}[/{colour}]")
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


def support(cells: list[Cell], opts: Options, group_rows: list[dict], probe: list[dict]) -> list[dict]:
    """Per broker: did the EOS features work in this run (idempotent producer, transactions,
    consumer groups)? A feature that failed is reported with its first error, not as a figure."""
    out = []
    modes = {m.name: m for _, m in opts.matrix}
    for target in opts.targets:
        row = {"target": target.name, "target_label": target.label, "features": {}}
        mine = [c for c in cells if c.target == target.name and c.mode in modes]
        idem = [c for c in mine if modes[c.mode].producer.get("enable.idempotence") and not modes[c.mode].txn_commit_ms]
        txn = [c for c in mine if modes[c.mode].txn_commit_ms]
        for name, group in (("idempotent producer", idem), ("transactions", txn)):
            if not group:
                continue
            ok = [c for c in group if c.produce and c.produce["records"] and not c.errors]
            text = f"{'works' if len(ok) == len(group) else 'FAILED'} in {len(ok)}/{len(group)} cells"
            if name == "transactions":
                text += f", {sum(c.produce['transactions'] for c in ok if c.produce)} transactions committed"
                full = sum(1 for c in ok for r in c.reads.values() if r["records"] == r["expected"])
                text += f"; {full}/{2 * len(ok)} read-backs got every acknowledged record (others capped by time)"
                perr = [e for r in probe if r["target"] == target.name for e in r["errors"]]
                if perr:
                    text += f"; EndTxn probe failed: {perr[0][:120]}"
            bad = [c for c in group if c.errors]
            if bad:
                text += f"; first error: {bad[0].errors[0][:160]}"
            row["features"][name] = text
        g = next((r for r in group_rows if r["target"] == target.name), None)
        if g is not None:
            complete = len(g["steps"][opts.groups.members]["all_s"])
            text = (f"{'works' if complete == g['repetitions'] and g['commits_per_s'] else 'FAILED'}: "
                    f"{complete}/{g['repetitions']} growths to {opts.groups.members} members completed, offset "
                    f"commits {'measured' if g['commits_per_s'] else 'NOT measured'}")
            errs = g["rebalance_errors"] + g["commit_errors"]
            if errs:
                text += f"; first error: {errs[0][:160]}"
            row["features"]["consumer groups"] = text
        out.append(row)
    return out


def group_notes(row: dict, opts: Options) -> list[str]:
    """What a reader should know about one broker's group figures (support, oddities)."""
    out = []
    if row["repetitions"] and not any(row["steps"][k]["all_s"] for k in row["steps"]):
        out.append("rebalance NOT measured: " + (row["rebalance_errors"][0] if row["rebalance_errors"] else "no steps"))
    elif row["rebalance_errors"]:
        out.append(f"{len(row['rebalance_errors'])} rebalance error(s), first: {row['rebalance_errors'][0][:160]}")
    for state in row["final_state"]:
        name, _, members = state.partition("/")
        if name == "STABLE" and members != str(opts.groups.members):
            out.append(f"DescribeGroups says Stable but lists {members} member(s), not {opts.groups.members} "
                       f"(Stable taken from the state; the assignments show all {opts.groups.members})")
    if row["late_events"]:
        out.append(f"assignments moved again after a step settled: {row['late_events'][0]}")
    if row["commits_per_s"] is None and row["commit_errors"]:
        out.append("offset commits NOT measured: " + row["commit_errors"][0][:160])
    elif row["commit_errors"]:
        out.append(f"{len(row['commit_errors'])} commit error(s), first: {row['commit_errors'][0][:160]}")
    if row["committed_ok"] is False:
        out.append("OffsetFetch after the run did not return the last committed offsets")
    return out


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


def to_json(opts: Options, argv: list[str], meta: dict, rows, comps, cells: list[Cell], logs: dict,
            ratios=None, txn_rows=None, group_rows=None, probe=None, group_results=None, supported=None,
            security_rows=None, kafka_rows=None) -> dict:
    return {
        "command": "python -m bench " + " ".join(argv),
        "machine": meta,
        "options": {"suites": opts.suites, "targets": [t.name for t in opts.targets],
                    "target_security": {t.name: t.security for t in opts.targets},
                    "modes": [m.to_json() for m in {m.name: m for _, m in opts.matrix}.values()],
                    "matrix": [[size, mode.name] for size, mode in opts.matrix],
                    "groups": vars(opts.groups) if opts.groups else None,
                    "txn_probe": vars(opts.txn_probe) if opts.txn_probe else None,
                    "sizes": sorted({size for size, _ in opts.matrix}), "duration_s": opts.duration, "rounds": opts.rounds,
                    "producer_processes": opts.processes, "consumer_processes": opts.consumer_processes,
                    "partitions": opts.partitions, "consume_split": opts.consume_split,
                    "rate_per_process": opts.rate, "warmup_s": opts.warmup,
                    "consume_seconds_cap": opts.consume_seconds,
                    "base_producer_config": BASE_PRODUCER, "producer_config": opts.producer_config,
                    "java_config": opts.java_config},
        "units": {"mb_per_s": "10^6 bytes of record values per second", "latency": "ms, produce() to delivery report",
                  "broker_cpu_us_per_record": "broker process CPU time (user+system, all threads) per record, µs"},
        "results": [{k: v for k, v in r.items()} for r in rows],
        "comparisons": comps,
        "security_ratios": security_rows or [],
        "kafka_ratios": kafka_rows or [],
        "mode_ratios": ratios or [],
        "txn_latency": txn_rows or [],
        "txn_probe": probe or [],
        "groups": group_rows or [],
        "support": supported or [],
        # (the per-commit latencies of the commit runs are pooled into "groups"; not repeated here)
        "group_runs": [{k: v for k, v in r.items() if k != "latencies_ms"} for r in group_results or []],
        "cells": [c.to_json() for c in cells],
        "broker_logs": logs,
        "available_modes": sorted(MODES),
    }
