"""The options of `format("minilog")`: Spark's Kafka source and sink options, checked on the driver.

The names, defaults and error messages follow Spark's `KafkaSourceProvider`, so that changing
`format("kafka")` to `format("minilog")` changes nothing else. Every invalid or conflicting
option raises `OptionError` on the driver, naming the option, before any task runs.

Beyond Spark: `startingOffsets="group"` (start from the consumer group's committed offsets),
the group commits of `kafka.group.id`, and `valueFormat`/`valueSchema` (typed values).
"""
import json
import logging
import re
from dataclasses import dataclass, field

from minilog.connector.client import Config, ConfigError
from minilog.connector.client.config import is_known_key, nearest_key

from .errors import OptionError
from .values import value_format

STRATEGIES = ("assign", "subscribe", "subscribepattern")
EARLIEST, LATEST = -2, -1  # Spark's markers inside a startingOffsets/endingOffsets JSON

# Kafka settings Spark refuses on a source, with its reasons.
_REFUSED = {
    "key.deserializer": "keys are deserialized as byte arrays with ByteArrayDeserializer. Use "
                        "DataFrame operations to explicitly deserialize the keys.",
    "value.deserializer": "values are deserialized as byte arrays with ByteArrayDeserializer. "
                          "Use DataFrame operations to explicitly deserialize the values.",
    "enable.auto.commit": "the query commits the group's offsets itself at each checkpoint.",
    "interceptor.classes": "interceptors can modify the payload.",
}
_SINK_REFUSED = {
    "key.serializer": "keys are serialized with ByteArraySerializer or StringSerializer. Use "
                      "DataFrame operations to explicitly serialize the keys into a string or a "
                      "byte array.",
    "value.serializer": "values are serialized with ByteArraySerializer or StringSerializer. "
                        "Use DataFrame operations to explicitly serialize the values into a "
                        "string or a byte array.",
    "transactional.id": "the sink derives one per task: set deliveryGuarantee to "
                        "exactly-once (and transactionalIdPrefix to choose the prefix)",
}
# Java client class names that make no sense for a Python client: accepted and dropped.
_JAVA_ONLY = {"key.deserializer", "value.deserializer", "key.serializer", "value.serializer",
              "partitioner.class", "interceptor.classes"}


log = logging.getLogger("minilog.datasource")
_warned_unknown: set = set()  # unknown keys already warned about (the driver checks often)


@dataclass(frozen=True)
class OffsetSpec:
    """Where a range starts or ends: `kind` is earliest, latest, group, offsets (`value`:
    {(topic, partition): offset, -2 earliest, -1 latest}), timestamps (`value`:
    {(topic, partition): ms}) or timestamp (`value`: ms for every partition)."""
    kind: str
    value: object = None
    on_no_match: str = "error"  # startingOffsetsByTimestampStrategy: error | latest


@dataclass(frozen=True)
class SourceOptions:
    client: dict                      # settings for the Kafka client (the kafka.* options)
    strategy: str                     # assign | subscribe | subscribepattern
    topics: object                    # [names] | compiled pattern | {topic: [partitions]}
    starting: OffsetSpec
    ending: OffsetSpec
    fail_on_data_loss: bool = True
    include_headers: bool = False
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_bytes_per_trigger: int | None = None  # a soft bound, estimated per partition
    max_trigger_delay: float = 900.0  # seconds (Spark's default: 15m)
    group_id: str | None = None
    commit_group: str | None = None   # where the query's progress is committed (None: nowhere)
    poll_timeout: float | None = None  # kafkaConsumer.pollTimeoutMs, seconds
    values: object = None             # a values.ValueFormat, or None for binary values
    extra: dict = field(default_factory=dict)

    @property
    def isolation_level(self) -> str:
        """`kafka.isolation.level`: read_uncommitted (Kafka's and Spark's default) or
        read_committed (ranges end at the last stable offset; aborted records are skipped)."""
        return str(self.client.get("isolation.level", "read_uncommitted"))


def _lower(options):
    return {str(k).lower(): v for k, v in dict(options).items()}


def client_settings(options, role):
    """The Kafka client settings among the options: `kafka.X` gives `X`; `bootstrap.servers`
    and `group.id` are accepted without the prefix too. Refused settings raise OptionError."""
    opts = _lower(options)
    out = {}
    for k, v in opts.items():
        if k.startswith("kafka."):
            out[k[len("kafka."):]] = v
    for k in ("bootstrap.servers", "group.id"):
        if k in opts and k not in out:
            out[k] = opts[k]
    refused = _REFUSED if role == "source" else _SINK_REFUSED
    for k, why in refused.items():
        if k in out:
            raise OptionError(f"Kafka option '{k}' is not supported as {why}"
                              if k.endswith("serializer") else
                              f"Kafka option '{k}' is not supported: {why}")
    if not out.get("bootstrap.servers", "").strip():
        raise OptionError("Option 'kafka.bootstrap.servers' must be specified for configuring "
                          "Kafka " + ("consumer" if role == "source" else "producer"))
    if role == "sink" and "partitioner.class" in out:
        out["partitioner"] = _partitioner(out.pop("partitioner.class"))
    for k in _JAVA_ONLY & set(out):
        del out[k]
    return _checked(out, role)


# The partitioners Kafka's Java client ships, as the minilog producer's strategies.
_PARTITIONERS = {
    "org.apache.kafka.clients.producer.internals.DefaultPartitioner": "murmur2_random",
    "org.apache.kafka.clients.producer.RoundRobinPartitioner": "round_robin",
    "org.apache.kafka.clients.producer.UniformStickyPartitioner": "uniform_sticky",
}


def _partitioner(name):
    """Spark passes `kafka.partitioner.class` to its producer; ours takes the classes Kafka
    ships, by their full or short name, and refuses any other (it cannot load Java code)."""
    name = str(name).strip()
    for full, strategy in _PARTITIONERS.items():
        if name in (full, full.rsplit(".", 1)[1]):
            return strategy
    raise OptionError(f"Kafka option 'kafka.partitioner.class' must be one of the partitioners "
                      f"Kafka ships ({', '.join(_PARTITIONERS)}), got '{name}'")


def _checked(client, role):
    """The client settings, checked on the driver as the tasks' client will check them. A key
    no Kafka client knows is a warning, as the Java client logs one ("supplied but isn't a
    known config"), unless it is a near miss of a known key: that is a typo, and an error."""
    for k in sorted(client):
        if is_known_key(k):
            continue
        close = nearest_key(k)
        if close:
            raise OptionError(f"Kafka option 'kafka.{k}' is unknown (did you mean "
                              f"'kafka.{close}'?)")
        if k not in _warned_unknown:
            _warned_unknown.add(k)
            log.warning("Kafka option 'kafka.%s' is not a known Kafka client setting: ignored",
                        k)
        del client[k]
    try:
        Config("consumer" if role == "source" else "producer", client)
    except ConfigError as e:
        raise OptionError(f"Invalid Kafka option: {e}") from None
    return client


def _bool(opts, name, default):
    raw = opts.get(name.lower())
    if raw is None:
        return default
    text = str(raw).strip().lower()
    if text not in ("true", "false"):
        raise OptionError(f"Option '{name}' must be true or false, got '{raw}'")
    return text == "true"


def _int(opts, name, minimum=None):
    raw = opts.get(name.lower())
    if raw is None:
        return None
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise OptionError(f"Option '{name}' must be an integer, got '{raw}'") from None
    if minimum is not None and value < minimum:
        raise OptionError(f"Option '{name}' must be positive, got {value}" if minimum == 1
                          else f"Option '{name}' must be at least {minimum}, got {value}")
    return value


_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h|d)?\s*$", re.I)
_UNIT = {"ms": 0.001, "s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, None: 0.001}


_BYTES = re.compile(r"^\s*(\d+)\s*([kmgt]?)b?\s*$", re.I)
_BINARY_SHIFT = {"": 0, "k": 10, "m": 20, "g": 30, "t": 40}


def _bytes(opts, name):
    """A positive byte count, plain or with a binary suffix as Spark's byte strings (64m)."""
    raw = opts.get(name.lower())
    if raw is None:
        return None
    m = _BYTES.match(str(raw))
    if not m or int(m.group(1)) < 1:
        raise OptionError(f"Option '{name}' must be a positive number of bytes such as "
                          f"1048576 or 64m, got '{raw}'")
    return int(m.group(1)) << _BINARY_SHIFT[m.group(2).lower()]


def _duration(opts, name, default):
    raw = opts.get(name.lower())
    if raw is None:
        return default
    m = _DURATION.match(str(raw))
    if not m:
        raise OptionError(f"Option '{name}' must be a duration such as 15m, 30s or 500ms, "
                          f"got '{raw}'")
    return int(m.group(1)) * _UNIT[m.group(2) and m.group(2).lower()]


def _json(name, raw):
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise OptionError(f"Option '{name}' must be a JSON object such as "
                          f"{{\"topicA\":{{\"0\":23,\"1\":-1}}}}, got '{raw}'")
    return value


def _per_partition(name, raw, what):
    out = {}
    for topic, parts in _json(name, raw).items():
        if not isinstance(parts, dict):
            raise OptionError(f"Option '{name}': topic '{topic}' must map partitions to "
                              f"{what}, got {json.dumps(parts)}")
        for p, v in parts.items():
            try:
                out[(topic, int(p))] = int(v)
            except (TypeError, ValueError):
                raise OptionError(f"Option '{name}': partition '{p}' of topic '{topic}' "
                                  f"must map to an integer {what}, got {json.dumps(v)}") from None
    return out


def offset_spec(opts, timestamp_key, by_timestamp_key, offsets_key, default):
    """Spark's order of preference: one timestamp for all, per-partition timestamps, offsets."""
    strategy = str(opts.get("startingoffsetsbytimestampstrategy", "error")).strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError("Option 'startingOffsetsByTimestampStrategy' must be 'error' or "
                          f"'latest', got '{strategy}'")
    if offsets_key == "endingOffsets":
        strategy = "latest"  # Spark: an ending timestamp with no match ends at the latest offset
    if timestamp_key.lower() in opts:
        raw = str(opts[timestamp_key.lower()]).strip()
        try:
            return OffsetSpec("timestamp", int(raw), strategy)
        except ValueError:
            raise OptionError(f"Option '{timestamp_key}' expects a single long value (ms), "
                              f"got '{raw}'") from None
    if by_timestamp_key.lower() in opts:
        return OffsetSpec("timestamps", _per_partition(
            by_timestamp_key, opts[by_timestamp_key.lower()], "timestamps"), strategy)
    raw = opts.get(offsets_key.lower())
    if raw is None:
        return OffsetSpec(default)
    text = str(raw).strip()
    if text.lower() in ("earliest", "latest", "group"):
        if text.lower() == "group" and offsets_key != "startingOffsets":
            raise OptionError(f"Option '{offsets_key}' cannot be 'group'")
        return OffsetSpec(text.lower())
    if not text.startswith("{"):
        raise OptionError(f"Option '{offsets_key}' must be earliest, latest"
                          + (", group" if offsets_key == "startingOffsets" else "")
                          + f" or a JSON object of offsets, got '{raw}'")
    return OffsetSpec("offsets", _per_partition(offsets_key, text, "offsets"))


def _strategy(opts):
    given = [k for k in STRATEGIES if k in opts]
    names = "assign, subscribe, subscribePattern"
    if not given:
        raise OptionError(f"One of the following options must be specified for the minilog "
                          f"source: {names}")
    if len(given) > 1:
        raise OptionError(f"Only one of the following options can be specified for the "
                          f"minilog source: {names}")
    kind, raw = given[0], str(opts[given[0]])
    if kind == "subscribe":
        topics = [t.strip() for t in raw.split(",") if t.strip()]
        if not topics:
            raise OptionError(f"No topics to subscribe to as specified value for option "
                              f"'subscribe' is '{raw}'")
        return kind, topics
    if kind == "subscribepattern":
        if not raw.strip():
            raise OptionError(f"Pattern to subscribe is empty as specified value for option "
                              f"'subscribePattern' is '{raw}'")
        try:
            return kind, re.compile(raw.strip())
        except re.error as e:
            raise OptionError(f"Option 'subscribePattern' is not a valid pattern: {e}") from None
    if not raw.strip().startswith("{"):
        raise OptionError(f"No topicpartitions to assign as specified value for option "
                          f"'assign' is '{raw}'")
    assigned = {}
    for topic, parts in _json("assign", raw).items():
        if not isinstance(parts, list) or not all(isinstance(p, int) for p in parts):
            raise OptionError(f"Option 'assign': topic '{topic}' must map to a list of "
                              f"partition numbers, got {json.dumps(parts)}")
        assigned[topic] = sorted(set(parts))
    return kind, assigned


def source_options(options, streaming):
    """Check the options of a read (`streaming` True or False; None: only the checks common
    to both, as when Spark asks for the schema); SourceOptions or OptionError."""
    opts = _lower(options)
    if streaming:
        if "endingoffsets" in opts:
            raise OptionError("Option 'endingOffsets' is not valid in streaming queries")
        if "endingoffsetsbytimestamp" in opts or "endingtimestamp" in opts:
            raise OptionError("Option 'endingOffsetsByTimestamp'/'endingTimestamp' is not valid "
                              "in streaming queries")
    client = client_settings(opts, "source")
    strategy, topics = _strategy(opts)
    starting = offset_spec(opts, "startingTimestamp", "startingOffsetsByTimestamp",
                           "startingOffsets", "latest" if streaming else "earliest")
    ending = offset_spec(opts, "endingTimestamp", "endingOffsetsByTimestamp", "endingOffsets",
                         "latest")
    if streaming is False:
        if starting.kind == "latest" or (starting.kind == "offsets" and LATEST in
                                         starting.value.values()):
            raise OptionError("Option 'startingOffsets' can't be latest for batch queries")
        if ending.kind == "earliest" or (ending.kind == "offsets" and EARLIEST in
                                         ending.value.values()):
            raise OptionError("Option 'endingOffsets' can't be earliest for batch queries")
        if starting.kind == "offsets" and ending.kind == "offsets":
            if set(starting.value) != set(ending.value):
                raise OptionError("Options 'startingOffsets' and 'endingOffsets' must name the "
                                  "same topic partitions")
            for tp, s in starting.value.items():
                e = ending.value[tp]
                if s >= 0 and e >= 0 and s > e:
                    raise OptionError(f"Option 'startingOffsets' ({s}) is after 'endingOffsets' "
                                      f"({e}) for {tp[0]}-{tp[1]}")
    group_id = client.get("group.id")
    if starting.kind == "group" and not group_id:
        raise OptionError("Option 'startingOffsets' is 'group' but no 'kafka.group.id' is set")
    if "auto.offset.reset" in client:
        if starting.kind != "group":
            raise OptionError("Kafka option 'auto.offset.reset' is not supported: set the "
                              "option 'startingOffsets' to 'earliest' or 'latest' (or 'group', "
                              "which falls back to auto.offset.reset)")
        if str(client["auto.offset.reset"]).lower() not in ("earliest", "latest", "none"):
            raise OptionError("Kafka option 'auto.offset.reset' must be earliest, latest or "
                              f"none, got '{client['auto.offset.reset']}'")
    max_per = _int(opts, "maxOffsetsPerTrigger", 1)
    min_per = _int(opts, "minOffsetsPerTrigger", 1)
    if max_per is not None and min_per is not None and min_per > max_per:
        raise OptionError(f"The value of minOffsetsPerTrigger({min_per}) is higher than "
                          f"maxOffsetsPerTrigger({max_per})")
    poll_ms = _int(opts, "kafkaConsumer.pollTimeoutMs", 1)
    return SourceOptions(
        client=client, strategy=strategy, topics=topics, starting=starting, ending=ending,
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        include_headers=_bool(opts, "includeHeaders", False),
        min_partitions=_int(opts, "minPartitions", 1),
        max_records_per_partition=_int(opts, "maxRecordsPerPartition", 1),
        max_offsets_per_trigger=max_per, min_offsets_per_trigger=min_per,
        max_bytes_per_trigger=_bytes(opts, "maxBytesPerTrigger"),
        max_trigger_delay=_duration(opts, "maxTriggerDelay", 900.0),
        group_id=group_id, commit_group=_commit_group(opts, group_id),
        poll_timeout=None if poll_ms is None else poll_ms / 1000,
        values=value_format(opts))


def _commit_group(opts, group_id):
    """The consumer group the query commits its progress to, so that Kafka's tools show its
    lag (Spark's connector never commits: `kafka.group.id` is only its consumers' identity).
    `commitOffsetsToGroup` names it; `false` commits nowhere, as Spark; unset, it is
    `kafka.group.id` when that is set."""
    raw = opts.get("commitoffsetstogroup")
    if raw is None:
        return group_id
    name = str(raw).strip()
    if name.lower() == "false":
        return None
    if not name or name.lower() == "true":
        raise OptionError("Option 'commitOffsetsToGroup' must name a consumer group, or be "
                          f"false to commit nowhere, got '{raw}'")
    return name


AT_LEAST_ONCE, EXACTLY_ONCE = "at-least-once", "exactly-once"
# The broker's default transaction.max.timeout.ms: a prepared transaction waits for the driver's
# commit this long before the coordinator may abort it (the batch is then written again).
SINK_TRANSACTION_TIMEOUT_MS = 900000


@dataclass(frozen=True)
class SinkOptions:
    client: dict
    topic: str | None
    values: object = None
    exactly_once: bool = False
    transactional_id_prefix: str | None = None  # None: derived from the query id


def sink_options(options):
    opts = _lower(options)
    client = client_settings(opts, "sink")
    topic = opts.get("topic")
    topic = str(topic).strip() if topic is not None else None
    if topic == "":
        raise OptionError("Option 'topic' is empty")
    guarantee = str(opts.get("deliveryguarantee", AT_LEAST_ONCE)).strip().lower()
    if guarantee not in (AT_LEAST_ONCE, EXACTLY_ONCE):
        raise OptionError(f"Option 'deliveryGuarantee' must be {AT_LEAST_ONCE} or "
                          f"{EXACTLY_ONCE}, got '{opts['deliveryguarantee']}'")
    prefix = opts.get("transactionalidprefix")
    if prefix is not None:
        prefix = str(prefix).strip()
        if not prefix:
            raise OptionError("Option 'transactionalIdPrefix' is empty")
        if guarantee != EXACTLY_ONCE:
            raise OptionError("Option 'transactionalIdPrefix' needs deliveryGuarantee "
                              "exactly-once")
    if guarantee == EXACTLY_ONCE:
        client.setdefault("transaction.timeout.ms", SINK_TRANSACTION_TIMEOUT_MS)
        _checked({**client, "transactional.id": "-"}, "sink")  # as the tasks' producers
    return SinkOptions(client=client, topic=topic, values=value_format(opts),
                       exactly_once=guarantee == EXACTLY_ONCE, transactional_id_prefix=prefix)
