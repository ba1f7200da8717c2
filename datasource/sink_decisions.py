"""The exactly-once sink's decisions: one record per micro-batch of a query, in a compacted topic.

A micro-batch writes one prepared transaction per task; the driver commits them all. The
decision "batch N of query Q commits these transactions" is recorded *before* the first of
them is committed, so that a driver that dies in the middle (or after the last commit, before
Spark's commit log) is succeeded by one that finishes exactly those transactions and writes
nothing for the replayed batch, however Spark plans the replay (another partition count,
other tasks). A batch with no decision was never committed: its transactions are aborted and
the replay writes it again. The decision is the query's, not one transactional id's.

The records live in the compacted topic `minilog-sink-decisions` (one partition): the key
`query:<query id>` holds the query's last decision, `{"batch": N, "transactions": {id:
"producerId:epoch"}}` (KIP-939's PreparedTxnState); the key `prefix:<transactionalIdPrefix>`
names the query that owns the prefix. A batch write (`df.write`) records its prepared set
under `write:<write id>` before committing it, and a tombstone once every transaction is
committed: a key still there names a write whose driver died mid-commit, which the next
exactly-once write to the cluster finishes (`Completer.commit_write`).

The topic is created with `cleanup.policy=compact` and no time or size retention
(`retention.ms=-1`, `retention.bytes=-1`): compaction keeps the last record of each key
forever, unlike group offsets, which expire after `offsets.retention.minutes` (a restart a
week after a crash would not find them).
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

from minilog.connector.client import ErrorCode, KafkaError, NewTopic, TopicPartition

log = logging.getLogger("minilog.datasource")

TOPIC = "minilog-sink-decisions"
_CONFIG = {"cleanup.policy": "compact", "retention.ms": "-1", "retention.bytes": "-1"}
WRITES = "df.write"  # the owner of a prefix given to batch writes


@dataclass(frozen=True)
class Decision:
    """Batch `batch` of query `query_id` commits `transactions` ({id: "producerId:epoch"})."""
    query_id: str
    batch: int
    transactions: dict[str, str] = field(default_factory=dict)
    run: str = ""  # the writer's run that prepared them


class PrefixInUse(KafkaError):
    """Another query owns the transactionalIdPrefix (its decisions and its transactions)."""


def _named(owner: str) -> str:
    return "batch writes (df.write)" if owner == WRITES else f"the query {owner}"


class DecisionLog:
    """The decisions topic as the driver of one query reads and appends it: loaded once, then
    kept in memory (the driver is its only writer for its query)."""

    def __init__(self, admin, client: dict, topic: str = TOPIC):
        self.admin, self.client, self.topic = admin, client, topic
        self._last: dict[str, Decision] = {}
        self._owners: dict[str, str] = {}
        self._writes: dict[str, dict[str, str]] = {}  # write id -> its transactions
        self._producer = None
        self._loaded = False

    def last(self, query_id: str) -> Decision | None:
        """The query's last recorded decision (None: it never committed a batch)."""
        self._load()
        return self._last.get(query_id)

    def reload(self) -> None:
        """Read the topic again at the next call (another driver may have run the query)."""
        self._last.clear()
        self._owners.clear()
        self._writes.clear()
        self._loaded = False

    def claim(self, prefix: str, query_id: str) -> None:
        """Make `query_id` the owner of `prefix`, or raise PrefixInUse naming its owner."""
        self._load()
        owner = self._owners.get(prefix)
        if owner == query_id:
            return
        if owner is not None:
            raise PrefixInUse(ErrorCode.INVALID_CONFIG, (
                f"transactionalIdPrefix {prefix!r} is used by {_named(owner)}, not "
                f"{_named(query_id)}: two writers sharing a prefix would fence and abort each "
                f"other's transactions. Give each query its own prefix, or leave the option "
                f"out (the sink then derives it from the query id)"))
        self._append(f"prefix:{prefix}", {"query": query_id})
        self._owners[prefix] = query_id

    def record(self, decision: Decision) -> None:
        """Durably record `decision` (acknowledged by every in-sync replica) before any of its
        transactions is committed."""
        self._load()
        self._append(f"query:{decision.query_id}", {
            "batch": decision.batch, "transactions": decision.transactions, "run": decision.run})
        self._last[decision.query_id] = decision

    def record_write(self, write_id: str, transactions: dict[str, str]) -> None:
        """Durably record a batch write's prepared set before committing any of it."""
        self._load()
        self._append(f"write:{write_id}", {"transactions": transactions})
        self._writes[write_id] = dict(transactions)

    def forget_write(self, write_id: str) -> None:
        """Every transaction of the write is committed: its record is no longer needed (a
        tombstone, which compaction removes)."""
        self._load()
        self._append(f"write:{write_id}", None)
        self._writes.pop(write_id, None)

    def unfinished_writes(self) -> dict[str, dict[str, str]]:
        """{write id: transactions} of the batch writes recorded and not forgotten."""
        self._load()
        return dict(self._writes)

    def _append(self, key: str, value: dict | None) -> None:
        if self._producer is None:
            from minilog.connector.client import Producer
            self._producer = Producer({**self.client, "acks": "all",
                                       "enable.idempotence": True, "linger.ms": 0})
        body = None if value is None else json.dumps(value).encode()
        delivery = self._producer.send(self.topic, body, key.encode(), partition=0)
        self._producer.flush()
        delivery.result(0)

    def _load(self) -> None:
        if self._loaded:
            return
        self._ensure_topic()
        tp = TopicPartition(self.topic, 0)
        start = self.admin.list_offsets({tp: "earliest"})[tp].offset
        end = self.admin.list_offsets({tp: "latest"})[tp].offset
        if end > start:
            from minilog.connector.client import Consumer
            with Consumer({k: v for k, v in self.client.items() if k != "group.id"}) as c:
                for batch in c.fetch_range_arrow(tp, start, end, include_headers=False):
                    for key, value in zip(batch.column("key").to_pylist(),
                                          batch.column("value").to_pylist()):
                        self._replay(key, value)
        self._loaded = True

    def _replay(self, key: bytes | None, value: bytes | None) -> None:
        """One record of the topic, in log order: the last one of a key wins."""
        if key is None:  # not ours
            return
        kind, _, name = key.decode().partition(":")
        if value is None:  # a tombstone
            if kind == "write":
                self._writes.pop(name, None)
            return
        body = json.loads(value)
        if kind == "query":
            self._last[name] = Decision(name, int(body["batch"]), dict(body["transactions"]),
                                        body.get("run", ""))
        elif kind == "prefix":
            self._owners[name] = body["query"]
        elif kind == "write":
            self._writes[name] = dict(body["transactions"])

    def _ensure_topic(self) -> None:
        """Created on first use with three replicas where the cluster has three brokers (as
        Kafka's internal topics: the decision is acknowledged by every in-sync replica)."""
        if self.topic in self.admin.list_topics():
            return
        replicas = min(3, len(self.admin.describe_cluster().brokers))
        try:
            self.admin.create_topics([NewTopic(self.topic, 1, replicas, config=_CONFIG)])
        except KafkaError as e:
            if e.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise

    def close(self) -> None:
        if self._producer is not None:
            self._producer.close()
            self._producer = None
