"""The broker's settings as Kafka names them: every key with its type and default, those
accepted without effect, those deprecated, and how a value is read as its type.

Kafka keeps these definitions apart from the server that reads them (`server-common`'s
`org.apache.kafka.server.config`, beside `KafkaConfig`), so the parts below the server (dynamic
broker configs in the metadata, TLS, SCRAM and the authorizer) check settings without importing
the server. `broker/server/config.py` builds a broker's `BrokerConfig` from them.
"""
from __future__ import annotations

from typing import Any

from .listeners import SECURITY_KEYS

# Broker key -> (type, default). Durations follow Kafka's precedence (ms over minutes over hours).
BROKER_KEYS: dict[str, tuple[type, Any]] = {
    "node.id": (int, 1),
    "broker.id": (int, None),
    "listeners": (str, "PLAINTEXT://127.0.0.1:9092"),
    "advertised.listeners": (str, None),
    "log.dirs": (str, None),
    "log.dir": (str, "/tmp/minilog-logs"),
    "cluster.id": (str, None),
    "num.partitions": (int, 1),
    "default.replication.factor": (int, 1),
    "auto.create.topics.enable": (bool, True),
    "delete.topic.enable": (bool, True),
    "log.retention.hours": (int, 168),
    "log.retention.minutes": (int, None),
    "log.retention.ms": (int, None),
    "log.retention.bytes": (int, -1),
    "log.segment.bytes": (int, 1024 ** 3),
    "log.roll.hours": (int, 168),
    "log.roll.ms": (int, None),
    "log.flush.interval.messages": (int, None),
    "log.flush.interval.ms": (int, None),
    "log.index.interval.bytes": (int, 4096),
    "log.retention.check.interval.ms": (int, 300000),
    "log.message.timestamp.type": (str, "CreateTime"),
    "log.cleanup.policy": (str, "delete"),
    "log.cleaner.backoff.ms": (int, 15000),
    "message.max.bytes": (int, 1048588),
    "socket.request.max.bytes": (int, 104857600),
    "offsets.topic.num.partitions": (int, 50),
    "offsets.retention.minutes": (int, 10080),
    "offsets.retention.check.interval.ms": (int, 600000),
    "offsets.commit.timeout.ms": (int, 5000),
    "group.initial.rebalance.delay.ms": (int, 3000),
    "group.min.session.timeout.ms": (int, 6000),
    "group.max.session.timeout.ms": (int, 1800000),
    # KIP-848's consumer group protocol (broker/coordinator/group/consumer_group_coordinator.py)
    "group.coordinator.rebalance.protocols": (str, "classic,consumer"),
    "group.consumer.session.timeout.ms": (int, 45000),
    "group.consumer.heartbeat.interval.ms": (int, 5000),
    "group.consumer.assignors": (str, "uniform,range"),
    # KIP-848's online migration of live groups between the classic and consumer protocols
    "group.consumer.migration.policy": (str, "bidirectional"),
    "min.insync.replicas": (int, 1),
    "producer.id.expiration.ms": (int, 86400000),
    "replica.lag.time.max.ms": (int, 30000),
    "replica.high.watermark.checkpoint.interval.ms": (int, 5000),
    "unclean.leader.election.enable": (bool, False),
    # A replicated cluster: set controller.quorum.voters. Every node is a broker and a voter
    # (KRaft's combined mode) unless process.roles says it is only one of them.
    "controller.quorum.voters": (str, None),
    # KIP-853 (Kafka 4's stock file): only a node naming itself, a one-voter quorum
    "controller.quorum.bootstrap.servers": (str, None),
    "process.roles": (str, None),
    "controller.listener.names": (str, "CONTROLLER"),
    "controller.quorum.election.timeout.ms": (int, 1000),
    "controller.quorum.fetch.timeout.ms": (int, 2000),
    "broker.heartbeat.interval.ms": (int, 2000),
    "broker.session.timeout.ms": (int, 9000),
    "replica.fetch.wait.max.ms": (int, 500),
    # Kafka's defaults are 1 MiB and 10 MiB; a Python round trip costs more, so fetch more.
    "replica.fetch.max.bytes": (int, 8 * 1024 * 1024),
    "replica.fetch.response.max.bytes": (int, 32 * 1024 * 1024),
    "offsets.topic.replication.factor": (int, 3),
    "transaction.state.log.num.partitions": (int, 50),
    "transaction.state.log.replication.factor": (int, 3),
    "transaction.state.log.min.isr": (int, 2),
    "transaction.max.timeout.ms": (int, 900000),
    "transaction.two.phase.commit.enable": (bool, False),  # KIP-939
    # KIP-890 part 1: leaders check a transaction's first batch with its coordinator
    "transaction.partition.verification.enable": (bool, True),
    "transactional.id.expiration.ms": (int, 604800000),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (int, 10000),
    "metadata.log.segment.bytes": (int, 8 * 1024 * 1024),
    "auto.leader.rebalance.enable": (bool, True),
    "leader.imbalance.check.interval.seconds": (int, 300),
    "metadata.log.max.record.bytes.between.snapshots": (int, 20 * 1024 * 1024),
    "metrics.listener": (str, None),  # http://HOST:PORT serves Prometheus's /metrics; off unset
    **SECURITY_KEYS,
    # ACLs (broker/security/authorizer.py): Kafka's StandardAuthorizer class name turns them on.
    "authorizer.class.name": (str, ""),
    "super.users": (str, None),
    "allow.everyone.if.no.acl.found": (bool, False),
}


# Kafka broker settings with no effect in minilog: one asyncio thread serves the network and
# the requests, sockets keep the OS's buffers, every listener is PLAINTEXT, logs recover in one
# pass, and there are no transaction or share-group state topics. Accepted, and warned about.
NO_EFFECT_KEYS = frozenset({
    "inter.broker.listener.name", "listener.security.protocol.map", "num.network.threads",
    "num.io.threads", "socket.send.buffer.bytes", "socket.receive.buffer.bytes",
    "num.recovery.threads.per.data.dir", "num.replica.fetchers", "background.threads",
    "queued.max.requests", "socket.listen.backlog.size", "log.cleaner.threads",
    "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.size", "log.cleaner.enable",
    "transaction.state.log.replication.factor", "transaction.state.log.min.isr",
    "transaction.state.log.num.partitions", "transaction.state.log.segment.bytes",
    "share.coordinator.state.topic.replication.factor", "share.coordinator.state.topic.min.isr",
    "group.share.enable", "group.coordinator.rebalance.protocols", "compression.type",
    "log.preallocate", "metadata.log.dir", "replica.socket.receive.buffer.bytes",
    "replica.socket.timeout.ms", "controller.socket.timeout.ms",
}) - set(BROKER_KEYS)  # those minilog implements take effect

# Broker settings Kafka 3.9 still accepts and ignores with a warning, removed in Kafka 4.0:
# {name: why it is ignored}.
DEPRECATED_KEYS: dict[str, str] = {
    "log.message.format.version": "Kafka 3.0 and later always write message format v2",
    "log.message.timestamp.difference.max.ms":
        "replaced by log.message.timestamp.before.max.ms and log.message.timestamp.after.max.ms",
}

# group.consumer.migration.policy's values (Kafka's ConsumerGroupMigrationPolicy).
MIGRATION_POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")


class ConfigError(ValueError):
    """A configuration value minilog cannot use; the message names the key."""


def coerce(key: str, typ: type, value: object) -> Any:
    """`value` (a string from a properties file or a request) as `typ`, or ConfigError
    naming `key`."""
    if typ is bool:
        if isinstance(value, bool):
            return value
        if str(value).lower() in ("true", "false"):
            return str(value).lower() == "true"
        raise ConfigError(f"{key} must be true or false, got {value!r}")
    try:
        return typ(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key} must be {typ.__name__}, got {value!r}") from None
