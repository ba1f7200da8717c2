"""Cluster metadata kept in the Raft-replicated `__cluster_metadata` log (multi-broker mode).

The same interface as `LocalMetadataStore` (an `image` for handlers, and the write methods
`TopicManager` calls), but every write becomes records appended through the quorum leader, and
every node's image is rebuilt from the committed records. Writes are only possible on the
active controller (the quorum leader); the request router forwards admin requests there.
Listeners hear of each committed record and the partitions it changed (the replica manager
makes replicas leaders or followers from them).

Two views, as KRaft keeps them apart: `image` is what the quorum committed, the same on every
node, and the only one brokers act on; `working` is the active controller's own: the committed
image plus the records it appended and is waiting to commit, so it can validate the next
request against its own decisions. It is rebuilt from the committed image each time this node
becomes the controller and means nothing on any other node (where it is the image).
"""
import copy
import base64
import logging
import uuid

from minilog.connector.batch import InvalidBatch

from ..raft.raft_node import METADATA_TOPIC, RaftNode
from ..replication.partition import Partition
from ..storage.leader_epoch_cache import LeaderEpochCache
from ..storage.log import Log, LogConfig
from . import records
from .image import LocalMetadataStore, MetadataImage, PartitionState, TopicState
from .placement import assign_replicas

log = logging.getLogger("minilog.broker.metadata")


def _cluster_id(config):
    """cluster.id, or one derived from the voters, so that the nodes of a cluster configured
    alike agree without a separate formatting step."""
    if config["cluster.id"]:
        return config["cluster.id"]
    spec = ",".join(f"{n}@{h}:{p}" for n, (h, p) in sorted(config.quorum_voters.items()))
    return base64.urlsafe_b64encode(uuid.uuid5(uuid.NAMESPACE_URL, spec).bytes).decode().rstrip("=")


class QuorumImage(MetadataImage):
    """The image, whose controller is whoever leads the quorum right now."""

    raft = None

    @property
    def controller_id(self):
        leader = self.raft.leader_id if self.raft else None
        return -1 if leader is None else leader

    @controller_id.setter
    def controller_id(self, _):
        pass


class QuorumMetadataStore:
    def __init__(self, config, peers, on_refused=lambda node_id: None):
        """`on_refused(node id)`: a voter's address refused a connection (see `raft_node.py`)."""
        data_dir, node_id = config.data_dir, config.node_id
        data_dir.mkdir(parents=True, exist_ok=True)
        meta = LocalMetadataStore._read_meta_properties(data_dir, node_id, _cluster_id(config))
        self.cluster_id = meta["cluster.id"]
        self.node_id = node_id
        self.image = QuorumImage(self.cluster_id)
        self.metadata_offset = -1  # the last applied record's offset
        self.listeners = []        # fn(record, changed partition keys); fn(None, None) on reset
        self.own_endpoint = None
        segment_bytes = config["metadata.log.segment.bytes"]
        metadata_log = Log(data_dir / f"{METADATA_TOPIC}-0",
                           LogConfig(segment_bytes=segment_bytes, max_message_bytes=segment_bytes))
        self.snapshot_every = config["metadata.log.max.record.bytes.between.snapshots"]
        self.partition = Partition(METADATA_TOPIC, 0, metadata_log)
        self.partition.wake_all = True  # voters apply commits as soon as they are made
        self.partition.epoch_cache = LeaderEpochCache.load(metadata_log)
        self.raft = RaftNode(node_id, config.quorum_voters, self.partition, peers,
                             election_timeout_ms=config["controller.quorum.election.timeout.ms"],
                             fetch_timeout_ms=config["controller.quorum.fetch.timeout.ms"],
                             apply=self._apply, reset=self._reset,
                             on_role_change=self._role_changed, cluster_id=self.cluster_id,
                             on_refused=on_refused, serde=records)
        self.image.raft = self.raft
        self.working = self.image
        self.role_listeners = []

    # -- applying committed records -------------------------------------------------------------
    def _apply(self, offset, rec):
        changed = records.apply(self.image, rec, offset)
        self.metadata_offset = offset
        if rec["type"] == "image":
            self.raft.delete_before_when_committed(offset)
        for listener in self.listeners:
            listener(rec, changed)

    def _reset(self):
        image = QuorumImage(self.cluster_id)
        image.raft = self.raft
        self.image.__dict__.update(image.__dict__)  # handlers keep their reference
        self.metadata_offset = -1
        for listener in self.listeners:
            listener(None, None)

    def _role_changed(self, leading):
        self.working = self._working_view() if leading else self.image
        for listener in self.role_listeners:
            listener(leading)

    def _working_view(self):
        """The committed image plus this leader's uncommitted tail, in a copy of its own."""
        view = copy.deepcopy(self.image, memo={id(self.raft): self.raft})
        for offset, rec in self.raft.uncommitted():
            records.apply(view, rec, offset)
        return view

    @property
    def is_controller(self):
        return self.raft.is_leader

    def close(self):
        self.partition.log.close()

    # -- writes (active controller only) ----------------------------------------------------------
    def append(self, recs):
        """Append through the quorum; the working view has them at once, the image once they
        commit. Returns the last record's offset (to wait for its commit)."""
        last = self.raft.append(recs)
        for i, rec in enumerate(recs):
            records.apply(self.working, rec, last - len(recs) + 1 + i)
        if self.raft.bytes_since_snapshot >= self.snapshot_every:
            self.raft.bytes_since_snapshot = 0
            try:
                self.raft.append([records.image_record(self.working)])
            except InvalidBatch as e:  # the log keeps growing; the records above are written
                log.warning("no metadata snapshot: %s (raise metadata.log.segment.bytes)", e)
        return last

    def register_broker(self, endpoint):
        """This broker's own endpoint; it registers with the controller over the wire."""
        if endpoint.node_id == self.node_id:
            self.own_endpoint = endpoint

    def create_topic(self, name, num_partitions, replication_factor, configs, internal=False,
                     assignment=None):
        """`assignment` ({partition: [replica ids]}, preferred leader first) as the client
        asked for it, else replicas placed across the live brokers."""
        view = self.working
        ts = TopicState(name, uuid.uuid4(), configs=dict(configs), internal=internal)
        if not assignment:
            assignment = assign_replicas(list(view.brokers), 0, num_partitions,
                                         replication_factor, len(view.topics))
        recs = [records.topic_record(ts)]
        for i, replicas in sorted(assignment.items()):
            isr = [r for r in replicas if r in view.brokers]  # a manual one may name fenced ones
            recs.append(records.partition_record(name, i, PartitionState(
                list(replicas), isr[0] if isr else -1, isr=isr or list(replicas))))
        self.append(recs)
        return view.topics[name]

    def delete_topic(self, name):
        ts = self.working.topics[name]
        self.append([records.remove_topic_record(name)])
        return ts

    def add_partitions(self, name, new_total, assignment=None):
        """`assignment`: [replica ids] of each new partition, else placed across live brokers."""
        view = self.working
        ts = view.topics[name]
        rf = len(ts.partitions[0].replicas) if ts.partitions else 1
        current = len(ts.partitions)
        if assignment:
            assignment = {current + i: list(r) for i, r in enumerate(assignment)}
        else:
            assignment = assign_replicas(list(view.brokers), current, new_total - current, rf,
                                         len(view.topics))
        self.append([records.partition_record(name, i, PartitionState(r, r[0]))
                     for i, r in assignment.items()])
        return ts

    def set_topic_configs(self, name, configs):
        self.append([records.configs_record(name, dict(configs))])
