"""Envelope (KIP-590): a request forwarded to the controller with the client's identity.

A broker that is not the active controller wraps a client's admin request, header included,
in an EnvelopeRequest carrying the client's principal (Kafka's DefaultPrincipalData: type and
name) and address, and sends it on the controller listener. The controller checks that the
forwarding broker may CLUSTER_ACTION, then handles the inner request as if the client had sent
it there: its ACL checks see the client's principal, not the broker's. The inner response
travels back, header included, in the EnvelopeResponse. Bytes in, bytes out: no I/O here.
"""
import ipaddress

from minilog.connector.protocol import (
    ApiKey,
    CorruptMessage,
    decode_response,
    encode_request,
    request,
)
from minilog.connector.protocol import primitives as p
from minilog.connector.protocol.framing import RequestHeader

_ENVELOPE = request(ApiKey.ENVELOPE)
_PRINCIPAL_VERSION = b"\x00\x00"  # DefaultPrincipalData v0, a flexible message


def serialize_principal(principal: str) -> bytes:
    """`User:alice` as Kafka's DefaultKafkaPrincipalBuilder serializes it."""
    kind, _, name = principal.partition(":")
    return b"".join([_PRINCIPAL_VERSION, p.pack_string(kind, True), p.pack_string(name, True),
                     b"\x00",   # token_authenticated: false
                     b"\x00"])  # no tagged fields


def deserialize_principal(data: bytes) -> str:
    """The principal `serialize_principal` wrote (or a Kafka broker); CorruptMessage if not."""
    r = p.Reader(memoryview(data))
    try:
        if r.int16() != 0:
            raise CorruptMessage("unknown DefaultPrincipalData version")
        kind, name = r.string(True, False), r.string(True, False)
    except (IndexError, ValueError, UnicodeDecodeError, CorruptMessage) as e:
        raise CorruptMessage(f"unreadable principal: {e}") from None
    return f"{kind}:{name}"


def address_bytes(host: str | None) -> bytes:
    """The client's IP address as 4 or 16 bytes (empty when unknown)."""
    try:
        return ipaddress.ip_address(host).packed if host else b""
    except ValueError:
        return b""


def address_text(data: bytes) -> str | None:
    return str(ipaddress.ip_address(bytes(data))) if len(data) in (4, 16) else None


def wrap(key: int, version: int, client_id: str | None, body, principal: str,
         client_host: str | None):
    """The EnvelopeRequest carrying `body` (a `key` request of `version`)."""
    inner = b"".join(encode_request(RequestHeader(key, version, 0, client_id), body))[4:]
    return _ENVELOPE.cls(request_data=inner, request_principal=serialize_principal(principal),
                         client_host_address=address_bytes(client_host))


def unwrap_response(key: int, version: int, envelope_response):
    """The inner response of an EnvelopeResponse that has one."""
    return decode_response(key, version, memoryview(envelope_response.response_data))
