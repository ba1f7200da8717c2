"""The records of the cluster metadata log and how each one changes a `MetadataImage`.

Every change the controller decides (a broker registered or fenced, a topic created, a
partition's leader or ISR changed, configs, producer id blocks) is one record in
`__cluster_metadata`; replaying them in order rebuilds the image on every node. A record is a
Kafka record whose value is a small JSON object with a `type`: the log keeps Kafka's layout
while the payload stays readable (Kafka's own binary metadata records are not needed by any
client). A partition record carries the partition's whole state, so applying one is
idempotent and a reader never has to merge deltas. An `image` record is a snapshot: the whole
image as of its offset, after which the log before it can be deleted (see `raft_node.py`).
"""
import json
import uuid

from .image import BrokerEndpoint, PartitionState, TopicState


# Records of features that keep their own state on the image, registered by their own modules
# (scram_metadata.py): record type -> apply(image, record); and the sections they add to a
# snapshot: name -> (dump(image) -> JSON value, load(image, JSON value or None)).
EXTENSION_RECORDS = {}
IMAGE_SECTIONS = {}


def encode(record):
    return json.dumps(record, separators=(",", ":")).encode()


def decode(value):
    return json.loads(value)


def broker_record(node_id, host, port, rack=None, listeners=None):
    """A (re)registration; the record's offset becomes the broker's epoch. `listeners`:
    {name: (host, port)} of every listener the broker serves clients on."""
    rec = {"type": "broker", "id": node_id, "host": host, "port": port, "rack": rack}
    if listeners:
        rec["listeners"] = {name: list(address) for name, address in listeners.items()}
    return rec


def fence_record(node_id, fenced):
    return {"type": "fence", "id": node_id, "fenced": fenced}


def topic_record(ts):
    return {"type": "topic", "name": ts.name, "id": str(ts.topic_id), "configs": ts.configs,
            "internal": ts.internal}


def partition_record(topic, index, p):
    return {"type": "partition", "topic": topic, "index": index, "replicas": p.replicas,
            "isr": p.isr, "leader": p.leader, "leader_epoch": p.leader_epoch,
            "partition_epoch": p.partition_epoch}


def remove_topic_record(name):
    return {"type": "remove_topic", "name": name}


def configs_record(name, configs):
    return {"type": "configs", "name": name, "configs": configs}


def producer_ids_record(next_id):
    return {"type": "producer_ids", "next": next_id}


def leader_change_record(leader, epoch):
    return {"type": "leader_change", "leader": leader, "epoch": epoch}


def image_record(image):
    """The whole image as one record: a snapshot of everything before it in the log."""
    return {"type": "image", "next_producer_id": image.next_producer_id,
            "brokers": [broker_record(b.node_id, b.host, b.port, b.rack, b.listeners)
                        for b in image.registered.values()],
            "epochs": {str(n): e for n, e in image.broker_epochs.items()},
            "unfenced": sorted(image.brokers),
            "topics": [topic_record(ts) for ts in image.topics.values()],
            "partitions": [partition_record(ts.name, i, p) for ts in image.topics.values()
                           for i, p in ts.partitions.items()],
            "sections": {name: dump(image) for name, (dump, _) in IMAGE_SECTIONS.items()}}


def _load_image(image, rec):
    image.topics.clear(), image.by_id.clear(), image.brokers.clear()
    image.registered.clear(), image.fenced.clear(), image.broker_epochs.clear()
    image.fenced_at.clear()
    for b in rec["brokers"]:
        apply(image, b, -1)
    image.broker_epochs.update({int(n): e for n, e in rec["epochs"].items()})
    for node in rec["unfenced"]:
        apply(image, fence_record(node, False), -1)
    for r in rec["topics"] + rec["partitions"]:
        apply(image, r, -1)
    image.next_producer_id = rec["next_producer_id"]
    for name, (_, load) in IMAGE_SECTIONS.items():
        load(image, rec.get("sections", {}).get(name))
    return [(ts.name, i) for ts in image.topics.values() for i in ts.partitions]


def apply(image, rec, offset):
    """Apply the record at `offset`; return the (topic, partition) keys whose state changed."""
    kind = rec["type"]
    if kind == "broker":
        image.registered[rec["id"]] = BrokerEndpoint(
            rec["id"], rec["host"], rec["port"], rec.get("rack"),
            {name: tuple(address) for name, address in rec.get("listeners", {}).items()})
        image.broker_epochs[rec["id"]] = offset
        image.fenced.add(rec["id"])
        image.brokers.pop(rec["id"], None)
    elif kind == "fence":
        node = rec["id"]
        if rec["fenced"]:
            image.fenced.add(node)
            image.fenced_at[node] = offset
            image.brokers.pop(node, None)
        elif node in image.registered:
            image.fenced.discard(node)
            image.brokers[node] = image.registered[node]
            image.brokers = dict(sorted(image.brokers.items()))
    elif kind == "topic":
        ts = TopicState(rec["name"], uuid.UUID(rec["id"]), configs=dict(rec["configs"]),
                        internal=rec["internal"])
        image.topics[ts.name] = ts
        image.by_id[ts.topic_id] = ts
    elif kind == "partition":
        ts = image.topics.get(rec["topic"])
        if ts is not None:
            ts.partitions[rec["index"]] = PartitionState(
                list(rec["replicas"]), rec["leader"], rec["leader_epoch"], list(rec["isr"]),
                rec["partition_epoch"])
            return [(ts.name, rec["index"])]
    elif kind == "remove_topic":
        ts = image.topics.pop(rec["name"], None)
        if ts is not None:
            image.by_id.pop(ts.topic_id, None)
            return [(ts.name, i) for i in ts.partitions]
    elif kind == "configs":
        ts = image.topics.get(rec["name"])
        if ts is not None:
            ts.configs = dict(rec["configs"])
            return [(ts.name, i) for i in ts.partitions]
    elif kind == "producer_ids":
        image.next_producer_id = max(image.next_producer_id, rec["next"])
    elif kind == "image":
        return _load_image(image, rec)
    elif kind in EXTENSION_RECORDS:
        EXTENSION_RECORDS[kind](image, rec)
    return []
