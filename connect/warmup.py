"""Spark's Python processes started before the first connector needs them.

Spark runs each step of a Python data source in a Python process forked from a daemon of its
own for that step: creating the source, planning its read, the write, the stream sink's
commits, and the tasks' workers. A worker's first connector waited for every one of those
daemons to start, one after the other, each an interpreter importing pyspark: `python -m bench
connect`'s FileStreamSource, 200,000 lines, took 19.9 s for its first 83,886-line micro-batch
in a fresh worker and 4.2 s after another connector had run (load 12-14 on 2 cores). Once
started, a daemon lives as long as the JVM and forks workers in milliseconds.

So a worker with no connector to run, when it starts, runs one tiny query through the same
steps: a one-row Python stream source into a Python stream sink that keeps nothing, nothing read
from or written to Kafka. It runs in a thread of its own while the REST API answers and the
herder works: a connector created meanwhile starts at once and shares the daemons (Spark starts
each one once), so it never waits for the warm-up. A worker with connectors to bring back skips
it: their own queries start those processes at once. Only a query's own source process (one per
query) is left for the connector's start. It logs "Spark's Python processes started" when done.
"""
from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StringType, StructField, StructType

from minilog.datasource.registration import register

log = logging.getLogger("minilog.connect")
NAME = "minilog-connect-warmup"


class _OneRow(DataSourceStreamReader):
    def initialOffset(self) -> dict[str, int]:
        return {"row": 0}

    def latestOffset(self) -> dict[str, int]:
        return {"row": 1}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return [InputPartition(0)] if end["row"] > start["row"] else []

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield pa.RecordBatch.from_arrays([pa.array(["warm"], pa.string())], names=["value"])

    def commit(self, end: dict) -> None:
        pass


class _Discard(DataSourceStreamArrowWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        for _ in iterator:
            pass
        return WriterCommitMessage()

    def commit(self, messages: list, batchId: int) -> None:
        pass

    def abort(self, messages: list, batchId: int) -> None:
        pass


class WarmupDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        return StructType([StructField("value", StringType(), True)])

    def streamReader(self, schema: StructType) -> _OneRow:
        return _OneRow()

    def streamWriter(self, schema: StructType, overwrite: bool) -> _Discard:
        return _Discard()


def warm_up(spark: SparkSession, stopping: threading.Event) -> None:
    """Run the one-row query until its row is through (or the worker is stopping). A failure
    only costs the head start: it is logged, and the connectors start as they would have."""
    checkpoint = tempfile.mkdtemp(prefix="minilog-connect-warmup-")
    started = time.monotonic()
    try:
        register(spark, WarmupDataSource)
        query = (spark.readStream.format(NAME).load().writeStream.format(NAME)
                 .option("checkpointLocation", checkpoint).queryName(NAME)
                 .trigger(processingTime="100 milliseconds").start())
        try:
            while query.isActive and not stopping.is_set() and not any(
                    p.get("numInputRows") for p in query.recentProgress):
                stopping.wait(0.1)
            failure = None if query.isActive else query.exception()
        finally:
            query.stop()
        if failure is not None:
            raise RuntimeError(str(failure))
        log.info("Spark's Python processes started in %.1f s", time.monotonic() - started)
    except Exception as e:  # noqa: BLE001 - the connectors start all the same
        log.warning("starting Spark's Python processes ahead of the connectors failed: %s", e)
    finally:
        shutil.rmtree(checkpoint, ignore_errors=True)
