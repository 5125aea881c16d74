"""``oncelog chaos --share-consumers``: share-group members (KIP-932) under broker SIGKILLs.

A short run (15 s of faults; about 45 s in all, the final drain waiting out the record locks) of
the usual workload plus two share consumers in explicit acknowledgement mode (ACCEPT, a RELEASE
on the first delivery of values ending in 3, a REJECT of values ending in 7), the broker SIGKILLed and restarted by the nemesis, then the final reader and
the share group's final drain. The checker's share classes must find nothing: no record accepted
twice or redelivered after a durable reject, none lost, no delivery count past the limit plus the
crashes, no stale acknowledgement answered ok, no aborted record given out. The classes' rules
are tested on hand-made histories in ``test_checker_share.py``.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.e2e

from oncelog.chaos import nemesis
from oncelog.chaos.checker import SHARE_FAILING
from oncelog.chaos.run import ROLES_DEFAULT, ChaosOptions, ChaosRun

SEED = 142  # 15 s of kill faults over these slots: a share consumer SIGKILLed, then the broker twice


def test_share_consumers_under_broker_kills_find_no_anomaly(tmp_path):
    slots = sorted([f"{r}-{i}" for r, n in ROLES_DEFAULT.items() for i in range(n)] + ["share-0", "share-1"])
    plan = nemesis.schedule(SEED, ["kill"], 15, slots, broker=True)
    assert [f.target for f in plan] == ["share-0", "broker", "broker"], plan
    run = ChaosRun(ChaosOptions(duration_s=15, faults=("kill",), seed=SEED, work_dir=str(tmp_path / "work"),
                                share_consumers=2, final_deadline_s=30,
                                stop_timeout_s=8), say=lambda text: None)
    report = run.execute()
    classes = report["result"]["classes"]
    failing = {name: c["count"] for name, c in classes.items() if c["failing"] and c["count"]}
    assert failing == {} and report["ok"], (failing, {n: classes[n]["anomalies"][:2] for n in failing})
    assert report["fault_counts"] == {"kill broker": 2, "kill share": 1}, report["fault_counts"]
    share = report["result"]["info"]["share"]
    assert set(SHARE_FAILING) <= classes.keys()
    assert share["final_drain"] and share["lost"] == 0 and share["broker_crashes"] >= 2, share
    assert share["deliveries"] > 500 and all(n > 0 for n in share["acknowledgements"].values()), share
