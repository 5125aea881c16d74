"""bench.produce_path measures what it says: every measured Produce request is appended (the
script refuses figures otherwise), for each case, on this tree."""

import pytest

from bench import produce_path

pytestmark = pytest.mark.e2e


def test_every_case_is_measured_on_requests_that_were_appended():
    figures = produce_path.measure(".")
    assert set(figures) == {name for name, *_ in produce_path.CASES}
    # A bigger batch costs more per request than a one-record batch (the figures are real times).
    assert 0 < figures["idempotent 1 x 1 KiB"] < figures["idempotent 960 x 1 KiB"]
