"""ApiVersions: the table of APIs and versions this listener of this broker implements.

Each listener advertises what it serves (`listener_apis`): a client listener does not list
Envelope, the controller's listener does, as Kafka's listener types decide."""
from minilog.connector.protocol import ApiKey, ErrorCode, response

from . import handles, listener_apis

_RESP = response(ApiKey.API_VERSIONS)


def _api_keys(apis: dict) -> list:
    return [_RESP.make("api_keys", api_key=int(k), min_version=e.versions[0],
                       max_version=e.versions[1]) for k, e in sorted(apis.items())]


def unsupported_version_response(apis: dict):
    """Answer to an ApiVersions version we don't know, in v0 format, so the client can retry;
    `apis`: what the listener serves."""
    return _RESP.cls(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=_api_keys(apis))


def _listener_name(broker, header) -> str:
    """The listener a request came through: a secured listener's session names it; requests
    without one came through the primary PLAINTEXT listener."""
    session = header.session
    return session.listener.name if session is not None else broker.config.listeners[0].name


@handles(ApiKey.API_VERSIONS, 0, 4)
async def api_versions(broker, header, req):
    apis = listener_apis(broker, _listener_name(broker, header))
    return _RESP.cls(error_code=0, api_keys=_api_keys(apis), throttle_time_ms=0)
