"""Four bytes announcing a frame cost no memory (CVE-2022-34917): before authentication a frame
over `sasl.server.max.receive.size` closes the connection, and at any time a frame's buffer
grows with the bytes that arrive, not with the size announced. Measured as Kafka's users would
see it: the broker process's resident memory (/proc/PID/status), with raw sockets."""
import socket
import ssl
import struct
import time

import pytest
from security_tools import PASSWORD, USER, SecureBroker, librdkafka_settings, make_certificates
from tcp import unread_by_server
from waiting import wait_until

from minilog.connector.client import Producer

ANNOUNCED = 100 * 1024 * 1024  # what each connection claims it will send
BOUND = 48 * 1024 * 1024       # what all of them together may cost the broker, at most


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    certs = make_certificates(tmp_path_factory.mktemp("certs"))
    # a long authentication timeout: a closed connection here is the size cap's doing
    b = SecureBroker(certs, extra=["-o", "connections.authentication.timeout.ms=120000"]).start()
    with Producer(librdkafka_settings(b, "SASL_SSL", "SCRAM-SHA-256")) as p:  # warm: imports,
        p.send("warm", b"x").result(60)                                     # TLS, SCRAM
    yield b
    b.cleanup()


def _rss(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def _connect(broker, protocol: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", broker.ports[protocol]), timeout=5)
    if "SSL" in protocol:
        context = ssl.create_default_context(cafile=str(broker.certs.ca))
        sock = context.wrap_socket(sock, server_hostname="127.0.0.1")
    return sock


def _closed_by_broker(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except (ConnectionError, ssl.SSLError):
        return True


def _announce(sock: socket.socket) -> None:
    sock.sendall(struct.pack(">i", ANNOUNCED) + b"\0" * 5)


@pytest.mark.parametrize("protocol, count", [("SASL_PLAINTEXT", 5), ("SASL_SSL", 3)])
def test_a_large_frame_before_authentication_closes_the_connection_and_costs_nothing(
        broker, protocol, count):
    before = _rss(broker.proc.pid)
    socks = [_connect(broker, protocol) for _ in range(count)]
    try:
        for sock in socks:
            _announce(sock)
        deadline = time.monotonic() + 60
        for sock in socks:
            sock.settimeout(max(0.1, deadline - time.monotonic()))
            assert _closed_by_broker(sock), "the broker kept a connection announcing 100 MB"
        grown = _rss(broker.proc.pid) - before
        assert grown < BOUND, f"{count} connections announcing 100 MB cost {grown >> 20} MB"
    finally:
        for sock in socks:
            sock.close()
    with Producer(librdkafka_settings(broker, protocol, "PLAIN", USER, PASSWORD)) as p:
        assert p.send("after-big-frames", b"ok").result(60).offset >= 0


def test_after_authentication_a_buffer_grows_only_with_the_bytes_that_arrive(broker):
    """A PLAINTEXT connection is as authenticated as it gets: 100 MB is within
    socket.request.max.bytes, so the connections stay open, yet cost only what they sent."""
    port = broker.ports["PLAINTEXT"]
    before = _rss(broker.proc.pid)
    socks = [_connect(broker, "PLAINTEXT") for _ in range(5)]
    try:
        for sock in socks:
            sock.sendall(struct.pack(">i", ANNOUNCED) + b"\0" * (64 * 1024))
        wait_until(lambda: all(unread_by_server(port, s) == 0 for s in socks), 60,
                   "the broker to read what the connections sent")
        grown = _rss(broker.proc.pid) - before
        assert grown < BOUND, f"5 connections announcing 100 MB cost {grown >> 20} MB"
        socks[0].settimeout(0.2)
        assert not _closed_by_broker(socks[0])
    finally:
        for sock in socks:
            sock.close()
