"""Every request frame that real clients sent decodes, and re-encodes to the same bytes."""
import struct
from pathlib import Path

import pytest
from minilog.connector.protocol import ApiKey, decode_request, encode_request

CAPTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kafka-captures"
# GetTelemetrySubscriptions (71) is optional for clients; brokers answer it as unsupported.
UNSUPPORTED = {71}


def _frames(path):
    data = path.read_bytes()
    pos = 0
    while pos < len(data):
        (n,) = struct.unpack_from(">i", data, pos)
        yield data[pos + 4:pos + 4 + n]
        pos += 4 + n


@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python", "aiokafka", "kafkajs"])
def test_captured_requests_round_trip(client):
    seen = set()
    for frame in _frames(CAPTURES / f"{client}.bin"):
        (api_key, version) = struct.unpack_from(">hh", frame, 4)
        if api_key in UNSUPPORTED:
            continue
        header, body = decode_request(frame[4:])
        assert header.api_key == api_key and header.api_version == version
        assert b"".join(encode_request(header, body)) == frame, (ApiKey(api_key).name, version)
        seen.add(ApiKey(api_key))
    assert {ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.METADATA, ApiKey.JOIN_GROUP} <= seen
