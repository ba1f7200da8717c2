"""DescribeConfigs, IncrementalAlterConfigs and AlterConfigs for topics (type 2) and brokers
(type 4: one broker by its node id, or every broker's default by the empty name; the dynamic
ones are `broker_configs.py`'s)."""
from minilog.connector.protocol import ApiKey, ErrorCode, response

from ...metadata.broker_configs import CLUSTER_DEFAULT, DYNAMIC, DYNAMIC_DEFAULT_BROKER_CONFIG, \
    BrokerConfigError, validate
from ...security.access import DESCRIBE_CONFIGS, config_resource_refusal
from ..password_configs import is_sensitive
from . import handles

_DESCRIBE = response(ApiKey.DESCRIBE_CONFIGS)
_ALTER = response(ApiKey.INCREMENTAL_ALTER_CONFIGS)
_LEGACY_ALTER = response(ApiKey.ALTER_CONFIGS)
TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
# Kafka's config_source values
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5


def _config_entry(name, value, source, read_only=False):
    """One config as DescribeConfigs shows it: a password-type setting with a null value and
    is_sensitive, whoever asks (Kafka's answer, super users included)."""
    sensitive = is_sensitive(name)
    shown = None if value is None or sensitive else str(value)
    return _DESCRIBE.make("results", "configs", name=name, value=shown,
                          read_only=read_only, config_source=source, is_sensitive=sensitive,
                          is_default=source == DEFAULT_CONFIG,  # v0's form of config_source
                          synonyms=[], config_type=PASSWORD if sensitive else _type_of(value))


PASSWORD = 9  # Kafka's ConfigType of a password


def _type_of(value):
    # Kafka ConfigType: 1 BOOLEAN, 2 STRING, 3 INT, 5 LONG
    if isinstance(value, bool):
        return 1
    if isinstance(value, int):
        return 5
    return 2


def _describe_one(broker, header, r):
    keys = set(r.configuration_keys) if r.configuration_keys is not None else None
    refused = config_resource_refusal(broker, header, DESCRIBE_CONFIGS, r.resource_type,
                                      r.resource_name)
    if refused:
        return _DESCRIBE.make("results", error_code=refused, error_message=None,
                              resource_type=r.resource_type, resource_name=r.resource_name)
    if r.resource_type == TOPIC:
        if r.resource_name not in broker.metadata.topics:
            return _DESCRIBE.make("results", error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                  error_message=f"topic {r.resource_name} does not exist",
                                  resource_type=r.resource_type, resource_name=r.resource_name)
        entries = broker.topics.effective_configs(r.resource_name)
    elif r.resource_type == BROKER:
        if r.resource_name not in (CLUSTER_DEFAULT, str(broker.config.node_id)):
            return _DESCRIBE.make("results", error_code=ErrorCode.INVALID_REQUEST,
                                  error_message=f"this is broker {broker.config.node_id}",
                                  resource_type=r.resource_type, resource_name=r.resource_name)
        entries = _broker_entries(broker, r.resource_name)
    else:
        return _DESCRIBE.make("results", error_code=ErrorCode.INVALID_REQUEST,
                              error_message=f"unsupported resource type {r.resource_type}",
                              resource_type=r.resource_type, resource_name=r.resource_name)
    configs = [_config_entry(k, v, src, read_only=r.resource_type == BROKER and k not in DYNAMIC)
               for k, (v, src) in sorted(entries.items()) if keys is None or k in keys]
    return _DESCRIBE.make("results", error_code=0, error_message=None,
                          resource_type=r.resource_type, resource_name=r.resource_name,
                          configs=configs)


def _broker_entries(broker, name):
    """{key: (value, source)}: the cluster-wide dynamic defaults for the empty name, else this
    broker's effective settings, each with where its value comes from."""
    dynamic = broker.dynamic_configs
    if name == CLUSTER_DEFAULT:
        default, _ = dynamic.layers()
        return {k: (v, DYNAMIC_DEFAULT_BROKER_CONFIG) for k, v in default.items()}
    return {k: (v, dynamic.source(k) or STATIC_BROKER_CONFIG)
            for k, v in broker.config.values.items() if v is not None}


@handles(ApiKey.DESCRIBE_CONFIGS, 0, 4)
async def describe_configs(broker, header, req):
    return _DESCRIBE.cls(throttle_time_ms=0, results=[_describe_one(broker, header, r)
                                                  for r in req.resources])


def _apply(current, effective, ops):
    """Apply SET/DELETE/APPEND/SUBTRACT to a topic's overrides; list operations start from
    the effective value (a default included), as in Kafka."""
    new = dict(current)
    for c in ops:
        if c.config_operation == SET:
            new[c.name] = c.value
        elif c.config_operation == DELETE:
            new.pop(c.name, None)
        elif c.config_operation in (APPEND, SUBTRACT):
            base = new.get(c.name, effective.get(c.name, ("", 0))[0])
            items = [x for x in str(base or "").split(",") if x]
            values = [x for x in (c.value or "").split(",") if x]
            if c.config_operation == APPEND:
                items += [v for v in values if v not in items]
            else:
                items = [x for x in items if x not in values]
            new[c.name] = ",".join(items)
        else:
            raise ValueError(f"unknown config operation {c.config_operation}")
    return new


def _alter_topic(broker, r, new_overrides, validate_only):
    """(code, message) of changing one resource's configs to `new_overrides(current, effective)`
    (which raises ValueError for a bad operation)."""
    if r.resource_type == BROKER:
        return _alter_broker(broker, r, new_overrides, validate_only)
    if r.resource_type != TOPIC:
        return ErrorCode.INVALID_REQUEST, f"unsupported resource type {r.resource_type}"
    if r.resource_name not in broker.metadata.topics:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {r.resource_name} does not exist"
    try:
        new = new_overrides(broker.metadata.topics[r.resource_name].configs,
                            broker.topics.effective_configs(r.resource_name))
    except ValueError as e:
        return ErrorCode.INVALID_REQUEST, str(e)
    return broker.topics.alter_configs(r.resource_name, new, validate_only=validate_only)


def _alter_broker(broker, r, new_overrides, validate_only):
    """(code, message) of changing the dynamic settings of one broker (its id) or of every
    broker (the empty name); answered once the change is committed (the router waits)."""
    name = r.resource_name
    if name != CLUSTER_DEFAULT and not name.isdigit():
        return ErrorCode.INVALID_REQUEST, f"{name!r} is not a broker id"
    store = broker.dynamic_configs.store
    effective = {k: (v, None) for k, v in broker.config.values.items()}
    try:
        new = validate(new_overrides(store.working().get(name, {}), effective))
    except BrokerConfigError as e:
        return e.code, str(e)
    except ValueError as e:
        return ErrorCode.INVALID_REQUEST, str(e)
    if not validate_only:
        store.write(name, new)
    return 0, None


@handles(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1)
async def incremental_alter_configs(broker, header, req):
    results = []
    for r in req.resources:
        code, message = _alter_topic(
            broker, r, lambda current, effective, r=r: _apply(current, effective, r.configs),
            req.validate_only)
        results.append(_ALTER.make("responses", error_code=code, error_message=message,
                                   resource_type=r.resource_type, resource_name=r.resource_name))
    return _ALTER.cls(throttle_time_ms=0, responses=results)


@handles(ApiKey.ALTER_CONFIGS, 0, 2)
async def alter_configs(broker, header, req):
    """The legacy AlterConfigs (still served by Kafka 4): the request's configs replace all of
    the resource's own settings; those it leaves out return to their defaults."""
    results = []
    for r in req.resources:
        code, message = _alter_topic(
            broker, r, lambda current, effective, r=r: {c.name: c.value for c in r.configs},
            req.validate_only)
        results.append(_LEGACY_ALTER.make("responses", error_code=code, error_message=message,
                                          resource_type=r.resource_type,
                                          resource_name=r.resource_name))
    return _LEGACY_ALTER.cls(throttle_time_ms=0, responses=results)
