"""The one-line causes of query failures (oncelog.pipeline.causes), sans-IO.

The real texts under tests/data/query_failures/ were captured from real runs (the file name starts
with the kind expected); the short ones below follow the shapes Spark gives (SPARK-NOTES). The rule
every cause keeps: one line, at most ``MAX`` characters, no traceback in it.
"""

from __future__ import annotations

import os

import pytest

from oncelog.pipeline.causes import MAX, explain, innermost, one_line

FIXTURES = os.path.join(os.path.dirname(__file__), "data", "query_failures")
TRACEBACK_FRAGMENTS = ("Traceback", 'File "', "\tat ", "  at ", "^^^", "SQLSTATE")


def assert_no_traceback(line: str) -> None:
    assert "\n" not in line and 0 < len(line) <= MAX, repr(line)
    for fragment in TRACEBACK_FRAGMENTS:
        assert fragment not in line, f"{fragment!r} in {line!r}"


@pytest.mark.parametrize("name", sorted(os.listdir(FIXTURES)))
def test_real_failure_texts(name):
    with open(os.path.join(FIXTURES, name)) as f:
        text = f.read()
    assert "Traceback (most recent call last)" in text
    cause = explain(text, bootstrap="127.0.0.1:9092")
    assert cause.kind == name.split(".")[0], cause
    assert_no_traceback(cause.text)


PY_TRACE = ('[PYTHON_STREAMING_DATA_SOURCE_RUNTIME_ERROR] Failed when Python streaming data source perform commit: '
            'Traceback (most recent call last):\n  File "/x/oncelog/spark/modes.py", line 3, in commit\n'
            '    self._commit()\n    ^^^^^^^^^^^^^^\n{error}\n SQLSTATE: 38000\n'
            '\tat org.apache.spark.sql.execution.python.PythonRunner.run(PythonRunner.scala:10)\n')


@pytest.mark.parametrize("error, kind, words", [
    ("ConnectionError: connection to 127.0.0.1:9092 closed by the broker", "broker-unreachable",
     "went away (connection to 127.0.0.1:9092 closed)"),
    ("ConnectionRefusedError: [Errno 111] Connection refused", "broker-unreachable", "(connection refused)"),
    ("ConnectionResetError: [Errno 104] Connection reset by peer", "broker-unreachable", "(connection reset)"),
    ("oncelog.client.kafka.KafkaProtocolError: EndTxn: COORDINATOR_LOAD_IN_PROGRESS", "broker-not-ready",
     "not ready to serve (COORDINATOR_LOAD_IN_PROGRESS)"),
    ("oncelog.client.kafka.KafkaProtocolError: EndTxn: PRODUCER_FENCED", "fenced", "took over its transactions"),
    ("org.apache.spark.SparkException: Python worker exited unexpectedly (crashed)", "task-failed",
     "a task failed more often than Spark retries it"),
    ("oncelog.spark.source.DataLossError: orders-0: offsets 0-10 are gone", "data-loss", "gone from the topic"),
    ("ValueError: a value the job did not expect", "other", "ValueError: a value the job did not expect"),
])
def test_causes_in_plain_words(error, kind, words):
    cause = explain(PY_TRACE.format(error=error), bootstrap="127.0.0.1:9092")
    assert cause.kind == kind, cause
    assert words in cause.text, cause
    assert_no_traceback(cause.text)


def test_an_unknown_failure_names_spark_s_error_class_and_the_innermost_error():
    text = ("[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: Job aborted\n"
            "\tat org.apache.spark.sql.execution.streaming.StreamExecution.run(StreamExecution.scala:1)\n")
    cause = explain(text)
    assert cause.kind == "other"
    assert cause.text.startswith("[STREAM_FAILED] Query") or cause.text.startswith("STREAM_FAILED"), cause
    assert_no_traceback(cause.text)
    assert_no_traceback(explain("").text)


def test_innermost_takes_the_last_exception_line_and_one_line_cuts():
    assert innermost("Traceback (most recent call last):\n  File \"a\", line 1\nKeyError: 'x'\n"
                     "\nDuring handling...\nValueError: later") == "ValueError: later"
    long = one_line("word " * 200)
    assert len(long) == MAX and long.endswith("…")
