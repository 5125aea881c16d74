"""oncelog/spark/kafka_client_configs.json, the Java client's configuration names, types and
validators (kafka-clients 4.4's ProducerConfig, ConsumerConfig and AdminClientConfig), which the
connector checks its ``kafka.*`` options against (oncelog/spark/kafka_configs.py).
``python -m tests.kafka.kafka_config_table`` writes it from the cached jars;
test_kafka_config_table.py checks the committed copy equals what the jar says."""

from __future__ import annotations

import json
import os
import subprocess

from oncelog.tools import apache_kafka as ak
from oncelog.spark.kafka_configs import TABLE_PATH, TABLE_CLIENT_VERSION

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "compat", "ClientConfigDefs.java")


def generate() -> dict:
    jars = ak.fetch_client(TABLE_CLIENT_VERSION)
    classes = ak.compile_java([SOURCE], installation=jars)
    done = subprocess.run(ak.client_command(jars, classes, "ClientConfigDefs"), capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL, check=True)
    return json.loads(done.stdout)


def write() -> None:
    table = generate()
    with open(TABLE_PATH, "w") as f:
        json.dump(table, f, indent=0, sort_keys=True)
        f.write("\n")
    print(f"wrote {TABLE_PATH}: {len(table)} configurations of kafka-clients {TABLE_CLIENT_VERSION}")


if __name__ == "__main__":
    write()
