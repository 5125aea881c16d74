"""DeleteAcls (key 31), v1-3: delete the ACL bindings each filter matches (Kafka's
AclApis.handleDeleteAcls and AclControlManager.deleteAcls).

Step 1. With an authorizer configured, the request's principal needs ALTER on the cluster, else
every filter's result is CLUSTER_AUTHORIZATION_FAILED.
Step 2. Without an authorizer every filter's result is SECURITY_DISABLED, "No Authorizer is
configured."
Step 3. Each filter's result lists the bindings it matched (ANY/MATCH semantics:
oncelog.security.acls), all deleted together and persisted before the answer; a binding two
filters match is listed under both. An unknown code in a filter answers that filter with
INVALID_REQUEST (Kafka rejects the whole request).

Version notes:

DeleteAcls: v1-3 (v0, deprecated by KIP-896, is not served)

- v1: the resource pattern type in filters and matches (KIP-290).
- v2: flexible versions (compact strings and arrays, tagged fields).
- v3: the USER resource type (KIP-554).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from .. import errors
from ..security.acls import ANONYMOUS, CLUSTER_NAME, AclBindingFilter, AclOperation, ResourceType, client_host
from ._base import NO_THROTTLE, OK, build, response_module

API_KEY = 31
MIN_VERSION = 1
MAX_VERSION = 3


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    store = ctx.broker.acls

    def respond(results):
        return build(m.DeleteAclsResponse, throttle_time=NO_THROTTLE, filter_results=tuple(results))

    def failed(code, message):
        return build(m.DeleteAclsFilterResult, error_code=code, error_message=message, matching_acls=())

    # Step 1.
    if not store.authorize(getattr(ctx, "principal", ANONYMOUS), client_host(ctx.peer), AclOperation.ALTER,
                           ResourceType.CLUSTER, CLUSTER_NAME):
        denied = failed(ErrorCode.cluster_authorization_failed, "Request DeleteAcls is not authorized.")
        return respond([denied] * len(request.filters))
    # Step 2.
    if not store.enabled:
        return respond([failed(ErrorCode.security_disabled, "No Authorizer is configured.")] * len(request.filters))
    # Step 3.
    filters = []
    for f in request.filters:
        try:
            filters.append(AclBindingFilter.from_codes(
                f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter, f.principal_filter,
                f.host_filter, f.operation, f.permission_type))
        except errors.InvalidRequest as exc:
            filters.append(exc)
    results = []
    for outcome in store.delete(filters):
        if isinstance(outcome, Exception):
            results.append(failed(errors.error_code_for(outcome), str(outcome)))
            continue
        results.append(build(m.DeleteAclsFilterResult, error_code=OK, error_message=None, matching_acls=tuple(
            build(m.DeleteAclsMatchingAcl, error_code=OK, error_message=None, resource_type=int(b.resource_type),
                  resource_name=b.resource_name, pattern_type=int(b.pattern_type), principal=b.principal,
                  host=b.host, operation=int(b.operation), permission_type=int(b.permission_type))
            for b in outcome)))
    return respond(results)
