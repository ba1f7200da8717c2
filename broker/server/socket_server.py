"""The broker's network shell: accept connections, split frames, dispatch, write responses.

Each connection handles its requests one at a time, in order, as Kafka does, and answers them
in order; a long-polling fetch holds only its own connection. One difference: a request whose
work is done but whose answer waits on other connections (acks=all, until the followers have
its records: `Pending`) lets the next request be handled meanwhile, so a producer's pipelined
requests are appended without waiting a replication round each. Bytes that do not
decode as a request the broker supports close that connection and nothing else; a handler
that fails answers its request with UNKNOWN_SERVER_ERROR and the connection goes on. Frames
arrive through `FramedProtocol`: a large Produce request lands once, in a buffer the handlers
may stamp in place.
"""
import asyncio
import collections
import logging
import time

from minilog.connector.framed_protocol import FramedProtocol
from minilog.connector.protocol import (
    REQUESTS,
    ApiKey,
    CorruptMessage,
    ErrorCode,
    api_name,
    decode_request_header,
    encode_response,
)

from ..security.access import cluster_refusal
from ..storage.file_region import FileRegion
from ..storage.producer_errors import append_error_code
from .controller_router import FORWARDED, authorized_here
from .error_response import error_response
from .handlers import NO_RESPONSE, CloseConnection, Pending, served
from .handlers.api_versions import unsupported_version_response

log = logging.getLogger("minilog.broker.server")

MAX_QUEUED_REQUESTS = 64  # per connection, received but not yet handled: then stop reading
MAX_PENDING_RESPONSES = 16  # per connection, handled but waiting (acks=all): then stop handling
TLS_WRITE = 256 * 1024  # bytes of a response encrypted and written at a time over TLS
# A request at least this large (a produce of large batches) takes long enough to handle that
# the answers held for the end of the loop's turn go before it, not after it: a producer with
# its in-flight requests queued here would otherwise hear of none until all were appended.
SEND_HELD_BEFORE_BYTES = 64 * 1024


class BrokerServer:
    """One listener. `connection(server)` builds each accepted connection (`_Connection` unless
    the listener is secured, see `secure_connection.py`); `ssl` is the listener's TLS context."""

    def __init__(self, broker, host, port, sock=None, *, connection=None, ssl=None,
                 handshake_timeout=None):
        self.broker, self.host, self.port, self._sock = broker, host, port, sock
        self.handlers = served(broker)  # a controller-only node answers fewer APIs
        self._server = None
        self._connections = set()
        make = connection or _Connection
        self._connection = lambda: make(self)
        self._tls = {"ssl": ssl, "ssl_handshake_timeout": handshake_timeout} if ssl else {}

    async def start(self):
        loop = asyncio.get_running_loop()
        where = {"sock": self._sock} if self._sock else {"host": self.host, "port": self.port}
        self._server = await loop.create_server(self._connection, backlog=512, **where,
                                                **self._tls)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self):
        if self._server:
            self._server.close()
            await self._server.wait_closed()
        tasks = [c.task for c in list(self._connections) if c.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def handle(self, frame, peer, closed=None, session=None, forwarded=False):
        """The response chunks to one request frame, None when it gets no response; `closed`
        is a future done when the frame's connection closes; `session` is a secured
        listener's (`secure_connection.Session`); `forwarded`: the frame came in an Envelope
        (`handlers/envelope.py`)."""
        started = time.perf_counter()
        header, body_reader = read_request_header(frame)
        header.client_host = peer[0] if peer else None
        header.closed = closed
        header.forwarded = forwarded
        if session is not None:
            header.session = session
        key, version = header.api_key, header.api_version
        entry = self.handlers.get(key)
        if key == ApiKey.API_VERSIONS and not _in(entry.versions, version):
            return encode_response(key, 0, header.correlation_id,
                                   unsupported_version_response(self.handlers))
        if entry is None:
            raise _CloseConnection(f"unsupported API key {key}")
        request = read_request(key, version, body_reader, entry.versions)
        code = cluster_refusal(self.broker, header, key)
        if code:
            return encode_response(key, version, header.correlation_id,
                                   error_response(key, version, request, code))
        handler = entry.handler if key not in FORWARDED else authorized_here(entry.handler)
        call = self.broker.router.handle(key, header, request, handler)  # admin: to the controller
        return await self._answer(call, header, request, peer, started)

    async def _answer(self, call, header, request, peer, started):
        """Encoded response chunks of a handler's `call`, or, when the handler answers
        `Pending`, a task that gives them once it is ready."""
        key, version = header.api_key, header.api_version
        try:
            response = await call
            if isinstance(response, Pending):
                task = asyncio.ensure_future(self._answer(response.rest, header, request, peer,
                                                          started))
                task.add_done_callback(_close_if_cancelled(response.rest))
                return task
            self.broker.metrics.request_done(key, started)
            if response is NO_RESPONSE:
                return None
            return encode_response(key, version, header.correlation_id, response)
        except CloseConnection as e:
            raise _CloseConnection(str(e)) from None
        except Exception as e:  # a handler's bug or a failing disk: Kafka's code, go on
            if isinstance(e, OSError) and e.filename is not None:  # a file: the disk, not the
                # code: one line a minute, no traceback
                code, _ = append_error_code(e)
            else:
                code = ErrorCode.UNKNOWN_SERVER_ERROR
                log.exception("%s v%d from %s failed", api_name(key), version, peer)
            response = error_response(key, version, request, code)
            if response is None:
                raise _CloseConnection(f"{api_name(key)} failed and gets no response") from None
            return encode_response(key, version, header.correlation_id, response)


class _Connection(FramedProtocol):
    """One client connection: frames queue up here and one task answers them in order."""

    tls = False  # sendfile cannot write into a TLS connection: segments are read in pieces

    def __init__(self, server):
        super().__init__(server.broker.config["socket.request.max.bytes"])
        self.server = server
        self._handle = server.handle  # a secured connection authenticates first
        self.task = None
        self.peer = None
        self._queue = collections.deque()  # frames, then possibly one exception to end with
        self._wakeup = None
        self._reading_paused = False
        # Responses behind a `Pending` one, in request order: tasks or chunks; the head is
        # removed once written, so a response may skip this only when it is empty.
        self._unsent = collections.deque()
        self._sender = None  # the task writing `_unsent`
        self._room = None    # a future the sender completes when `_unsent` shrinks
        self._held = []      # response chunks written this turn of the loop, sent at its end

    def connection_made(self, transport):
        super().connection_made(transport)
        self.peer = transport.get_extra_info("peername")
        self.closed_future = asyncio.get_running_loop().create_future()
        self.server._connections.add(self)
        self.task = asyncio.get_running_loop().create_task(self._serve())

    def frame_received(self, frame):
        self._queue.append(frame)
        if len(self._queue) >= MAX_QUEUED_REQUESTS and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()
        self._wake()

    def frame_too_large(self, error):
        self._queue.append(_CloseConnection(str(error)))
        self._wake()

    def connection_closed(self, exc):
        self._queue.append(None)
        self._wake()
        if not self.closed_future.done():
            self.closed_future.set_result(None)

    def _wake(self):
        waiter = self._wakeup
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _next(self):
        while not self._queue:
            self._wakeup = asyncio.get_running_loop().create_future()
            await self._wakeup
            self._wakeup = None
        item = self._queue.popleft()
        if self._reading_paused and len(self._queue) < MAX_QUEUED_REQUESTS // 2 \
                and not self.closed:
            self._reading_paused = False
            self.transport.resume_reading()
        return item

    async def _serve(self):
        try:
            while True:
                item = await self._next()
                if item is None:
                    break
                if isinstance(item, Exception):
                    raise item
                if self._held and len(item) >= SEND_HELD_BEFORE_BYTES:
                    self._flush()
                result = await self._handle(item, self.peer, self.closed_future)
                del item  # the frame's buffer: nothing should outlive the request
                if isinstance(result, asyncio.Future) or self._unsent:
                    await self._send_later(result)
                elif result:
                    await self._send(result, hold=self._small_request_next())
        except _CloseConnection as e:
            log.warning("closing %s: %s", self.peer, e)
        except (ConnectionError, asyncio.CancelledError):
            pass
        except Exception:  # a handler's bug ends this connection only, and is reported
            log.exception("closing %s after an unexpected error", self.peer)
        finally:
            self.server._connections.discard(self)
            self._flush()
            self.transport.close()
            self._drop_unsent()

    def _small_request_next(self):
        """Whether a small request waits to be handled next, whose answer may join the one
        just made (`write`): else none can this turn (none is pending: it was answered in
        order), or the next request is large and the answer should not wait for it."""
        item = self._queue[0] if self._queue else None
        return isinstance(item, (bytes, bytearray, memoryview)) \
            and len(item) < SEND_HELD_BEFORE_BYTES

    def _drop_unsent(self):
        """The connection ended: the answers still queued go nowhere. Pending ones are tasks,
        cancelled; encoded ones are chunks, whose file regions are closed."""
        if self._sender is not None:
            self._sender.cancel()
        while self._unsent:
            result = self._unsent.popleft()
            if isinstance(result, asyncio.Future):
                result.cancel()
                continue
            for chunk in result or ():
                if isinstance(chunk, FileRegion):
                    chunk.close()

    async def _send_later(self, result):
        """Queue a response behind the pending ones; wait while too many are pending."""
        self._unsent.append(result)
        if self._sender is None or self._sender.done():  # done: its callback may be due
            self._sender = asyncio.ensure_future(self._send_in_order())
            self._sender.add_done_callback(self._sender_done)
        while len(self._unsent) > MAX_PENDING_RESPONSES and not self._sender.done():
            self._room = asyncio.get_running_loop().create_future()
            await self._room

    async def _send_in_order(self):
        while self._unsent:
            result = self._unsent[0]
            chunks = await result if isinstance(result, asyncio.Future) else result
            if chunks:
                await self._send(chunks)
            self._unsent.popleft()
            if self._room is not None and not self._room.done():
                self._room.set_result(None)

    def _sender_done(self, task):
        if self._sender is task:
            self._sender = None
        if not task.cancelled() and task.exception() is not None:
            self._queue.appendleft(task.exception())  # ends `_serve`: the connection closes
            self._wake()
            if self._room is not None and not self._room.done():
                self._room.set_result(None)

    def write(self, chunks, hold=True):
        """Queue a response's chunks to go out with the others of this turn of the event loop,
        in one system call: when a producer's pipelined requests arrive together, or one new
        high watermark completes a burst of acks=all produces, their answers are one send,
        not a send each (each wakes the client, and on loopback the sender pays the
        receiver's TCP work). Over TLS chunks are written at once (`_send_tls` paces them);
        so are they with `hold` False and nothing held: no answer could join them."""
        if self.tls or not (hold or self._held):
            super().write(chunks)
            return
        if not self._held:
            asyncio.get_running_loop().call_soon(self._flush)
        self._held.extend(chunks)

    def _flush(self):
        held, self._held = self._held, []
        if held and not self.closed:
            super().write(held)

    async def _send(self, chunks, hold=True):
        """Write a response; its `FileRegion`s go with sendfile, and are closed in any case.
        `hold`: a response without them may wait for the end of the loop's turn (`write`)."""
        regions = [c for c in chunks if isinstance(c, FileRegion)]
        try:
            if self.closed:
                return
            if self.tls:
                await self._send_tls(chunks)
                return
            if not regions:
                self.write(chunks, hold)
                await self.drain()
                return
            loop, start = asyncio.get_running_loop(), 0
            for i, chunk in enumerate(chunks):
                if not isinstance(chunk, FileRegion):
                    continue
                if i > start:
                    self.write(chunks[start:i])
                self._flush()  # the bytes before the segment's must reach the transport first
                try:
                    sent = await loop.sendfile(self.transport, chunk, chunk.position, len(chunk),
                                               fallback=False)
                except asyncio.SendfileNotAvailableError:  # not a plain socket: copy it
                    self.write([chunk.read()])
                    sent = len(chunk)
                if sent != len(chunk):  # the file shrank under us: the frame is broken
                    raise ConnectionError(f"sent {sent} of {len(chunk)} bytes of a segment")
                start = i + 1
            if start < len(chunks):
                self.write(chunks[start:])
            # The rest of a response big enough for sendfile goes now: its reader waits for
            # its last bytes, and nothing is saved by holding them to the loop's turn's end.
            self._flush()
            await self.drain()
        finally:
            for region in regions:
                region.close()

    async def _send_tls(self, chunks):
        """A response over TLS, where sendfile cannot go: encrypted `TLS_WRITE` bytes at a time
        (segments read piece by piece), each piece handed to the socket before the next is
        made. asyncio would otherwise encrypt a whole fetch response at once and buffer the
        ciphertext the socket did not take, copying it again at each send."""
        batch, size = [], 0
        for chunk in chunks:
            for start in range(0, len(chunk), TLS_WRITE):
                n = min(TLS_WRITE, len(chunk) - start)
                if size + n > TLS_WRITE and batch:
                    self.transport.writelines(batch)
                    batch, size = [], 0
                    await self.drain()
                    if self.closed:
                        return
                if isinstance(chunk, FileRegion):
                    batch.append(chunk.read(start, n))
                else:
                    batch.append(chunk if n == len(chunk) else memoryview(chunk)[start:start + n])
                size += n
        if batch:
            self.transport.writelines(batch)
        await self.drain()


def _close_if_cancelled(rest):
    """A done callback for a pending answer's task: cancelled before it started, the task never
    awaited `rest`, which is closed so that it is not reported as a coroutine never awaited."""
    def done(task: asyncio.Future) -> None:
        if task.cancelled() and asyncio.iscoroutine(rest):
            rest.close()
    return done


def _in(rng, v):
    return rng[0] <= v <= rng[1]


def read_request_header(frame):
    """(header, body reader) of a request frame; a header that does not decode closes the
    connection (nothing can be answered without its correlation id)."""
    try:
        return decode_request_header(frame)
    except CorruptMessage as e:
        raise _CloseConnection(f"unreadable request header: {e}") from None


def read_request(key, version, body_reader, versions):
    """The request of API `key` at `version`, which must be in `versions` (lo, hi); a version
    outside them or a body that does not decode closes the connection, as Kafka does."""
    if not _in(versions, version):
        raise _CloseConnection(f"unsupported version {version} of {api_name(key)}")
    try:
        return REQUESTS[key].decode(body_reader, version)
    except CorruptMessage as e:
        raise _CloseConnection(f"malformed {api_name(key)} v{version}: {e}") from None


class _CloseConnection(Exception):
    pass
