"""The controller's gauges, as Kafka's KafkaController registers them: is this node the active
controller, and how many partitions have no leader (counted only there, so that summing over
a cluster counts each partition once).

Registered by the `Controller` of every controller node (a single broker's too: it is the only
voter of its own quorum).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from .image import MetadataImage


class ControllerMetrics:
    """`kafka.controller:type=KafkaController` ActiveControllerCount and OfflinePartitionsCount."""

    def __init__(self, is_active: Callable[[], bool], image: Callable[[], MetadataImage]) -> None:
        self.is_active, self.image = is_active, image

    def collect(self) -> Iterator[Metric]:
        active = self.is_active()
        yield GaugeMetricFamily("kafka_controller_kafkacontroller_activecontrollercount",
                                "1 on the active controller", value=int(active))
        offline = sum(1 for ts in self.image().topics.values() for p in ts.partitions.values()
                      if p.leader < 0) if active else 0
        yield GaugeMetricFamily("kafka_controller_kafkacontroller_offlinepartitionscount",
                                "Partitions without a leader (counted by the active controller)",
                                value=offline)
