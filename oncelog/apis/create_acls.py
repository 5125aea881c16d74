"""CreateAcls (key 30), v1-3: add ACL bindings (Kafka's AclApis.handleCreateAcls).

Step 1. With an authorizer configured (``authorizer.class.name``), the request's principal needs
ALTER on the cluster, else every result is CLUSTER_AUTHORIZATION_FAILED.
Step 2. Without an authorizer every result is SECURITY_DISABLED, "No Authorizer is configured."
Step 3. Each binding on its own: INVALID_REQUEST with Kafka's message for a binding it would refuse
(a CLUSTER resource not named ``kafka-cluster``, an empty name, ANY or MATCH where a binding needs
a definite value, a principal not ``Type:name``, an unknown code); else created (creating one
that exists succeeds and changes nothing). The accepted bindings are persisted before the answer.

Version notes:

CreateAcls: v1-3 (v0, deprecated by KIP-896, is not served)

- v1: the resource pattern type (KIP-290: LITERAL, PREFIXED).
- v2: flexible versions (compact strings and arrays, tagged fields).
- v3: the USER resource type (KIP-554).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from .. import errors
from ..security.acls import ANONYMOUS, CLUSTER_NAME, AclBinding, AclOperation, ResourceType, client_host
from ._base import NO_THROTTLE, OK, build, response_module

API_KEY = 30
MIN_VERSION = 1
MAX_VERSION = 3


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    store = ctx.broker.acls

    def respond(results):
        return build(m.CreateAclsResponse, throttle_time=NO_THROTTLE, results=tuple(
            build(m.AclCreationResult, error_code=code, error_message=message) for code, message in results))

    # Step 1.
    if not store.authorize(getattr(ctx, "principal", ANONYMOUS), client_host(ctx.peer), AclOperation.ALTER,
                           ResourceType.CLUSTER, CLUSTER_NAME):
        denied = (ErrorCode.cluster_authorization_failed, "Request CreateAcls is not authorized.")
        return respond([denied] * len(request.creations))
    # Step 2.
    if not store.enabled:
        return respond([(ErrorCode.security_disabled, "No Authorizer is configured.")] * len(request.creations))
    # Step 3.
    bindings = []
    for c in request.creations:
        try:
            bindings.append(AclBinding.from_codes(c.resource_type, c.resource_name, c.resource_pattern_type,
                                                  c.principal, c.host, c.operation, c.permission_type))
        except errors.InvalidRequest as exc:
            bindings.append(exc)
    return respond([(OK, None) if exc is None else (errors.error_code_for(exc), str(exc))
                    for exc in store.create(bindings)])
