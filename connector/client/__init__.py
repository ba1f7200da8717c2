"""minilog's Kafka client: Producer, Consumer and AdminClient over one asyncio core.

The synchronous classes suit scripts and tests; `AsyncProducer`, `AsyncConsumer` and
`AsyncAdminClient` are the cores themselves, for asyncio applications. Configuration is a dict
of Kafka's dotted names (`bootstrap.servers`, `acks`, `auto.offset.reset`, ...); every failure
is a `KafkaError` carrying Kafka's error name and code.

Consumer groups: `Consumer.subscribe` with `group.id` (assignors `range`, `roundrobin`,
`cooperative-sticky`), `commit`/`committed` with `OffsetAndMetadata`, and the AdminClient's
`list_groups`, `describe_groups`, `reset_group_offsets` and friends.
"""
from minilog.connector.records import ConsumerRecord

from .admin import AdminClient, AsyncAdminClient
from .admin_groups import GroupDescription, GroupListing, MemberDescription
from .config import Config
from .consumer import AsyncConsumer
from .delivery import BulkDelivery
from .group_api import OffsetAndMetadata
from .partitioner import murmur2, murmur2_partition
from .producer import AsyncProducer, DeliveryFuture, Producer
from .sync_consumer import Consumer
from .transactions import PreparedTxnState, TransactionError
from .types import (
                    BrokerInfo,
                    ClusterDescription,
                    ConfigEntry,
                    ConfigError,
                    ErrorCode,
                    KafkaConnectionError,
                    KafkaError,
                    KafkaTimeoutError,
                    NewTopic,
                    OffsetAndTimestamp,
                    PartitionInfo,
                    RecordMetadata,
                    TopicDescription,
                    TopicPartition,
)
from .validation import LogTruncationError

__all__ = ["AdminClient", "AsyncAdminClient", "AsyncConsumer", "AsyncProducer", "BrokerInfo",
           "BulkDelivery", "ClusterDescription", "Config", "ConfigEntry", "ConfigError",
           "Consumer", "ConsumerRecord", "DeliveryFuture", "ErrorCode", "GroupDescription",
           "GroupListing",
           "KafkaConnectionError", "KafkaError", "KafkaTimeoutError", "LogTruncationError",
           "MemberDescription",
           "NewTopic", "OffsetAndMetadata", "OffsetAndTimestamp", "PartitionInfo",
           "PreparedTxnState", "Producer", "RecordMetadata", "TopicDescription",
           "TopicPartition", "TransactionError", "murmur2", "murmur2_partition"]
