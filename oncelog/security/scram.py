"""SCRAM credentials (KIP-554): what AlterUserScramCredentials writes and SCRAM-SHA-256/512
authentication reads, as Kafka's ScramControlManager (alter) and ScramImage (describe) keep them.

Per user and mechanism (Kafka's ``ScramMechanism`` codes: SCRAM-SHA-256 = 1, SCRAM-SHA-512 = 2)
the store keeps the salt, the iteration count, ``stored_key`` and ``server_key`` — never the
password nor the salted password. The client computes the salted password (Kafka's
ScramFormatter: ``Hi(password, salt, iterations)``) and sends it with the salt; the store derives
the two keys from it as RFC 5802 does and Kafka's ``finishUpsertion``::

    ClientKey = HMAC(SaltedPassword, "Client Key")    StoredKey = H(ClientKey)
    ServerKey = HMAC(SaltedPassword, "Server Key")

Invariants:

- Persisted in ``<data-dir>/scram-credentials.json``, rewritten whole with
  :class:`~oncelog.metadata.store.MetadataStore` (a crash leaves the old or the new file) before the
  in-memory map changes, so what a client was told succeeded survives a restart.
- The file is mode 0600, from the moment it exists (the store's ``secret=True``): the salt,
  iterations and StoredKey allow an offline dictionary attack on the passwords, and the ServerKey
  lets its holder pose as this broker. A file found readable by others is made 0600 on open.
- One AlterUserScramCredentials request is applied atomically (Kafka's ``atomicOf``): one write
  holds every accepted deletion and upsertion of it.
- Validation is Kafka's, with its error codes and messages: a user named twice in one request
  (deletions and upsertions together) is DUPLICATE_RESOURCE; an empty user name
  UNACCEPTABLE_CREDENTIAL; an unknown mechanism UNSUPPORTED_SASL_MECHANISM; iterations outside
  4096..16384 UNACCEPTABLE_CREDENTIAL; deleting a credential that does not exist
  RESOURCE_NOT_FOUND. One departure: an empty salt or salted password is refused
  (UNACCEPTABLE_CREDENTIAL) instead of stored as a credential nobody can use.

File format (version 1; bytes as standard base64)::

    {"version": 1,
     "credentials": {"<user>": {"SCRAM-SHA-256": {"salt": "...", "stored_key": "...",
                                                  "server_key": "...", "iterations": 8192}}}}
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import os
from dataclasses import dataclass
from typing import Iterable

from kio.schema.errors import ErrorCode

from ..metadata.store import SCRAM_CREDENTIALS, MetadataStore

log = logging.getLogger(__name__)

FILE_NAME = SCRAM_CREDENTIALS
FORMAT_VERSION = 1

# Kafka's org.apache.kafka.clients.admin.ScramMechanism codes, and the hashes behind them.
SCRAM_SHA_256, SCRAM_SHA_512 = 1, 2
MECHANISM_NAMES = {SCRAM_SHA_256: "SCRAM-SHA-256", SCRAM_SHA_512: "SCRAM-SHA-512"}
MECHANISM_TYPES = {name: code for code, name in MECHANISM_NAMES.items()}
_HASHES = {SCRAM_SHA_256: hashlib.sha256, SCRAM_SHA_512: hashlib.sha512}

# Kafka's ScramMechanism.minIterations (both mechanisms) and ScramControlManager.MAX_ITERATIONS.
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384

DUPLICATE_ALTER = "A user credential cannot be altered twice in the same request"
DUPLICATE_DESCRIBE = "Cannot describe SCRAM credentials for the same user twice in a single request: "
DESCRIBE_NOT_FOUND = "Attempt to describe a user credential that does not exist: "
DELETE_NOT_FOUND = "Attempt to delete a user credential that does not exist"


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What SCRAM authentication needs of one user and mechanism (Kafka's ScramCredential)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:  # as Kafka's toString: the keys are secrets
        return "ScramCredential(salt=[hidden], stored_key=[hidden], server_key=[hidden], iterations=[hidden])"


@dataclass(frozen=True, slots=True)
class AlterResult:
    """One user's outcome of AlterUserScramCredentials (error_code NONE on success)."""

    user: str
    error_code: ErrorCode
    error_message: str | None


@dataclass(frozen=True, slots=True)
class DescribeResult:
    """One user's DescribeUserScramCredentials answer: (mechanism code, iterations) pairs."""

    user: str
    error_code: ErrorCode
    error_message: str | None
    credential_infos: tuple[tuple[int, int], ...]


def credential_from_salted_password(mechanism: int, salt: bytes, salted_password: bytes,
                                    iterations: int) -> ScramCredential:
    """RFC 5802's keys from the salted password, as Kafka's ScramFormatter derives them."""
    digest = _HASHES[mechanism]
    client_key = hmac.new(salted_password, b"Client Key", digest).digest()
    stored_key = digest(client_key).digest()
    server_key = hmac.new(salted_password, b"Server Key", digest).digest()
    return ScramCredential(bytes(salt), stored_key, server_key, iterations)


def salted_password(mechanism: int, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) = PBKDF2-HMAC: what a client sends in an upsertion (Kafka's
    ScramFormatter.saltedPassword; the password UTF-8 encoded, without SASLprep, as Kafka)."""
    return hashlib.pbkdf2_hmac(_HASHES[mechanism]().name, password.encode(), salt, iterations)


class _Invalid(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def _check_name_and_mechanism(name: str, mechanism: int) -> None:
    """Kafka's validateScramUsernameAndMechanism."""
    if name == "":
        raise _Invalid(ErrorCode.unacceptable_credential, "Username must not be empty")
    if mechanism not in MECHANISM_NAMES:
        raise _Invalid(ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism")


def _check_upsertion(u) -> None:
    """Kafka's validateUpsertion, plus non-empty salt and salted password."""
    _check_name_and_mechanism(u.name, u.mechanism)
    if u.iterations < MIN_ITERATIONS:
        raise _Invalid(ErrorCode.unacceptable_credential, "Too few iterations")
    if u.iterations > MAX_ITERATIONS:
        raise _Invalid(ErrorCode.unacceptable_credential, "Too many iterations")
    if not u.salt:
        raise _Invalid(ErrorCode.unacceptable_credential, "Salt must not be empty")
    if not u.salted_password:
        raise _Invalid(ErrorCode.unacceptable_credential, "Salted password must not be empty")


class ScramCredentialStore:
    """Every user's SCRAM credentials, loaded from the data dir at construction.

    ``alter`` and ``describe`` take the request's items duck-typed (``name``, ``mechanism``,
    and for upsertions ``iterations``, ``salt``, ``salted_password``: kio's request classes
    fit), so this floor knows no message classes.
    """

    def __init__(self, store: MetadataStore | str) -> None:
        """``store``: the data directory's metadata store (or the directory's path)."""
        self.store = store if isinstance(store, MetadataStore) else MetadataStore(store)
        self.path = self.store.path(FILE_NAME)
        if self.store.restrict(FILE_NAME):
            log.warning("%s was readable by other users: its mode is now 0600", self.path)
        self._stamp = self.store.stamp(FILE_NAME)
        self._credentials: dict[str, dict[int, ScramCredential]] = self._load()

    def reload_if_changed(self) -> bool:
        """A cluster node following the controller's document (oncelog.cluster): reload it when
        another process replaced it. A document that cannot be read keeps the credentials in force."""
        stamp = self.store.stamp(FILE_NAME)
        if stamp == self._stamp:
            return False
        try:
            credentials = self._load()
        except (OSError, ValueError, KeyError) as exc:
            log.error("cannot reload %s: %s; the credentials loaded before stay in force", self.path, exc)
            return False
        self._stamp, self._credentials = stamp, credentials
        return True

    # -- reading

    def credential(self, user: str, mechanism: str | int) -> ScramCredential | None:
        """The credential SCRAM authentication checks, or None (unknown user or mechanism)."""
        code = MECHANISM_TYPES.get(mechanism) if isinstance(mechanism, str) else mechanism
        return self._credentials.get(user, {}).get(code)

    def users(self) -> list[str]:
        return sorted(self._credentials)

    def describe(self, users: Iterable[str] | None) -> list[DescribeResult]:
        """Kafka's ScramImage.describe: None or no users means every user with a credential;
        a user named twice is DUPLICATE_RESOURCE, one without credentials RESOURCE_NOT_FOUND."""
        names = list(users or ())
        if not names:
            names = self.users()
        seen: dict[str, int] = {}
        for name in names:
            seen[name] = seen.get(name, 0) + 1
        out = []
        for name, count in seen.items():
            if count > 1:
                out.append(DescribeResult(name, ErrorCode.duplicate_resource, DUPLICATE_DESCRIBE + name, ()))
                continue
            creds = self._credentials.get(name)
            if not creds:
                out.append(DescribeResult(name, ErrorCode.resource_not_found, DESCRIBE_NOT_FOUND + name, ()))
                continue
            infos = tuple((code, creds[code].iterations) for code in sorted(creds))
            out.append(DescribeResult(name, ErrorCode.none, None, infos))
        return out

    # -- altering

    def alter(self, deletions: Iterable, upsertions: Iterable) -> list[AlterResult]:
        """Apply one AlterUserScramCredentials request, as Kafka's ScramControlManager.

        Step 1. Deletions in order: a user seen before in this request becomes
                DUPLICATE_RESOURCE (and stays so); otherwise validate (name, mechanism, the
                credential exists).
        Step 2. Upsertions in order, the same way (a user deleted or upserted before in this
                request: DUPLICATE_RESOURCE); validate name, mechanism, iterations.
        Step 3. Write every accepted change at once (atomic file replace), then apply it.
        Users that already failed keep their first error (Kafka skips them).
        """
        errors: dict[str, _Invalid] = {}
        accepted: dict[str, tuple[str, object]] = {}  # user -> ("delete" | "upsert", item)
        order: list[str] = []

        def consider(kind: str, item, check) -> None:
            name = item.name
            if name not in order:
                order.append(name)
            if name in errors:
                return
            if accepted.pop(name, None) is not None:
                errors[name] = _Invalid(ErrorCode.duplicate_resource, DUPLICATE_ALTER)
                return
            try:
                check(item)
            except _Invalid as exc:
                errors[name] = exc
            else:
                accepted[name] = (kind, item)

        def check_deletion(d) -> None:
            _check_name_and_mechanism(d.name, d.mechanism)
            if d.mechanism not in self._credentials.get(d.name, {}):
                raise _Invalid(ErrorCode.resource_not_found, DELETE_NOT_FOUND)

        # Step 1.
        for d in deletions:
            consider("delete", d, check_deletion)
        # Step 2.
        for u in upsertions:
            consider("upsert", u, _check_upsertion)
        # Step 3.
        if accepted:
            updated = {user: dict(creds) for user, creds in self._credentials.items()}
            for name, (kind, item) in accepted.items():
                if kind == "delete":
                    del updated[name][item.mechanism]
                    if not updated[name]:
                        del updated[name]
                else:
                    updated.setdefault(name, {})[item.mechanism] = credential_from_salted_password(
                        item.mechanism, bytes(item.salt), bytes(item.salted_password), item.iterations)
            self._save(updated)
            self._credentials = updated
            for name, (kind, item) in accepted.items():
                log.info("SCRAM credential %s for user %r (%s)", "deleted" if kind == "delete" else "set",
                         name, MECHANISM_NAMES[item.mechanism])
        results = []
        for name in order:
            if name in errors:
                results.append(AlterResult(name, errors[name].code, str(errors[name])))
            else:
                results.append(AlterResult(name, ErrorCode.none, None))
        return results

    def set_password(self, user: str, mechanism: str | int, password: str, iterations: int = MIN_ITERATIONS,
                     salt: bytes | None = None) -> AlterResult:
        """An upsertion computed here from a password, as a client would (tests, the CLI): the
        same validation and persistence as :meth:`alter`."""
        code = MECHANISM_TYPES.get(mechanism, -1) if isinstance(mechanism, str) else mechanism
        salt = os.urandom(32) if salt is None else salt
        salted = salted_password(code, password, salt, iterations) if code in _HASHES else b"-"
        upsertion = _Upsertion(user, code, iterations, salt, salted)
        [result] = self.alter((), (upsertion,))
        return result

    # -- the file

    def _load(self) -> dict[str, dict[int, ScramCredential]]:
        doc = self.store.read(FILE_NAME)
        if doc is None:
            return {}
        if doc.get("version") != FORMAT_VERSION:
            raise ValueError(f"{self.path}: unknown format version {doc.get('version')!r}")
        out: dict[str, dict[int, ScramCredential]] = {}
        for user, mechanisms in doc["credentials"].items():
            for name, c in mechanisms.items():
                out.setdefault(user, {})[MECHANISM_TYPES[name]] = ScramCredential(
                    base64.b64decode(c["salt"]), base64.b64decode(c["stored_key"]),
                    base64.b64decode(c["server_key"]), int(c["iterations"]))
        return out

    def _save(self, credentials: dict[str, dict[int, ScramCredential]]) -> None:
        doc = {"version": FORMAT_VERSION, "credentials": {
            user: {MECHANISM_NAMES[code]: {"salt": base64.b64encode(c.salt).decode(),
                                           "stored_key": base64.b64encode(c.stored_key).decode(),
                                           "server_key": base64.b64encode(c.server_key).decode(),
                                           "iterations": c.iterations}
                   for code, c in sorted(mechs.items())}
            for user, mechs in sorted(credentials.items())}}
        self.store.write(FILE_NAME, doc, secret=True, newline=True)
        self._stamp = self.store.stamp(FILE_NAME)


@dataclass(frozen=True, slots=True)
class _Upsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


def auth_info(credential: ScramCredential) -> tuple[bytes, bytes, bytes, int]:
    """The tuple scramp's server ``auth_fn`` returns: (salt, stored_key, server_key, iterations)."""
    return credential.salt, credential.stored_key, credential.server_key, credential.iterations


__all__ = ["ScramCredentialStore", "ScramCredential", "AlterResult", "DescribeResult", "SCRAM_SHA_256",
           "SCRAM_SHA_512", "MECHANISM_NAMES", "MECHANISM_TYPES", "MIN_ITERATIONS", "MAX_ITERATIONS",
           "credential_from_salted_password", "salted_password", "auth_info"]
