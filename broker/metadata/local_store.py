"""A single broker's metadata: records committed the moment they are appended, and what they
made (topics, producer ids, ACLs, SCRAM credentials, dynamic broker configs) kept durable in one
JSON snapshot, `__cluster_metadata.json` (mode 0600: it holds credentials), replaced atomically
on each change, beside Kafka's `meta.properties`.

The image is made the same way as a cluster's (records through a `MetadataLoader`), and ACLs,
SCRAM and broker configs are read and written through the same classes as a cluster's, so
handlers and publishers never see which store feeds them. A data directory written before the
ACLs, credentials and broker configs moved here (each had a JSON file of its own) has them
replayed into records once, at the first start, and saved here; the old files are then left
as they were and no longer read. The broker registers itself (it is its own only broker and
controller); that registration is not saved, as it is made again on every start.
"""
from __future__ import annotations

import base64
import json
import logging
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from minilog.connector.acl_types import AclBinding
from minilog.connector.private_files import write_private

from . import records
from .delta import scram_from_json
from .image import BrokerEndpoint, MetadataImage, PartitionState, TopicState
from .loader import MetadataLoader
from .records import Record
from .store import MetadataStore

log = logging.getLogger("minilog.broker.metadata")

FILE_NAME = "__cluster_metadata.json"
# The files of each feature before they became records here: migrated once.
LEGACY_ACLS, LEGACY_SCRAM, LEGACY_BROKER_CONFIGS = \
    "__acls.json", "__scram_credentials.json", "__broker_configs.json"
_SAVED = frozenset({records.TOPIC, records.PARTITION, records.REMOVE_TOPIC, records.CONFIGS,
                    records.PRODUCER_IDS, records.ACL, records.SCRAM, records.BROKER_CONFIG})


def read_meta_properties(data_dir: Path, node_id: int, cluster_id: str | None) -> dict[str, str]:
    """`meta.properties` of `data_dir`, written with a new cluster id if it has none; raises
    ValueError when it belongs to another cluster than `cluster_id`."""
    path = data_dir / "meta.properties"
    props: dict[str, str] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if "=" in line and not line.startswith("#"):
                k, v = line.split("=", 1)
                props[k.strip()] = v.strip()
        if cluster_id and props.get("cluster.id") != cluster_id:
            raise ValueError(f"{path} belongs to cluster {props.get('cluster.id')}, "
                             f"not {cluster_id}")
        return props
    props = {"version": "1", "node.id": str(node_id),
             "cluster.id": cluster_id or _short_uuid()}
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return props


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


class LocalMetadataStore(MetadataStore):
    """Single-broker durable metadata: one JSON snapshot, replaced atomically on each change."""

    def __init__(self, data_dir: Path, node_id: int, cluster_id: str | None = None) -> None:
        self.path = data_dir / FILE_NAME
        self.node_id = node_id
        data_dir.mkdir(parents=True, exist_ok=True)
        self.cluster_id = read_meta_properties(data_dir, node_id, cluster_id)["cluster.id"]
        self.loader = MetadataLoader(MetadataImage(self.cluster_id))
        self.metadata_offset = -1  # records count from 0 at every start
        saved = json.loads(self.path.read_text()) if self.path.exists() else {"topics": []}
        legacy = {} if "sections" in saved else legacy_sections(data_dir)
        self._commit(saved_records({**saved, "sections": saved.get("sections", legacy)}))
        if legacy:
            self._save()
            log.info("moved %s into %s", ", ".join(sorted(legacy)), self.path.name)

    @property
    def image(self) -> MetadataImage:
        return self.loader.image

    @property
    def working(self) -> MetadataImage:
        return self.loader.image

    @property
    def controller_id(self) -> int:
        """A single broker is its own controller."""
        return self.node_id

    def _commit(self, recs: Sequence[Record]) -> int:
        first = self.metadata_offset + 1
        self.loader.handle_commit([(first + i, rec) for i, rec in enumerate(recs)])
        self.metadata_offset = first + len(recs) - 1
        return self.metadata_offset

    def append(self, recs: Sequence[Record]) -> int:
        """Committed at once, and saved before anyone hears of it."""
        last = self._commit(recs)
        if any(rec["type"] in _SAVED for rec in recs):
            self._save()
        return last

    def _save(self) -> None:
        image = self.image
        snapshot = records.image_record(image)
        write_private(self.path, json.dumps({
            "topics": [t.to_json() for t in image.topics.values()],
            "next_producer_id": image.next_producer_id, "sections": snapshot["sections"]}))

    def register_broker(self, endpoint: BrokerEndpoint) -> None:
        """This broker, registered and serving: the only broker of its cluster."""
        self.append([records.broker_record(endpoint.node_id, endpoint.host, endpoint.port,
                                           endpoint.rack, endpoint.listeners),
                     records.fence_record(endpoint.node_id, False)])

    def allocate_producer_id_block(self, size: int) -> int:
        """The first of `size` producer ids, saved as given out before anyone uses them."""
        start = self.image.next_producer_id
        self.append([records.producer_ids_record(start + size)])
        return start


def _short_uuid() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
