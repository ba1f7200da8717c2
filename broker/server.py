"""The broker's network shell: accept connections, split frames, dispatch, write responses.

Each connection handles its requests one at a time, in order, as Kafka does, so responses
never need reordering; a long-polling fetch holds only its own connection. Bytes that do not
decode as a request the broker supports close that connection and nothing else.
"""
import asyncio
import logging

from minilog.connector.protocol import (
    REQUESTS,
    ApiKey,
    CorruptMessage,
    FrameReader,
    FrameTooLarge,
    api_name,
    decode_request_header,
    encode_response,
)

from .handlers import HANDLERS, NO_RESPONSE
from .handlers.api_versions import unsupported_version_response

log = logging.getLogger("minilog.broker.server")


class BrokerServer:
    def __init__(self, broker, host, port):
        self.broker, self.host, self.port = broker, host, port
        self._server = None
        self._connections = set()

    async def start(self):
        self._server = await asyncio.start_server(self._serve, self.host, self.port,
                                                  limit=1 << 20, backlog=512)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self):
        if self._server:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)

    async def _serve(self, reader, writer):
        task = asyncio.current_task()
        self._connections.add(task)
        peer = writer.get_extra_info("peername")
        frames = FrameReader(self.broker.config["socket.request.max.bytes"])
        try:
            while True:
                data = await reader.read(1 << 20)
                if not data:
                    break
                for frame in frames.feed(data):
                    chunks = await self._handle(frame, peer)
                    if chunks:
                        writer.writelines(chunks)
                        await writer.drain()
        except FrameTooLarge as e:
            log.warning("closing %s: %s", peer, e)
        except _CloseConnection as e:
            log.warning("closing %s: %s", peer, e)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass
        finally:
            self._connections.discard(task)
            writer.close()

    async def _handle(self, frame, peer):
        try:
            header, body_reader = decode_request_header(frame)
        except CorruptMessage as e:
            raise _CloseConnection(f"unreadable request header: {e}") from None
        header.client_host = peer[0] if peer else None
        key, version = header.api_key, header.api_version
        entry = HANDLERS.get(key)
        if key == ApiKey.API_VERSIONS and not _in(entry.versions, version):
            return encode_response(key, 0, header.correlation_id,
                                   unsupported_version_response(self.broker))
        if entry is None:
            raise _CloseConnection(f"unsupported API key {key}")
        if not _in(entry.versions, version):
            raise _CloseConnection(f"unsupported version {version} of {api_name(key)}")
        try:
            request = REQUESTS[key].decode(body_reader, version)
        except CorruptMessage as e:
            raise _CloseConnection(f"malformed {api_name(key)} v{version}: {e}") from None
        response = await entry.handler(self.broker, header, request)
        if response is NO_RESPONSE:
            return None
        return encode_response(key, version, header.correlation_id, response)


def _in(rng, v):
    return rng[0] <= v <= rng[1]


class _CloseConnection(Exception):
    pass
