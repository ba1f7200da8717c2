"""MirrorCheckpointConnector's work for one flow `A->B`, on the driver: the offset syncs the
copy committed on B (staging topic, read_committed) forwarded to MM2's `mm2-offset-syncs.B.
internal` on A (or, with `offset-syncs.topic.location = target`, `mm2-offset-syncs.A.internal`
on B, KIP-716); the consumer groups on A (MM2's `groups` / `groups.exclude`) translated into
checkpoints in `A.checkpoints.internal` on B; and, with `sync.group.offsets.enabled`, the
translated offsets committed to the same groups on B while they have no active members there
(never moving a group back: a group already further on B keeps its offset, as MM2 does).

Order matters for exactness: the copy's progress on A is read before the syncs, since it is
committed only after the micro-batches up to it were committed on B, so every sync below it
is then visible (`translate.py`). That is why translation reads the staging topic, wherever
MM2's offset-syncs topic is: MM2's topic is compacted by partition and written after the fact,
for Kafka's own readers (`RemoteClusterUtils`).
"""
from __future__ import annotations

import logging
import re

from minilog.connector.client import AdminClient, Consumer, Producer, TopicPartition

from .config import Flow
from .flow import pattern, progress_group
from .formats import Checkpoint, OffsetSync
from .sink import staging_topic
from .topics import ensure_internal
from .translate import OffsetSyncStore

log = logging.getLogger("minilog.mirror")
_ACTIVE = ("PreparingRebalance", "CompletingRebalance", "Stable", "Assigning", "Reconciling")


def read_topic(consumer: Consumer, admin: AdminClient, topic: str, start: int):
    """((key, value) of the committed records of `topic`-0 from `start`, next position)."""
    tp = TopicPartition(topic, 0)
    end = admin.list_offsets({tp: "latest"}, isolation_level="read_committed")[tp].offset
    records: list[tuple[bytes, bytes]] = []
    if end > start:
        for batch in consumer.fetch_range_arrow(tp, start, end, include_headers=False):
            records += zip(batch.column("key").to_pylist(), batch.column("value").to_pylist())
    return records, max(start, end)


class Checkpointer:
    def __init__(self, flow: Flow, source_admin: AdminClient, target_admin: AdminClient,
                 forwards: bool = True):
        self.flow, self.forwards = flow, forwards  # forwards: keeps syncs for forward_syncs
        self.source_admin, self.target_admin = source_admin, target_admin
        self.store = OffsetSyncStore()
        self.position = 0                      # in the staging topic
        self.unforwarded: list[OffsetSync] = []
        self.forwarded: set[OffsetSync] | None = None  # in MM2's offset-syncs topic
        self.emitted: dict[tuple[str, str, int], tuple[int, int]] = {}
        self.translated: dict[str, dict[TopicPartition, int]] = {}
        self._consumer: Consumer | None = None
        self._producers: dict[str, Producer] = {}
        self._topics_ready: set[tuple[str, str]] = set()

    # -- clients ---------------------------------------------------------------------------
    @property
    def consumer(self) -> Consumer:
        if self._consumer is None:
            self._consumer = Consumer({**self.flow.target_client,
                                       "isolation.level": "read_committed"})
        return self._consumer

    def producer(self, side: str) -> Producer:
        if side not in self._producers:
            client = self.flow.source_client if side == "source" else self.flow.target_client
            self._producers[side] = Producer({**client, "acks": "all",
                                              "enable.idempotence": True, "linger.ms": 5})
        return self._producers[side]

    def ensure_internal(self, side: str, topic: str, replication_factor: int,
                        compact: bool = True) -> None:
        """One of MM2's internal topics on `side` ("source" or "target"), once."""
        if (side, topic) not in self._topics_ready:
            admin = self.source_admin if side == "source" else self.target_admin
            ensure_internal(admin, topic, replication_factor, compact)
            self._topics_ready.add((side, topic))

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
        for p in self._producers.values():
            p.close()

    # -- offset syncs ----------------------------------------------------------------------
    def read_syncs(self) -> int:
        records, self.position = read_topic(self.consumer, self.target_admin,
                                            staging_topic(self.flow), self.position)
        for key, value in records:
            sync = OffsetSync.parse(key, value)
            self.store.add(sync)
            if self.forwards:
                self.unforwarded.append(sync)
        return len(records)

    def forward_syncs(self) -> None:
        """The syncs to MM2's offset-syncs topic, on the cluster `offset-syncs.topic.location`
        names, each once: what is there already, read at the first call, is not written again.
        Each sync is a distinct fact (a copy rewound by an alter of its offsets writes syncs
        below earlier ones), so it is their set that is remembered, not the last of each
        partition."""
        side, topic = self.flow.offset_syncs_location, self.flow.offset_syncs_topic
        self.ensure_internal(side, topic, self.flow.offset_syncs_rf)
        if self.forwarded is None:
            self.forwarded = set()
            client, admin = ((self.flow.source_client, self.source_admin) if side == "source"
                             else (self.flow.target_client, self.target_admin))
            with Consumer(client) as c:
                for key, value in read_topic(c, admin, topic, 0)[0]:
                    self.forwarded.add(OffsetSync.parse(key, value))
        producer = self.producer(side)
        deliveries = []
        for s in self.unforwarded:
            if s not in self.forwarded:
                deliveries.append(producer.send(topic, s.value(), s.key(), partition=0))
                self.forwarded.add(s)
        producer.flush()
        for d in deliveries:
            d.result(0)
        self.unforwarded.clear()

    # -- checkpoints -----------------------------------------------------------------------
    def groups(self) -> list[str]:
        own = progress_group(self.flow)
        return [g.group_id for g in self.source_admin.list_groups()
                if g.group_id != own and g.protocol_type in ("consumer", "")
                and self.flow.wants_group(g.group_id)]

    def emit_checkpoints(self) -> list[Checkpoint]:
        """Translate every wanted group's offsets on the source; write the checkpoints that
        changed to the checkpoints topic on the target."""
        progress = {tp: om.offset for tp, om in self.source_admin.list_group_offsets(
            progress_group(self.flow)).items() if om is not None}
        self.read_syncs()
        wanted = re.compile(pattern(self.flow))
        fresh: list[Checkpoint] = []
        for group in self.groups():
            offsets = self.source_admin.list_group_offsets(group)
            translated = self.translated.setdefault(group, {})
            for tp, om in offsets.items():
                if om is None or om.offset < 0 or not wanted.search(tp.topic):
                    continue
                down = self.store.translate(tp.topic, tp.partition, om.offset, progress.get(tp))
                if down is None:
                    continue
                remote = self.flow.policy.remote_topic(self.flow.source, tp.topic)
                translated[TopicPartition(remote, tp.partition)] = down
                key = (group, remote, tp.partition)
                if self.emitted.get(key) != (om.offset, down):
                    fresh.append(Checkpoint(group, remote, tp.partition, om.offset, down,
                                            om.metadata or ""))
        self._write_checkpoints(fresh)
        return fresh

    def _write_checkpoints(self, checkpoints: list[Checkpoint]) -> None:
        if not checkpoints:
            return
        topic = self.flow.policy.checkpoints_topic(self.flow.source)
        self.ensure_internal("target", topic, self.flow.checkpoints_rf)
        producer = self.producer("target")
        deliveries = [producer.send(topic, c.value(), c.key(), partition=0) for c in checkpoints]
        producer.flush()
        for d in deliveries:
            d.result(0)
        for c in checkpoints:
            self.emitted[(c.group, c.topic, c.partition)] = (c.upstream_offset,
                                                             c.downstream_offset)

    # -- group offsets on the target --------------------------------------------------------
    def sync_group_offsets(self) -> dict[str, dict[TopicPartition, int]]:
        """Commit the translated offsets to the groups on the target that have no active
        members there, where the target's offset is behind; what was committed."""
        done: dict[str, dict[TopicPartition, int]] = {}
        if not self.translated:
            return done
        states = self.target_admin.describe_groups(list(self.translated))
        for group, offsets in self.translated.items():
            state = states.get(group)
            if state is not None and (state.members or state.state in _ACTIVE):
                continue
            current = self.target_admin.list_group_offsets(group, list(offsets))
            ahead = {tp: off for tp, off in offsets.items()
                     if current.get(tp) is None or current[tp].offset < off}
            if ahead:
                self.target_admin.alter_group_offsets(group, ahead)
                done[group] = ahead
                log.info("%s: group %s offsets synced on %s: %s", self.flow.name, group,
                         self.flow.target, {f"{tp.topic}-{tp.partition}": o
                                            for tp, o in ahead.items()})
        return done
