"""CreateAcls, DescribeAcls and DeleteAcls in-process (tests/apis/harness.py): SECURITY_DISABLED
without an authorizer; with one, per-binding and per-filter results with Kafka's codes and
messages, the CLUSTER ALTER/DESCRIBE check on the request's principal, and ACLs surviving a
broker restart on the same data dir."""

from __future__ import annotations

import asyncio

from oncelog.apis import HANDLERS
from oncelog.apis._base import EncodeAside, RequestContext
from oncelog.security.acls import STANDARD_AUTHORIZER, AclOperation as Op, PatternType as P, PermissionType as Perm
from oncelog.security.acls import ResourceType as R

from .harness import E, Api, request_module, run

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
ALL_VERSIONS = (1, 2, 3)


def _run(tmp_path, scenario, *, authorizer: bool, super_users: str = "", allow_everyone: bool = False):
    """The harness's run with ``authorizer.class.name``, ``super.users`` and
    ``allow.everyone.if.no.acl.found`` set."""
    return run(tmp_path, scenario, authorizer_class_name=STANDARD_AUTHORIZER if authorizer else "",
               super_users=super_users, allow_everyone_if_no_acl_found=allow_everyone)


class AclApi:
    """The three ACL APIs through the harness, as ``principal`` (the request context's)."""

    def __init__(self, api: Api, principal: str = "User:ANONYMOUS", peer: str = "127.0.0.1:40000") -> None:
        self.api, self.principal, self.peer = api, principal, peer

    async def call(self, api_key, version, request):
        ctx = RequestContext(self.api.broker, version, 1, "acl-tests", self.peer, principal=self.principal)
        result = HANDLERS[api_key].handle(ctx, request)
        result = await result if asyncio.iscoroutine(result) else result
        return result.response if isinstance(result, EncodeAside) else result

    async def create(self, *bindings, version=3):
        m = request_module(CREATE_ACLS, version)
        resp = await self.call(CREATE_ACLS, version, m.CreateAclsRequest(creations=tuple(
            m.AclCreation(resource_type=rt, resource_name=name, resource_pattern_type=pt, principal=principal,
                          host=host, operation=op, permission_type=perm)
            for rt, name, pt, principal, host, op, perm in bindings)))
        return [(r.error_code, r.error_message) for r in resp.results]

    async def describe(self, rt=R.ANY, name=None, pt=P.ANY, principal=None, host=None, op=Op.ANY, perm=Perm.ANY,
                       version=3):
        m = request_module(DESCRIBE_ACLS, version)
        return await self.call(DESCRIBE_ACLS, version, m.DescribeAclsRequest(
            resource_type_filter=rt, resource_name_filter=name, pattern_type_filter=pt, principal_filter=principal,
            host_filter=host, operation=op, permission_type=perm))

    async def delete(self, *filters, version=3):
        m = request_module(DELETE_ACLS, version)
        resp = await self.call(DELETE_ACLS, version, m.DeleteAclsRequest(filters=tuple(
            m.DeleteAclsFilter(resource_type_filter=rt, resource_name_filter=name, pattern_type_filter=pt,
                               principal_filter=principal, host_filter=host, operation=op, permission_type=perm)
            for rt, name, pt, principal, host, op, perm in filters)))
        return resp.filter_results


def binding(name="orders", op=Op.READ, perm=Perm.ALLOW, principal="User:alice", host="*", pt=P.LITERAL, rt=R.TOPIC):
    return (rt, name, pt, principal, host, op, perm)


ANY_FILTER = (R.ANY, None, P.ANY, None, None, Op.ANY, Perm.ANY)


def described(resp):
    """DescribeAcls resources as {(type, name, pattern): {(principal, host, op, perm)}}."""
    return {(r.resource_type, r.resource_name, r.pattern_type): {(a.principal, a.host, a.operation, a.permission_type)
                                                                for a in r.acls} for r in resp.resources}


def test_without_an_authorizer_every_acl_api_is_security_disabled(tmp_path):
    async def scenario(api):
        acls = AclApi(api)
        for v in ALL_VERSIONS:
            assert await acls.create(binding(), binding("b"), version=v) == [
                (E.security_disabled, "No Authorizer is configured.")] * 2
            resp = await acls.describe(version=v)
            assert (resp.error_code, resp.error_message, resp.resources) == (
                E.security_disabled, "No Authorizer is configured on the broker", ())
            [r] = await acls.delete(ANY_FILTER, version=v)
            assert (r.error_code, r.error_message, r.matching_acls) == (
                E.security_disabled, "No Authorizer is configured.", ())
        assert len(api.broker.acls) == 0

    _run(tmp_path, scenario, authorizer=False)


def test_create_describe_delete(tmp_path):
    async def scenario(api):
        admin = AclApi(api, "User:admin")
        for v in ALL_VERSIONS:
            assert await admin.create(binding(), version=v) == [(E.none, None)]  # idempotent
        results = await admin.create(
            binding("ord", pt=P.PREFIXED, op=Op.WRITE), binding("*", principal="User:*", op=Op.DESCRIBE),
            binding("orders", op=Op.WRITE, perm=Perm.DENY, principal="User:bob", host="10.0.0.9"),
            binding("kafka-cluster", rt=R.CLUSTER, op=Op.ALTER, principal="User:ops"),
            binding("g", rt=R.GROUP), binding("tx", rt=R.TRANSACTIONAL_ID, op=Op.WRITE),
            # refused, each with Kafka's message; the others are created all the same
            binding("nope", rt=R.CLUSTER), binding(""), binding(rt=R.ANY), binding(pt=P.MATCH),
            binding(pt=P.ANY), binding(op=Op.ANY), binding(perm=Perm.ANY), binding(principal="alice"),
            binding(rt=0), binding(op=99))
        assert results == [(E.none, None)] * 6 + [
            (E.invalid_request, "The only valid name for the CLUSTER resource is kafka-cluster"),
            (E.invalid_request, "Invalid empty resource name"),
            (E.invalid_request, "Invalid resourceType ANY"),
            (E.invalid_request, "Invalid patternType MATCH"),
            (E.invalid_request, "Invalid patternType ANY"),
            (E.invalid_request, "Invalid operation ANY"),
            (E.invalid_request, "Invalid permissionType ANY"),
            (E.invalid_request, "expected a string in format principalType:principalName but got alice"),
            (E.invalid_request, "Unknown resource type code 0"),
            (E.invalid_request, "Unknown operation code 99"),
        ]
        assert len(api.broker.acls) == 7

        for v in ALL_VERSIONS:
            resp = await admin.describe(version=v)
            assert resp.error_code == E.none and resp.error_message is None
            assert len(described(resp)) == 6 and sum(len(r.acls) for r in resp.resources) == 7
        # MATCH: what applies to the topic "orders"
        resp = await admin.describe(R.TOPIC, "orders", P.MATCH)
        assert described(resp) == {
            (R.TOPIC, "orders", P.LITERAL): {("User:alice", "*", Op.READ, Perm.ALLOW),
                                             ("User:bob", "10.0.0.9", Op.WRITE, Perm.DENY)},
            (R.TOPIC, "ord", P.PREFIXED): {("User:alice", "*", Op.WRITE, Perm.ALLOW)},
            (R.TOPIC, "*", P.LITERAL): {("User:*", "*", Op.DESCRIBE, Perm.ALLOW)},
        }
        resp = await admin.describe(R.TOPIC, "orders", P.LITERAL, principal="User:bob")
        assert described(resp) == {(R.TOPIC, "orders", P.LITERAL): {("User:bob", "10.0.0.9", Op.WRITE, Perm.DENY)}}
        resp = await admin.describe(op=77)
        assert (resp.error_code, resp.error_message) == (E.invalid_request, "Unknown operation code 77")

        # DeleteAcls: per filter what it matched, the same binding under two filters
        r1, r2, r3, r4 = await admin.delete(
            (R.TOPIC, "orders", P.MATCH, None, None, Op.ANY, Perm.ALLOW),
            (R.TOPIC, "ord", P.PREFIXED, None, None, Op.ANY, Perm.ANY),
            (R.GROUP, "other", P.ANY, None, None, Op.ANY, Perm.ANY),
            (R.TOPIC, None, 9, None, None, Op.ANY, Perm.ANY))
        assert r1.error_code == E.none and {(a.resource_name, a.pattern_type, a.operation) for a in r1.matching_acls} == {
            ("orders", P.LITERAL, Op.READ), ("ord", P.PREFIXED, Op.WRITE), ("*", P.LITERAL, Op.DESCRIBE)}
        assert all(a.error_code == E.none and a.error_message is None for a in r1.matching_acls)
        assert [(a.resource_type, a.resource_name, a.principal, a.host) for a in r2.matching_acls] == [
            (R.TOPIC, "ord", "User:alice", "*")]
        assert (r3.error_code, r3.matching_acls) == (E.none, ())
        assert (r4.error_code, r4.error_message) == (E.invalid_request, "Unknown pattern type code 9")
        assert len(api.broker.acls) == 4
        for v in ALL_VERSIONS:
            [r] = await admin.delete((R.GROUP, "g", P.LITERAL, "User:alice", "*", Op.READ, Perm.ALLOW), version=v)
            assert len(r.matching_acls) == (1 if v == 1 else 0)
        assert len(api.broker.acls) == 3

    _run(tmp_path, scenario, authorizer=True, super_users="User:admin")


def test_the_acl_apis_need_alter_or_describe_on_the_cluster(tmp_path):
    async def scenario(api):
        admin, ops, alice = AclApi(api, "User:admin"), AclApi(api, "User:ops"), AclApi(api, "User:alice")
        # Nobody but the super user, while no ACL exists (allow.everyone.if.no.acl.found=false).
        assert await alice.create(binding(), binding()) == [
            (E.cluster_authorization_failed, "Request CreateAcls is not authorized.")] * 2
        resp = await alice.describe()
        assert (resp.error_code, resp.error_message) == (
            E.cluster_authorization_failed, "Request DescribeAcls is not authorized.")
        [r] = await alice.delete(ANY_FILTER)
        assert (r.error_code, r.error_message) == (E.cluster_authorization_failed,
                                                   "Request DeleteAcls is not authorized.")
        # ops gets ALTER on the cluster, which implies DESCRIBE; alice DESCRIBE only, from one host.
        assert await admin.create(binding("kafka-cluster", rt=R.CLUSTER, op=Op.ALTER, principal="User:ops"),
                                  binding("kafka-cluster", rt=R.CLUSTER, op=Op.DESCRIBE, principal="User:alice",
                                          host="127.0.0.1")) == [(E.none, None)] * 2
        assert await ops.create(binding()) == [(E.none, None)]
        assert (await ops.describe()).error_code == E.none
        assert (await alice.describe()).error_code == E.none
        assert (await AclApi(api, "User:alice", peer="10.1.1.1:5000").describe()).error_code == \
            E.cluster_authorization_failed
        assert await alice.create(binding("x")) == [(E.cluster_authorization_failed,
                                                     "Request CreateAcls is not authorized.")]
        [r] = await ops.delete((R.TOPIC, None, P.ANY, None, None, Op.ANY, Perm.ANY))
        assert r.error_code == E.none and len(r.matching_acls) == 1
        # A DENY wins over ops' ALLOW.
        assert await admin.create(binding("kafka-cluster", rt=R.CLUSTER, op=Op.ALTER, perm=Perm.DENY,
                                          principal="User:*")) == [(E.none, None)]
        assert await ops.create(binding()) == [(E.cluster_authorization_failed,
                                                "Request CreateAcls is not authorized.")]
        assert await admin.create(binding()) == [(E.none, None)]  # super users are never denied

    _run(tmp_path, scenario, authorizer=True, super_users="User:admin")


def test_allow_everyone_if_no_acl_found_opens_the_acl_apis_until_a_cluster_acl_exists(tmp_path):
    async def scenario(api):
        anyone = AclApi(api, "User:anyone")
        assert await anyone.create(binding("kafka-cluster", rt=R.CLUSTER, op=Op.ALTER, principal="User:ops")) == [
            (E.none, None)]
        assert await anyone.create(binding()) == [(E.cluster_authorization_failed,
                                                   "Request CreateAcls is not authorized.")]

    _run(tmp_path, scenario, authorizer=True, allow_everyone=True)


def test_acls_survive_a_restart(tmp_path):
    async def create(api):
        assert await AclApi(api).create(binding(), binding("tx-", pt=P.PREFIXED, rt=R.TRANSACTIONAL_ID,
                                                           op=Op.WRITE)) == [(E.none, None)] * 2

    async def check(api):
        resp = await AclApi(api).describe()
        assert described(resp) == {
            (R.TOPIC, "orders", P.LITERAL): {("User:alice", "*", Op.READ, Perm.ALLOW)},
            (R.TRANSACTIONAL_ID, "tx-", P.PREFIXED): {("User:alice", "*", Op.WRITE, Perm.ALLOW)},
        }
        assert api.broker.acls.authorize("User:alice", "h", Op.WRITE, R.TRANSACTIONAL_ID, "tx-42")
        assert not api.broker.acls.authorize("User:bob", "h", Op.WRITE, R.TRANSACTIONAL_ID, "tx-42")

    _run(tmp_path, create, authorizer=True, super_users="User:ANONYMOUS")
    _run(tmp_path, check, authorizer=True, super_users="User:ANONYMOUS")
