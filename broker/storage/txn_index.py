"""The aborted-transaction index of one partition: Kafka's `.txnindex` beside each segment.

A read_committed consumer is told which transactions in the range it fetched were aborted
(Fetch's `aborted_transactions`) and drops their records itself. Kafka keeps one entry per
aborted transaction in the index of the segment where its abort marker landed:

    version int16 (0) | producer id int64 | first offset int64 | last offset int64 |
    last stable offset int64                                           (34 bytes per entry)

`last offset` is the abort marker's offset. The entries of every segment are also held in
memory in marker order (a partition has few aborted transactions next to its records), so a
fetch finds the ones overlapping its range by bisection.
"""
from __future__ import annotations

import bisect
import struct
from pathlib import Path
from typing import NamedTuple

TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def _path(dir: Path, base: int) -> Path:
    return dir / f"{base:020d}{TXN_INDEX_SUFFIX}"


class TxnIndex:
    """Every segment's aborted transactions; files written as markers are appended."""

    def __init__(self, dir: Path, segment_bases: list[int]):
        self.dir = Path(dir)
        self._entries: list[AbortedTxn] = []
        self._bases: list[int] = []  # the segment of each entry
        wanted = set(segment_bases)
        for path in sorted(self.dir.glob("*" + TXN_INDEX_SUFFIX)):
            stem = path.name[:-len(TXN_INDEX_SUFFIX)]
            if not (len(stem) == 20 and stem.isdigit()) or int(stem) not in wanted:
                path.unlink(missing_ok=True)
                continue
            data = path.read_bytes()
            for pos in range(0, len(data) - _ENTRY.size + 1, _ENTRY.size):
                _, *fields = _ENTRY.unpack_from(data, pos)
                self._entries.append(AbortedTxn(*fields))
                self._bases.append(int(stem))
        order = sorted(range(len(self._entries)), key=lambda i: self._entries[i].last_offset)
        self._entries = [self._entries[i] for i in order]
        self._bases = [self._bases[i] for i in order]
        self._lasts = [e.last_offset for e in self._entries]

    def __len__(self) -> int:
        return len(self._entries)

    def append(self, entry: AbortedTxn, segment_base: int) -> None:
        with open(_path(self.dir, segment_base), "ab") as f:
            f.write(_ENTRY.pack(0, *entry))
        self._entries.append(entry)
        self._bases.append(segment_base)
        self._lasts.append(entry.last_offset)

    def truncate_to(self, offset: int) -> None:
        """Forget the aborts whose marker is at or after `offset` (a truncated tail)."""
        k = bisect.bisect_left(self._lasts, offset)
        if k == len(self._entries):
            return
        touched = set(self._bases[k:])
        del self._entries[k:], self._bases[k:], self._lasts[k:]
        for base in touched:
            kept = [e for e, b in zip(self._entries, self._bases) if b == base]
            path = _path(self.dir, base)
            if kept:
                path.write_bytes(b"".join(_ENTRY.pack(0, *e) for e in kept))
            else:
                path.unlink(missing_ok=True)

    def drop_before(self, log_start: int) -> None:
        """Forget aborts wholly below the log start (their segments are gone)."""
        k = bisect.bisect_left(self._lasts, log_start)
        del self._entries[:k], self._bases[:k], self._lasts[:k]

    def overlapping(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions with records in [start, end): what a fetch of that range sends."""
        k = bisect.bisect_left(self._lasts, start)
        return [e for e in self._entries[k:] if e.first_offset < end]
