"""The metadata log as Raft keeps it (`QuorumPartition` over a real storage log, in process):
what the Fetch handler reads of it is what the Raft core decided, and every change wakes every
waiting fetch, since KRaft answers a voter as soon as there is anything new for it."""
import asyncio
import json

from minilog.broker.raft.partition_log import PartitionLog
from minilog.broker.raft.quorum_partition import QuorumPartition
from minilog.broker.storage.leader_epoch_cache import LeaderEpochCache
from minilog.broker.storage.log import Log
from minilog.broker.storage.log_config import LogConfig


class JsonSerde:
    @staticmethod
    def encode(record):
        return json.dumps(record).encode()

    @staticmethod
    def decode(value):
        return json.loads(value)

    @staticmethod
    def leader_change_record(leader, epoch):
        return {"leader": leader, "epoch": epoch}


def _metadata_log(tmp_path):
    log = Log(tmp_path / "__cluster_metadata-0", LogConfig())
    partition = QuorumPartition("__cluster_metadata", log, LeaderEpochCache.load(log))
    return partition, PartitionLog(partition, JsonSerde())


def test_a_fetch_of_the_metadata_log_reads_to_the_log_end_and_a_consumer_to_the_high_watermark(
        tmp_path):
    partition, raft_log = _metadata_log(tmp_path)
    partition.adopt(1, 1, True, 0)  # leading epoch 1, as the Raft core decided
    raft_log.append_leader_change(1, 1)
    raft_log.append_as_leader([{"n": 1}, {"n": 2}], 1)
    assert partition.high_watermark == 0, "the log moved its own high watermark"
    assert partition.read(0, 1 << 20, committed_only=True) == b""
    assert partition.read(0, 1 << 20, committed_only=False) == raft_log.read(0, 1 << 20) != b""
    assert raft_log.end_offset_for_epoch(1) == (1, 3)


def test_every_change_wakes_every_waiting_fetch(tmp_path):
    async def scenario():
        partition, raft_log = _metadata_log(tmp_path)
        partition.adopt(1, 1, True, 0)  # leading epoch 1, as the Raft core decided
        loop = asyncio.get_running_loop()
        voter, consumer = loop.create_future(), loop.create_future()
        partition.add_waiter(voter, follower=True)
        partition.add_waiter(consumer)
        raft_log.append_as_leader([{"n": 1}], 1)  # an append, the high watermark unmoved
        assert voter.done() and consumer.done(), "an append left a fetch waiting"
        again = loop.create_future()
        partition.add_waiter(again, follower=True)
        assert not partition.adopt(1, 1, True, 0) and not again.done()  # nothing changed
        assert partition.adopt(1, 1, True, 1), "the core's high watermark moved"
        assert again.done(), "a new high watermark left a fetch waiting"
    asyncio.run(asyncio.wait_for(scenario(), 10))


def test_a_truncation_takes_the_epochs_and_the_high_watermark_with_it(tmp_path):
    partition, raft_log = _metadata_log(tmp_path)
    partition.adopt(1, 1, True, 0)  # leading epoch 1, as the Raft core decided
    raft_log.append_as_leader([{"n": 1}, {"n": 2}], 1)
    raft_log.append_as_leader([{"n": 3}], 2)
    partition.adopt(2, 1, True, 3)
    raft_log.truncate_to(2)
    assert (partition.log_end_offset, partition.high_watermark) == (2, 2)
    assert raft_log.latest_epoch == 1
    raft_log.truncate_fully_and_start_at(10)
    assert (partition.log_start_offset, partition.log_end_offset,
            partition.high_watermark, raft_log.latest_epoch) == (10, 10, 10, -1)
