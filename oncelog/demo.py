"""``oncelog demo``: the main job. An exactly-once Spark pipeline on an embedded broker, crashed
on purpose while it runs, then proved exactly-once by the auditor and a recomputed ground truth.

1. a broker (a child process: temporary data directory unless ``--data-dir``);
2. a generator writes ~200k "orders" events (JSON: order id, customer, amount, event time) to 4
   partitions with a transactional confluent-kafka producer; about one transaction in eight is
   aborted on purpose, some events are invalid, some late or out of order;
3. a PySpark Structured Streaming job (its own driver process) enriches every event to one topic
   (header ``oncelog.source`` = its input's ``topic:partition:offset``) and keeps running totals
   per customer and 5-minute event-time window (watermark 10 minutes) on the RocksDB state store,
   written through ``foreachBatch`` with the connector's exactly-once batch path;
4. chaos: SIGKILLs of the driver's process group (restarted from its checkpoints), a SIGKILL of
   the broker (restarted on the same data and port), one failed write task (retried by Spark);
5. proof: the auditor (no input lost, none duplicated, nothing aborted read) and the aggregates
   against a ground truth recomputed from the committed input.

Exit status 0 only if exactly-once held. See :mod:`oncelog.pipeline` for the parts.

Elsewhere: ``--broker apache-kafka [--brokers 3]`` runs it all on Apache Kafka fetched from Maven
Central into the user's cache (its broker kills SIGKILL the Kafka node that leads an output
partition or coordinates the generator's transactions); ``--bootstrap-server HOST:PORT`` on any
existing cluster, with ``--kafka.NAME VALUE`` client settings (``--kafka.security.protocol
SASL_SSL`` ...), and no broker kills. ``--sink spark-kafka`` writes the outputs through Spark's own
Kafka connector instead, to show what its at-least-once sink does under the same crashes.
"""

from __future__ import annotations

import json
import os
import signal
import time

from .pipeline.config import PipelineConfig, add_options

KAFKA_PREFIX = "--kafka."

STYLES = {"driver-kill": "bold red", "broker-kill": "bold magenta", "task-fault": "bold yellow",
          "driver-exit": "yellow", "recovered": "green", "query-failed": "yellow", "warning": "bold yellow"}


def add_arguments(demo) -> None:
    """The ``demo`` subcommand's options (called from :mod:`oncelog.cli`): the pipeline's settings,
    generated from :class:`~oncelog.pipeline.config.PipelineConfig`, then where the result goes."""
    add_options(demo)
    demo.add_argument("--report", metavar="PATH", default=None, help="write the result as JSON")
    demo.add_argument("--plot", metavar="PATH", default=None, help="write a PNG: rows/s over time, crashes marked")


def extract_kafka_options(argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """Take ``--kafka.NAME VALUE`` and ``--kafka.NAME=VALUE`` out of ``argv`` (argparse has no
    wildcard options): the rest, and ``{"kafka.NAME": VALUE}``."""
    rest, options = [], {}
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok.startswith(KAFKA_PREFIX) and len(tok) > len(KAFKA_PREFIX) and tok != "--kafka.NAME":
            name, eq, value = tok[2:].partition("=")
            if not eq:
                if i + 1 >= len(argv):
                    raise SystemExit(f"oncelog demo: {tok} needs a value")
                i += 1
                value = argv[i]
            options[name] = value
        else:
            rest.append(tok)
        i += 1
    return rest, options


def run(args, pipeline_factory=None) -> int:
    """The demo; ``pipeline_factory(cfg, on_event=, on_tick=)`` replaces :class:`Pipeline` (``oncelog chaos
    --pipeline`` runs the same job under its nemesis)."""
    # Imported here: the parser (add_arguments) is built for every oncelog command, serve included.
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from .pipeline.run import Pipeline

    console = Console()
    cfg = PipelineConfig.from_args(args)
    if cfg.bootstrap_server and (cfg.broker != "oncelog" or cfg.brokers != 1):
        console.print("[red]oncelog demo: --bootstrap-server runs on an existing cluster: no --broker or --brokers[/]")
        return 2
    if cfg.nodes is not None and (cfg.broker != "oncelog" or cfg.bootstrap_server):
        console.print("[red]oncelog demo: --nodes is for the oncelog broker the demo starts[/]")
        return 2
    if cfg.nodes is not None and not 1 <= cfg.nodes <= 16:
        console.print(f"[red]oncelog demo: --nodes must be 1..16 (got {cfg.nodes})[/]")
        return 2
    if cfg.brokers != 1 and cfg.broker != "apache-kafka":
        console.print("[red]oncelog demo: --brokers is for --broker apache-kafka[/]")
        return 2
    if cfg.metrics_port is not None and not 1 <= cfg.metrics_port <= 65535:
        console.print(f"[red]oncelog demo: --metrics-port must be 1..65535, a fixed port: the driver restarts "
                      f"(got {cfg.metrics_port})[/]")
        return 2
    if cfg.kafka_options and not cfg.bootstrap_server:
        console.print("[red]oncelog demo: --kafka.* settings are for a cluster of yours (--bootstrap-server); the "
                      "clusters the demo starts are plaintext on loopback[/]")
        return 2
    live = console.is_terminal
    bar = Progress(TextColumn("{task.description:<30}"), BarColumn(bar_width=36), MofNCompleteColumn(),
                   TextColumn("{task.fields[note]}"), TimeElapsedColumn(), console=console, disable=not live)
    t_prod = bar.add_task("events produced", total=cfg.records, note="")
    t_rows = bar.add_task("rows processed (read_committed)", total=None, note="")
    t_crash = bar.add_task("crashes injected", total=cfg.driver_kills + cfg.broker_kills + int(cfg.task_fault), note="")
    t_rec = bar.add_task("crashes recovered", total=cfg.driver_kills + cfg.broker_kills, note="")

    def on_event(kind: str, text: str, **_info) -> None:
        style = STYLES.get(kind)
        stamp = f"[dim]{time.time() - t0:6.1f}s[/]"
        console.print(f"{stamp} [{style}]{text}[/]" if style else f"{stamp} {text}", highlight=False)

    def on_tick(st) -> None:
        gen = st.generator
        if gen is not None:
            bar.update(t_prod, completed=gen.produced,
                       note=f"{gen.committed:,} committed, {gen.aborted + gen.failed:,} aborted")
            bar.update(t_rows, completed=st.output_rows, total=max(gen.committed, st.output_rows) or None,
                       note=f"run {st.runs}, {st.phase}")
        bar.update(t_crash, completed=st.driver_kills + st.broker_kills + st.task_failures,
                   note=f"driver {st.driver_kills}, broker {st.broker_kills}, task {st.task_failures}")
        bar.update(t_rec, completed=min(st.recovered, cfg.driver_kills + cfg.broker_kills),
                   note=f"{st.driver_exits} driver exits, {st.query_restarts} query restarts")

    def on_sigterm(_signum, _frame):  # clean up (driver, broker) as on Ctrl-C
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_sigterm)
    t0 = time.time()
    pipeline = (pipeline_factory or Pipeline)(cfg, on_event=on_event, on_tick=on_tick)
    if cfg.bootstrap_server:
        where = f"the existing cluster at {cfg.bootstrap_server} (no broker kills: its brokers are not the demo's)"
    elif cfg.broker == "apache-kafka":
        where = f"Apache Kafka, {cfg.brokers} node{'s' if cfg.brokers > 1 else ''}"
    else:
        from .cluster import default_nodes

        n = cfg.nodes or default_nodes(os.path.join(pipeline.dir, "broker"))
        where = "an oncelog broker" + (f" of {n} node processes" if n > 1 else "")
    sinks = "Spark's own Kafka sink (at-least-once)" if cfg.sink == "spark-kafka" else f"{cfg.guarantee} sinks"
    console.print(f"[bold]oncelog demo[/]: {cfg.records:,} order events on {where}, Spark {pipeline.master}, "
                  f"{sinks}; chaos: {cfg.driver_kills} driver SIGKILLs, {cfg.broker_kills} broker "
                  f"SIGKILLs{', 1 task failure' if cfg.task_fault else ''}. Data in {pipeline.dir}")
    if cfg.metrics_port:
        console.print(f"Spark driver's query metrics (each driver run serves them): "
                      f"http://127.0.0.1:{cfg.metrics_port}/metrics", soft_wrap=True)
    report = None
    error = None
    try:
        with bar:
            report = pipeline.execute()
    except KeyboardInterrupt:
        error = "interrupted"
    except Exception as exc:  # noqa: BLE001 - reported below, with where to look
        error = f"{type(exc).__name__}: {exc}"
    seconds = time.time() - t0
    ok = report is not None and report["exactly_once"]
    keep = not ok and pipeline.own_dir  # keep the evidence of a failed run
    try:
        pipeline.close(remove=not keep)
    except Exception as exc:  # noqa: BLE001
        console.print(f"[yellow]cleanup: {exc}[/]")
    if report is None:
        report = {"exactly_once": False, "error": error, "master": pipeline.master,
                  "driver_kills": pipeline.state.driver_kills, "broker_kills": pipeline.state.broker_kills,
                  "timeline": pipeline.state.timeline}
    report["seconds"] = round(seconds, 1)
    if args.report:
        with open(args.report, "w") as f:
            json.dump(report, f, indent=2, default=str)
    if args.plot:
        from .pipeline.plot import plot

        verdict = "exactly once" if ok else "NOT exactly once"
        plot(args.plot, pipeline.state.samples, pipeline.state.t0, pipeline.state.timeline,
             latency=(report.get("freshness") or {}).get("series"),
             title=f"oncelog demo: {cfg.records:,} events, {cfg.guarantee} sinks, {pipeline.master}, "
                   f"{report.get('driver_kills', 0)} driver + {report.get('broker_kills', 0)} broker SIGKILLs: {verdict}")
    logs = (f"logs of this run: {pipeline.log_dir} (demo.log: what happened; driver.log: Spark's output and the "
            f"full tracebacks; broker.log)")
    if error:
        console.print(f"[bold red]FAILED[/]: {error}", soft_wrap=True)  # a path must stay copyable
        if keep:
            console.print(f"data and checkpoints kept in {pipeline.dir}" +
                          (" (Kafka's logs: apache-kafka/node-*/kafka.log)" if cfg.broker == "apache-kafka" else ""),
                          soft_wrap=True)
        console.print(logs, soft_wrap=True)
        return 2
    print_summary(console, report, cfg)
    if keep:
        console.print(f"[dim]data and checkpoints kept in {pipeline.dir}[/]", soft_wrap=True)
    console.print(f"[dim]{logs}[/]", soft_wrap=True)
    return 0 if ok else 1


def print_summary(console, r: dict, cfg) -> None:
    from rich.table import Table

    cl = r.get("cluster") or {}
    where = {"apache-kafka": f"Apache Kafka ×{cl.get('nodes')}", "external": cl.get("bootstrap", "")}.get(
        cl.get("kind"), f"oncelog ×{cl['nodes']}" if (cl.get("nodes") or 1) > 1 else "oncelog")
    sinks = "Spark's Kafka sink" if r.get("sink") == "spark-kafka" else f"{r['delivery_guarantee']} sinks"
    t = Table(title=f"oncelog demo on {where}: {sinks}, {r['master']}, {r['seconds']:.0f}s")
    t.add_column("")
    t.add_column("", justify="right")

    def bad(n) -> str:
        return f"[bold red]{n:,}[/]" if n else "0"

    gen = r.get("generator") or {}
    t.add_row("events produced", f"{gen.get('produced', 0):,}")
    t.add_row("  in aborted transactions (never to be read)", f"{r['aborted_input_records']:,}")
    t.add_row("input records (committed)", f"{r['input_records']:,}")
    gt = r["ground_truth"]
    t.add_row("  invalid (flagged by the job)", f"{gt['invalid']:,}")
    t.add_row("  late, within the watermark / dropped by it", f"{gt['late_kept']:,} / {gt['late_dropped_by_watermark']:,}")
    t.add_row("enriched output records (read_committed)", f"{r['output_records']:,}")
    t.add_row("lost", bad(r["lost"]))
    t.add_row("duplicated", bad(r["duplicated"]))
    t.add_row("aborted reads", bad(r["aborted_reads"]))
    t.add_row("phantom", bad(r["phantom"]))
    a = r["aggregates"]
    cell = f"{a['matching']:,} of {a['expected_keys']:,} keys equal"
    if not a["ok"]:
        cell = f"[bold red]{cell}; {a['wrong']} wrong, {a['missing']} missing, {a['unexpected']} unexpected[/]"
    t.add_row(f"totals per (customer, window) vs ground truth", cell)
    t.add_row("  customers / 5-minute windows / updates written", f"{gt['customers']:,} / {gt['windows']:,} / "
                                                                   f"{a['updates']:,}")
    t.add_row("aggregate updates written twice (same key, same batch)", bad(r["aggregate_duplicate_writes"]))
    t.add_row("driver SIGKILLs / broker SIGKILLs / task failures",
              f"{r['driver_kills']} / {r['broker_kills']} / {r['task_failures']}")
    t.add_row("driver runs (exits on its own) / query restarts in the driver",
              f"{r['driver_runs']} ({r['driver_exits']}) / {r['query_restarts']}")
    fr = r.get("freshness") or {}
    if fr.get("samples"):
        def pcts(d: dict) -> str:
            return " / ".join(f"{d[k] / 1000:.1f}" for k in ("p50", "p95", "p99")) + " s"

        calm = fr.get("between_crashes_ms")
        if calm:
            t.add_row(f"freshness between crashes: produce to read_committed, p50 / p95 / p99 "
                      f"({fr['between_crashes_samples']:,} records, trigger {fr['trigger_ms'] / 1000:g} s)", pcts(calm))
        t.add_row("  over every record, those that waited out a crash included", pcts(fr["all_ms"]))
    restarts = [x for x in r["driver_restarts"][1:] if "first_batch_s" in x]
    if restarts:
        t.add_row("driver restart to first micro-batch",
                  ", ".join(f"{x['first_batch_s']:.0f}s" for x in restarts))
    console.print(t)
    for ex in r["aggregates"]["examples"]:
        console.print(f"  [red]totals[/]: {ex}")
    for kind, exs in (r.get("audit_examples") or {}).items():
        if exs:
            console.print(f"  [red]{kind}[/], e.g. {'; '.join(exs[:3])}")
    if r["exactly_once"]:
        console.print(f"[bold green]exactly once[/]: every committed input in the enriched output once, nothing from "
                      f"an aborted transaction, aggregates equal to the ground truth, through {r['driver_kills']} "
                      f"driver and {r['broker_kills']} broker SIGKILLs.")
        if r["delivery_guarantee"] == "at-least-once":
            console.print("(with at-least-once sinks this was luck: no crash landed between a write and its commit)")
    elif r.get("sink") == "spark-kafka":
        console.print(f"[bold red]NOT exactly once[/], as expected of Spark's own Kafka sink (at-least-once by "
                      f"design): after the crashes Spark ran micro-batches again whose output it had already "
                      f"written, so {r['duplicated']:,} enriched records"
                      + (f" and {r['aggregate_duplicate_writes']:,} aggregate updates" if r["aggregate_duplicate_writes"]
                         else "") +
                      " are there twice. The connector's exactly-once sinks (the default) do not write them again.")
    elif r["delivery_guarantee"] == "at-least-once":
        console.print(f"[bold red]NOT exactly once[/], as expected of at-least-once sinks: after the crashes Spark ran "
                      f"micro-batches (and a failed task) again whose output had already been written, so "
                      f"{r['duplicated']:,} enriched records and {r['aggregate_duplicate_writes']:,} aggregate updates "
                      f"are there twice. The exactly-once sinks (the default) do not write them again.")
    else:
        console.print("[bold red]NOT exactly once[/]: see the anomalies above.")
