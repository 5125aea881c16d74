"""DescribeUserScramCredentials (key 50), v0 (KIP-554): each user's SCRAM mechanisms and
iteration counts — never salts or keys — as Kafka's ScramImage.describe answers. Null or no
users: every user with a credential; a user named twice is DUPLICATE_RESOURCE, one without
credentials RESOURCE_NOT_FOUND, with Kafka's messages; the top-level error is NONE. ACLs (Kafka's KafkaApis.handleDescribeUserScramCredentialsRequest): DESCRIBE on the cluster, else
the top-level error is CLUSTER_AUTHORIZATION_FAILED and nothing is described.

Version notes:

DescribeUserScramCredentials: v0

- v0: the only version (KIP-554), flexible versions (compact strings and arrays, tagged fields).
"""

from __future__ import annotations

from . import _authz
from ._base import NO_THROTTLE, OK, build, response_module

API_KEY = 50
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    if not _authz.cluster(ctx, _authz.Op.DESCRIBE):
        return build(m.DescribeUserScramCredentialsResponse, throttle_time=NO_THROTTLE,
                     error_code=_authz.CLUSTER_DENIED, error_message=None, results=())
    users = None if request.users is None else [u.name for u in request.users]
    results = ctx.broker.scram_credentials.describe(users)
    return build(m.DescribeUserScramCredentialsResponse, throttle_time=NO_THROTTLE, error_code=OK,
                 error_message=None, results=tuple(
                     m.DescribeUserScramCredentialsResult(
                         user=r.user, error_code=r.error_code, error_message=r.error_message,
                         credential_infos=tuple(m.CredentialInfo(mechanism=mech, iterations=iterations)
                                                for mech, iterations in r.credential_infos))
                     for r in results))
