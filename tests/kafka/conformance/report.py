"""docs/conformance.md: what the conformance suite holds oncelog to, then the committed copy of the last
conformance run's table (build/conformance.md). ``python -m tests.kafka.conformance.report`` rewrites
everything below the file's MARKER line with the run's table and keeps the prose above it;
:func:`committed_rows` reads its verdicts back for test_registry.py."""

from __future__ import annotations

import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
COMMITTED = os.path.join(REPO, "docs", "conformance.md")
RUN = os.path.join(REPO, "build", "conformance.md")

MARKER = ("<!-- Everything below this line is written by `python -m tests.kafka.conformance.report` "
          "from build/conformance.md. -->")

# Used only when docs/conformance.md is missing or has lost its MARKER line.
HEADER = """# Conformance with Apache Kafka

Each scenario below is a short conversation held, in the same test run, with a one-node Apache
Kafka 4.4 (KRaft, from Maven Central) and with oncelog, through the project's protocol client.
Run: `pytest tests/kafka/conformance`; then `python -m tests.kafka.conformance.report`.

"""


def write() -> None:
    with open(RUN) as f:
        body = f.read()
    prose = HEADER + MARKER + "\n"
    if os.path.exists(COMMITTED):
        with open(COMMITTED) as f:
            text = f.read()
        if MARKER in text:
            prose = text[:text.index(MARKER)] + MARKER + "\n"
    with open(COMMITTED, "w") as f:
        f.write(prose + "\n" + body)


def committed_rows() -> dict[str, str]:
    """scenario name -> its 'equal?' cell, from docs/conformance.md."""
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
