"""Client configuration: a dict of Kafka's dotted names, validated once when a client is built.

Knowledge carries over from every other Kafka client, so the names (and mostly the defaults) are
Kafka's. Values may be given as strings, as `-X key=value` on the command line passes them; each
key has a type that coerces and checks them. Unknown keys are an error (with a did-you-mean
hint) rather than silently ignored, because a mistyped key is one of the most common client
configuration bugs. The names of the Java client and librdkafka are accepted too (see
`foreign_settings.py`): their own names for what minilog implements, and the rest with one
warning that they have no effect here. Keys that belong to another client role are validated
and ignored, so one dict can configure a producer and a consumer alike.
"""
import difflib
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from .assignors import ASSIGNORS
from .foreign_settings import ALIASES, JAVA_CLIENT, JAVA_SERDES, LIBRDKAFKA
from .types import ConfigError

log = logging.getLogger("minilog.client")

# A setting's check: (value given, its name as shown in errors) -> the value kept.
Coerce = Callable[[Any, str], Any]

_BOOL_TEXT = {"true": True, "1": True, "yes": True, "on": True,
              "false": False, "0": False, "no": False, "off": False}

P, C, A = "producer", "consumer", "admin"
ALL = (P, C, A)


def _int(v: Any, name: str) -> int:
    if isinstance(v, bool):
        raise ConfigError(f"{name} must be an integer, got {v!r}")
    try:
        return int(v)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be an integer, got {v!r}") from None


def _bool(v: Any, name: str) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, int) and v in (0, 1):
        return bool(v)
    b = _BOOL_TEXT.get(str(v).strip().lower())
    if b is None:
        raise ConfigError(f"{name} must be true or false, got {v!r}")
    return b


def _str(v: Any, name: str) -> str:
    if not isinstance(v, (str, int, float)) or isinstance(v, bool):
        raise ConfigError(f"{name} must be a string, got {v!r}")
    return str(v)


def _servers(v: Any, name: str) -> list[tuple[str, int]]:
    items = v.split(",") if isinstance(v, str) else list(v)
    out = []
    for item in (s.strip() for s in items):
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        host = host.strip("[]")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"{name}: {item!r} is not host:port")
        out.append((host, int(port)))
    if not out:
        raise ConfigError(f"{name} must list at least one host:port")
    return out


def _acks(v: Any, name: str) -> int:
    text = str(v).strip().lower()
    if text in ("all", "-1"):
        return -1
    if text in ("0", "1"):
        return int(text)
    raise ConfigError(f"{name} must be 0, 1 or all, got {v!r}")


def _enum(*choices: str, aliases: dict[str, str] | None = None) -> Coerce:
    aliases = aliases or {}

    def check(v: Any, name: str) -> str:
        text = aliases.get(str(v).strip().lower(), str(v).strip().lower())
        if text not in choices:
            raise ConfigError(f"{name} must be one of {', '.join(choices)}, got {v!r}")
        return text
    return check


def _callable_or(*choices: str) -> Coerce:
    names = _enum(*choices)

    def check(v: Any, name: str) -> Any:
        return v if callable(v) else names(v, name)
    return check


def _callable(v: Any, name: str) -> Any:
    if v is not None and not callable(v):
        raise ConfigError(f"{name} must be callable, got {v!r}")
    return v


def _serde(v: Any, name: str) -> Any:
    """A callable, or a Java (de)serializer class name (what Spark users and Java configs
    pass), as the callable that reads or writes the same bytes."""
    if not isinstance(v, str):
        return _callable(v, name)
    cls = v.strip().rsplit(".", 1)[-1]
    wanted = "Deserializer" if name.endswith("deserializer") else "Serializer"
    if cls.endswith(wanted) and cls in JAVA_SERDES:
        return JAVA_SERDES[cls]
    known = sorted(k for k in JAVA_SERDES if k.endswith(wanted) and
                   (wanted == "Deserializer" or not k.endswith("Deserializer")))
    raise ConfigError(f"{name}: {v!r} is not a callable nor a Java {wanted.lower()} the "
                      f"minilog client knows ({', '.join(known)})")


# the Java client's assignor class names (org.apache.kafka.clients.consumer.<Class>)
_ASSIGNOR_CLASSES = {"RangeAssignor": "range", "RoundRobinAssignor": "roundrobin",
                     "CooperativeStickyAssignor": "cooperative-sticky"}


def _assignors(v: Any, name: str) -> list[str]:
    return [_ASSIGNOR_CLASSES.get(a.rsplit(".", 1)[-1], a) for a in _list(v, name)]


def _list(v: Any, name: str) -> list[str]:
    return [s.strip() for s in v.split(",") if s.strip()] if isinstance(v, str) else list(v)


# name: (coerce, default, roles, minimum)
SPEC: dict[str, tuple[Coerce, Any, tuple[str, ...], int | None]] = {
    # -- every client --
    "bootstrap.servers": (_servers, None, ALL, None),
    "client.id": (_str, "minilog", ALL, None),
    "request.timeout.ms": (_int, 30000, ALL, 1),
    "socket.connection.setup.timeout.ms": (_int, 10000, ALL, 1),
    "retry.backoff.ms": (_int, 100, ALL, 0),
    "reconnect.backoff.ms": (_int, 50, ALL, 0),
    "metadata.max.age.ms": (_int, 300000, ALL, 0),
    "default.api.timeout.ms": (_int, 60000, ALL, 1),
    "receive.message.max.bytes": (_int, 100 * 1024 * 1024, ALL, 1024),
    "allow.auto.create.topics": (_bool, None, (P, C), None),  # producer True, consumer False
    "security.protocol": (_enum("plaintext", "ssl", "sasl_plaintext", "sasl_ssl"), "plaintext",
                          ALL, None),
    # TLS and SASL, librdkafka's names (and the Java client's, see foreign_settings.ALIASES)
    "ssl.ca.location": (_str, None, ALL, None),
    "ssl.certificate.location": (_str, None, ALL, None),
    "ssl.key.location": (_str, None, ALL, None),
    "ssl.key.password": (_str, None, ALL, None),
    "ssl.endpoint.identification.algorithm": (_enum("https", "none", aliases={"": "none"}),
                                              "https", ALL, None),
    "ssl.keystore.type": (_str, "PEM", ALL, None),
    "ssl.truststore.type": (_str, "PEM", ALL, None),
    "sasl.mechanism": (_str, None, ALL, None),
    "sasl.username": (_str, None, ALL, None),
    "sasl.password": (_str, None, ALL, None),
    "sasl.jaas.config": (_str, None, ALL, None),
    "transactional.id": (_str, None, (P,), None),
    "transaction.timeout.ms": (_int, 60000, (P,), 1),
    "transaction.two.phase.commit.enable": (_bool, False, (P,), None),  # KIP-939
    # -- producer --
    "acks": (_acks, -1, (P,), None),
    "linger.ms": (_int, 5, (P,), 0),
    "batch.size": (_int, 16384, (P,), 1),
    "compression.type": (_enum("none", "gzip", "snappy", "lz4", "zstd"), "none", (P,), None),
    "enable.idempotence": (_bool, None, (P,), None),  # None: on when acks=all, as modern clients do
    "retries": (_int, 2147483647, (P,), 0),
    "delivery.timeout.ms": (_int, 120000, (P,), 1),
    "max.in.flight.requests.per.connection": (_int, 5, (P,), 1),
    "max.block.ms": (_int, 60000, (P,), 0),
    "buffer.memory": (_int, 32 * 1024 * 1024, (P,), 1024),
    "max.request.size": (_int, 1024 * 1024, (P,), 1024),
    "partitioner": (_callable_or("murmur2_random", "murmur2", "random", "uniform_sticky",
                                   "round_robin"), "murmur2_random", (P,), None),
    # confluent-kafka's: fn(KafkaError) for what no record carries: a broker unreachable
    "error_cb": (_callable, None, (P,), None),
    "key.serializer": (_serde, None, (P,), None),
    "value.serializer": (_serde, None, (P,), None),
    # -- consumer --
    "group.id": (_str, None, (C,), None),
    "group.instance.id": (_str, None, (C,), None),
    "enable.auto.commit": (_bool, True, (C,), None),
    "auto.commit.interval.ms": (_int, 5000, (C,), 0),
    "session.timeout.ms": (_int, 45000, (C,), 1),
    "heartbeat.interval.ms": (_int, 3000, (C,), 1),
    "max.poll.interval.ms": (_int, 300000, (C,), 1),
    # Java's default: range, unless every member also offers cooperative-sticky; with range in
    # the list the rebalance protocol is eager (cooperative only when all assignors are).
    "partition.assignment.strategy": (_assignors, ["range", "cooperative-sticky"], (C,), None),
    # KIP-848: "consumer" lets the broker assign (group_consumer_protocol.py), with its
    # `group.remote.assignor` (uniform, range; the broker's default when unset)
    "group.protocol": (_enum("classic", "consumer"), "classic", (C,), None),
    "group.remote.assignor": (_str, None, (C,), None),
    "on_commit": (_callable, None, (C,), None),  # confluent-kafka's: fn(error, offsets)
    "auto.offset.reset": (_enum("earliest", "latest", "none",
                                aliases={"smallest": "earliest", "beginning": "earliest",
                                         "largest": "latest", "end": "latest", "error": "none"}),
                          "latest", (C,), None),
    "isolation.level": (_enum("read_uncommitted", "read_committed"), "read_uncommitted", (C,), None),
    "fetch.min.bytes": (_int, 1, (C,), 0),
    "fetch.max.wait.ms": (_int, 500, (C,), 0),
    "fetch.max.bytes": (_int, 52428800, (C,), 1),
    "max.partition.fetch.bytes": (_int, 1048576, (C,), 1),
    "max.poll.records": (_int, 500, (C,), 1),
    "check.crcs": (_bool, True, (C,), None),
    "client.rack": (_str, "", (C,), None),
    "key.deserializer": (_serde, None, (C,), None),
    "value.deserializer": (_serde, None, (C,), None),
}


def nearest_key(name: str) -> str | None:
    """The known setting name (minilog's, an alias, the Java client's or librdkafka's) nearest
    to `name`, or None when none is near."""
    close = difflib.get_close_matches(name, [*SPEC, *ALIASES, *JAVA_CLIENT, *LIBRDKAFKA], n=1)
    return close[0] if close else None


def is_known_key(name: str) -> bool:
    """Whether some Kafka client knows `name` (minilog implements it, or accepts it with no
    effect)."""
    return name in SPEC or name in ALIASES or name in JAVA_CLIENT or name in LIBRDKAFKA


class Config(Mapping[str, Any]):
    """Validated settings for one client role; read like a dict: `config["linger.ms"]`."""

    def __init__(self, role: str, settings: Mapping[str, Any] | None = None,
                 **overrides: Any) -> None:
        if role not in ALL:
            raise ValueError(f"unknown client role {role!r}")
        self.role = role
        given = dict(settings or {})
        given.update(overrides)
        values = {name: spec[1] for name, spec in SPEC.items() if role in spec[2]}
        no_effect: list[str] = []
        for given_name, raw in given.items():
            name = ALIASES.get(given_name, given_name)
            spec = SPEC.get(name)
            if spec is None:
                if name in JAVA_CLIENT or name in LIBRDKAFKA:
                    no_effect.append(name)
                    continue
                close = nearest_key(name)
                hint = f" (did you mean {close!r}?)" if close else ""
                raise ConfigError(f"unknown configuration key {name!r}{hint}")
            coerce, _, roles, minimum = spec
            shown = name if given_name == name else f"{given_name} ({name})"
            value = coerce(raw, shown) if raw is not None else None
            if minimum is not None and value is not None and value < minimum:
                raise ConfigError(f"{shown} must be at least {minimum}, got {value}")
            if role in roles:  # another role's key is checked, not kept: shared dicts
                values[name] = value
        if no_effect:
            _warn_no_effect(role, no_effect)
        if values.get("bootstrap.servers") is None:
            raise ConfigError("bootstrap.servers is required (host:port[,host:port...])")
        self._values = values
        getattr(self, f"_check_{role}")()

    def _check_producer(self) -> None:
        v = self._values
        if v["allow.auto.create.topics"] is None:
            v["allow.auto.create.topics"] = True
        if v["transactional.id"] is not None:
            if v["enable.idempotence"] is False:
                raise ConfigError("transactional.id requires enable.idempotence=true")
            v["enable.idempotence"] = True
        if v["enable.idempotence"] is None:
            v["enable.idempotence"] = v["acks"] == -1 and v["max.in.flight.requests.per.connection"] <= 5
        elif v["enable.idempotence"]:
            if v["acks"] != -1:
                raise ConfigError("enable.idempotence=true requires acks=all")
            if v["max.in.flight.requests.per.connection"] > 5:
                raise ConfigError("enable.idempotence=true requires "
                                  "max.in.flight.requests.per.connection <= 5")
            if v["retries"] == 0:
                raise ConfigError("enable.idempotence=true requires retries > 0")
        if v["delivery.timeout.ms"] < v["linger.ms"] + v["request.timeout.ms"]:
            raise ConfigError("delivery.timeout.ms must be at least linger.ms + request.timeout.ms")

    def _check_consumer(self) -> None:
        v = self._values
        if v["allow.auto.create.topics"] is None:
            v["allow.auto.create.topics"] = False
        if v["heartbeat.interval.ms"] >= v["session.timeout.ms"]:
            raise ConfigError("heartbeat.interval.ms must be lower than session.timeout.ms")
        for name in v["partition.assignment.strategy"]:
            if name not in ASSIGNORS:
                raise ConfigError(f"partition.assignment.strategy: unknown assignor {name!r} "
                                  f"(one of {', '.join(ASSIGNORS)})")
        if not v["partition.assignment.strategy"]:
            raise ConfigError("partition.assignment.strategy must name at least one assignor")
        if v["group.instance.id"] is not None and v["group.id"] is None:
            raise ConfigError("group.instance.id needs group.id")

    def _check_admin(self) -> None:
        pass

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def seconds(self, name: str) -> float:
        """A `.ms` setting in seconds, as asyncio wants it."""
        return float(self._values[name]) / 1000.0

    def __repr__(self) -> str:
        return f"Config({self.role!r}, {self._values!r})"


# (role, names) already warned about: Spark opens a client per task
_warned: set[tuple[str, tuple[str, ...]]] = set()


def _warn_no_effect(role: str, names: Iterable[str]) -> None:
    key = (role, tuple(sorted(names)))
    if key not in _warned:
        _warned.add(key)
        log.warning("%s settings with no effect in the minilog client (accepted for "
                    "compatibility with the Java client and librdkafka): %s", role,
                    ", ".join(sorted(names)))


def parse_assignments(pairs: Iterable[str] | None) -> dict[str, str]:
    """['key=value', ...] (the CLI's -X options) as a dict; raises ConfigError on a bad item."""
    out = {}
    for item in pairs or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"expected key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out
