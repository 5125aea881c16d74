"""Secrets on disk: ``scram-credentials.json`` (salt, iterations, StoredKey,
ServerKey — enough for an offline dictionary attack) and ``acls.json`` are 0600 whatever the
process umask, written through a temporary file created 0600 and renamed, so no moment exists
when either is readable by others; a file an older oncelog left 0644 is made 0600 at start; the
data directory oncelog creates is 0700."""

from __future__ import annotations

import os
import stat

import pytest
from confluent_kafka.admin import (
    AclBinding, AclOperation, AclPermissionType, AdminClient, ResourcePatternType, ResourceType,
    ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion,
)

from oncelog.process import BrokerProcess
from oncelog.security.acls import AclStore
from oncelog.security.scram import ScramCredentialStore
from oncelog.storage import files

SECRET_FILES = ("scram-credentials.json", "acls.json")
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def permissive_umask():
    """The common default (0644 files, 0755 directories): what the defect relied on."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def binding(principal: str):
    from oncelog.security.acls import AclBinding as Binding

    return Binding.from_json({"resource_type": "TOPIC", "resource_name": "orders", "pattern_type": "LITERAL",
                              "principal": principal, "host": "*", "operation": "READ",
                              "permission_type": "ALLOW"})


def test_secret_files_are_0600_and_never_wider_on_the_way(tmp_path, permissive_umask, monkeypatch):
    seen: dict[str, int] = {}
    real_replace = os.replace

    def replace(src, dst):  # the temporary file's mode at the moment it becomes the secret file
        seen[os.path.basename(dst)] = mode(src)
        return real_replace(src, dst)

    monkeypatch.setattr(files.os, "replace", replace)
    # A temporary file a crash left behind, readable by all: it must not lend its mode.
    (tmp_path / "scram-credentials.json.tmp").write_text("stale")
    os.chmod(tmp_path / "scram-credentials.json.tmp", 0o666)
    store = ScramCredentialStore(str(tmp_path))
    store.set_password("alice", "SCRAM-SHA-256", "alice-pw", 4096)
    acls = AclStore(str(tmp_path), enabled=True)
    acls.create([binding("User:alice")])
    for name in SECRET_FILES:
        assert seen[name] == 0o600, (name, oct(seen[name]))
        assert mode(tmp_path / name) == 0o600, name
    assert not (tmp_path / "scram-credentials.json.tmp").exists()


def test_existing_world_readable_secret_files_are_made_0600_on_open(tmp_path, permissive_umask):
    ScramCredentialStore(str(tmp_path)).set_password("alice", "SCRAM-SHA-512", "alice-pw", 4096)
    AclStore(str(tmp_path), enabled=True).create([binding("User:alice")])
    for name in SECRET_FILES:
        os.chmod(tmp_path / name, 0o644)  # as an older oncelog wrote them
    assert ScramCredentialStore(str(tmp_path)).credential("alice", "SCRAM-SHA-512") is not None
    assert len(AclStore(str(tmp_path), enabled=True)) == 1
    for name in SECRET_FILES:
        assert mode(tmp_path / name) == 0o600, name


@pytest.mark.e2e
def test_a_broker_under_umask_022_keeps_its_secrets_private(tmp_path, permissive_umask):
    """Over the wire: AlterUserScramCredentials and CreateAcls write the files; the data
    directory the broker creates is 0700; a restart tightens files found 0644."""
    data_dir = tmp_path / "fresh" / "data"  # does not exist: the broker creates it
    b = BrokerProcess(str(tmp_path / "unused"), extra_args=[
        "--data-dir", str(data_dir), "--override", f"authorizer.class.name={STANDARD_AUTHORIZER}",
        "--override", "super.users=User:ANONYMOUS"])
    b.start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        upsert = UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                              b"alice-password")
        for future in admin.alter_user_scram_credentials([upsert], request_timeout=15).values():
            future.result()
        read = AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice", "*",
                          AclOperation.READ, AclPermissionType.ALLOW)
        for future in admin.create_acls([read], request_timeout=15).values():
            future.result()
        assert mode(data_dir) == 0o700
        for name in SECRET_FILES:
            assert mode(data_dir / name) == 0o600, name
        assert b.stop() == 0
        for name in SECRET_FILES:
            os.chmod(data_dir / name, 0o644)
        b.start()
        for name in SECRET_FILES:
            assert mode(data_dir / name) == 0o600, name
    finally:
        b.kill()
