"""ApiVersions (key 18), v0-4: the answer Apache Kafka 4.4 gives, version by version.

API ranges. Each API module declares the versions it serves (``MIN_VERSION``-``MAX_VERSION``);
ApiVersions advertises those, except where a module declares ``ADVERTISED_MIN_VERSION``: Kafka 4.x
advertises Produce from v0 although it serves v3+ (KAFKA-18659, "librdkafka compressed produce fails
unless api versions returns produce v0"; a Produce v0-2 request is still refused, by closing the
connection, as Kafka does). We advertise what Kafka does; measured here, librdkafka 1.9.2 and 2.3.0
(confluent-kafka) wrote gzip, lz4, snappy and zstd batches with either minimum (the compatibility
matrix's ``compressed`` check, run both ways). A request of a version we do not know
is answered by the dispatcher with a v0 response carrying UNSUPPORTED_VERSION and the full list
(KIP-511), so the client can retry at a version both sides know.

Features (v3+, tagged fields). :data:`FEATURES` lists what oncelog implements: its supported
range and its finalized level. As Kafka's ``ApiVersionsResponse`` does:
- below v4, a supported feature whose minimum is 0 is left out (KAFKA-17492): kafka-clients
  3.4 and 3.6 (Flink 1.20's connector ships 3.4; 2.8, 3.0 and 3.9+ accept it, measured in
  tests/kafka/test_client_versions.py) refuse a SupportedFeatureKey with minimum 0
  ("Expected minValue >= 1") and drop the connection, so such a client could not talk to us;
- a finalized feature at level 0 is left out, the others have min = max = the level;
- the epoch is that of the finalized set (ours is fixed: the set never changes at run time).
Kafka also advertises metadata.version, kraft.version, share.version, streams.version and
eligible.leader.replicas.version (KRaft, share groups, streams groups, ELR): oncelog does not claim
them (docs/conformance.md, ``admin.api_versions_feature_names``). It implements neither KRaft nor
ELR; it serves share and streams groups without their features, which only Kafka's broker reads
(to gate those APIs): no 4.4 client, Kafka Streams or tool does, and there is no UpdateFeatures
here to change them.

The response is the same for every request of a version, so it is encoded once per version and
cached.

Version notes:

ApiVersions: v0-4 (an unknown version is answered at v0 with UNSUPPORTED_VERSION, KIP-511)

- v0: the oldest served: the API ranges only.
- v1: ``throttle_time_ms`` in the answer.
- v2: the schema of v1; the throttle is applied after the answer (KIP-219).
- v3: flexible (the body only; the answer's header stays v0); the client's software name and
  version; features in tagged fields (KIP-511, KIP-584).
- v4: a supported feature may have minimum 0 (KAFKA-17011); below v4 such a feature is left out
  (KAFKA-17492).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

from kio.schema.errors import ErrorCode

from ._base import NO_THROTTLE, build, response_module

API_KEY = 18
MIN_VERSION = 0
MAX_VERSION = 4

FEATURES_SINCE = 3  # the tagged feature fields
MIN_ZERO_FEATURES_SINCE = 4  # KAFKA-17492: below this, a supported feature with minimum 0 is left out


class Feature(NamedTuple):
    name: str
    min_version: int  # supported range
    max_version: int
    finalized_level: int  # 0: not finalized, left out of finalized_features


FEATURES = (
    # transaction.version 2 = KIP-890 part 2 (EndTxn v5 epoch bumps, Produce v12 implicit adds)
    Feature("transaction.version", 0, 2, 2),
    # group.version 1 = the consumer group protocol (KIP-848: ConsumerGroupHeartbeat/Describe)
    Feature("group.version", 0, 1, 1),
)
FINALIZED_FEATURES_EPOCH = 1


def advertised_range(mod) -> tuple[int, int]:
    """The (min, max) an API module is advertised with."""
    return getattr(mod, "ADVERTISED_MIN_VERSION", mod.MIN_VERSION), mod.MAX_VERSION


def supported_features(version: int) -> list[Feature]:
    """The features advertised as supported in an ApiVersions response of ``version``."""
    if version < FEATURES_SINCE:
        return []
    return [f for f in FEATURES if version >= MIN_ZERO_FEATURES_SINCE or f.min_version > 0]


def finalized_features(version: int) -> list[Feature]:
    """The features advertised as finalized in an ApiVersions response of ``version``."""
    if version < FEATURES_SINCE:
        return []
    return [f for f in FEATURES if f.finalized_level != 0]


@functools.cache
def response_for(version: int, error_code: ErrorCode = ErrorCode.none):
    from . import HANDLERS

    m = response_module(API_KEY, version)
    keys = tuple(
        m.ApiVersion(api_key=key, min_version=lo, max_version=hi)
        for key, (lo, hi) in ((key, advertised_range(mod)) for key, mod in sorted(HANDLERS.items()))
    )
    supported, finalized, epoch = (), (), -1
    if version >= FEATURES_SINCE:
        supported = tuple(m.SupportedFeatureKey(name=f.name, min_version=f.min_version, max_version=f.max_version)
                          for f in supported_features(version))
        finalized = tuple(m.FinalizedFeatureKey(name=f.name, max_version_level=f.finalized_level,
                                                min_version_level=f.finalized_level)
                          for f in finalized_features(version))
        epoch = FINALIZED_FEATURES_EPOCH
    return build(m.ApiVersionsResponse, error_code=error_code, api_keys=keys, throttle_time=NO_THROTTLE,
                 supported_features=supported, finalized_features_epoch=epoch, finalized_features=finalized,
                 zk_migration_ready=False)


def handle(ctx, request):
    return response_for(ctx.api_version)
