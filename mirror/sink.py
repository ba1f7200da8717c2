"""The copy's sink, `format("minilog-mirror")`: the exactly-once sink of `format("minilog")`
(a transaction per task, prepared by the task and committed by the driver for the whole
micro-batch, `minilog.datasource.transactional`), sending each source record to its remote
topic and partition with its key, value, headers and timestamp, and learning in the same
transaction where each record landed.

Where the records land is what offset translation needs. One task copies one source partition
per micro-batch (the source plans one range per partition, never split for the mirror), in
offset order, and the mirror is the only writer of the remote topic, so the task's records of
a partition are contiguous on the target: the offsets of its first and last record (the two
sent one by one, the rest in bulk) give every other. The task then writes, in the same
transaction, MM2 offset syncs (`formats.OffsetSync`) to the staging topic
`minilog-mirror-syncs.<source>.internal` on the target: one where each run of consecutive
source offsets starts (a gap: a transaction marker or aborted records on the source, a new
micro-batch) and one just past its last record. They are committed exactly when the records
are, so the syncs read with read_committed are exact, through any crash; `checkpoints.py`
forwards them to MM2's offset-syncs topic (on the source or the target, KIP-716) and
translates with them.
"""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSource, DataSourceStreamArrowWriter

from minilog.connector.client import KafkaError
from minilog.datasource import clients
from minilog.datasource.options import sink_options
from minilog.datasource.transactional import (
    completer_for,
    new_batch_prefix,
    new_run,
    write_prepared,
)

from .config import Flow
from .formats import OffsetSync
from .policy import ReplicationPolicy
from .topics import ensure_remote
from .translate import Runs

FORMAT = "minilog-mirror"
_SENT = ("key", "value", "topic", "partition", "timestamp", "headers")


def staging_topic(flow: Flow) -> str:
    return f"minilog-mirror-syncs{flow.policy.separator}{flow.source}{flow.policy.separator}internal"


def flow_to_json(flow: Flow) -> str:
    return json.dumps(dataclasses.asdict(flow))


def flow_from_json(text: str) -> Flow:
    fields = json.loads(text)
    fields["policy"] = ReplicationPolicy(**fields["policy"])
    return Flow(**fields)


class _PartitionCopy:
    """One source partition's records in one task: sent in order, their offsets learnt from
    the first and the last record, each sent alone (the rest go in bulk)."""

    def __init__(self, topic: str, partition: int):
        self.runs = Runs(topic, partition)
        self.first = self.last = None                  # delivery futures with offsets
        self.held: pa.RecordBatch | None = None        # the last row so far, not yet sent

    def add(self, producer, rows: pa.RecordBatch, upstream: np.ndarray, deliveries: list) -> None:
        self.runs.observe(upstream)
        if self.first is None:
            self.first = _send_one(producer, rows, 0)
            rows = rows.slice(1)
        if self.held is not None and rows.num_rows:
            deliveries.append(producer.send_arrow(self.held))
            self.held = None
        if rows.num_rows:
            if rows.num_rows > 1:
                deliveries.append(producer.send_arrow(rows.slice(0, rows.num_rows - 1)))
            self.held = rows.slice(rows.num_rows - 1)

    def finish(self, producer) -> None:
        if self.held is not None:
            self.last = _send_one(producer, self.held, 0)
            self.held = None
        else:
            self.last = self.first

    def syncs(self) -> list[OffsetSync]:
        """MM2 offset syncs of this task's records (once the producer flushed)."""
        return self.runs.syncs(self.first.result(0).offset, self.last.result(0).offset)


def _send_one(producer, rows: pa.RecordBatch, i: int):
    """Send row `i` alone (its future carries its offset)."""
    row = rows.slice(i, 1).to_pylist()[0]
    stamp = rows.column("timestamp").slice(i, 1)
    if pa.types.is_timestamp(stamp.type):
        per_ms = {"s": None, "ms": 1, "us": 1000, "ns": 1_000_000}[stamp.type.unit]
        raw = stamp.cast(pa.int64())[0].as_py()
        millis = None if raw is None else (raw * 1000 if per_ms is None else raw // per_ms)
    else:
        millis = stamp[0].as_py()
    headers = [(h["key"], h["value"]) for h in (row.get("headers") or ())]
    return producer.send(row["topic"], row["value"], row["key"], partition=row["partition"],
                         timestamp=millis, headers=headers or None)


class Copier:
    """A task's `send` for `write_prepared`: the rows to their remote topics, then the syncs."""

    def __init__(self, flow: Flow):
        self.flow = flow
        self.copies: dict[tuple[str, int], _PartitionCopy] = {}
        self.known: dict[str, int] = {}

    def __call__(self, producer, batches):
        deliveries: list = []
        rows = 0
        for batch in batches:
            if not batch.num_rows:
                continue
            for (topic, partition), part in _by_partition(batch):
                copy = self.copies.get((topic, partition))
                if copy is None:
                    copy = self.copies[(topic, partition)] = _PartitionCopy(topic, partition)
                    self._check_target(producer, topic, partition)
                upstream = part.column("offset").to_numpy()
                copy.add(producer, self._outgoing(part), upstream, deliveries)
                rows += part.num_rows
        for copy in self.copies.values():
            copy.finish(producer)
        producer.flush()
        staging = staging_topic(self.flow)
        for copy in self.copies.values():
            deliveries += [copy.first, copy.last]
            for sync in copy.syncs():
                deliveries.append(producer.send(staging, sync.value(), sync.key(), partition=0))
        return deliveries, rows, None

    def _outgoing(self, part: pa.RecordBatch) -> pa.RecordBatch:
        remote = [self.flow.policy.remote_topic(self.flow.source, t)
                  for t in pc.unique(part.column("topic")).to_pylist()]
        topics = pa.array([remote[0]] * part.num_rows, pa.string())
        cols = {n: part.column(n) for n in _SENT if n in part.schema.names and n != "topic"}
        cols["topic"] = topics
        return pa.RecordBatch.from_pydict(cols)

    def _check_target(self, producer, topic: str, partition: int) -> None:
        """The remote topic exists with this partition (else it is created as the source's)."""
        remote = self.flow.policy.remote_topic(self.flow.source, topic)
        if self.known.get(remote, 0) > partition:
            return
        try:
            have = len(producer.partitions_for(remote) or ())
        except KafkaError:
            have = 0
        if have <= partition:
            with clients.admin(self.flow.source_client) as source_admin, \
                    clients.admin(self.flow.target_client) as target_admin:
                ensure_remote(self.flow, source_admin, target_admin, [topic], self.known)
                have = len(target_admin.describe_topics([remote])[remote].partitions)
        self.known[remote] = have


def _by_partition(batch: pa.RecordBatch):
    """The batch's rows per source (topic, partition), each in offset order (one pair, but
    for a task Spark gave several ranges)."""
    topics, partitions = batch.column("topic"), batch.column("partition")
    if len(pc.unique(topics)) == 1 and len(pc.unique(partitions)) == 1:
        yield (topics[0].as_py(), partitions[0].as_py()), batch
        return
    pairs = sorted(set(zip(topics.to_pylist(), partitions.to_pylist())))
    for t, p in pairs:
        mask = pc.and_(pc.equal(topics, t), pc.equal(partitions, p))
        yield (t, p), batch.filter(mask)


class MirrorWriter(DataSourceStreamArrowWriter):
    """The exactly-once sink's writer with the mirror's `send` (see the module docstring)."""

    def __init__(self, options, flow: Flow):
        self.options, self.flow = options, flow
        self.batch_prefix = new_batch_prefix()
        self.run = new_run()

    def write(self, iterator):
        try:
            return write_prepared(iterator, self.options, Copier(self.flow), self.batch_prefix,
                                  self.run)
        except KafkaError as e:
            raise RuntimeError(f"minilog mirror {self.flow.name}: {e}") from e

    def commit(self, messages, batchId):
        completer_for(self.options.client, self.options.transactional_id_prefix).commit(
            messages, batchId)

    def abort(self, messages, batchId):
        completer_for(self.options.client, self.options.transactional_id_prefix).abort(
            messages, batchId)


class MirrorDataSource(DataSource):
    """Only a streaming sink: the rows of `format("minilog")`'s source, with headers."""

    @classmethod
    def name(cls):
        return FORMAT

    def streamWriter(self, schema, overwrite):
        options = dict(self.options)
        flow = flow_from_json(options.pop("mirror.flow"))
        return MirrorWriter(sink_options({**options, "deliveryGuarantee": "exactly-once"}), flow)
