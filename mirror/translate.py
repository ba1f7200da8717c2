"""Exact offset translation from the mirror's offset syncs (MM2's OffsetSyncStore, without its
approximation).

MM2 syncs every `offset.lag.max` records at best and translates a group's offset to the
downstream offset of the sync at or before it, plus one: a failed-over group re-reads up to
`offset.lag.max` records. The mirror's syncs (sink.py) are denser: one where each run of
consecutive source offsets starts, one just past each task's last record, and between two syncs
source and target advance together, one record each. So for a group at upstream offset `g`,
with `s` the last sync at or before `g` and `n` the next one:

    downstream(g) = min(s.downstream + (g - s.upstream), n.downstream)

is the target offset of the first copied record at or after `g`, or, when `g` falls in a gap
on the source at a micro-batch's end, an offset between the copy of the last record before `g`
and that of the first after it, where the target holds only the batch's commit marker and
aborted records: a read_committed consumer (the exactly-once sink's readers; librdkafka's
default) starting there reads exactly the records from `g` on. Past the last sync, `g`
translates only to that sync's downstream offset, and only when the copy has read the source
up to `g` (`progress`: the copy's committed position), so that no record before `g` is still
to come. Records the copy never saw (before its first sync) are not translated.
"""
from __future__ import annotations

from bisect import bisect_right

import numpy as np

from .formats import OffsetSync


class OutOfOrder(RuntimeError):
    """Offsets that do not go up, or a copy that is not contiguous on the target."""


class Runs:
    """The writing side of the rule: one task's records of one source partition, in offset
    order, as runs of consecutive source offsets (`observe` per Arrow batch, no per-record
    Python), and the syncs they make once the target offsets of the first and last record are
    known."""

    def __init__(self, topic: str, partition: int):
        self.topic, self.partition = topic, partition
        self.count = 0
        self.last: int | None = None
        self.starts: list[tuple[int, int]] = []  # (source offset, index among the records)

    def observe(self, upstream: np.ndarray) -> None:
        if not len(upstream):
            return
        steps = np.diff(upstream)
        if (self.last is not None and upstream[0] <= self.last) or (steps <= 0).any():
            raise OutOfOrder(f"{self.topic}-{self.partition}: source offsets out of order")
        if self.last is None or upstream[0] != self.last + 1:
            self.starts.append((int(upstream[0]), self.count))
        for i in np.nonzero(steps != 1)[0] + 1:
            self.starts.append((int(upstream[i]), self.count + int(i)))
        self.count += len(upstream)
        self.last = int(upstream[-1])

    def syncs(self, first: int, last: int) -> list[OffsetSync]:
        """The syncs of these records, copied to target offsets `first`..`last`."""
        if last - first != self.count - 1:
            raise OutOfOrder(
                f"the copy of {self.topic}-{self.partition} took target offsets {first}..{last} "
                f"for {self.count} records: another producer writes to its remote topic, and "
                f"offsets cannot be translated; the mirror must be its only writer")
        out = [OffsetSync(self.topic, self.partition, u, first + i) for u, i in self.starts]
        out.append(OffsetSync(self.topic, self.partition, self.last + 1, last + 1))
        return out


class OffsetSyncStore:
    """Every sync of the flow's source partitions, in upstream order, kept in memory."""

    def __init__(self) -> None:
        self._upstream: dict[tuple[str, int], list[int]] = {}
        self._downstream: dict[tuple[str, int], list[int]] = {}

    def add(self, sync: OffsetSync) -> None:
        """Syncs arrive in commit order; one for an upstream offset already synced replaces
        it (a micro-batch that starts where the last ended). One below the last starts the
        partition again: a new copy (a checkpoint deleted) supersedes the old."""
        tp = (sync.topic, sync.partition)
        ups = self._upstream.setdefault(tp, [])
        downs = self._downstream.setdefault(tp, [])
        if ups and sync.upstream_offset < ups[-1]:
            ups.clear()
            downs.clear()
        if ups and sync.upstream_offset == ups[-1]:
            downs[-1] = sync.downstream_offset
            return
        ups.append(sync.upstream_offset)
        downs.append(sync.downstream_offset)

    def partitions(self) -> list[tuple[str, int]]:
        return sorted(self._upstream)

    def translate(self, topic: str, partition: int, upstream: int,
                  progress: int | None = None) -> int | None:
        """The downstream offset of upstream offset `upstream` (a group's committed position),
        or None when it cannot be told exactly (yet)."""
        ups = self._upstream.get((topic, partition))
        if not ups:
            return None
        downs = self._downstream[(topic, partition)]
        i = bisect_right(ups, upstream) - 1
        if i < 0:
            return None
        if i + 1 < len(ups):
            return min(downs[i] + (upstream - ups[i]), downs[i + 1])
        if upstream == ups[i] or (progress is not None and upstream <= progress):
            return downs[i]
        return None
