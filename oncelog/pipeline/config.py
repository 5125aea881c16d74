"""The pipeline's settings, declared once: :class:`PipelineConfig`.

A field a user sets is an ``oncelog demo`` option: :func:`option` puts its flag, help text and
argparse details in the field's metadata, and :func:`add_options` generates the demo's parser from
the fields, so a setting's name, flag, type, default and help live on one line. Help texts say
``%(default)s`` where they show the default. The Spark driver job, a process of its own, gets the
same dataclass inside its one JSON argument (:class:`oncelog.pipeline.job.JobConfig`): no flag is
declared a second time across the process boundary.

Invariants (``tests/test_demo_options.py``): the generated parser's defaults are the dataclass's;
every field has a flag unless it is in :data:`INTERNAL`; the job's JSON round-trips.

Standard library only: the demo's parser is built for every ``oncelog`` command, and the driver
job may run under another PySpark's interpreter (``sink="spark-kafka"``).
"""

from __future__ import annotations

import argparse
import re
from dataclasses import MISSING, dataclass, field, fields

WHERE = "where it runs"  # the help's group of cluster options


def option(flag: str, help: str, default=MISSING, *, default_factory=MISSING, group: str | None = None,
           **argparse_kwargs):
    """A field that is an ``oncelog demo`` option. A bool field's flag turns it off (``--no-...``,
    default True) or on (default False); other fields take a value of their default's type (str
    when the default is None) unless ``argparse_kwargs`` say otherwise."""
    return field(default=default, default_factory=default_factory,
                 metadata={"flag": flag, "help": help, "group": group, "argparse": argparse_kwargs})


@dataclass
class PipelineConfig:
    records: int = option("--records", "events the generator writes, aborted transactions included "
                                       "(default %(default)s)", 200_000)
    master: str = option("--master", "Spark master (default %(default)s; local[N] runs as local[N,3] so a failed "
                                     "task is retried)", "local[2]")
    guarantee: str = option("--delivery-guarantee", "the sinks' guarantee; at-least-once shows the duplicates the "
                                                    "crashes cause", "exactly-once",
                            choices=["exactly-once", "at-least-once"])
    driver_kills: int = option("--driver-kills", "SIGKILLs of the Spark driver's process group", 3)
    broker_kills: int = option("--broker-kills", "SIGKILLs of the broker", 1)
    task_fault: bool = option("--no-task-fault", "do not fail a write task on purpose", True)
    seed: int = option("--seed", "seeds the events and the moments of the crashes", 1)
    produce_seconds: float = option("--produce-seconds", "pace the generator over this many seconds (0: as fast as "
                                                         "it can)", 40.0)
    trigger_ms: int = option("--trigger-ms", "micro-batch trigger interval", 1000)
    jvm_cache: bool = option("--no-jvm-cache", "do not keep a class-data archive of Spark's JVM in ~/.cache/oncelog "
                                               "(~130 MB, written by the first run; driver restarts commit output "
                                               "again ~7 s sooner with it)", True)  # see jvmcache
    broker: str = option("--broker", "the cluster to start: an oncelog broker (default) or Apache Kafka, fetched with "
                                     "mvn from Maven Central into ~/.cache/oncelog on first use (needs Java 17+ and "
                                     "Maven)", "oncelog", group=WHERE, choices=["oncelog", "apache-kafka"])
    brokers: int = option("--brokers", "Apache Kafka nodes: 3 gives replication factor 3 and min.insync.replicas=2 "
                                       "(default %(default)s)", 1, group=WHERE, choices=[1, 3])
    nodes: int | None = option("--nodes", "oncelog node processes (default: what `oncelog serve` starts, a node per "
                                          "core; 1: one process); a broker kill takes them all", None, group=WHERE,
                               type=int, metavar="N")
    bootstrap_server: str | None = option(
        "--bootstrap-server", "run on this existing cluster instead (topics named oncelog-demo-<run id>-*, left there "
                              "afterwards); no broker kills", None, group=WHERE, metavar="HOST:PORT")
    # ``{"kafka.NAME": VALUE}``. argparse has no wildcard options: oncelog.demo.extract_kafka_options
    # takes them out of the command line; the parser only shows them in the help.
    kafka_options: dict[str, str] = option(
        "--kafka.NAME", "a Kafka client setting, in Kafka's names, for every client of the run (Spark's source and "
                        "sinks, the generator, the auditor), e.g. --kafka.security.protocol SASL_SSL "
                        "--kafka.sasl.mechanism SCRAM-SHA-512 --kafka.sasl.jaas.config '...' "
                        "--kafka.ssl.truststore.location ca.pem (repeatable)",
        default_factory=dict, group=WHERE, metavar="VALUE", dest=argparse.SUPPRESS)
    sink: str = option("--sink", "spark-kafka: write both outputs with Spark's own Kafka connector (format(\"kafka\"), "
                                 "spark-sql-kafka-0-10 fetched with mvn; at-least-once) under the same chaos, to see "
                                 "its duplicates (no task failure is injected: its sink has no hook for it)",
                       "oncelog", group=WHERE, choices=["oncelog", "spark-kafka"])
    data_dir: str | None = option("--data-dir", "keep the broker's data, checkpoints and logs here (a new or empty "
                                                "directory; default: a temp dir, removed)", None)
    metrics_port: int | None = option("--metrics-port", "serve the Spark driver's query metrics (Prometheus format, "
                                                        "docs/spark-metrics.md) at http://127.0.0.1:PORT/metrics while "
                                                        "the demo runs (default: off)", None, type=int, metavar="PORT")
    # Not options (INTERNAL): fixed for the demo, a caller of Pipeline may change them.
    txn_size: int = 500  # input records per generator transaction
    drain_timeout: float = 300.0  # seconds for the driver to process the last input and stop
    keep_data: bool = False  # keep a temporary data directory after the run

    @property
    def spark_master(self) -> str:
        """``master`` as Spark gets it: ``local[N]`` allows one attempt per task, so it runs as
        ``local[N,3]`` and a failed task is retried (a cluster master already retries 4 times)."""
        m = re.fullmatch(r"local(?:\[(\d+|\*)\])?", self.master.strip())
        return f"local[{m.group(1) or 1},3]" if m else self.master

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> PipelineConfig:
        """The settings parsed by :func:`add_options` (``args.kafka_options`` as the caller put it
        there); a field missing from ``args`` or None keeps its default."""
        given = {f.name: getattr(args, f.name, None) for f in fields(cls) if "flag" in f.metadata}
        return cls(**{name: value for name, value in given.items() if value is not None})


INTERNAL = frozenset(f.name for f in fields(PipelineConfig) if "flag" not in f.metadata)


def add_options(parser: argparse.ArgumentParser) -> None:
    """One argparse option per :func:`option` field, in field order, grouped as the fields say."""
    groups: dict[str, argparse._ArgumentGroup] = {}
    for f in fields(PipelineConfig):
        if "flag" not in f.metadata:
            continue
        meta = f.metadata
        target = parser if meta["group"] is None else groups.get(meta["group"])
        if target is None:
            target = groups[meta["group"]] = parser.add_argument_group(meta["group"])
        kwargs = {"dest": f.name, **meta["argparse"]}
        default = f.default_factory() if f.default is MISSING else f.default
        if isinstance(default, bool):
            kwargs["action"] = "store_false" if default else "store_true"
        elif kwargs["dest"] != argparse.SUPPRESS:
            kwargs.setdefault("type", str if default is None else type(default))
            kwargs["default"] = default
        target.add_argument(meta["flag"], help=meta["help"], **kwargs)
