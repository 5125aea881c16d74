"""The metadata layer on its own: old data directories open unchanged, a second process follows
the writer, a SIGKILL in the middle of metadata changes loses nothing that was answered, and a
failed write changes nothing in memory."""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import signal
import subprocess
import sys
import tarfile
import time

import pytest

from oncelog import errors
from oncelog.config import settings
from oncelog.metadata import Metadata
from oncelog.metadata.store import MetadataStore
from oncelog.security.acls import AclStore
from oncelog.security.scram import ScramCredentialStore
from tests.broker_parts import open_parts

DATA = pathlib.Path(__file__).resolve().parent.parent / "data"
ROOT = DATA.parent.parent


def _unpack(tmp_path, name: str) -> tuple[pathlib.Path, dict]:
    with tarfile.open(DATA / name) as tar:
        tar.extractall(tmp_path, filter="data")
    return tmp_path / "data", json.loads((tmp_path / "expected.json").read_text())


def test_a_data_directory_written_before_the_metadata_layer_opens_unchanged(tmp_path):
    """tests/data/datadir-a82802e.tar.gz: written by the oncelog of a82802e (the script beside
    it), with a crash's leftovers added (a partition directory no topic names, a half-written
    ``topics.json.tmp``). Every topic keeps its id, count and overrides; the dynamic broker
    configs, group configs, ACLs, SCRAM credentials, producer-id blocks and the records are
    all there; the leftovers are gone; the documents are read, not rewritten."""
    data_dir, expected = _unpack(tmp_path, "datadir-a82802e.tar.gz")
    before = {name: (data_dir / name).read_bytes() for name in ("topics.json", "broker-configs.json",
                                                                 "group-configs.json", "acls.json")}
    parts = open_parts(str(data_dir))
    md = parts.metadata
    try:
        assert md.cluster_id == expected["cluster_id"] and md.internal_placement == expected["internal_placement"]
        assert {t.name: {"topic_id": str(t.topic_id), "partitions": t.partitions, "overrides": t.overrides}
                for t in md.topics.values()} == expected["topics"]
        assert md.configs.layers.dynamic_default == expected["dynamic_default"]
        assert md.configs.layers.dynamic_broker == expected["dynamic_broker"]
        # The live values come from the stored layers.
        assert md.configs.compaction_interval_ms == 20000 and md.configs.producer_id_expiration_ms == 7200000
        assert md.topics.get("events.v1").config.retention_ms == 86400000  # the broker-level layer
        assert md.topics.get("orders").config.retention_ms == 3600000  # its own override
        assert {g: md.group_configs.get(g) for g in md.group_configs.group_ids()} == expected["group_configs"]
        assert md.producer_ids.allocate() >= expected["next_producer_id_at_least"]
        assert [str(a) for a in AclStore(md.store)] == expected["acls"]
        assert ScramCredentialStore(md.store).users() == expected["scram_users"]
        assert parts.partitions.get("orders", 1).log.log_end_offset == expected["orders_1_end"]
        assert not (data_dir / "halfmade-0").exists()  # an interrupted create's directory
        after = {name: (data_dir / name).read_bytes() for name in before}
        assert after == before
    finally:
        asyncio.run(parts.close())


def test_a_follower_sees_the_writers_changes_and_writes_nothing(tmp_path):
    data_dir = str(tmp_path / "data")
    writer = open_parts(data_dir)
    try:
        follower = Metadata.follower(data_dir)
        assert follower.cluster_id == writer.metadata.cluster_id and follower.refresh() == []

        writer.metadata.topics.create_topic("t", 3, configs={"retention.ms": "1000"})
        writer.metadata.configs.set_broker_configs(False, {"min.insync.replicas": "1", "log.retention.ms": "5000"},
                                                   validate_only=False)
        writer.metadata.group_configs.replace("g", {"consumer.session.timeout.ms": "50000"}, validate_only=False)
        listing = {e: os.stat(os.path.join(data_dir, e)).st_ino for e in os.listdir(data_dir)}
        assert sorted(follower.refresh()) == ["broker-configs.json", "group-configs.json", "topics.json"]
        t = follower.topics.get("t")
        assert (t.topic_id, t.partitions, t.config.retention_ms) == (writer.metadata.topics.get("t").topic_id, 3, 1000)
        assert int(follower.configs.value("log.retention.ms")) == 5000
        assert follower.group_configs.get("g") == {"consumer.session.timeout.ms": "50000"}
        with pytest.raises(RuntimeError, match="follower"):
            follower.topics.create_topic("u", 1)

        # The follower wrote nothing: every entry is the one the writer left.
        assert {e: os.stat(os.path.join(data_dir, e)).st_ino for e in os.listdir(data_dir)} == listing
        asyncio.run(writer.metadata.topics.delete_topic("t"))
        assert follower.refresh() == ["topics.json"] and "t" not in follower.topics
    finally:
        asyncio.run(writer.close())


def test_a_failed_metadata_write_changes_nothing(tmp_path):
    """A full disk, played by a directory where the document's temporary file must go: every
    change fails with KAFKA_STORAGE_ERROR and memory stays as the disk says."""
    data_dir = tmp_path / "data"
    parts = open_parts(str(data_dir))
    md = parts.metadata
    try:
        md.topics.create_topic("t", 1)
        (data_dir / "topics.json.tmp").mkdir()
        (data_dir / "broker-configs.json.tmp").mkdir()
        with pytest.raises(errors.KafkaStorageError):
            md.topics.create_topic("u", 2)
        assert "u" not in md.topics and not (data_dir / "u-0").exists() and parts.logs.get_log("u", 0) is None
        with pytest.raises(errors.KafkaStorageError):
            md.topics.create_partitions("t", 3)
        assert md.topics.get("t").partitions == 1 and not (data_dir / "t-1").exists()
        with pytest.raises(errors.KafkaStorageError):
            md.topics.alter_topic_configs("t", {"retention.ms": "10"}, validate_only=False)
        assert md.topics.get("t").overrides == {} and parts.logs.get_log("t", 0).config.retention_ms != 10
        with pytest.raises(errors.KafkaStorageError):
            asyncio.run(md.topics.delete_topic("t"))
        assert "t" in md.topics and parts.logs.get_log("t", 0) is not None
        with pytest.raises(errors.KafkaStorageError):
            md.configs.set_broker_configs(False, {"min.insync.replicas": "1", "log.retention.ms": "5"},
                                          validate_only=False)
        assert "log.retention.ms" not in md.configs.layers.dynamic_default
    finally:
        asyncio.run(parts.close())


def _churn_ops():
    """The changes the churning process makes, in order (its program below follows this)."""
    i = 0
    while True:
        yield ("created", f"t{i}", 1 + i % 3, 1000 + i)
        if i % 3 == 2:
            yield ("grown", f"t{i}", 5)
        if i % 4 == 3:
            yield ("deleted", f"t{i - 1}")
        yield ("config", 10000 + i)
        i += 1


CHURN = r'''
import asyncio, sys
from tests.broker_parts import open_parts
from tests.metadata.test_metadata import _churn_ops

async def main():
    parts = open_parts(sys.argv[1], fsync="always")
    md = parts.metadata
    for op in _churn_ops():
        if op[0] == "created":
            md.topics.create_topic(op[1], op[2], configs={"retention.ms": str(op[3])})
        elif op[0] == "grown":
            md.topics.create_partitions(op[1], op[2])
        elif op[0] == "deleted":
            await md.topics.delete_topic(op[1])
        else:
            md.configs.set_broker_configs(False, {"min.insync.replicas": "1", "log.cleaner.backoff.ms": str(op[1])},
                                          validate_only=False)
        print(*op, flush=True)

asyncio.run(main())
'''


def _state(ops) -> tuple[dict[str, tuple[int, int]], int]:
    topics: dict[str, tuple[int, int]] = {}
    backoff = settings.default("log.cleaner.backoff.ms")
    for op in ops:
        if op[0] == "created":
            topics[op[1]] = (op[2], op[3])
        elif op[0] == "grown":
            topics[op[1]] = (op[2], topics[op[1]][1])
        elif op[0] == "deleted":
            del topics[op[1]]
        else:
            backoff = op[1]
    return topics, backoff


@pytest.mark.e2e
@pytest.mark.parametrize("delay_s", [0.3, 0.7, 1.3])
def test_sigkill_in_the_middle_of_metadata_changes_loses_nothing_answered(tmp_path, delay_s):
    """A process creating, growing and deleting topics and changing a broker config in a loop
    is SIGKILLed; the data directory then opens in the state of every answered change — or of
    those and the one in flight, whole — with no partition directory that no topic names."""
    data_dir = tmp_path / "data"
    proc = subprocess.Popen([sys.executable, "-c", CHURN, str(data_dir)], cwd=ROOT, stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    lines: list[str] = []
    deadline = time.monotonic() + 60
    start = None
    try:
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            start = start or time.monotonic()
            if time.monotonic() - start >= delay_s and len(lines) >= 5:
                os.kill(proc.pid, signal.SIGKILL)
                break
    finally:
        proc.kill()
        lines += proc.stdout.read().splitlines()  # what it answered before the kill landed
        proc.wait()
    answered = [line.split() for line in lines if line.strip()]
    ops = _churn_ops()
    done = [next(ops) for _ in answered]
    assert [[str(x) for x in op] for op in done] == answered  # the process made the changes in this order
    in_flight = next(ops)
    states = [_state(done), _state(done + [in_flight])]

    parts = open_parts(str(data_dir))
    md = parts.metadata
    try:
        found = ({t.name: (t.partitions, t.config.retention_ms) for t in md.topics.values() if t.name.startswith("t")},
                 md.configs.compaction_interval_ms)
        assert found in states, (found, states, in_flight)
        expected_dirs = {f"{t.name}-{p}" for t in md.topics.values() for p in range(t.partitions)}
        assert {e for e in os.listdir(data_dir) if (data_dir / e).is_dir()} == expected_dirs
    finally:
        asyncio.run(parts.close())
