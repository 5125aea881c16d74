"""ListConfigResources (key 74), v0-1 (KIP-1142; v0 was ListClientMetricsResources): the
resources that can have configs, as a one-node Kafka 4.4 lists them (measured against it):

* v0, or v1 asking for CLIENT_METRICS (16): the client-metrics subscriptions — oncelog has no
  client telemetry (KIP-714), so none;
* TOPIC (2): every topic but the internal ones (``__consumer_offsets``, ``__transaction_state``);
* BROKER (4) and BROKER_LOGGER (8): this broker, named by its node id;
* GROUP (32): the groups that have configs of their own (IncrementalAlterConfigs on a group), not
  every group;
* an empty list: all of those; a type twice: listed once; any other type: UNSUPPORTED_VERSION and
  nothing listed.

ACLs (Kafka's KafkaApis.handleListConfigResources): DESCRIBE_CONFIGS on the cluster, else
CLUSTER_AUTHORIZATION_FAILED.

Version notes:

ListConfigResources: v0-1

- v0: ListClientMetricsResources (KIP-714): the client-metrics resources.
- v1: renamed ListConfigResources; ``resource_types`` in the request, each resource's type in the
  answer (KIP-1142).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..metadata.topics import INTERNAL_TOPICS
from . import _authz
from ._base import NO_THROTTLE, OK, build, response_module

API_KEY = 74
MIN_VERSION = 0
MAX_VERSION = 1

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
ALL_TYPES = (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP)


def handle(ctx, request):
    m = response_module(API_KEY, ctx.api_version)

    def respond(code, resources=()):
        return build(m.ListConfigResourcesResponse, throttle_time=NO_THROTTLE, error_code=code,
                     config_resources=tuple(resources))

    if not _authz.cluster(ctx, _authz.Op.DESCRIBE_CONFIGS):
        return respond(_authz.CLUSTER_DENIED)
    if ctx.api_version == 0:
        return respond(OK)  # client-metrics subscriptions only: oncelog has none
    asked = tuple(dict.fromkeys(int(t) for t in request.resource_types)) or ALL_TYPES
    if any(t not in ALL_TYPES for t in asked):
        return respond(ErrorCode.unsupported_version)
    broker = ctx.broker
    found: list[tuple[int, str]] = []
    for rtype in asked:
        if rtype == TOPIC:
            found += [(TOPIC, name) for name in sorted(broker.metadata.topics) if name not in INTERNAL_TOPICS]
        elif rtype in (BROKER, BROKER_LOGGER):
            found.append((rtype, str(broker.node_id)))
        elif rtype == GROUP:
            found += [(GROUP, g) for g in broker.metadata.group_configs.group_ids()]
    return respond(OK, (m.ConfigResource(resource_name=name, resource_type=rtype) for rtype, name in found))
