"""Reading: one Spark task per topic-partition offset range, Arrow batches out.

The driver plans ranges (`plan`); each task fetches its range through the client's Arrow path
(`Consumer.fetch_range_arrow`: record batches decoded straight into Arrow columns) and yields
`pyarrow.RecordBatch`es in the schema of Spark's Kafka source. Nothing walks records in Python.
"""
from dataclasses import dataclass

from pyspark.sql.datasource import DataSourceReader, InputPartition

from minilog.connector.client import KafkaTimeoutError, TopicPartition

from . import clients
from .errors import OptionError
from .offsets import (
    discover,
    is_out_of_range,
    list_offsets,
    missing_topics_error,
    report_data_loss,
    resolve,
    split_ranges,
)


@dataclass
class OffsetRange(InputPartition):
    """The records of `topic`-`partition` with offsets in [start, end): one Spark task."""
    topic: str
    partition: int
    start: int
    end: int


def plan(ranges, options):
    """InputPartitions for [(tp, start, end)], split as minPartitions and
    maxRecordsPerPartition ask."""
    return [OffsetRange(t, p, s, e) for (t, p), s, e in split_ranges(
        ranges, options.min_partitions, options.max_records_per_partition)]


def read_range(part, options):
    """Yield the RecordBatches of one OffsetRange. Offsets deleted before they were read
    (retention, a re-created topic) fail the task or are skipped, as failOnDataLoss says.
    Safe to retry: a retried task reads its whole range again (Spark drops what a failed
    attempt yielded), with a fresh consumer, since a failed one is not kept.

    A batch read with no range to read gets one `InputPartition(None)` from Spark (pyspark's
    plan_data_source_read: "if len(partitions) == 0: partitions = [InputPartition(None)]"):
    it holds no records."""
    if not isinstance(part, OffsetRange):
        return
    tp = TopicPartition(part.topic, part.partition)
    consumer, failed = clients.consumer(options.client), False
    try:
        yield from _read(consumer, tp, part, options)
    except Exception:
        failed = True
        raise
    finally:
        (clients.discard if failed else clients.release)(consumer)


def _read(consumer, tp, part, options):
    pos = part.start
    while pos < part.end:
        try:
            for batch in consumer.fetch_range_arrow(tp, pos, part.end, options.poll_timeout,
                                                    options.include_headers):
                pos = batch.column(4)[-1].as_py() + 1  # column 4: offset
                yield batch if options.values is None else options.values.decode_batch(batch)
            return
        except KafkaTimeoutError:
            latest = consumer.end_offsets([tp])[tp]
            if latest >= part.end:
                raise
            report_data_loss(f"{tp.topic}-{tp.partition}: offsets {max(pos, latest)} to "
                             f"{part.end - 1} are not in the log (it ends at {latest})",
                             options.fail_on_data_loss)
            return
        except Exception as e:
            if not is_out_of_range(e):
                raise
            earliest = consumer.beginning_offsets([tp])[tp]
            latest = consumer.end_offsets([tp])[tp]
            if pos >= earliest and pos < latest:
                raise
            gone_to = min(earliest, part.end) if pos < earliest else part.end
            report_data_loss(f"{tp.topic}-{tp.partition}: offsets {pos} to {gone_to - 1} were "
                             "deleted before they were read", options.fail_on_data_loss)
            if pos >= earliest:
                return
            pos = earliest


def check_log_ends(end, latest):
    """Ending offsets past a log's end cannot be read: say so when the read is planned, not
    as data loss after a poll timeout."""
    beyond = [f"{t}-{p} up to offset {e}, beyond its log end {latest[(t, p)]}"
              for (t, p), e in sorted(end.items()) if e > latest[(t, p)]]
    if beyond:
        raise OptionError("Option 'endingOffsets' asks for " + "; ".join(beyond)
                          + " (-1 reads to the log end)")


class BatchReader(DataSourceReader):
    """`spark.read.format("minilog")`: the offsets between startingOffsets and endingOffsets,
    resolved once when the query is planned."""

    def __init__(self, options):
        self.options = options

    def partitions(self):
        o = self.options
        admin = clients.admin(o.client)
        try:
            tps, missing = discover(admin, o)
            if missing:
                raise missing_topics_error(missing)
            start = resolve(admin, o.starting, tps, o)
            end = resolve(admin, o.ending, tps, o)
            if o.ending.kind == "offsets":
                check_log_ends(end, list_offsets(admin, tps, "latest", o.isolation_level))
        finally:
            admin.close()
        return plan([(tp, start[tp], end[tp]) for tp in tps], o)

    def read(self, partition):
        return read_range(partition, self.options)
