"""Dynamic broker configs: what AlterConfigs and IncrementalAlterConfigs change on a BROKER
resource, per broker (its node id as the name) or for every broker (the cluster-wide default,
an empty name), as Kafka's `kafka-configs.sh --entity-type brokers` does.

Only the settings Kafka lets change at run time are accepted (`DYNAMIC`); any other broker
setting is read-only (INVALID_REQUEST, "cannot be updated dynamically", Kafka's answer), an
unknown name or a bad value INVALID_CONFIG. They are `broker_config` records of the
metadata (Kafka's ConfigRecord with resource type BROKER) and a section of its snapshots,
and reach the broker as a metadata publisher. Every broker
overlays them on its static configuration as Kafka ranks them (per broker over cluster default
over static), so the topic-level defaults they feed (`log.retention.ms`...) reach every partition without an
override of its own. Settings minilog has no use for (thread counts, Kerberos) are kept and
shown but change nothing.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..config.broker_keys import BROKER_KEYS, ConfigError, coerce
from . import records as metadata_records
from .delta import MetadataDelta
from .image import MetadataImage

CLUSTER_DEFAULT = ""  # the resource name of the cluster-wide default

# Kafka's config_source values of DescribeConfigs
DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 2, 3

# What Kafka lets change at run time (DynamicBrokerConfig), with the type of those minilog
# does not otherwise know. Those of BROKER_KEYS take effect; the others are accepted and shown.
DYNAMIC: dict[str, Any] = {
    **dict.fromkeys((
        "log.retention.ms", "log.retention.bytes", "log.segment.bytes", "log.roll.ms",
        "log.cleanup.policy", "log.flush.interval.messages", "log.flush.interval.ms",
        "log.index.interval.bytes", "log.message.timestamp.type", "message.max.bytes",
        "min.insync.replicas", "unclean.leader.election.enable", "log.cleaner.backoff.ms"),
        None),
    "log.cleaner.threads": int, "log.cleaner.dedupe.buffer.size": int,
    "log.cleaner.io.buffer.size": int, "log.cleaner.io.max.bytes.per.second": float,
    "log.cleaner.min.cleanable.ratio": float, "log.cleaner.delete.retention.ms": int,
    "log.cleaner.min.compaction.lag.ms": int, "log.cleaner.max.compaction.lag.ms": int,
    "compression.type": str, "log.preallocate": bool, "log.roll.jitter.ms": int,
    "background.threads": int, "num.io.threads": int, "num.network.threads": int,
    "num.replica.fetchers": int, "num.recovery.threads.per.data.dir": int,
    "max.connections": int, "max.connections.per.ip": int,
    "sasl.kerberos.min.time.before.relogin": int, "sasl.kerberos.kinit.cmd": str,
    "sasl.kerberos.ticket.renew.window.factor": float,
    "sasl.kerberos.ticket.renew.jitter": float,
}


class BrokerConfigError(ValueError):
    """(error code, message) of a refused change."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


Configs = Mapping[str, Any]


def validate(configs: Configs) -> dict[str, Any]:
    """`configs` ({name: text}) with each value typed; raises BrokerConfigError."""
    from minilog.connector.protocol import ErrorCode
    read_only = sorted(k for k in configs if k not in DYNAMIC and k in BROKER_KEYS)
    if read_only:
        raise BrokerConfigError(ErrorCode.INVALID_REQUEST,
                                f"cannot be updated dynamically: {', '.join(read_only)}")
    unknown = sorted(k for k in configs if k not in DYNAMIC)
    if unknown:
        raise BrokerConfigError(ErrorCode.INVALID_CONFIG,
                                f"unknown broker config {unknown[0]!r}")
    typed: dict[str, Any] = {}
    for key, value in configs.items():
        kind = DYNAMIC[key] or BROKER_KEYS[key][0]
        try:
            typed[key] = coerce(key, kind, value)
        except ConfigError as e:
            raise BrokerConfigError(ErrorCode.INVALID_CONFIG, str(e)) from None
    return typed


# --- in the metadata log -------------------------------------------------------------------

def config_record(resource: str, configs: Configs) -> dict[str, Any]:
    """All of one resource's dynamic settings (replacing what it had)."""
    return metadata_records.broker_config_record(resource, configs)


class MetadataBrokerConfigs:
    """The dynamic broker configs: read from the committed image, written as records; as a
    metadata publisher, `on_change()` runs when a committed change reaches them."""

    def __init__(self, store: Any, on_change: Callable[[], None]) -> None:
        self._store = store
        self._on_change = on_change

    def on_metadata_update(self, delta: MetadataDelta, image: MetadataImage) -> None:
        if delta.broker_configs_changed:
            self._on_change()

    def current(self) -> Mapping[str, Mapping[str, Any]]:
        return self._store.image.broker_configs  # type: ignore[no-any-return]

    def working(self) -> Mapping[str, Mapping[str, Any]]:
        return self._store.working.broker_configs  # type: ignore[no-any-return]

    def write(self, resource: str, configs: Configs) -> None:
        self._store.append([config_record(resource, configs)])


# --- what a broker runs with -------------------------------------------------------------

class DynamicBrokerConfig:
    """Overlays the dynamic settings on this broker's configuration, and says where each
    effective value comes from."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self.static = dict(broker.config.values)
        self.store = MetadataBrokerConfigs(broker.store, self.reapply)
        self._applied: dict[str, Any] = {}

    def layers(self, configs: Mapping[str, Configs] | None = None) -> tuple[Configs, Configs]:
        """(cluster default, this broker's own) dynamic settings."""
        found = self.store.current() if configs is None else configs
        return (found.get(CLUSTER_DEFAULT, {}), found.get(str(self.broker.config.node_id), {}))

    def reapply(self) -> None:
        default, own = self.layers()
        merged = {**default, **own}
        if merged == self._applied:
            return
        values = self.broker.config.values
        for key in set(self._applied) | set(merged):
            if key in BROKER_KEYS:
                values[key] = merged.get(key, self.static.get(key))
            elif key in merged:
                values[key] = merged[key]
            else:
                values.pop(key, None)
        self._applied = merged
        topics = self.broker.topics
        if topics is None:
            return
        for (topic, _), partition in list(self.broker.partitions.items()):
            if topic in self.broker.metadata.topics:
                partition.apply_config(topics.log_config(topic))

    def source(self, key: str) -> int | None:
        """The config_source of a dynamic key's effective value, None when it is static."""
        default, own = self.layers()
        if key in own:
            return DYNAMIC_BROKER_CONFIG
        if key in default:
            return DYNAMIC_DEFAULT_BROKER_CONFIG
        return None
