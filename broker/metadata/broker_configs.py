"""Dynamic broker configs: what AlterConfigs and IncrementalAlterConfigs change on a BROKER
resource, per broker (its node id as the name) or for every broker (the cluster-wide default,
an empty name), as Kafka's `kafka-configs.sh --entity-type brokers` does.

Only the settings Kafka lets change at run time are accepted (`DYNAMIC`); any other broker
setting is read-only (INVALID_REQUEST, "cannot be updated dynamically", Kafka's answer), an
unknown name or a bad value INVALID_CONFIG. A cluster keeps them as `broker_config` records of
the metadata log (Kafka's ConfigRecord with resource type BROKER) and as a section of its
snapshots; a single broker in `__broker_configs.json`. Every broker overlays them on its static
configuration as Kafka ranks them (per broker over cluster default over static), so the
topic-level defaults they feed (`log.retention.ms`...) reach every partition without an
override of its own. Settings minilog has no use for (thread counts, Kerberos) are kept and
shown but change nothing.
"""
import json
import os
from pathlib import Path

from ..server.config import BROKER_KEYS, ConfigError, _coerce
from . import records as metadata_records

RECORD_TYPE = "broker_config"
FILE_NAME = "__broker_configs.json"
CLUSTER_DEFAULT = ""  # the resource name of the cluster-wide default

# Kafka's config_source values of DescribeConfigs
DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 2, 3

# What Kafka lets change at run time (DynamicBrokerConfig), with the type of those minilog
# does not otherwise know. Those of BROKER_KEYS take effect; the others are accepted and shown.
DYNAMIC: dict = {
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

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


def validate(configs: dict) -> dict:
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
    typed = {}
    for key, value in configs.items():
        kind = DYNAMIC[key] or BROKER_KEYS[key][0]
        try:
            typed[key] = _coerce(key, kind, value)
        except ConfigError as e:
            raise BrokerConfigError(ErrorCode.INVALID_CONFIG, str(e)) from None
    return typed


# --- in the metadata log -------------------------------------------------------------------

def config_record(resource: str, configs: dict) -> dict:
    """All of one resource's dynamic settings (replacing what it had)."""
    return {"type": RECORD_TYPE, "resource": resource, "configs": configs}


def image_configs(image) -> dict:
    """{resource name: {key: value}} the image's records have built."""
    found = getattr(image, "broker_configs", None)
    if found is None:
        found = image.broker_configs = {}
    return found


def _apply(image, rec: dict) -> None:
    configs = image_configs(image)
    if rec["configs"]:
        configs[rec["resource"]] = dict(rec["configs"])
    else:
        configs.pop(rec["resource"], None)


def _load(image, data: dict | None) -> None:
    image_configs(image).clear()
    image_configs(image).update(data or {})


metadata_records.EXTENSION_RECORDS[RECORD_TYPE] = _apply
metadata_records.IMAGE_SECTIONS["broker_configs"] = (lambda image: image_configs(image), _load)


class QuorumBrokerConfigs:
    """A cluster's dynamic broker configs: read from the committed image, written as records;
    `on_change()` runs when a committed record (or a snapshot) may have changed them."""

    def __init__(self, store, on_change):
        self._store = store
        self._on_change = on_change
        store.listeners.append(self._applied)

    def _applied(self, rec, changed) -> None:
        if rec is None:
            image_configs(self._store.image).clear()
        if rec is None or rec.get("type") in (RECORD_TYPE, "image"):
            self._on_change()

    def current(self) -> dict:
        return image_configs(self._store.image)

    def working(self) -> dict:
        return image_configs(self._store.working)

    def write(self, resource: str, configs: dict) -> None:
        self._store.append([config_record(resource, configs)])


class FileBrokerConfigs:
    """A single broker's dynamic configs, in one file replaced atomically on each change."""

    def __init__(self, data_dir: Path, on_change):
        self._path = data_dir / FILE_NAME
        self._on_change = on_change
        self._configs = json.loads(self._path.read_text()) if self._path.exists() else {}

    def current(self) -> dict:
        return self._configs

    working = current

    def write(self, resource: str, configs: dict) -> None:
        if configs:
            self._configs[resource] = dict(configs)
        else:
            self._configs.pop(resource, None)
        self._path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(self._configs, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._path)
        self._on_change()


# --- what a broker runs with -------------------------------------------------------------

class DynamicBrokerConfig:
    """Overlays the dynamic settings on this broker's configuration, and says where each
    effective value comes from."""

    def __init__(self, broker):
        self.broker = broker
        self.static = dict(broker.config.values)
        quorum = broker.quorum
        self.store = FileBrokerConfigs(broker.config.data_dir, self.reapply) if quorum is None \
            else QuorumBrokerConfigs(quorum, self.reapply)
        self._applied: dict = {}

    def layers(self, configs: dict | None = None) -> tuple[dict, dict]:
        """(cluster default, this broker's own) dynamic settings."""
        configs = self.store.current() if configs is None else configs
        return (configs.get(CLUSTER_DEFAULT, {}),
                configs.get(str(self.broker.config.node_id), {}))

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
