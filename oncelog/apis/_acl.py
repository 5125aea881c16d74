"""Authorized operations (KIP-430) as Kafka encodes them: a bit field, bit n set for
AclOperation code n, over the operations Kafka supports on the resource type
(AclEntry.supportedOperations) that the request's principal may perform on the resource, as the
authorizer answers (Kafka's AuthHelper.authorizedOperations). With no authorizer configured every
supported operation is set, as from Kafka. A client that does not ask gets
AUTHORIZED_OPERATIONS_OMITTED (INT32_MIN), as from Kafka."""

from __future__ import annotations

from ..security.acls import CLUSTER_NAME, SUPPORTED_OPERATIONS, ResourceType
from ._authz import who

AUTHORIZED_OPERATIONS_OMITTED = -2147483648


def operations(ctx, resource_type: ResourceType, name: str = CLUSTER_NAME) -> int:
    """The bit field of what the request's principal may do on the resource."""
    store = ctx.broker.acls
    if not store.enabled:
        return sum(1 << op for op in SUPPORTED_OPERATIONS[resource_type])
    principal, host = who(ctx)
    return store.authorizer.authorized_operations(principal, host, resource_type, name)


def authorized(ctx, resource_type: ResourceType, name: str, requested) -> int:
    """:func:`operations` when the client asked for them, else AUTHORIZED_OPERATIONS_OMITTED."""
    return operations(ctx, resource_type, name) if requested else AUTHORIZED_OPERATIONS_OMITTED
