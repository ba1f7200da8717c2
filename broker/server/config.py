"""Broker configuration with Kafka's property names, read from a properties file and flags.

Kafka's own `server.properties` starts a broker: the keys minilog acts on take effect; Kafka
broker settings that have no effect here (thread pools, socket buffers, security protocol maps,
transaction and share-group topics) are accepted and named in one warning; any other key is an
error naming every unknown key with the nearest known one, so a typo is never a silent default.
Topic-level defaults (`log.retention.ms` ...) become each topic's `LogConfig` unless the topic
overrides them with its own names (`retention.ms` ...).
"""
import difflib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from minilog.connector.properties import PropertiesError
from minilog.connector.properties import read_properties as _read_properties

from .listeners import (
    SECURITY_KEYS,
    Listener,
    ListenerError,
    is_listener_setting,
    parse_listeners,
    security_protocols,
)

HOUR_MS = 3600 * 1000

# Broker key -> (type, default). Durations follow Kafka's precedence (ms over minutes over hours).
BROKER_KEYS = {
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
DEPRECATED_KEYS = {
    "log.message.format.version": "Kafka 3.0 and later always write message format v2",
    "log.message.timestamp.difference.max.ms":
        "replaced by log.message.timestamp.before.max.ms and log.message.timestamp.after.max.ms",
}

# group.consumer.migration.policy's values (Kafka's ConsumerGroupMigrationPolicy).
MIGRATION_POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")

log = logging.getLogger("minilog.broker.config")


class ConfigError(ValueError):
    """A configuration value minilog cannot use; the message names the key."""


def _coerce(key, typ, value):
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


def read_properties(path):
    """Parse a Java-style .properties file (key=value, # comments)."""
    try:
        return _read_properties(path)
    except PropertiesError as e:
        raise ConfigError(str(e)) from None


def _check_keys(props):
    """Refuse unknown keys, all in one error, each with the nearest known name; warn once,
    in one line, about Kafka settings that have no effect here."""
    known = [*BROKER_KEYS, *NO_EFFECT_KEYS]
    unknown = [k for k in props if k not in BROKER_KEYS and k not in NO_EFFECT_KEYS
               and k not in DEPRECATED_KEYS and not is_listener_setting(k)]
    if unknown:
        described = []
        for key in unknown:
            close = difflib.get_close_matches(key, known, n=1)
            described.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise ConfigError(f"unknown broker setting{'s' if len(unknown) > 1 else ''}: "
                          + ", ".join(described))
    ignored = sorted(k for k in props if k in NO_EFFECT_KEYS)
    if ignored:
        log.warning("Kafka settings with no effect in minilog, ignored: %s", ", ".join(ignored))
    deprecated = sorted(k for k in props if k in DEPRECATED_KEYS)
    if deprecated:
        log.warning("Deprecated Kafka settings, ignored as Kafka 3.9 ignores them (removed in "
                    "Kafka 4.0): %s", "; ".join(f"{k} ({DEPRECATED_KEYS[k]})" for k in deprecated))


@dataclass
class BrokerConfig:
    values: dict = field(default_factory=dict)

    @classmethod
    def from_props(cls, props):
        values = {k: d for k, (t, d) in BROKER_KEYS.items()}
        _check_keys(props)
        for key, raw in props.items():
            if is_listener_setting(key):
                values[key] = str(raw)
                continue
            if key in BROKER_KEYS:
                values[key] = _coerce(key, BROKER_KEYS[key][0], raw)
        if values["broker.id"] is not None:
            values["node.id"] = values["broker.id"]
        for key in ("num.partitions", "default.replication.factor", "message.max.bytes",
                    "socket.request.max.bytes", "log.segment.bytes", "offsets.topic.num.partitions",
                    "transaction.state.log.num.partitions", "transaction.max.timeout.ms",
                    "sasl.server.max.receive.size"):
            if values[key] <= 0:
                raise ConfigError(f"{key} must be positive, got {values[key]}")
        policy = values["group.consumer.migration.policy"] = \
            values["group.consumer.migration.policy"].strip().lower()
        if policy not in MIGRATION_POLICIES:
            raise ConfigError(f"group.consumer.migration.policy must be one of "
                              f"{', '.join(MIGRATION_POLICIES)}, got {policy!r}")
        cfg = cls(values)
        _ = cfg.listeners  # parsing them validates `listeners` and `advertised.listeners`
        cfg._check_roles()
        _ = cfg.metrics_address  # validates metrics.listener
        return cfg

    def _check_roles(self):
        """KRaft's rules: controllers are exactly the voters, and need the quorum to exist."""
        voters, roles = self.quorum_voters, self.process_roles
        if self.values["process.roles"] is not None and voters is None:
            raise ConfigError("process.roles needs controller.quorum.voters (or Kafka 4's "
                              "controller.quorum.bootstrap.servers)")
        if voters is None:
            return
        listed = ",".join(map(str, voters))
        if "controller" in roles and self.node_id not in voters:
            raise ConfigError(f"node.id {self.node_id} is not one of controller.quorum.voters "
                              f"({listed}), but process.roles includes controller (a broker "
                              f"that is not a voter needs process.roles=broker)")
        if "controller" not in roles and self.node_id in voters:
            raise ConfigError(f"node.id {self.node_id} is one of controller.quorum.voters "
                              f"({listed}), so process.roles must include controller")

    def __getitem__(self, key):
        return self.values[key]

    @property
    def node_id(self):
        return self.values["node.id"]

    @property
    def data_dir(self):
        dirs = self.values["log.dirs"] or self.values["log.dir"]
        return Path(dirs.split(",")[0].strip())

    @property
    def log_dirs(self) -> list[Path]:
        """Every directory of `log.dirs` (else `log.dir`): the broker locks each at start.
        Partitions and the metadata log live in the first (`data_dir`); minilog has no
        separate `metadata.log.dir`."""
        dirs = self.values["log.dirs"] or self.values["log.dir"]
        return [Path(d.strip()) for d in dirs.split(",") if d.strip()]

    @property
    def process_roles(self):
        """{"broker"}, {"controller"} or both; both (combined mode) unless process.roles says."""
        spec = self.values["process.roles"]
        if spec is None:
            return frozenset({"broker", "controller"})
        roles = frozenset(r.strip() for r in spec.split(",") if r.strip())
        if not roles or not roles <= {"broker", "controller"}:
            raise ConfigError(f"process.roles must be broker, controller or broker,controller, "
                              f"got {spec!r}")
        return roles

    @property
    def controller_only(self):
        return self.quorum_voters is not None and self.process_roles == {"controller"}

    @property
    def controller_listener_names(self) -> set:
        return {n.strip().upper() for n in self.values["controller.listener.names"].split(",")}

    def _all_listeners(self) -> list[Listener]:
        try:
            return parse_listeners(self.values["listeners"], self.values["advertised.listeners"],
                                   self.values["listener.security.protocol.map"],
                                   self.controller_listener_names)
        except ListenerError as e:
            raise ConfigError(str(e)) from None

    @property
    def listeners(self) -> list[Listener]:
        """The listeners this node serves, primary first: a controller-only node's are its
        controller listeners (controller.listener.names); another node's are all others, then
        (combined nodes) its controller listeners, so the primary is always a broker's."""
        found = self._all_listeners()
        controller = [lst for lst in found if lst.name in self.controller_listener_names]
        if self.controller_only:
            return controller or found
        return [lst for lst in found if lst not in controller] + controller

    @property
    def broker_listeners(self) -> list[Listener]:
        """The listeners a broker registers and clients are told of: not the controller's
        (Kafka keeps those out of Metadata), unless a node has no other."""
        found = self.listeners
        return [lst for lst in found if lst.name not in self.controller_listener_names] or found

    @property
    def inter_broker_listener(self) -> Listener:
        """Where this broker's peers reach it for replication and transaction markers:
        `inter.broker.listener.name`, else the listener named as `security.inter.broker.protocol`
        (Kafka's rule), else the first listener."""
        name, protocol = (self.values["inter.broker.listener.name"],
                          self.values["security.inter.broker.protocol"])
        if name and protocol:
            raise ConfigError("set only one of inter.broker.listener.name and "
                              "security.inter.broker.protocol")
        broker_listeners = self.broker_listeners
        wanted = (name or protocol or "").strip().upper()
        if not wanted:
            return broker_listeners[0]
        key = "inter.broker.listener.name" if name else "security.inter.broker.protocol"
        if wanted in self.controller_listener_names and not self.controller_only:
            raise ConfigError(f"{key}={wanted} is a controller listener "
                              f"(controller.listener.names); brokers need a listener of their own")
        found = next((lst for lst in broker_listeners if lst.name == wanted), None)
        if found is None:
            raise ConfigError(f"{key}={wanted} names no listener of listeners "
                              f"({', '.join(lst.name for lst in broker_listeners)})")
        return found

    @property
    def controller_listener(self) -> Listener:
        """How the controller quorum is reached (Raft, registrations, heartbeats, forwarded
        requests): the first of `controller.listener.names` this node listens on; on a
        broker-only node, that name with its protocol from `listener.security.protocol.map`
        (its address is in controller.quorum.voters); a node with no controller listener
        serves the quorum on the listener its voter entry names, else its first."""
        found = self._all_listeners()
        names = [n.strip().upper() for n in self.values["controller.listener.names"].split(",")
                 if n.strip()]
        for name in names:
            for lst in found:
                if lst.name == name:
                    return lst
        voters = self.quorum_voters or {}
        if self.node_id in voters:
            port = voters[self.node_id][1]
            return next((lst for lst in found if lst.port == port), found[0])
        if not names:
            return found[0]
        try:
            protocols = security_protocols(self.values["listener.security.protocol.map"])
        except ListenerError as e:
            raise ConfigError(str(e)) from None
        name = names[0]
        return Listener(name, protocols.get(name, "PLAINTEXT"), "", 0, "", 0)

    @property
    def quorum_voters(self):
        """{node id: (host, port)} from controller.quorum.voters, else the one-voter quorum
        that controller.quorum.bootstrap.servers names (broker/server/quorum_bootstrap.py), or None
        for a single broker (the broker makes it the one-voter quorum of itself)."""
        spec = self.values["controller.quorum.voters"]
        bootstrap = self.values["controller.quorum.bootstrap.servers"]
        if not spec and not bootstrap:
            return None
        from .quorum_bootstrap import standalone_voters
        from ..raft.raft_node import parse_voters
        try:
            if spec:
                return parse_voters(spec)
            names = self.controller_listener_names
            return standalone_voters(bootstrap, self.node_id, self.process_roles,
                                     [lst for lst in self._all_listeners() if lst.name in names])
        except ValueError as e:
            raise ConfigError(str(e)) from None

    @property
    def metrics_address(self) -> tuple[str, int] | None:
        """(host, port) of `metrics.listener` (http://HOST:PORT), None when metrics are off."""
        value = self.values["metrics.listener"]
        if not value:
            return None
        url = urlsplit(value)
        try:
            port = url.port
        except ValueError:
            port = None
        if url.scheme != "http" or not url.hostname or port is None or url.path not in ("", "/"):
            raise ConfigError(f"metrics.listener must look like http://127.0.0.1:9404, "
                              f"got {value!r}")
        return url.hostname, port

    @property
    def listen_address(self):
        primary = self.listeners[0]
        return primary.host, primary.port

    @property
    def advertised_address(self):
        primary = self.listeners[0]
        return primary.advertised_host, primary.advertised_port

    def topic_defaults(self):
        """Topic config defaults as Kafka topic-level names, derived from the broker keys."""
        v = self.values
        retention = v["log.retention.ms"]
        if retention is None:
            retention = (v["log.retention.minutes"] * 60000 if v["log.retention.minutes"] is not None
                         else v["log.retention.hours"] * HOUR_MS)
        roll = v["log.roll.ms"] if v["log.roll.ms"] is not None else v["log.roll.hours"] * HOUR_MS
        defaults = {
            "retention.ms": retention,
            "retention.bytes": v["log.retention.bytes"],
            "segment.bytes": v["log.segment.bytes"],
            "segment.ms": roll,
            "index.interval.bytes": v["log.index.interval.bytes"],
            "message.timestamp.type": v["log.message.timestamp.type"],
            "cleanup.policy": v["log.cleanup.policy"],
            "max.message.bytes": v["message.max.bytes"],
            "min.insync.replicas": v["min.insync.replicas"],
        }
        if v["log.flush.interval.messages"] is not None:
            defaults["flush.messages"] = v["log.flush.interval.messages"]
        if v["log.flush.interval.ms"] is not None:
            defaults["flush.ms"] = v["log.flush.interval.ms"]
        return defaults
