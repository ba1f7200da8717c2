"""Kafka frames off a socket with one copy: the kernel's, straight into the frame's buffer.

A size-prefixed frame of a megabyte (a Produce request, a Fetch response) is received with
`recv_into` into a `bytearray` of exactly its size and handed on as a writable memoryview, so
the bytes are never copied again in user space (the broker stamps offsets into that very
buffer and writes it to the segment). Small frames share one scratch buffer and are handed on
as `bytes` copies, many per system call. asyncio's streams, in contrast, copy every byte three
times (recv, StreamReader's buffer, `read()`) before framing starts.

Both ends use it: the broker's connections (`broker/server/socket_server.py`) and the client's
(`client/connection.py`); subclasses implement `frame_received` and `connection_closed`.
"""
import asyncio
import struct
from collections.abc import Iterable

from .protocol import FrameTooLarge

_SIZE = struct.Struct(">i")
SCRATCH_SIZE = 128 * 1024
OWN_BUFFER_OVER = 32 * 1024  # frames larger than this get a buffer of their own
POOL_BYTES = 8 * 1024 * 1024  # per connection: large-frame buffers kept for reuse
GROW_FROM = 256 * 1024       # an untrusted large frame's first buffer, doubled as bytes arrive
_SMALL_CHUNK = 16 * 1024     # response chunks below this are joined before writing


def _unshared(buf):
    """True if no memoryview of the bytearray `buf` is alive (then it may be reused)."""
    try:
        del buf[-1:]  # a bytearray with exports raises BufferError before changing anything
    except BufferError:
        return False
    buf.append(0)
    return True


class FramedProtocol(asyncio.BufferedProtocol):
    """Splits the byte stream into frames (size prefix removed); writes chunk lists.

    `frame_received(frame)` gets each frame in order: `bytes` for small frames, a writable
    memoryview of a bytearray the receiver owns for those over `OWN_BUFFER_OVER` bytes. A frame announcing more than
    `max_frame_size` bytes stops reading and calls `frame_too_large(error)`: frames before it
    were delivered, nothing after it is. `connection_closed(exc)` is called once, with None on
    a clean end of stream.

    A size prefix is four bytes anyone can send: unless `trusts_announced_sizes` (a client,
    reading what the broker it chose answers), a large frame's buffer grows with the bytes that
    actually arrive (from `GROW_FROM`, doubling), so announcing 100 MB costs nothing until the
    100 MB come. A buffer kept from an earlier frame of about that size is taken at once.
    """

    trusts_announced_sizes = False

    def __init__(self, max_frame_size: int) -> None:
        self.max_frame_size = max_frame_size
        self.transport = None
        self._scratch = bytearray(SCRATCH_SIZE)
        self._scratch_view = memoryview(self._scratch)
        self._start = self._end = 0    # unparsed bytes in the scratch buffer
        self._frame = None              # the view a large frame is being received into
        self._filled = 0
        self._size = 0                  # the large frame's announced size (>= len(_frame))
        self._pool = []                 # large-frame buffers to reuse once nobody holds them
        self._stopped = False           # an oversized frame was announced: read nothing more
        self._write_paused = False
        self._drain_waiter = None
        self._lost = None               # set once the connection is gone: (exception or None,)

    # -- subclass interface -------------------------------------------------------------------

    def frame_received(self, frame):
        """Called with each frame, in order (subclasses act on them; here they are dropped)."""

    def frame_too_large(self, error):
        self.transport.close()

    def connection_closed(self, exc):
        pass

    # -- reading --------------------------------------------------------------------------------

    def connection_made(self, transport):
        self.transport = transport

    def get_buffer(self, sizehint):
        if self._frame is not None:
            return self._frame[self._filled:]
        if self._end == SCRATCH_SIZE:  # only possible after a refused frame: discard input
            self._start = self._end = 0
        return self._scratch_view[self._end:]

    def buffer_updated(self, nbytes):
        if self._stopped:
            return
        if self._frame is not None:
            self._filled += nbytes
            view = self._frame
            if self._filled == self._size:
                self._frame = None
                self.frame_received(view)
            elif self._filled == len(view):
                self._frame = self._grown(view)
            return
        self._end += nbytes
        self._split_scratch()

    def _split_scratch(self):
        data, pos, end = self._scratch, self._start, self._end
        while end - pos >= 4:
            size = _SIZE.unpack_from(data, pos)[0]
            if size < 0 or size > self.max_frame_size:
                self._stop(FrameTooLarge(size, self.max_frame_size))
                return
            if end - pos - 4 >= size:
                whole = self._scratch_view[pos + 4:pos + 4 + size]
                if size > OWN_BUFFER_OVER:
                    frame = self._buffer(size)
                    frame[:] = whole
                else:
                    frame = bytes(whole)
                pos += 4 + size
                self._start = pos
                self.frame_received(frame)
                if self._stopped:
                    return
                continue
            if size > OWN_BUFFER_OVER:
                have = end - pos - 4
                view = self._first_buffer(size, have)
                view[:have] = self._scratch_view[pos + 4:end]
                self._frame, self._filled, self._size = view, have, size
                self._start = self._end = 0
                return
            break
        if pos == end:
            self._start = self._end = 0
        elif SCRATCH_SIZE - end < OWN_BUFFER_OVER + 4:  # make room for the rest of a small frame
            rest = end - pos
            self._scratch[:rest] = bytes(self._scratch_view[pos:end])  # not from its own view
            self._start, self._end = 0, rest
        else:
            self._start = pos

    def _pooled(self, size):
        """A view of `size` bytes of a pooled buffer nobody uses any more, or None."""
        for buf in self._pool:
            if size <= len(buf) <= 2 * size and _unshared(buf):
                return memoryview(buf)[:size]
        return None

    def _buffer(self, size):
        """A writable view of `size` bytes: a pooled buffer nobody uses any more, or a new one.

        Memory that was never written costs page faults (on virtual machines, the host's too):
        a fresh megabyte per request measurably slowed ingest. A buffer is reused only when
        no view of it is alive (a bytearray with exports refuses to shrink).
        """
        pooled = self._pooled(size)
        if pooled is not None:
            return pooled
        buf = bytearray(size)
        if size <= POOL_BYTES // 2:
            self._pool.append(buf)
            while sum(len(b) for b in self._pool) > POOL_BYTES:
                self._pool.pop(0)
        return memoryview(buf)

    def _first_buffer(self, size, have):
        """Where a large frame starts arriving: a pooled buffer that holds it whole, else (the
        size untrusted) one for what has come so far, which `_grown` doubles as more does."""
        if self.trusts_announced_sizes:
            return self._buffer(size)
        pooled = self._pooled(size)
        if pooled is not None:
            return pooled
        return self._buffer(size) if size <= GROW_FROM \
            else memoryview(bytearray(max(GROW_FROM, have)))

    def _grown(self, view):
        """A buffer twice `view`'s size (at most the frame's), holding what `view` received."""
        wanted = min(self._size, 2 * len(view))
        grown = self._buffer(wanted) if wanted == self._size else memoryview(bytearray(wanted))
        grown[:self._filled] = view[:self._filled]
        return grown

    def _stop(self, error):
        self._stopped = True
        self.transport.pause_reading()
        self.frame_too_large(error)

    def eof_received(self):
        return False  # close the transport: Kafka connections are not half-closed

    def connection_lost(self, exc):
        if self._lost is not None:
            return
        self._lost = (exc,)
        waiter, self._drain_waiter = self._drain_waiter, None
        if waiter is not None and not waiter.done():
            if exc is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(exc)
        self.connection_closed(exc)

    # -- writing ----------------------------------------------------------------------------------

    def write(self, chunks: Iterable[bytes | bytearray | memoryview]) -> None:
        """Write a frame's chunks: small ones joined, large ones passed on as they are.

        asyncio's `writelines` (3.11) joins everything into one new object: a 1 MiB fetch
        response would be copied once more for nothing.
        """
        small = []
        for chunk in chunks:
            if len(chunk) < _SMALL_CHUNK:
                small.append(chunk)
                continue
            if small:
                self.transport.write(b"".join(small))
                small = []
            self.transport.write(chunk)
        if small:
            self.transport.write(b"".join(small))

    def pause_writing(self):
        self._write_paused = True

    def resume_writing(self):
        self._write_paused = False
        waiter, self._drain_waiter = self._drain_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def drain(self) -> None:
        """Wait until the transport's write buffer is below its high-water mark."""
        if self._lost is not None:
            if self._lost[0] is not None:
                raise ConnectionResetError(str(self._lost[0]))
            raise ConnectionResetError("connection lost")
        if not self._write_paused:
            return
        if self._drain_waiter is None or self._drain_waiter.done():
            self._drain_waiter = asyncio.get_running_loop().create_future()
        await asyncio.shield(self._drain_waiter)

    @property
    def closed(self) -> bool:
        return self._lost is not None
