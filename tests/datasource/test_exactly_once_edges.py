"""The exactly-once sink's edges, against one broker (two-phase commit enabled, timed-out
transactions aborted within half a second) and the suite's Spark session:

- a batch write (`df.write`) whose driver is killed mid-commit is made whole by the next
  exactly-once write, never left partial; one killed before its decision is rewritten once
  by a rerun with its `transactionalIdPrefix` (its prepared transactions aborted);
- the decisions topic is compacted and keeps records forever;
- a micro-batch that writes for longer than `transaction.timeout.ms` fails saying so, naming
  `maxOffsetsPerTrigger`;
- a prepared transaction fenced by another attempt of its task (what a speculative copy does)
  fails the commit naming `spark.speculation`;
- the driver's commits use one admin client per query: a query of many micro-batches asks the
  broker for its transactions once and opens no connection per micro-batch.

Killed drivers run as their own processes (`eos_write_job.py`), stopped at named points of
their commit (`MINILOG_SINK_HALT`) and killed with SIGKILL; output is counted by a
read_committed confluent-kafka consumer."""
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from eos_write_job import values, write_values
from pyspark.errors import StreamingQueryException
from prometheus import scrape
from sparkprocs import environment, kill_marked, marked
from sparktools import create_topic, produce, unique
from txntools import SMALL, read_all
from waiting import wait_until

from brokers import MinilogBroker, free_port
from minilog.connector.client import AdminClient, KafkaError, Producer
from minilog.datasource.options import sink_options
from minilog.datasource.sink_decisions import TOPIC, DecisionLog
from minilog.datasource.transactional import Completer, Prepared
from minilog.jobs.pipeline import start_query

pytestmark = pytest.mark.timeout(600)

JOB = Path(__file__).with_name("eos_write_job.py")
ROWS = 60
TIMEOUT_CLEANUP = ["-o", "transaction.abort.timed.out.transaction.cleanup.interval.ms=500",
                   "-o", "transaction.two.phase.commit.enable=true"]


@pytest.fixture(scope="module")
def broker():
    b = MinilogBroker(extra=SMALL + TIMEOUT_CLEANUP)
    b.metrics_port = free_port()
    b.start()
    yield b
    b.cleanup()


def write_killed_at(broker, out, point, tmp_path, prefix=None):
    """Run the batch-write job until `point` of its commit ("prepared": before its decision;
    n: n transactions committed after it), then kill all of its processes."""
    mark, halted, log = uuid.uuid4().hex, tmp_path / "halted", tmp_path / "job.log"
    args = [broker.bootstrap, out, str(ROWS)] + ([prefix] if prefix else [])
    with open(log, "ab") as f:
        job = subprocess.Popen([sys.executable, str(JOB), *args], stdout=f,
                               stderr=subprocess.STDOUT, env=environment(
                                   mark, MINILOG_SINK_HALT=f"write:{point}:{halted}"))
    try:
        wait_until(lambda: halted.exists() or job.poll() is not None, 300,
                   "the batch write's commit to reach its halt")
        assert halted.exists(), log.read_text(errors="replace")[-3000:]
    finally:
        for pid in marked(mark):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        job.wait(60)
        kill_marked(mark)


def test_a_batch_write_killed_mid_commit_is_finished_by_the_next_write(spark, broker,
                                                                      tmp_path):
    """The dead write recorded its two transactions and committed one: the next write
    commits the other, then writes its own rows. Each row twice: the dead write whole (never
    half of it), and the rerun, a new write (at-least-once across reruns, as Spark's Kafka
    sink documents batch writes)."""
    out = create_topic(broker.bootstrap, unique("write-mid"), 2)
    write_killed_at(broker, out, 1, tmp_path)
    write_values(spark, broker.bootstrap, out, ROWS)
    got = read_all(broker.bootstrap, out, "read_committed", 2 * ROWS, partitions=2)
    assert sorted(got) == sorted(values(ROWS) * 2)


def test_a_batch_write_killed_before_its_decision_is_rewritten_once_with_its_prefix(
        spark, broker, tmp_path):
    """Nothing of the dead write was decided: a rerun with the same transactionalIdPrefix
    aborts what it left prepared (two-phase: it would never time out) and writes every row
    once."""
    out = create_topic(broker.bootstrap, unique("write-undecided"), 2)
    prefix = unique("nightly")
    write_killed_at(broker, out, "prepared", tmp_path, prefix)
    write_values(spark, broker.bootstrap, out, ROWS, prefix)
    got = read_all(broker.bootstrap, out, "read_committed", ROWS, partitions=2)
    assert sorted(got) == sorted(values(ROWS))


def test_the_decisions_topic_is_compacted_and_kept_forever(broker):
    """Decisions must outlive any retention: a query restarted a month after a crash still
    finds its last one (group offsets would have expired)."""
    client = {"bootstrap.servers": broker.bootstrap}
    with AdminClient(client) as admin:
        decisions = DecisionLog(admin, client)
        assert decisions.last(unique("query")) is None  # made on first use, as the sink does
        decisions.close()
        config = {k: e.value for k, e in admin.describe_configs("topic", TOPIC).items()}
    assert (config["cleanup.policy"], config["retention.ms"], config["retention.bytes"]) == \
        ("compact", "-1", "-1")


def trickled_copy(spark, broker, source, out, checkpoint, sink, seconds_per_row):
    """An availableNow copy of `source` into `out` whose tasks hand each row to the sink
    `seconds_per_row` apart (Arrow batches of one row, 40 kB rows: the rows reach the sink's
    writer as slowly as they are made); the query, ended."""
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = spark.conf.get(key)
    spark.conf.set(key, "1")

    def slowly(batches):
        import time as t
        for batch in batches:
            for start in range(batch.num_rows):
                yield batch.slice(start, 1)
                t.sleep(seconds_per_row)
    try:
        df = (spark.readStream.format("minilog")
              .option("kafka.bootstrap.servers", broker.bootstrap).option("subscribe", source)
              .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", 20)
              .load().select("value").mapInArrow(slowly, "value binary"))
        w = (df.writeStream.format("minilog").option("kafka.bootstrap.servers", broker.bootstrap)
             .option("topic", out).option("deliveryGuarantee", "exactly-once")
             .option("checkpointLocation", str(checkpoint)).options(**sink)
             .trigger(availableNow=True))
        query = start_query(w)
        try:
            ended = query.awaitTermination(400)
        except StreamingQueryException:
            ended = True  # it failed: exception() says why
        finally:
            query.stop()
        assert ended, "the query did not end"
        return query
    finally:
        spark.conf.set(key, before)


def test_a_micro_batch_longer_than_the_transaction_timeout_fails_naming_the_remedy(
        spark, broker, tmp_path):
    """One task writes 6 rows 0.4 s apart inside a transaction that times out after 1 s
    (aborted within 1.5 s: the broker looks every 0.5 s): the coordinator aborts it, every
    retry does the same, and the query's error says why (the task's, when the abort comes
    mid-write; the driver's, when it comes between the task's prepare and the driver's
    commit). One task, not more: each of Spark's four attempts costs its write time."""
    source = create_topic(broker.bootstrap, unique("slow-in"), 1)
    produce(broker.bootstrap, source, [(0, None, f"0-{i}".encode().ljust(40_000, b"."), [])
                                       for i in range(6)])
    out = create_topic(broker.bootstrap, unique("slow-out"), 1)
    query = trickled_copy(spark, broker, source, out, tmp_path / "ck",
                          {"kafka.transaction.timeout.ms": "1000"}, 0.4)
    error = str(query.exception())
    assert "longer than" in error and "transaction.timeout.ms" in error, error[-3000:]
    assert "Lower maxOffsetsPerTrigger" in error or "lower maxOffsetsPerTrigger" in error, \
        error[-3000:]


def test_a_prepared_transaction_fenced_by_another_attempt_fails_naming_speculation(broker):
    """What a speculative copy of a write task does: the same transactional id initialised
    again aborts the first attempt's prepared transaction; the driver's commit of the batch
    then fails, and says which Spark setting leads there."""
    out = create_topic(broker.bootstrap, unique("fenced"), 1)
    options = sink_options({"kafka.bootstrap.servers": broker.bootstrap, "topic": out,
                            "deliveryGuarantee": "exactly-once"})
    txn_id, query_id = f"minilog-sink-{unique('q')}-run-0", unique("query")
    first = Producer({**options.client, "transactional.id": txn_id})
    first.init_transactions(60)
    first.begin_transaction()
    first.send(out, value=b"first attempt", partition=0)
    state = first.prepare_transaction(60)
    speculative = Producer({**options.client, "transactional.id": txn_id})
    speculative.init_transactions(60)  # fences the first attempt and aborts its transaction
    completer = Completer(options.client, f"minilog-sink-{query_id}")
    try:
        with pytest.raises(KafkaError) as failed:
            completer.commit([Prepared(1, txn_id, str(state), query_id, "run")], 0)
    finally:
        completer.close()
        first.close()
        speculative.close()
    assert "spark.speculation=false" in str(failed.value), failed.value


def requests(broker):
    """{request name: how many the broker has answered}."""
    return {dict(labels)["request"]: value for (name, labels), value in scrape(broker).items()
            if name == "kafka_network_requestmetrics_totaltimems_count"}


def test_the_driver_asks_for_transactions_once_per_query_not_per_micro_batch(spark, broker,
                                                                              tmp_path):
    """Twenty micro-batches of two tasks: the driver resolves what an earlier run left open
    once (one ListTransactions) and completes the 40 transactions over connections it keeps:
    fewer connections are opened in the whole query (ApiVersions: the tasks' pooled
    producers, one per Python worker and transactional id, and the driver's clients) than
    transactions are committed (EndTxn), where a connection per commit made more."""
    source = create_topic(broker.bootstrap, unique("many-in"), 2)
    produce(broker.bootstrap, source, [(p, None, f"{p}-{i}".encode(), [])
                                       for p in range(2) for i in range(200)])
    out = create_topic(broker.bootstrap, unique("many-out"), 2)
    before = requests(broker)
    query = trickled_copy(spark, broker, source, out, tmp_path / "ck", {}, 0)
    after = requests(broker)
    assert query.exception() is None, query.exception()
    batches = [p for p in query.recentProgress if p["numInputRows"]]
    assert len(batches) == 20
    asked = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    assert asked.get("ListTransactions", 0) == 1, asked
    assert asked["EndTxn"] >= 40 and asked.get("ApiVersions", 0) < asked["EndTxn"], asked
    assert len(read_all(broker.bootstrap, out, "read_committed", 400, partitions=2)) == 400
