"""``format("oncelog")`` without ``spark.dataSource.register``.

PySpark (4.0+, SPARK-45917) registers a Python data source on its own when an importable
top-level module is named ``pyspark_<something>`` and exposes ``DefaultSource``, a DataSource
subclass: the short name is ``DefaultSource.name()`` (pyspark/sql/worker/lookup_data_sources.py).
The lookup runs once per Spark application, in a Python worker, so the worker's interpreter
(PYSPARK_PYTHON) must have this package installed (``pip install oncelog`` ships it).
"""

from oncelog.spark.datasource import OncelogDataSource as DefaultSource

__all__ = ["DefaultSource"]
