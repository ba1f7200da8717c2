"""minilog's Kafka client: Producer, Consumer and AdminClient over one asyncio core.

The synchronous classes suit scripts and tests; `AsyncProducer`, `AsyncConsumer` and
`AsyncAdminClient` are the cores themselves, for asyncio applications. Configuration is a dict
of Kafka's dotted names (`bootstrap.servers`, `acks`, `auto.offset.reset`, ...); every failure
is a `KafkaError` carrying Kafka's error name and code.
"""
from minilog.connector.records import ConsumerRecord

from .admin import AdminClient, AsyncAdminClient
from .config import Config
from .consumer import AsyncConsumer, Consumer
from .partitioner import murmur2, murmur2_partition
from .producer import AsyncProducer, DeliveryFuture, Producer
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

__all__ = ["AdminClient", "AsyncAdminClient", "AsyncConsumer", "AsyncProducer", "BrokerInfo",
           "ClusterDescription", "Config", "ConfigEntry", "ConfigError", "Consumer",
           "ConsumerRecord", "DeliveryFuture", "ErrorCode", "KafkaConnectionError", "KafkaError",
           "KafkaTimeoutError", "NewTopic", "OffsetAndTimestamp", "PartitionInfo", "Producer",
           "RecordMetadata", "TopicDescription", "TopicPartition", "murmur2", "murmur2_partition"]
