"""docs/COMPATIBILITY.md, the committed copy of the last client-version matrix run
(build/compat-java.json, written by tests/kafka/test_client_versions.py):
``python -m tests.kafka.compat_report`` writes it; test_compat_report.py keeps it complete."""

from __future__ import annotations

import json
import os

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN = os.path.join(REPO, "build", "compat-java.json")
COMMITTED = os.path.join(REPO, "docs", "COMPATIBILITY.md")
CHECKS = ["admin", "idempotent", "transactional", "group-classic", "group-consumer"]

HEADER = """# Client compatibility

Generated from the last run of `tests/kafka/test_client_versions.py` by
`python -m tests.kafka.compat_report`. Each client version runs
`tests/kafka/compat/ClientCell.java`, compiled against that version's own `kafka-clients` jar
(fetched with Maven into `~/.cache/oncelog/kafka-clients/<version>`), against a fresh oncelog
broker and against a one-node Apache Kafka 4.4 in the same test: admin basics, an idempotent
producer, a transactional producer with a read_committed consumer, a consumer group with committed
offsets (classic, and `group.protocol=consumer` from 4.0). A cell says `ok` or the failure; CI fails
when oncelog's cell differs from Kafka's.

| client | version | check | Apache Kafka 4.4 | oncelog |
|---|---|---|---|---|
"""


def _cell(result: dict | None) -> str:
    if result is None:
        return "—"
    return "ok" if result["ok"] else "fails: " + result["detail"].replace("|", "/")[:120]


def render(results: dict) -> str:
    rows = []
    for version in sorted(results, key=lambda v: tuple(int(x) for x in v.split("."))):
        both = results[version]
        for check in CHECKS:
            k, o = both["apache-kafka"].get(check), both["oncelog"].get(check)
            if k is None and o is None:
                continue
            rows.append(f"| kafka-clients (Java) | {version} | {check} | {_cell(k)} | {_cell(o)} |")
    return HEADER + "\n".join(rows) + "\n"


def versions_listed(text: str) -> set[str]:
    return {line.split("|")[2].strip() for line in text.splitlines() if line.startswith("| kafka-clients")}


def write() -> None:
    with open(RUN) as f:
        results = json.load(f)
    with open(COMMITTED, "w") as f:
        f.write(render(results))
    print(f"wrote {COMMITTED} from {RUN}")


if __name__ == "__main__":
    write()
