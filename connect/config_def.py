"""Connect's description of a plugin's settings (its `ConfigDef`), as `GET /connector-plugins`
and `config/validate` render it: shared by the connectors (plugins.py, mirror_plugins.py) and
the transformations (smt_plugins.py)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

VERSION = "3.9.0"  # the Kafka release whose Connect REST API this worker answers as


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: str                  # Connect's type names: STRING, INT, LIST, CLASS, BOOLEAN
    documentation: str
    default: str | None = None
    required: bool = False     # no default: Connect calls it "required"
    importance: str = "HIGH"
    group: str | None = None
    # (name, value) → Connect's messages for a value its validator refuses
    check: Callable[[str, str], list[str]] | None = None


@dataclass(frozen=True)
class Plugin:
    class_name: str
    type: str                  # source | sink
    keys: tuple[ConfigKey, ...]

    @property
    def aliases(self) -> tuple[str, ...]:
        simple = self.class_name.rsplit(".", 1)[1]
        return (self.class_name, simple, simple.removesuffix("Connector"))


def group(group: str, *keys: ConfigKey) -> tuple[ConfigKey, ...]:
    """`keys` in Connect's settings group `group` (how its validation answer sorts them)."""
    return tuple(replace(key, group=group) for key in keys)


COMMON = group(
    "Common",
    ConfigKey("name", "STRING", "Globally unique name to use for this connector.",
              required=True),
    ConfigKey("connector.class", "STRING", "Name or alias of the class for this connector.",
              required=True),
    ConfigKey("tasks.max", "INT", "Maximum number of tasks to use for this connector.",
              default="1"),
    ConfigKey("key.converter", "CLASS", "Converter class for keys (overrides the worker's).",
              importance="LOW"),
    ConfigKey("value.converter", "CLASS", "Converter class for values (overrides the "
              "worker's).", importance="LOW"),
)
