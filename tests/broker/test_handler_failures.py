"""A handler that raises answers its request with UNKNOWN_SERVER_ERROR; the connection lives on.

The broker runs as a real process whose chosen handlers are replaced, before it starts, by one
that raises: the bug a review cannot rule out in any handler.
"""
import struct
import sys
from pathlib import Path

import pytest
from brokers import MinilogBroker
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from minilog.broker.server.error_response import error_response
from minilog.broker.server.handlers import HANDLERS
from minilog.connector.protocol import (
    ApiKey,
    ErrorCode,
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    request,
)
from wire import RawConnection

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "connector"))
from test_protocol_captures import CAPTURES, _frames  # noqa: E402

_LAUNCH = """
import sys
from minilog.broker.server.handlers import HANDLERS, Entry

async def broken(broker, header, req):
    raise RuntimeError("injected handler failure")

for key in sys.argv[1].split(","):
    HANDLERS[int(key)] = Entry(broken, HANDLERS[int(key)].versions)
from minilog.broker.server.main import main
sys.exit(main(sys.argv[2:]))
"""
BROKEN = (ApiKey.LIST_OFFSETS, ApiKey.DESCRIBE_GROUPS, ApiKey.PRODUCE)


class BrokenHandlersBroker(MinilogBroker):
    def argv(self):
        real = super().argv()
        return [sys.executable, "-c", _LAUNCH, ",".join(str(int(k)) for k in BROKEN), *real[3:]]


@pytest.fixture(scope="module")
def broken():
    b = BrokenHandlersBroker().start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("t", 2, 1)])["t"].result(15)
    yield b
    b.cleanup()


def _produce(version, acks):
    req = request(ApiKey.PRODUCE)
    return req.cls(acks=acks, timeout_ms=5000, topic_data=[req.make(
        "topic_data", name="t", partition_data=[
            req.make("topic_data", "partition_data", index=i, records=b"") for i in (0, 1)])])


def test_each_partition_of_a_failed_request_gets_unknown_server_error(broken):
    conn = RawConnection(broken.bootstrap)
    try:
        for version in (3, 9):
            resp = conn.call(ApiKey.PRODUCE, version, _produce(version, acks=1))
            parts = resp.responses[0].partition_responses
            assert resp.responses[0].name == "t"
            assert [(p.index, p.error_code) for p in parts] == \
                [(0, ErrorCode.UNKNOWN_SERVER_ERROR), (1, ErrorCode.UNKNOWN_SERVER_ERROR)]
        req = request(ApiKey.DESCRIBE_GROUPS)
        resp = conn.call(ApiKey.DESCRIBE_GROUPS, 5, req.cls(groups=["g1", "g2"]))
        assert [(g.group_id, g.error_code) for g in resp.groups] == \
            [("g1", ErrorCode.UNKNOWN_SERVER_ERROR), ("g2", ErrorCode.UNKNOWN_SERVER_ERROR)]
        resp = conn.call(ApiKey.API_VERSIONS, 3, request(ApiKey.API_VERSIONS).cls(
            client_software_name="t", client_software_version="1"))
        assert resp.error_code == 0  # the same connection still serves
    finally:
        conn.close()
    assert broken.log().count("injected handler failure") == 3  # logged once per request


def test_a_failed_acks0_produce_closes_the_connection(broken):
    conn = RawConnection(broken.bootstrap)
    try:
        header = RequestHeader(ApiKey.PRODUCE, 9, 1, "raw")
        conn.send_raw(b"".join(encode_request(header, _produce(9, acks=0))))
        assert conn.closed_by_peer_within(15), "the connection stayed open"
    finally:
        conn.close()


def test_confluent_admin_sees_the_error_and_goes_on(broken):
    admin = AdminClient({"bootstrap.servers": broken.bootstrap})
    tp = TopicPartition("t", 0)
    with pytest.raises(Exception) as e:
        admin.list_offsets({tp: OffsetSpec.latest()})[tp].result(30)
    assert "UNKNOWN" in str(e.value)
    assert "t" in admin.list_topics(timeout=15).topics  # the broker serves on


def _error_codes(obj, version):
    """Every error_code a decoded response carries in this version, depth first."""
    codes = []
    for f in obj._schema.fields:
        if not f.versions[0] <= version <= f.versions[1]:
            continue
        value = getattr(obj, f.name)
        if f.name == "error_code":
            codes.append(value)
        for item in value if isinstance(value, list) else [value]:
            if hasattr(item, "_fields"):
                codes += _error_codes(item, version)
    return codes


@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python", "aiokafka", "kafkajs"])
def test_every_captured_client_request_has_an_error_response(client):
    """What real clients send, answered with an error: it encodes, and every error field says so."""
    seen = 0
    for frame in _frames(CAPTURES / f"{client}.bin"):
        if struct.unpack_from(">h", frame, 4)[0] not in HANDLERS:
            continue
        header, body = decode_request(frame[4:])
        resp = error_response(header.api_key, header.api_version, body,
                              ErrorCode.UNKNOWN_SERVER_ERROR)
        if resp is None:
            assert header.api_key == ApiKey.PRODUCE and body.acks == 0
            continue
        encoded = b"".join(encode_response(header.api_key, header.api_version, 7, resp))
        decoded = decode_response(header.api_key, header.api_version, encoded[4:])
        codes = _error_codes(decoded, header.api_version)
        assert set(codes) <= {ErrorCode.UNKNOWN_SERVER_ERROR}, (header.api_key, decoded)
        # Only a Metadata request for all topics has no field to carry an error (as in Kafka).
        assert codes or header.api_key == ApiKey.METADATA and not body.topics, \
            (ApiKey(header.api_key).name, header.api_version, decoded)
        seen += 1
    assert seen > 5
