"""DescribeAcls (key 29), v1-3: the ACL bindings one filter matches (Kafka's
AclApis.handleDescribeAcls), grouped by resource pattern.

Step 1. With an authorizer configured, the request's principal needs DESCRIBE on the cluster
(ALTER implies it), else CLUSTER_AUTHORIZATION_FAILED.
Step 2. Without an authorizer: SECURITY_DISABLED, "No Authorizer is configured on the broker".
Step 3. The bindings the filter matches (ANY/MATCH semantics: oncelog.security.acls), one
resource entry per (resource type, name, pattern type), sorted. An unknown code in the filter
answers INVALID_REQUEST (Kafka closes the connection instead).

Version notes:

DescribeAcls: v1-3 (v0, deprecated by KIP-896, is not served)

- v1: the resource pattern type in the filter and the answer (KIP-290).
- v2: flexible versions (compact strings and arrays, tagged fields).
- v3: the USER resource type (KIP-554).
"""

from __future__ import annotations

import itertools

from kio.schema.errors import ErrorCode

from .. import errors
from ..security.acls import ANONYMOUS, CLUSTER_NAME, AclBindingFilter, AclOperation, ResourceType, client_host
from ._base import NO_THROTTLE, OK, build, response_module

API_KEY = 29
MIN_VERSION = 1
MAX_VERSION = 3


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    store = ctx.broker.acls

    def respond(code=OK, message=None, resources=()):
        return build(m.DescribeAclsResponse, throttle_time=NO_THROTTLE, error_code=code, error_message=message,
                     resources=tuple(resources))

    # Step 1.
    if not store.authorize(getattr(ctx, "principal", ANONYMOUS), client_host(ctx.peer), AclOperation.DESCRIBE,
                           ResourceType.CLUSTER, CLUSTER_NAME):
        return respond(ErrorCode.cluster_authorization_failed, "Request DescribeAcls is not authorized.")
    # Step 2.
    if not store.enabled:
        return respond(ErrorCode.security_disabled, "No Authorizer is configured on the broker")
    # Step 3.
    try:
        acl_filter = AclBindingFilter.from_codes(
            request.resource_type_filter, request.resource_name_filter, request.pattern_type_filter,
            request.principal_filter, request.host_filter, request.operation, request.permission_type)
    except errors.InvalidRequest as exc:
        return respond(errors.error_code_for(exc), str(exc))
    found = store.describe(acl_filter)  # sorted: each pattern's bindings are adjacent
    resources = []
    for (rtype, name, ptype), group in itertools.groupby(
            found, key=lambda b: (b.resource_type, b.resource_name, b.pattern_type)):
        resources.append(build(m.DescribeAclsResource, resource_type=int(rtype), resource_name=name,
                               pattern_type=int(ptype), acls=tuple(
            build(m.AclDescription, principal=b.principal, host=b.host, operation=int(b.operation),
                  permission_type=int(b.permission_type)) for b in group)))
    return respond(resources=resources)
