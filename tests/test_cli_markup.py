"""The admin commands print names clients chose — group and transactional ids — as
they are: a name that looks like rich's markup (``evil[/]`` would raise MarkupError, ``[red]x``
would restyle the line) is neither a crash nor a style."""

from __future__ import annotations

import subprocess
import sys

import confluent_kafka as ck
import pytest

from .helpers import create_topic

pytestmark = pytest.mark.e2e

GROUP, TXN = "evil[/]", "tx[bold red]x"  # (a topic name cannot hold brackets: Kafka's rule)


def oncelog(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "oncelog", *args], capture_output=True, text=True, timeout=120,
                          env={"COLUMNS": "250", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_names_that_look_like_markup_are_printed_as_they_are(broker):
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "plain", 1)
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    c.commit(offsets=[ck.TopicPartition("plain", 0, 0)], asynchronous=False)
    c.close()
    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": TXN})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("plain", value=b"open")
    assert p.flush(30) == 0
    try:
        assert GROUP in oncelog("groups", "--bootstrap-server", bootstrap, "list")
        assert f"group {GROUP}:" in oncelog("groups", "--bootstrap-server", bootstrap, "describe", GROUP)
        assert TXN in oncelog("transactions", "--bootstrap-server", bootstrap, "list")
        assert TXN in oncelog("transactions", "--bootstrap-server", bootstrap, "describe", TXN)
    finally:
        p.abort_transaction(30)
