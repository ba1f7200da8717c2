"""The records of the cluster metadata log: what each one says, and how one is encoded.

Every change the controller decides (a broker registered or fenced, a topic created, a
partition's leader or ISR changed, configs, ACLs, SCRAM credentials, producer id blocks) is one
record in `__cluster_metadata`; replaying them in order (`delta.py`) rebuilds the image on every
node. A record is a Kafka record whose value is a small JSON object with a `type`: the log keeps
Kafka's layout while the payload stays readable (Kafka's own binary metadata records are not
needed by any client). A partition record carries the partition's whole state, so replaying one
is idempotent and a reader never has to merge deltas. An `image` record is a snapshot: the whole
image as of its offset, after which the log before it can be deleted (see `raft_node.py`).
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from minilog.connector.acl_types import AclBinding

from .image import MetadataImage, PartitionState, TopicState

Record = dict[str, Any]

# The record types, Kafka's record each stands for in the comment.
BROKER = "broker"                    # RegisterBrokerRecord
FENCE = "fence"                      # FenceBrokerRecord / UnfenceBrokerRecord
TOPIC = "topic"                      # TopicRecord
PARTITION = "partition"              # PartitionRecord / PartitionChangeRecord
REMOVE_TOPIC = "remove_topic"        # RemoveTopicRecord
CONFIGS = "configs"                  # ConfigRecord, resource type TOPIC
BROKER_CONFIG = "broker_config"      # ConfigRecord, resource type BROKER
PRODUCER_IDS = "producer_ids"        # ProducerIdsRecord
LEADER_CHANGE = "leader_change"      # LeaderChangeMessage (a Raft control record in Kafka)
ACL = "acl"                          # AccessControlEntryRecord / RemoveAccessControlEntryRecord
SCRAM = "scram_credential"           # UserScramCredentialRecord / RemoveUserScramCredentialRecord
FEATURE = "feature"                  # FeatureLevelRecord
IMAGE = "image"                      # a snapshot


def encode(record: Record) -> bytes:
    return json.dumps(record, separators=(",", ":")).encode()


def decode(value: bytes) -> Record:
    return json.loads(value)  # type: ignore[no-any-return]


def broker_record(node_id: int, host: str, port: int, rack: str | None = None,
                  listeners: Mapping[str, tuple[str, int]] | None = None) -> Record:
    """A (re)registration; the record's offset becomes the broker's epoch. `listeners`:
    {name: (host, port)} of every listener the broker serves clients on."""
    rec: Record = {"type": BROKER, "id": node_id, "host": host, "port": port, "rack": rack}
    if listeners:
        rec["listeners"] = {name: list(address) for name, address in listeners.items()}
    return rec


def fence_record(node_id: int, fenced: bool) -> Record:
    return {"type": FENCE, "id": node_id, "fenced": fenced}


def topic_record(ts: TopicState) -> Record:
    return {"type": TOPIC, "name": ts.name, "id": str(ts.topic_id), "configs": dict(ts.configs),
            "internal": ts.internal}


def partition_record(topic: str, index: int, p: PartitionState) -> Record:
    rec = {"type": PARTITION, "topic": topic, "index": index, "replicas": list(p.replicas),
           "isr": list(p.isr), "leader": p.leader, "leader_epoch": p.leader_epoch,
           "partition_epoch": p.partition_epoch}
    if p.reassigning:  # only then, as Kafka's PartitionChangeRecord leaves them out
        rec |= {"adding": list(p.adding), "removing": list(p.removing)}
    return rec


def remove_topic_record(name: str) -> Record:
    return {"type": REMOVE_TOPIC, "name": name}


def configs_record(name: str, configs: Mapping[str, str]) -> Record:
    return {"type": CONFIGS, "name": name, "configs": dict(configs)}


def broker_config_record(resource: str, configs: Mapping[str, Any]) -> Record:
    """All of one BROKER resource's dynamic settings (replacing what it had)."""
    return {"type": BROKER_CONFIG, "resource": resource, "configs": dict(configs)}


def producer_ids_record(next_id: int) -> Record:
    return {"type": PRODUCER_IDS, "next": next_id}


def leader_change_record(leader: int, epoch: int) -> Record:
    return {"type": LEADER_CHANGE, "leader": leader, "epoch": epoch}


def acl_record(acl: AclBinding, removed: bool = False) -> Record:
    """One ACL added, or removed."""
    return {"type": ACL, "acl": acl.to_json(), "removed": removed}


def scram_record(user: str, mechanism: str, credential: Mapping[str, Any] | None) -> Record:
    """One user's credential (its JSON: salt, keys, iterations; never a password) for one
    mechanism, or (None) its removal."""
    return {"type": SCRAM, "user": user, "mechanism": mechanism,
            "credential": None if credential is None else dict(credential)}


def feature_record(name: str, level: int) -> Record:
    return {"type": FEATURE, "name": name, "level": level}


def scram_json(scram: Mapping[tuple[str, str], Mapping[str, Any] | None]) -> dict[str, Any]:
    """The image's credentials in the format of `ScramCredentials.to_json` (format 2)."""
    users: dict[str, dict[str, Any]] = {}
    for (user, mechanism), cred in scram.items():
        if cred is not None:
            users.setdefault(user, {})[mechanism] = dict(cred)
    return {"format": 2, "users": users,
            "deleted": sorted([u, m] for (u, m), c in scram.items() if c is None)}


def image_record(image: MetadataImage) -> Record:
    """The whole image as one record: a snapshot of everything before it in the log."""
    return {"type": IMAGE, "next_producer_id": image.next_producer_id,
            "brokers": [broker_record(b.node_id, b.host, b.port, b.rack, b.listeners)
                        for b in image.registered.values()],
            "epochs": {str(n): e for n, e in image.broker_epochs.items()},
            "fenced_at": {str(n): o for n, o in image.fenced_at.items()},
            "unfenced": sorted(image.brokers),
            "topics": [topic_record(ts) for ts in image.topics.values()],
            "partitions": [partition_record(ts.name, i, p) for ts in image.topics.values()
                           for i, p in ts.partitions.items()],
            "features": dict(image.features),
            "sections": {"acls": sorted(a.to_json() for a in image.acls),
                         "scram": scram_json(image.scram),
                         "broker_configs": {r: dict(c) for r, c in image.broker_configs.items()}}}
