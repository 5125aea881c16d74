"""bench.etl runs its exactly-once group ETL on one node and on a cluster of nodes and checks
the output with an independent read_committed reader (a small run: the figures are the bench's)."""

import pytest

from bench import etl

pytestmark = pytest.mark.e2e


def test_the_etl_moves_every_record_exactly_once_on_one_node_and_on_a_cluster(capsys):
    code = etl.main(["--targets", "oncelog-never,oncelog-always-nodes", "--records", "3000", "--batch", "500"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.count("exactly once: True (3,000 keys, 3,000 records)") == 2, out
