"""``oncelog chaos``: options, the run, the anomaly table and the exit code (0 only with none)."""

from __future__ import annotations

import argparse
import json
import os
import sys

from . import nemesis as nem

DESCRIPTION = (
    "A Jepsen-class test of Kafka semantics: idempotent and transactional producers (some "
    "transactions aborted on purpose), read_committed consumers in groups and by assignment, and a "
    "consume-transform-produce stage record a history while a nemesis kills and pauses processes, "
    "cuts, delays and blackholes connections, fills the broker's disk and jumps its clock. A final "
    "reader reads everything; the checker then looks for lost writes, duplicates, aborted and "
    "uncommitted reads, partial transactions, inconsistent offsets, non-monotonic or skipping polls, "
    "internal reads and G1c cycles. Exit 0 only if none was found; 1 with anomalies; 2 on error.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--broker", choices=["oncelog"], default="oncelog",
                   help="start an oncelog broker locally and fault it (default)")
    p.add_argument("--bootstrap-server", dest="bootstrap", metavar="HOST:PORT", default=None,
                   help="any Kafka cluster instead: workload and checker, faults on the workers only")
    p.add_argument("--command-config", metavar="FILE", default=None,
                   help="client settings for --bootstrap-server (security.protocol, sasl.*, ssl.*), as Kafka's tools")
    p.add_argument("--duration", type=float, default=60.0, metavar="SECONDS", help="faults for this long (default 60)")
    p.add_argument("--faults", default=None,
                   help=f"comma-separated kinds: {','.join(nem.KINDS)} (default every kind that applies: "
                        "kill-node only with --nodes 2 or more; 'none' for none)")
    p.add_argument("--nodes", type=int, default=1, metavar="N",
                   help="start the local broker as a cluster of N node processes ('oncelog serve --nodes N'; "
                        "default 1: one broker process, as before clusters). With N > 1: 'kill-node' SIGKILLs "
                        "one node (its supervisor restarts it), 'kill' the whole cluster, 'pause' and 'clock' "
                        "act on every node, and 'net' goes through one fault proxy per node (node k "
                        "advertises proxy k)")
    p.add_argument("--share-consumers", type=int, default=0, metavar="N",
                   help="add N share-group members (KIP-932, explicit acknowledgement) reading the topic, and a "
                        "final drain of the group; the checker then also looks for records accepted twice, "
                        "lost, delivered beyond the delivery-count limit or acknowledged stale (default 0)")
    p.add_argument("--share-delivery-limit", type=int, default=5, metavar="N",
                   help="the share group's share.delivery.count.limit (2-10, default 5)")
    p.add_argument("--seed", type=int, default=1, help="the nemesis's and the workload's seed (default 1)")
    p.add_argument("--partitions", type=int, default=4, help="partitions per topic (default 4)")
    p.add_argument("--report", metavar="FILE", default=None, help="write the run's report (JSON) here")
    p.add_argument("--plot", metavar="FILE", default=None,
                   help="throughput and latency over time with the fault windows shaded (PNG)")
    p.add_argument("--work-dir", metavar="DIR", default=None, help="histories and logs (default: a new temp dir)")
    p.add_argument("--pipeline", action="store_true",
                   help="run the demo's Spark job under the nemesis instead (see 'oncelog demo --help')")
    p.add_argument("--demo-args", metavar="'OPTIONS'", default="",
                   help="with --pipeline: options for the demo's job, e.g. \"--records 20000 --driver-kills 1\"")


def parse_faults(text: str | None, nodes: int = 1) -> tuple[str, ...]:
    if text is None:  # every kind that applies
        return tuple(k for k in nem.KINDS if k not in nem.CLUSTER_KINDS or nodes > 1)
    if text.strip() in ("", "none"):
        return ()
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    unknown = [k for k in kinds if k not in nem.KINDS]
    if unknown:
        raise ValueError(f"--faults: unknown kind(s) {', '.join(unknown)}; known: {', '.join(nem.KINDS)}")
    cluster_only = [k for k in kinds if k in nem.CLUSTER_KINDS]
    if cluster_only and nodes < 2:
        raise ValueError(f"--faults: {', '.join(cluster_only)} needs a cluster (--nodes 2 or more)")
    return kinds


def run(args) -> int:
    from rich.console import Console
    from rich.table import Table

    from .run import ChaosOptions, ChaosRun, plot

    console = Console(stderr=False, highlight=False)
    nodes = getattr(args, "nodes", 1)
    try:
        if not 1 <= nodes <= 64:
            raise ValueError(f"--nodes must be 1..64 (got {nodes})")
        if nodes > 1 and (args.bootstrap is not None or args.pipeline):
            raise ValueError("--nodes starts the local broker as a cluster: not with --bootstrap-server or --pipeline")
        faults = parse_faults(args.faults, nodes)
        if getattr(args, "share_consumers", 0) < 0 or not 2 <= getattr(args, "share_delivery_limit", 5) <= 10:
            raise ValueError("--share-consumers must be >= 0 and --share-delivery-limit 2..10")
    except ValueError as exc:
        print(f"oncelog chaos: {exc}", file=sys.stderr)
        return 2
    if args.pipeline:
        from .pipeline import run_pipeline

        return run_pipeline(args, faults, console)
    client_config = {}
    if args.command_config:
        from ..admin import CommandError, command_config

        try:
            client_config = command_config(args.command_config)
        except CommandError as exc:
            print(f"oncelog chaos: {exc}", file=sys.stderr)
            return 2
    if args.bootstrap is None and "disk" in faults and os.geteuid() != 0:
        # The small disk is a tmpfs the run mounts: root only.
        faults = tuple(k for k in faults if k != "disk")
        console.print("disk faults need root (the broker's data dir is a tmpfs the run mounts); not applied")
    if args.bootstrap is not None:
        dropped = [k for k in faults if k not in ("kill", "pause")]
        if dropped:
            console.print(f"against {args.bootstrap}: faults {', '.join(dropped)} need the local broker; "
                          "only the workers are killed and paused")
    options = ChaosOptions(duration_s=args.duration, faults=faults, seed=args.seed, bootstrap=args.bootstrap,
                           client_config=client_config, work_dir=args.work_dir, partitions=args.partitions,
                           nodes=nodes, share_consumers=getattr(args, "share_consumers", 0),
                           share_delivery_limit=getattr(args, "share_delivery_limit", 5))
    chaos = ChaosRun(options, say=lambda text: console.print(text, markup=False))
    try:
        report = chaos.execute()
    except Exception as exc:  # a run that could not happen is an error, not a verdict
        print(f"oncelog chaos: the run failed: {exc!r} (files in {chaos.work_dir})", file=sys.stderr)
        return 2
    if args.report:
        with open(args.report, "w") as f:
            json.dump(report, f, indent=1)
    if args.plot:
        plot(report, args.plot)
    result = report["result"]
    info = result.get("info", {})
    stats = Table(title="the run", show_header=True)
    for col in ("what", "count"):
        stats.add_column(col)
    ops = info.get("ops", {})
    stats.add_row("operations", ", ".join(f"{f} {sum(v.values())}" for f, v in ops.items() if sum(v.values())))
    writes, reads = info.get("writes", {}), info.get("reads", {})
    stats.add_row("writes", f"{writes.get('total', 0)} ({writes.get('committed', 0)} committed, "
                            f"{writes.get('failed', 0)} failed, {writes.get('info', 0)} unknown)")
    stats.add_row("reads", f"{reads.get('total', 0)} ({reads.get('in_txn', 0)} in transactions, "
                           f"{reads.get('by_final_reader', 0)} by the final reader)")
    stats.add_row("faults injected", ", ".join(f"{k} {v}" for k, v in sorted(report["fault_counts"].items())) or "none")
    stats.add_row("worker processes", f"{report['processes']} (restarted by themselves: "
                                      f"{sum(report['worker_restarts'].values())})")
    console.print(stats)
    table = Table(title="anomalies by class", show_header=True)
    for col in ("class", "count", "fails the run", "examples"):
        table.add_column(col)
    for name, c in result["classes"].items():
        example = c["anomalies"][0]["description"] if c["failing"] and c["anomalies"] else ""
        table.add_row(name, str(c["count"]), "yes" if c["failing"] else "no (allowed)",
                      example if len(example) <= 200 else example[:197] + "...",
                      style="bold red" if c["failing"] and c["count"] else None)
    console.print(table)
    for exit_ in report.get("broker_exits", []):
        who = f"node {exit_['node']} of the cluster" if exit_.get("node") else "the broker"
        console.print(f"[bold red]{who} exited by itself or did not come back[/] (code {exit_['code']}); the log ended:",
                      highlight=False)
        console.print(exit_["log"], markup=False)
    if report["nemesis_errors"]:
        console.print("faults that could not be applied: " + "; ".join(report["nemesis_errors"]), markup=False)
    console.print(f"files of this run: {chaos.work_dir}" + (f"; the report, with every anomaly's operations: "
                                                             f"{args.report}" if args.report else ""), markup=False)
    if report["ok"]:
        console.print("[bold green]no anomalies[/]")
        return 0
    console.print("[bold red]anomalies found[/]" if not report["result"]["ok"] else "[bold red]the broker crashed[/]")
    return 1
