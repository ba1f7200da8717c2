"""minilog's Kafka client: Producer, Consumer and AdminClient over one asyncio core.

The synchronous classes suit scripts and tests; `AsyncProducer`, `AsyncConsumer` and
`AsyncAdminClient` are the cores themselves, for asyncio applications. Configuration is a dict
of Kafka's dotted names (`bootstrap.servers`, `acks`, `auto.offset.reset`, ...); every failure
is a `KafkaError` carrying Kafka's error name and code.

Consumer groups: `Consumer.subscribe` with `group.id` (assignors `range`, `roundrobin`,
`cooperative-sticky`), `commit`/`committed` with `OffsetAndMetadata`, and the AdminClient's
`list_groups`, `describe_groups`, `reset_group_offsets` and friends.

The names are imported on first use (PEP 562): a process that needs only `Config` or the error
types (Spark's planning steps, which fork a Python process each and import the data source's
options) does not pay for the producer, consumer and admin machinery (a third of a second).
"""
import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
                        Reassignment,
                        RecordMetadata,
                        TopicDescription,
                        TopicPartition,
    )
    from .validation import LogTruncationError

# Where each public name lives (relative modules are this package's).
_WHERE = {
    "ConsumerRecord": "minilog.connector.records",
    "AdminClient": ".admin", "AsyncAdminClient": ".admin",
    "GroupDescription": ".admin_groups", "GroupListing": ".admin_groups",
    "MemberDescription": ".admin_groups",
    "Config": ".config", "AsyncConsumer": ".consumer", "BulkDelivery": ".delivery",
    "OffsetAndMetadata": ".group_api", "murmur2": ".partitioner",
    "murmur2_partition": ".partitioner", "AsyncProducer": ".producer",
    "DeliveryFuture": ".producer", "Producer": ".producer", "Consumer": ".sync_consumer",
    "PreparedTxnState": ".transactions", "TransactionError": ".transactions",
    **dict.fromkeys(("BrokerInfo", "ClusterDescription", "ConfigEntry", "ConfigError",
                     "ErrorCode", "KafkaConnectionError", "KafkaError", "KafkaTimeoutError",
                     "NewTopic", "OffsetAndTimestamp", "PartitionInfo", "Reassignment",
                     "RecordMetadata", "TopicDescription", "TopicPartition"), ".types"),
    "LogTruncationError": ".validation",
}

__all__ = ["AdminClient", "AsyncAdminClient", "AsyncConsumer", "AsyncProducer", "BrokerInfo",
           "BulkDelivery", "ClusterDescription", "Config", "ConfigEntry", "ConfigError",
           "Consumer", "ConsumerRecord", "DeliveryFuture", "ErrorCode", "GroupDescription",
           "GroupListing", "KafkaConnectionError", "KafkaError", "KafkaTimeoutError",
           "LogTruncationError", "MemberDescription", "NewTopic", "OffsetAndMetadata",
           "OffsetAndTimestamp", "PartitionInfo", "PreparedTxnState", "Producer",
           "Reassignment", "RecordMetadata", "TopicDescription", "TopicPartition", "TransactionError",
           "murmur2", "murmur2_partition"]


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})
