"""What the handlers share to enforce ACLs, as Kafka's KafkaApis does (AuthHelper).

Every check asks the broker's :class:`~oncelog.security.acls.AclStore` about the request's
principal and client host; with no authorizer configured (``authorizer.class.name`` unset) every
check passes, so a broker without an authorizer behaves exactly as before.

Kafka's rules, which the handlers follow:
- a refused topic is answered TOPIC_AUTHORIZATION_FAILED per topic or partition, a refused group
  GROUP_AUTHORIZATION_FAILED, a refused transactional id TRANSACTIONAL_ID_AUTHORIZATION_FAILED, a
  refused cluster operation CLUSTER_AUTHORIZATION_FAILED;
- authorization comes before existence: a topic the principal may not DESCRIBE is
  TOPIC_AUTHORIZATION_FAILED whether it exists or not, so names do not leak;
- lists (Metadata of all topics, ListGroups, ListTransactions) silently leave out what the
  principal may not DESCRIBE.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..security.acls import ANONYMOUS, CLUSTER_NAME, AclOperation, ResourceType, client_host

Op = AclOperation
R = ResourceType

TOPIC_DENIED = ErrorCode.topic_authorization_failed
GROUP_DENIED = ErrorCode.group_authorization_failed
TXN_DENIED = ErrorCode.transactional_id_authorization_failed
CLUSTER_DENIED = ErrorCode.cluster_authorization_failed


def who(ctx) -> tuple[str, str]:
    return getattr(ctx, "principal", ANONYMOUS), client_host(getattr(ctx, "peer", ""))


def allowed(ctx, op: AclOperation, rtype: ResourceType, name: str = CLUSTER_NAME) -> bool:
    """May the request's principal perform ``op`` on the resource? (True without an authorizer.)"""
    principal, host = who(ctx)
    return ctx.broker.acls.authorize(principal, host, op, rtype, name)


def cluster(ctx, op: AclOperation) -> bool:
    return allowed(ctx, op, R.CLUSTER, CLUSTER_NAME)


def topic(ctx, op: AclOperation, name: str) -> bool:
    return allowed(ctx, op, R.TOPIC, name)


def group(ctx, op: AclOperation, name: str) -> bool:
    return allowed(ctx, op, R.GROUP, name)


def transactional_id(ctx, op: AclOperation, name: str) -> bool:
    return allowed(ctx, op, R.TRANSACTIONAL_ID, name)


def filter_topics(ctx, op: AclOperation, names) -> set[str]:
    """The names among ``names`` the principal may ``op`` (each asked once)."""
    return {n for n in set(names) if n is not None and topic(ctx, op, n)}


def describable_topics(ctx):
    """``names -> the names the request's principal may DESCRIBE``, for the group coordinator to
    resolve KIP-848 regexes with (Kafka's TopicRegexResolver.filterTopicDescribeAuthorizedTopics:
    a regex resolves only to topics its member's principal may describe)."""
    return lambda names: filter_topics(ctx, Op.DESCRIBE, names)


def any_topic(ctx, op: AclOperation) -> bool:
    """May the principal ``op`` *some* topic (Kafka's authorizeByResourceType)?"""
    store = ctx.broker.acls
    if not store.enabled:
        return True
    principal, host = who(ctx)
    return store.authorizer.authorize_by_resource_type(principal, host, op, R.TOPIC)


def idempotent_write(ctx) -> bool:
    """An idempotent producer without a transactional id (Kafka 3.x+, KIP-679): IDEMPOTENT_WRITE
    on the cluster, or WRITE on any topic."""
    return cluster(ctx, Op.IDEMPOTENT_WRITE) or any_topic(ctx, Op.WRITE)
