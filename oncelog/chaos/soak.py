"""Totals of several chaos reports: ``python -m oncelog.chaos.soak DIR`` (the soak's reports)."""

from __future__ import annotations

import collections
import json
import pathlib
import sys


def totals(paths: list[pathlib.Path]) -> dict:
    runs, ops, faults, anomalies = 0, collections.Counter(), collections.Counter(), collections.Counter()
    failed = []
    for path in paths:
        r = json.loads(path.read_text())
        runs += 1
        for f, by_type in r["result"]["info"]["ops"].items():
            ops[f] += sum(by_type.values())
        faults.update(r["fault_counts"])
        for name, c in r["result"]["classes"].items():
            anomalies[name] += c["count"]
        if not r["ok"]:
            failed.append(r["seed"])
    return {"runs": runs, "operations": dict(ops), "operations_total": sum(ops.values()),
            "faults": dict(sorted(faults.items())), "faults_total": sum(faults.values()),
            "anomalies": dict(anomalies), "failed_seeds": failed}


if __name__ == "__main__":
    print(json.dumps(totals(sorted(pathlib.Path(sys.argv[1]).glob("*.json"))), indent=1))
