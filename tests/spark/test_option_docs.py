"""The option reference is ``OncelogDataSource``'s docstring: it documents every option the source
and the sink accept (``oncelog.spark.options``), and nothing else (as test_boundary does for the
broker's handlers). A new option without its line there, or a documented option that the options
module does not take, fails here."""

from __future__ import annotations

import re

import pytest

from oncelog.spark.datasource import OncelogDataSource
from oncelog.spark.options import (DEFAULT_COMMIT_LOG_TOPIC, DEFAULT_TRANSACTION_TIMEOUT_MS, OptionError,
                                   SINK_OPTION_NAMES, SOURCE_OPTION_NAMES, sink_options, source_options)

DOC = OncelogDataSource.__doc__
# Options accepted besides the named ones: the required servers and the kafka.* family.
FAMILY = {"kafka.bootstrap.servers", "kafka.*"}


def _section(title: str) -> list[str]:
    """The lines of a numpy-style section (title, dashes, body up to the next title)."""
    lines = [line[4:] if line.startswith("    ") else line for line in DOC.splitlines()]
    start = lines.index(title) + 2
    assert set(lines[start - 1]) == {"-"}, f"section {title} has no underline"
    end = next((i for i in range(start, len(lines) - 1) if lines[i] and set(lines[i + 1]) == {"-"}), len(lines))
    return lines[start:end]


def documented() -> dict[str, str]:
    """{option name: its ``type, default`` text}, from the Parameters section (``a, b : type``)."""
    out = {}
    for line in _section("Parameters"):
        if line and not line.startswith(" "):
            names, _, kind = line.partition(" : ")
            assert kind, f"parameter line without ' : type': {line!r}"
            for name in names.split(","):
                out[name.strip()] = kind
    return out


def test_docstring_has_the_numpy_sections_and_the_format_name():
    assert re.search(r"^\s*Name: ``oncelog``$", DOC, re.M)
    assert OncelogDataSource.name() == "oncelog"
    for title in ("Notes", "Parameters", "Examples"):
        assert _section(title), title


def test_every_accepted_option_is_documented_and_nothing_else():
    accepted = {n.lower(): n for n in SOURCE_OPTION_NAMES + SINK_OPTION_NAMES}
    docs = documented()
    missing = sorted(n for low, n in accepted.items() if low not in {d.lower() for d in docs}) + sorted(
        FAMILY - set(docs))
    assert not missing, f"options accepted but not documented in OncelogDataSource: {missing}"
    extra = sorted(d for d in docs if d.lower() not in accepted and d not in FAMILY)
    assert not extra, f"documented but not accepted by oncelog.spark.options: {extra}"
    # Spelled as the options module spells them (the reference is what users copy).
    assert sorted(d for d in docs if d not in FAMILY) == sorted(SOURCE_OPTION_NAMES + SINK_OPTION_NAMES)


def test_every_documented_option_is_taken_by_the_source_or_the_sink():
    # The names are not only listed in options.py: the validators take each without "unknown".
    base = {"kafka.bootstrap.servers": "127.0.0.1:9092"}
    for name in documented():
        if name in FAMILY:
            continue
        side = source_options if name in SOURCE_OPTION_NAMES else sink_options
        options = {**base, name.lower(): "x"}
        if side is source_options and name not in ("subscribe", "subscribePattern", "assign"):
            options["subscribe"] = "t"
        try:
            side(options)
        except OptionError as exc:
            assert "unknown" not in str(exc), f"{name}: {exc}"


@pytest.mark.parametrize("default", [DEFAULT_COMMIT_LOG_TOPIC, str(DEFAULT_TRANSACTION_TIMEOUT_MS)])
def test_documented_defaults_are_the_modules(default):
    assert any(default in kind for kind in documented().values()), default
