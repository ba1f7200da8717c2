"""Prometheus metrics of one broker, named as Kafka's JMX exporter and kafka_exporter name them.

Existing Kafka dashboards and alerts work unchanged: the names are what the JMX exporter's
standard Kafka rules make of Kafka's MBeans (`kafka_server_replicamanager_underreplicatedpartitions`,
`kafka_controller_kafkacontroller_activecontrollercount`, ...) and, for consumer groups, what
kafka_exporter serves (`kafka_consumergroup_lag`, ...).

Two kinds of numbers, two costs:
- Counters the request path bumps, once per request or per partition of a request, never per
  record (bytes and messages in come from batch headers already parsed): plain integers in
  dicts, on the event loop's thread, so no locks. Request times go to one prometheus-client
  histogram child per request type.
- State read only when Prometheus scrapes (partition, leader and under-replicated counts, log
  sizes, group lag), by a collector that looks at the broker as it is: nothing to keep up to
  date on the hot path.

With `metrics.listener` unset the broker counts nothing (`NO_METRICS`), so "metrics off" costs
nothing at all. The HTTP endpoint is served on the broker's event loop (`metrics_http.py`), the
thread that owns the state the collector reads.
"""
from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Histogram, disable_created_metrics, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from minilog.connector.protocol import api_name

if TYPE_CHECKING:
    from .broker import Broker
    from ..replication.partition import Partition

disable_created_metrics()  # Kafka's exporters have no *_created series

# Kafka's RequestMetrics TotalTimeMs, in milliseconds.
LATENCY_BUCKETS_MS = (0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000,
                      30000, float("inf"))


class _NoMetrics:
    """What the broker counts with when metrics are off: every hook does nothing."""

    enabled = False

    def produced(self, topic: str, size: int, messages: int) -> None:
        pass

    def fetched(self, topic: str, size: int) -> None:
        pass

    def request_done(self, api_key: int, started: float) -> None:
        pass

    def isr_changed(self, partition: Partition, new_isr: Iterable[int]) -> None:
        pass


NO_METRICS = _NoMetrics()


class BrokerMetrics(_NoMetrics):
    """The counters and the scrape-time collector of one broker."""

    enabled = True

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.bytes_in: dict[str, int] = defaultdict(int)
        self.bytes_out: dict[str, int] = defaultdict(int)
        self.messages_in: dict[str, int] = defaultdict(int)
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.registry = CollectorRegistry(auto_describe=False)
        self._times = Histogram("kafka_network_requestmetrics_totaltimems",
                                "Time from a request's arrival to its response, ms",
                                ["request"], buckets=LATENCY_BUCKETS_MS, registry=self.registry)
        self._timer_of: dict[int, Any] = {}
        self.registry.register(_StateCollector(self))

    # -- hooks on the request path (per request or per partition, never per record) ------------
    def produced(self, topic: str, size: int, messages: int) -> None:
        self.bytes_in[topic] += size
        self.messages_in[topic] += messages

    def fetched(self, topic: str, size: int) -> None:
        self.bytes_out[topic] += size

    def request_done(self, api_key: int, started: float) -> None:
        timer = self._timer_of.get(api_key)
        if timer is None:  # Kafka's `request` label is the API's name: Produce, ApiVersions...
            timer = self._timer_of[api_key] = self._times.labels(api_name(api_key))
        timer.observe((time.perf_counter() - started) * 1000)

    def isr_changed(self, partition: Partition, new_isr: Iterable[int]) -> None:
        """A committed ISR of a partition led here (before the partition adopts it)."""
        if not partition.is_leader:
            return
        old, new = set(partition.isr), set(new_isr)
        self.isr_shrinks += bool(old - new)
        self.isr_expands += bool(new - old)

    def exposition(self) -> bytes:
        """The Prometheus text format of everything, as `/metrics` serves it."""
        return generate_latest(self.registry)


class _StateCollector:
    """Reads the broker's state at scrape time into Kafka's metric names."""

    def __init__(self, metrics: BrokerMetrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        m, broker = self.metrics, self.metrics.broker
        yield from self._topic_counters(m)
        shrinks = CounterMetricFamily("kafka_server_replicamanager_isrshrinks",
                                      "ISR shrinks of partitions led here")
        shrinks.add_metric([], m.isr_shrinks)
        expands = CounterMetricFamily("kafka_server_replicamanager_isrexpands",
                                      "ISR expansions of partitions led here")
        expands.add_metric([], m.isr_expands)
        yield shrinks
        yield expands
        partitions = list(broker.partitions.values())
        led = [p for p in partitions if p.is_leader]
        yield _gauge("kafka_server_replicamanager_partitioncount", "Replicas on this broker",
                     len(partitions))
        yield _gauge("kafka_server_replicamanager_leadercount", "Partitions led here", len(led))
        yield _gauge("kafka_server_replicamanager_underreplicatedpartitions",
                     "Partitions led here with fewer in-sync replicas than replicas",
                     sum(1 for p in led if len(p.isr) < len(p.replicas)))
        active = _is_active_controller(broker)
        yield _gauge("kafka_controller_kafkacontroller_activecontrollercount",
                     "1 on the active controller", int(active))
        yield _gauge("kafka_controller_kafkacontroller_offlinepartitionscount",
                     "Partitions without a leader (counted by the active controller)",
                     _offline_partitions(broker) if active else 0)
        size = GaugeMetricFamily("kafka_log_log_size", "Bytes of a partition's log on this broker",
                                 labels=["topic", "partition"])
        current = GaugeMetricFamily("kafka_topic_partition_current_offset",
                                    "High watermark of a partition led here",
                                    labels=["topic", "partition"])
        oldest = GaugeMetricFamily("kafka_topic_partition_oldest_offset",
                                   "Log start offset of a partition led here",
                                   labels=["topic", "partition"])
        for p in partitions:
            labels = [p.topic, str(p.index)]
            size.add_metric(labels, p.log.size)
            if p.is_leader:
                current.add_metric(labels, p.high_watermark)
                oldest.add_metric(labels, p.log_start_offset)
        yield size
        yield current
        yield oldest
        yield from _group_lag(broker)

    @staticmethod
    def _topic_counters(m: BrokerMetrics) -> Iterator[Metric]:
        for name, doc, counts in (
                ("kafka_server_brokertopicmetrics_bytesin", "Bytes produced to a topic", m.bytes_in),
                ("kafka_server_brokertopicmetrics_bytesout", "Bytes fetched by consumers",
                 m.bytes_out),
                ("kafka_server_brokertopicmetrics_messagesin", "Records produced to a topic",
                 m.messages_in)):
            family = CounterMetricFamily(name, doc, labels=["topic"])
            for topic, value in list(counts.items()):
                family.add_metric([topic], value)
            yield family


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, doc)
    family.add_metric([], value)
    return family


def _is_active_controller(broker: Broker) -> bool:
    if broker.quorum is None:
        return True  # a single broker is its own controller
    return broker.controller is not None and broker.quorum.raft.is_leader \
        and broker.controller.active


def _offline_partitions(broker: Broker) -> int:
    image = broker.controller.image if broker.controller is not None else broker.metadata
    return sum(1 for ts in image.topics.values() for p in ts.partitions.values() if p.leader < 0)


def _group_lag(broker: Broker) -> Iterator[Metric]:
    """kafka_exporter's group metrics, for the groups this broker coordinates; lag is measured
    against the high watermark of this broker's replica of the partition (a partition with no
    replica here has no lag series)."""
    labels = ["consumergroup", "topic", "partition"]
    current = GaugeMetricFamily("kafka_consumergroup_current_offset",
                                "Committed offset of a group", labels=labels)
    lag = GaugeMetricFamily("kafka_consumergroup_lag", "High watermark minus committed offset",
                            labels=labels)
    lag_sum = GaugeMetricFamily("kafka_consumergroup_lag_sum", "A group's lag over a topic",
                                labels=["consumergroup", "topic"])
    members = GaugeMetricFamily("kafka_consumergroup_members", "Members of a group",
                                labels=["consumergroup"])
    groups = broker.groups.groups if broker.groups is not None else {}
    for group_id, group in list(groups.items()):
        members.add_metric([group_id], len(group.members))
        sums: dict[str, int] = defaultdict(int)
        for (topic, index), committed in list(group.offsets.items()):
            labels_ = [group_id, topic, str(index)]
            current.add_metric(labels_, committed.offset)
            p = broker.partition(topic, index)
            if p is not None:
                behind = max(0, p.high_watermark - committed.offset)
                lag.add_metric(labels_, behind)
                sums[topic] += behind
        for topic, total in sums.items():
            lag_sum.add_metric([group_id, topic], total)
    yield current
    yield lag
    yield lag_sum
    yield members
