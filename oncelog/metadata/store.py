"""The one store of the broker's metadata: JSON documents in the data directory.

Every metadata document (``meta.json``, ``topics.json``, ``broker-configs.json``,
``group-configs.json``, ``acls.json``, ``scram-credentials.json``, ``producer-ids.json``) is
read and written here, and nowhere else. Names and formats are those earlier oncelogs wrote, so
an existing data directory opens unchanged.

Invariants:
* A write is atomic and durable before it returns: written to a temporary file, fsynced,
  renamed over the old document, then the directory fsynced (:func:`oncelog.storage.files.atomic_write`).
  A crash at any moment leaves the old document or the new one, never half of one.
* A secret document (``secret=True``: credentials, ACLs) is never, at any moment, readable by
  anyone but the broker's user (mode 0600 from its first byte).
* A document is replaced whole; one change is one document. So every document a reader loads
  is one the writer wrote, and a second process can follow the broker: :meth:`MetadataStore.stamp`
  changes with every write (a rename makes a new inode), and a follower reloads the documents
  whose stamp moved (see :meth:`oncelog.metadata.Metadata.refresh`).
* A failed write (a full disk: ENOSPC) raises :class:`OSError` and leaves the old document; the
  caller keeps its in-memory state unchanged too, so memory and disk never disagree. One failure
  is ambiguous, as a request timeout is: the directory's fsync after the rename. The new document
  is then in place but not known durable; the change is answered as failed (KAFKA_STORAGE_ERROR),
  and the next start reads whichever document the disk kept.

Every file operation goes through a :class:`~oncelog.storage.files.FileSystem` (``fs``): the
real one, or in tests a :class:`~oncelog.storage.files.MemoryFileSystem` that can crash.
"""

from __future__ import annotations

import json
import os
from typing import Any

from ..storage.files import SECRET_MODE, FileSystem, OsFileSystem

# The documents, by name; each module that owns one says its format.
META = "meta.json"
TOPICS = "topics.json"
BROKER_CONFIGS = "broker-configs.json"
GROUP_CONFIGS = "group-configs.json"
ACLS = "acls.json"
SCRAM_CREDENTIALS = "scram-credentials.json"
PRODUCER_IDS = "producer-ids.json"
DOCUMENTS = (META, TOPICS, BROKER_CONFIGS, GROUP_CONFIGS, ACLS, SCRAM_CREDENTIALS, PRODUCER_IDS)


class MetadataStore:
    """The documents of one data directory (created 0700 if missing: it holds secrets)."""

    def __init__(self, data_dir: str, *, create: bool = True, fs: FileSystem | None = None) -> None:
        self.data_dir = os.path.abspath(data_dir)
        self.fs: FileSystem = fs if fs is not None else OsFileSystem()
        if create:
            # 0700: the data dir holds the SCRAM credentials and the ACLs (a directory that
            # exists keeps its mode: the operator chose it).
            self.fs.makedirs(self.data_dir, 0o700)

    def path(self, name: str) -> str:
        return os.path.join(self.data_dir, name)

    def exists(self, name: str) -> bool:
        return self.fs.exists(self.path(name))

    def read(self, name: str, default: Any = None) -> Any:
        """The document's JSON value, or ``default`` when it does not exist. A document that is
        not JSON raises (ValueError): metadata is never guessed."""
        try:
            return json.loads(self.fs.read(self.path(name)))
        except FileNotFoundError:
            return default

    def write(self, name: str, doc: Any, *, secret: bool = False, indent: int | None = 1,
              sort_keys: bool = True, newline: bool = False) -> None:
        """Replace the document atomically and durably (see the module's invariants)."""
        text = json.dumps(doc, indent=indent, sort_keys=sort_keys) + ("\n" if newline else "")
        self.fs.replace(self.path(name), text.encode(), mode=SECRET_MODE if secret else None)
        self.fs.sync_dir(self.data_dir)

    def restrict(self, name: str) -> bool:
        """Narrow an existing secret document's mode to 0600 (one an older oncelog wrote under
        the umask); True when it was wider."""
        return self.fs.restrict(self.path(name), SECRET_MODE)

    def stamp(self, name: str) -> tuple[int, int] | None:
        """What changes with every write of the document (its inode and modification time), or
        None while it does not exist: a follower compares stamps to know what to reload."""
        return self.fs.stamp(self.path(name))
