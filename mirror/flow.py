"""One flow `A->B` as a Spark Structured Streaming query: `format("minilog")` reading A's
matching topics (read_committed, headers included, from the earliest offsets, its progress
committed to the group `minilog-mirror-A-B` on A so that `minilog groups describe` shows the
replication lag), into `format("minilog-mirror")` on B (sink.py), checkpointed in
`<checkpoint root>/A-B`.

The query subscribes by pattern (MM2's include and exclude lists, internal topics and, with the
default policy, B's own copies left out), so a topic created on A is read from the micro-batch
after it appears; the sink creates its copy first if the driver's refresh has not yet.

A new checkpoint starts from the earliest offsets, or from `resume` (a MirrorSourceConnector's
offsets in Connect's offsets topic, after a KIP-875 alter: the next upstream offset per source
partition), the partitions it does not name from their earliest. A checkpoint that has planned
a batch goes on from its own offsets, as Spark's do.
"""
from __future__ import annotations

import json
import os
import re

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from minilog.connector.client import AdminClient
from minilog.datasource.options import EARLIEST
from minilog.jobs.pipeline import checkpoint_token, start_query

from .config import Flow
from .policy import source_pattern
from .sink import FORMAT, flow_to_json

TRIGGER = "500 milliseconds"
MAX_OFFSETS_PER_TRIGGER = 200_000  # one transaction per task and micro-batch: bounded in size
COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "headers")


def progress_group(flow: Flow) -> str:
    """The group on the source the copy commits its progress to (never checkpointed)."""
    return f"minilog-mirror-{flow.ident}"


def pattern(flow: Flow) -> str:
    return source_pattern(flow.policy, flow.source, flow.target, flow.topics, flow.topics_exclude)


def checkpoint_dir(root: str, flow: Flow) -> str:
    return os.path.join(root, flow.ident)


def transactional_id_prefix(checkpoint: str, flow: Flow) -> str:
    """Stable for as long as the checkpoint lives (a restarted mirror fences its earlier self),
    new with a new checkpoint, whose batch ids start again from 0."""
    return f"minilog-mirror-{flow.ident}-{checkpoint_token(checkpoint)}"


def _kafka(client: dict) -> dict[str, str]:
    return {f"kafka.{k}": str(v) for k, v in client.items()}


def query_name(flow: Flow) -> str:
    """`minilog mirror` runs one query per flow; a Connect worker may run several connectors
    for the same flow (other topics), each a query named after its connector, as every
    connector's query is."""
    return flow.connector or f"mirror_{flow.ident}".replace("-", "_")


def _has_batches(checkpoint: str) -> bool:
    offsets = os.path.join(checkpoint, "offsets")
    return os.path.isdir(offsets) and any(not n.startswith(".") for n in os.listdir(offsets))


def starting_offsets(flow: Flow, checkpoint: str,
                     resume: dict[tuple[str, int], int] | None) -> str:
    """Spark's `startingOffsets`: earliest, or for a new checkpoint with `resume` positions,
    every partition the flow reads now, each at its position or its earliest (Spark's JSON
    names every partition)."""
    if not resume or _has_batches(checkpoint):
        return "earliest"
    wanted = re.compile(pattern(flow))
    with AdminClient(flow.source_client) as admin:
        topics = [t for t in admin.list_topics() if wanted.search(t)]
        described = admin.describe_topics(topics) if topics else {}
    offsets = {t: {str(p): resume.get((t, p), EARLIEST) for p in range(len(d.partitions))}
               for t, d in described.items()}
    return json.dumps(offsets) if offsets else "earliest"


def start(spark: SparkSession, flow: Flow, checkpoint_root: str,
          resume: dict[tuple[str, int], int] | None = None) -> StreamingQuery:
    """The flow's query, started (returned once its source is initialized)."""
    checkpoint = checkpoint_dir(checkpoint_root, flow)
    records = (spark.readStream.format("minilog").options(**_kafka(flow.source_client))
               .option("subscribePattern", pattern(flow))
               .option("startingOffsets", starting_offsets(flow, checkpoint, resume))
               .option("includeHeaders", "true")
               .option("kafka.isolation.level", "read_committed")
               .option("kafka.group.id", progress_group(flow))
               .option("maxOffsetsPerTrigger", str(MAX_OFFSETS_PER_TRIGGER))
               .load())
    # the copy never makes the broker create a topic with its own defaults (topics.py does)
    target = {**flow.target_client, "allow.auto.create.topics": "false"}
    writer = (records.select(*COLUMNS).writeStream.format(FORMAT).options(**_kafka(target))
              .option("mirror.flow", flow_to_json(flow))
              .option("transactionalIdPrefix", transactional_id_prefix(checkpoint, flow))
              .option("checkpointLocation", checkpoint)
              .queryName(query_name(flow))
              .trigger(processingTime=TRIGGER))
    return start_query(writer)
