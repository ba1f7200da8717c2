"""One connection: version negotiation, pipelining, timeouts, unreachable brokers.

A silent broker is a real one paused with SIGSTOP; only an old broker's ApiVersions is faked."""
import asyncio
import socket
import threading

import pytest
from minilog.connector.client.connection import BrokerConnection, message_class
from minilog.connector.client.types import KafkaConnectionError, KafkaTimeoutError
from minilog.connector.protocol import (
    REQUESTS,
    ApiKey,
    FrameReader,
    decode_request,
    encode_response,
    request,
    response,
)

pytestmark = pytest.mark.timeout(60)


def _run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


def test_versions_negotiated_and_requests_pipelined(cluster):
    host, port = cluster.bootstrap.split(":")

    async def main():
        conn = await BrokerConnection(host, int(port)).connect()
        try:
            v = conn.version_for(ApiKey.METADATA)
            assert REQUESTS[ApiKey.METADATA].versions[0] <= v <= REQUESTS[ApiKey.METADATA].versions[1]
            body = request(ApiKey.METADATA).cls(topics=None, allow_auto_topic_creation=False)
            answers = await asyncio.gather(*(conn.send(ApiKey.METADATA, body) for _ in range(50)))
            assert all(a.brokers for a in answers)
            assert conn.in_flight == 0
        finally:
            conn.close()
    _run(main())


def test_unreachable_broker_is_a_connection_error_at_once():
    async def main():
        with pytest.raises(KafkaConnectionError, match="Connection refused"):
            await BrokerConnection("127.0.0.1", 1, connect_timeout=600).connect()
    _run(main())  # within _run's bound, far below connect_timeout: it did not wait for it


def test_silent_broker_times_out_and_closes(make_broker):
    """A paused broker accepts the connection (its kernel does) and never answers ApiVersions."""
    b = make_broker()

    async def main():
        with b.paused():
            with pytest.raises(KafkaTimeoutError, match=r"in 0\.5s"):
                await BrokerConnection("127.0.0.1", b.port, connect_timeout=0.5).connect()
    _run(main())


def test_request_timeout_fails_the_request_and_the_connection(make_broker):
    b = make_broker()

    async def main():
        conn = await BrokerConnection("127.0.0.1", b.port, request_timeout=0.3).connect()
        with b.paused():
            with pytest.raises(KafkaTimeoutError, match=r"Metadata .* in 0\.3s"):
                await conn.send(ApiKey.METADATA, request(ApiKey.METADATA).cls(topics=[]))
            assert not conn.connected
            with pytest.raises(KafkaConnectionError):
                await conn.send(ApiKey.METADATA, request(ApiKey.METADATA).cls(topics=[]))
    _run(main())


def _answers_only_api_versions(server, max_api_versions):
    """Accept one client and answer its ApiVersions as an older broker does: newer versions
    are refused the way Kafka refuses them, UNSUPPORTED_VERSION in a v0 response listing what
    the broker speaks. A fake, because no broker we run is that old (minilog and Tansu both
    take ApiVersions v3)."""
    conn, _ = server.accept()
    frames = FrameReader()
    with conn:
        while True:
            data = conn.recv(65536)
            if not data:
                return
            for frame in frames.feed(data):
                header, _ = decode_request(frame)
                if header.api_key == ApiKey.API_VERSIONS:
                    Key = message_class(response(ApiKey.API_VERSIONS), "api_keys")
                    keys = [Key(api_key=k, min_version=s.versions[0], max_version=s.versions[1])
                            for k, s in REQUESTS.items()]
                    version, error = header.api_version, 0
                    for k in keys:
                        if k.api_key == ApiKey.API_VERSIONS:
                            k.max_version = max_api_versions
                    if version > max_api_versions:
                        version, error = 0, 35
                    body = response(ApiKey.API_VERSIONS).cls(error_code=error, api_keys=keys)
                    conn.sendall(b"".join(encode_response(
                        ApiKey.API_VERSIONS, version, header.correlation_id, body)))


def test_api_versions_falls_back_to_what_the_broker_lists():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        threading.Thread(target=_answers_only_api_versions, args=(server, 2),
                         daemon=True).start()

        async def main():
            conn = await BrokerConnection("127.0.0.1", server.getsockname()[1]).connect()
            try:
                assert conn.versions[ApiKey.API_VERSIONS] == (0, 2)
                assert conn.version_for(ApiKey.METADATA) == REQUESTS[ApiKey.METADATA].versions[1]
            finally:
                conn.close()
        _run(main())
