"""bench.testing (``python -m bench testing``) smoke run: the start-to-ready times of both kinds of
``oncelog.testing.Broker`` and two of the sample suite's tests in a pytest process of their own on
the session broker (small N: the figures are the bench's, BENCHMARKS.md "Testing with oncelog")."""

import pytest

from bench import testing

pytestmark = pytest.mark.e2e


def test_the_bench_times_ready_and_a_slice_of_the_sample_suite(capsys, tmp_path):
    out_json = tmp_path / "r.json"
    code = testing.main(["--kinds", "thread,process", "--ready-n", "2", "--targets", "session",
                         "--select", "test_values_come_back_in_order or test_headers_round_trip",
                         "--json", str(out_json)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "Start to ready" in out and 'Broker(kind="process")' in out, out
    assert "suite session: " in out and "2 passed, 0 failed, 0 errors, 0 skipped of 2" in out, out
    import json

    results = json.loads(out_json.read_text())
    assert len(results["ready"]["thread"]) == len(results["ready"]["process"]) == 2
    assert all(0 < t < 30 for t in results["ready"]["thread"] + results["ready"]["process"])
    # the probe read the session broker's threads before the last teardown: the bound of what
    # any broker could reach comes from it
    probe = results["suite"]["session"]["probe"]
    assert "main" in probe["threads"], probe
    assert any(name.startswith("oncelog-broker-") for name in probe["threads"]), probe
    assert 0 < testing.broker_cpu(probe) < probe["process_cpu"], probe
