"""The exactly-once sink (`deliveryGuarantee` = `exactly-once`): tasks prepare, the driver commits.

Each write task sends its rows inside a Kafka transaction and *prepares* it (KIP-939: it stays
open, read_committed readers do not see it) and returns its identity in its commit message; the
driver's `commit(messages, batchId)` completes every one of them, its `abort` aborts them.

A stream task's `transactional.id` is `<transactionalIdPrefix>-<run>-<Spark partition>`, the
prefix defaulting to `minilog-sink-<query id>` and `<run>` a tag of Spark's run id (new each
time the query starts). Within a run the id is stable across micro-batches and attempts,
so `init_transactions` fences an earlier attempt of the same task (a retry, a zombie) and
aborts what it left open. A new run never touches the ids of the run before: what that run
prepared stays prepared until the new driver decides.

Whether a micro-batch is committed is decided once for the whole query, never per
transactional id (`sink_decisions.py`): before committing anything of batch N the driver
records the batch's prepared transactions. A batch replayed after a crash (Spark replays the
offsets of its last uncommitted batch, but not necessarily with the same tasks) whose decision
is recorded is finished by committing exactly the recorded transactions, and its replay's are
aborted: it writes nothing. A batch without a decision was never committed: the transactions
the dead run left open are aborted and the replay writes the batch again.

A batch write (`df.write`) is one decision of its own: its prepared set is recorded under
the write's id before any of it is committed, and forgotten once all are committed. A driver
that dies in between leaves the record; the next exactly-once batch write to the cluster
commits the rest (the dead write is then whole, never partial). A rerun of a failed write is
a new write (Spark's Kafka connector documents batch writes as at-least-once): it writes its
rows again, and with a `transactionalIdPrefix` it also aborts what an undecided earlier write
of that prefix left prepared.

`MINILOG_SINK_HALT=<batch>:<n>:<file>` in the driver's environment stops the commit of batch
<batch> (`write`: a batch write) once <n> of its transactions are committed after its decision
is recorded (`prepared`: before the decision is recorded): the file is written and the
committing process waits to be killed. The fault tests kill the driver there.
"""
from __future__ import annotations

import logging
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from pyspark import TaskContext
from pyspark.sql.datasource import WriterCommitMessage

from minilog.connector.client import ErrorCode, KafkaError

from . import clients
from .sink_decisions import WRITES, Decision, DecisionLog

log = logging.getLogger("minilog.datasource")

# Spark's local properties of a micro-batch's tasks (StreamExecution, MicroBatchExecution).
_QUERY_ID, _BATCH_ID = "sql.streaming.queryId", "streaming.sql.batchId"
_RUN_ID = "spark.jobGroup.id"  # StreamExecution.runStream: setJobGroup(runId, ...)
_ALREADY_ENDED = (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_TXN_STATE,
                  ErrorCode.INVALID_PRODUCER_ID_MAPPING, ErrorCode.INVALID_PRODUCER_EPOCH)
_HALT = "MINILOG_SINK_HALT"
_TIMED_OUT = (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH,
              ErrorCode.INVALID_TXN_STATE)
SPECULATION = ("Spark's speculative execution (spark.speculation=true) runs a second attempt "
               "of a task with the same transactional id, which fences the first one's "
               "transaction: set spark.speculation=false for exactly-once writes")


@dataclass
class Prepared(WriterCommitMessage):
    """One task's prepared transaction (`transactional_id` None: it wrote no row)."""
    records: int
    transactional_id: str | None = None
    state: str = ""          # PreparedTxnState as text
    query_id: str | None = None
    run: str = ""


def new_batch_prefix() -> str:
    """A prefix of one `df.write` (made on the driver): no later write shares its ids."""
    return f"minilog-sink-batch-{uuid.uuid4().hex}"


def new_run() -> str:
    """A writer's own run tag, for tasks that carry no Spark run id (job group)."""
    return uuid.uuid4().hex[:12]


def query_prefix(prefix: str | None, query_id: str) -> str:
    return prefix if prefix is not None else f"minilog-sink-{query_id}"


def task_identity(prefix: str | None, batch_prefix: str,
                  run: str) -> tuple[str, str | None, int | None, str]:
    """(transactional id, query id, batch id, run tag) of the running task: the batch id and
    the query id are None for a batch write (`df.write`), whose prefix is `batch_prefix`."""
    ctx = TaskContext.get()
    query_id = ctx.getLocalProperty(_QUERY_ID) if ctx else None
    batch = ctx.getLocalProperty(_BATCH_ID) if ctx else None
    partition = ctx.partitionId() if ctx else 0
    if query_id:
        run = run_tag(ctx.getLocalProperty(_RUN_ID)) or run
        txn_id = f"{query_prefix(prefix, query_id)}-{run}-{partition}"
    else:
        txn_id = f"{write_id(prefix, batch_prefix, run)}-{partition}"
    return txn_id, query_id, (None if batch is None else int(batch)), run


def write_id(prefix: str | None, batch_prefix: str, run: str) -> str:
    """The id of one batch write, which its tasks' transactional ids start with: a write's
    ids are its own, so a rerun never fences what a dead write prepared."""
    return batch_prefix if prefix is None else f"{prefix}-{run}"


def run_tag(run_id: str | None) -> str:
    """The short tag of Spark's run id (StreamExecution makes it the micro-batches' job
    group): the same for every micro-batch of one start of the query, new at each start.
    Spark builds the sink's writer again for every micro-batch, so the writer cannot keep it."""
    return (run_id or "").replace("-", "")[:12]


def write_prepared(batches, options, send, batch_prefix: str, run: str = "") -> Prepared:
    """Write `batches` in a transaction of this task's transactional id and prepare it.
    `send(producer, batches)` hands every row over: (deliveries, rows, first topic written)."""
    txn_id, query_id, batch_id, run = task_identity(options.transactional_id_prefix,
                                                    batch_prefix, run)
    producer = clients.producer({**options.client, "transactional.id": txn_id})
    started = None
    try:
        producer.init_transactions()
        producer.begin_transaction()
        started = time.monotonic()
        deliveries, rows, _ = send(producer, batches)
        if rows == 0:
            producer.abort_transaction()
            _put_back(producer, batch_id)
            return Prepared(0, query_id=query_id, run=run)
        state = producer.prepare_transaction()
        for d in deliveries:
            d.result(0)
    except KafkaError as e:
        _abandon(producer)
        raise _task_failure(e, txn_id, started, options.client) from e
    except BaseException:
        _abandon(producer)
        raise
    _put_back(producer, batch_id)
    return Prepared(rows, txn_id, str(state), query_id, run)


def _task_failure(e: KafkaError, txn_id: str, started: float | None,
                  client: dict) -> KafkaError:
    """What a task's transaction error means for the user: the coordinator aborted it because
    the task ran longer than transaction.timeout.ms (every retry will too: the batch must be
    smaller), or another attempt of the same task fenced it (a retry, or speculation)."""
    if e.code not in _TIMED_OUT or started is None:
        return e
    took_ms = (time.monotonic() - started) * 1000
    timeout_ms = int(client.get("transaction.timeout.ms", 60000))
    two_phase = str(client.get("transaction.two.phase.commit.enable", "")).lower() == "true"
    if not two_phase and took_ms >= timeout_ms:
        return KafkaError(e.code, (
            f"the transaction of {txn_id} was aborted by its coordinator: the task wrote for "
            f"{took_ms / 1000:.1f} s, longer than transaction.timeout.ms ({timeout_ms} ms), "
            f"and every retry of this micro-batch will too. Lower maxOffsetsPerTrigger (or "
            f"maxBytesPerTrigger) so that a micro-batch's task ends sooner, raise "
            f"kafka.transaction.timeout.ms (up to the brokers' transaction.max.timeout.ms), "
            f"or enable two-phase commit (kafka.transaction.two.phase.commit.enable). ({e})"))
    return KafkaError(e.code, (
        f"the transaction of {txn_id} was fenced by another attempt of the same task (a "
        f"retry after a lost executor, or a speculative copy). {SPECULATION}. ({e})"))


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
    """The driver's half: completes the tasks' prepared transactions as the query's decision
    for the batch says (`sink_decisions.py`). Kept for the life of the committing process
    (`completer_for`): the decisions are read once, not per micro-batch."""

    def __init__(self, client: dict, prefix: str | None = None):
        self.client, self.prefix = client, prefix
        self._admin = None
        self._decisions: DecisionLog | None = None
        self._runs: dict[str, str] = {}  # query id -> the run whose leftovers were resolved

    @property
    def admin(self):
        if self._admin is None:
            self._admin = clients.admin(self.client)
        return self._admin

    @property
    def decisions(self) -> DecisionLog:
        if self._decisions is None:
            self._decisions = DecisionLog(self.admin, self.client)
        return self._decisions

    def commit(self, messages, batch_id: int) -> None:
        """Commit batch `batch_id`'s prepared transactions, after recording the decision;
        or, for a batch decided before (a replay), finish the recorded ones and abort those
        of `messages`."""
        prepared = _prepared(messages)
        query_id, run = _query_of(messages)
        if query_id is None:
            return
        last = self._start_of_run(query_id, run, batch_id, prepared)
        if last is not None and last.batch >= batch_id:
            if last.batch > batch_id or self._finish(last):
                log.info("batch %d of query %s was decided before: its replay writes nothing",
                         batch_id, query_id)
                self._raise(self._end({m.transactional_id: (m.state, False) for m in prepared}))
                return
            log.warning("batch %d of query %s was decided, but the coordinator aborted every "
                        "one of its transactions: the replay writes it", batch_id, query_id)
        decision = Decision(query_id, batch_id,
                            {m.transactional_id: m.state for m in prepared}, run)
        if not decision.transactions:
            return
        _halt_at(str(batch_id), "prepared")
        self.decisions.record(decision)
        if not self._finish(decision):  # none committed: the replay writes the batch again
            self.decisions.record(Decision(query_id, batch_id - 1, {}, run))
            raise _not_committed(decision, list(decision.transactions))

    def commit_write(self, messages, write: str, prefix: str | None) -> None:
        """A batch write's commit: the writes that died mid-commit are finished first (and,
        with a `prefix`, what undecided earlier writes of it left prepared is aborted); then
        this write's prepared set is recorded, committed, and forgotten."""
        prepared = _prepared(messages)
        self.decisions.reload()
        if prefix is not None:
            self.decisions.claim(prefix, WRITES)
        self._finish_dead_writes()
        if prefix is not None:
            self._abort_leftovers(prefix + "-", {m.transactional_id for m in prepared})
        decision = Decision(write, -1, {m.transactional_id: m.state for m in prepared})
        if not decision.transactions:
            return
        _halt_at("write", "prepared")
        self.decisions.record_write(write, decision.transactions)
        if not self._finish(decision):
            self.decisions.forget_write(write)
            raise _not_committed(decision, list(decision.transactions))
        self.decisions.forget_write(write)

    def _finish_dead_writes(self) -> None:
        """Commit the rest of every batch write recorded and never forgotten: its driver died
        between its first and last commit (a live write's commits, done again here, are no
        error). A dead write the coordinator aborted in part cannot be made whole: said once."""
        for write, transactions in self.decisions.unfinished_writes().items():
            try:
                done = self._finish(Decision(write, -1, transactions))
                if not done:
                    log.warning("the batch write %s died before its commit, and its "
                                "transactions timed out: nothing of it was written", write)
                else:
                    log.info("finished the commit of the batch write %s, whose driver died "
                             "mid-commit: every row of it is written", write)
            except KafkaError as e:
                log.error("the batch write %s is partly written: %s", write, e)
            self.decisions.forget_write(write)

    def abort(self, messages, batch_id: int | None = None) -> None:
        """Abort `messages`' transactions, unless their batch was decided: Spark aborts a
        batch whose commit failed, and a decided batch can only go forward."""
        prepared = _prepared(messages)
        query_id, _ = _query_of(messages)
        last = None
        if batch_id is not None and query_id is not None:
            last = self.decisions.last(query_id)
        replayed = {m.transactional_id: (m.state, False) for m in prepared}
        if last is not None and last.batch == batch_id:
            replayed = {t: e for t, e in replayed.items() if t not in last.transactions}
            if not self._finish(last):
                raise _not_committed(last, list(last.transactions))
        self._raise(self._end(replayed))

    def _start_of_run(self, query_id: str, run: str, batch_id: int,
                      prepared) -> Decision | None:
        """The query's last decision; at the first batch of a run (of this process), the
        prefix is claimed and what earlier runs left open is resolved."""
        if self._runs.get(query_id) == run:
            return self.decisions.last(query_id)
        self.decisions.reload()
        self.decisions.claim(query_prefix(self.prefix, query_id), query_id)
        last = self.decisions.last(query_id)
        keep = {m.transactional_id for m in prepared}
        if last is not None and last.batch == batch_id:  # to be finished, not aborted
            keep |= set(last.transactions)
        self._abort_leftovers(query_prefix(self.prefix, query_id) + "-", keep)
        self._runs[query_id] = run
        return last

    def _abort_leftovers(self, prefix: str, keep: set[str]) -> None:
        """Abort the open transactions of `prefix` that no decision commits: prepared by a run
        that died before deciding, they would hold read_committed readers back until they
        time out (forever with two-phase commit)."""
        open_ids = [t.transactional_id for t in self.admin.list_transactions(states=["Ongoing"])
                    if t.transactional_id.startswith(prefix) and t.transactional_id not in keep]
        if not open_ids:
            return
        found = self.admin.describe_transactions(open_ids)
        log.info("aborting %d transactions left prepared by an earlier run: %s",
                 len(found), sorted(found))
        self._raise(self._end({t: (f"{d.producer_id}:{d.producer_epoch}", False)
                               for t, d in found.items()}))

    def _finish(self, decision: Decision) -> bool:
        """Commit every transaction of `decision` (committing again what is committed is no
        error): True once all are committed, False if none could be (the coordinator aborted
        them all: nothing of the batch is written); raise if only some are. All at once, or
        one by one when a fault test stops the commit part-way (`MINILOG_SINK_HALT`)."""
        ends = {t: (s, True) for t, s in decision.transactions.items()}
        if not os.environ.get(_HALT):
            failed = self._end(ends)
        else:
            failed, batch = {}, "write" if decision.batch < 0 else str(decision.batch)
            _halt_at(batch, "0")
            for i, t in enumerate(sorted(ends), 1):
                failed.update(self._end({t: ends[t]}))
                _halt_at(batch, str(i))
        if not failed:
            return True
        states = self.admin.describe_transactions(list(failed))
        lost = [t for t in failed if states[t].state != "CompleteCommit"]
        if not lost:
            return True
        if len(lost) == len(ends):
            return False
        raise _not_committed(decision, lost, failed[lost[0]])

    def _end(self, ends: dict) -> dict[str, KafkaError]:
        """Complete `ends` ({transactional id: (state text, commit)}); the errors that matter.
        An abort of a transaction already ended (fenced, completed) is no error."""
        if not ends:
            return {}
        from minilog.connector.client import PreparedTxnState  # the driver's commit step only
        results = self.admin.complete_transactions(
            {t: (PreparedTxnState.parse(s), c) for t, (s, c) in ends.items()})
        return {t: e for t, e in results.items() if e is not None and
                (ends[t][1] or e.code not in _ALREADY_ENDED)}

    @staticmethod
    def _raise(failed: dict[str, KafkaError]) -> None:
        if failed:
            raise next(iter(failed.values()))

    def close(self) -> None:
        if self._decisions is not None:
            self._decisions.close()
            self._decisions = None
        if self._admin is not None:
            self._admin.close()
            self._admin = None


_completers: dict[tuple, Completer] = {}


def completer_for(client: dict, prefix: str | None) -> Completer:
    """The committing process's Completer for a sink's settings: Spark makes a new writer for
    every micro-batch's commit, in the same process, so what the Completer knows (its admin
    client, the decisions read) is kept here rather than in the writer."""
    key = (clients.settings_key(client), prefix)
    if key not in _completers:
        _completers[key] = Completer(client, prefix)
    return _completers[key]


def _not_committed(decision: Decision, lost: list[str],
                   cause: KafkaError | None = None) -> KafkaError:
    """A batch whose transactions could not all be committed: the coordinator aborted them
    (their transaction.timeout.ms passed before the driver committed them), or a newer
    attempt of the same task fenced them (speculative execution)."""
    what = (f"the batch write {decision.query_id}" if decision.batch < 0 else
            f"batch {decision.batch} of query {decision.query_id}")
    return KafkaError(ErrorCode.INVALID_PRODUCER_EPOCH, (
        f"{what}: {len(lost)} of its "
        f"{len(decision.transactions)} prepared transactions could not be committed"
        f"{f' ({cause})' if cause else ''}: their transaction was aborted, either by the "
        f"coordinator because it stayed open "
        f"longer than the producers' transaction.timeout.ms (lower maxOffsetsPerTrigger so "
        f"that a micro-batch takes less time, raise kafka.transaction.timeout.ms up to the "
        f"brokers' transaction.max.timeout.ms, or enable two-phase commit, "
        f"kafka.transaction.two.phase.commit.enable, so that prepared transactions wait "
        f"for the driver), or by another attempt of the same task. {SPECULATION}"))


def _halt_at(batch: str, point: str) -> None:
    """The fault tests' stopping point (`MINILOG_SINK_HALT`): tell the test, wait to die."""
    spec = os.environ.get(_HALT, "")
    at, _, rest = spec.partition(":")
    count, _, path = rest.partition(":")
    if spec and at == batch and count == point:
        Path(path).write_text(f"batch {batch}: {point}\n")
        while True:
            time.sleep(60)


def _query_of(messages) -> tuple[str | None, str]:
    for m in messages or ():
        if isinstance(m, Prepared) and m.query_id:
            return m.query_id, m.run
    return None, ""


def _prepared(messages):
    return [m for m in messages or () if isinstance(m, Prepared) and m.transactional_id]
