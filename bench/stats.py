"""Turn per-process worker reports into per-cell figures, and pool cells across rounds.

Throughput is records (or payload bytes) over wall time, where wall time spans from the first
process's start to the last process's end (for produce: the last delivery report after flush).
Pooling rounds sums records and seconds, i.e. a time-weighted mean. Latency percentiles are
nearest-rank over the pooled per-message samples.
"""

from __future__ import annotations

import math

MB = 1_000_000  # MB/s figures are decimal megabytes of record payload (values only)


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    k = max(0, min(len(sorted_values) - 1, math.ceil(q / 100 * len(sorted_values)) - 1))
    return sorted_values[k]


def produce_figures(reports: list[dict], size: int, cpu_s: float) -> dict:
    start = min(r["t_start"] for r in reports)
    end = max(r["t_end"] for r in reports)
    seconds = max(end - start, 1e-9)
    acked = sum(r["acked"] for r in reports)
    lats = sorted(x for r in reports for x in r["latencies"])
    p50, p99 = percentile(lats, 50) * 1000, percentile(lats, 99) * 1000
    reported = [r["reported_latency_ms"] for r in reports if r.get("reported_latency_ms")]
    if not lats and reported:  # Kafka's ProducerPerformance reports percentiles, not samples
        p50 = sum(x["p50"] for x in reported) / len(reported)
        p99 = max(x["p99"] for x in reported)
    return {
        "records": acked, "bytes": acked * size, "seconds": seconds,
        "records_per_s": acked / seconds, "mb_per_s": acked * size / seconds / MB,
        "latency_p50_ms": p50, "latency_p99_ms": p99,
        "latency_samples": lats,
        "acked_by_partition": _sum_by_partition(r["acked_by_partition"] for r in reports),
        "sent": sum(r["sent"] for r in reports), "failed": sum(r["failed"] for r in reports),
        "unflushed": sum(r["unflushed"] for r in reports),
        "transactions": sum(r["transactions"] for r in reports),
        "send_seconds": max(r["t_sent"] for r in reports) - start,
        # a perf tool's steady state is a part of its run: the CPU figures are over the whole run
        "written": sum(r.get("records_total", r["acked"]) for r in reports),
        "broker_cpu_s": cpu_s, "cpu_window_s": (window := max(seconds, *(r.get("seconds_total", 0) for r in reports))),
        "broker_cpu_pct": 100 * cpu_s / window,
        "broker_cpu_us_per_record": cpu_us_per_record(cpu_s, sum(r.get("records_total", r["acked"]) for r in reports)),
        **commit_figures(sorted(x for r in reports for x in r.get("commit_latencies", [])),
                         sorted(x for r in reports for x in r.get("endtxn_latencies", []))),
    }


def commit_figures(commit: list[float], endtxn: list[float]) -> dict:
    """Transaction commits (seconds, sorted): flush + commit_transaction(), and its EndTxn part."""
    if not commit:
        return {}
    return {"commit_latencies_ms": [x * 1000 for x in commit], "endtxn_latencies_ms": [x * 1000 for x in endtxn],
            "commits": len(commit), "commit_p50_ms": percentile(commit, 50) * 1000,
            "commit_p99_ms": percentile(commit, 99) * 1000, "endtxn_p50_ms": percentile(endtxn, 50) * 1000,
            "endtxn_p99_ms": percentile(endtxn, 99) * 1000}


def latency_figures(lats_s: list[float]) -> dict:
    """count, mean, p50, p99, max in ms of a list of durations in seconds."""
    lats = sorted(lats_s)
    if not lats:
        return {"count": 0}
    return {"count": len(lats), "mean_ms": sum(lats) / len(lats) * 1000, "p50_ms": percentile(lats, 50) * 1000,
            "p99_ms": percentile(lats, 99) * 1000, "max_ms": lats[-1] * 1000}


def median(values: list[float]) -> float:
    v = sorted(values)
    if not v:
        return float("nan")
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2


def _sum_by_partition(dicts) -> dict[int, int]:
    out: dict[int, int] = {}
    for d in dicts:
        for p, n in d.items():
            out[int(p)] = out.get(int(p), 0) + n
    return dict(sorted(out.items()))


def consume_figures(reports: list[dict], cpu_s: float) -> dict:
    start = min(r["t_start"] for r in reports)
    end = max(r["t_end"] for r in reports)
    seconds = max(end - start, 1e-9)
    got = sum(r["received"] for r in reports)
    nbytes = sum(r["bytes"] for r in reports)
    return {
        "records": got, "bytes": nbytes, "seconds": seconds,
        "records_per_s": got / seconds, "mb_per_s": nbytes / seconds / MB,
        "expected": sum(r["expected"] for r in reports), "errors": sum(r["errors"] for r in reports),
        "watermarks": [r["watermarks"] for r in reports],
        "timed_out": any(r["timed_out"] for r in reports), "capped": any(r["capped"] for r in reports),
        "broker_cpu_s": cpu_s, "broker_cpu_pct": 100 * cpu_s / seconds,
        "broker_cpu_us_per_record": cpu_us_per_record(cpu_s, got),
    }


def cpu_us_per_record(cpu_s: float, records: int) -> float:
    """Broker CPU time (all its threads) per record handled, in microseconds."""
    return cpu_s / records * 1e6 if records else float("nan")


def pool(figures: list[dict], *, latencies: bool) -> dict | None:
    """Pool one cell's figures over rounds (only rounds that produced figures)."""
    figures = [f for f in figures if f]
    if not figures:
        return None
    records = sum(f["records"] for f in figures)
    nbytes = sum(f["bytes"] for f in figures)
    seconds = sum(f["seconds"] for f in figures)
    cpu = sum(f["broker_cpu_s"] for f in figures)
    cpu_seconds = sum(f.get("cpu_window_s", f["seconds"]) for f in figures)
    out = {"rounds": len(figures), "records": records, "bytes": nbytes, "seconds": seconds,
           "records_per_s": records / seconds, "mb_per_s": nbytes / seconds / MB,
           "records_per_s_by_round": [f["records_per_s"] for f in figures],
           "broker_cpu_pct": 100 * cpu / cpu_seconds,
           "broker_cpu_us_per_record": cpu_us_per_record(cpu, sum(f.get("written", f["records"]) for f in figures)),
           "broker_cpu_us_per_record_by_round": [f.get("broker_cpu_us_per_record") for f in figures]}
    if latencies:
        lats = sorted(x for f in figures for x in f["latency_samples"])
        out["latency_p50_ms"] = percentile(lats, 50) * 1000
        out["latency_p99_ms"] = percentile(lats, 99) * 1000
        if not lats:  # reported percentiles only (Kafka's perf tool): median p50, worst p99 of the rounds
            out["latency_p50_ms"] = median([f["latency_p50_ms"] for f in figures])
            out["latency_p99_ms"] = max(f["latency_p99_ms"] for f in figures)
        out["latency_samples"] = len(lats)
        out["failed"] = sum(f.get("failed", 0) for f in figures)
        commits = sorted(x / 1000 for f in figures for x in f.get("commit_latencies_ms", []))
        endtxn = sorted(x / 1000 for f in figures for x in f.get("endtxn_latencies_ms", []))
        if commits:
            out.update({k: v for k, v in commit_figures(commits, endtxn).items() if not k.endswith("latencies_ms")})
    else:
        out["errors"] = sum(f.get("errors", 0) for f in figures)
    return out


def commit_rate_figures(reports: list[dict], cpu_s: float) -> dict:
    """Synchronous OffsetCommit round trips of several group members measured together."""
    start = min(r["t_start"] for r in reports)
    end = max(r["t_end"] for r in reports)
    seconds = max(end - start, 1e-9)
    commits = sum(r["commits"] for r in reports)
    lats = sorted(x for r in reports for x in r["latencies"])
    return {"commits": commits, "failed": sum(r["failed"] for r in reports), "seconds": seconds,
            "commits_per_s": commits / seconds, "members": len(reports),
            "per_member_per_s": [r["commits"] / max(r["t_end"] - r["t_start"], 1e-9) for r in reports],
            "committed_ok": all(r["committed"] == [r["last_offset"]] * len(r["partitions"]) for r in reports),
            "committed_check": [{"last_committed": r["last_offset"], "offset_fetch": r["committed"]} for r in reports],
            **{k: v for k, v in latency_figures(lats).items() if k != "count"},
            "latencies_ms": [x * 1000 for x in lats], "broker_cpu_s": cpu_s, "broker_cpu_pct": 100 * cpu_s / seconds}
