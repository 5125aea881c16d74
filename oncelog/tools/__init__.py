"""Tools of the tests and the benchmarks, not of the broker or the connector: :mod:`.apache_kafka`
fetches and runs Apache Kafka, the reference the tests, the benchmarks and the demo's
``--broker apache-kafka`` runs compare oncelog with. Client side (tests/test_layers.py): nothing here imports
the broker's packages.
"""
