"""Single Message Transforms as Kafka Connect configures them: `transforms=a,b` with
`transforms.a.type=<Kafka's class>` and the transform's settings under `transforms.a.`, applied
in order; `predicates=p` with `predicates.p.type`, and `transforms.a.predicate=p` /
`transforms.a.negate=true` to apply a transform only to some records (Filter drops them).

Where they run: a sink connector's records are transformed after its converters have read them
and before the sink writes them, a source connector's after the source and before they reach
the topic, as Connect orders them. Both are Spark queries, and the chain runs inside them, on
each Arrow batch of the micro-batch (`mapInArrow`): the chain is built once per task from the
config, record-level transforms work on whole Arrow columns, field transforms on the batch's
records decoded once (records.py).
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from .cast import Cast
from .converters import Converter
from .field_transforms import (
    InsertField,
    MaskField,
    ReplaceField,
    TimestampConverter,
    TransformConfigError,
    settings_list,
)
from .flatten import Flatten
from .predicates import PREDICATES, Predicate
from .records import Records

PKG = "org.apache.kafka.connect.transforms"


class Transform(Protocol):
    def apply(self, records: Records, rows: list[bool] | None) -> None: ...


def java_replacement(replacement: str) -> str:
    """Java's `Matcher` replacement (`$1`, `${name}`, `\\$`) as a Python `expand` template."""
    out, i = [], 0
    while i < len(replacement):
        c = replacement[i]
        if c == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1].replace("\\", "\\\\"))
            i += 2
        elif c == "$" and replacement[i + 1:i + 2] == "{":
            end = replacement.index("}", i)
            out.append(f"\\g<{replacement[i + 2:end]}>")
            i = end + 1
        elif c == "$":
            digits = re.match(r"\d+", replacement[i + 1:])
            if not digits:
                raise TransformConfigError(f"Illegal group reference in {replacement}")
            out.append(f"\\g<{digits.group()}>")
            i += 1 + len(digits.group())
        else:
            out.append(c.replace("\\", "\\\\"))
            i += 1
    return "".join(out)


class RegexRouter:
    """A topic that matches `regex` as a whole becomes `replacement` (Java's `replaceFirst`):
    each distinct topic of the batch is matched once, and the batch's topic column rebuilt."""

    def __init__(self, settings: dict[str, str]) -> None:
        self.regex = re.compile(settings["regex"])
        self.template = java_replacement(settings["replacement"])

    def apply(self, records: Records, rows: list[bool] | None) -> None:
        topics = records.column("topic")
        renamed = {t: m.expand(self.template) for t in pc.unique(topics).to_pylist()
                   if t is not None and (m := self.regex.fullmatch(t))}
        if not renamed:
            return
        olds = pa.array(list(renamed), pa.string())
        news = pa.array(list(renamed.values()), pa.string())
        positions = pc.index_in(topics, value_set=olds)
        routed = pc.coalesce(pc.take(news, positions), topics)
        if rows is not None:
            routed = pc.if_else(pa.array(rows), routed, topics)
        records.set_topics(routed)


class Filter:
    """Drops every record it applies to (so: the records its predicate selects)."""

    def __init__(self, settings: dict[str, str]) -> None:
        pass

    def apply(self, records: Records, rows: list[bool] | None) -> None:
        drop = pa.array(rows if rows is not None else [True] * len(records))
        records.keep(pc.invert(drop))


def _sided(cls: Any) -> dict[str, Any]:
    name = f"{PKG}.{cls.__name__}"
    return {f"{name}$Key": lambda s: cls("key", s), f"{name}$Value": lambda s: cls("value", s)}


TRANSFORMS: dict[str, Any] = {
    **_sided(InsertField), **_sided(ReplaceField), **_sided(MaskField),
    **_sided(TimestampConverter), **_sided(Cast), **_sided(Flatten),
    f"{PKG}.RegexRouter": RegexRouter, f"{PKG}.Filter": Filter,
}


@dataclass
class Stage:
    """One transform, with the predicate that selects its records (Connect's
    TransformationStage)."""
    alias: str
    transform: Transform
    predicate: Predicate | None = None
    negate: bool = False

    def apply(self, records: Records) -> None:
        rows = None
        if self.predicate is not None:
            mask = self.predicate.test(records)
            rows = (pc.invert(mask) if self.negate else mask).to_pylist()
            if not any(rows) and not isinstance(self.transform, Filter):
                return
        self.transform.apply(records, rows)


class TransformChain:
    """The connector's stages, applied in order to each Arrow batch. Called by `mapInArrow`
    (an iterator of batches in, the same schema out), so it pickles to Spark's Python workers."""

    def __init__(self, stages: list[Stage], converters: dict[str, Converter],
                 sink: bool) -> None:
        self.stages = stages
        self.converters = converters
        self.sink = sink

    @property
    def uses_headers(self) -> bool:
        return any(type(s.predicate).__name__ == "HasHeaderKey" for s in self.stages)

    def apply(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        records = Records(batch, self.converters, self.sink)
        for stage in self.stages:
            if not len(records):
                break
            stage.apply(records)
        return records.to_batch()

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield self.apply(batch)


def _configured(config: dict[str, str], kind: str, alias: str,
                known: dict[str, Any]) -> tuple[Any, dict[str, str]]:
    """(the class of `<kind>.<alias>.type`, the alias's settings without the prefix)."""
    prefix = f"{kind}.{alias}."
    settings = {k[len(prefix):]: v for k, v in config.items() if k.startswith(prefix)}
    found = known.get(settings.get("type", "").strip())
    if found is None:
        raise TransformConfigError(f"Invalid value {settings.get('type')} for configuration "
                                   f"{prefix}type: Class {settings.get('type')} could not be "
                                   f"found.")
    return found, settings


def transform_chain(config: dict[str, str], converters: dict[str, Converter],
                    sink: bool) -> TransformChain | None:
    """The connector's chain (None without `transforms`), configured as Connect configures it
    when a task starts: a setting a transform refuses raises TransformConfigError."""
    aliases = settings_list(config.get("transforms"))
    if not aliases:
        return None
    predicates: dict[str, Predicate] = {}
    for alias in settings_list(config.get("predicates")):
        cls, settings = _configured(config, "predicates", alias, PREDICATES)
        predicates[alias] = cls(settings)
    stages = []
    for alias in aliases:
        factory, settings = _configured(config, "transforms", alias, TRANSFORMS)
        predicate_alias = settings.pop("predicate", None)
        negate = settings.pop("negate", "false").strip().lower() == "true"
        if predicate_alias is not None and predicate_alias not in predicates:
            raise TransformConfigError(f"Unknown predicate '{predicate_alias}' in "
                                       f"transforms.{alias}.predicate: predicates lists "
                                       f"{', '.join(predicates) or 'none'}")
        stages.append(Stage(alias, factory(settings),
                            predicates.get(predicate_alias) if predicate_alias else None,
                            negate))
    return TransformChain(stages, converters, sink)
