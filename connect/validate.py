"""Connector config validation, answered as Connect's `AbstractHerder.validateConnectorConfig`:
`PUT /connector-plugins/{class}/config/validate` gets the per-field `ConfigInfos`, and creating
or updating a connector with errors gets 400 with the errors listed in the message."""
from __future__ import annotations

import re
from typing import Any

from .errors import ConnectRestError
from .config_def import ConfigKey, Plugin
from .mirror_plugins import MIRROR_PLUGINS, mirror_errors
from .plugins import PLUGINS, find_plugin
from .smt_plugins import smt_keys

_INT = re.compile(r"^-?\d+$")


def _field_errors(plugin: Plugin, key: ConfigKey, config: dict[str, str]) -> list[str]:
    value = config.get(key.name)
    if value is None:
        if key.required:
            return [f'Missing required configuration "{key.name}" which has no default value.']
        return []
    if key.type in ("INT", "SHORT", "LONG") and not _INT.match(str(value).strip()):
        return [f"Invalid value {value} for configuration {key.name}: Not a number of type "
                f"{key.type}"]
    if key.name == "tasks.max" and int(value) < 1:
        return [f"Invalid value {value} for configuration tasks.max: Value must be at least 1"]
    if plugin.type == "source" and key.name == "topic" and len(_topics(value)) != 1:
        return ["'topic' in FileStreamSourceConnector configuration requires definition of a "
                "single topic."]
    if key.name == "file" and not str(value).strip():
        return [f"Invalid value {value} for configuration file: minilog's file connectors need "
                "a file name (stdin and stdout are not supported)"]
    return key.check(key.name, str(value)) if key.check else []


def _topics(value: str) -> list[str]:
    return [t.strip() for t in str(value).split(",") if t.strip()]


def _cross_errors(plugin: Plugin, config: dict[str, str],
                  fields_ok: bool) -> dict[str, list[str]]:
    """The checks on several settings at once (Connect's SinkConnectorConfig.validate, the
    connectors' own `validate`); `fields_ok`: no field has an error of its own."""
    out: dict[str, list[str]] = {}
    if plugin.type == "sink":
        has_topics = bool(_topics(config.get("topics", "")))
        has_regex = bool(str(config.get("topics.regex", "")).strip())
        if has_topics and has_regex:
            message = ("topics and topics.regex are mutually exclusive options, but both are "
                       "set.")
            out = {"topics": [message], "topics.regex": [message]}
        elif not has_topics and not has_regex:
            message = "Must configure one of topics or topics.regex"
            out = {"topics": [message], "topics.regex": [message]}
    if plugin.class_name.endswith("JdbcSinkConnector"):
        _jdbc_errors(config, out)
    elif plugin in MIRROR_PLUGINS:
        out.update(mirror_errors(plugin, config, fields_ok))
    elif "file" not in config:
        out["file"] = ["minilog's file connectors need a file name (stdin and stdout are not "
                       "supported)"]
    return out


_CHOICES = {"insert.mode": ("insert", "upsert"),
            "pk.mode": ("none", "record_key", "record_value"),
            "delete.enabled": ("true", "false"), "auto.create": ("true", "false")}


def _jdbc_errors(config: dict[str, str], out: dict[str, list[str]]) -> None:
    for name, choices in _CHOICES.items():
        if name in config and config[name].strip().lower() not in choices:
            out.setdefault(name, []).append(f"Invalid value {config[name]} for configuration "
                                            f"{name}: String must be one of: "
                                            + ", ".join(choices))
    url = config.get("connection.url")
    if url is not None and not url.startswith("jdbc:postgresql://"):
        out.setdefault("connection.url", []).append(
            f"Invalid value {url} for configuration connection.url: this worker writes to "
            f"PostgreSQL only (jdbc:postgresql://HOST:PORT/DATABASE)")
    pk_mode = config.get("pk.mode", "none")
    if config.get("delete.enabled") == "true" and pk_mode != "record_key":
        out.setdefault("delete.enabled", []).append(
            "Deletes are only supported for pk.mode record_key")
    if config.get("insert.mode") == "upsert" and pk_mode == "none":
        out.setdefault("pk.mode", []).append("insert.mode upsert needs a primary key: pk.mode "
                                             "record_key or record_value")
    if pk_mode == "record_value" and not config.get("pk.fields", "").strip():
        out.setdefault("pk.fields", []).append("pk.mode record_value needs pk.fields")


def unknown_class_message(name: object) -> str:
    return (f"Failed to find any class that implements Connector and which name matches "
            f"{name}, available connectors are: "
            + ", ".join(f"PluginDesc{{klass=class {p.class_name}, name='{p.class_name}', "
                        f"version='3.9.0'}}" for p in PLUGINS))


def validate(config: dict[str, Any]) -> dict[str, Any]:
    """Connect's ConfigInfos for `config`; an unknown connector.class is a 400 of its own."""
    plugin = find_plugin(config.get("connector.class"))
    if plugin is None:
        raise ConnectRestError(400, unknown_class_message(config.get("connector.class")))
    config = {k: str(v) for k, v in config.items()}
    keys = (*plugin.keys, *smt_keys(config))
    own = [_field_errors(plugin, key, config) for key in keys]
    cross = _cross_errors(plugin, config, not any(own))
    infos, groups = [], []
    for order, (key, errors) in enumerate(zip(keys, own), 1):
        if key.group and key.group not in groups:
            groups.append(key.group)
        errors = errors + cross.get(key.name, [])
        infos.append({
            "definition": {"name": key.name, "type": key.type, "required": key.required,
                           "default_value": key.default, "importance": key.importance,
                           "documentation": key.documentation, "group": key.group,
                           "width": "NONE", "display_name": key.name, "dependents": [],
                           "order": order if key.group else -1},
            "value": {"name": key.name,
                      "value": "[hidden]" if key.type == "PASSWORD" and key.name in config
                      else config.get(key.name, key.default),
                      "recommended_values": [], "errors": errors, "visible": True}})
    return {"name": plugin.class_name,
            "error_count": sum(len(i["value"]["errors"]) for i in infos),
            "groups": groups, "configs": infos}


def check(config: dict[str, Any]) -> Plugin:
    """The plugin of a valid config, or the 400 Connect answers a create or update with."""
    if "connector.class" not in config:
        raise ConnectRestError(400, "Connector config " + str(config) + " contains no "
                               "connector type")
    plugin = find_plugin(config.get("connector.class"))
    if plugin is None:
        messages = [f"Invalid value {config['connector.class']} for configuration "
                    f"connector.class: Class {config['connector.class']} could not be found."]
    else:
        infos = validate(config)
        messages = [e for i in infos["configs"] for e in i["value"]["errors"]]
    if messages:
        raise ConnectRestError(400, f"Connector configuration is invalid and contains the "
                               f"following {len(messages)} error(s):\n" + "\n".join(messages)
                               + "\nYou can also find the above list of errors at the endpoint "
                               "`/connector-plugins/{connectorType}/config/validate`")
    return plugin
