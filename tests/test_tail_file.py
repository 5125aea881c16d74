"""oncelog.process.tail_file: the end of a child's log, for error messages (brokers, Apache Kafka
nodes, Spark's JVMs, the benchmarks' targets)."""

from __future__ import annotations

from oncelog.process import tail_file


def test_the_last_lines_of_a_long_log_and_nothing_of_a_missing_one(tmp_path):
    log = tmp_path / "broker.log"
    log.write_bytes(b"".join(b"line %d\n" % i for i in range(200_000)) + b"caf\xc3\xa9 \xff")
    assert tail_file(log, 3) == "line 199998\nline 199999\ncaf\u00e9 \ufffd"
    assert tail_file(str(log), 0) == ""
    assert tail_file(tmp_path / "missing.log") == ""
    short = tmp_path / "short.log"
    short.write_text("a\nb\n")
    assert tail_file(short, 40) == "a\nb\n"
