"""KIP-875's PATCH of MirrorMaker 2's connectors' offsets, checked as Kafka checks them, and where
a MirrorSourceConnector's copy starts again from them.

Kafka's worker first checks that a partition and an offset are maps of primitive values
(`OffsetUtils.validateFormat`), then asks the connector (`alterOffsets`). MM2's connectors
accept a null offset for anything (so garbage can be cleaned up) and otherwise check their own
shapes (`MirrorUtils`): MirrorSourceConnector `{"cluster": str, "topic": str, "partition": int}`
-> `{"offset": int >= 0}` (the last upstream offset copied: the copy resumes one past it, as
MirrorSourceTask seeks to `offset + 1`); MirrorCheckpointConnector `{"group", "topic",
"partition"}` and MirrorHeartbeatConnector `{"sourceClusterAlias", "targetClusterAlias"}`,
both with `{"offset": 0}` only. A refusal is a ConnectException in Kafka, which its REST layer
answers with 500 and the message; the messages here are Kafka's, maps printed as Java prints
a HashMap (`{cluster=A, partition=0, topic=orders}`).
"""
from __future__ import annotations

from typing import Any

from .errors import ConnectRestError
from .mirror_plugins import MIRROR_CHECKPOINT, MIRROR_HEARTBEAT, MIRROR_SOURCE
from .config_def import Plugin

INTERNAL_SERVER_ERROR = 500
_INT_MAX = 2**31 - 1
# each connector's string keys of a source partition, and whether its offset must be 0
_SHAPES: dict[Plugin, tuple[tuple[str, ...], bool, bool]] = {
    # (string keys, has a "partition" key, offset only 0)
    MIRROR_SOURCE: (("cluster", "topic"), True, False),
    MIRROR_CHECKPOINT: (("group", "topic"), True, True),
    MIRROR_HEARTBEAT: (("sourceClusterAlias", "targetClusterAlias"), False, True),
}


def _java_hash(text: str) -> int:
    """Java's String.hashCode, spread as HashMap spreads it."""
    raw, h = text.encode("utf-16-be"), 0
    for i in range(0, len(raw), 2):
        h = (31 * h + int.from_bytes(raw[i:i + 2], "big")) & 0xFFFFFFFF
    return h ^ (h >> 16)


def java_map(value: dict[str, Any]) -> str:
    """A map as Java's HashMap.toString prints it (bucket order, default capacity)."""
    capacity = 16
    while len(value) > capacity * 0.75:
        capacity *= 2
    keys = sorted(value, key=lambda k: _java_hash(k) & (capacity - 1))  # stable: insertion order
    return "{" + ", ".join(f"{k}={java_value(value[k])}" for k in keys) + "}"


def java_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return java_map(value)
    if isinstance(value, list):
        return "[" + ", ".join(java_value(v) for v in value) + "]"
    return str(value)


def _is_long(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _refuse(message: str) -> ConnectRestError:
    return ConnectRestError(INTERNAL_SERVER_ERROR, message)


def validate_format(data: dict[str, Any] | None) -> None:
    """OffsetUtils.validateFormat: a partition or offset holds only primitive values."""
    for key, value in (data or {}).items():
        kind = "MAP" if isinstance(value, dict) else "ARRAY" if isinstance(value, list) else None
        if kind:
            raise _refuse(f"Offsets may only contain primitive types as values, but field {key} "
                          f"contains {kind}")


def check_entry(plugin: Plugin, partition: dict[str, Any], offset: dict[str, Any] | None
                ) -> None:
    """One `{"partition": ..., "offset": ...}` of a PATCH, as the connector's alterOffsets
    checks it (after the worker's validateFormat)."""
    validate_format(partition)
    validate_format(offset)
    if offset is None:
        return
    strings, has_partition, only_zero = _SHAPES[plugin]
    shown = java_map(partition)
    for key in strings:
        if key not in partition:
            raise _refuse(f"Source partition {shown} is missing the '{key}' key, which is "
                          "required")
        if not isinstance(partition[key], str):
            raise _refuse(f"Source partition {shown} has an invalid value "
                          f"{java_value(partition[key])} for the '{key}' key, which must be a "
                          "string")
    if has_partition:
        if "partition" not in partition:
            raise _refuse(f"Source partition {shown} is missing the 'partition' key, which is "
                          "required")
        number = partition["partition"]
        if not _is_long(number) or number > _INT_MAX:
            raise _refuse(f"Source partition {shown} has an invalid value {java_value(number)} "
                          "for the 'partition' key, which must be an integer")
        if number < 0:
            raise _refuse(f"Source partition {shown} has an invalid value {number} for the "
                          "'partition' key, which cannot be negative")
    _check_offset(shown, offset, only_zero)


def _check_offset(shown: str, offset: dict[str, Any], only_zero: bool) -> None:
    """MirrorUtils.validateSourceOffset."""
    head = f"Source offset {java_map(offset)} for source partition {shown}"
    if "offset" not in offset:
        raise _refuse(f"{head} is missing the 'offset' key, which is required")
    value = offset["offset"]
    if not _is_long(value):
        raise _refuse(f"{head} has an invalid value {java_value(value)} for the 'offset' key, "
                      "which must be an integer")
    if only_zero and value != 0:
        raise _refuse(f"{head} has an invalid value {value} for the 'offset' key; the only "
                      "accepted value is 0")
    if not only_zero and value < 0:
        raise _refuse(f"{head} has an invalid value {value} for the 'offset' key, which cannot "
                      "be negative")


def resume_positions(stored: list[dict[str, Any]], source: str) -> dict[tuple[str, int], int]:
    """{(topic, partition): the next upstream offset to copy} from a MirrorSourceConnector's
    offsets (`OffsetReader.of`): one past the last copied, for its source cluster's partitions
    (MirrorSourceTask looks its offsets up under its own `cluster`)."""
    out: dict[tuple[str, int], int] = {}
    for entry in stored:
        partition, offset = entry["partition"], entry["offset"] or {}
        if partition.get("cluster") != source or not _is_long(offset.get("offset")):
            continue
        if isinstance(partition.get("topic"), str) and _is_long(partition.get("partition")):
            out[(partition["topic"], partition["partition"])] = offset["offset"] + 1
    return out
