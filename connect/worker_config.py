"""The worker's settings, by the names of Kafka Connect's `DistributedConfig`.

`bootstrap.servers`, `group.id`, the three storage topics with their partitions and replication
factors, `listeners`, `key.converter`/`value.converter` (and their `key.converter.`/
`value.converter.` settings), `rest.advertised.host.name`/`port` (the worker id). `plugin.path`
is accepted and ignored: minilog's connectors are built in, there is no Java class path to scan.
`spark.*` settings go to the worker's Spark session; `spark.sql.streaming.checkpointLocation` is
where each connector's query keeps its checkpoint (a subdirectory per connector).
Client settings (`security.protocol`, `sasl.*`, `ssl.*`) go to every client the worker opens;
`producer.*` settings (Connect's prefix for its source tasks' producers, `producer.batch.size`)
to the producers that write a source connector's records.
"""
from __future__ import annotations

import logging
import os
import tempfile
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from .errors import WorkerConfigError

log = logging.getLogger("minilog.connect")

_REQUIRED = ("group.id", "config.storage.topic", "offset.storage.topic", "status.storage.topic",
             "key.converter", "value.converter")
_KNOWN = {"bootstrap.servers", "listeners", "plugin.path", "rest.advertised.host.name",
          "rest.advertised.port", "rest.advertised.listener", "config.storage.replication.factor",
          "offset.storage.replication.factor", "status.storage.replication.factor",
          "offset.storage.partitions", "status.storage.partitions",
          "offset.flush.interval.ms", "task.shutdown.graceful.timeout.ms",
          "exactly.once.source.support", *_REQUIRED}
_CLIENT_PREFIXES = ("security.", "sasl.", "ssl.", "client.id", "request.timeout.ms")
_OWN_PREFIXES = ("spark.", "key.converter.", "value.converter.", "header.converter",
                 "producer.")


@dataclass(frozen=True)
class WorkerConfig:
    bootstrap_servers: str
    group_id: str
    config_topic: str
    offset_topic: str
    status_topic: str
    host: str
    port: int
    key_converter: dict = field(default_factory=dict)    # {"converter": class, **its settings}
    value_converter: dict = field(default_factory=dict)
    client: dict = field(default_factory=dict)           # settings of every client it opens
    producer: dict = field(default_factory=dict)         # source records' producers' settings
    spark: dict = field(default_factory=dict)            # spark.* settings of its session
    replication: dict = field(default_factory=dict)      # topic -> replication factor
    partitions: dict = field(default_factory=dict)       # topic -> partition count
    advertised: str = ""

    @property
    def worker_id(self) -> str:
        """Connect's worker id: the advertised host:port of its REST listener."""
        return self.advertised or f"{self.host}:{self.port}"

    @property
    def checkpoint_root(self) -> str:
        return self.spark.get("spark.sql.streaming.checkpointLocation") or os.path.join(
            tempfile.gettempdir(), "minilog-connect", self.group_id)

    def client_config(self, **more: object) -> dict:
        return {"bootstrap.servers": self.bootstrap_servers, **self.client, **more}


def _listener(text: str) -> tuple[str, int]:
    first = text.split(",")[0].strip()
    parts = urlsplit(first)
    if parts.scheme.lower() != "http":
        raise WorkerConfigError(f"listeners: only http:// listeners are supported, got {first!r}")
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None:
        raise WorkerConfigError(f"listeners: expected http://HOST:PORT, got {first!r}")
    return parts.hostname or "0.0.0.0", port


def _int(props: dict, name: str, default: int) -> int:
    raw = props.get(name, default)
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise WorkerConfigError(f"Invalid value {raw} for configuration {name}: "
                                f"Not a number of type INT") from None


def _converter(props: dict, which: str) -> dict:
    prefix = f"{which}."
    return {"converter": props[which],
            **{k[len(prefix):]: v for k, v in props.items() if k.startswith(prefix)}}


def worker_config(props: dict) -> WorkerConfig:
    """Check a worker's properties as Connect does at start; WorkerConfigError names the first
    missing or invalid setting."""
    for name in _REQUIRED:
        if not str(props.get(name, "")).strip():
            raise WorkerConfigError(f'Missing required configuration "{name}" which has no '
                                    f"default value.")
    if "plugin.path" in props:
        log.warning("plugin.path is ignored: minilog's connectors are built in (%s)",
                    props["plugin.path"])
    for key in props:
        if key not in _KNOWN and not key.startswith(_CLIENT_PREFIXES + _OWN_PREFIXES):
            log.warning("The configuration '%s' was supplied but isn't a known config.", key)
    host, port = _listener(props.get("listeners", "http://:8083"))
    topics = {k: props[f"{k}.storage.topic"] for k in ("config", "offset", "status")}
    return WorkerConfig(
        bootstrap_servers=props.get("bootstrap.servers", "localhost:9092"),
        group_id=props["group.id"], config_topic=topics["config"],
        offset_topic=topics["offset"], status_topic=topics["status"], host=host, port=port,
        key_converter=_converter(props, "key.converter"),
        value_converter=_converter(props, "value.converter"),
        client={k: v for k, v in props.items() if k.startswith(_CLIENT_PREFIXES)},
        producer={k[len("producer."):]: v for k, v in props.items()
                  if k.startswith("producer.")},
        spark={k: v for k, v in props.items() if k.startswith("spark.")},
        replication={topics[k]: _int(props, f"{k}.storage.replication.factor", -1)
                     for k in topics},
        partitions={topics["config"]: 1,
                    topics["offset"]: _int(props, "offset.storage.partitions", 25),
                    topics["status"]: _int(props, "status.storage.partitions", 5)},
        advertised=(f"{props['rest.advertised.host.name']}:"
                    f"{props.get('rest.advertised.port', port)}"
                    if "rest.advertised.host.name" in props else ""))
