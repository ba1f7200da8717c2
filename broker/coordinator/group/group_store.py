"""`__consumer_offsets`: the compacted internal topic where groups and their offsets are kept
(its layout is the metadata's `OFFSETS`; `coordinator_topic.py` has its partitioning)."""
from __future__ import annotations

from typing import Any

from ...metadata.internal_topics import OFFSETS
from ..coordinator_topic import CoordinatorTopic

OFFSETS_TOPIC = OFFSETS.name


def OffsetsTopic(broker: Any) -> CoordinatorTopic:  # noqa: N802 - the name its users import
    return CoordinatorTopic(broker, OFFSETS)
