"""Authorized operations (KIP-430) as Kafka encodes them: a bit field, bit n set for
AclOperation code n. oncelog has no ACLs yet, so a client that asks is told every operation
Kafka supports on the resource type is allowed (Kafka's AclEntry.supportedOperations); a client
that does not ask gets AUTHORIZED_OPERATIONS_OMITTED (INT32_MIN), as from Kafka."""

from __future__ import annotations

AUTHORIZED_OPERATIONS_OMITTED = -2147483648

# org.apache.kafka.common.acl.AclOperation codes
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12


def _bits(*ops: int) -> int:
    return sum(1 << op for op in ops)


TOPIC_OPERATIONS = _bits(READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS)
CLUSTER_OPERATIONS = _bits(CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS,
                           IDEMPOTENT_WRITE)
GROUP_OPERATIONS = _bits(READ, DELETE, DESCRIBE)


def authorized(operations: int, requested) -> int:
    return operations if requested else AUTHORIZED_OPERATIONS_OMITTED
