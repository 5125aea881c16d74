"""The layering of oncelog, checked on the ``ast`` import graph (no imports executed).

Floors, bottom up — a module imports only from its own floor or below:

    config, errors, state_machine, faults, notices,    settings and shared vocabulary
    cachedir
    protocol                                            bytes <-> messages, no I/O
    storage                                             segments and logs: bytes and offsets only
    partition                                           one writer per partition log; internal topics
    metadata                                            topics, live configs, group configs, producer-id
                                                        blocks, the ACL and SCRAM documents: one store
    groups | txn | security                             coordinators (never each other: callbacks);
                                                        authentication and authorization
    apis                                                one module per Kafka API
    cluster                                             a cluster's nodes: placement (its package, a
                                                        vocabulary every floor may use), the links,
                                                        markers and metadata following between nodes
    broker -> server -> cli                             state and dispatch, sockets, command line

    client (protocol below it) -> spark -> pipeline, demo, audit, admin: the client side, which
    reaches a broker only over the network, so it works against any Kafka cluster.

Every rule is "X never imports Y" on every import statement, including those inside functions
and ``if TYPE_CHECKING`` blocks (a lazy import still couples the floors). Besides: no import cycle
among modules at import time.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent / "oncelog"

BROKER_SIDE = ("oncelog.storage", "oncelog.partition", "oncelog.metadata", "oncelog.groups", "oncelog.txn",
               "oncelog.apis", "oncelog.broker", "oncelog.server")
CLIENT_SIDE = ("oncelog.client", "oncelog.spark", "oncelog.pipeline", "oncelog.demo", "oncelog.audit",
               "oncelog.admin", "oncelog.tools", "oncelog.spark_kafka_jars")
ABOVE_STORAGE = ("oncelog.partition", "oncelog.metadata", "oncelog.groups", "oncelog.txn", "oncelog.apis",
                 "oncelog.broker", "oncelog.server", "oncelog.cli")

# (importer prefix, forbidden prefixes, why)
NEVER = [
    ("oncelog.config", ("oncelog.",), "settings are the bottom floor: config imports only config"),
    ("oncelog.cachedir", ("oncelog.",), "the user's cache folder, for every floor: standard library only"),
    ("oncelog.protocol", BROKER_SIDE + CLIENT_SIDE + ("oncelog.cli",), "the codec knows no component"),
    ("oncelog.storage", ABOVE_STORAGE + CLIENT_SIDE, "storage knows bytes and offsets only"),
    ("oncelog.storage", ("oncelog.config.registry", "oncelog.config.group_configs"),
     "storage never imports config.registry (nor group configs): the config model is the metadata's; "
     "a log is handed its LogConfig"),
    ("oncelog.partition", ABOVE_STORAGE[1:] + CLIENT_SIDE, "the partition layer serves the coordinators"),
    ("oncelog.metadata", ABOVE_STORAGE[2:] + ("oncelog.security", "oncelog.cli") + CLIENT_SIDE,
     "the metadata is a floor below the coordinators: it reaches the logs through TopicLogs, wired by the broker"),
    ("oncelog.groups", ("oncelog.txn", "oncelog.apis", "oncelog.broker", "oncelog.server") + CLIENT_SIDE,
     "the coordinators meet only through callbacks wired in broker.py"),
    ("oncelog.txn", ("oncelog.groups", "oncelog.apis", "oncelog.broker", "oncelog.server") + CLIENT_SIDE,
     "the coordinators meet only through callbacks wired in broker.py"),
    ("oncelog.security", ("oncelog.groups", "oncelog.txn", "oncelog.apis", "oncelog.broker", "oncelog.server")
     + CLIENT_SIDE, "authentication and ACLs know principals and resources, not coordinators or handlers"),
    ("oncelog.security", ("oncelog.storage", "oncelog.partition"),
     "the ACL and SCRAM documents are metadata: security keeps the rules, the store keeps the data"),
    ("oncelog.apis", ("oncelog.broker", "oncelog.server", "oncelog.cli") + CLIENT_SIDE,
     "handlers see the broker through BrokerView only"),
    ("oncelog.broker", ("oncelog.server", "oncelog.cli") + CLIENT_SIDE, "the broker has no sockets"),
    ("oncelog.cluster", ("oncelog.apis", "oncelog.broker", "oncelog.server", "oncelog.cli", "oncelog.groups",
                         "oncelog.txn") + CLIENT_SIDE,
     "a cluster node talks to the others in protocol requests; it reaches the broker only as what the broker "
     "hands it"),
    ("oncelog.client", BROKER_SIDE + ("oncelog.spark", "oncelog.pipeline", "oncelog.demo", "oncelog.cli"),
     "the client reaches a broker only over the network"),
    ("oncelog.spark", BROKER_SIDE + ("oncelog.pipeline", "oncelog.demo", "oncelog.audit", "oncelog.admin",
                                     "oncelog.cli", "oncelog.config"),
     "the connector talks to Kafka only through oncelog.client, so it works against any cluster"),
    ("oncelog.pipeline", BROKER_SIDE + ("oncelog.cli",), "the pipeline starts brokers as processes"),
    ("oncelog.demo", BROKER_SIDE, "the demo starts brokers as processes"),
    ("oncelog.audit", BROKER_SIDE, "the auditor is an independent reader over the network"),
    ("oncelog.chaos", BROKER_SIDE, "the chaos tool reaches brokers over the network and as processes"),
    ("oncelog.admin", BROKER_SIDE, "admin commands speak the protocol"),
    ("oncelog.top", BROKER_SIDE, "the on-call view reads any Kafka cluster over the protocol"),
    ("oncelog.metrics", ("oncelog.server", "oncelog.cli") + CLIENT_SIDE,
     "the broker's metrics are counted by the server and read from the broker's state at a scrape"),
]


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in ROOT.rglob("*.py")}


def _imports(name: str, path: pathlib.Path, *, top_level_only: bool = False) -> set[str]:
    """The oncelog modules (or packages) a module imports."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    if top_level_only:
        nodes = []
        for node in tree.body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test):
                continue
            nodes.extend(ast.walk(node) if isinstance(node, (ast.If, ast.Try)) else [node])
    else:
        nodes = list(ast.walk(tree))
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("oncelog"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("oncelog"):
                for alias in node.names:
                    candidate = f"{target}.{alias.name}"
                    found.add(candidate if candidate in MODULES else target)
    return found


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix if prefix.endswith(".") else prefix + ".")


@pytest.mark.parametrize("importer, forbidden, why", NEVER, ids=[rule[0] for rule in NEVER])
def test_never_imports(importer, forbidden, why):
    broken = []
    for name, path in sorted(MODULES.items()):
        if not _under(name, importer):
            continue
        for target in sorted(_imports(name, path)):
            if _under(target, importer):
                continue
            if any(_under(target, f) if not f.endswith(".") else target.startswith(f) for f in forbidden):
                broken.append(f"{name} imports {target}")
    assert not broken, f"{why}:\n" + "\n".join(broken)


def test_rules_cover_every_package():
    tops = {".".join(name.split(".")[:2]) for name in MODULES if name != "oncelog"}
    ruled = {rule[0] for rule in NEVER}
    # The composition roots and small shared modules need no rule of their own.
    free = {"oncelog.__main__", "oncelog.cli", "oncelog.server", "oncelog.errors", "oncelog.state_machine",
            "oncelog.faults", "oncelog.notices", "oncelog.process",
            "oncelog.tools", "oncelog.spark_kafka_jars",
            "oncelog.testing"}  # a composition root too: a broker in the test's process, read through clients
    assert tops - ruled - free == set()


def test_no_import_cycle_at_import_time():
    graph = {name: {t for t in _imports(name, path, top_level_only=True) if t in MODULES}
             for name, path in MODULES.items()}
    # A package's __init__ importing its own submodules is not a cycle a reader has to follow.
    for name in graph:
        graph[name] = {t for t in graph[name] if not (MODULES[name].name == "__init__.py" and _under(t, name))}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert cycles == []


def test_the_graph_sees_imports():
    """The checker reads real edges (else every rule would pass on an empty graph)."""
    assert "oncelog.config.settings" in _imports("oncelog.broker", MODULES["oncelog.broker"])
    assert "oncelog.client.wire" in _imports("oncelog.admin", MODULES["oncelog.admin"])  # inside a function
    assert len(MODULES) > 100
