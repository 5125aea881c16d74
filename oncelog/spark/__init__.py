"""The Spark connector: ``format("oncelog")``, a replayable read_committed source and an
exactly-once, batch-atomic sink for PySpark's Python data source API. Works against oncelog
and any Kafka-protocol cluster (it uses only the public protocol, through ``oncelog.client``).

    from oncelog.spark import OncelogDataSource
    spark.dataSource.register(OncelogDataSource)
"""

from .datasource import OncelogDataSource

__all__ = ["OncelogDataSource"]
