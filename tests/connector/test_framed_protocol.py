"""FramedProtocol over a real socket pair: frames split right whatever the chunking, large
frames land in buffers that are reused only once nobody holds a view of them."""
import asyncio
import random
import socket
import ssl
import struct

import pytest
import trustme
from minilog.connector.framed_protocol import OWN_BUFFER_OVER, FramedProtocol
from minilog.connector.protocol import FrameTooLarge


class Collector(FramedProtocol):
    def __init__(self, max_size=64 << 20):
        super().__init__(max_size)
        self.frames, self.errors = [], []
        self.closed_with = []
        self.arrived = asyncio.Event()

    def frame_received(self, frame):
        self.frames.append(frame)
        self.arrived.set()

    def frame_too_large(self, error):
        self.errors.append(error)
        self.arrived.set()
        super().frame_too_large(error)

    def connection_closed(self, exc):
        self.closed_with.append(exc)
        self.arrived.set()


def frame(payload):
    return struct.pack(">i", len(payload)) + payload


async def connected(max_size=64 << 20):
    ours, theirs = socket.socketpair()
    loop = asyncio.get_running_loop()
    _, proto = await loop.connect_accepted_socket(lambda: Collector(max_size), ours)
    theirs.setblocking(False)
    return proto, theirs


async def wait_for(proto, predicate):
    async with asyncio.timeout(10):
        while not predicate():
            proto.arrived.clear()
            await proto.arrived.wait()


def test_frames_split_right_whatever_the_chunking():
    async def main():
        rng = random.Random(7)
        sizes = [0, 1, 10, 4000, OWN_BUFFER_OVER, OWN_BUFFER_OVER + 1, 100, 1 << 20, 3, 200_000,
                 50_000, 7] * 3
        payloads = [rng.randbytes(n) for n in sizes]
        stream = b"".join(frame(p) for p in payloads)
        proto, peer = await connected()
        loop = asyncio.get_running_loop()
        pos = 0
        while pos < len(stream):  # odd chunks: size prefixes and frames cut anywhere
            n = rng.choice([1, 3, 5, 700, 65_536, 300_000])
            await loop.sock_sendall(peer, stream[pos:pos + n])
            pos += n
        await wait_for(proto, lambda: len(proto.frames) == len(payloads))
        assert [bytes(f) for f in proto.frames] == payloads
        big = [f for f, p in zip(proto.frames, payloads) if len(p) > OWN_BUFFER_OVER]
        assert big and all(isinstance(f, memoryview) and not f.readonly for f in big)
        peer.close()
        await wait_for(proto, lambda: proto.closed_with)
        assert proto.closed_with == [None]
    asyncio.run(main())


def test_a_held_buffer_is_never_reused_a_released_one_is():
    async def main():
        proto, peer = await connected()
        loop = asyncio.get_running_loop()
        first, second, third = (bytes([i]) * 300_000 for i in (1, 2, 3))
        await loop.sock_sendall(peer, frame(first))
        await wait_for(proto, lambda: len(proto.frames) == 1)
        held = proto.frames.pop()[10:20]          # a view of the first frame's buffer, kept
        await loop.sock_sendall(peer, frame(second))
        await wait_for(proto, lambda: len(proto.frames) == 1)
        assert bytes(held) == first[10:20]        # not overwritten by the second frame
        owner = proto.frames[0].obj
        proto.frames.clear()                      # nobody holds the second frame any more
        await loop.sock_sendall(peer, frame(third))
        await wait_for(proto, lambda: len(proto.frames) == 1)
        assert proto.frames[0].obj is owner       # its buffer came back
        assert bytes(proto.frames[0]) == third
        assert bytes(held) == first[10:20]
        peer.close()
    asyncio.run(main())


def test_an_oversized_frame_stops_reading_after_the_frames_before_it():
    async def main():
        proto, peer = await connected(max_size=1000)
        loop = asyncio.get_running_loop()
        await loop.sock_sendall(peer, frame(b"ok") + struct.pack(">i", 5000) + b"x" * 100
                                + frame(b"after"))
        await wait_for(proto, lambda: proto.errors)
        assert [bytes(f) for f in proto.frames] == [b"ok"]
        assert isinstance(proto.errors[0], FrameTooLarge) and proto.errors[0].size == 5000
        await wait_for(proto, lambda: proto.closed_with)  # the default answer: close
        assert [bytes(f) for f in proto.frames] == [b"ok"]
        peer.close()
    asyncio.run(main())


@pytest.mark.parametrize("size", [-1, 1 << 30])
def test_negative_and_huge_sizes_are_refused(size):
    async def main():
        proto, peer = await connected(max_size=1 << 20)
        await asyncio.get_running_loop().sock_sendall(peer, struct.pack(">i", size))
        await wait_for(proto, lambda: proto.errors)
        assert proto.frames == []
        peer.close()
    asyncio.run(main())


def test_over_tls_a_frame_is_one_send_and_arrives_whole():
    """asyncio's TLS transport encrypts and sends on each call: a frame written as its pieces
    (header bytes, a large segment, tag bytes) must reach the socket as one send."""
    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_ctx)
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)

    async def main():
        loop = asyncio.get_running_loop()
        accepted = loop.create_future()

        def accept():
            peer = Collector()
            accepted.set_result(peer)
            return peer
        server = await loop.create_server(accept, "127.0.0.1", 0, ssl=server_ctx)
        port = server.sockets[0].getsockname()[1]
        transport, proto = await loop.create_connection(
            lambda: Collector(), "127.0.0.1", port, ssl=client_ctx, server_hostname="127.0.0.1")
        sends = []
        socket_transport = transport._ssl_protocol._transport  # the TCP transport under TLS
        plain_write = socket_transport.write
        socket_transport.write = lambda data: sends.append(len(data)) or plain_write(data)
        large = random.Random(3).randbytes(100_000)
        pieces = [struct.pack(">i", 4 + len(large) + 3), b"head", memoryview(large), b"end"]
        proto.write(pieces)
        assert len(sends) == 1
        async with asyncio.timeout(10):
            peer = await accepted
        await wait_for(peer, lambda: peer.frames)
        assert bytes(peer.frames[0]) == b"head" + large + b"end"
        transport.close()
        server.close()
    asyncio.run(main())
