"""Creating, deleting and reconfiguring topics: validation, metadata, and the partition logs.

Every change goes through the metadata store first and then opens or closes logs, so the
image handlers read and the logs on disk always agree after a restart. In a replicated cluster
this runs on the active controller: requests are validated against its working view (which
holds its own not yet committed decisions), and logs open and close on every broker only as
the committed metadata reaches its replica manager.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, cast

from minilog.connector.protocol import ErrorCode

from ..storage.log_config import LogConfig
from ..storage.log_config import unknown_config
from .image import (
    DEPRECATED_TOPIC_CONFIGS,
    TOPIC_CONFIG_KEYS,
    MetadataImage,
    TopicState,
    topic_name_error,
)

log = logging.getLogger("minilog.broker.topics")

# config_source values reported by DescribeConfigs
DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG = 1, 5


class TopicManager:
    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self.store = broker.store

    @property
    def image(self) -> MetadataImage:
        """The committed image."""
        return self.store.image  # type: ignore[no-any-return]

    @property
    def view(self) -> MetadataImage:
        """What a change is validated against: the controller's working view (its own records
        not yet committed included)."""
        return self.store.working  # type: ignore[no-any-return]

    # ---- configs ---------------------------------------------------------------------------
    def effective_configs(self, name: str, overrides: Mapping[str, Any] | None = None
                          ) -> dict[str, tuple[Any, int]]:
        """{key: (value, source)}: broker defaults overlaid with the topic's own settings."""
        if overrides is None:
            overrides = self.image.topics[name].configs
        merged = {k: (v, DEFAULT_CONFIG) for k, v in self.broker.config.topic_defaults().items()}
        merged.update({k: (v, DYNAMIC_TOPIC_CONFIG) for k, v in overrides.items()})
        return merged

    def log_config(self, name: str, overrides: Mapping[str, Any] | None = None) -> Any:
        settings = {k: v for k, (v, _) in self.effective_configs(name, overrides).items()}
        return cast(Any, LogConfig).from_kafka(settings)  # storage is not annotated yet

    def _config_error(self, name: str, configs: Mapping[str, Any]) -> str | None:
        """Kafka's checks in Kafka's order and words: null values, unknown names, values."""
        nulls = [k for k, v in configs.items() if v is None]
        if nulls:
            return f"Null value not supported for topic configs: {','.join(nulls)}"
        unknown = [k for k in configs if k not in TOPIC_CONFIG_KEYS]
        if unknown:
            return unknown_config(unknown[0])
        try:
            self.log_config(name, configs)
        except ValueError as e:
            return str(e)
        return None

    @staticmethod
    def _warn_deprecated(name: str, configs: Mapping[str, Any],
                         before: Mapping[str, Any] | None = None) -> None:
        """One line per deprecated setting a request sets, as Kafka 3.9's broker logs it."""
        for key, why in DEPRECATED_TOPIC_CONFIGS.items():
            if key in configs and configs[key] != (before or {}).get(key):
                log.warning("Topic %s: configuration %s=%s is deprecated and ignored (%s; "
                            "removed in Kafka 4.0)", name, key, configs[key], why)

    # ---- lifecycle ---------------------------------------------------------------------------
    def create(self, name: str, num_partitions: int, replication_factor: int,
               configs: Mapping[str, Any], validate_only: bool = False,
               assignments: Sequence[Any] = (), internal: bool = False
               ) -> tuple[int, str | None, TopicState | None]:
        """(error code, message, TopicState or None)."""
        cfg = self.broker.config
        error = topic_name_error(name, allow_internal=internal)
        if error:
            return ErrorCode.INVALID_TOPIC_EXCEPTION, error, None
        if name in self.view.topics:
            return ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists", None
        if assignments:
            code, message = self._assignment_error(num_partitions, replication_factor, assignments)
            if code:
                return code, message, None
            num_partitions, replication_factor = len(assignments), len(assignments[0].broker_ids)
        partitions = cfg["num.partitions"] if num_partitions == -1 else num_partitions
        rf = cfg["default.replication.factor"] if replication_factor == -1 else replication_factor
        if partitions <= 0:
            return ErrorCode.INVALID_PARTITIONS, f"number of partitions must be positive, got {partitions}", None
        if rf <= 0:
            return ErrorCode.INVALID_REPLICATION_FACTOR, f"replication factor must be positive, got {rf}", None
        message = self._unreachable_replication(rf)
        if message:
            return ErrorCode.INVALID_REPLICATION_FACTOR, message, None
        error = self._config_error(name, configs)
        if error:
            return ErrorCode.INVALID_CONFIG, error, None
        if validate_only:
            return 0, None, None
        self._warn_deprecated(name, configs)
        wanted = {a.partition_index: list(a.broker_ids) for a in assignments}
        ts = self.store.create_topic(name, partitions, rf, configs, internal=internal,
                                     assignment=wanted)
        return 0, None, ts

    def _unreachable_replication(self, rf: int) -> str | None:
        """Kafka's message when fewer brokers are unfenced than `rf` replicas need, else None.
        Unfenced registrations may be none (every broker fenced): the controller refuses
        then, it does not fail."""
        live = len(self.view.brokers)
        if rf <= live:
            return None
        return (f"Unable to replicate the partition {rf} time(s): the target replication factor "
                f"of {rf} cannot be reached because only {live} broker(s) are registered and "
                "unfenced")

    def _assignment_error(self, num_partitions: int, replication_factor: int,
                          assignments: Sequence[Any]) -> tuple[int, str | None]:
        """(code, message) for a manual replica assignment, as Kafka's controller checks it."""
        if replication_factor != -1:
            return (ErrorCode.INVALID_REQUEST, "A manual partition assignment was specified, "
                    "but replication factor was not set to -1.")
        if num_partitions != -1:
            return (ErrorCode.INVALID_REQUEST, "A manual partition assignment was specified, "
                    "but numPartitions was not set to -1.")
        seen: set[int] = set()
        rf: int | None = None
        for a in assignments:
            if a.partition_index in seen:
                problem = ("Found multiple manual partition assignments for partition "
                           f"{a.partition_index}")
            else:
                problem = self._replicas_problem(list(a.broker_ids), rf, a.partition_index) or ""
            if not problem:
                seen.add(a.partition_index)
                rf = len(a.broker_ids)
                continue
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem
        if seen != set(range(len(seen))):
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    "partitions should be a consecutive 0-based integer sequence")
        return 0, None

    def _replicas_problem(self, replicas: Sequence[int], rf: int | None,
                          partition: int) -> str | None:
        """What is wrong with one partition's manual replica list (None: nothing), as Kafka's
        controller words it; `rf`: the replica count the others have (None: any)."""
        known = self.view.registered
        if not replicas:
            return "The manual partition assignment includes an empty replica list."
        unknown = [b for b in replicas if b not in known]
        if unknown:
            return (f"The manual partition assignment includes broker {unknown[0]}, but no "
                    "such broker is registered.")
        if len(set(replicas)) != len(replicas):
            return "The manual partition assignment includes a broker more than once."
        if rf is not None and len(replicas) != rf:
            return (f"The manual partition assignment includes a partition with "
                    f"{len(replicas)} replica(s), but this is not consistent with "
                    f"previous partitions, which have {rf} replica(s).")
        if not any(b in self.view.brokers for b in replicas):
            return ("All brokers specified in the manual partition assignment for "
                    f"partition {partition} are fenced or in controlled shutdown.")
        return None

    def auto_create(self, name: str) -> int:
        """Kafka's auto.create.topics.enable path; returns an error code (0 when created)."""
        code, _, _ = self.create(name, -1, -1, {})
        return 0 if code in (0, ErrorCode.TOPIC_ALREADY_EXISTS) else code

    def delete(self, name: str) -> tuple[int, str | None, TopicState | None]:
        ts = self.view.topics.get(name)
        if ts is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist", None
        if ts.internal:
            return ErrorCode.INVALID_TOPIC_EXCEPTION, f"{name!r} is an internal topic", ts
        if not self.broker.config["delete.topic.enable"]:
            return ErrorCode.TOPIC_DELETION_DISABLED, "delete.topic.enable is false", ts
        self.store.delete_topic(name)
        return 0, None, ts  # each replica manager removes its replicas once committed

    def add_partitions(self, name: str, count: int, validate_only: bool = False,
                       assignments: Sequence[Sequence[int]] | None = None
                       ) -> tuple[int, str | None]:
        """CreatePartitions: `assignments` ([replica ids] per new partition, preferred leader
        first) as the client gave them, else replicas placed as for a new topic."""
        ts = self.view.topics.get(name)
        if ts is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist"
        current = len(ts.partitions)
        if count <= current:
            return (ErrorCode.INVALID_PARTITIONS,
                    f"topic {name!r} has {current} partitions; the new count must be larger")
        if assignments:
            if len(assignments) != count - current:
                return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"Attempted to add {count - current} additional partition(s), but only "
                        f"{len(assignments)} assignment(s) were specified.")
            rf = len(ts.partitions[0].replicas) if ts.partitions else None
            for i, replicas in enumerate(assignments):
                problem = self._replicas_problem(replicas, rf, current + i)
                if problem:
                    return ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem
        else:
            message = self._unreachable_replication(len(ts.partitions[0].replicas))
            if message:
                return ErrorCode.INVALID_REPLICATION_FACTOR, message
        if not validate_only:  # the replica managers open the new replicas once committed
            self.store.add_partitions(name, count, assignments or None)
        return 0, None

    def alter_configs(self, name: str, new_configs: Mapping[str, Any],
                      validate_only: bool = False) -> tuple[int, str | None]:
        error = self._config_error(name, new_configs)
        if error:
            return ErrorCode.INVALID_CONFIG, error
        if not validate_only:
            self._warn_deprecated(name, new_configs, self.image.topics[name].configs)
            self.store.set_topic_configs(name, new_configs)  # replicas adopt it once committed
        return 0, None
