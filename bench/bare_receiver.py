"""The least a validating broker written in Python must do per Produce request, and no more.

A second baseline for broker ingest, beside the file ceiling: one blocking thread that reads
each size-prefixed frame into a reused buffer (`recv_into`), checks the CRC32C of the batch in
it, appends the batch to a file with `os.write`, and answers with a canned Produce response
(only the correlation id changed). No protocol decoding, no offsets, no indexes, no event
loop. That is what any broker that validates before appending pays on this machine: minilog's
ingest against it is the cost of being a broker; the receiver against the file ceiling is the
cost of the network and the CRC.

Run by `produce.py` as `python -m bench.bare_receiver DIR BATCH_AT VERSION`: BATCH_AT is where
the one batch starts in every frame (the requests are all alike). It prints its port, serves
one connection, and exits when that connection closes.
"""
import contextlib
import os
import socket
import struct
import subprocess
import sys
from pathlib import Path

from minilog.connector._kernel import crc32c
from minilog.connector.batch import CRC_START
from minilog.connector.protocol import ApiKey, encode_response, response

_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_CRC_AT, _LENGTH_AT, _LOG_OVERHEAD = 17, 8, 12


def canned_response(version, topic):
    """A success Produce response frame (size prefix included) for partition 0 of `topic`."""
    schema = response(ApiKey.PRODUCE)
    part = schema.make("responses", "partition_responses", index=0, error_code=0,
                       base_offset=0, log_append_time_ms=-1, log_start_offset=0)
    body = schema.cls(responses=[schema.make("responses", name=topic,
                                             partition_responses=[part])], throttle_time_ms=0)
    return bytearray(b"".join(encode_response(ApiKey.PRODUCE, version, 0, body)))


def _read_into(sock, view):
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got:])
        if not n:
            raise EOFError
        got += n


def serve(conn, fd, batch_at, reply):
    """Receive, check, append and answer frames until the peer closes the connection."""
    head, buf = bytearray(4), bytearray(4 << 20)
    while True:
        try:
            _read_into(conn, memoryview(head))
            size = _INT32.unpack(head)[0]
            if size > len(buf):
                buf = bytearray(size)
            frame = memoryview(buf)[:size]
            _read_into(conn, frame)
        except EOFError:
            return
        end = batch_at + _INT32.unpack_from(frame, batch_at + _LENGTH_AT)[0] + _LOG_OVERHEAD
        batch = frame[batch_at:end]
        if crc32c(batch[CRC_START:]) != _UINT32.unpack_from(batch, _CRC_AT)[0]:
            raise SystemExit("bare receiver: CRC mismatch: BATCH_AT is wrong")
        os.write(fd, batch)
        reply[4:8] = frame[4:8]  # the correlation id
        conn.sendall(reply)


@contextlib.contextmanager
def running(directory, frame, batch):
    """Start a receiver for Produce frames like `frame` (size prefix included), carrying
    `batch`; yield its bootstrap address; always stop it."""
    batch_at = bytes(frame).find(bytes(batch)) - 4
    version = struct.unpack_from(">h", frame, 6)[0]
    if batch_at < 0:
        raise ValueError("the batch is not in the frame")
    proc = subprocess.Popen([sys.executable, "-m", "bench.bare_receiver", str(directory),
                             str(batch_at), str(version)], stdout=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[1])
    try:
        port = int(proc.stdout.readline())
        yield f"127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait(10)


def main(argv=None):
    directory, batch_at, version = (argv or sys.argv[1:])[:3]
    listener = socket.create_server(("127.0.0.1", 0))
    print(listener.getsockname()[1], flush=True)
    conn, _ = listener.accept()
    listener.close()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    fd = os.open(os.path.join(directory, "bare-receiver.log"),
                 os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        serve(conn, fd, int(batch_at), canned_response(int(version), "ingest"))
    finally:
        os.close(fd)
        conn.close()


if __name__ == "__main__":
    main()
