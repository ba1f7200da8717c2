"""One asyncio connection to one broker, and the event-loop thread behind the sync APIs.

`BrokerConnection` is a thin shell around the sans-IO codec: it writes encoded requests in
call order (so the correlation id order is the write order, which pipelined produce relies on),
keeps a map of in-flight requests, and a single reader task matches each response frame to its
request by correlation id. ApiVersions is negotiated once at connect and every later request is
sent at the highest version both sides speak.

Failure model, kept deliberately simple: any transport error, a broker closing the socket, or a
request timing out closes the whole connection and fails every in-flight request with
`KafkaConnectionError` (timeouts with `KafkaTimeoutError`). A timed-out connection cannot be
trusted to answer in order any more; the Java client and librdkafka drop it for the same reason.
The cluster layer opens a fresh connection on the next request.

Re-authentication (KIP-368): when SaslAuthenticate gave the session a lifetime, the connection
runs the SASL exchange again at 85-95% of it, as the Java client does: requests written
meanwhile are held (their correlation ids already taken, so their order stays the call order),
the ones in flight are answered first, then the exchange runs and the held ones go out.
"""
import asyncio
import concurrent.futures
import errno
import functools
import itertools
import logging
import os
import random
import socket
import ssl
import struct
import threading
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, TypeVar

from minilog.connector.framed_protocol import FramedProtocol
from minilog.connector.protocol import (
    REQUESTS,
    ApiKey,
    ErrorCode,
    KafkaError,
    RequestHeader,
    api_name,
    decode_response,
    decode_response_correlation,
    encode_request,
    request,
)

from .security import ClientSecurity, authenticate
from .types import KafkaConnectionError, KafkaTimeoutError, Message

log = logging.getLogger("minilog.client")

SOFTWARE_NAME = "minilog-python"
SOFTWARE_VERSION = "0.1.0"
_INT16 = struct.Struct(">h")
T = TypeVar("T")
# correlation id, its answer's future (None: no answer expected), api key, version, frames
_Held = tuple[int, "asyncio.Future[Message] | None", int, int, list[bytes]]


async def wait_set(event: asyncio.Event, timeout: float | None = None) -> bool:
    """Wait until `event` is set or `timeout` seconds pass; return whether it is set.

    asyncio.wait_for (Python 3.11) swallows a cancellation that arrives just as the awaited
    thing completes; a background loop waiting on its wake-up event then survives `cancel()`
    and `close()` hangs. asyncio.wait never swallows it, so every timed wait here uses it.
    """
    if event.is_set():
        return True
    if timeout is not None and timeout <= 0:
        return False
    waiter = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait((waiter,), timeout=timeout)
    finally:
        waiter.cancel()
    return event.is_set()


class BrokerConnection:
    """A pipelined request/response channel to one broker.

    Use `await BrokerConnection(...).connect()`, then `await conn.send(api_key, body)`.
    `versions` maps each API key the broker supports to its (min, max) versions.
    """

    def __init__(self, host: str, port: int, *, node_id: int | None = None,
                 client_id: str = "minilog", connect_timeout: float = 10.0,
                 request_timeout: float = 30.0, max_response_size: int = 100 * 1024 * 1024,
                 security: ClientSecurity | None = None) -> None:
        """`security`: a `security.ClientSecurity` (TLS and SASL), None for plaintext."""
        self.host, self.port, self.node_id = host, port, node_id
        self.security = security
        self.client_id = client_id
        self.connect_timeout, self.request_timeout = connect_timeout, request_timeout
        self.versions: dict[int, tuple[int, int]] = {}
        self.max_response_size = max_response_size
        # correlation id -> (its answer's future, api key, version)
        self._pending: dict[int, tuple[asyncio.Future[Message], int, int]] = {}
        self._corr = itertools.count(1)
        self._transport: asyncio.Transport | None = None
        self._protocol: _ResponseProtocol | None = None
        self._closed: BaseException | None = None  # the exception that closed us, once closed
        self._held: list[_Held] | None = None  # re-authenticating: requests written, not sent
        # a future done when nothing is in flight (re-authentication)
        self._drained: asyncio.Future[None] | None = None
        self._reauth_timer: asyncio.TimerHandle | None = None
        self._reauth_task: asyncio.Future[None] | None = None

    def __repr__(self) -> str:
        return f"<BrokerConnection node={self.node_id} {self.host}:{self.port}>"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def connected(self) -> bool:
        return self._transport is not None and self._closed is None

    @property
    def in_flight(self) -> int:
        """Requests written and not yet answered, those held by a re-authentication too."""
        return len(self._pending) + len(self._held or ())

    async def connect(self) -> "BrokerConnection":
        """Open the socket and negotiate API versions; raise KafkaConnectionError on failure."""
        loop = asyncio.get_running_loop()
        tls: dict[str, Any] = {}
        if self.security is not None and self.security.tls is not None:
            tls = {"ssl": self.security.tls, "server_hostname": self.host,
                   "ssl_handshake_timeout": self.connect_timeout}
        opening = asyncio.ensure_future(loop.create_connection(
            lambda: _ResponseProtocol(self), self.host, self.port, **tls))
        try:
            done, _ = await asyncio.wait((opening,), timeout=self.connect_timeout)  # see wait_set
        except asyncio.CancelledError:
            opening.cancel()
            raise
        if not done:
            opening.cancel()
            raise KafkaConnectionError(
                f"connecting to {self.address} timed out after {self.connect_timeout:g}s")
        try:
            transport, self._protocol = opening.result()
            self._transport = transport
        except ssl.SSLError as e:  # with a certificate's own words: "Hostname mismatch, ..."
            why = ": ".join(str(w) for w in (e.reason, getattr(e, "verify_message", None)) if w)
            raise KafkaConnectionError(f"TLS handshake with {self.address} failed: "
                                       f"{why or e}") from None
        except OSError as e:
            if tls and isinstance(e, ConnectionResetError):  # accepted, then dropped mid-handshake
                raise KafkaConnectionError(f"TLS handshake with {self.address} failed: the "
                                           f"broker closed the connection (a PLAINTEXT "
                                           f"listener?)") from None
            if isinstance(e, socket.gaierror) or not e.errno:
                why = e.strerror or str(e)
            else:
                why = os.strerror(e.errno)
            raise KafkaConnectionError(f"cannot connect to {self.address}: {why}",
                                       refused=e.errno == errno.ECONNREFUSED) from None
        try:
            sock = self._transport.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError as e:  # the peer closed it at once (a dying broker): the socket is gone
            self.close()
            raise KafkaConnectionError(f"connection to {self.address} closed while opening: "
                                       f"{os.strerror(e.errno) if e.errno else e}") from None
        try:
            await self._negotiate()
            if self.security is not None and self.security.sasl:
                self._schedule_reauthentication(await authenticate(self, self.security))
        except BaseException:
            self.close()
            raise
        return self

    async def _negotiate(self) -> None:
        version = REQUESTS[ApiKey.API_VERSIONS].versions[1]
        body = request(ApiKey.API_VERSIONS).cls(client_software_name=SOFTWARE_NAME,
                                                client_software_version=SOFTWARE_VERSION)
        for _ in range(3):
            resp = await self.send(ApiKey.API_VERSIONS, body, version,
                                   timeout=self.connect_timeout)
            if resp.error_code == ErrorCode.UNSUPPORTED_VERSION:
                # The broker answered in v0 with the versions it does speak; retry at its best.
                theirs = {k.api_key: k.max_version for k in resp.api_keys}
                version = min(version - 1, theirs.get(ApiKey.API_VERSIONS, 0))
                continue
            if resp.error_code:
                raise KafkaError(resp.error_code, f"ApiVersions refused by {self.address}")
            self.versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
            return
        raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, f"no common ApiVersions version with {self.address}")

    def version_for(self, api_key: int, max_version: int | None = None) -> int:
        """Highest version of `api_key` both sides speak (capped at `max_version`)."""
        ours: tuple[int, int] = REQUESTS[api_key].versions
        theirs = self.versions.get(api_key)
        if theirs is None:
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION,
                             f"broker {self.address} does not support {api_name(api_key)}")
        hi = min(ours[1], theirs[1], 1 << 15 if max_version is None else max_version)
        if hi < max(ours[0], theirs[0]):
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION,
                             f"no common {api_name(api_key)} version with {self.address} "
                             f"(ours {ours[0]}-{ours[1]}, broker's {theirs[0]}-{theirs[1]})")
        return hi

    def supports(self, api_key: int, min_version: int | None = None) -> bool:
        try:
            v = self.version_for(api_key)
        except KafkaError:
            return False
        return min_version is None or v >= min_version

    def _schedule_reauthentication(self, lifetime_ms: int) -> None:
        if lifetime_ms > 0 and self._closed is None:
            delay = lifetime_ms * random.uniform(0.85, 0.95) / 1000
            self._reauth_timer = asyncio.get_running_loop().call_later(
                delay, self._begin_reauthentication)

    def _begin_reauthentication(self) -> None:
        self._reauth_timer = None
        if self._closed is None:
            self._held = []
            self._reauth_task = asyncio.ensure_future(self._reauthenticate())

    async def _reauthenticate(self) -> None:
        try:
            while self._pending and self._closed is None:  # (re-checked: a waiter may leave)
                self._drained = asyncio.get_running_loop().create_future()
                await asyncio.wait((self._drained,), timeout=0.1)
            if self._closed is not None:
                return
            assert self.security is not None  # re-authentication follows an authentication
            lifetime = await authenticate(self, self.security,
                                          functools.partial(self.send, now=True))
        except Exception as e:  # noqa: BLE001 - any failure ends this connection, reported
            self._fail(KafkaConnectionError(f"re-authentication with {self.address} failed: "
                                            f"{e}"))
            return
        held, self._held = self._held or [], None
        for corr, fut, api_key, version, chunks in held:
            if fut is not None:
                self._pending[corr] = (fut, api_key, version)
            self._write(chunks)
        self._schedule_reauthentication(lifetime)

    def _write(self, chunks: list[bytes]) -> None:
        protocol = self._protocol
        assert protocol is not None  # connected: every caller checked `_closed` first
        protocol.write(chunks)

    def write_request(self, api_key: int, body: Message, version: int | None = None,
                      expect_response: bool = True, *,
                      now: bool = False) -> tuple[int, "asyncio.Future[Message] | None"]:
        """Write one request now (no await between call and write); return (corr, future).

        The future is None when no response is expected (Produce with acks=0). While the
        connection re-authenticates, the request is held and written after (`now`: the
        re-authentication's own requests).
        """
        if self._closed is not None:
            raise KafkaConnectionError(f"connection to {self.address} is closed: {self._closed}")
        if version is None:
            version = self.version_for(api_key)
        corr = next(self._corr) & 0x7FFFFFFF
        chunks: list[bytes] = encode_request(
            RequestHeader(api_key, version, corr, self.client_id), body)
        fut: asyncio.Future[Message] | None = None
        if expect_response:
            fut = asyncio.get_running_loop().create_future()
        if self._held is not None and not now:
            self._held.append((corr, fut, api_key, version, chunks))
            return corr, fut
        if fut is not None:
            self._pending[corr] = (fut, api_key, version)
        self._write(chunks)
        return corr, fut

    async def wait_response(self, corr: int, fut: "asyncio.Future[Message]", api_key: int,
                            timeout: float | None = None) -> Message:
        """The response to a request written by `write_request`, within `timeout` seconds."""
        timeout = self.request_timeout if timeout is None else timeout
        try:
            await asyncio.wait((fut,), timeout=timeout)  # not wait_for: see wait_set
        except asyncio.CancelledError:
            self._pending.pop(corr, None)
            fut.cancel()
            raise
        if fut.done():
            return fut.result()
        self._pending.pop(corr, None)
        fut.cancel()
        err = KafkaTimeoutError(f"{api_name(api_key)} to {self.address} got no answer "
                                f"in {timeout:g}s")
        self._fail(KafkaConnectionError(f"closed after a request timed out: {err}"))
        raise err

    async def send(self, api_key: int, body: Message, version: int | None = None, *,
                   timeout: float | None = None, expect_response: bool = True,
                   now: bool = False) -> Message:
        """Send one request and return its decoded response (None when none is expected).

        The request is written before this coroutine first yields, so concurrent callers'
        requests go out in call order.
        """
        corr, fut = self.write_request(api_key, body, version, expect_response, now=now)
        transport, protocol = self._transport, self._protocol
        if transport is not None and protocol is not None and \
                transport.get_write_buffer_size() > 1 << 20:
            try:
                await protocol.drain()
            except (OSError, ConnectionError) as e:
                self._fail(KafkaConnectionError(f"write to {self.address} failed: {e}"))
        if fut is None:
            return None
        return await self.wait_response(corr, fut, api_key, timeout)

    def _dispatch(self, frame: bytes | bytearray | memoryview) -> None:
        entry = self._pending.pop(decode_response_correlation(frame), None)
        drained = self._drained
        if drained is not None and not self._pending and not drained.done():
            drained.set_result(None)
        if entry is None:
            return  # a response to a request we stopped waiting for
        fut, api_key, version = entry
        if fut.done():
            return
        try:
            if api_key == ApiKey.API_VERSIONS and len(frame) >= 6 and \
                    _INT16.unpack_from(frame, 4)[0] == ErrorCode.UNSUPPORTED_VERSION:
                version = 0  # brokers answer unsupported ApiVersions requests in v0
            fut.set_result(decode_response(api_key, version, frame))
        except Exception as e:  # noqa: BLE001 - any decode failure is reported to the caller
            fut.set_exception(KafkaError(ErrorCode.CORRUPT_MESSAGE,
                                         f"undecodable {api_name(api_key)} v{version} response "
                                         f"from {self.address}: {e}"))

    def _fail(self, exc: BaseException) -> None:
        if self._closed is None:
            self._closed = exc
            log.debug("%r closed: %s", self, exc)
        pending, self._pending = self._pending, {}
        held, self._held = self._held or [], None
        for fut in [f for f, _, _ in pending.values()] + [h[1] for h in held if h[1]]:
            if not fut.done():
                fut.set_exception(exc)
        if self._reauth_timer is not None:
            self._reauth_timer.cancel()
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        if self._transport is not None:
            self._transport.close()

    def close(self) -> None:
        self._fail(KafkaConnectionError(f"connection to {self.address} closed by the client"))


class _ResponseProtocol(FramedProtocol):
    """Hands each response frame to its connection as it completes, on the event loop."""

    trusts_announced_sizes = True  # a broker the client chose: a fetch lands in one buffer

    def __init__(self, conn: BrokerConnection) -> None:
        super().__init__(conn.max_response_size)
        self.conn = conn

    def frame_received(self, frame: bytes | bytearray | memoryview) -> None:
        self.conn._dispatch(frame)

    def frame_too_large(self, error: Exception) -> None:
        self.conn._fail(KafkaConnectionError(f"connection to {self.conn.address} failed: {error}"))

    def connection_closed(self, exc: BaseException | None) -> None:
        why = f": {exc}" if exc is not None else ""
        self.conn._fail(KafkaConnectionError(f"connection closed by broker {self.conn.address}{why}"))


def message_class(schema: Any, *path: str) -> Any:
    """The class of a nested struct of a request/response schema, by field names.

    `message_class(request(ApiKey.PRODUCE), "topic_data", "partition_data")` builds the
    partition entries of a ProduceRequest.
    """
    for name in path:
        schema = next(f.struct for f in schema.fields if f.name == name)
    return schema.cls


def add_blocking_methods(sync_cls: type, async_cls: type, names: Iterable[str]) -> None:
    """Give `sync_cls` blocking versions of `async_cls`'s methods `names`.

    Instances of `sync_cls` have `_core` (an `async_cls`) and `_loop` (a LoopThread).
    Coroutine methods are awaited on the loop; plain ones also run there, because the
    cores are not thread-safe and belong to their loop thread.
    """
    def make(method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            if asyncio.iscoroutinefunction(method):
                return self._loop.run(method(self._core, *args, **kwargs))

            async def run_plain() -> Any:
                return method(self._core, *args, **kwargs)
            return self._loop.run(run_plain())
        return call
    for name in names:
        setattr(sync_cls, name, make(getattr(async_cls, name)))


class LoopThread:
    """An asyncio event loop running in a daemon thread: the engine under the sync APIs.

    The sync `Producer`, `Consumer` and `AdminClient` each own one and submit coroutines to it.
    """

    def __init__(self, name: str = "minilog-client") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    @property
    def running(self) -> bool:
        """Whether the loop's thread runs (in a forked child it does not)."""
        return self._thread.is_alive()

    @property
    def in_loop_thread(self) -> bool:
        return threading.get_ident() == self._thread.ident

    def submit(self, coro: Coroutine[Any, Any, T]) -> "concurrent.futures.Future[T]":
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run a coroutine on the loop and wait for its result (or its exception)."""
        if self.in_loop_thread:
            coro.close()
            raise RuntimeError("blocking client calls cannot be made from a client callback")
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise KafkaTimeoutError(f"operation did not complete in {timeout:g}s") from None

    def call_soon(self, fn: Callable[..., object], *args: Any) -> None:
        self.loop.call_soon_threadsafe(fn, *args)

    def stop(self, timeout: float = 10.0) -> None:
        """Cancel what still runs on the loop, stop it and join the thread."""
        if self.loop.is_closed():
            return

        async def shutdown() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        if self._thread.is_alive() and not self.in_loop_thread:
            try:
                asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(timeout)
            except (concurrent.futures.TimeoutError, RuntimeError) as e:
                log.debug("client loop shutdown: %r", e)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout)
        if not self._thread.is_alive():
            self.loop.close()
