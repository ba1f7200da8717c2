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

from ..config.broker_keys import (
    BROKER_KEYS,
    DEPRECATED_KEYS,
    MIGRATION_POLICIES,
    NO_EFFECT_KEYS,
    ConfigError,
    coerce,
)
from ..config.listeners import (
    Listener,
    ListenerError,
    is_listener_setting,
    parse_listeners,
    security_protocols,
)

HOUR_MS = 3600 * 1000

log = logging.getLogger("minilog.broker.config")


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
                values[key] = coerce(key, BROKER_KEYS[key][0], raw)
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
