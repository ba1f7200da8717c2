"""ApiVersions: the table of APIs and versions this broker implements."""
from minilog.connector.protocol import ApiKey, ErrorCode, response

from . import handles, served

_RESP = response(ApiKey.API_VERSIONS)


def _api_keys(broker):
    return [_RESP.make("api_keys", api_key=int(k), min_version=e.versions[0], max_version=e.versions[1])
            for k, e in sorted(served(broker).items())]


def unsupported_version_response(broker):
    """Answer to an ApiVersions version we don't know, in v0 format, so the client can retry."""
    return _RESP.cls(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=_api_keys(broker))


@handles(ApiKey.API_VERSIONS, 0, 4)
async def api_versions(broker, header, req):
    return _RESP.cls(error_code=0, api_keys=_api_keys(broker), throttle_time_ms=0)
