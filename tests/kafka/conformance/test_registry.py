"""The conformance suite's bookkeeping, without any broker: the committed docs/conformance.md names
exactly the registered scenarios, each with the verdict its declaration implies ("yes" when no
difference is declared, the declared reason otherwise), so the summary above the table and the table
cannot drift from the scenarios the CI run holds to. (Whether the declarations are true is what
test_conformance.py checks against both brokers.)

Regenerate after a run: ``python -m tests.kafka.conformance.report`` (copies build/conformance.md
under docs/conformance.md's prose)."""

from __future__ import annotations

import re

from .framework import load_scenarios
from .report import COMMITTED, committed_rows

MIN_SCENARIOS = 150  # the suite's promise: at least 150 scenarios


def test_enough_scenarios_in_every_area():
    scenarios = load_scenarios()
    areas = {sc.area for sc in scenarios.values()}
    assert len(scenarios) >= MIN_SCENARIOS, f"{len(scenarios)} scenarios; the suite promises {MIN_SCENARIOS}"
    assert {"produce", "fetch", "list_offsets", "transactions", "groups", "offsets", "admin"} <= areas, areas


def test_declared_reasons_say_why():
    for sc in load_scenarios().values():
        if sc.differs:
            assert re.match(r"(by design|open): \S", sc.differs), f"{sc.name}: differs= must start 'by design: ' or 'open: '"
        if sc.cluster_differs:
            assert re.match(r"(by design|open): \S", sc.cluster_differs), (
                f"{sc.name}: cluster_differs= must start 'by design: ' or 'open: '")
            assert not sc.differs, f"{sc.name}: declares differs=, which the cluster run holds to as well"


def test_committed_table_matches_the_registry():
    scenarios = load_scenarios()
    rows = committed_rows()
    assert set(rows) == set(scenarios), (
        f"{COMMITTED} is stale: missing {sorted(set(scenarios) - set(rows))[:5]}, "
        f"extra {sorted(set(rows) - set(scenarios))[:5]}; run the suite and python -m tests.kafka.conformance.report")
    for name, verdict in rows.items():
        differs = scenarios[name].differs
        if differs:
            assert verdict.startswith("no") and verdict.endswith(differs), f"{name}: {COMMITTED} says {verdict!r}"
        else:
            assert verdict == "yes", f"{name}: {COMMITTED} says {verdict!r}, but no difference is declared"
