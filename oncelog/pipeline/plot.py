"""The demo's picture: rows/s over time and, below, freshness (produce to read_committed
visibility, p50 and p95 per second), with the crashes marked (matplotlib, PNG)."""

from __future__ import annotations


def rates(samples: list[tuple[float, int, int]], t0: float, window: float = 2.0):
    """(t, produced/s, output rows/s) from cumulative samples, each rate over the last ``window`` s."""
    out = []
    j = 0
    for i, (t, produced, rows) in enumerate(samples):
        while j < i and t - samples[j][0] > window:
            j += 1
        if j == i:
            continue
        dt = t - samples[j][0]
        if dt <= 0:
            continue
        out.append((t - t0, (produced - samples[j][1]) / dt, (rows - samples[j][2]) / dt))
    return out


MARKS = {
    "driver-kill": ("tab:red", "-", "driver SIGKILL"),
    "broker-kill": ("tab:purple", "--", "broker SIGKILL"),
    "task-fault": ("tab:orange", ":", "task failure (retried)"),
    "driver-exit": ("tab:brown", "-.", "driver exited"),
    "recovered": ("tab:green", ":", "progress again"),
}


def plot(path: str, samples, t0: float, timeline: list[dict], *, title: str,
         latency: list[list[float]] | None = None) -> None:
    """``latency``: [second, p50 ms, p95 ms] rows (the report's ``freshness.series``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = rates(samples, t0)
    if latency:
        fig, (ax, lax) = plt.subplots(2, 1, figsize=(11, 7.2), dpi=110, sharex=True,
                                      gridspec_kw={"height_ratios": [3, 2]})
    else:
        fig, ax = plt.subplots(figsize=(11, 4.8), dpi=110)
        lax = None
    if series:
        ts = [s[0] for s in series]
        ax.plot(ts, [s[2] for s in series], color="tab:blue", lw=1.6, label="output rows/s (read_committed)")
        ax.plot(ts, [s[1] for s in series], color="tab:gray", lw=1.0, alpha=0.7,
                label="input events/s (committed)")
    if samples:
        # Cumulative counts on a second axis: each micro-batch's output appears at once (batch-
        # atomic commits), which the rate shows as spikes and the count as steps.
        ax2 = ax.twinx()
        ts = [t - t0 for t, _p, _r in samples]
        ax2.plot(ts, [r for _t, _p, r in samples], color="tab:blue", lw=0.8, ls="--", alpha=0.6,
                 label="output rows (cumulative)")
        ax2.plot(ts, [p for _t, p, _r in samples], color="tab:gray", lw=0.8, ls="--", alpha=0.6,
                 label="input events committed (cumulative)")
        ax2.set_ylabel("rows (cumulative)")
        ax2.set_ylim(bottom=0)
        ax2.legend(loc="upper right", fontsize=8, framealpha=0.85)
    labelled = set()
    for ev in timeline:
        mark = MARKS.get(ev["kind"])
        if mark is None:
            continue
        color, style, label = mark
        for a in (ax, lax) if lax is not None else (ax,):
            a.axvline(ev["t"], color=color, ls=style, lw=1.4 if ev["kind"] != "recovered" else 1.0,
                      label=None if label in labelled or a is lax else label)
        labelled.add(label)
    if lax is not None:
        # One point per second with output; a second without any breaks the line (NaN), so an
        # outage shows as a gap, not as a slope drawn across it.
        by_second = {row[0]: row for row in latency}
        seconds = range(min(by_second), max(by_second) + 1)
        ts = [sec + 0.5 for sec in seconds]
        nan = float("nan")
        for col, color, label in ((2, "tab:red", "p95"), (1, "tab:blue", "p50")):
            lax.plot(ts, [by_second[sec][col] / 1000 if sec in by_second else nan for sec in seconds],
                     color=color, lw=1.2, marker=".", ms=3, label=label)
        lax.set_yscale("log")
        lax.set_ylabel("seconds, produce to\nread_committed visibility")
        lax.grid(alpha=0.3, which="both")
        lax.legend(loc="upper left", fontsize=8, framealpha=0.85)
        lax.set_xlabel("seconds since start")
    else:
        ax.set_xlabel("seconds since start")
    ax.set_ylabel("rows per second")
    ax.set_title(title, fontsize=10)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8, framealpha=0.85)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
