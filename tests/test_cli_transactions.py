"""`minilog transactions list|describe` as a user runs them, against transactions that
confluent-kafka's producer leaves open or commits, with kafka-transactions.sh's columns;
DescribeProducers answered from the partition leader's producer state; and a KIP-939 prepared
transaction whose producer is gone, found by `list --state --duration-filter` and ended by
`force-terminate`."""
import uuid

import pytest
from brokers import MinilogBroker
from clitools import FAILED, USAGE, ok, one_line_error, run
from minilog.connector.client import Producer
from minilog.connector.protocol import ApiKey, request
from txntools import SMALL, produce_in_txn, read_all, txn_producer
from wire import RawConnection

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def tbroker():
    b = MinilogBroker(extra=SMALL + ["-o", "transaction.two.phase.commit.enable=true"]).start()
    yield b
    b.cleanup()


def _rows(text):
    lines = [ln.split() for ln in text.splitlines() if ln.strip()]
    return [dict(zip(lines[0], ln)) for ln in lines[1:]]


def test_list_and_describe_show_an_open_transaction_and_a_completed_one(tbroker):
    bs, topic = tbroker.bootstrap, f"tx-{uuid.uuid4().hex[:8]}"
    ok("topics", "create", topic, "-b", bs)
    done, open_ = txn_producer(bs, f"done-{topic}"), txn_producer(bs, f"open-{topic}")
    done.begin_transaction()
    produce_in_txn(done, topic, [b"x"])
    done.commit_transaction(60)
    open_.begin_transaction()
    produce_in_txn(open_, topic, [b"y"])
    listed = {r["TransactionalId"]: r for r in _rows(ok("transactions", "list", "-b", bs))}
    assert listed[f"open-{topic}"]["TransactionState"] == "Ongoing"
    assert listed[f"done-{topic}"]["TransactionState"] == "CompleteCommit"
    described, = _rows(ok("transactions", "describe", f"open-{topic}", "-b", bs))
    assert described["TransactionState"] == "Ongoing"
    assert described["TopicPartitions"] == f"{topic}-0"
    assert int(described["TransactionDurationMs"]) >= 0
    assert described["ProducerId"] == listed[f"open-{topic}"]["ProducerId"]
    open_.abort_transaction(60)


def test_describe_of_an_unknown_transactional_id_is_one_line(tbroker):
    err = one_line_error(run("transactions", "describe", "no-such-id", "-b", tbroker.bootstrap),
                         FAILED)
    assert "TRANSACTIONAL_ID_NOT_FOUND" in err


def test_describe_producers_shows_the_open_transaction_start(tbroker):
    bs, topic = tbroker.bootstrap, f"dp-{uuid.uuid4().hex[:8]}"
    ok("topics", "create", topic, "-b", bs)
    p = txn_producer(bs, f"dp-{topic}")
    p.begin_transaction()
    produce_in_txn(p, topic, [b"a", b"b"])
    req = request(ApiKey.DESCRIBE_PRODUCERS)
    conn = RawConnection(bs)
    try:
        answer = conn.call(ApiKey.DESCRIBE_PRODUCERS, 0, req.cls(topics=[req.make(
            "topics", name=topic, partition_indexes=[0])]))
    finally:
        conn.close()
    part, = answer.topics[0].partitions
    producer, = part.active_producers
    assert (part.error_code, producer.current_txn_start_offset, producer.last_sequence) == \
        (0, 0, 1)
    p.abort_transaction(60)


def test_consume_with_read_committed_prints_only_committed_records(tbroker):
    bs, topic = tbroker.bootstrap, f"iso-{uuid.uuid4().hex[:8]}"
    ok("topics", "create", topic, "-b", bs)
    p = txn_producer(bs, f"iso-{topic}")
    for value, commit in ((b"kept", True), (b"dropped", False)):
        p.begin_transaction()
        produce_in_txn(p, topic, [value])
        p.commit_transaction(60) if commit else p.abort_transaction(60)
    args = ("consume", topic, "--from-beginning", "--exit", "-f", "%s\\n", "-b", bs)
    assert ok(*args, "--isolation-level", "read_committed").split() == ["kept"]
    assert ok(*args).split() == ["kept", "dropped"]


def test_topics_describe_shows_the_lso_only_where_a_transaction_holds_it_back(tbroker):
    bs, topic = tbroker.bootstrap, f"lso-{uuid.uuid4().hex[:8]}"
    ok("topics", "create", topic, "--partitions", "2", "-b", bs)
    p = txn_producer(bs, f"lso-{topic}")
    p.begin_transaction()
    produce_in_txn(p, topic, [b"a", b"b"], partition=1)
    lines = [ln for ln in ok("topics", "describe", topic, "-b", bs).splitlines()
             if "Partition:" in ln]
    assert "LastStableOffset" not in lines[0]
    assert lines[1].endswith("\tLastStableOffset: 0\tHighWatermark: 2"), lines[1]
    p.commit_transaction(60)
    assert "LastStableOffset" not in ok("topics", "describe", topic, "-b", bs)


def _prepare_and_leave(bs, txn_id, topic, value):
    """A two-phase producer prepares a transaction and is closed without deciding: nothing
    will end it (two-phase transactions never time out)."""
    p = Producer({"bootstrap.servers": bs, "transactional.id": txn_id,
                  "transaction.two.phase.commit.enable": True})
    try:
        p.init_transactions(60)
        p.begin_transaction()
        p.send(topic, value=value, partition=0)
        p.prepare_transaction(60)
    finally:
        p.close()


def _committed_in_txn(bs, txn_id, topic, value):
    p = txn_producer(bs, txn_id)
    p.begin_transaction()
    produce_in_txn(p, topic, [value])
    p.commit_transaction(60)


def test_an_orphaned_prepared_transaction_is_listed_and_force_terminated(tbroker):
    bs, topic = tbroker.bootstrap, f"orphan-{uuid.uuid4().hex[:8]}"
    ok("topics", "create", topic, "-b", bs)
    _committed_in_txn(bs, f"before-{topic}", topic, b"before")
    _prepare_and_leave(bs, f"prepared-{topic}", topic, b"orphan")
    _committed_in_txn(bs, f"after-{topic}", topic, b"after")  # behind the orphan
    assert read_all(bs, topic, "read_committed", 1) == [b"before"]  # held back
    listed = _rows(ok("transactions", "list", "--state", "Ongoing", "--duration-filter", "0",
                      "-b", bs))
    assert f"prepared-{topic}" in {r["TransactionalId"] for r in listed}
    assert {r["TransactionState"] for r in listed} == {"Ongoing"}
    assert not _rows(ok("transactions", "list", "--state", "Ongoing", "--duration-filter",
                        "3600000", "-b", bs))  # open for less than an hour
    out = ok("transactions", "force-terminate", f"prepared-{topic}", "-b", bs)
    assert f"Terminated the transaction of prepared-{topic}" in out
    assert sorted(read_all(bs, topic, "read_committed", 2)) == [b"after", b"before"]
    described, = _rows(ok("transactions", "describe", f"prepared-{topic}", "-b", bs))
    assert described["TransactionState"] == "Empty"  # aborted, then the id's epoch bumped


def test_a_negative_duration_filter_is_one_line(tbroker):
    err = one_line_error(run("transactions", "list", "--duration-filter", "-5", "-b",
                             tbroker.bootstrap), USAGE)
    assert "--duration-filter" in err
