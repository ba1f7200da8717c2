"""KIP-875's `GET|PATCH|DELETE /connectors/{name}/offsets` for the two kinds of connector.

A source's offsets are its records in the offset.storage.topic (`{"partition": {"filename":
...}, "offset": {"position": n}}`); a sink's are the committed offsets of its consumer group
`connect-<name>` (`{"partition": {"kafka_topic": t, "kafka_partition": p}, "offset":
{"kafka_offset": n}}`), as Connect shows them. Altering or resetting them needs the connector
STOPPED (Connect's rule); the caller then drops the connector's Spark checkpoint, so that its
query starts from the offsets written here and not from its own.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from minilog.connector.client import AdminClient, ErrorCode, KafkaError, TopicPartition

from .errors import ConnectRestError
from .offsets import OffsetReader, offset_key
from .topic_log import TopicLog

ALTERED = "The offsets for this connector have been altered successfully"
RESET = "The offsets for this connector have been reset successfully"


def sink_group(name: str) -> str:
    return f"connect-{name}"


def source_offsets(reader: OffsetReader, name: str) -> dict[str, Any]:
    return {"offsets": reader.of(name)}


def sink_offsets(client: dict, name: str) -> dict[str, Any]:
    admin = AdminClient(client)
    try:
        got = admin.list_group_offsets(sink_group(name), timeout=30)
    except KafkaError as e:
        if e.code in (ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.COORDINATOR_NOT_AVAILABLE):
            return {"offsets": []}
        raise
    finally:
        admin.close()
    return {"offsets": [{"partition": {"kafka_topic": tp.topic, "kafka_partition": tp.partition},
                         "offset": {"kafka_offset": om.offset}}
                        for tp, om in got.items() if om is not None]}


def _entries(body: Any) -> list[dict[str, Any]]:
    if not isinstance(body, dict) or not isinstance(body.get("offsets"), list) \
            or not body["offsets"]:
        raise ConnectRestError(400, "Partitions / offsets need to be provided for an alter "
                               "offsets request")
    for entry in body["offsets"]:
        if not isinstance(entry, dict) or not isinstance(entry.get("partition"), dict) \
                or not (entry.get("offset") is None or isinstance(entry["offset"], dict)):
            raise ConnectRestError(400, "Each entry needs a \"partition\" object and an "
                                   "\"offset\" object or null")
    return body["offsets"]


def file_source_check(partition: dict[str, Any], offset: dict[str, Any] | None) -> None:
    """FileStreamSource's shapes."""
    if set(partition) != {"filename"} or (offset is not None and (
            set(offset) != {"position"} or not isinstance(offset["position"], int)
            or offset["position"] < 0)):
        raise ConnectRestError(400, "FileStreamSource's partitions are {\"filename\": path} "
                               "and its offsets {\"position\": bytes, 0 or more}")


def alter_source(log: TopicLog, name: str, body: Any,
                 check: Callable[[dict[str, Any], dict[str, Any] | None], None]) -> None:
    """Write a source connector's altered offsets, each entry first passed by the connector's
    `check` (its alterOffsets): all or none are written."""
    records = []
    for entry in _entries(body):
        partition, offset = entry["partition"], entry["offset"]
        check(partition, offset)
        records.append((offset_key(name, partition),
                        None if offset is None else json.dumps(offset).encode()))
    log.send_all(records)


def reset_source(log: TopicLog, reader: OffsetReader, name: str) -> None:
    log.send_all([(offset_key(name, entry["partition"]), None) for entry in reader.of(name)])


def alter_sink(client: dict, name: str, body: Any) -> None:
    commit, forget = {}, []
    for entry in _entries(body):
        partition, offset = entry["partition"], entry["offset"]
        try:
            tp = TopicPartition(str(partition["kafka_topic"]), int(partition["kafka_partition"]))
            value = None if offset is None else int(offset["kafka_offset"])
        except (KeyError, TypeError, ValueError):
            raise ConnectRestError(400, "Sink connectors' partitions are {\"kafka_topic\": ..., "
                                   "\"kafka_partition\": ...} and their offsets "
                                   "{\"kafka_offset\": ...}") from None
        if value is None:
            forget.append(tp)
        else:
            commit[tp] = value
    admin = AdminClient(client)
    try:
        if commit:
            admin.alter_group_offsets(sink_group(name), commit, timeout=30)
        if forget:
            admin.delete_group_offsets(sink_group(name), forget, timeout=30)
    finally:
        admin.close()


def reset_sink(client: dict, name: str) -> None:
    admin = AdminClient(client)
    try:
        admin.delete_groups([sink_group(name)], timeout=30)
    except KafkaError as e:
        if e.code != ErrorCode.GROUP_ID_NOT_FOUND:
            raise
    finally:
        admin.close()
