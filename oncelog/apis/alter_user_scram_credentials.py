"""AlterUserScramCredentials (key 51), v0 (KIP-554): set and delete users' SCRAM credentials, as
Kafka's controller (ScramControlManager.alterCredentials) does. Each upsertion carries the salt,
the iteration count and the salted password the client computed; the broker keeps only the salt,
the iterations and the derived stored and server keys, in
:class:`~oncelog.security.scram.ScramCredentialStore` (persisted, one atomic write per request).
One result per user named: NONE, or DUPLICATE_RESOURCE (named twice), UNACCEPTABLE_CREDENTIAL
(empty name, iterations outside 4096..16384), UNSUPPORTED_SASL_MECHANISM, RESOURCE_NOT_FOUND
(deleting a credential that does not exist), with Kafka's messages.

ACLs (Kafka's KafkaApis.handleAlterUserScramCredentialsRequest): ALTER on the cluster, else every
user's result is CLUSTER_AUTHORIZATION_FAILED and no credential changes.

Version notes:

AlterUserScramCredentials: v0

- v0: the only version (KIP-554), flexible versions (compact strings and arrays, tagged fields).
"""

from __future__ import annotations

from . import _authz
from ._base import NO_THROTTLE, build, response_module

API_KEY = 51
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)
    if not _authz.cluster(ctx, _authz.Op.ALTER):
        users = dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions])
        return build(m.AlterUserScramCredentialsResponse, throttle_time=NO_THROTTLE, results=tuple(
            m.AlterUserScramCredentialsResult(user=u, error_code=_authz.CLUSTER_DENIED, error_message=None)
            for u in users))
    results = ctx.broker.scram_credentials.alter(request.deletions, request.upsertions)
    return build(m.AlterUserScramCredentialsResponse, throttle_time=NO_THROTTLE, results=tuple(
        m.AlterUserScramCredentialsResult(user=r.user, error_code=r.error_code, error_message=r.error_message)
        for r in results))
