"""ACLs as Kafka's StandardAuthorizer keeps and applies them: bindings, filters, the
authorization rules, and the store that persists them.

Vocabulary (``org.apache.kafka.common.acl`` / ``.resource``; the enums carry Kafka's wire codes):

* an :class:`AclBinding` is a resource pattern (resource type, name, LITERAL or PREFIXED) and an
  entry (principal ``Type:name``, host ``*`` or an address, operation, ALLOW or DENY);
* an :class:`AclBindingFilter` selects bindings (DescribeAcls, DeleteAcls): ANY in a field matches
  every value, a None name/principal/host matches every one, and the MATCH pattern type selects
  every binding that would apply to the named resource (the LITERAL equal name, the LITERAL
  wildcard ``*`` and PREFIXED prefixes of the name);
* the :class:`Authorizer` answers ``authorize(principal, host, operation, resource type, name)``.

The authorization rules (StandardAuthorizerData.authorize/findResult), in order:

1. a super user (``super.users``, ``User:alice;User:bob``) may do everything, DENY or not;
2. the ACLs that apply to a resource are the LITERAL ones with its exact name, the LITERAL ones
   named ``*``, and the PREFIXED ones whose name is a prefix of its name;
3. among those, an ACL matches the request if its principal is the request's or ``User:*``, its
   host is ``*`` or the request's, and its operation is the requested one or ALL — or, for an
   ALLOW ACL only, one implying it: READ, WRITE, DELETE and ALTER imply DESCRIBE, ALTER_CONFIGS
   implies DESCRIBE_CONFIGS (a DENY READ does not deny DESCRIBE; a DENY ALL denies everything);
4. a matching DENY wins over any ALLOW; else a matching ALLOW allows;
5. else, if no ACL applies to the resource at all (rule 2, whoever the principal), the answer is
   ``allow.everyone.if.no.acl.found`` (default false); if some apply but none matched, denied.

Invariants: the store holds each binding at most once (creating an existing one succeeds and
changes nothing, as Kafka); what it answers is what ``<data-dir>/acls.json`` holds — every change
is written (write-then-rename) before the call returns, so an ACL reported created or deleted
stays so across a restart. Nothing here does network I/O or reads a clock.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass
from typing import Iterable

from ..errors import InvalidRequest
from ..metadata.store import ACLS, MetadataStore

log = logging.getLogger(__name__)

FILE_NAME = ACLS
FORMAT_VERSION = 1
WILDCARD = "*"  # a LITERAL resource name matching every name; a host matching every host
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource's name
ANONYMOUS = "User:ANONYMOUS"
# authorizer.class.name values that switch authorization on: KRaft's and ZooKeeper-era Kafka's.
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"


class ResourceType(enum.IntEnum):
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    ANY = 1  # filters only: every pattern type, the name compared as is
    MATCH = 2  # filters only: every binding that applies to the named resource
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    ANY = 1  # filters only
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class PermissionType(enum.IntEnum):
    ANY = 1  # filters only
    DENY = 2
    ALLOW = 3


# ALLOW ACLs for these operations also allow DESCRIBE / DESCRIBE_CONFIGS (rule 3).
IMPLIES_DESCRIBE = frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
                              AclOperation.ALTER})
IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})

# The operations each resource type supports (Kafka's AclEntry.supportedOperations): what the
# KIP-430 authorized-operations bit fields are computed over.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                         AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                         AclOperation.ALTER_CONFIGS),
    # DescribeConfigs/AlterConfigs: group configs (KIP-848's consumer.session.timeout.ms, ...), Kafka 3.8+
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.DESCRIBE_CONFIGS,
                         AclOperation.ALTER_CONFIGS),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                           AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                           AclOperation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}


def _enum(kind: type[enum.IntEnum], code: int, what: str):
    """``kind(code)``, or InvalidRequest naming the unknown code. (Kafka reads an unknown code as
    UNKNOWN and rejects the whole request; oncelog answers the one binding or filter instead.)"""
    try:
        return kind(int(code))
    except ValueError:
        raise InvalidRequest(f"Unknown {what} code {code}") from None


def parse_principal(text: str | None) -> tuple[str, str]:
    """``(type, name)`` of ``Type:name`` (Kafka's SecurityUtils.parseKafkaPrincipal)."""
    if not text or ":" not in text:
        raise InvalidRequest(f"expected a string in format principalType:principalName but got {text}")
    principal_type, _, name = text.partition(":")
    return principal_type, name


def client_host(peer: str) -> str:
    """The address ACL hosts are compared with, from a connection's ``peer`` (``host:port``)."""
    host = peer.rpartition(":")[0] if ":" in peer else peer
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    """One ACL. Field order is the sort order of DescribeAcls answers and of ``acls.json``."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: PermissionType

    @classmethod
    def from_codes(cls, resource_type: int, resource_name: str, pattern_type: int, principal: str, host: str,
                   operation: int, permission_type: int) -> "AclBinding":
        """A binding from wire codes (CreateAcls' AclCreation); InvalidRequest for unknown codes."""
        return cls(_enum(ResourceType, resource_type, "resource type"), resource_name,
                   _enum(PatternType, pattern_type, "pattern type"), principal, host,
                   _enum(AclOperation, operation, "operation"), _enum(PermissionType, permission_type, "permission type"))

    def validate(self) -> None:
        """Kafka's checks of a binding to create (AclApis.handleCreateAcls, then
        AclControlManager.validateNewAcl), in its order and with its messages; InvalidRequest."""
        if self.resource_type == ResourceType.CLUSTER and self.resource_name != CLUSTER_NAME:
            raise InvalidRequest(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
        if not self.resource_name:
            raise InvalidRequest("Invalid empty resource name")
        if self.resource_type == ResourceType.ANY:
            raise InvalidRequest(f"Invalid resourceType {self.resource_type.name}")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise InvalidRequest(f"Invalid patternType {self.pattern_type.name}")
        if self.operation == AclOperation.ANY:
            raise InvalidRequest(f"Invalid operation {self.operation.name}")
        if self.permission_type == PermissionType.ANY:
            raise InvalidRequest(f"Invalid permissionType {self.permission_type.name}")
        # Kafka's controller stores any principal and fails when authorizing against it; the
        # ZooKeeper-era AclAuthorizer refused it up front, as here.
        parse_principal(self.principal)

    def to_json(self) -> dict:
        return {"resource_type": self.resource_type.name, "resource_name": self.resource_name,
                "pattern_type": self.pattern_type.name, "principal": self.principal, "host": self.host,
                "operation": self.operation.name, "permission_type": self.permission_type.name}

    @classmethod
    def from_json(cls, d: dict) -> "AclBinding":
        return cls(ResourceType[d["resource_type"]], d["resource_name"], PatternType[d["pattern_type"]],
                   d["principal"], d["host"], AclOperation[d["operation"]], PermissionType[d["permission_type"]])

    def __str__(self) -> str:
        return (f"(pattern=ResourcePattern(resourceType={self.resource_type.name}, name={self.resource_name}, "
                f"patternType={self.pattern_type.name}), entry=(principal={self.principal}, host={self.host}, "
                f"operation={self.operation.name}, permissionType={self.permission_type.name}))")


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Selects bindings: None for a name, principal or host, and ANY for an enum, match every
    value; MATCH as the pattern type selects what applies to the named resource."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: PermissionType = PermissionType.ANY

    @classmethod
    def from_codes(cls, resource_type: int, resource_name: str | None, pattern_type: int, principal: str | None,
                   host: str | None, operation: int, permission_type: int) -> "AclBindingFilter":
        """A filter from wire codes (DescribeAcls, DeleteAcls); InvalidRequest for unknown codes."""
        return cls(_enum(ResourceType, resource_type, "resource type"), resource_name,
                   _enum(PatternType, pattern_type, "pattern type"), principal, host,
                   _enum(AclOperation, operation, "operation"), _enum(PermissionType, permission_type, "permission type"))

    def matches(self, b: AclBinding) -> bool:
        """Kafka's AclBindingFilter.matches: ResourcePatternFilter.matches and
        AccessControlEntryFilter.matches."""
        # The pattern.
        if self.resource_type != ResourceType.ANY and self.resource_type != b.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and self.pattern_type != b.pattern_type:
            return False
        if self.resource_name is not None:
            if self.pattern_type in (PatternType.ANY, b.pattern_type):
                if self.resource_name != b.resource_name:
                    return False
            elif b.pattern_type == PatternType.LITERAL:  # MATCH: what applies to the named resource
                if b.resource_name not in (self.resource_name, WILDCARD):
                    return False
            elif not self.resource_name.startswith(b.resource_name):  # MATCH, PREFIXED
                return False
        # The entry.
        if self.principal is not None and self.principal != b.principal:
            return False
        if self.host is not None and self.host != b.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != b.operation:
            return False
        return self.permission_type == PermissionType.ANY or self.permission_type == b.permission_type


ANY_FILTER = AclBindingFilter()


def parse_super_users(value: str | None) -> frozenset[str]:
    """``super.users``: principals separated by ``;`` (Kafka's getConfiguredSuperUsers)."""
    users = set()
    for part in (value or "").split(";"):
        part = part.strip()
        if part:
            try:
                parse_principal(part)
            except InvalidRequest as exc:
                raise ValueError(f"super.users: {exc}") from None
            users.add(part)
    return frozenset(users)


class Authorizer:
    """Kafka's StandardAuthorizer over a set of bindings (the module docstring's rules).

    Sans-IO: built from bindings and configuration; :meth:`update` replaces the bindings (the
    store calls it after each change). Lookups are indexed: LITERAL bindings by (type, name),
    PREFIXED ones by (type, prefix), so authorizing costs one lookup per prefix of the name.
    """

    def __init__(self, bindings: Iterable[AclBinding] = (), *, super_users: Iterable[str] = (),
                 allow_everyone_if_no_acl_found: bool = False) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._literal: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        self._prefixed: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        self._bindings: tuple[AclBinding, ...] = ()
        self.update(bindings)

    def update(self, bindings: Iterable[AclBinding]) -> None:
        literal: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        prefixed: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        bindings = tuple(bindings)
        for b in bindings:
            index = literal if b.pattern_type == PatternType.LITERAL else prefixed
            index.setdefault((b.resource_type, b.resource_name), []).append(b)
        self._literal, self._prefixed, self._bindings = literal, prefixed, bindings

    def applicable(self, resource_type: ResourceType, resource_name: str) -> list[AclBinding]:
        """Every binding that applies to the resource, whoever asks (rule 2)."""
        found = list(self._literal.get((resource_type, resource_name), ()))
        if resource_name != WILDCARD:
            found += self._literal.get((resource_type, WILDCARD), ())
        for end in range(1, len(resource_name) + 1):
            found += self._prefixed.get((resource_type, resource_name[:end]), ())
        return found

    def is_super_user(self, principal: str) -> bool:
        return principal in self.super_users

    def authorize(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                  resource_name: str) -> bool:
        """May ``principal`` connecting from ``host`` perform ``operation`` on the resource?"""
        # Step 1. Super users.
        if principal in self.super_users:
            return True
        # Step 2. The ACLs applying to the resource; steps 3 and 4 over them.
        applicable = self.applicable(resource_type, resource_name)
        allowed = False
        for acl in applicable:
            verdict = _verdict(acl, principal, host, operation)
            if verdict is PermissionType.DENY:
                return False
            allowed = allowed or verdict is PermissionType.ALLOW
        if allowed:
            return True
        # Step 5. No ACL for the resource at all: the configured default.
        return not applicable and self.allow_everyone_if_no_acl_found

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType,
                              resource_name: str) -> int:
        """The KIP-430 bit field (bit n for AclOperation code n) of the operations supported on
        the resource type that ``principal`` may perform on it (Kafka's authorizedOperations)."""
        return sum(1 << op for op in SUPPORTED_OPERATIONS[resource_type]
                   if self.authorize(principal, host, op, resource_type, resource_name))

    def authorize_by_resource_type(self, principal: str, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """May ``principal`` perform ``operation`` on *some* resource of the type (Kafka's
        Authorizer.authorizeByResourceType, used for an idempotent producer's WRITE on any
        topic)? An ALLOW (LITERAL or PREFIXED) not covered by a matching DENY suffices."""
        # Step 1. A super user, or the default for a resource without ACLs (Kafka asks about a
        # made-up name, "hardcode", so that super users pass whatever DENY ACLs exist).
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        # Step 2. The ALLOW and DENY patterns of the bindings matching principal, host and
        # operation exactly (or ALL; no implied operations here).
        deny: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        allow: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        wildcard_allow = False
        for b in self._bindings:
            if b.resource_type != resource_type or b.host not in (host, WILDCARD):
                continue
            if b.principal not in (principal, WILDCARD_PRINCIPAL):
                continue
            if b.operation not in (operation, AclOperation.ALL):
                continue
            if b.permission_type == PermissionType.DENY:
                if b.pattern_type == PatternType.LITERAL and b.resource_name == WILDCARD:
                    return False
                deny[b.pattern_type].add(b.resource_name)
            elif b.pattern_type == PatternType.LITERAL and b.resource_name == WILDCARD:
                wildcard_allow = True
            else:
                allow[b.pattern_type].add(b.resource_name)
        if wildcard_allow:
            return True
        # Step 3. Some allowed pattern that no DENY dominates (the same literal, or a denied prefix).
        for pattern_type, names in allow.items():
            for name in names:
                if pattern_type == PatternType.LITERAL and name in deny[PatternType.LITERAL]:
                    continue
                if not any(name[:end] in deny[PatternType.PREFIXED] for end in range(1, len(name) + 1)):
                    return True
        return False


def _verdict(acl: AclBinding, principal: str, host: str, operation: AclOperation) -> PermissionType | None:
    """ALLOW or DENY if ``acl`` matches the request (rule 3), None if it does not apply to it."""
    if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
        return None
    if acl.host != WILDCARD and acl.host != host:
        return None
    if acl.operation != AclOperation.ALL:
        if acl.permission_type == PermissionType.ALLOW:
            if operation == AclOperation.DESCRIBE:
                if acl.operation not in IMPLIES_DESCRIBE:
                    return None
            elif operation == AclOperation.DESCRIBE_CONFIGS:
                if acl.operation not in IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif acl.operation != operation:
                return None
        elif acl.operation != operation:
            return None
    return acl.permission_type


class AclStore:
    """The broker's ACLs, persisted in ``<data-dir>/acls.json``, and its authorizer.

    ``enabled`` is whether ``authorizer.class.name`` is set: without it the ACL APIs answer
    SECURITY_DISABLED and :meth:`authorize` allows everything (Kafka with no authorizer).

    ``acls.json`` (written whole, write-then-rename, after every change; mode 0600 from the moment
    it exists, and made 0600 on open if found readable by others: who may do what, and who is
    denied, is a map for an attacker)::

        {"version": 1, "acls": [{"resource_type": "TOPIC", "resource_name": "orders",
          "pattern_type": "LITERAL", "principal": "User:alice", "host": "*",
          "operation": "READ", "permission_type": "ALLOW"}, ...]}
    """

    def __init__(self, store: MetadataStore | str, *, enabled: bool = False, super_users: Iterable[str] | str = (),
                 allow_everyone_if_no_acl_found: bool = False) -> None:
        """``store``: the data directory's metadata store (or the directory's path)."""
        self.store = store if isinstance(store, MetadataStore) else MetadataStore(store)
        self.path = self.store.path(FILE_NAME)
        if self.store.restrict(FILE_NAME):
            log.warning("%s was readable by other users: its mode is now 0600", self.path)
        self.enabled = enabled
        if isinstance(super_users, str):
            super_users = parse_super_users(super_users)
        self._stamp = self.store.stamp(FILE_NAME)
        self._bindings: set[AclBinding] = set(self._load())
        self.authorizer = Authorizer(self._bindings, super_users=super_users,
                                     allow_everyone_if_no_acl_found=allow_everyone_if_no_acl_found)

    def reload_if_changed(self) -> bool:
        """A cluster node following the controller's document (oncelog.cluster): reload it when
        another process replaced it. A document that cannot be read keeps the ACLs in force."""
        stamp = self.store.stamp(FILE_NAME)
        if stamp == self._stamp:
            return False
        try:
            bindings = set(self._load())
        except (OSError, ValueError, KeyError) as exc:
            log.error("cannot reload %s: %s; the ACLs loaded before stay in force", self.path, exc)
            return False
        self._stamp = stamp
        self._bindings = bindings
        self.authorizer.update(self._bindings)
        return True

    @classmethod
    def for_broker(cls, store: MetadataStore, config) -> "AclStore":
        """The store a BrokerConfig configures: ``authorizer.class.name`` (set: on),
        ``super.users`` and ``allow.everyone.if.no.acl.found``."""
        return cls(store, enabled=bool(config.authorizer_class_name), super_users=config.super_users or "",
                   allow_everyone_if_no_acl_found=config.allow_everyone_if_no_acl_found)

    def _load(self) -> list[AclBinding]:
        doc = self.store.read(FILE_NAME)
        if doc is None:
            return []
        if doc.get("version") != FORMAT_VERSION:
            raise ValueError(f"{self.path}: unknown format version {doc.get('version')!r}")
        return [AclBinding.from_json(d) for d in doc["acls"]]

    def _save(self) -> None:
        doc = {"version": FORMAT_VERSION, "acls": [b.to_json() for b in sorted(self._bindings)]}
        self.store.write(FILE_NAME, doc, secret=True, sort_keys=False, newline=True)
        self._stamp = self.store.stamp(FILE_NAME)
        self.authorizer.update(self._bindings)

    def __len__(self) -> int:
        return len(self._bindings)

    def __iter__(self):
        return iter(sorted(self._bindings))

    # -- the authorizer

    def authorize(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                  resource_name: str) -> bool:
        """The authorizer's answer, or True when no authorizer is configured."""
        return not self.enabled or self.authorizer.authorize(principal, host, operation, resource_type, resource_name)

    # -- the ACL APIs

    def create(self, bindings: Iterable[AclBinding | Exception]) -> list[InvalidRequest | None]:
        """CreateAcls: for each binding, None (created, or already there) or the InvalidRequest
        refusing it. An Exception in place of a binding (one that could not be read) is returned
        as its result. All accepted bindings are persisted with one write."""
        results: list = []
        added = False
        for b in bindings:
            if isinstance(b, Exception):
                results.append(b)
                continue
            try:
                b.validate()
            except InvalidRequest as exc:
                results.append(exc)
                continue
            if b not in self._bindings:
                self._bindings.add(b)
                added = True
            results.append(None)
        if added:
            self._save()
        return results

    def describe(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        """DescribeAcls: the bindings the filter matches, sorted."""
        return sorted(b for b in self._bindings if acl_filter.matches(b))

    def delete(self, filters: Iterable[AclBindingFilter | Exception]) -> list[list[AclBinding] | Exception]:
        """DeleteAcls: for each filter, the bindings it matched (now deleted; a binding matched
        by two filters is listed under both, as Kafka), or the error refusing the filter. The
        deletions are persisted with one write."""
        results: list = []
        doomed: set[AclBinding] = set()
        for f in filters:
            if isinstance(f, Exception):
                results.append(f)
                continue
            matched = self.describe(f)
            doomed.update(matched)
            results.append(matched)
        if doomed:
            self._bindings -= doomed
            self._save()
        return results


__all__ = [
    "ACL_AUTHORIZER", "ANONYMOUS", "ANY_FILTER", "AclBinding", "AclBindingFilter", "AclOperation", "AclStore",
    "Authorizer", "CLUSTER_NAME", "IMPLIES_DESCRIBE", "IMPLIES_DESCRIBE_CONFIGS", "PatternType", "PermissionType",
    "ResourceType", "STANDARD_AUTHORIZER", "SUPPORTED_OPERATIONS", "WILDCARD", "WILDCARD_PRINCIPAL", "client_host",
    "parse_principal", "parse_super_users",
]
