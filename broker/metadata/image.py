"""The cluster metadata a broker serves: topics, their ids, partitions, replicas, leaders, configs.

`MetadataImage` is the in-memory picture request handlers read. `LocalMetadataStore` keeps it
durable for a single broker as an atomically replaced JSON file; the controller quorum will feed
the same image from its replicated metadata log, so handlers never see where it comes from.
"""
import json
import os
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path

LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_LENGTH = 249
INTERNAL_PREFIX = "__"

# Topic-level settings minilog understands (Kafka's names).
TOPIC_CONFIG_KEYS = frozenset({
    "cleanup.policy", "retention.ms", "retention.bytes", "segment.bytes", "segment.ms",
    "flush.messages", "flush.ms", "index.interval.bytes", "max.message.bytes",
    "message.timestamp.type", "min.insync.replicas", "delete.retention.ms",
    "min.compaction.lag.ms", "min.cleanable.dirty.ratio", "compression.type",
    "unclean.leader.election.enable",
})
# Kafka 3.9 still accepts these, ignores them and warns; Kafka 4.0 removed them (KIP-724,
# KIP-937). librdkafka's test 0092 sets message.format.version. {name: why it is ignored}
DEPRECATED_TOPIC_CONFIGS = {
    "message.format.version": "Kafka 3.0 and later always write message format v2",
    "message.timestamp.difference.max.ms":
        "replaced by message.timestamp.before.max.ms and message.timestamp.after.max.ms",
}
TOPIC_CONFIG_KEYS |= frozenset(DEPRECATED_TOPIC_CONFIGS)


def topic_name_error(name, allow_internal=False):
    """Why a topic name is illegal, or None."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name {name!r} is reserved"
    if len(name) > MAX_TOPIC_LENGTH:
        return f"topic name is {len(name)} characters long, the limit is {MAX_TOPIC_LENGTH}"
    if not LEGAL_TOPIC.match(name):
        return f"topic name {name!r} has characters other than ASCII letters, digits, '.', '_', '-'"
    if name.startswith(INTERNAL_PREFIX) and not allow_internal:
        return f"topic names starting with {INTERNAL_PREFIX!r} are reserved for internal topics"
    return None


@dataclass
class PartitionState:
    replicas: list
    leader: int
    leader_epoch: int = 0
    isr: list = None
    partition_epoch: int = 0  # bumped by every leader or ISR change (AlterPartition checks it)

    def __post_init__(self):
        if self.isr is None:
            self.isr = list(self.replicas)


@dataclass
class TopicState:
    name: str
    topic_id: uuid.UUID
    partitions: dict = field(default_factory=dict)  # index -> PartitionState
    configs: dict = field(default_factory=dict)     # overrides only, Kafka names -> str
    internal: bool = False

    def to_json(self):
        return {"name": self.name, "id": str(self.topic_id), "internal": self.internal,
                "configs": self.configs,
                "partitions": {str(i): {"replicas": p.replicas, "leader": p.leader,
                                        "leader_epoch": p.leader_epoch, "isr": p.isr}
                               for i, p in self.partitions.items()}}

    @classmethod
    def from_json(cls, d):
        return cls(d["name"], uuid.UUID(d["id"]),
                   {int(i): PartitionState(**p) for i, p in d["partitions"].items()},
                   d.get("configs", {}), d.get("internal", False))


@dataclass
class BrokerEndpoint:
    """A broker's primary address, and every listener's ({name: (host, port)}, advertised):
    Metadata answers each client with the addresses of the listener it came through."""
    node_id: int
    host: str
    port: int
    rack: str = None
    listeners: dict = field(default_factory=dict)

    def address_on(self, listener: str) -> tuple[str, int]:
        """(host, port) of this broker on `listener` (the inter-broker one, for its peers),
        its primary address when it registered no listener of that name."""
        return self.listeners.get(listener) or (self.host, self.port)


class MetadataImage:
    """Read side: what handlers consult. Mutated only through a store."""

    def __init__(self, cluster_id):
        self.cluster_id = cluster_id
        self.topics = {}      # name -> TopicState
        self.by_id = {}       # uuid -> TopicState
        self.brokers = {}     # node id -> BrokerEndpoint, live (unfenced) brokers only
        self.registered = {}  # node id -> BrokerEndpoint, every broker the cluster knows
        self.fenced = set()   # registered node ids not serving (stopped or catching up)
        self.broker_epochs = {}  # node id -> epoch of its current registration
        self.fenced_at = {}   # node id -> offset of the record that last fenced it
        self.controller_id = -1
        self.next_producer_id = 1000

    def topic(self, name):
        return self.topics.get(name)


class LocalMetadataStore:
    """Single-broker durable metadata: one JSON snapshot, replaced atomically on each change."""

    def __init__(self, data_dir: Path, node_id, cluster_id=None):
        self.path = data_dir / "__cluster_metadata.json"
        self.node_id = node_id
        data_dir.mkdir(parents=True, exist_ok=True)
        meta = self._read_meta_properties(data_dir, node_id, cluster_id)
        self.image = MetadataImage(meta["cluster.id"])
        self.image.controller_id = node_id
        if self.path.exists():
            d = json.loads(self.path.read_text())
            for t in d["topics"]:
                ts = TopicState.from_json(t)
                self.image.topics[ts.name] = ts
                self.image.by_id[ts.topic_id] = ts
            self.image.next_producer_id = d.get("next_producer_id", 1000)

    @staticmethod
    def _read_meta_properties(data_dir, node_id, cluster_id):
        path = data_dir / "meta.properties"
        props = {}
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

    def _save(self):
        d = {"topics": [t.to_json() for t in self.image.topics.values()],
             "next_producer_id": self.image.next_producer_id}
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(d, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def register_broker(self, endpoint):
        self.image.brokers[endpoint.node_id] = endpoint

    def create_topic(self, name, num_partitions, replication_factor, configs, internal=False,
                     assignment=None):
        replicas = [self.node_id]  # one broker: every replica list is this node
        ts = TopicState(name, uuid.uuid4(), configs=dict(configs), internal=internal)
        for i in range(num_partitions):
            ts.partitions[i] = PartitionState(list(replicas), self.node_id)
        self.image.topics[name] = ts
        self.image.by_id[ts.topic_id] = ts
        self._save()
        return ts

    def delete_topic(self, name):
        ts = self.image.topics.pop(name)
        self.image.by_id.pop(ts.topic_id, None)
        self._save()
        return ts

    def add_partitions(self, name, new_total, assignment=None):
        """`assignment` is checked to name only this broker: it leads every partition."""
        ts = self.image.topics[name]
        for i in range(len(ts.partitions), new_total):
            ts.partitions[i] = PartitionState([self.node_id], self.node_id)
        self._save()
        return ts

    def set_topic_configs(self, name, configs):
        self.image.topics[name].configs = dict(configs)
        self._save()

    def allocate_producer_id_block(self, size: int) -> int:
        """The first of `size` producer ids, saved as given out before anyone uses them."""
        start = self.image.next_producer_id
        self.image.next_producer_id += size
        self._save()
        return start


def _short_uuid():
    import base64
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
