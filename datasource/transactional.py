"""The exactly-once sink (`deliveryGuarantee` = `exactly-once`): tasks prepare, the driver commits.

Each write task sends its rows inside a Kafka transaction whose `transactional.id` is stable for
(query, Spark partition): `<transactionalIdPrefix>-<partition>`, the prefix defaulting to
`minilog-sink-<query id>`. Its `init_transactions` fences any earlier attempt of the same task
(a retry, a zombie) and aborts what that attempt left open. The task flushes and *prepares* the
transaction (it stays open: read_committed readers do not see it) and returns its identity in
its commit message; the driver's `commit(messages, batchId)` completes every one of them, its
`abort` aborts them.

A micro-batch replayed after a crash between the broker's commits and Spark's commit log must
not be written twice. So each transaction also commits, through TxnOffsetCommit, the batch id
as the offset of the consumer group named after its transactional id (metadata: the query id):
committed if and only if the rows are. Before committing a transaction for batch N the driver
reads that group: if the transactional id already committed batch N (or a later one) for this
query, the new transaction is a replay and is aborted instead.

This relies on what Spark guarantees for a micro-batch replayed from its checkpoint: the same
input offsets, and the same rows in each writing partition (deterministic plans; Spark's own
checkpointed state and shuffle partitioning give that).
"""
from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

from pyspark import TaskContext
from pyspark.sql.datasource import WriterCommitMessage

from minilog.connector.client import ErrorCode, KafkaError, PreparedTxnState, TopicPartition
from minilog.connector.internal_groups import SINK_MARKER

from . import clients

log = logging.getLogger("minilog.datasource")

# Spark's local properties of a micro-batch's tasks (StreamExecution, MicroBatchExecution).
_QUERY_ID, _BATCH_ID = "sql.streaming.queryId", "streaming.sql.batchId"
_MARKER = SINK_MARKER  # the marker's metadata, then the query id (tools list them apart)
_ALREADY_ENDED = (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_TXN_STATE,
                  ErrorCode.INVALID_PRODUCER_ID_MAPPING)


@dataclass
class Prepared(WriterCommitMessage):
    """One task's prepared transaction (`transactional_id` None: it wrote no row)."""
    records: int
    transactional_id: str | None = None
    state: str = ""          # PreparedTxnState as text
    query_id: str | None = None


def task_identity(prefix: str | None, batch_prefix: str) -> tuple[str, str | None, int | None]:
    """(transactional id, query id, batch id) of the running task: the batch id and the query
    id are None for a batch write (`df.write`), whose prefix is `batch_prefix`."""
    ctx = TaskContext.get()
    query_id = ctx.getLocalProperty(_QUERY_ID) if ctx else None
    batch = ctx.getLocalProperty(_BATCH_ID) if ctx else None
    if prefix is None:
        prefix = f"minilog-sink-{query_id}" if query_id else batch_prefix
    partition = ctx.partitionId() if ctx else 0
    return f"{prefix}-{partition}", query_id, (None if batch is None else int(batch))


def new_batch_prefix() -> str:
    """A prefix of one `df.write` (made on the driver): no later write shares its ids."""
    return f"minilog-sink-batch-{uuid.uuid4().hex}"


def write_prepared(batches, options, send, batch_prefix: str) -> Prepared:
    """Write `batches` in a transaction of this task's transactional id and prepare it.
    `send(producer, batches)` hands every row over: (deliveries, rows, first topic written)."""
    txn_id, query_id, batch_id = task_identity(options.transactional_id_prefix, batch_prefix)
    producer = clients.producer({**options.client, "transactional.id": txn_id})
    try:
        producer.init_transactions()
        producer.begin_transaction()
        deliveries, rows, topic = send(producer, batches)
        if rows == 0:
            producer.abort_transaction()
            _put_back(producer, batch_id)
            return Prepared(0)
        if batch_id is not None:
            producer.send_offsets_to_transaction(
                {TopicPartition(topic, 0): (batch_id, _MARKER + query_id)}, txn_id)
        state = producer.prepare_transaction()
        for d in deliveries:
            d.result(0)
    except BaseException:
        _abandon(producer)
        raise
    _put_back(producer, batch_id)
    return Prepared(rows, txn_id, str(state), query_id)


def _put_back(producer, batch_id: int | None) -> None:
    """A stream's transactional ids come back every micro-batch: its producer is kept for the
    next; a batch write's ids are its own, never used again: its producer is closed."""
    (clients.release if batch_id is not None else clients.discard)(producer)


def _abandon(producer) -> None:
    """A failed task's transaction is aborted at once where it can be (else a retry's init
    aborts it), so that read_committed readers are not held back; the producer is dropped."""
    try:
        producer.abort_transaction(10)
    except Exception:  # noqa: BLE001 - fenced or broken: the next init aborts it
        pass
    clients.discard(producer)


class Completer:
    """The driver's half: completes the tasks' prepared transactions, once per batch id."""

    def __init__(self, client: dict):
        self.client = client
        self._admin = None
        self._done: dict[str, int] = {}  # transactional id -> last batch id committed

    @property
    def admin(self):
        if self._admin is None:
            self._admin = clients.admin(self.client)
        return self._admin

    def commit(self, messages, batch_id: int | None) -> None:
        """Commit every prepared transaction of `messages` (all at once), except those of a
        replayed batch whose transactional id committed `batch_id` already: those are
        aborted."""
        ends = {}
        for m in _prepared(messages):
            replay = batch_id is not None and self._committed_batch(m) >= batch_id
            if replay:
                log.info("batch %d of %s was committed before: the replay's rows are dropped",
                         batch_id, m.transactional_id)
            ends[m.transactional_id] = (PreparedTxnState.parse(m.state), not replay)
        failed = self._end(ends)
        if failed:  # some may have committed: what the markers say is read again next time
            for t in ends:
                self._done.pop(t, None)
            raise failed[0]
        if batch_id is not None:
            self._done.update((t, batch_id) for t, (_, commit) in ends.items() if commit)

    def abort(self, messages) -> None:
        failed = self._end({m.transactional_id: (PreparedTxnState.parse(m.state), False)
                            for m in _prepared(messages)})
        if failed:
            raise failed[0]

    def _end(self, ends: dict) -> list[KafkaError]:
        """Complete `ends` ({transactional id: (state, commit)}); the errors that matter. An
        abort of a transaction already ended (fenced, completed) is no error."""
        if not ends:
            return []
        results = self.admin.complete_transactions(ends)
        return [e for t, e in results.items() if e is not None and
                (ends[t][1] or e.code not in _ALREADY_ENDED)]

    def _committed_batch(self, m: Prepared) -> int:
        """The last batch id that `m`'s transactional id committed for its query (-1: none),
        as its marker group says (read once per transactional id, then remembered)."""
        if m.transactional_id not in self._done:
            marks = self.admin.list_group_offsets(m.transactional_id)
            self._done[m.transactional_id] = max(
                (om.offset for om in marks.values()
                 if om is not None and om.metadata == _MARKER + str(m.query_id)), default=-1)
        return self._done[m.transactional_id]

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None


def _prepared(messages):
    return [m for m in messages or () if isinstance(m, Prepared) and m.transactional_id]
