"""`/metrics` over HTTP on the broker's own event loop (`metrics.listener=http://HOST:PORT`).

prometheus-client's own servers run in a thread; the collector reads partitions and groups that
the event loop changes, so the page is rendered on the loop instead, by this small server. It
answers GET /metrics (and `/`, a pointer to it) and nothing else, one request per connection.
"""
from __future__ import annotations

import asyncio
import ipaddress
import logging

from prometheus_client import CONTENT_TYPE_LATEST

from .metrics import BrokerMetrics

log = logging.getLogger("minilog.broker.metrics")

MAX_HEADER_BYTES = 16 * 1024
READ_TIMEOUT_S = 10.0


def _loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve anywhere
        return False


class MetricsServer:
    """The HTTP listener of one broker's metrics."""

    def __init__(self, metrics: BrokerMetrics, host: str, port: int) -> None:
        self.metrics, self.host, self.port = metrics, host, port
        self._server: asyncio.base_events.Server | None = None

    async def start(self) -> MetricsServer:
        self._server = await asyncio.start_server(self._serve, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("metrics at http://%s:%d/metrics", self.host, self.port)
        if not _loopback(self.host):
            log.warning("metrics.listener http://%s:%d serves /metrics beyond this machine, "
                        "without authentication: anyone who reaches it reads topic, group and "
                        "client names (listen on 127.0.0.1 unless that is intended)",
                        self.host, self.port)
        return self

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
            method, _, rest = head.split(b"\r\n", 1)[0].decode("latin-1").partition(" ")
            path = rest.split(" ", 1)[0].split("?", 1)[0]
            if method not in ("GET", "HEAD"):
                status, body, kind = "405 Method Not Allowed", b"GET only\n", "text/plain"
            elif path == "/metrics":
                status, body, kind = "200 OK", self.metrics.exposition(), CONTENT_TYPE_LATEST
            elif path == "/":
                status, body, kind = "200 OK", b'<a href="/metrics">/metrics</a>\n', "text/html"
            else:
                status, body, kind = "404 Not Found", b"see /metrics\n", "text/plain"
            writer.write(f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\n"
                         f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
                         .encode("latin-1") + (b"" if method == "HEAD" else body))
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError,
                ConnectionError, UnicodeDecodeError):
            pass
        except Exception:  # a collector's bug: reported, the broker goes on
            log.exception("serving metrics failed")
        finally:
            writer.close()
