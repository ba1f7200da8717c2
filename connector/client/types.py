"""Small value types and client-side errors shared by the producer, consumer and admin client.

They are plain NamedTuples so they hash, compare and print well, and cost little per record.
Client-side failures are `KafkaError`s too (with the code Kafka's clients use for them), so a
caller catches one exception type and branches on `.code` / `.name` / `.retriable`.
"""
from typing import Any, NamedTuple

from minilog.connector.protocol import ErrorCode, KafkaError
from minilog.connector.protocol.consumer_protocol import TopicPartition

# A decoded request or response (or one of its structs): the codec builds its classes from the
# schemas at import time, with the schema's field names as attributes, so they are typed by use.
Message = Any

class RecordMetadata(NamedTuple):
    """Where a produced record landed. `offset` is -1 with acks=0 (the broker does not answer)."""
    topic: str
    partition: int
    offset: int
    timestamp: int


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int


class BrokerInfo(NamedTuple):
    node_id: int
    host: str
    port: int
    rack: str | None = None


class PartitionInfo(NamedTuple):
    """One partition as Metadata describes it."""
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    error: str | None = None


class TopicDescription(NamedTuple):
    name: str
    topic_id: object  # uuid.UUID; all zeros when the broker has no topic ids
    internal: bool
    partitions: tuple[PartitionInfo, ...]  # sorted by partition


class Reassignment(NamedTuple):
    """A partition reassignment under way (KIP-455): the replica set while it runs, the
    replicas it adds and those it removes."""
    replicas: list[int]
    adding: list[int]
    removing: list[int]


class ClusterDescription(NamedTuple):
    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerInfo, ...]


class ConfigEntry(NamedTuple):
    name: str
    value: str | None
    read_only: bool = False
    source: int = -1  # Kafka's ConfigSource: 1 topic, 4 static broker, 5 default, ...
    sensitive: bool = False

    @property
    def is_default(self) -> bool:
        return self.source == 5


class NewTopic(NamedTuple):
    name: str
    num_partitions: int = 1
    replication_factor: int = -1  # -1: the broker's default.replication.factor
    config: dict[str, str] | None = None


class KafkaConnectionError(KafkaError):
    """A broker could not be reached, or the connection to it broke. `refused`: nothing
    listens at its address (its process is gone, or not started yet)."""

    def __init__(self, message: str, refused: bool = False) -> None:
        super().__init__(ErrorCode.NETWORK_EXCEPTION, message)
        self.detail = message
        self.refused = refused


class KafkaTimeoutError(KafkaError):
    """No answer in time (connect, request, delivery or an API deadline)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.REQUEST_TIMED_OUT, message)


class ConfigError(ValueError):
    """A configuration key is unknown or its value is invalid; raised when the client is built."""


__all__ = [
    "BrokerInfo",
    "ClusterDescription",
    "ConfigEntry",
    "ConfigError",
    "ErrorCode",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "NewTopic",
    "OffsetAndTimestamp",
    "PartitionInfo",
    "RecordMetadata",
    "TopicDescription",
    "TopicPartition",
]
