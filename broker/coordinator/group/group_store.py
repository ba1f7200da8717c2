"""`__consumer_offsets`: the compacted internal topic where groups and their offsets are kept
(`coordinator_topic.py` has its partitioning and creation)."""
from __future__ import annotations

from typing import Any

from ..coordinator_topic import CoordinatorTopic

OFFSETS_TOPIC = "__consumer_offsets"


def OffsetsTopic(broker: Any) -> CoordinatorTopic:  # noqa: N802 - the name its users import
    return CoordinatorTopic(broker, OFFSETS_TOPIC, "offsets.topic.num.partitions")
