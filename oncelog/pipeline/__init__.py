"""The exactly-once pipeline behind ``oncelog demo`` and ``python -m bench pipeline``.

* :mod:`.events`: the "orders" event stream: a seeded generator (customers, amounts, event
  times, invalid events, late and out-of-order events) written with a transactional
  confluent-kafka producer, some transactions aborted on purpose; and the rules the job
  applies (validation, amount classes, windows, watermark), in plain Python for the ground truth.
* :mod:`.config`: :class:`~.config.PipelineConfig`, the run's settings, each with its
  ``oncelog demo`` flag: the demo's parser is generated from it, and the job gets it as JSON.
* :mod:`.job`: the PySpark Structured Streaming job (a driver process of its own, its one
  argument a :class:`~.job.JobConfig` as JSON): per-event enrichment written through
  ``format("oncelog")``, and two stateful aggregations on the RocksDB state store written from
  ``foreachBatch`` with ``txnAppId``/``txnVersion``.
* :mod:`.procs`: the Spark driver as a killable process group.
* :mod:`.cluster`: where it runs (an oncelog broker, Apache Kafka from the cache, or an existing
  cluster) and what a broker SIGKILL means there.
* :mod:`.observe`: a read_committed reader that counts (and times) outputs as they appear.
* :mod:`.verify`: the end-of-run proof: the auditor on the per-event output, and the aggregates
  against a ground truth recomputed from the committed input.
* :mod:`.run`: the orchestration (broker, generator, driver, chaos, drain, verify).
"""
