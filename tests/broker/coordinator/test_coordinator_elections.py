"""The coordinators learn what they lead from the committed metadata, with the leader epoch:
the metadata loader publishes each delta to `CoordinatorElections`, which tells the group
coordinator of its elections and resignations; the runtime loads a shard by replaying its
partition's records and ignores an election or resignation no newer than the shard's epoch."""
from __future__ import annotations

import asyncio
import uuid

from coordinator_standins import StandInBroker
from memory_partitions import MemoryPartitions

from minilog.broker.coordinator.coordinator_elections import CoordinatorElections
from minilog.broker.coordinator.group.group_coordinator import GroupCoordinator
from minilog.broker.coordinator.group.group_records import (
    OffsetAndMetadata,
    offset_key,
    offset_value,
)
from minilog.broker.coordinator.runtime import CoordinatorRuntime, LoggedBatch
from minilog.broker.metadata import records
from minilog.broker.metadata.image import MetadataImage, PartitionState, TopicState
from minilog.broker.metadata.loader import MetadataLoader

OFFSETS = "__consumer_offsets"
HERE, OTHER = 1, 2
COMMITTED = OffsetAndMetadata(42)


class Replicas:
    """The replica manager's answer: this broker's replica leads at the epoch the partitions
    in memory are led at."""

    def __init__(self, partitions: MemoryPartitions) -> None:
        self.partitions = partitions

    def leading_epoch(self, topic: str, index: int) -> int | None:
        return self.partitions.leader_epochs.get((topic, index))


class Cluster:
    """A metadata loader publishing to the elections of one group coordinator on broker 1."""

    def __init__(self) -> None:
        self.partitions = MemoryPartitions()
        self.partitions.logs[(OFFSETS, 0)] = [
            LoggedBatch([(offset_key("g", "t", 0), offset_value(COMMITTED))], None)]
        broker = StandInBroker(self.partitions, {"t": 1}, offsets_topic_num_partitions=1,
                               node_id=HERE)
        self.coordinator = GroupCoordinator(broker, CoordinatorRuntime(self.partitions)).serve([])
        self.loader = MetadataLoader(MetadataImage("c"))
        self.loader.install([CoordinatorElections(HERE, {OFFSETS: self.coordinator},
                                                  Replicas(self.partitions))])
        self.offset = 0
        self.commit(records.topic_record(TopicState(OFFSETS, uuid.uuid4(), internal=True)))

    def commit(self, *recs: records.Record) -> None:
        self.offset += len(recs)
        self.loader.handle_commit([(self.offset, r) for r in recs])

    async def lead(self, leader: int, epoch: int) -> None:
        """Commit partition 0's leadership and let the publisher's pass run."""
        if leader == HERE:
            self.partitions.lead(OFFSETS, 0, epoch)
        else:
            self.partitions.leader_epochs.pop((OFFSETS, 0), None)
        self.commit(records.partition_record(OFFSETS, 0, PartitionState((HERE, OTHER), leader,
                                                                        epoch)))
        await asyncio.sleep(0)

    @property
    def epoch(self) -> int | None:
        return self.coordinator.runtime.epoch(OFFSETS, 0)

    def offsets(self) -> dict | None:
        group = self.coordinator.groups.get("g")
        return None if group is None else group.offsets


def run(scenario) -> None:
    async def bounded() -> None:
        await asyncio.wait_for(scenario(), 30)
    asyncio.run(bounded())


def test_an_election_loads_the_shard_by_replaying_its_partition():
    async def scenario() -> None:
        cluster = Cluster()
        assert cluster.epoch is None and cluster.offsets() is None
        await cluster.lead(HERE, 3)
        assert cluster.epoch == 3
        assert cluster.offsets() == {("t", 0): COMMITTED}

    run(scenario)


def test_an_election_waits_until_the_replica_leads_at_its_epoch():
    async def scenario() -> None:
        cluster = Cluster()
        cluster.commit(records.partition_record(OFFSETS, 0, PartitionState((HERE,), HERE, 3)))
        await asyncio.sleep(0)
        assert cluster.epoch is None  # the replica manager has not made it leader yet
        cluster.partitions.lead(OFFSETS, 0, 3)
        cluster.loader.publishers[0].broker_ready()
        await asyncio.sleep(0)
        assert cluster.epoch == 3 and cluster.offsets() == {("t", 0): COMMITTED}

    run(scenario)


def test_a_resignation_older_than_the_shard_is_ignored_and_a_newer_one_unloads():
    async def scenario() -> None:
        cluster = Cluster()
        await cluster.lead(HERE, 5)
        await cluster.lead(OTHER, 4)  # a stale view: another leader, at an older epoch
        assert cluster.epoch == 5 and cluster.offsets() == {("t", 0): COMMITTED}
        cluster.coordinator.on_resignation(0, 5)  # no newer than the shard's either
        assert cluster.epoch == 5
        await cluster.lead(OTHER, 6)
        assert cluster.epoch is None and cluster.offsets() is None

    run(scenario)


def test_a_stale_election_is_ignored_and_a_newer_one_reloads():
    async def scenario() -> None:
        cluster = Cluster()
        await cluster.lead(HERE, 5)
        shard = cluster.coordinator.runtime.shard(OFFSETS, 0)
        cluster.coordinator.on_election(0, 4)
        assert cluster.coordinator.runtime.shard(OFFSETS, 0) is shard
        await cluster.lead(HERE, 5)  # an ISR-only change: the same leadership, kept
        assert cluster.coordinator.runtime.shard(OFFSETS, 0) is shard
        cluster.partitions.logs[(OFFSETS, 0)].append(
            LoggedBatch([(offset_key("g", "t", 0), offset_value(OffsetAndMetadata(43)))], None))
        await cluster.lead(HERE, 7)
        assert cluster.epoch == 7 and cluster.coordinator.runtime.shard(OFFSETS, 0) is not shard
        assert cluster.offsets() == {("t", 0): OffsetAndMetadata(43)}

    run(scenario)
