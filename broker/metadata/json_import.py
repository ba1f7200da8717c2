"""A single broker's metadata as the JSON store before it was a one-voter quorum, imported once.

Until a single broker ran the same Raft quorum as a cluster node, it kept its metadata (topics,
producer ids, ACLs, SCRAM credentials, dynamic broker configs) in one JSON snapshot,
`__cluster_metadata.json`, and before that each of ACLs, credentials and broker configs in a
JSON file of its own. A data directory holding them is imported at its first start as a quorum:
the records that rebuild what they hold are the first ones the new controller appends, and once
those are committed a marker (`IMPORTED`) says so. The old files are left as they were and never
read again, so a change made after the import stands across restarts.
"""
from __future__ import annotations

import json
import logging
import uuid
from pathlib import Path
from typing import Any

from minilog.connector.acl_types import AclBinding

from . import records
from .delta import scram_from_json
from .image import MetadataImage, PartitionState, TopicState
from .records import Record

log = logging.getLogger("minilog.broker.metadata")

FILE_NAME = "__cluster_metadata.json"
# The files of each feature before they became records of that snapshot.
LEGACY_ACLS, LEGACY_SCRAM, LEGACY_BROKER_CONFIGS = \
    "__acls.json", "__scram_credentials.json", "__broker_configs.json"
IMPORTED = "__cluster_metadata.imported"  # written once the import is committed


def saved_records(saved: dict[str, Any]) -> list[Record]:
    """The records that rebuild what a `__cluster_metadata.json` holds."""
    recs: list[Record] = []
    for t in saved["topics"]:
        ts = TopicState(t["name"], uuid.UUID(t["id"]), configs=t.get("configs", {}),
                        internal=t.get("internal", False))
        recs.append(records.topic_record(ts))
        recs += [records.partition_record(ts.name, int(i), PartitionState(**p))
                 for i, p in t["partitions"].items()]
    recs.append(records.producer_ids_record(saved.get("next_producer_id", 1000)))
    return recs + section_records(saved.get("sections", {}))


def section_records(sections: dict[str, Any]) -> list[Record]:
    """The records that rebuild the ACLs, credentials and broker configs of a snapshot's
    sections (`records.image_record`'s format, or each legacy file's)."""
    recs = [records.acl_record(AclBinding.from_json(a)) for a in sections.get("acls") or []]
    recs += [records.scram_record(user, mechanism, cred) for (user, mechanism), cred
             in scram_from_json(sections.get("scram") or {}).items()]
    recs += [records.broker_config_record(resource, configs) for resource, configs
             in (sections.get("broker_configs") or {}).items() if configs]
    return recs


def legacy_sections(data_dir: Path) -> dict[str, Any]:
    """What the per-feature JSON files of an older single broker hold, as sections."""
    found = {}
    for section, name in (("acls", LEGACY_ACLS), ("scram", LEGACY_SCRAM),
                          ("broker_configs", LEGACY_BROKER_CONFIGS)):
        path = data_dir / name
        if path.exists():
            found[section] = json.loads(path.read_text())
    return found


def pending_import(data_dir: Path) -> list[Record] | None:
    """The records that import the old JSON store of `data_dir`, or None when there is
    nothing to import (no old files, or imported already)."""
    if (data_dir / IMPORTED).exists():
        return None
    path = data_dir / FILE_NAME
    saved: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {"topics": []}
    sections = saved["sections"] if "sections" in saved else legacy_sections(data_dir)
    if not path.exists() and not sections:
        return None
    return saved_records({**saved, "sections": sections})


def is_blank(image: MetadataImage) -> bool:
    """Nothing an import would bring is there yet (a crash between committing an import and
    marking it leaves it there: it is not imported twice)."""
    return not (image.topics or image.acls or image.scram or image.broker_configs)


def mark_imported(data_dir: Path, offset: int) -> None:
    """The import is committed (up to `offset`): the old files are never read again."""
    (data_dir / IMPORTED).write_text(f"imported into the metadata log up to offset {offset}\n")
    log.info("imported the single-broker metadata of %s into the metadata log", data_dir)
