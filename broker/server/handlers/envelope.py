"""Envelope (KIP-590) on the controller: a broker's forwarded client request, answered as if the
client had sent it here. The forwarding broker needs CLUSTER_ACTION on the cluster (checked
before this runs, `access.cluster_refusal`); the inner request is then authorized with the
client's principal and address carried in the envelope."""
import asyncio

from minilog.connector.protocol import ApiKey, CorruptMessage, ErrorCode, response

from ..controller_router import FORWARDED
from ..envelope import address_text, deserialize_principal
from . import handles

_ENVELOPE = response(ApiKey.ENVELOPE)


def _error(code):
    return _ENVELOPE.cls(response_data=None, error_code=code)


@handles(ApiKey.ENVELOPE, 0, 0)
async def envelope(broker, header, req):
    if broker.controller is None or not broker.controller.active:
        return _error(ErrorCode.NOT_CONTROLLER)
    from ..secure_connection import Session  # imported here: it imports the server
    from ..socket_server import _CloseConnection
    try:
        principal = deserialize_principal(req.request_principal or b"")
        frame = memoryview(bytes(req.request_data))
        if len(frame) < 2 or int.from_bytes(frame[:2], "big", signed=True) not in FORWARDED:
            return _error(ErrorCode.INVALID_REQUEST)  # only what brokers forward
    except CorruptMessage:
        return _error(ErrorCode.INVALID_REQUEST)
    session = Session(header.session.listener if header.session is not None
                      else broker.config.listeners[0], principal)
    peer = (address_text(req.client_host_address), 0)
    try:
        chunks = await broker.servers[0].handle(frame, peer, None, session, forwarded=True)
        if isinstance(chunks, asyncio.Future):  # a Pending answer
            chunks = await chunks
    except _CloseConnection:  # the inner request did not decode
        return _error(ErrorCode.INVALID_REQUEST)
    if chunks is None:
        return _error(ErrorCode.UNKNOWN_SERVER_ERROR)
    return _ENVELOPE.cls(response_data=b"".join(chunks)[4:], error_code=0)
