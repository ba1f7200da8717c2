"""The exactly-once sink (`deliveryGuarantee` = `exactly-once`): tasks write in transactions
that the driver commits, once per batch id, against one broker and the suite's Spark session.

The replay test makes Spark do what it does after a driver crash between the broker's commits
and its own commit log: the last entry of the checkpoint's commit log is removed, so the restarted
query runs that micro-batch again. At-least-once writes it twice; exactly-once does not."""
import pytest
from sparktools import create_topic, produce, run_available_now, unique
from txntools import SMALL, read_all

from brokers import MinilogBroker
from minilog.connector.client import AdminClient

ROWS = 30  # per input partition


@pytest.fixture(scope="module")
def txn_broker():
    b = MinilogBroker(extra=SMALL + ["-o", "transaction.two.phase.commit.enable=true"]).start()
    yield b
    b.cleanup()


@pytest.fixture(scope="module")
def source(txn_broker):
    name = create_topic(txn_broker.bootstrap, unique("eos-in"), 2)
    produce(txn_broker.bootstrap, name, [(p, None, f"v{p}-{i}".encode(), [])
                                         for p in range(2) for i in range(ROWS)])
    return name


INPUT = sorted(f"v{p}-{i}".encode() for p in range(2) for i in range(ROWS))


def copy(spark, broker, source, out, checkpoint, guarantee, **sink):
    """Copy `source` to `out` with availableNow, 20 offsets per micro-batch."""
    df = (spark.readStream.format("minilog").option("kafka.bootstrap.servers", broker.bootstrap)
          .option("subscribe", source).option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", 20).load().select("value"))
    return run_available_now(df, checkpoint, sink="minilog", topic=out,
                             deliveryGuarantee=guarantee,
                             **{"kafka.bootstrap.servers": broker.bootstrap}, **sink)


def forget_last_commit(checkpoint):
    """Spark's state after a crash between the sink's commit and its commit log."""
    commits = sorted((checkpoint / "commits").glob("[0-9]*"), key=lambda f: int(f.name))
    commits[-1].unlink()
    crc = commits[-1].parent / f".{commits[-1].name}.crc"
    crc.unlink(missing_ok=True)
    return int(commits[-1].name)


@pytest.mark.parametrize("guarantee,copies", [("exactly-once", 1), ("at-least-once", 2)])
def test_a_batch_replayed_after_the_sinks_commit_is_written_once(spark, txn_broker, source,
                                                                 tmp_path, guarantee, copies):
    """Three micro-batches of 20 offsets, the last one run twice."""
    out = create_topic(txn_broker.bootstrap, unique("eos-replay"), 2)
    checkpoint, prefix = tmp_path / "ck", f"{out}-txn"
    sink = {"transactionalIdPrefix": prefix} if guarantee == "exactly-once" else {}
    first = copy(spark, txn_broker, source, out, checkpoint, guarantee, **sink)
    assert [p["numInputRows"] for p in first if p["numInputRows"]] == [20, 20, 20]
    replayed = forget_last_commit(checkpoint)
    progress = copy(spark, txn_broker, source, out, checkpoint, guarantee, **sink)
    assert [p["batchId"] for p in progress][:1] == [replayed]  # Spark did run it again
    got = read_all(txn_broker.bootstrap, out, "read_committed", 2 * ROWS, partitions=2)
    last = {f"v{p}-{i}".encode() for p in range(2) for i in range(ROWS - 10, ROWS)}
    expected = sorted(INPUT + [v for v in INPUT if v in last] * (copies - 1))
    assert sorted(got) == expected
    if sink:  # every transaction of the sink ended: committed, or the replay's aborted
        with AdminClient({"bootstrap.servers": txn_broker.bootstrap}) as admin:
            states = {t.transactional_id: t.state for t in admin.list_transactions()
                      if t.transactional_id.startswith(f"{prefix}-")}
        # two tasks in each of the two runs (each run's ids are its own)
        assert len(states) == 4 and set(states.values()) <= {"CompleteCommit",
                                                              "CompleteAbort"}, states


def test_exactly_once_batch_write_commits_when_every_task_succeeded(spark, txn_broker,
                                                                   tmp_path):
    """With KIP-939's two-phase commit on: the prepared transactions would never time out."""
    out = create_topic(txn_broker.bootstrap, unique("eos-batch"), 2)
    rows = [(f"b{i}",) for i in range(40)]
    (spark.createDataFrame(rows, "value string").repartition(3).write.format("minilog")
     .option("kafka.bootstrap.servers", txn_broker.bootstrap).option("topic", out)
     .option("deliveryGuarantee", "exactly-once")
     .option("kafka.transaction.two.phase.commit.enable", "true").mode("append").save())
    got = read_all(txn_broker.bootstrap, out, "read_committed", 40, partitions=2)
    assert sorted(got) == sorted(f"b{i}".encode() for i in range(40))
    with AdminClient({"bootstrap.servers": txn_broker.bootstrap}) as admin:
        ids = [t.transactional_id for t in admin.list_transactions()
               if t.transactional_id.startswith("minilog-sink-batch-")]
        timeouts = {d.timeout_ms for d in admin.describe_transactions(ids).values()}
    assert ids and timeouts == {2**31 - 1}  # two-phase: never timed out by the broker
