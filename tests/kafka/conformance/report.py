"""CONFORMANCE.md, the committed copy of the last conformance run's table (build/conformance.md):
``python -m tests.kafka.conformance.report`` writes it; :func:`committed_rows` reads its verdicts
back for test_registry.py."""

from __future__ import annotations

import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
COMMITTED = os.path.join(REPO, "CONFORMANCE.md")
RUN = os.path.join(REPO, "build", "conformance.md")

HEADER = """# Conformance with Apache Kafka

Each scenario below is a short conversation held, in the same test run, with a one-node Apache
Kafka 4.4 (KRaft, from Maven Central) and with oncelog, through the project's protocol client
(`oncelog.client.wire`, kio's request classes at the versions the scenario names). Both answers
are normalised (opaque ids numbered by first appearance, records decoded, timestamps, node ids
and addresses dropped; see `tests/kafka/conformance/framework.py`) and compared field by field.
A difference is either fixed in oncelog or declared beside its scenario with its reason; an
undeclared difference fails CI, and so does a declared one that has gone.

Run: `pytest tests/kafka/conformance` (part of the test command; needs Java 17 and Maven).
The run writes this table to `build/conformance.md`; `python -m tests.kafka.conformance.report`
copies it here. The Apache Kafka / oncelog columns show the whole answer when they agree and
the first differing field when they do not.

"""


def write() -> None:
    with open(RUN) as f:
        body = f.read()
    with open(COMMITTED, "w") as f:
        f.write(HEADER + body)


def committed_rows() -> dict[str, str]:
    """scenario name -> its 'equal?' cell, from CONFORMANCE.md."""
    rows = {}
    if not os.path.exists(COMMITTED):
        return rows
    with open(COMMITTED) as f:
        for line in f:
            if line.startswith("| `"):
                cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
                rows[cells[0].strip("`")] = cells[-1]
    return rows


if __name__ == "__main__":
    write()
    print(f"wrote {COMMITTED} from {RUN}", file=sys.stderr)
