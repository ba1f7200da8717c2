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
- State read only when Prometheus scrapes, by collectors each component registers for what it
  owns, as Kafka's gauges are registered by the class that holds the state: the replicas
  (`replication/replica_metrics.py`), the controller (`metadata/controller_metrics.py`), the
  group coordinator (`coordinator/group/group_metrics.py`). This module knows none of them:
  nothing to keep up to date on the hot path, and nothing here reaches into their state.

With `metrics.listener` unset the broker counts nothing (`NO_METRICS`, whose `register` keeps
nothing), so "metrics off" costs nothing at all. The HTTP endpoint is served on the broker's
event loop (`metrics_http.py`), the thread that owns the state the collectors read.
"""
from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Histogram, disable_created_metrics, generate_latest
from prometheus_client.core import CounterMetricFamily, Metric

from minilog.connector.protocol import api_name

disable_created_metrics()  # Kafka's exporters have no *_created series

# Kafka's RequestMetrics TotalTimeMs, in milliseconds.
LATENCY_BUCKETS_MS = (0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000,
                      30000, float("inf"))


class Collector(Protocol):
    """What a component registers: prometheus-client's collector, read at each scrape."""

    def collect(self) -> Iterator[Metric]: ...


class _NoMetrics:
    """What the broker counts with when metrics are off: every hook does nothing."""

    enabled = False

    def produced(self, topic: str, size: int, messages: int) -> None:
        pass

    def fetched(self, topic: str, size: int) -> None:
        pass

    def request_done(self, api_key: int, started: float) -> None:
        pass

    def register(self, collector: Collector) -> None:
        """Metrics off: no scrape will read it."""


NO_METRICS = _NoMetrics()


class BrokerMetrics(_NoMetrics):
    """One broker's request-path counters, and the registry its components' collectors join."""

    enabled = True

    def __init__(self) -> None:
        self.bytes_in: dict[str, int] = defaultdict(int)
        self.bytes_out: dict[str, int] = defaultdict(int)
        self.messages_in: dict[str, int] = defaultdict(int)
        self.registry = CollectorRegistry(auto_describe=False)
        self._times = Histogram("kafka_network_requestmetrics_totaltimems",
                                "Time from a request's arrival to its response, ms",
                                ["request"], buckets=LATENCY_BUCKETS_MS, registry=self.registry)
        self._timer_of: dict[int, Any] = {}
        self.registry.register(_TopicCounters(self))

    def register(self, collector: Collector) -> None:
        """A component's collector, read at every scrape from then on."""
        self.registry.register(collector)

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

    def exposition(self) -> bytes:
        """The Prometheus text format of everything, as `/metrics` serves it."""
        return generate_latest(self.registry)


class _TopicCounters:
    """The request path's per-topic counters, in Kafka's BrokerTopicMetrics names."""

    def __init__(self, metrics: BrokerMetrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        m = self.metrics
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
