"""Cluster metadata kept in the Raft-replicated `__cluster_metadata` log, KRaft's only backend.

A cluster node and a single broker alike keep it: a broker started without
`controller.quorum.voters` is the only voter of its own quorum (KRaft's combined mode with one
node), elected at once and committing each record as it appends it. Handlers read an `image`;
`TopicManager` calls the write methods (`store.py`); every write becomes records appended
through the quorum leader, and every node's image is rebuilt from the committed records. Writes are only possible on the
active controller (the quorum leader); the request router forwards admin requests there.
Committed records go to the `MetadataLoader`, which makes each next image and hands it, with
what changed, to the publishers the broker installed (the replica manager makes replicas
leaders or followers from it).

Two views, as KRaft keeps them apart: `image` is what the quorum committed, the same on every
node, and the only one brokers act on; `working` is the active controller's own: the committed
image plus the records it appended and is waiting to commit, so it can validate the next
request against its own decisions. It is replayed from the committed image each time this node
becomes the controller and means nothing on any other node (where it is the image). Neither is
ever changed: each append or commit makes a new one.
"""
from __future__ import annotations

import asyncio
import base64
import logging
import uuid
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

from minilog.connector.batch import InvalidBatch

from ..raft.raft_node import RaftNode
from . import records
from .controller_result import ControllerPurgatory, ControllerResult, NotController
from .delta import replayed
from .image import BrokerEndpoint, MetadataImage
from .json_import import is_blank, mark_imported, pending_import
from .loader import MetadataLoader
from .meta_properties import read_meta_properties
from .records import Record
from .store import MetadataStore

log = logging.getLogger("minilog.broker.metadata")
T = TypeVar("T")


def _cluster_id(config: Any) -> str | None:
    """cluster.id, or one derived from the voters, so that the nodes of a cluster configured
    alike agree without a separate formatting step; a single broker's own (None: a new random
    one, the first time)."""
    if config["cluster.id"] or config.quorum_voters is None:
        return str(config["cluster.id"]) if config["cluster.id"] else None
    spec = ",".join(f"{n}@{h}:{p}" for n, (h, p) in sorted(config.quorum_voters.items()))
    return base64.urlsafe_b64encode(uuid.uuid5(uuid.NAMESPACE_URL, spec).bytes).decode().rstrip("=")


class QuorumMetadataStore(MetadataStore):
    def __init__(self, config: Any, peers: Any, voters: dict[int, tuple[str, int]],
                 open_partition: Callable[[Any], Any],
                 on_refused: Callable[[int], None] = lambda node_id: None) -> None:
        """`voters`: {node id: (host, port)} of the quorum; `open_partition(config)`: the
        `__cluster_metadata` partition the Raft node keeps, opened by whoever runs the broker
        (the server's `metadata_log.py`, as Kafka's KafkaRaftManager makes its metadata log);
        `on_refused(node id)`: a voter's address refused a connection (see `raft_node.py`)."""
        data_dir, node_id = config.data_dir, config.node_id
        data_dir.mkdir(parents=True, exist_ok=True)
        meta = read_meta_properties(data_dir, node_id, _cluster_id(config))
        self.cluster_id = meta["cluster.id"]
        self.node_id = node_id
        self.loader = MetadataLoader(MetadataImage(self.cluster_id))
        self.metadata_offset = -1  # the last applied record's offset
        self.own_endpoint: BrokerEndpoint | None = None
        self.snapshot_every = config["metadata.log.max.record.bytes.between.snapshots"]
        self.partition: Any = open_partition(config)
        self.raft: Any = cast(Any, RaftNode)(node_id, voters, self.partition, peers,
                             election_timeout_ms=config["controller.quorum.election.timeout.ms"],
                             fetch_timeout_ms=config["controller.quorum.fetch.timeout.ms"],
                             listener=self.loader, cluster_id=self.cluster_id,
                             on_refused=on_refused, serde=records)
        self.raft.register(self)  # after the loader: a response goes once the image has it
        self._working: MetadataImage | None = None  # the controller's own view, while leading
        self.purgatory = ControllerPurgatory()  # responses waiting for their records to commit
        self.role_listeners: list[Callable[[bool], None]] = []
        # A single broker's data directory from before it was a quorum: imported once it leads.
        self.data_dir = data_dir
        self._import = pending_import(data_dir) if set(voters) == {node_id} else None

    @property
    def image(self) -> MetadataImage:
        """What the quorum committed, as applied here."""
        return self.loader.image

    @property
    def working(self) -> MetadataImage:
        """The active controller's view (its uncommitted records included); else the image."""
        return self._working if self._working is not None and self.raft.is_leader \
            else self.loader.image

    @property
    def controller_id(self) -> int:
        """Whoever leads the quorum right now (-1: nobody known)."""
        leader = self.raft.leader_id
        return -1 if leader is None else leader

    # -- what Raft hands its listeners (raft_node.RaftListener), the loader first -------------
    def handle_commit(self, batch: list[tuple[int, Record]]) -> None:
        """A committed batch, in log order, which the loader has published: the responses
        waiting for it."""
        self.metadata_offset = batch[-1][0]
        for offset, rec in batch:
            if rec["type"] == records.IMAGE:
                self.raft.delete_before_when_committed(offset)
        self.purgatory.complete_up_to(self.metadata_offset)

    def handle_reset(self) -> None:
        self.metadata_offset = -1
        self.purgatory.reset()

    def handle_leader_change(self, leading: bool) -> None:
        """Raft says this node now leads the quorum, or no longer does: the working view is
        replayed, or dropped with every response still waiting for a commit."""
        self._working = replayed(self.image, self.raft.uncommitted()) if leading else None
        if not leading:
            self.purgatory.fail_all("no longer the active controller")
        elif self._import is not None:
            self._run_import(self._import)
        for listener in self.role_listeners:
            listener(leading)

    def _run_import(self, recs: list[Record]) -> None:
        """Append the old JSON store's records first (unless a previous start committed them),
        and mark the import done once they are committed."""
        self._import = None
        last = self.append(recs) if is_blank(self.working) else self.next_offset - 1
        marked = self.purgatory.wait_for(last, None)
        marked.add_done_callback(
            lambda f: None if f.cancelled() or f.exception() else mark_imported(self.data_dir,
                                                                                last))

    @property
    def is_controller(self) -> bool:
        return bool(self.raft.is_leader)

    def close(self) -> None:
        self.partition.log.close()

    # -- writes (active controller only) ----------------------------------------------------------
    def append(self, recs: Sequence[Record]) -> int:
        """Append through the quorum; the working view has them at once, the image once they
        commit. Returns the last record's offset (to wait for its commit)."""
        last: int = self.raft.append(recs)
        first = last - len(recs) + 1
        self._working = replayed(self.working, [(first + i, rec) for i, rec in enumerate(recs)])
        if self.raft.bytes_since_snapshot >= self.snapshot_every:
            self.raft.bytes_since_snapshot = 0
            try:
                self.raft.append([records.image_record(self._working)])
            except InvalidBatch as e:  # the log keeps growing; the records above are written
                log.warning("no metadata snapshot: %s (raise metadata.log.segment.bytes)", e)
        return last

    @property
    def next_offset(self) -> int:
        """The offset the next record appended gets."""
        return int(self.partition.log_end_offset)

    def submit(self, result: ControllerResult[T]) -> asyncio.Future[T]:
        """Append `result`'s records now; its response, once they (and, without records,
        everything appended before) are committed. Fails with NotController when this node
        does not lead, or stops leading first."""
        if not self.raft.is_leader:
            raise NotController(f"node {self.node_id} is not the active controller")
        last = self.append(result.records) if result.records else self.next_offset - 1
        return self.purgatory.wait_for(last, result.response)

    async def commit(self, result: ControllerResult[T]) -> T:
        """`result`'s response, once its records are committed (see `submit`)."""
        return await self.submit(result)

    async def committed(self) -> None:
        """Once everything appended so far is committed."""
        await self.commit(ControllerResult.of(None))

    def register_broker(self, endpoint: BrokerEndpoint) -> None:
        """This broker's own endpoint; it registers with the controller over the wire."""
        if endpoint.node_id == self.node_id:
            self.own_endpoint = endpoint
