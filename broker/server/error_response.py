"""The answer to a request whose handler failed: Kafka's `AbstractRequest.getErrorResponse`.

A bug in one handler must cost its client one request, not its connection (which a client
sees as a broker failure and retries into the same bug). Kafka answers such a request with
UNKNOWN_SERVER_ERROR in every error field its response has, per topic and partition where
the request named them; this builds that response from the request and the response schema,
so every API gets one without a hand-written function each.
"""
from minilog.connector.protocol import ApiKey, response

# Response arrays mirror a request array of the same name, or else the first of these the
# request has (Produce: responses <- topic_data, DescribeConfigs: results <- resources, ...).
_SOURCES = {
    "responses": ("topic_data", "topics", "resources", "topic_names"),
    "partition_responses": ("partition_data",),
    "results": ("resources", "groups_names", "topics"),
    "coordinators": ("coordinator_keys",),
    "partitions": ("partition_indexes",),
}
_SCALARS = {"partition_index": ("partition", "index")}


def error_response(api_key, version, request, code, message=None):
    """The response to `request` with `code` (and `message`) in every error field; None when
    the request gets no response, as a failed acks=0 produce (the connection must close)."""
    if api_key == ApiKey.PRODUCE and request.acks == 0:
        return None
    return _mirror(response(api_key), version, request, code, message)


def _mirror(schema, version, source, code, message):
    values = {}
    for f in schema.fields:
        if f.type == "string" and f.default_value() is None and not _in(f.nullable, version):
            values[f.name] = ""  # null only from the version that allows it
        if f.name == "error_code":
            values[f.name] = code
        elif f.name == "error_message":
            values[f.name] = message if message is not None or _in(f.nullable, version) else ""
        elif f.type == "[]" and f.struct is not None:
            items = _source_items(source, f.name)
            if items is not None:
                values[f.name] = [_mirror(f.struct, version, item, code, message)
                                  for item in items]
        elif f.struct is None and not f.type.startswith("["):
            value = _source_scalar(source, f.name)
            if value is not None:
                values[f.name] = value
    return schema.cls(**values)


def _source_items(source, name):
    for candidate in (name, *_SOURCES.get(name, ())):
        items = getattr(source, candidate, None)
        if isinstance(items, list):
            return items
    return None


def _source_scalar(source, name):
    if not hasattr(source, "_fields"):  # an item of a plain list (group id, partition index)
        return source if name in ("group_id", "name", "key", "partition_index") else None
    for candidate in (name, *_SCALARS.get(name, ())):
        value = getattr(source, candidate, None)
        if value is not None and not isinstance(value, list):
            return value
    return None


def _in(versions, version):
    return versions is not None and versions[0] <= version <= versions[1]
