"""The transformations and predicates this worker offers, by Kafka's class names, with their
settings (their `ConfigDef`s): what `GET /connector-plugins?connectorsOnly=false` lists, and the
keys a connector's config gains for each alias it names, as Connect's `ConnectorConfig.enrich`
adds them: `transforms`, `predicates`, then per alias `transforms.a.type` (group "Transforms:
a"), `transforms.a.predicate`, `transforms.a.negate` and the transform's own settings under the
prefix, each checked by Connect's validators (required, one of, regex, non-empty).
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace

from .cast import parse_spec
from .converters import BYTES, JSON, STRING
from .field_transforms import (
    TIMESTAMP_TYPES,
    UNIX_PRECISIONS,
    TransformConfigError,
    parse_renames,
    settings_list,
)
from .config_def import VERSION, ConfigKey
from .predicates import PREDICATES
from .transforms import TRANSFORMS

Check = Callable[[str, str], list[str]]


def invalid(name: str, value: str, message: str) -> str:
    return f"Invalid value {value} for configuration {name}: {message}"


def one_of(*choices: str) -> Check:
    def check(name: str, value: str) -> list[str]:
        return [] if value in choices else [invalid(name, value, "String must be one of: "
                                                     + ", ".join(choices))]
    return check


def boolean(name: str, value: str) -> list[str]:
    ok = value.strip().lower() in ("true", "false")
    return [] if ok else [invalid(name, value, "Expected value to be either true or false")]


def non_empty(name: str, value: str) -> list[str]:
    return [] if value else [invalid(name, value, "String must be non-empty")]


def regex(name: str, value: str) -> list[str]:
    try:
        re.compile(value)
    except re.error as e:
        return [invalid(name, value, f"Invalid regex: {e}")]
    return []


def non_empty_regex(name: str, value: str) -> list[str]:
    return non_empty(name, value) or regex(name, value)


def non_empty_list(name: str, value: str) -> list[str]:
    return [] if settings_list(value) else [invalid(name, "[]", "Empty list")]


def parses(parse: Callable[[list[str]], object]) -> Check:
    """A list setting checked by the parser the transform configures itself with: its
    ConfigException message, as `config/validate` shows it."""
    def check(name: str, value: str) -> list[str]:
        try:
            parse(settings_list(value))
        except TransformConfigError as e:
            return [str(e)]
        return []
    return check


def _key(name: str, type_: str, doc: str, default: str | None = None, required: bool = False,
         check: Check | None = None, importance: str = "MEDIUM") -> ConfigKey:
    return ConfigKey(name, type_, doc, default=default, required=required,
                     importance=importance, check=check)


_OPTIONALITY = " Suffix with ! to make this a required field, or ? to keep it optional."
_INSERT_FIELD = (
    _key("topic.field", "STRING", "Field name for Kafka topic." + _OPTIONALITY),
    _key("partition.field", "STRING", "Field name for Kafka partition." + _OPTIONALITY),
    _key("offset.field", "STRING", "Field name for Kafka offset - only applicable to sink "
         "connectors." + _OPTIONALITY),
    _key("timestamp.field", "STRING", "Field name for record timestamp." + _OPTIONALITY),
    _key("static.field", "STRING", "Field name for static data field." + _OPTIONALITY),
    _key("static.value", "STRING", "Static field value, if field name configured."),
)
_REPLACE_FIELD = (
    _key("exclude", "LIST", "Fields to exclude. This takes precedence over the fields to "
         "include.", default=""),
    _key("include", "LIST", "Fields to include. If specified, only these fields will be used.",
         default=""),
    _key("renames", "LIST", "Field rename mappings.", default="", check=parses(parse_renames)),
)
_MASK_FIELD = (
    _key("fields", "LIST", "Names of fields to mask.", required=True, check=non_empty_list,
         importance="HIGH"),
    _key("replacement", "STRING", "Custom value replacement, that will be applied to all "
         "'fields' values (numeric or non-empty string values only).", check=non_empty,
         importance="LOW"),
)
_TIMESTAMP_CONVERTER = (
    _key("field", "STRING", "The field containing the timestamp, or empty if the entire value "
         "is a timestamp", default="", importance="HIGH"),
    _key("target.type", "STRING", "The desired timestamp representation: string, unix, Date, "
         "Time, or Timestamp", required=True, check=one_of(*TIMESTAMP_TYPES),
         importance="HIGH"),
    _key("format", "STRING", "A SimpleDateFormat-compatible format for the timestamp. Used to "
         "generate the output when type=string or used to parse the input if the input is a "
         "string.", default=""),
    _key("unix.precision", "STRING", "The desired Unix precision for the timestamp: seconds, "
         "milliseconds, microseconds, or nanoseconds.", default="milliseconds",
         check=one_of(*UNIX_PRECISIONS), importance="LOW"),
)
_REPLACE_NULL = _key("replace.null.with.default", "BOOLEAN", "Whether to replace fields that "
                     "have a default value and that are null to the default value.",
                     default="true", check=boolean)
_KEYS: dict[str, tuple[ConfigKey, ...]] = {
    "InsertField": (*_INSERT_FIELD, _REPLACE_NULL),
    "ReplaceField": (*_REPLACE_FIELD, _REPLACE_NULL),
    "MaskField": (*_MASK_FIELD, _REPLACE_NULL),
    "TimestampConverter": (*_TIMESTAMP_CONVERTER, _REPLACE_NULL),
    "Cast": (
        _key("spec", "LIST", "List of fields and the type to cast them to of the form "
             "field1:type,field2:type to cast fields of Maps or Structs. A single type to cast "
             "the entire value. Valid types are int8, int16, int32, int64, float32, float64, "
             "boolean, and string. Note that binary fields can only be cast to string.",
             required=True, check=parses(parse_spec), importance="HIGH"), _REPLACE_NULL),
    "Flatten": (
        _key("delimiter", "STRING", "Delimiter to insert between field names from the input "
             "record when generating field names for the output record", default="."),),
    "RegexRouter": (
        _key("regex", "STRING", "Regular expression to use for matching.", required=True,
             check=regex, importance="HIGH"),
        _key("replacement", "STRING", "Replacement string.", required=True,
             importance="HIGH")),
    "Filter": (),
    "TopicNameMatches": (
        _key("pattern", "STRING", "A Java regular expression for matching against the name of "
             "a record's topic.", required=True, check=non_empty_regex),),
    "HasHeaderKey": (_key("name", "STRING", "The header name.", required=True,
                          check=non_empty),),
    "RecordIsTombstone": (),
}


def _simple(class_name: str) -> str:
    return class_name.rsplit(".", 1)[1].split("$")[0]


def _alias_keys(kind: str, alias: str, class_name: str | None, known: dict,
                config: dict[str, str]) -> list[ConfigKey]:
    prefix, group = f"{kind}.{alias}.", f"{kind.capitalize()}: {alias}"

    def type_check(name: str, value: str) -> list[str]:
        if kind == "transforms" and f"{prefix}negate" in config \
                and f"{prefix}predicate" not in config:
            return [f"Config '{prefix}negate' was provided but there is no config "
                    f"'{prefix}predicate' defining a predicate to be negated."]
        if value.strip() not in known:
            return [invalid(name, value, f"Class {value} could not be found.")]
        return []
    noun = "transformation" if kind == "transforms" else "predicate"
    keys = [_key(f"{prefix}type", "CLASS", f"Class for the '{alias}' {noun}.", required=True,
                 check=type_check, importance="HIGH")]
    if kind == "transforms":
        keys += [_key(f"{prefix}predicate", "STRING", "The alias of a predicate used to "
                      "determine whether to apply this transformation."),
                 _key(f"{prefix}negate", "BOOLEAN", "Whether the configured predicate should "
                      "be negated.", default="false", check=boolean)]
    if class_name in known:
        keys += [replace(k, name=prefix + k.name) for k in _KEYS[_simple(class_name)]]
    return [replace(k, group=group) for k in keys]


def _aliases_check(name: str, value: str) -> list[str]:
    aliases = settings_list(value)
    if len(aliases) != len(set(aliases)):
        return [invalid(name, "[" + ", ".join(aliases) + "]", "Duplicate alias provided.")]
    return []


def smt_keys(config: dict[str, str]) -> list[ConfigKey]:
    """The keys `config`'s transforms and predicates add to its connector's settings."""
    keys = [ConfigKey("transforms", "LIST", "Aliases for the transformations to be applied to "
                      "records.", default="", importance="LOW", group="Transforms",
                      check=_aliases_check),
            ConfigKey("predicates", "LIST", "Aliases for the predicates used by "
                      "transformations.", default="", importance="LOW", group="Predicates",
                      check=_aliases_check)]
    for kind, known in (("transforms", TRANSFORMS), ("predicates", PREDICATES)):
        for alias in dict.fromkeys(settings_list(config.get(kind))):
            class_name = config.get(f"{kind}.{alias}.type")
            keys += _alias_keys(kind, alias, class_name and class_name.strip(), known, config)
    return keys


def plugin_listing() -> list[dict[str, str]]:
    """The non-connector plugins of `GET /connector-plugins?connectorsOnly=false`."""
    listed = [(name, "transformation") for name in TRANSFORMS]
    listed += [(name, "predicate") for name in PREDICATES]
    listed += [(name, "converter") for name in (BYTES, JSON, STRING)]
    return [{"class": name, "type": kind, "version": VERSION} for name, kind in sorted(listed)]
