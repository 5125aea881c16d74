"""The Kafka APIs oncelog implements: one module per API, each declaring its version range.

``HANDLERS`` feeds both request dispatch and the ApiVersions response, so the broker advertises
exactly what it implements.
"""

from . import (
    api_versions,
    create_partitions,
    create_topics,
    delete_records,
    delete_topics,
    describe_cluster,
    describe_configs,
    describe_producers,
    fetch,
    init_producer_id,
    list_offsets,
    metadata,
    produce,
)

MODULES = [
    produce, fetch, list_offsets, metadata, api_versions, create_topics, delete_topics, delete_records,
    describe_configs, create_partitions, describe_cluster, init_producer_id, describe_producers,
]

HANDLERS = {m.API_KEY: m for m in MODULES}
