"""ApiVersions (key 18), v0-4.

Advertises exactly the (min, max) pairs the API modules declare. A request of a version we do
not know is answered by the dispatcher with a v0 response carrying UNSUPPORTED_VERSION and the
full list (KIP-511), so the client can retry at a version both sides know. The response is the
same for every request of a version, so it is encoded once per version and cached.
"""

from __future__ import annotations

import functools

from kio.schema.errors import ErrorCode

from ._base import NO_THROTTLE, build, response_module

API_KEY = 18
MIN_VERSION = 0
MAX_VERSION = 4


@functools.cache
def response_for(version: int, error_code: ErrorCode = ErrorCode.none):
    from . import HANDLERS

    m = response_module(API_KEY, version)
    keys = tuple(
        m.ApiVersion(api_key=key, min_version=mod.MIN_VERSION, max_version=mod.MAX_VERSION)
        for key, mod in sorted(HANDLERS.items())
    )
    supported, finalized, epoch = (), (), -1
    if hasattr(m, "SupportedFeatureKey"):
        # transaction.version 2 = KIP-890 part 2 (EndTxn v5 epoch bumps, Produce v12 implicit adds)
        supported = (m.SupportedFeatureKey(name="transaction.version", min_version=0, max_version=2),)
        finalized = (m.FinalizedFeatureKey(name="transaction.version", max_version_level=2, min_version_level=2),)
        epoch = 1
    return build(m.ApiVersionsResponse, error_code=error_code, api_keys=keys, throttle_time=NO_THROTTLE,
                 supported_features=supported, finalized_features_epoch=epoch, finalized_features=finalized,
                 zk_migration_ready=False)


def handle(ctx, request):
    return response_for(ctx.api_version)
