"""``oncelog demo``'s options, parsed as the command line gives them (no Spark or broker process
is started: the combinations refused here are refused before anything starts); the parser
generated from ``PipelineConfig``; the driver job's one JSON argument."""

from __future__ import annotations

import argparse
from dataclasses import fields, replace
from types import SimpleNamespace

import pytest

from oncelog.cli import build_parser
from oncelog.demo import add_arguments, extract_kafka_options, run
from oncelog.pipeline.config import INTERNAL, PipelineConfig
from oncelog.pipeline.job import JobConfig
from oncelog.pipeline import procs


def test_kafka_settings_are_taken_out_in_both_spellings():
    argv = ["demo", "--bootstrap-server", "b:9093", "--kafka.security.protocol", "SASL_SSL",
            "--kafka.sasl.jaas.config=x required username=\"u\" password=\"a=b\";", "--records", "10"]
    rest, options = extract_kafka_options(argv)
    assert rest == ["demo", "--bootstrap-server", "b:9093", "--records", "10"]
    assert options == {"kafka.security.protocol": "SASL_SSL",
                       "kafka.sasl.jaas.config": 'x required username="u" password="a=b";'}
    with pytest.raises(SystemExit, match="needs a value"):
        extract_kafka_options(["demo", "--kafka.security.protocol"])


def _args(*argv: str):
    rest, options = extract_kafka_options(["demo", *argv])
    args = build_parser().parse_args(rest)
    args.kafka_options = options
    return args


@pytest.mark.parametrize("argv, message", [
    (["--bootstrap-server", "b:9092", "--broker", "apache-kafka"], "existing cluster"),
    (["--brokers", "3"], "--brokers is for --broker apache-kafka"),
    (["--kafka.security.protocol", "SSL"], "--bootstrap-server"),
    (["--broker", "apache-kafka", "--nodes", "2"], "--nodes is for the oncelog broker"),
    (["--bootstrap-server", "b:9092", "--nodes", "2"], "--nodes is for the oncelog broker"),
    (["--nodes", "0"], "--nodes must be 1..16"),
])
def test_contradictory_options_are_refused_before_anything_starts(argv, message, capsys):
    assert run(_args(*argv)) == 2
    assert message in capsys.readouterr().out


def test_the_parser_knows_the_clusters_and_sinks():
    a = _args("--broker", "apache-kafka", "--brokers", "3", "--sink", "spark-kafka")
    assert (a.broker, a.brokers, a.sink, a.bootstrap_server) == ("apache-kafka", 3, "spark-kafka", None)
    with pytest.raises(SystemExit):
        _args("--brokers", "2")  # 2 nodes with min.insync.replicas=2 could not lose one


def _demo_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    add_arguments(parser)  # what oncelog.cli does for the demo subcommand
    return parser


def test_the_parser_is_generated_from_pipeline_config():
    """Every setting has one home: its flag, default and help are the field's."""
    parser = _demo_parser()
    by_dest = {a.dest: a for a in parser._actions}
    for f in fields(PipelineConfig):
        if f.name in INTERNAL:
            assert "flag" not in f.metadata
            continue
        action = by_dest.get(f.name) or next(a for a in parser._actions if f.metadata["flag"] in a.option_strings)
        assert action.option_strings == [f.metadata["flag"]], f.name
        assert action.help == f.metadata["help"], f.name
        if f.name != "kafka_options":  # taken out of argv by extract_kafka_options, shown in the help only
            assert action.default == getattr(PipelineConfig(), f.name), f.name
    # Only these settings are not options; a new field needs a flag or a place here.
    assert INTERNAL == {"txn_size", "drain_timeout", "keep_data"}
    # The parser has nothing else but the demo's own outputs.
    flags = {f.metadata["flag"] for f in fields(PipelineConfig) if f.name not in INTERNAL}
    assert {s for a in parser._actions for s in a.option_strings} == flags | {"-h", "--help", "--report", "--plot"}
    assert PipelineConfig.from_args(parser.parse_args([])) == PipelineConfig()


def test_the_command_line_sets_the_fields():
    a = _args("--records", "10", "--master", "local[4]", "--delivery-guarantee", "at-least-once", "--no-task-fault",
              "--no-jvm-cache", "--produce-seconds", "2.5", "--bootstrap-server", "b:9093", "--data-dir", "/d",
              "--kafka.security.protocol", "SSL")
    cfg = PipelineConfig.from_args(a)
    assert cfg == PipelineConfig(records=10, master="local[4]", guarantee="at-least-once", task_fault=False,
                                 jvm_cache=False, produce_seconds=2.5, bootstrap_server="b:9093", data_dir="/d",
                                 kafka_options={"kafka.security.protocol": "SSL"})
    assert cfg.spark_master == "local[4,3]"
    assert PipelineConfig(master="local").spark_master == "local[1,3]"
    assert PipelineConfig(master="spark://h:7077").spark_master == "spark://h:7077"


def test_the_driver_job_reads_one_json_of_the_config(tmp_path, monkeypatch):
    """Across the process boundary the driver gets one argument, its JobConfig as JSON."""
    job = JobConfig(PipelineConfig(records=10, guarantee="at-least-once", sink="spark-kafka",
                                   kafka_options={"kafka.sasl.jaas.config": 'x username="u" password="a=b";'}),
                    bootstrap="127.0.0.1:9092", input="orders", enriched="orders-enriched", totals="totals",
                    checkpoint="/ck", app_id="oncelog-demo-1", max_per_trigger=500, progress="/p.jsonl",
                    drain="/drain", jars=["/a.jar", "/b.jar"])
    assert JobConfig.from_json(job.to_json()) == job
    # What SparkDriver.start launches (the process itself is not started here).
    launched = []
    monkeypatch.setattr(procs.subprocess, "Popen", lambda cmd, **kw: launched.append(cmd) or SimpleNamespace(pid=1))
    driver = procs.SparkDriver(job, env={}, log_path=str(tmp_path / "driver.log"), python="python3")
    driver.start(java_options="-XX:SharedArchiveFile=x.jsa")
    driver.start()
    (first, second) = launched
    assert first[:3] == second[:3] == ["python3", "-m", "oncelog.pipeline.job"] and len(first) == 4
    assert JobConfig.from_argv(first[3:]) == replace(job, run=1, java_options="-XX:SharedArchiveFile=x.jsa")
    assert JobConfig.from_argv(second[3:]) == replace(job, run=2)
    for bad in ([], ["--bootstrap", "b:9092"], [job.to_json(), "--run", "2"]):
        with pytest.raises(SystemExit, match="usage"):
            JobConfig.from_argv(bad)
