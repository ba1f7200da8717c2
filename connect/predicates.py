"""Connect's predicates (`org.apache.kafka.connect.transforms.predicates.*`), each a test of a
whole batch at once that answers one boolean per record: a transform with `predicate=p` applies
only where p holds (or where it does not, with `negate=true`).

TopicNameMatches matches each distinct topic of the batch once (a batch has few topics), with
Python's `re`, whose syntax is Java's for what topic patterns use; HasHeaderKey looks through
the flattened header keys with Arrow; RecordIsTombstone is the value column's null mask.
"""
from __future__ import annotations

import re
from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .records import Records

PKG = "org.apache.kafka.connect.transforms.predicates"


class Predicate(Protocol):
    def test(self, records: Records) -> pa.BooleanArray: ...


def topic_mask(records: Records, match: re.Pattern[str]) -> pa.BooleanArray:
    """Where the record's whole topic matches `match` (Java's `Matcher.matches`)."""
    topics = records.column("topic")
    if topics is None:
        return pa.array([False] * len(records))
    matching = [t for t in pc.unique(topics).to_pylist() if t is not None and match.fullmatch(t)]
    return pc.fill_null(pc.is_in(topics, value_set=pa.array(matching, pa.string())), False)


class TopicNameMatches:
    def __init__(self, settings: dict[str, str]) -> None:
        self.pattern = re.compile(settings["pattern"])

    def test(self, records: Records) -> pa.BooleanArray:
        return topic_mask(records, self.pattern)


class HasHeaderKey:
    def __init__(self, settings: dict[str, str]) -> None:
        self.name = settings["name"]

    def test(self, records: Records) -> pa.BooleanArray:
        headers = records.column("headers")
        found = np.zeros(len(records), dtype=bool)
        if headers is not None and len(headers):
            keys = pc.struct_field(pc.list_flatten(headers), [0])
            owners = pc.list_parent_indices(headers).to_numpy()
            hits = pc.fill_null(pc.equal(keys, self.name), False).to_numpy(zero_copy_only=False)
            found[owners[hits]] = True
        return pa.array(found)


class RecordIsTombstone:
    def __init__(self, settings: dict[str, str]) -> None:
        pass

    def test(self, records: Records) -> pa.BooleanArray:
        return pc.is_null(records.column("value"))


PREDICATES: dict[str, type] = {f"{PKG}.{cls.__name__}": cls
                               for cls in (TopicNameMatches, HasHeaderKey, RecordIsTombstone)}
