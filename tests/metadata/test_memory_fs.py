"""The metadata store on a filesystem that can crash (storage.files.MemoryFileSystem): after every
answered change a power cut keeps it; a change whose write fails is not answered and not kept;
producer ids are never handed out twice across a crash."""

from __future__ import annotations

import asyncio

import pytest

from oncelog import errors
from oncelog.metadata import Metadata
from oncelog.metadata.producer_ids import BLOCK_SIZE
from oncelog.security.acls import AclBinding, AclStore
from oncelog.security.scram import ScramCredentialStore
from oncelog.storage.files import SECRET_MODE, MemoryFileSystem

DIR = "/data"


class NoLogs:
    """The logs half of a topic change, as the metadata sees it: nothing to do here."""

    def create_logs(self, name, partitions, config, *, internal):
        pass

    def remove_logs(self, name, start):
        pass

    async def delete_logs(self, name):
        pass

    def update_config(self, name, config):
        pass


def _open(fs: MemoryFileSystem) -> Metadata:
    md = Metadata(DIR, node_id=1, fs=fs)
    md.topics.logs = NoLogs()
    md.open()
    return md


def _image(md: Metadata) -> dict:
    return {
        "cluster": md.cluster_id,
        "topics": {t.name: (str(t.topic_id), t.partitions, dict(t.overrides)) for t in md.topics.values()},
        "default": dict(md.configs.layers.dynamic_default), "broker": dict(md.configs.layers.dynamic_broker),
        "groups": {g: md.group_configs.get(g) for g in md.group_configs.group_ids()},
    }


CHANGES = [
    lambda md: md.topics.create_topic("a", 2, configs={"retention.ms": "1000"}),
    lambda md: md.topics.create_partitions("a", 4),
    lambda md: md.configs.set_broker_configs(False, {"min.insync.replicas": "1", "log.retention.ms": "9"},
                                             validate_only=False),
    lambda md: md.topics.alter_topic_configs("a", {"retention.ms": "2000"}, validate_only=False),
    lambda md: md.group_configs.replace("g", {"consumer.heartbeat.interval.ms": "7000"}, validate_only=False),
    lambda md: md.topics.create_topic("b", 1),
    lambda md: asyncio.run(md.topics.delete_topic("a")),
    lambda md: md.configs.set_broker_configs(True, {"log.retention.ms": "99"}, validate_only=False),
]


@pytest.mark.parametrize("upto", range(1, len(CHANGES) + 1))
def test_a_crash_after_an_answered_change_keeps_it(upto):
    fs = MemoryFileSystem()
    md = _open(fs)
    for change in CHANGES[:upto]:
        change(md)
    answered = _image(md)
    fs.crash()
    assert _image(_open(fs)) == answered


@pytest.mark.parametrize("at", range(len(CHANGES)))
@pytest.mark.parametrize("failure", ["fail_next_write", "fail_next_sync"])
def test_a_change_whose_write_fails_is_neither_answered_nor_kept(at, failure):
    """The write of the temporary file, or its fsync, fails (a full disk, an I/O error): the
    change raises KAFKA_STORAGE_ERROR, memory is as before, and so is what a crash keeps."""
    fs = MemoryFileSystem()
    md = _open(fs)
    for change in CHANGES[:at]:
        change(md)
    before = _image(md)
    setattr(fs, failure, True)
    with pytest.raises(errors.KafkaStorageError):
        CHANGES[at](md)
    assert _image(md) == before
    fs.crash()
    assert _image(_open(fs)) == before


def test_producer_ids_are_never_handed_out_twice_across_crashes():
    fs = MemoryFileSystem()
    seen: set[int] = set()
    for round_ in range(5):
        md = _open(fs)
        ids = [md.producer_ids.allocate() for _ in range(BLOCK_SIZE + 7 * round_ + 1)]
        assert not seen & set(ids), "a producer id was handed out again after a crash"
        seen.update(ids)
        fs.crash()


def test_a_block_that_cannot_be_recorded_is_not_taken():
    fs = MemoryFileSystem()
    md = _open(fs)
    fs.fail_next_write = True
    with pytest.raises(errors.CoordinatorLoadInProgress):
        md.producer_ids.allocate()
    assert md.producer_ids.allocate() == 0  # the next call tries again


def test_secrets_are_0600_and_survive_a_crash():
    fs = MemoryFileSystem()
    md = _open(fs)
    acls = AclStore(md.store, enabled=True)
    acls.create([AclBinding.from_codes(2, "orders", 3, "User:alice", "*", 3, 3)])
    ScramCredentialStore(md.store).set_password("alice", "SCRAM-SHA-256", "pw")
    assert fs.mode(f"{DIR}/acls.json") == SECRET_MODE and fs.mode(f"{DIR}/scram-credentials.json") == SECRET_MODE
    fs.crash()
    md = _open(fs)
    assert len(AclStore(md.store, enabled=True)) == 1 and ScramCredentialStore(md.store).users() == ["alice"]
