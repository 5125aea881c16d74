"""Kafka protocol client layer used by the Spark connector: nothing here touches broker
internals, so the same code works against oncelog and against any Kafka cluster."""
