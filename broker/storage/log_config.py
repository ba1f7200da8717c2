"""A topic's storage settings: Kafka's topic config names, defaults and validation.

The broker merges its `log.*` defaults with each topic's overrides and builds one `LogConfig`;
the log reads only this object, never raw strings.
"""
import dataclasses
import re
from dataclasses import dataclass

_LONG_MAX = (1 << 63) - 1
_INT_MAX = (1 << 31) - 1
_DAY_MS = 24 * 3600 * 1000

# Kafka topic configs that belong to other layers (replication, compression, compaction):
# `LogConfig.from_kafka` accepts and ignores them, and rejects any other unknown name.
OTHER_TOPIC_CONFIGS = frozenset({
    "compression.type", "compression.gzip.level", "compression.lz4.level", "compression.zstd.level",
    "unclean.leader.election.enable", "delete.retention.ms",
    "min.compaction.lag.ms", "max.compaction.lag.ms", "min.cleanable.dirty.ratio",
    "file.delete.delay.ms", "preallocate", "segment.jitter.ms", "message.downconversion.enable",
    "message.format.version", "message.timestamp.difference.max.ms",
    "message.timestamp.before.max.ms", "message.timestamp.after.max.ms",
    "leader.replication.throttled.replicas", "follower.replication.throttled.replicas",
    "local.retention.ms", "local.retention.bytes", "remote.storage.enable",
})


_LONG_MIN, _INT_MIN = -(1 << 63), -(1 << 31)
_TYPE_RANGE = {"LONG": (_LONG_MIN, _LONG_MAX), "INT": (_INT_MIN, _INT_MAX)}
_INTEGER = re.compile(r"[+-]?[0-9]+")


def invalid(name: str, value: object, why: str) -> ValueError:
    """Kafka's `ConfigException(name, value, message)` text, which clients show as it is:
    `Invalid value abc for configuration retention.ms: Not a number of type LONG`."""
    return ValueError(f"Invalid value {value} for configuration {name}: {why}")


def _number(name: str, value: object, low: int, high: int | None = None,
            kind: str = "LONG") -> int:
    """A Kafka INT or LONG setting: parsed as `ConfigDef.parseType` does (trimmed decimal
    digits within the type's range), then checked as `Range.atLeast/between` does."""
    lo_type, hi_type = _TYPE_RANGE[kind]
    n = None
    if isinstance(value, int) and not isinstance(value, bool):
        n = value
    elif isinstance(value, str) and _INTEGER.fullmatch(value.strip()):
        n = int(value.strip())
    if n is None or not lo_type <= n <= hi_type:
        raise invalid(name, value, f"Not a number of type {kind}")
    if n < low:
        raise invalid(name, value, f"Value must be at least {low}")
    if high is not None and n > high:
        raise invalid(name, value, f"Value must be no more than {high}")
    return n


def _optional_long(name: str, value: object, low: int) -> int | None:
    """Kafka's "Long.MAX means never" settings become None."""
    if value is None:
        return None
    n = _number(name, value, low)
    return None if n == _LONG_MAX else n


def _choice(*allowed: str):
    """Kafka's `ValidString.in(...)`."""
    def parse(name: str, value: object) -> str:
        if value not in allowed:
            raise invalid(name, value, f"String must be one of: {', '.join(allowed)}")
        return value
    return parse


def _cleanup_policy(name: str, value: object) -> str:
    """Kafka's `ValidList.in("compact", "delete")`: each element checked, the first bad one
    named. An empty list is refused (Kafka 4's `cleanup.policy` needs at least one policy)."""
    parts = [p.strip() for p in str(value).split(",")]
    for p in parts:
        if p not in ("compact", "delete"):
            raise invalid(name, p, "String must be one of: compact, delete")
    return ",".join(sorted(set(parts)))


# Kafka name -> (field, parser). Types and bounds follow Kafka's LogConfig definitions.
_KAFKA = {
    "segment.bytes": ("segment_bytes", lambda n, v: _number(n, v, 14, kind="INT")),
    "segment.ms": ("segment_ms", lambda n, v: _number(n, v, 1)),
    "retention.ms": ("retention_ms", lambda n, v: _number(n, v, -1)),
    "retention.bytes": ("retention_bytes", lambda n, v: _number(n, v, _LONG_MIN)),
    "flush.messages": ("flush_messages", lambda n, v: _optional_long(n, v, 1)),
    "flush.ms": ("flush_ms", lambda n, v: _optional_long(n, v, 0)),
    "index.interval.bytes": ("index_interval_bytes", lambda n, v: _number(n, v, 0, kind="INT")),
    "segment.index.bytes": ("segment_index_bytes", lambda n, v: _number(n, v, 4, kind="INT")),
    "max.message.bytes": ("max_message_bytes", lambda n, v: _number(n, v, 0, kind="INT")),
    "message.timestamp.type": ("message_timestamp_type", _choice("CreateTime", "LogAppendTime")),
    "cleanup.policy": ("cleanup_policy", _cleanup_policy),
    "min.insync.replicas": ("min_insync_replicas", lambda n, v: _number(n, v, 1, kind="INT")),
}


def unknown_config(name: str) -> str:
    """Kafka's `LogConfig.validateNames` text (INVALID_CONFIG)."""
    return f"Unknown topic config name: {name}"


@dataclass(frozen=True)
class LogConfig:
    """Kafka's storage topic configs, snake_case, with Kafka's defaults. Validated on creation."""

    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * _DAY_MS
    retention_ms: int = 7 * _DAY_MS          # -1: keep forever
    retention_bytes: int = -1                # -1: no size limit
    flush_messages: int | None = None        # None: leave flushing to the OS (Kafka's Long.MAX)
    flush_ms: int | None = None
    index_interval_bytes: int = 4096
    segment_index_bytes: int = 10 * 1024 * 1024
    max_message_bytes: int = 1048588
    message_timestamp_type: str = "CreateTime"
    cleanup_policy: str = "delete"
    min_insync_replicas: int = 1             # not used by the log; carried for the partition

    def __post_init__(self):
        for name, (attr, parse) in _KAFKA.items():
            object.__setattr__(self, attr, parse(name, getattr(self, attr)))

    @classmethod
    def from_kafka(cls, configs, base=None):
        """Build from Kafka names ("segment.bytes": "1048576", ...), over `base` or the defaults.

        Raises ValueError naming the setting for a bad value or an unknown name; Kafka topic
        configs handled by other layers (OTHER_TOPIC_CONFIGS) are accepted and ignored here.
        """
        changes = {}
        for name, value in configs.items():
            if name in _KAFKA:
                attr, parse = _KAFKA[name]
                changes[attr] = parse(name, value)
            elif name not in OTHER_TOPIC_CONFIGS:
                raise ValueError(unknown_config(name))
        return dataclasses.replace(base or cls(), **changes)

    def to_kafka(self):
        """Kafka names -> string values (as DescribeConfigs reports them)."""
        out = {}
        for name, (attr, _) in _KAFKA.items():
            value = getattr(self, attr)
            out[name] = str(_LONG_MAX if value is None else value)
        return out
