"""The Kafka APIs oncelog implements: one module per API, each declaring its version range.

``HANDLERS`` feeds both request dispatch and the ApiVersions response, so the broker advertises
exactly what it implements.
"""

from . import (
    add_offsets_to_txn,
    alter_configs,
    incremental_alter_configs,
    create_acls,
    delete_acls,
    describe_acls,
    alter_user_scram_credentials,
    describe_user_scram_credentials,
    sasl_authenticate,
    sasl_handshake,
    add_partitions_to_txn,
    api_versions,
    describe_transactions,
    end_txn,
    list_transactions,
    txn_offset_commit,
    write_txn_markers,
    delete_groups,
    describe_groups,
    find_coordinator,
    heartbeat,
    join_group,
    leave_group,
    list_groups,
    offset_commit,
    offset_delete,
    offset_fetch,
    sync_group,
    create_partitions,
    create_topics,
    delete_records,
    delete_topics,
    describe_cluster,
    describe_configs,
    describe_log_dirs,
    describe_producers,
    describe_topic_partitions,
    elect_leaders,
    fetch,
    init_producer_id,
    list_offsets,
    list_partition_reassignments,
    metadata,
    produce,
)

MODULES = [
    produce, fetch, list_offsets, metadata, api_versions, create_topics, delete_topics, delete_records,
    describe_configs, create_partitions, describe_cluster, init_producer_id, describe_producers,
    find_coordinator, join_group, sync_group, heartbeat, leave_group, describe_groups, list_groups,
    delete_groups, offset_commit, offset_fetch, offset_delete,
    add_partitions_to_txn, add_offsets_to_txn, end_txn, txn_offset_commit, write_txn_markers,
    list_transactions, describe_transactions,
    describe_log_dirs, describe_topic_partitions, list_partition_reassignments, elect_leaders,
    alter_configs, incremental_alter_configs,
    describe_acls, create_acls, delete_acls,
    describe_user_scram_credentials, alter_user_scram_credentials,
    sasl_handshake, sasl_authenticate,
]

HANDLERS = {m.API_KEY: m for m in MODULES}
