"""The `__cluster_metadata` log the Raft node keeps, opened by the server.

Kafka's server builds the metadata log (`KafkaRaftManager` makes a `KafkaMetadataLog` over the
storage layer's log) and hands the Raft client to the metadata module, which never knows how
the log is stored. Here it is the Raft package's `QuorumPartition` over a storage `Log` and its
leader epoch cache; voters' and observers' fetches reach it through the ordinary Fetch handler
(long poll included; `handlers/fetch.py`). The metadata store is given this function and calls
it where it opens its log.
"""
from __future__ import annotations

from typing import Any

from ..raft.quorum_partition import QuorumPartition
from ..raft.raft_node import METADATA_TOPIC
from ..storage.leader_epoch_cache import LeaderEpochCache
from ..storage.log import Log
from ..storage.log_config import LogConfig


def open_metadata_partition(config: Any) -> QuorumPartition:
    """The metadata log of `config.data_dir`, segments of `metadata.log.segment.bytes`."""
    segment_bytes = config["metadata.log.segment.bytes"]
    metadata_log = Log(config.data_dir / f"{METADATA_TOPIC}-0",
                       LogConfig(segment_bytes=segment_bytes, max_message_bytes=segment_bytes))
    return QuorumPartition(METADATA_TOPIC, metadata_log, LeaderEpochCache.load(metadata_log))
