"""MirrorMaker 2's connectors' settings as Connect takes them (KIP-382, MM2 run in a Connect
cluster): the JSON of a MirrorSourceConnector, MirrorCheckpointConnector or
MirrorHeartbeatConnector read into the same `Flow` as `minilog mirror mm2.properties` runs.

The JSON is rewritten in the properties file's terms (`clusters = S, T`, `S->T.enabled`,
`S.<client setting>`, the flow settings as they are) and read by `mirror_config`, so one parser
checks and defaults both forms. Connect's names: `source.cluster.alias` (required, no default),
`target.cluster.alias` (default `target`), each cluster's client settings under
`source.cluster.` / `target.cluster.` and its clients' under `source.consumer.`,
`target.producer.`, `source.admin.` ...; `enabled = false` turns the connector off. Connect's
own settings (`name`, `tasks.max`, converters, transforms) and keys MM2 does not know are the
worker's business and left out, as MM2's connectors ignore them. A connector without
`target.cluster.bootstrap.servers` writes to the worker's own cluster, where Connect's producer
writes a source connector's records.
"""
from __future__ import annotations

import dataclasses

from .config import Flow, MirrorConfigError, _bool, _known_flow_key, mirror_config

SOURCE_ALIAS = "source.cluster.alias"
TARGET_ALIAS = "target.cluster.alias"
TARGET_ALIAS_DEFAULT = "target"
CLUSTER_PREFIXES = ("source.cluster.", "target.cluster.")
_ROLES = ("consumer.", "producer.", "admin.")
_CONNECT_OWN = {"name", "connector.class", "tasks.max", "key.converter", "value.converter",
                "header.converter", "enabled", SOURCE_ALIAS, TARGET_ALIAS}


def aliases(config: dict[str, str]) -> tuple[str, str]:
    """(source, target) aliases; Connect's message for a missing source alias."""
    source = config.get(SOURCE_ALIAS, "").strip()
    if not source:
        raise MirrorConfigError(f'Missing required configuration "{SOURCE_ALIAS}" which has no '
                                f"default value.")
    return source, config.get(TARGET_ALIAS, TARGET_ALIAS_DEFAULT).strip()


def _cluster_key(key: str, source: str, target: str) -> str | None:
    """The properties file's name of a per-cluster client setting, or None."""
    for side, alias in (("source.", source), ("target.", target)):
        if key.startswith(side + "cluster."):
            return f"{alias}.{key[len(side + 'cluster.'):]}"
        if key.startswith(tuple(side + role for role in _ROLES)):
            return f"{alias}.{key[len(side):]}"
    return None


def mm2_properties(config: dict[str, str], worker_client: dict | None = None) -> dict[str, str]:
    """The properties file that says what the connector's `config` says."""
    source, target = aliases(config)
    props = {"clusters": f"{source}, {target}", f"{source}->{target}.enabled": "true"}
    if worker_client and "target.cluster.bootstrap.servers" not in config:
        props.update({f"{target}.{k}": str(v) for k, v in worker_client.items()})
    for key, value in config.items():
        if key in _CONNECT_OWN:
            continue
        named = _cluster_key(key, source, target)
        if named is not None:
            props[named] = value
        elif _known_flow_key(key):
            props[key] = value
    return props


def connector_flow(config: dict[str, str], worker_client: dict | None = None) -> Flow | None:
    """The flow a connector's config describes (None: `enabled` is false, the connector does
    nothing, as MM2's); MirrorConfigError for a config the properties file would refuse."""
    if not _bool("enabled", config.get("enabled", "true")):
        return None
    flow = mirror_config(mm2_properties(config, worker_client)).flows[0]
    return dataclasses.replace(flow, connector=config.get("name", ""))
