"""The replica manager's gauges, as Kafka's ReplicaManager registers them, and each replica's log.

Read when Prometheus scrapes, from the partitions as they are (nothing to keep up to date on
the hot path): replica and leader counts, under-replicated partitions, each replica's log size,
and for partitions led here the high watermark and log start offset (kafka_exporter's
`kafka_topic_partition_current_offset` / `_oldest_offset`). The ISR change counters are the one
thing counted as it happens: the replica manager reports each committed ISR of a partition it
leads (`isr_changed`). The broker registers this collector with its metrics (`register`).
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from .partition import Partition


class ReplicaMetrics:
    """Kafka's `kafka.server:type=ReplicaManager` metrics and `kafka.log:type=Log,name=Size`."""

    def __init__(self, partitions: Mapping[tuple[str, int], Partition]) -> None:
        self.partitions = partitions  # the broker's own map, read at scrape time
        self.isr_shrinks = 0
        self.isr_expands = 0

    def isr_changed(self, partition: Partition, new_isr: Iterable[int]) -> None:
        """A committed ISR of a partition led here (before the partition adopts it)."""
        if not partition.is_leader:
            return
        old, new = set(partition.isr), set(new_isr)
        self.isr_shrinks += bool(old - new)
        self.isr_expands += bool(new - old)

    def collect(self) -> Iterator[Metric]:
        yield CounterMetricFamily("kafka_server_replicamanager_isrshrinks",
                                  "ISR shrinks of partitions led here", value=self.isr_shrinks)
        yield CounterMetricFamily("kafka_server_replicamanager_isrexpands",
                                  "ISR expansions of partitions led here", value=self.isr_expands)
        partitions = list(self.partitions.values())
        led = [p for p in partitions if p.is_leader]
        yield GaugeMetricFamily("kafka_server_replicamanager_partitioncount",
                                "Replicas on this broker", value=len(partitions))
        yield GaugeMetricFamily("kafka_server_replicamanager_leadercount", "Partitions led here",
                                value=len(led))
        yield GaugeMetricFamily("kafka_server_replicamanager_underreplicatedpartitions",
                                "Partitions led here with fewer in-sync replicas than replicas",
                                value=sum(1 for p in led if len(p.isr) < len(p.replicas)))
        labels = ["topic", "partition"]
        size = GaugeMetricFamily("kafka_log_log_size", "Bytes of a partition's log on this broker",
                                 labels=labels)
        current = GaugeMetricFamily("kafka_topic_partition_current_offset",
                                    "High watermark of a partition led here", labels=labels)
        oldest = GaugeMetricFamily("kafka_topic_partition_oldest_offset",
                                   "Log start offset of a partition led here", labels=labels)
        for p in partitions:
            values = [p.topic, str(p.index)]
            size.add_metric(values, p.log.size)
            if p.is_leader:
                current.add_metric(values, p.high_watermark)
                oldest.add_metric(values, p.log_start_offset)
        yield size
        yield current
        yield oldest
