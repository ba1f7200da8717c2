"""The group coordinator's gauges, named as kafka_exporter serves them: each group's committed
offsets, lag and members, for the groups this broker coordinates.

Lag is measured against the high watermark of this broker's replica of the partition (a
partition with no replica here has no lag series). Read when Prometheus scrapes; the
coordinator registers this collector when it is created.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric


class GroupMetrics:
    """`kafka_consumergroup_current_offset`, `_lag`, `_lag_sum` and `_members`."""

    def __init__(self, groups: Mapping[str, Any], partition: Callable[[str, int], Any]) -> None:
        """`groups`: the coordinator's groups by id (classic and consumer groups alike);
        `partition(topic, index)`: this broker's replica of a partition, or None."""
        self.groups, self.partition = groups, partition

    def collect(self) -> Iterator[Metric]:
        labels = ["consumergroup", "topic", "partition"]
        current = GaugeMetricFamily("kafka_consumergroup_current_offset",
                                    "Committed offset of a group", labels=labels)
        lag = GaugeMetricFamily("kafka_consumergroup_lag", "High watermark minus committed offset",
                                labels=labels)
        lag_sum = GaugeMetricFamily("kafka_consumergroup_lag_sum", "A group's lag over a topic",
                                    labels=["consumergroup", "topic"])
        members = GaugeMetricFamily("kafka_consumergroup_members", "Members of a group",
                                    labels=["consumergroup"])
        for group_id, group in list(self.groups.items()):
            members.add_metric([group_id], len(group.members))
            sums: dict[str, int] = defaultdict(int)
            for (topic, index), committed in list(group.offsets.items()):
                values = [group_id, topic, str(index)]
                current.add_metric(values, committed.offset)
                p = self.partition(topic, index)
                if p is not None:
                    behind = max(0, p.high_watermark - committed.offset)
                    lag.add_metric(values, behind)
                    sums[topic] += behind
            for topic, total in sums.items():
                lag_sum.add_metric([group_id, topic], total)
        yield current
        yield lag
        yield lag_sum
        yield members
