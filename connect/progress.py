"""A connector task's progress, shown in its status: records moved, their rate, and lag.

Connect keeps these as task metrics over JMX (`source-record-write-total`,
`sink-record-read-total`, their rates); tools read a sink's lag from its consumer group
`connect-<name>`. A task here is a Spark query, and a query reports each micro-batch in its
progress (rows read, rows per second, and for `format("minilog")` the offsets read up to). The
herder folds those reports into a `TaskProgress` once a second, and `GET
/connectors/<name>/status` shows it as the task's `progress`, beside Connect's own fields:

    {"records": 900, "batches": 3, "records_per_second": 812.5, "last_batch": "<ISO time>",
     "lag": 0}

`lag` is the records between what the query has read and the ends of its topics' partitions
now: a sink's (and a mirror's) lag as `kafka-consumer-groups` would show it for its group. A
source reading a file has none.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from minilog.datasource.progress import offsets_of

TopicPartitionKey = tuple[str, int]
# {(topic, partition): latest offset} for the partitions asked about
LatestOffsets = Callable[[list[TopicPartitionKey]], Mapping[TopicPartitionKey, int]]


@dataclass
class TaskProgress:
    records: int = 0
    batches: int = 0
    records_per_second: float = 0.0
    last_batch: str | None = None
    last_batch_id: int = -1
    # what the query's Kafka sources have read up to, as of its last batch with records
    read_to: dict[TopicPartitionKey, int] = field(default_factory=dict)

    def observe(self, reports: Iterable[Mapping[str, Any]]) -> None:
        """Fold in a query's progress reports (`recentProgress`, oldest first): each batch
        that read rows counts once, however often it is seen. Spark's idle reports (no rows)
        count nothing."""
        for report in reports:
            batch, rows = int(report.get("batchId", -1)), int(report.get("numInputRows") or 0)
            if rows <= 0 or batch <= self.last_batch_id:
                continue
            self.last_batch_id = batch
            self.records += rows
            self.batches += 1
            self.records_per_second = round(float(report.get("processedRowsPerSecond") or 0), 1)
            self.last_batch = report.get("timestamp")
            for source in report.get("sources") or []:
                self.read_to.update(kafka_offsets(source.get("endOffset")))

    def shown(self, latest: LatestOffsets | None) -> dict[str, Any]:
        """The status's `progress`; with `latest` (the ends of the partitions read, now), the
        lag too."""
        out: dict[str, Any] = {"records": self.records, "batches": self.batches,
                               "records_per_second": self.records_per_second,
                               "last_batch": self.last_batch}
        if latest is not None and self.read_to:
            ends = latest(sorted(self.read_to))
            out["lag"] = sum(max(0, ends[tp] - read) for tp, read in self.read_to.items()
                             if tp in ends)
        return out


def kafka_offsets(value: Any) -> dict[TopicPartitionKey, int]:
    """{(topic, partition): offset} of a source's offsets in Spark's Kafka form; {} for any
    other source's offsets (a file's `{"position": n}`)."""
    try:
        return offsets_of(value)
    except (ValueError, TypeError, AttributeError):
        return {}
