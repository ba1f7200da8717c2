"""Consumer groups that are minilog's own bookkeeping, not consumers.

The exactly-once Spark sink (datasource/transactional.py) commits, inside each transaction,
the micro-batch id as the offset of a group named after the transactional id, with metadata
`SINK_MARKER` + the query id: that is how a replayed batch is recognised. Such a group never
has members and its "lag" means nothing, so, as Kafka keeps its internal topics out of the
way of tools (`__consumer_offsets`, `__transaction_state`), `minilog groups list` leaves
them out unless asked and the console lists them apart, marked internal. A group is one of
them when every offset it has committed carries the marker; only groups without a protocol
type (nobody ever joined them) are read to find out.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SINK_MARKER = "minilog exactly-once sink, query "  # the offsets' metadata, then the query id


def is_sink_marker(committed: Mapping[Any, Any]) -> bool:
    """Whether a group's committed offsets ({tp: OffsetAndMetadata}) are all sink markers."""
    return bool(committed) and all(
        om is not None and (om.metadata or "").startswith(SINK_MARKER)
        for om in committed.values())


def sink_marker_groups(admin: Any, listings: list) -> set[str]:
    """The ids among `listings` (GroupListing of `admin.list_groups()`, a sync AdminClient)
    that are the sink's markers."""
    return {g.group_id for g in listings if not g.protocol_type
            and is_sink_marker(admin.list_group_offsets(g.group_id))}
