"""The sink's Spark side: the writers Spark calls, and the factories that build them.

A factory validates the options, checks the DataFrame's columns (:func:`.writer.check_schema`),
chooses the sink mode once (:func:`.modes.sink_mode`) and prepares it on the driver; the writer
then hands every call to the mode: ``write()`` runs in each task with the task's identity
(:class:`.writer.WriteTask`), ``commit()``/``abort()`` on the driver (a stream: in Spark's
commit runner, another process, which is why the writer and its mode pickle).

A streaming query's transactional-id prefix defaults to ``oncelog-<query id>``: read from the
checkpoint's ``metadata`` on the driver when the checkpoint is a local path, else by each task
from Spark's ``sql.streaming.queryId``.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import replace
from typing import Mapping

from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter

from .faults import crash_point
from .modes import SinkMode, sink_mode
from .options import OptionError, SinkOptions, clean, sink_options
from .writer import WriteTask, check_schema


def stream_writer(options: Mapping[str, str], schema, overwrite: bool) -> "OncelogStreamWriter":
    """``DataSource.streamWriter()``: on the driver before each micro-batch's tasks, and again
    in the commit runner before ``commit()``."""
    opts = clean(sink_options, options)
    check_schema(schema, opts)
    if overwrite:
        raise ValueError("oncelog does not support Complete output mode (a Kafka topic cannot be truncated); "
                         "use Append, or Update through foreachBatch with txnAppId/txnVersion")
    query_id = _query_id_from_checkpoint(opts)
    if opts.transactional_id_prefix is None and query_id is not None:
        opts = replace(opts, transactional_id_prefix=f"oncelog-{query_id}")
    mode = sink_mode(opts)
    mode.prepare(streaming=True, query_id=query_id)
    return OncelogStreamWriter(mode)


def batch_writer(options: Mapping[str, str], schema, overwrite: bool) -> "OncelogBatchWriter":
    """``DataSource.writer()``: once, on the driver, before the tasks (the commit gets this very
    object)."""
    if overwrite:
        # Spark's Kafka sink refuses Overwrite and Ignore (_LEGACY_ERROR_TEMP_3081); PySpark
        # itself refuses ErrorIfExists and Ignore for every Python data source.
        raise OptionError("Save mode Overwrite not allowed for oncelog (a Kafka topic cannot be truncated). "
                          "The allowed save mode is Append: df.write.format(\"oncelog\").mode(\"append\")")
    opts = clean(sink_options, options, batch=True)
    check_schema(schema, opts)
    mode = sink_mode(opts)
    mode.prepare(streaming=False)
    return OncelogBatchWriter(mode)


def _query_id_from_checkpoint(opts: SinkOptions) -> str | None:
    """The query id in ``<checkpointLocation>/metadata`` when the checkpoint is a local path."""
    loc = opts.checkpoint_location
    if not loc:
        return None
    path = loc[len("file:"):] if loc.startswith("file:") else loc
    if "://" in path:
        return None
    try:
        with open(os.path.join(path, "metadata")) as f:
            return json.loads(f.readline()).get("id")
    except (OSError, ValueError):
        return None


class OncelogStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("oncelog")``: one micro-batch per ``commit(messages, batchId)``."""

    def __init__(self, mode: SinkMode) -> None:
        self.mode = mode

    def write(self, iterator):
        return self.mode.write(WriteTask.current(self.mode.opts.transactional_id_prefix, ""), iterator)

    def commit(self, messages, batchId: int) -> None:
        crash_point("before-commit", batchId)
        self.mode.commit(messages, batchId)

    def abort(self, messages, batchId: int) -> None:
        self.mode.abort(messages, batchId)


class OncelogBatchWriter(DataSourceArrowWriter):
    """``df.write.format("oncelog")``. With ``txnAppId`` + ``txnVersion`` (e.g. from inside
    ``foreachBatch``: the query name and the batchId) the write is exactly-once: a version
    already committed is not written again. Without them use ``deliveryGuarantee=at-least-once``."""

    def __init__(self, mode: SinkMode) -> None:
        self.mode = mode
        self.run_id = uuid.uuid4().hex[:8]  # made once on the driver, shared by the tasks
        self.version = mode.opts.txn_version or 0  # the batch id of the commit protocol

    def write(self, iterator):
        return self.mode.write(WriteTask.current(self.mode.opts.transactional_id_prefix, self.run_id), iterator)

    def commit(self, messages) -> None:
        crash_point("before-commit", self.version)
        self.mode.commit(messages, self.version)

    def abort(self, messages) -> None:
        self.mode.abort(messages, self.version)
