"""Kafka's StandardAuthorizer rules, filters and CreateAcls validation, as tables (no broker),
and the ACL store's persistence across a new store on the same data dir."""

from __future__ import annotations

import json
import os

import pytest

from oncelog.config.settings import BrokerConfig
from oncelog.errors import InvalidRequest
from oncelog.security.acls import (
    ANY_FILTER,
    STANDARD_AUTHORIZER,
    AclBinding,
    AclBindingFilter,
    AclOperation as Op,
    AclStore,
    Authorizer,
    PatternType as P,
    PermissionType as Perm,
    ResourceType as R,
    client_host,
    parse_super_users,
)

LIT, PRE = P.LITERAL, P.PREFIXED
ALLOW, DENY = Perm.ALLOW, Perm.DENY


def acl(name="orders", op=Op.READ, perm=ALLOW, *, principal="User:alice", host="*", pattern=LIT,
        rtype=R.TOPIC) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def test_enum_codes_are_kafkas():
    assert [(m.name, m.value) for m in R] == [("ANY", 1), ("TOPIC", 2), ("GROUP", 3), ("CLUSTER", 4),
                                              ("TRANSACTIONAL_ID", 5), ("DELEGATION_TOKEN", 6), ("USER", 7)]
    assert [(m.name, m.value) for m in P] == [("ANY", 1), ("MATCH", 2), ("LITERAL", 3), ("PREFIXED", 4)]
    assert [m.value for m in Op] == list(range(1, 15))
    assert (Op.ALL, Op.DESCRIBE, Op.IDEMPOTENT_WRITE, Op.DESCRIBE_TOKENS) == (2, 8, 12, 14)
    assert [(m.name, m.value) for m in Perm] == [("ANY", 1), ("DENY", 2), ("ALLOW", 3)]


# (acls, principal, host, operation, topic name, allowed) with allow.everyone.if.no.acl.found=false
AUTHORIZE_CASES = [
    # no ACL for the resource: the default (false here)
    ([], "User:alice", "10.0.0.1", Op.READ, "orders", False),
    ([acl(name="other")], "User:alice", "10.0.0.1", Op.READ, "orders", False),
    # an exact LITERAL allow
    ([acl()], "User:alice", "10.0.0.1", Op.READ, "orders", True),
    ([acl()], "User:bob", "10.0.0.1", Op.READ, "orders", False),
    ([acl()], "User:alice", "10.0.0.1", Op.WRITE, "orders", False),
    ([acl()], "User:alice", "10.0.0.1", Op.READ, "orders2", False),  # a literal is not a prefix
    ([acl(name="orders2")], "User:alice", "10.0.0.1", Op.READ, "orders", False),
    # PREFIXED
    ([acl(name="ord", pattern=PRE)], "User:alice", "10.0.0.1", Op.READ, "orders", True),
    ([acl(name="orders", pattern=PRE)], "User:alice", "10.0.0.1", Op.READ, "orders", True),
    ([acl(name="ordersX", pattern=PRE)], "User:alice", "10.0.0.1", Op.READ, "orders", False),
    ([acl(name="x", pattern=PRE)], "User:alice", "10.0.0.1", Op.READ, "orders", False),
    # the LITERAL wildcard resource; a PREFIXED "*" is only a prefix
    ([acl(name="*")], "User:alice", "10.0.0.1", Op.READ, "orders", True),
    ([acl(name="*", pattern=PRE)], "User:alice", "10.0.0.1", Op.READ, "orders", False),
    ([acl(name="*", pattern=PRE)], "User:alice", "10.0.0.1", Op.READ, "*orders", True),
    # resource types are separate
    ([acl(rtype=R.GROUP)], "User:alice", "10.0.0.1", Op.READ, "orders", False),
    # the wildcard principal is User:* only
    ([acl(principal="User:*")], "User:bob", "10.0.0.1", Op.READ, "orders", True),
    ([acl(principal="User:*")], "Group:x", "10.0.0.1", Op.READ, "orders", True),  # Kafka: the ACL's User:* matches any
    ([acl(principal="Group:*")], "Group:x", "10.0.0.1", Op.READ, "orders", False),
    # hosts
    ([acl(host="10.0.0.1")], "User:alice", "10.0.0.1", Op.READ, "orders", True),
    ([acl(host="10.0.0.1")], "User:alice", "10.0.0.2", Op.READ, "orders", False),
    # DENY wins, wherever it comes from
    ([acl(), acl(perm=DENY)], "User:alice", "10.0.0.1", Op.READ, "orders", False),
    ([acl(), acl(name="o", pattern=PRE, perm=DENY)], "User:alice", "10.0.0.1", Op.READ, "orders", False),
    ([acl(), acl(name="*", perm=DENY)], "User:alice", "10.0.0.1", Op.READ, "orders", False),
    ([acl(), acl(principal="User:*", perm=DENY)], "User:alice", "10.0.0.1", Op.READ, "orders", False),
    ([acl(), acl(host="10.0.0.1", perm=DENY)], "User:alice", "10.0.0.1", Op.READ, "orders", False),
    ([acl(), acl(host="10.0.0.1", perm=DENY)], "User:alice", "10.0.0.2", Op.READ, "orders", True),
    ([acl(), acl(principal="User:bob", perm=DENY)], "User:alice", "10.0.0.1", Op.READ, "orders", True),
    ([acl(), acl(op=Op.WRITE, perm=DENY)], "User:alice", "10.0.0.1", Op.READ, "orders", True),
    # ALL, allow and deny
    ([acl(op=Op.ALL)], "User:alice", "10.0.0.1", Op.ALTER_CONFIGS, "orders", True),
    ([acl(op=Op.ALL), acl(op=Op.ALL, perm=DENY)], "User:alice", "10.0.0.1", Op.DESCRIBE, "orders", False),
    ([acl(op=Op.ALL), acl(op=Op.WRITE, perm=DENY)], "User:alice", "10.0.0.1", Op.WRITE, "orders", False),
    ([acl(op=Op.WRITE), acl(op=Op.ALL, perm=DENY)], "User:alice", "10.0.0.1", Op.DESCRIBE, "orders", False),
    # implied operations (ALLOW only)
    ([acl(op=Op.READ)], "User:alice", "h", Op.DESCRIBE, "orders", True),
    ([acl(op=Op.WRITE)], "User:alice", "h", Op.DESCRIBE, "orders", True),
    ([acl(op=Op.DELETE)], "User:alice", "h", Op.DESCRIBE, "orders", True),
    ([acl(op=Op.ALTER)], "User:alice", "h", Op.DESCRIBE, "orders", True),
    ([acl(op=Op.CREATE)], "User:alice", "h", Op.DESCRIBE, "orders", False),
    ([acl(op=Op.ALTER_CONFIGS)], "User:alice", "h", Op.DESCRIBE, "orders", False),
    ([acl(op=Op.ALTER_CONFIGS)], "User:alice", "h", Op.DESCRIBE_CONFIGS, "orders", True),
    ([acl(op=Op.ALTER)], "User:alice", "h", Op.DESCRIBE_CONFIGS, "orders", False),
    ([acl(op=Op.DESCRIBE)], "User:alice", "h", Op.READ, "orders", False),  # implication runs one way
    ([acl(op=Op.DESCRIBE_CONFIGS)], "User:alice", "h", Op.ALTER_CONFIGS, "orders", False),
    # a DENY of an implying operation does not deny the implied one...
    ([acl(op=Op.DESCRIBE), acl(op=Op.READ, perm=DENY)], "User:alice", "h", Op.DESCRIBE, "orders", True),
    # ...and an ACL for the resource that does not match still turns the default off
    ([acl(op=Op.READ, perm=DENY)], "User:alice", "h", Op.DESCRIBE, "orders", False),
]


@pytest.mark.parametrize("acls, principal, host, operation, name, allowed", AUTHORIZE_CASES)
def test_authorize(acls, principal, host, operation, name, allowed):
    assert Authorizer(acls).authorize(principal, host, operation, R.TOPIC, name) is allowed


@pytest.mark.parametrize("acls, allowed", [
    ([], True),  # no ACL at all for the resource
    ([acl(name="other")], True),  # ACLs for other resources do not count
    ([acl(name="orders", principal="User:bob")], False),  # an ACL for the resource, for someone else
    ([acl(name="*", principal="User:bob")], False),  # the wildcard resource counts
    ([acl(name="or", pattern=PRE, principal="User:bob")], False),  # so do prefixes
    ([acl(name="orders", perm=DENY)], False),
])
def test_allow_everyone_if_no_acl_found(acls, allowed):
    auth = Authorizer(acls, allow_everyone_if_no_acl_found=True)
    assert auth.authorize("User:alice", "h", Op.READ, R.TOPIC, "orders") is allowed


def test_super_users_may_do_everything_even_when_denied():
    auth = Authorizer([acl(op=Op.ALL, perm=DENY, principal="User:*")], super_users=parse_super_users(
        " User:admin ; User:ops;;"))
    assert auth.super_users == {"User:admin", "User:ops"}
    for op in Op:
        if op is not Op.ANY:
            assert auth.authorize("User:admin", "h", op, R.CLUSTER, "kafka-cluster")
    assert not auth.authorize("User:alice", "h", Op.READ, R.TOPIC, "orders")
    assert not auth.authorize("User:admin2", "h", Op.READ, R.TOPIC, "orders")
    with pytest.raises(ValueError, match="principalType:principalName"):
        parse_super_users("admin")


def test_authorized_operations_bit_field():
    auth = Authorizer([acl(op=Op.WRITE), acl(op=Op.ALTER_CONFIGS)])
    bits = auth.authorized_operations("User:alice", "h", R.TOPIC, "orders")
    assert bits == (1 << Op.WRITE) | (1 << Op.DESCRIBE) | (1 << Op.ALTER_CONFIGS) | (1 << Op.DESCRIBE_CONFIGS)
    assert auth.authorized_operations("User:bob", "h", R.TOPIC, "orders") == 0


@pytest.mark.parametrize("acls, allowed", [
    ([], False),
    ([acl(op=Op.WRITE, name="a")], True),
    ([acl(op=Op.WRITE, name="a", pattern=PRE)], True),
    ([acl(op=Op.ALL, name="a")], True),
    ([acl(op=Op.READ, name="a")], False),  # no implied operations here
    ([acl(op=Op.WRITE, name="a"), acl(op=Op.WRITE, name="a", perm=DENY)], False),
    ([acl(op=Op.WRITE, name="ab"), acl(op=Op.WRITE, name="a", pattern=PRE, perm=DENY)], False),
    ([acl(op=Op.WRITE, name="ab"), acl(op=Op.WRITE, name="b", pattern=PRE, perm=DENY)], True),
    ([acl(op=Op.WRITE, name="*")], True),
    ([acl(op=Op.WRITE, name="a"), acl(op=Op.WRITE, name="*", perm=DENY)], False),
    ([acl(op=Op.WRITE, name="a", principal="User:bob")], False),
])
def test_authorize_by_resource_type(acls, allowed):
    assert Authorizer(acls).authorize_by_resource_type("User:alice", "h", Op.WRITE, R.TOPIC) is allowed


def test_authorize_by_resource_type_super_user_and_default():
    denied_all = [acl(op=Op.WRITE, name="*", perm=DENY, principal="User:*")]
    assert Authorizer(denied_all, super_users={"User:admin"}).authorize_by_resource_type(
        "User:admin", "h", Op.WRITE, R.TOPIC)
    assert Authorizer([], allow_everyone_if_no_acl_found=True).authorize_by_resource_type(
        "User:alice", "h", Op.WRITE, R.TOPIC)


# ---------------------------------------------------------------------- filters

STORED = [
    acl("orders"), acl("*"), acl("ord", pattern=PRE), acl("orders-eu", pattern=PRE), acl("payments"),
    acl("orders", op=Op.WRITE, perm=DENY, principal="User:bob", host="10.0.0.9"),
    acl("g1", rtype=R.GROUP),
]


@pytest.mark.parametrize("flt, expected", [
    (ANY_FILTER, STORED),
    (AclBindingFilter(resource_type=R.GROUP), [acl("g1", rtype=R.GROUP)]),
    # ANY pattern type: the name compared as is, any pattern type
    (AclBindingFilter(resource_name="orders"), [acl("orders"), STORED[5]]),
    (AclBindingFilter(resource_name="*"), [acl("*")]),
    (AclBindingFilter(resource_name="ord"), [acl("ord", pattern=PRE)]),
    # an exact pattern type
    (AclBindingFilter(resource_name="ord", pattern_type=LIT), []),
    (AclBindingFilter(pattern_type=PRE), [acl("ord", pattern=PRE), acl("orders-eu", pattern=PRE)]),
    # MATCH: what applies to the named resource
    (AclBindingFilter(resource_name="orders", pattern_type=P.MATCH),
     [acl("orders"), acl("*"), acl("ord", pattern=PRE), STORED[5]]),
    (AclBindingFilter(resource_name="orders-eu-1", pattern_type=P.MATCH),
     [acl("*"), acl("ord", pattern=PRE), acl("orders-eu", pattern=PRE)]),
    (AclBindingFilter(resource_type=R.TOPIC, pattern_type=P.MATCH), STORED[:6]),  # no name: everything
    # the entry
    (AclBindingFilter(principal="User:bob"), [STORED[5]]),
    (AclBindingFilter(host="10.0.0.9"), [STORED[5]]),
    (AclBindingFilter(operation=Op.WRITE), [STORED[5]]),
    (AclBindingFilter(operation=Op.ALL), []),  # ALL in a filter is the operation ALL, not "any"
    (AclBindingFilter(permission_type=DENY), [STORED[5]]),
    (AclBindingFilter(permission_type=ALLOW, resource_name="orders"), [acl("orders")]),
])
def test_filter_matches(flt, expected):
    assert sorted(b for b in STORED if flt.matches(b)) == sorted(expected)


# ---------------------------------------------------------------------- CreateAcls validation

@pytest.mark.parametrize("binding, message", [
    (acl(rtype=R.CLUSTER, name="orders"), "The only valid name for the CLUSTER resource is kafka-cluster"),
    (acl(name=""), "Invalid empty resource name"),
    (acl(rtype=R.ANY), "Invalid resourceType ANY"),
    (acl(pattern=P.ANY), "Invalid patternType ANY"),
    (acl(pattern=P.MATCH), "Invalid patternType MATCH"),
    (acl(op=Op.ANY), "Invalid operation ANY"),
    (acl(perm=Perm.ANY), "Invalid permissionType ANY"),
    (acl(principal="alice"), "expected a string in format principalType:principalName but got alice"),
    (acl(principal=""), "principalType:principalName"),
])
def test_create_validation(binding, message):
    with pytest.raises(InvalidRequest, match=message):
        binding.validate()


def test_valid_bindings_pass_validation():
    for b in (acl(), acl(rtype=R.CLUSTER, name="kafka-cluster", op=Op.CLUSTER_ACTION),
              acl(rtype=R.TRANSACTIONAL_ID, name="tx-", pattern=PRE, op=Op.WRITE, perm=DENY),
              acl(principal="User:*", host="127.0.0.1"), acl(rtype=R.USER, op=Op.CREATE_TOKENS)):
        b.validate()


@pytest.mark.parametrize("codes, message", [
    ((0, "t", 3, "User:a", "*", 3, 3), "Unknown resource type code 0"),
    ((2, "t", 9, "User:a", "*", 3, 3), "Unknown pattern type code 9"),
    ((2, "t", 3, "User:a", "*", 15, 3), "Unknown operation code 15"),
    ((2, "t", 3, "User:a", "*", 3, 0), "Unknown permission type code 0"),
])
def test_unknown_codes(codes, message):
    with pytest.raises(InvalidRequest, match=message):
        AclBinding.from_codes(*codes)
    with pytest.raises(InvalidRequest, match=message):
        AclBindingFilter.from_codes(*codes)


def test_client_host():
    assert client_host("127.0.0.1:51234") == "127.0.0.1"
    assert client_host("::1:51234") == "::1"
    assert client_host("in-process") == "in-process"


# ---------------------------------------------------------------------- the store

def test_store_create_describe_delete_and_persistence(tmp_path):
    store = AclStore(str(tmp_path), enabled=True, super_users="User:admin")
    assert list(store) == [] and not os.path.exists(tmp_path / "acls.json")
    results = store.create([acl(), acl(), acl(name=""), acl("ord", pattern=PRE), InvalidRequest("unreadable")])
    assert [None if r is None else str(r) for r in results] == [
        None, None, "Invalid empty resource name", None, "unreadable"]
    assert list(store) == [acl("ord", pattern=PRE), acl()]  # created once, sorted
    assert store.authorize("User:alice", "h", Op.READ, R.TOPIC, "orders")
    assert not store.authorize("User:bob", "h", Op.READ, R.TOPIC, "orders")

    # A new store on the same dir: the same ACLs, the same answers.
    again = AclStore(str(tmp_path), enabled=True)
    assert list(again) == list(store)
    assert again.authorize("User:alice", "h", Op.READ, R.TOPIC, "ordinal")
    doc = json.loads((tmp_path / "acls.json").read_text())
    assert doc["version"] == 1 and doc["acls"][0]["operation"] == "READ"

    # DeleteAcls: per filter what it matched; a binding matched twice is listed twice.
    outcome = again.delete([AclBindingFilter(resource_name="orders", pattern_type=P.MATCH),
                            AclBindingFilter(pattern_type=PRE), AclBindingFilter(principal="User:nobody"),
                            InvalidRequest("bad filter")])
    assert outcome[:3] == [[acl("ord", pattern=PRE), acl()], [acl("ord", pattern=PRE)], []]
    assert str(outcome[3]) == "bad filter"
    assert list(again) == []
    assert list(AclStore(str(tmp_path), enabled=True)) == []
    assert not again.authorize("User:alice", "h", Op.READ, R.TOPIC, "orders")  # default: deny


def test_store_without_authorizer_allows_everything(tmp_path):
    store = AclStore(str(tmp_path))
    store.create([acl(op=Op.ALL, perm=DENY, principal="User:*")])
    assert store.authorize("User:alice", "h", Op.READ, R.TOPIC, "orders")
    assert not store.authorizer.authorize("User:alice", "h", Op.READ, R.TOPIC, "orders")


def test_store_for_broker_reads_the_config(tmp_path):
    config = BrokerConfig(data_dir=str(tmp_path), authorizer_class_name=STANDARD_AUTHORIZER,
                          super_users="User:admin; User:ops", allow_everyone_if_no_acl_found=True)
    store = AclStore.for_broker(str(tmp_path), config)
    assert store.enabled and store.authorizer.super_users == {"User:admin", "User:ops"}
    assert store.authorizer.allow_everyone_if_no_acl_found
    off = AclStore.for_broker(str(tmp_path), BrokerConfig(data_dir=str(tmp_path)))  # Kafka's defaults
    assert not off.enabled and not off.authorizer.super_users and not off.authorizer.allow_everyone_if_no_acl_found


def test_store_refuses_an_unknown_file_version(tmp_path):
    (tmp_path / "acls.json").write_text('{"version": 99, "acls": []}')
    with pytest.raises(ValueError, match="unknown format version 99"):
        AclStore(str(tmp_path))
