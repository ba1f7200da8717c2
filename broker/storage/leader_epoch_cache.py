"""Which leader epoch wrote which offsets of a log: the map that makes truncation after failover exact.

Each entry is (epoch, start offset): the first offset the leader of that epoch wrote. A follower
asks the leader where its last fetched epoch ended (Fetch `last_fetched_epoch`, or
OffsetForLeaderEpoch) and cuts its log there, so a tail written by a deposed leader never
survives next to the new leader's records. Kept in `leader-epoch-checkpoint` in Kafka's text
format (version, count, then `epoch offset` lines), replaced atomically on each change; rebuilt
from the batch headers when the file is missing.
"""
from __future__ import annotations

import bisect
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from minilog.connector.batch import BatchHeader

if TYPE_CHECKING:
    from .log import Log

CHECKPOINT = "leader-epoch-checkpoint"
UNDEFINED_EPOCH, UNDEFINED_OFFSET = -1, -1


class LeaderEpochCache:
    def __init__(self, log_dir: str | os.PathLike[str],
                 entries: Iterable[tuple[int, int]] = ()) -> None:
        self.path = Path(log_dir) / CHECKPOINT
        self.entries = list(entries)  # [(epoch, start offset)], both increasing

    @classmethod
    def load(cls, log: Log) -> LeaderEpochCache:
        """The log's cache: its checkpoint, or a scan of its batch headers, cut at the log end."""
        cache = cls(log.dir)
        if cache.path.exists():
            lines = cache.path.read_text().split("\n")
            cache.entries = [(int(e), int(o)) for e, o in
                             (line.split() for line in lines[2:] if line.strip())]
        else:
            for h in log.iter_batch_headers(log.log_start_offset):
                if h.partition_leader_epoch >= 0:
                    cache.assign(h.partition_leader_epoch, h.base_offset, save=False)
            cache._save()
        cache.truncate_from_end(log.log_end_offset)
        return cache

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int, save: bool = True) -> None:
        """Record that `epoch` starts at `start_offset` (ignored unless it is a newer epoch)."""
        if epoch < 0 or (self.entries and epoch <= self.entries[-1][0]):
            return
        self.entries.append((epoch, start_offset))
        if save:
            self._save()

    def assign_batches(self, headers: Iterable[BatchHeader]) -> None:
        """After a follower append: the epochs stamped on the appended batches."""
        changed = False
        for h in headers:
            if h.partition_leader_epoch > self.latest_epoch:
                self.entries.append((h.partition_leader_epoch, h.base_offset))
                changed = True
        if changed:
            self._save()

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) as Kafka's LeaderEpochFileCache.endOffsetFor: where the largest
        epoch <= `epoch` ended, i.e. the start of the next epoch (the log end for the latest)."""
        if epoch < 0 or not self.entries:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if epoch == self.entries[-1][0]:
            return epoch, log_end_offset
        epochs = [e for e, _ in self.entries]
        higher = bisect.bisect_right(epochs, epoch)
        if higher == len(epochs):  # asked for an epoch newer than any here
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if higher == 0:  # older than the first epoch here
            return epoch, self.entries[0][1]
        return self.entries[higher - 1][0], self.entries[higher][1]

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was cut at `end_offset`: forget epochs that start at or after it."""
        kept = [(e, o) for e, o in self.entries if o < end_offset]
        if kept != self.entries:
            self.entries = kept
            self._save()

    def clear(self) -> None:
        self.entries = []
        self._save()

    def _save(self) -> None:

        text = f"0\n{len(self.entries)}\n" + "".join(f"{e} {o}\n" for e, o in self.entries)
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
