"""A range of a segment file to send as it is: Kafka's zero-copy fetch.

A fetch response's records are whole stored batches, so they can go from the page cache to
the socket with `sendfile` and never enter Python. A `FileRegion` holds its own duplicate of
the segment's file descriptor, so retention or compaction may close and delete the segment
meanwhile: the bytes stay readable until the region is closed. Regions are closed once sent;
one that is dropped unsent closes itself when collected.
"""
import os


class FileRegion:
    """`length` bytes at `position` of an open file; `len()` is the length, as for bytes."""

    __slots__ = ("_fd", "length", "position")
    mode = "rb"  # what asyncio's sendfile checks before using fileno()

    def __init__(self, fd, position, length):
        self._fd = os.dup(fd)
        self.position, self.length = position, length

    def __len__(self):
        return self.length

    def __repr__(self):
        return f"FileRegion(position={self.position}, length={self.length})"

    def fileno(self):
        return self._fd

    def seek(self, *_):
        """asyncio's sendfile moves the file position after sending: ours is not used."""

    def read(self, offset: int = 0, size: int | None = None) -> bytes:
        """The bytes themselves, all of them or `size` from `offset` into the region (for
        callers that need them in memory)."""
        size = self.length - offset if size is None else min(size, self.length - offset)
        data = os.pread(self._fd, size, self.position + offset)
        if len(data) != size:
            raise OSError(f"file region of {self.length} bytes at {self.position} shrank to "
                          f"{offset + len(data)}")
        return data

    def close(self):
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)

    def __del__(self):
        self.close()
