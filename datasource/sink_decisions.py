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
names the query that owns the prefix. Compaction keeps the last record of each key forever,
unlike group offsets, which expire after `offsets.retention.minutes`.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

from minilog.connector.client import ErrorCode, KafkaError, NewTopic, TopicPartition

log = logging.getLogger("minilog.datasource")

TOPIC = "minilog-sink-decisions"
_CONFIG = {"cleanup.policy": "compact"}


@dataclass(frozen=True)
class Decision:
    """Batch `batch` of query `query_id` commits `transactions` ({id: "producerId:epoch"})."""
    query_id: str
    batch: int
    transactions: dict[str, str] = field(default_factory=dict)
    run: str = ""  # the writer's run that prepared them


class PrefixInUse(KafkaError):
    """Another query owns the transactionalIdPrefix (its decisions and its transactions)."""


class DecisionLog:
    """The decisions topic as the driver of one query reads and appends it: loaded once, then
    kept in memory (the driver is its only writer for its query)."""

    def __init__(self, admin, client: dict, topic: str = TOPIC):
        self.admin, self.client, self.topic = admin, client, topic
        self._last: dict[str, Decision] = {}
        self._owners: dict[str, str] = {}
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
        self._loaded = False

    def claim(self, prefix: str, query_id: str) -> None:
        """Make `query_id` the owner of `prefix`, or raise PrefixInUse naming its owner."""
        self._load()
        owner = self._owners.get(prefix)
        if owner == query_id:
            return
        if owner is not None:
            raise PrefixInUse(ErrorCode.INVALID_CONFIG, (
                f"transactionalIdPrefix {prefix!r} is used by the query {owner}, not this one "
                f"({query_id}): two queries sharing a prefix would fence and abort each other's "
                f"transactions. Give each query its own prefix, or leave the option out (the "
                f"sink then derives it from the query id)"))
        self._append(f"prefix:{prefix}", {"query": query_id})
        self._owners[prefix] = query_id

    def record(self, decision: Decision) -> None:
        """Durably record `decision` (acknowledged by every in-sync replica) before any of its
        transactions is committed."""
        self._load()
        self._append(f"query:{decision.query_id}", {
            "batch": decision.batch, "transactions": decision.transactions, "run": decision.run})
        self._last[decision.query_id] = decision

    def _append(self, key: str, value: dict) -> None:
        if self._producer is None:
            from minilog.connector.client import Producer
            self._producer = Producer({**self.client, "acks": "all",
                                       "enable.idempotence": True, "linger.ms": 0})
        delivery = self._producer.send(self.topic, json.dumps(value).encode(), key.encode(),
                                       partition=0)
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
        if key is None or value is None:  # a tombstone, or not ours
            return
        kind, _, name = key.decode().partition(":")
        body = json.loads(value)
        if kind == "query":
            self._last[name] = Decision(name, int(body["batch"]), dict(body["transactions"]),
                                        body.get("run", ""))
        elif kind == "prefix":
            self._owners[name] = body["query"]

    def _ensure_topic(self) -> None:
        try:
            self.admin.create_topics([NewTopic(self.topic, 1, config=_CONFIG)])
        except KafkaError as e:
            if e.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise

    def close(self) -> None:
        if self._producer is not None:
            self._producer.close()
            self._producer = None
