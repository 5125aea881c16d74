"""docs/COMPATIBILITY.md, the committed copy of the last client-version matrix run
(build/compat.json, written by tests/kafka/test_client_versions.py) and of the last exactly-once
engine runs (build/engines.json, written through tests/kafka/engine_results.py by the Flink,
Kafka Streams and Kafka Connect tests): ``python -m tests.kafka.compat_report`` writes it;
test_compat_report.py keeps it complete."""

from __future__ import annotations

import json
import os

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN = os.path.join(REPO, "build", "compat.json")
ENGINES_RUN = os.path.join(REPO, "build", "engines.json")
COMMITTED = os.path.join(REPO, "docs", "COMPATIBILITY.md")
CHECKS = ["admin", "idempotent", "compressed", "transactional", "group-classic", "group-consumer"]

HEADER = """# Client compatibility

Generated from the last run of `tests/kafka/test_client_versions.py` by
`python -m tests.kafka.compat_report`. Each Java client version runs
`tests/kafka/compat/ClientCell.java`, compiled against that version's own `kafka-clients` jar
(fetched with Maven into `~/.cache/oncelog/kafka-clients/<version>`); each Python client version
runs `tests/kafka/compat/client_cell.py` in a venv holding only that version
(`~/.cache/oncelog/pyclients/`; confluent-kafka 1.9.2 on CPython 3.10, it has no newer wheels).
Each against a fresh oncelog broker and against a one-node Apache Kafka 4.4 in the same test:
admin basics, an idempotent producer, a transactional producer with a read_committed consumer, a
consumer group with committed offsets (classic, and `group.protocol=consumer` where the client has
it). A cell says `ok`, `—` (the client version has no such feature), or the failure; CI fails when
oncelog's cell differs from Kafka's.

| client | version | check | Apache Kafka 4.4 | oncelog |
|---|---|---|---|---|
"""


def _cell(result: dict | None) -> str:
    if result is None or result["ok"] is None:
        return "—"
    return "ok" if result["ok"] else "fails: " + result["detail"].replace("|", "/")[:120]


def _order(key: str):
    client, version = key.split("|")
    return (client != "kafka-clients (Java)", client, tuple(int(x) for x in version.split(".") if x.isdigit()))


ENGINES_HEADER = """
## Exactly-once engines

Generated from the last run of `tests/kafka/test_flink.py`, `tests/kafka/test_kafka_streams.py`
and `tests/kafka/test_kafka_connect.py`. Each test runs the engine's exactly-once mode against a
fresh oncelog broker and against the one-node Apache Kafka 4.4, with a failure (an exception, or a
process SIGKILLed with its whole process group) and a restart or takeover, then an independent
confluent-kafka reader at read_committed checks the output: every record once, none missing, no
transaction left open. A cell says `ok` or the failure.

| engine | version | check | Apache Kafka 4.4 | oncelog |
|---|---|---|---|---|
"""


def _engine_order(key: str):
    engine, version, check = key.split("|")
    return (engine, tuple(int(x) for x in version.split(" ")[0].split(".") if x.isdigit()), version, check)


def render_engines(results: dict) -> str:
    rows = [f"| {k.split('|')[0]} | {k.split('|')[1]} | {k.split('|')[2]} | "
            f"{_cell(results[k].get('apache-kafka'))} | {_cell(results[k].get('oncelog'))} |"
            for k in sorted(results, key=_engine_order)]
    return ENGINES_HEADER + "\n".join(rows) + "\n"


def engines_listed(text: str) -> set[tuple[str, str, str]]:
    """{(engine, version, check)} of the engines table's rows."""
    part = text.split(ENGINES_HEADER.strip().splitlines()[0], 1)
    if len(part) < 2:
        return set()
    rows = [line.split("|") for line in part[1].splitlines()
            if line.startswith("| ") and not line.startswith("| engine")]
    return {(r[1].strip(), r[2].strip(), r[3].strip()) for r in rows}


def render(results: dict) -> str:
    rows = []
    for key in sorted(results, key=_order):
        client, version = key.split("|")
        both = results[key]
        for check in CHECKS:
            k, o = both["apache-kafka"].get(check), both["oncelog"].get(check)
            if k is None and o is None:
                continue
            rows.append(f"| {client} | {version} | {check} | {_cell(k)} | {_cell(o)} |")
    return HEADER + "\n".join(rows) + "\n"


def versions_listed(text: str) -> set[tuple[str, str]]:
    """{(client, version)} of the table's rows."""
    text = text.split(ENGINES_HEADER.strip().splitlines()[0], 1)[0]
    rows = [line.split("|") for line in text.splitlines() if line.startswith("| ") and not line.startswith("| client")]
    return {(r[1].strip(), r[2].strip()) for r in rows}


def write() -> None:
    with open(RUN) as f:
        results = json.load(f)
    with open(ENGINES_RUN) as f:
        engines = json.load(f)
    with open(COMMITTED, "w") as f:
        f.write(render(results) + render_engines(engines))
    print(f"wrote {COMMITTED} from {RUN} and {ENGINES_RUN}")


if __name__ == "__main__":
    write()
