"""``oncelog demo``'s options for where it runs, parsed as the command line gives them (no process
is started: the combinations refused here are refused before anything starts)."""

from __future__ import annotations

import pytest

from oncelog.cli import build_parser
from oncelog.demo import extract_kafka_options, run


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
])
def test_contradictory_options_are_refused_before_anything_starts(argv, message, capsys):
    assert run(_args(*argv)) == 2
    assert message in capsys.readouterr().out


def test_the_parser_knows_the_clusters_and_sinks():
    a = _args("--broker", "apache-kafka", "--brokers", "3", "--sink", "spark-kafka")
    assert (a.broker, a.brokers, a.sink, a.bootstrap_server) == ("apache-kafka", 3, "spark-kafka", None)
    with pytest.raises(SystemExit):
        _args("--brokers", "2")  # 2 nodes with min.insync.replicas=2 could not lose one
