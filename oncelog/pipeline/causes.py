"""Why a streaming query failed, in one line a person can read (sans-IO).

A query that fails hands the driver a :class:`StreamingQueryException` whose text is Spark's
error class, the Python worker's traceback and often the JVM's stack: hundreds of lines, the cause
somewhere inside. :func:`explain` finds the cause and says it in plain words, with what happens
next; the whole text goes to the run's log (``driver.log``), never to the screen.

Invariant (``tests/test_causes.py``, on failure texts captured from real runs): the line is a
single line of at most :data:`MAX` characters with no traceback in it (no ``Traceback``, no
``File "..."`` frame, no Java ``at ...`` frame).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX = 240

# (kind, pattern, plain words); the first kind whose pattern is in the text wins, and {detail} is
# what it matched, in lower case. The broker's patterns: what the connector's client
# (oncelog.client) and confluent-kafka say when the broker went away or is back but not serving yet.
RESTART = "restarting from the checkpoint"
_RULES: list[tuple[str, re.Pattern, str]] = [
    ("broker-unreachable", re.compile(
        r"connection refused|closed by the broker|connection to \S+ closed|broken pipe|connection reset|"
        r"connection aborted|could not connect|failed to resolve|_TRANSPORT|all broker connections are down|"
        r"EOF occurred", re.I),
     "the broker at {bootstrap} went away ({detail}); " + RESTART + ": the micro-batch is written again, in a new "
     "transaction"),
    ("broker-not-ready", re.compile(
        r"NOT_COORDINATOR|COORDINATOR_NOT_AVAILABLE|COORDINATOR_LOAD_IN_PROGRESS|LEADER_NOT_AVAILABLE|"
        r"NOT_LEADER_OR_FOLLOWER|UNKNOWN_TOPIC_OR_PARTITION|REQUEST_TIMED_OUT|CONCURRENT_TRANSACTIONS"),
     "the broker at {bootstrap} was not ready to serve ({detail}); " + RESTART),
    ("fenced", re.compile(r"PRODUCER_FENCED|INVALID_PRODUCER_EPOCH|StaleRunError|fenced", re.I),
     "a newer run of this query took over its transactions ({detail}); " + RESTART),
    ("task-failed", re.compile(r"Python worker exited unexpectedly(?: \(crashed\))?|"
                               r"Task \S+ in stage \S+ failed \d+ times", re.I),
     "a task failed more often than Spark retries it ({detail}); " + RESTART + ": the micro-batch runs again"),
    ("data-loss", re.compile(r"DataLossError|no longer available in Kafka"),
     "input the query had yet to read is gone from the topic ({detail}); " + RESTART),
]

# The innermost error of a Python traceback, or Spark's error class: "ValueError: bad", "[STREAM_FAILED] ...".
_PY_ERROR = re.compile(r"^\s*((?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt)): (.+?)\s*$", re.M)
_SPARK_CLASS = re.compile(r"\[([A-Z][A-Z0-9_]+(?:\.[A-Z0-9_]+)?)\]")
_TRACE_LINE = re.compile(r"Traceback \(most recent call last\)|^\s*File \"|^\s+at [\w.$]+\(", re.M)


@dataclass(frozen=True)
class Cause:
    kind: str  # a key of _RULES, or "other"
    text: str  # one line, plain words, no traceback

    def __str__(self) -> str:
        return self.text


def innermost(error: str) -> str:
    """The last Python exception line (``ValueError: ...``) of ``error``, else its first line
    that is not part of a traceback; one line, at most :data:`MAX` characters."""
    matches = [m for m in _PY_ERROR.finditer(error) if m.group(1) not in ("pyspark.errors.exceptions.captured."
                                                                          "StreamingQueryException",)]
    if matches:
        m = matches[-1]
        line = f"{m.group(1).rsplit('.', 1)[-1]}: {m.group(2)}"
    else:
        line = next((ln.strip() for ln in error.splitlines() if ln.strip() and not _TRACE_LINE.search(ln)), "")
    return one_line(line)


def one_line(text: str, limit: int = MAX) -> str:
    """``text`` on one line without traceback fragments, cut at ``limit`` characters."""
    text = _TRACE_LINE.sub("", text)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def explain(error: str, *, bootstrap: str = "?") -> Cause:
    """The cause of a query failure whose full text (``str(exception)``) is ``error``."""
    error = error or ""
    for kind, pattern, words in _RULES:
        m = pattern.search(error)
        if m:
            detail = m.group(0) if m.group(0).isupper() else m.group(0).lower()
            return Cause(kind, one_line(words.format(bootstrap=bootstrap, detail=one_line(detail, 80))))
    inner = innermost(error) or "no message"
    cls = _SPARK_CLASS.search(error)
    prefix = f"{cls.group(1)}: " if cls and cls.group(1) not in inner else ""
    return Cause("other", one_line(f"{prefix}{inner}; {RESTART}"))
