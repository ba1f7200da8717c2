"""Each connector is one Spark Structured Streaming query, named after the connector, with its
checkpoint in `<spark.sql.streaming.checkpointLocation>/<connector>`; Kafka is reached through
`format("minilog")` exactly as a user's query would.

FileStreamSource: the file's lines → the value converter → `format("minilog")` with the
exactly-once sink (one transactional id prefix per connector, stable across restarts).
FileStreamSink: `format("minilog")` read committed, from the group `connect-<name>`'s offsets
(Connect's sink group) or the earliest → the value converter → `FileSinkWriter`.

A connector with `transforms` runs its chain (transforms.py) in the query, with `mapInArrow`:
a source's records between the file and the topic (the topic a column, so RegexRouter can route
them), a sink's between the topics and the writer (the record's topic as read kept as
`original_topic`, under which the JDBC sink stores its offsets, as Connect commits a sink's
offsets under the original topic).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

from minilog.jobs.pipeline import checkpoint_token, start_query

from .converters import Converter, connector_converter
from .file_sink import FileSinkWriter
from .jdbc_sink import JdbcSinkWriter
from . import mirror_tasks
from .mirror_plugins import MIRROR_PLUGINS
from .plugins import FILE_SINK, FILE_SOURCE, JDBC_SINK, find_plugin
from .transforms import TransformChain, transform_chain
from .worker_config import WorkerConfig

TRIGGER = "1 second"
# A file source's: a micro-batch that ends early waits for the next trigger, and with a second
# a batch's 32 MiB (~650 ms of work on a quiet machine) capped the connector at 32 MiB/s; an
# idle source asks the file's size five times a second
FILE_SOURCE_TRIGGER = "200 milliseconds"
# The producers' batch.size for a file source's records, unless the worker's
# `producer.batch.size` says otherwise: a micro-batch hands its lines (up to 32 MiB) over at
# once, so small batches only multiply the client's and the broker's per-batch work. 84,000
# lines of 100 B produced, acknowledged and committed in one transaction, on a quiet machine:
# 180-220 ms with Kafka's 16 KiB, 70-90 ms with 256 KiB (docs/BENCHMARKS.md).
SOURCE_BATCH_SIZE = 256 << 10


def checkpoint_dir(worker: WorkerConfig, name: str) -> str:
    return os.path.join(worker.checkpoint_root, name)


def _source_checkpoint(worker: WorkerConfig, name: str, path: str) -> str:
    """One checkpoint per file a source has read, as Connect keys source offsets by filename:
    pointing a connector at another file starts that file at its own offset."""
    digest = hashlib.sha256(path.encode()).hexdigest()[:16]
    return os.path.join(checkpoint_dir(worker, name), f"file-{digest}")


def forget(worker: WorkerConfig, name: str) -> None:
    """A deleted connector's checkpoint goes with it: a new one of the same name starts anew."""
    shutil.rmtree(checkpoint_dir(worker, name), ignore_errors=True)


def _transactional_id_prefix(worker: WorkerConfig, name: str, checkpoint: str) -> str:
    """Stable for as long as the checkpoint lives (a restarted query fences its earlier self),
    new with a new checkpoint: the exactly-once sink remembers the batch ids each transactional
    id committed, and a new checkpoint numbers its batches from 0 again."""
    return f"connect-{worker.group_id}-{name}-{checkpoint_token(checkpoint)}"


def _kafka_options(worker: WorkerConfig) -> dict[str, str]:
    return {f"kafka.{k}": str(v) for k, v in worker.client_config().items()}


def _producer_options(worker: WorkerConfig) -> dict[str, str]:
    """A source connector's sink options: the worker's client settings, then its producers'
    (Connect's `producer.*` worker settings)."""
    return {**_kafka_options(worker), "kafka.batch.size": str(SOURCE_BATCH_SIZE),
            **{f"kafka.{k}": str(v) for k, v in worker.producer.items()}}


def start(spark: SparkSession, worker: WorkerConfig, name: str,
          config: dict[str, str]) -> StreamingQuery | mirror_tasks.MirrorTask:
    """The connector's query, started, and returned once its sources are initialized (one whose
    planner Spark stopped waiting for is started again, as the jobs do). The herder calls it
    from a bounded pool, several connectors at once. MirrorMaker 2's connectors run the
    mirror's flow (mirror_tasks.py)."""
    if find_plugin(config["connector.class"]) in MIRROR_PLUGINS:
        return mirror_tasks.start(spark, worker, name, config, checkpoint_dir(worker, name))
    return start_query(_writer(spark, worker, name, config))


def _writer(spark: SparkSession, worker: WorkerConfig, name: str,
            config: dict[str, str]) -> DataStreamWriter:
    plugin = find_plugin(config["connector.class"])
    if plugin is FILE_SOURCE:
        return _source(spark, worker, name, config,
                       _source_checkpoint(worker, name, config["file"]))
    if plugin is JDBC_SINK:
        return _jdbc_sink(spark, worker, name, config, os.path.join(checkpoint_dir(worker, name),
                                                                    "jdbc"))
    if plugin is FILE_SINK:
        return _sink(spark, worker, name, config, os.path.join(checkpoint_dir(worker, name),
                                                               "sink"))
    raise ValueError(f"no query for {config['connector.class']}")


def _source(spark: SparkSession, worker: WorkerConfig, name: str, config: dict[str, str],
            checkpoint: str) -> DataStreamWriter:
    value = connector_converter(worker.value_converter, config, "value.converter")
    lines = (spark.readStream.format("minilog-connect-file")
             .option("file", config["file"]).option("connector", name)
             .option("offset.storage.topic", worker.offset_topic)
             .option("client", json.dumps(worker.client_config())).load())
    topic = config["topic"].strip()
    records = lines.select(value.from_connect(lines["value"]).alias("value"))
    chain = _chain(worker, config, value, sink=False)
    if chain is not None:
        records = records.select(F.lit(topic).alias("topic"), "value")
        records = records.mapInArrow(chain, records.schema)
    writer = records.writeStream.format("minilog").options(**_producer_options(worker))
    if chain is None:
        writer = writer.option("topic", topic)
    return (writer.option("deliveryGuarantee", "exactly-once")
            .option("transactionalIdPrefix", _transactional_id_prefix(worker, name, checkpoint))
            .option("checkpointLocation", checkpoint)
            .queryName(name).trigger(processingTime=FILE_SOURCE_TRIGGER))


def _sink(spark: SparkSession, worker: WorkerConfig, name: str, config: dict[str, str],
          checkpoint: str) -> DataStreamWriter:
    value = connector_converter(worker.value_converter, config, "value.converter")
    records = _sink_records(spark, worker, name, config)
    writer = FileSinkWriter(config["file"], os.path.join(checkpoint, "file-sink-state.json"))
    writer.prepare()
    return (records.select(value.to_connect(records["value"]).alias("value"))
            .writeStream.foreachBatch(writer).option("checkpointLocation", checkpoint)
            .queryName(name).trigger(processingTime=TRIGGER))


def _jdbc_sink(spark: SparkSession, worker: WorkerConfig, name: str, config: dict[str, str],
               checkpoint: str) -> DataStreamWriter:
    """Rows and offsets in one database transaction per micro-batch (jdbc_sink.py)."""
    records = _sink_records(spark, worker, name, config)
    return (records.writeStream.foreachBatch(JdbcSinkWriter(name, config))
            .option("checkpointLocation", checkpoint)
            .queryName(name).trigger(processingTime=TRIGGER))


def _sink_records(spark: SparkSession, worker: WorkerConfig, name: str,
                  config: dict[str, str]) -> DataFrame:
    """A sink's records: its topics read committed, from its group's offsets (Connect's sink
    group `connect-<name>`) or the earliest."""
    reader = (spark.readStream.format("minilog").options(**_kafka_options(worker))
              .option("kafka.group.id", f"connect-{name}")
              .option("startingOffsets", "group").option("kafka.auto.offset.reset", "earliest")
              .option("kafka.isolation.level", "read_committed"))
    topics = [t.strip() for t in config.get("topics", "").split(",") if t.strip()]
    reader = (reader.option("subscribe", ",".join(topics)) if topics
              # Connect matches topics.regex against the whole name, Spark finds it anywhere
              else reader.option("subscribePattern", f"^(?:{config['topics.regex']})$"))
    value = connector_converter(worker.value_converter, config, "value.converter")
    chain = _chain(worker, config, value, sink=True)
    if chain is None:
        return reader.load()
    if chain.uses_headers:
        reader = reader.option("includeHeaders", "true")
    records = reader.load()
    records = records.select("*", records["topic"].alias("original_topic"))
    return records.mapInArrow(chain, records.schema)


def _chain(worker: WorkerConfig, config: dict[str, str], value: Converter,
           sink: bool) -> TransformChain | None:
    """The connector's transforms, configured (a setting one refuses fails the task here)."""
    key = connector_converter(worker.key_converter, config, "key.converter")
    return transform_chain(config, {"key": key, "value": value}, sink)

