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
    b = MinilogBroker(extra=SMALL).start()
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


def test_exactly_once_stream_writes_every_row_once_in_committed_transactions(
        spark, txn_broker, source, tmp_path):
    out = create_topic(txn_broker.bootstrap, unique("eos-out"), 2)
    progress = copy(spark, txn_broker, source, out, tmp_path / "ck", "exactly-once",
                    transactionalIdPrefix=f"{out}-txn")
    assert len(progress) >= 3  # several micro-batches, each its own transactions
    assert sorted(read_all(txn_broker.bootstrap, out, "read_committed", 2 * ROWS,
                           partitions=2)) == INPUT
    with AdminClient({"bootstrap.servers": txn_broker.bootstrap}) as admin:
        states = {t.transactional_id: t.state for t in admin.list_transactions()
                  if t.transactional_id.startswith(f"{out}-txn-")}
    assert states and set(states.values()) == {"CompleteCommit"}, states


@pytest.mark.parametrize("guarantee,copies", [("exactly-once", 1), ("at-least-once", 2)])
def test_a_batch_replayed_after_the_sinks_commit_is_written_once(spark, txn_broker, source,
                                                                 tmp_path, guarantee, copies):
    out = create_topic(txn_broker.bootstrap, unique("eos-replay"), 2)
    checkpoint = tmp_path / "ck"
    copy(spark, txn_broker, source, out, checkpoint, guarantee)
    replayed = forget_last_commit(checkpoint)
    progress = copy(spark, txn_broker, source, out, checkpoint, guarantee)
    assert [p["batchId"] for p in progress][:1] == [replayed]  # Spark did run it again
    got = read_all(txn_broker.bootstrap, out, "read_committed", 2 * ROWS, partitions=2)
    last = {f"v{p}-{i}".encode() for p in range(2) for i in range(ROWS - 10, ROWS)}
    expected = sorted(INPUT + [v for v in INPUT if v in last] * (copies - 1))
    assert sorted(got) == expected


def test_exactly_once_batch_write_commits_when_every_task_succeeded(spark, txn_broker,
                                                                   tmp_path):
    out = create_topic(txn_broker.bootstrap, unique("eos-batch"), 2)
    rows = [(f"b{i}",) for i in range(40)]
    (spark.createDataFrame(rows, "value string").repartition(3).write.format("minilog")
     .option("kafka.bootstrap.servers", txn_broker.bootstrap).option("topic", out)
     .option("deliveryGuarantee", "exactly-once").mode("append").save())
    got = read_all(txn_broker.bootstrap, out, "read_committed", 40, partitions=2)
    assert sorted(got) == sorted(f"b{i}".encode() for i in range(40))
