"""Sparse segment indexes in Kafka's on-disk layout: `.index` (offset -> position) and `.timeindex`.

An index lets a read jump close to the wanted batch and then scan only a few batch headers, so
the cost of a lookup does not grow with the segment. Entries are appended to the file (no
preallocation, so a crash leaves at most a torn last entry, which opening trims) and looked up by
binary search in a read-only memory map of the file, made on the first search and remapped only
when the file has grown since. The newest entry is also kept in memory, so reads at the tail of
the active segment (the common case) never touch the map.

Layouts (big-endian, offsets relative to the segment's base offset):
  OffsetIndex: relative offset int32 | position int32              (8 bytes)
  TimeIndex:   timestamp int64       | relative offset int32       (12 bytes)
"""
import mmap
import os
import struct
from pathlib import Path

DEFAULT_MAX_INDEX_BYTES = 10 * 1024 * 1024  # Kafka's segment.index.bytes


class CorruptIndexError(Exception):
    """An index file that contradicts itself or its log; the segment rebuilds it from the .log."""


class _Index:
    """Common file, map and binary-search machinery; subclasses define the entry layout."""

    ENTRY: struct.Struct

    def __init__(self, path, base_offset, max_index_bytes=DEFAULT_MAX_INDEX_BYTES):
        self.path = Path(path)
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_bytes // self.ENTRY.size)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        size = os.fstat(self._fd).st_size
        self._entries = size // self.ENTRY.size
        if size % self.ENTRY.size:  # torn last entry from a crash: drop it
            os.ftruncate(self._fd, self._entries * self.ENTRY.size)
        self._map = None
        self._mapped = 0
        self._last = None
        self._last = self._read_entry(self._entries - 1) if self._entries else None

    # -- public -----------------------------------------------------------------------------

    @property
    def entries(self):
        return self._entries

    @property
    def is_full(self):
        return self._entries >= self.max_entries

    @property
    def size_bytes(self):
        return self._entries * self.ENTRY.size

    def entry(self, i):
        """The i-th entry, decoded (absolute offsets)."""
        if not 0 <= i < self._entries:
            raise IndexError(i)
        return self._decode(self._read_entry(i))

    def last_entry(self):
        return None if self._last is None else self._decode(self._last)

    def reset(self):
        """Drop every entry (before a rebuild from the log)."""
        self._truncate_entries(0)

    def flush(self):
        os.fsync(self._fd)

    def close(self):
        self._unmap()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def delete(self):
        self.close()
        self.path.unlink(missing_ok=True)

    # -- internals --------------------------------------------------------------------------

    def _append_raw(self, *fields):
        os.write(self._fd, self.ENTRY.pack(*fields))
        self._entries += 1
        self._last = fields

    def _read_entry(self, i):
        if i == self._entries - 1 and self._last is not None:
            return self._last
        if i < self._mapped:
            return self.ENTRY.unpack_from(self._map, i * self.ENTRY.size)
        # Single reads (sanity checks at open) don't map: only binary searches do, lazily,
        # so a log with many segments doesn't hold a map per index it never searches.
        return self.ENTRY.unpack(os.pread(self._fd, self.ENTRY.size, i * self.ENTRY.size))

    def _remap(self):
        self._unmap()
        if self._entries:
            self._map = mmap.mmap(self._fd, self._entries * self.ENTRY.size, access=mmap.ACCESS_READ)
            self._mapped = self._entries

    def _unmap(self):
        if self._map is not None:
            self._map.close()
        self._map, self._mapped = None, 0

    def _largest_le(self, key, field=0):
        """Slot of the largest entry whose `field` is <= `key`, or -1 (both fields ascend)."""
        n = self._entries
        if n == 0:
            return -1
        if self._last[field] <= key:
            return n - 1
        if self._mapped < n - 1:  # the last entry is cached: the map may lag it by one
            self._remap()
        mm, width, unpack = self._map, self.ENTRY.size, self.ENTRY.unpack_from
        if n == 1 or unpack(mm, 0)[field] > key:
            return -1
        lo, hi = 0, n - 2
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if unpack(mm, mid * width)[field] <= key:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _truncate_entries(self, n):
        if n == self._entries:
            return
        self._unmap()  # never keep a map over bytes that are about to disappear
        os.ftruncate(self._fd, n * self.ENTRY.size)
        self._entries = n
        self._last = None
        self._last = self._read_entry(n - 1) if n else None

    def __repr__(self):
        return f"{type(self).__name__}({self.path.name}, entries={self._entries})"


class OffsetIndex(_Index):
    """Offset -> file position of the batch that starts at that offset (one entry per ~4 KiB).

    Entries are keyed by each indexed batch's base offset. Kafka keys its entries by a batch's
    last offset; both satisfy the index contract ("scanning from this position finds the batch
    holding any offset >= the key"), so either broker reads the other's files correctly.
    """

    ENTRY = struct.Struct(">ii")

    def _decode(self, raw):
        return self.base_offset + raw[0], raw[1]

    def append(self, offset, position):
        rel = offset - self.base_offset
        if self._last is not None and rel <= self._last[0]:
            raise ValueError(f"offset {offset} not above last indexed offset "
                             f"{self.base_offset + self._last[0]} in {self.path.name}")
        if not 0 <= rel <= 0x7FFFFFFF:
            raise ValueError(f"offset {offset} out of range for segment {self.base_offset}")
        self._append_raw(rel, position)

    def lookup(self, offset):
        """(offset, position) of the largest entry <= offset, else (base_offset, 0)."""
        slot = self._largest_le(offset - self.base_offset)
        return (self.base_offset, 0) if slot < 0 else self._decode(self._read_entry(slot))

    def lookup_position(self, position):
        """(offset, position) of the largest entry at or before `position`, else (base, 0)."""
        slot = self._largest_le(position, field=1)
        return (self.base_offset, 0) if slot < 0 else self._decode(self._read_entry(slot))

    def truncate_to(self, offset):
        """Remove entries for offsets >= `offset`."""
        slot = self._largest_le(offset - self.base_offset - 1)
        self._truncate_entries(slot + 1)

    def sanity_check(self, log_size):
        """Cheap structural check: keys increasing end to end, positions inside the log."""
        if not self._entries:
            return
        first_rel, first_pos = self._read_entry(0)
        last_rel, last_pos = self._last
        if first_rel < 0 or last_rel < first_rel or (self._entries > 1 and last_rel == first_rel):
            raise CorruptIndexError(f"{self.path.name}: offsets not increasing")
        if first_pos < 0 or last_pos < first_pos or last_pos >= max(log_size, 1):
            raise CorruptIndexError(f"{self.path.name}: position {last_pos} outside log of {log_size} bytes")


class TimeIndex(_Index):
    """Timestamp -> offset: each entry says "the largest timestamp up to this offset is T".

    An entry is only added when the timestamp grows, so timestamps and offsets both increase;
    the offset is the last offset of the batch that first reached T (Kafka's shallow offset).
    """

    ENTRY = struct.Struct(">qi")

    def _decode(self, raw):
        return raw[0], self.base_offset + raw[1]

    def maybe_append(self, timestamp, offset, skip_full_check=False):
        """Add (timestamp, offset) if it is newer than the last entry; return whether added."""
        if self.is_full and not skip_full_check:
            raise ValueError(f"{self.path.name} is full")
        rel = offset - self.base_offset
        if self._last is not None:
            if timestamp <= self._last[0]:
                return False
            if rel < self._last[1]:
                raise ValueError(f"time index offset {offset} below last entry in {self.path.name}")
        if timestamp < 0:
            return False
        self._append_raw(timestamp, rel)
        return True

    def lookup(self, timestamp):
        """(timestamp, offset) of the largest entry with timestamp <= target, else (-1, base)."""
        slot = self._largest_le(timestamp)
        return (-1, self.base_offset) if slot < 0 else self._decode(self._read_entry(slot))

    def truncate_to(self, offset):
        """Remove entries whose offset is >= `offset` (offsets increase, so binary search)."""
        self._truncate_entries(self._largest_le(offset - self.base_offset - 1, field=1) + 1)

    def sanity_check(self, next_offset):
        if not self._entries:
            return
        first_ts, first_rel = self._read_entry(0)
        last_ts, last_rel = self._last
        if first_rel < 0 or last_rel < first_rel or last_ts < first_ts:
            raise CorruptIndexError(f"{self.path.name}: entries not increasing")
        if next_offset is not None and self.base_offset + last_rel >= max(next_offset, self.base_offset + 1):
            raise CorruptIndexError(f"{self.path.name}: offset {self.base_offset + last_rel} beyond "
                                    f"segment end {next_offset}")
