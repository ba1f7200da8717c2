"""Offsets committed inside a transaction (TxnOffsetCommit, KIP-98/KIP-447).

The group coordinator writes them to `__consumer_offsets` at once, in a transactional batch of
the producer, but they count only once the transaction coordinator's commit marker lands in
that partition; an abort marker drops them. Until then they wait here, by producer id, and an
OffsetFetch asking for stable offsets (`require_stable`) of such a partition is answered
UNSTABLE_OFFSET_COMMIT. No clock or I/O: the coordinator feeds in writes and markers.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

TopicPartition = tuple[str, int]
Offsets = dict[TopicPartition, Any]  # -> OffsetAndMetadata


class PendingTxnOffsets:
    def __init__(self) -> None:
        self._by_producer: dict[int, dict[str, Offsets]] = {}

    def add(self, producer_id: int, group_id: str, offsets: Offsets) -> None:
        self._by_producer.setdefault(producer_id, {}).setdefault(group_id, {}).update(offsets)

    def complete(self, producer_id: int, commit: bool,
                 in_partition: Callable[[str], bool] = lambda _: True) -> dict[str, Offsets]:
        """A marker for `producer_id` reached the partition holding the groups `in_partition`
        accepts: {group: {tp: offset}} to apply if `commit`, else {}; either way no longer
        pending."""
        groups = self._by_producer.get(producer_id, {})
        done = {g: offs for g, offs in groups.items() if in_partition(g)}
        for g in done:
            del groups[g]
        if not groups:
            self._by_producer.pop(producer_id, None)
        return done if commit else {}

    def discard(self, producer_id: int, group_id: str, tp: TopicPartition) -> None:
        """A pending offset whose write failed."""
        groups = self._by_producer.get(producer_id, {})
        groups.get(group_id, {}).pop(tp, None)
        if group_id in groups and not groups[group_id]:
            del groups[group_id]
        if not groups:
            self._by_producer.pop(producer_id, None)

    def is_pending(self, group_id: str, tp: TopicPartition) -> bool:
        return any(tp in groups.get(group_id, ()) for groups in self._by_producer.values())

    def forget(self, in_partition: Callable[[str], bool]) -> None:
        """The partition moved away: its groups' pending offsets go with it."""
        for pid in list(self._by_producer):
            groups = self._by_producer[pid]
            for g in [g for g in groups if in_partition(g)]:
                del groups[g]
            if not groups:
                del self._by_producer[pid]

    def merge(self, other: PendingTxnOffsets) -> None:
        for pid, groups in other._by_producer.items():
            for g, offs in groups.items():
                self.add(pid, g, offs)
