"""A bare Kafka-protocol socket for tests that must send what no well-behaved client would."""
import collections
import socket
import time

from minilog.connector.protocol import (
    FrameReader,
    RequestHeader,
    decode_response,
    encode_request,
)


class RawConnection:
    """A bare socket speaking frames, to send what no well-behaved client would."""

    def __init__(self, bootstrap):
        host, port = bootstrap.split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=5)
        self.frames = FrameReader()
        self.pending = collections.deque()  # frames read but not yet returned
        self.corr = 0

    def send_raw(self, data):
        self.sock.sendall(data)

    def call(self, api_key, version, body):
        self.corr += 1
        self.send_raw(b"".join(encode_request(RequestHeader(api_key, version, self.corr, "raw"), body)))
        frame = self.recv_frame()
        return decode_response(api_key, version, frame)

    def recv_frame(self):
        """The next frame in order (one read may bring several: pipelined answers)."""
        while not self.pending:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("closed by broker")
            self.pending.extend(self.frames.feed(data))
        return self.pending.popleft()

    def is_closed_by_peer(self):
        try:
            return self.sock.recv(1) == b""
        except (TimeoutError, ConnectionResetError):
            return False

    def closed_by_peer_within(self, seconds):
        """Whether the broker closes this connection within `seconds` (checked every recv
        timeout): for requests whose only answer is a closed connection."""
        deadline = time.monotonic() + seconds
        while not self.is_closed_by_peer():
            if time.monotonic() >= deadline:
                return False
        return True

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
