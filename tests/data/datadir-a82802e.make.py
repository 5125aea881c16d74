"""Write a data directory with the oncelog of a82802e: the fixture datadir-a82802e.tar.gz (run with PYTHONPATH=<a checkout of a82802e>, then add the leftovers its test describes)."""
import asyncio, json, os, sys, uuid
from oncelog.broker import Broker
from oncelog.config.settings import BrokerConfig
from oncelog.security.acls import AclBinding
from oncelog.protocol import records as rb
from oncelog.partition import AppendOrigin

data_dir = sys.argv[1]

async def main():
    config = BrokerConfig(data_dir=data_dir, authorizer_class_name="org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                          super_users="User:admin")
    b = Broker(config)
    b.open()
    b.logs.create_topic("orders", 3, configs={"retention.ms": "3600000", "cleanup.policy": "compact,delete"})
    b.logs.create_topic("events.v1", 2)
    b.logs.create_topic("gone", 1)
    await b.partitions.delete_topic("gone")
    b.logs.create_partitions("events.v1", 4)
    b.logs.set_broker_configs(False, {"min.insync.replicas": "1", "log.cleaner.backoff.ms": "20000",
                                      "producer.id.expiration.ms": "7200000"}, validate_only=False)
    b.logs.set_broker_configs(True, {"log.retention.ms": "86400000"}, validate_only=False)
    b.group_configs.replace("g1", {"consumer.heartbeat.interval.ms": "7000"}, validate_only=False)
    b.acls.create([AclBinding.from_codes(2, "orders", 3, "User:alice", "*", 3, 3)])
    b.scram_credentials.set_password("alice", "SCRAM-SHA-256", "alice-secret", salt=b"s" * 16)
    pids = [b.producer_ids.allocate() for _ in range(3)]
    p = b.partitions.get("orders", 1)
    now = b.clock()
    for i in range(5):
        p.append(rb.build_batch([(f"k{i}".encode(), f"v{i}".encode())], timestamp_ms=now), now_ms=now)
    await b.logs.flusher.run_round(full=True)
    expected = {
        "cluster_id": b.logs.cluster_id,
        "topics": {t.name: {"topic_id": str(t.topic_id), "partitions": t.partitions, "overrides": t.overrides}
                   for t in b.logs.topics.values()},
        "dynamic_default": dict(b.logs.layers.dynamic_default), "dynamic_broker": dict(b.logs.layers.dynamic_broker),
        "group_configs": {"g1": b.group_configs.get("g1")},
        "acls": [str(a) for a in b.acls],
        "scram_users": b.scram_credentials.users(),
        "next_producer_id_at_least": pids[-1] + 1,
        "orders_1_end": p.log.log_end_offset,
        "internal_placement": b.logs.internal_placement,
    }
    await b.partitions.close()
    with open(os.path.join(data_dir, "..", "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)

asyncio.run(main())
