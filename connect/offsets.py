"""Source offsets in the offset.storage.topic, as Connect's `OffsetStorageWriter` writes them:
key `["<connector>", {<source partition>}]`, value `{<source offset>}`, both JSON without
schemas, so `GET /connectors/<name>/offsets` and Kafka's own tools read the same records."""
from __future__ import annotations

import json
from typing import Any

from .topic_log import TopicLog


def offset_key(connector: str, partition: dict[str, Any]) -> bytes:
    return json.dumps([connector, partition], separators=(",", ":")).encode()


def parse_key(key: bytes | None) -> tuple[str, dict[str, Any]] | None:
    """(connector, source partition) of an offsets record's key; None for a key that is not
    Connect's (another tool's record in the topic is skipped, not fatal)."""
    try:
        connector, partition = json.loads(key)
    except (TypeError, ValueError):
        return None
    return (connector, partition) if isinstance(connector, str) and isinstance(partition, dict) \
        else None


class OffsetReader:
    """Every source offset of the topic, replayed: {(connector, partition json): offset}."""

    def __init__(self) -> None:
        self.offsets: dict[tuple[str, str], dict[str, Any] | None] = {}

    def apply(self, key: bytes | None, value: bytes | None) -> None:
        parsed = parse_key(key)
        if parsed is None:
            return
        connector, partition = parsed
        ident = (connector, json.dumps(partition, sort_keys=True))
        if value is None:
            self.offsets.pop(ident, None)
        else:
            self.offsets[ident] = json.loads(value)

    def of(self, connector: str) -> list[dict[str, Any]]:
        """KIP-875's shape: [{"partition": {...}, "offset": {...}}] for one connector."""
        return [{"partition": json.loads(p), "offset": o}
                for (c, p), o in sorted(self.offsets.items()) if c == connector]


def replay(client: dict, topic: str) -> OffsetReader:
    """The offsets topic read to its end."""
    reader = OffsetReader()
    log = TopicLog(client, topic, reader.apply)
    try:
        log.read_to_end()
    finally:
        log.close()
    return reader


def read_offset(client: dict, topic: str, connector: str,
                partition: dict[str, Any]) -> dict[str, Any] | None:
    """The last offset committed for one source partition (None: never committed)."""
    return replay(client, topic).offsets.get((connector, json.dumps(partition, sort_keys=True)))
