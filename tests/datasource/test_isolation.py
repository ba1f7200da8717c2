"""`kafka.isolation.level` in the source: read_committed ranges end at the last stable offset and
hold no record of an aborted transaction; read_uncommitted (the default) reads everything.

One broker for the module, a topic holding, in order: 5 committed records, 5 aborted, 5
committed, then 5 of a transaction left open (its records hold the LSO back)."""
import pytest
from sparktools import create_topic, run_available_now, unique
from txntools import SMALL, produce_in_txn, txn_producer

from brokers import MinilogBroker


@pytest.fixture(scope="module")
def txn_broker():
    b = MinilogBroker(extra=SMALL).start()
    yield b
    b.cleanup()


def values(prefix, n):
    return [f"{prefix}{i}".encode() for i in range(n)]


@pytest.fixture(scope="module")
def topic(txn_broker):
    """committed c0..c4, aborted a0..a4, committed d0..d4, open o0..o4 (never ended)."""
    name = create_topic(txn_broker.bootstrap, unique("iso"), 1)
    # the open transaction must outlive the module: the coordinator would abort it at timeout
    p = txn_producer(txn_broker.bootstrap, unique("iso-writer"), **{"transaction.timeout.ms": 900000})
    for prefix, commit in (("c", True), ("a", False), ("d", True)):
        p.begin_transaction()
        produce_in_txn(p, name, values(prefix, 5))
        (p.commit_transaction if commit else p.abort_transaction)(60)
    p.begin_transaction()
    produce_in_txn(p, name, values("o", 5))
    yield name
    p.abort_transaction(60)


# a range planned past the LSO would wait for records a read_committed fetch never returns:
# fail fast instead of waiting for the open transaction
POLL = {"kafkaConsumer.pollTimeoutMs": 10000}


def read(spark, broker, topic, **options):
    r = (spark.read.format("minilog").option("kafka.bootstrap.servers", broker.bootstrap)
         .option("subscribe", topic).options(**POLL))
    for k, v in options.items():
        r = r.option(k, v)
    return sorted(bytes(row.value) for row in r.load().select("value").collect())


COMMITTED = sorted(values("c", 5) + values("d", 5))


def test_batch_read_committed_sees_only_committed_records_up_to_the_lso(spark, txn_broker,
                                                                         topic):
    got = read(spark, txn_broker, topic, **{"kafka.isolation.level": "read_committed"})
    assert got == COMMITTED


def test_batch_read_uncommitted_is_the_default_and_reads_everything(spark, txn_broker, topic):
    assert read(spark, txn_broker, topic) == sorted(
        COMMITTED + values("a", 5) + values("o", 5))


def test_streaming_read_committed_skips_markers_and_aborted_records(spark, txn_broker, topic,
                                                                    tmp_path):
    """Small micro-batches (2 offsets each) land on markers and aborted records: no stall, no
    data loss reported, only committed values."""
    df = (spark.readStream.format("minilog")
          .option("kafka.bootstrap.servers", txn_broker.bootstrap).option("subscribe", topic)
          .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", 2)
          .option("kafka.isolation.level", "read_committed").options(**POLL).load())
    name = unique("iso_stream").replace("-", "_")
    run_available_now(df.select("value"), tmp_path / "ck", name=name)
    got = sorted(bytes(r.value) for r in spark.sql(f"select value from {name}").collect())
    assert got == COMMITTED
