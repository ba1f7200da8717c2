"""A bare Kafka connection for pre-encoded requests: the broker's cost without a client's.

Benchmarks of the broker itself (ingest against the file ceiling, fetch latency along a long log)
must not measure a client library. `RawConnection` speaks minilog's sans-IO codec over a
blocking socket: a request is encoded once, then sent again and again with only its
correlation id changed, `in_flight` at a time, so the driver costs a few microseconds per
request whatever its size.
"""
import collections
import socket
import struct
import time

from minilog.connector import records
from minilog.connector.protocol import (
    ApiKey,
    RequestHeader,
    decode_response,
    encode_request,
    request,
)

_PRODUCE = request(ApiKey.PRODUCE)
_FETCH = request(ApiKey.FETCH)
_CORR = struct.Struct(">i")
_CORR_AT = 8  # size (4) + api key (2) + version (2)
MAX_BATCH = 1048588 - 12  # Kafka's default max.message.bytes, less the log overhead
FETCH_VERSION_WITHOUT_TOPIC_IDS = 12


def _child(schema, *path):
    for name in path:
        schema = next(f.struct for f in schema.fields if f.name == name)
    return schema.cls


def make_batch(value_size, batch_bytes):
    """One v2 record batch of `value_size`-byte values, as large as fits in `batch_bytes`.

    Returns (batch bytes, record count). Values are incompressible-looking but fixed, keys null.
    """
    value = (bytes(range(256)) * (value_size // 256 + 1))[:value_size]
    ts = int(time.time() * 1000)
    n = max(1, batch_bytes // (value_size + 12))
    while True:
        data = records.encode_batch([(ts, None, value, ())] * n)
        if len(data) <= batch_bytes or n == 1:
            return data, n
        n = max(1, int(n * batch_bytes / len(data)) - 1)


def encode_frame(api_key, version, body):
    """The whole frame of one request (correlation id 0, size prefix included)."""
    return b"".join(encode_request(RequestHeader(api_key, version, 0, "bench"), body))


def produce_frame(version, topic, partitions, batch, acks=1):
    """A Produce request frame carrying `batch` once for each partition in `partitions`."""
    T, P = _child(_PRODUCE, "topic_data"), _child(_PRODUCE, "topic_data", "partition_data")
    body = _PRODUCE.cls(transactional_id=None, acks=acks, timeout_ms=30000, topic_data=[
        T(name=topic, partition_data=[P(index=p, records=batch) for p in partitions])])
    return encode_frame(ApiKey.PRODUCE, version, body)


class RawConnection:
    """One socket to a broker; `versions` holds the broker's max version per API key."""

    def __init__(self, bootstrap, timeout=30.0, handshake=True):
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self._buf = bytearray(4 << 20)  # reused: no fresh pages to fault in per response
        self.corr = 0
        self.versions = {}  # without the handshake: our codec's newest versions
        if handshake:
            resp = self.call(ApiKey.API_VERSIONS, 0, request(ApiKey.API_VERSIONS).cls())
            self.versions = {k.api_key: k.max_version for k in resp.api_keys}

    def version(self, api_key, cap=None):
        ours = request(api_key).versions[1]
        return min(ours, self.versions.get(api_key, ours), cap if cap is not None else ours)

    def encode(self, api_key, version, body):
        """The whole frame of one request (correlation id 0), to send with `send_frame`."""
        return encode_frame(api_key, version, body)

    def send_frame(self, frame):
        """Send a frame from `encode` under the next correlation id; return that id."""
        self.corr += 1
        self.sock.sendall(frame[:_CORR_AT] + _CORR.pack(self.corr))
        self.sock.sendall(memoryview(frame)[_CORR_AT + 4:])
        return self.corr

    def next_frame(self):
        """The next response frame, read straight into a reused buffer (responses come back in
        request order). A view, valid until the next call: decode it before reading on."""
        size = _CORR.unpack(self._read_exactly(4))[0]
        return self._read_exactly(size)

    def _read_exactly(self, n):
        if len(self._buf) < n:
            self._buf = bytearray(max(n, 2 * len(self._buf)))
        view, got = memoryview(self._buf), 0
        while got < n:
            k = self.sock.recv_into(view[got:n])
            if not k:
                raise ConnectionError("connection closed by the broker")
            got += k
        return view[:n]

    def call(self, api_key, version, body):
        self.send_frame(self.encode(api_key, version, body))
        return decode_response(api_key, version, self.next_frame())

    def close(self):
        self.sock.close()

    # ---- produce -------------------------------------------------------------------------
    def produce_frame(self, topic, partitions, batch, acks=1):
        """A Produce request carrying `batch` once for each partition in `partitions`."""
        version = self.version(ApiKey.PRODUCE)
        return version, produce_frame(version, topic, partitions, batch, acks)

    def pipeline_produce(self, frame, version, count, in_flight=5):
        """Send `frame` `count` times, `in_flight` outstanding; raise on any partition error.

        Returns each request's latency (seconds from its send to its response).
        """
        sent_at, latencies = collections.deque(), []
        sent = 0
        while len(latencies) < count:
            while sent < count and sent - len(latencies) < in_flight:
                self.send_frame(frame)
                sent_at.append(time.perf_counter())
                sent += 1
            resp = decode_response(ApiKey.PRODUCE, version, self.next_frame())
            latencies.append(time.perf_counter() - sent_at.popleft())
            for t in resp.responses:
                for p in t.partition_responses:
                    if p.error_code:
                        raise RuntimeError(f"produce to {t.name}-{p.index} failed: "
                                           f"error {p.error_code} {p.error_message or ''}")
        return latencies

    # ---- fetch ---------------------------------------------------------------------------
    def fetch_frame(self, topic, partition, offset, max_bytes=1 << 20):
        version = self.version(ApiKey.FETCH, FETCH_VERSION_WITHOUT_TOPIC_IDS)
        T, P = _child(_FETCH, "topics"), _child(_FETCH, "topics", "partitions")
        body = _FETCH.cls(
            replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=max_bytes, isolation_level=0,
            session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[],
            topics=[T(topic=topic, partitions=[P(
                partition=partition, fetch_offset=offset, partition_max_bytes=max_bytes,
                current_leader_epoch=-1, log_start_offset=-1)])])
        return version, self.encode(ApiKey.FETCH, version, body)

    def fetch(self, topic, partition, offset, max_bytes=1 << 20):
        """(seconds until the whole answer arrived, records bytes) of one Fetch."""
        version, frame = self.fetch_frame(topic, partition, offset, max_bytes)
        t0 = time.perf_counter()
        self.send_frame(frame)
        raw = self.next_frame()
        elapsed = time.perf_counter() - t0
        resp = decode_response(ApiKey.FETCH, version, raw)
        p = resp.responses[0].partitions[0]
        if p.error_code:
            raise RuntimeError(f"fetch {topic}-{partition}@{offset} failed: error {p.error_code}")
        return elapsed, p.records or b""

    def end_offset(self, topic, partition):
        """The log end offset (ListOffsets latest)."""
        schema = request(ApiKey.LIST_OFFSETS)
        version = min(self.version(ApiKey.LIST_OFFSETS), 5)
        T, P = _child(schema, "topics"), _child(schema, "topics", "partitions")
        body = schema.cls(replica_id=-1, isolation_level=0, topics=[T(name=topic, partitions=[
            P(partition_index=partition, current_leader_epoch=-1, timestamp=-1)])])
        resp = self.call(ApiKey.LIST_OFFSETS, version, body)
        return resp.topics[0].partitions[0].offset
