"""The `__cluster_metadata` log (`quorum_partition.py`) as the Raft core's log
(`raft_log.RaftLog`): records encoded into batches by the serde, epochs from the log's leader
epoch cache.

The quorum partition stores the batches and serves voters' and observers' fetches through the
ordinary Fetch handler, long poll included; what a fetch means for Raft (where a follower's log
diverges, how far it got, and so the high watermark) is the core's to decide: the partition's
`follower_fetched` asks the Raft node (`partition.raft`). The partition never moves its own
high watermark: the driver copies the core's.
"""
from __future__ import annotations

from typing import Any, Sequence

from minilog.connector.batch import split_batches
from minilog.connector.records import encode_batch

from ..storage.file_region import FileRegion
from .quorum_partition import QuorumPartition
from .raft_log import RecordSerde


class PartitionLog:
    def __init__(self, partition: QuorumPartition, serde: RecordSerde) -> None:
        self.partition, self.serde = partition, serde
        self.bytes_appended = 0  # since the last snapshot, as the metadata store resets it

    @property
    def start_offset(self) -> int:
        return int(self.partition.log_start_offset)

    @property
    def end_offset(self) -> int:
        return int(self.partition.log_end_offset)

    @property
    def latest_epoch(self) -> int:
        return int(self.partition.epoch_cache.latest_epoch)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        found, end = self.partition.epoch_cache.end_offset_for(epoch,
                                                               self.partition.log_end_offset)
        return int(found), int(end)

    def append_as_leader(self, records: Sequence[Any], epoch: int) -> int:
        data = encode_batch([(None, None, self.serde.encode(r), ()) for r in records])
        (_, header), = split_batches(data)
        result = self.partition.append_as_leader([(data, header)], epoch)
        self.bytes_appended += len(data)
        return int(result.last_offset)

    def append_leader_change(self, leader_id: int, epoch: int) -> int:
        return self.append_as_leader([self.serde.leader_change_record(leader_id, epoch)], epoch)

    def append_as_follower(self, data: bytes) -> None:
        self.partition.append_as_follower(data)

    def read(self, offset: int, max_bytes: int) -> bytes:
        data = self.partition.log.read(offset, max_bytes)
        assert not isinstance(data, FileRegion), "no region_over: read into memory"
        return bytes(data)

    def truncate_to(self, offset: int) -> None:
        self.partition.truncate_to(offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.partition.truncate_fully_and_start_at(offset)
