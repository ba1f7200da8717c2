"""Transactions on one broker, with confluent-kafka as a user writes them (KIP-98, KIP-447):
commit and abort, read_committed consumers, the last stable offset, zombie fencing, offsets
committed with the transaction, and the state surviving kill -9; and the leader's check that a
transactional write belongs to an ongoing transaction (KIP-890 part 1, raw requests)."""
import pytest
from brokers import MinilogBroker
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from minilog.connector.protocol import ApiKey, ErrorCode, request
from test_groups import _create
from txntools import (SMALL, list_offset, produce_in_txn, raw_add_partition, raw_end_txn,
                      raw_init, raw_txn_produce, read_all, txn_producer)
from waiting import wait_until
from wire import RawConnection

pytestmark = pytest.mark.timeout(240)



@pytest.fixture(scope="module")
def txn_broker():
    b = MinilogBroker(extra=SMALL).start()
    yield b
    b.cleanup()


def test_read_committed_sees_committed_records_and_never_aborted_ones(txn_broker):
    bs = txn_broker.bootstrap
    _create(bs, "commits", 1)
    p = txn_producer(bs, "commits-1")
    for prefix, commit in ((b"c", True), (b"a", False), (b"d", True)):
        p.begin_transaction()
        produce_in_txn(p, "commits", [prefix + b"%d" % i for i in range(5)])
        p.commit_transaction(60) if commit else p.abort_transaction(60)
    committed = [b"%s%d" % (x, i) for x in (b"c", b"d") for i in range(5)]
    assert read_all(bs, "commits", "read_committed", 10) == committed
    every = read_all(bs, "commits", "read_uncommitted", 15)
    assert sorted(every) == sorted(committed + [b"a%d" % i for i in range(5)])


def test_an_open_transaction_holds_the_last_stable_offset(txn_broker):
    bs = txn_broker.bootstrap
    _create(bs, "open", 1)
    p = txn_producer(bs, "open-1")
    p.begin_transaction()
    produce_in_txn(p, "open", [b"pending-%d" % i for i in range(3)])
    from confluent_kafka import Producer
    plain = Producer({"bootstrap.servers": bs})
    plain.produce("open", b"after")
    assert plain.flush(60) == 0
    assert list_offset(bs, "open", 0, isolation_level=0) == 4
    assert list_offset(bs, "open", 0, isolation_level=1) == 0  # the transaction's first offset
    assert read_all(bs, "open", "read_committed", 0) == []
    p.commit_transaction(60)
    assert list_offset(bs, "open", 0, isolation_level=1) >= 5  # past the marker
    assert read_all(bs, "open", "read_committed", 4) == \
        [b"pending-0", b"pending-1", b"pending-2", b"after"]


def test_a_new_instance_fences_the_old_one_and_aborts_its_transaction(txn_broker):
    bs = txn_broker.bootstrap
    _create(bs, "zombie", 1)
    old = txn_producer(bs, "zombie-1")
    old.begin_transaction()
    produce_in_txn(old, "zombie", [b"from-the-zombie"])
    new = txn_producer(bs, "zombie-1")  # same transactional.id: fences `old`
    new.begin_transaction()
    produce_in_txn(new, "zombie", [b"from-the-new-one"])
    new.commit_transaction(60)
    with pytest.raises(KafkaException) as e:
        old.commit_transaction(60)
    assert e.value.args[0].code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                      KafkaError.INVALID_PRODUCER_EPOCH), e.value
    assert read_all(bs, "zombie", "read_committed", 1) == [b"from-the-new-one"]


def _consumer_offsets(bs, group, topic):
    c = Consumer({"bootstrap.servers": bs, "group.id": group})
    try:
        return [tp.offset for tp in c.committed([TopicPartition(topic, 0)], timeout=30)]
    finally:
        c.close()


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_offsets_sent_to_a_transaction_count_only_if_it_commits(txn_broker, commit):
    bs = txn_broker.bootstrap
    source, sink, group = f"source-{commit}", f"sink-{commit}", f"copier-{commit}"
    _create(bs, source, 1)
    _create(bs, sink, 1)
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition(source, 0, 0)])
        p = txn_producer(bs, f"copier-{commit}")
        p.begin_transaction()
        produce_in_txn(p, sink, [b"copied"])
        p.send_offsets_to_transaction([TopicPartition(source, 0, 42)],
                                      c.consumer_group_metadata(), 60)
        p.commit_transaction(60) if commit else p.abort_transaction(60)
    finally:
        c.close()
    assert _consumer_offsets(bs, group, source) == [42 if commit else -1001]


def test_transactions_survive_kill_9(make_broker):
    b = make_broker(extra=SMALL)
    _create(b.bootstrap, "durable", 1)
    p = txn_producer(b.bootstrap, "durable-1")
    for prefix, commit in ((b"c", True), (b"a", False)):
        p.begin_transaction()
        produce_in_txn(p, "durable", [prefix + b"%d" % i for i in range(3)])
        p.commit_transaction(60) if commit else p.abort_transaction(60)
    p.begin_transaction()
    produce_in_txn(p, "durable", [b"open"])  # still open when the broker dies
    b.kill()
    b.start()
    assert list_offset(b.bootstrap, "durable", 0, isolation_level=1) == 8  # held by "open"
    assert read_all(b.bootstrap, "durable", "read_committed", 3) == [b"c0", b"c1", b"c2"]
    # the producer's coordinator came back with the open transaction; a new instance aborts it
    fresh = txn_producer(b.bootstrap, "durable-1")
    fresh.begin_transaction()
    produce_in_txn(fresh, "durable", [b"c3"])
    fresh.commit_transaction(60)
    assert read_all(b.bootstrap, "durable", "read_committed", 4) == [b"c0", b"c1", b"c2", b"c3"]


def test_the_coordinator_aborts_a_transaction_open_past_its_timeout(make_broker):
    b = make_broker(extra=SMALL + [
        "-o", "transaction.abort.timed.out.transaction.cleanup.interval.ms=300"])
    _create(b.bootstrap, "slow", 1)
    p = txn_producer(b.bootstrap, "slow-1", **{"transaction.timeout.ms": 2000})
    p.begin_transaction()
    produce_in_txn(p, "slow", [b"never-committed"])
    assert list_offset(b.bootstrap, "slow", 0, isolation_level=1) == 0
    # the abort marker moves the last stable offset past the record
    wait_until(lambda: list_offset(b.bootstrap, "slow", 0, isolation_level=1) == 2,
               timeout=60, what="the timed-out transaction to be aborted")
    with pytest.raises(KafkaException):
        p.commit_transaction(30)
    assert read_all(b.bootstrap, "slow", "read_committed", 0) == []


def test_a_timeout_above_transaction_max_timeout_ms_is_refused(make_broker):
    b = make_broker(extra=SMALL + ["-o", "transaction.max.timeout.ms=5000"])
    with pytest.raises(KafkaException) as e:
        txn_producer(b.bootstrap, "too-long", **{"transaction.timeout.ms": 10000})
    assert e.value.args[0].code() == KafkaError.INVALID_TRANSACTION_TIMEOUT


def test_kip360_epoch_bump_of_a_transactional_producer(txn_broker):
    """InitProducerId with the current id and epoch bumps the epoch; a retry of that bump
    gets the same answer; a stale epoch is fenced."""
    conn = RawConnection(txn_broker.bootstrap)
    try:
        find = request(ApiKey.FIND_COORDINATOR)
        wait_until(lambda: conn.call(ApiKey.FIND_COORDINATOR, 3, find.cls(
            key="bumped-1", key_type=1)).error_code == 0, what="a transaction coordinator")

        def init(pid=-1, epoch=-1):
            r = conn.call(ApiKey.INIT_PRODUCER_ID, 4, request(ApiKey.INIT_PRODUCER_ID).cls(
                transactional_id="bumped-1", transaction_timeout_ms=60000, producer_id=pid,
                producer_epoch=epoch))
            return r.error_code, r.producer_id, r.producer_epoch
        code, pid, epoch = init()
        assert (code, epoch) == (0, 0)
        assert init(pid, 0) == (0, pid, 1)
        assert init(pid, 0) == (0, pid, 1)  # the same bump, retried
        assert init(pid, 7)[0] == ErrorCode.PRODUCER_FENCED
    finally:
        conn.close()


def test_init_producer_id_right_after_end_txn_waits_for_the_markers(txn_broker):
    """An InitProducerId that arrives while the id's committed transaction still has markers
    going out (a producer starting its next transaction right after another process ended
    the one it prepared) is answered once they are written, bumping the epoch, instead of
    CONCURRENT_TRANSACTIONS, which would cost the producer its retry backoff."""
    bs = txn_broker.bootstrap
    _create(bs, "settling", 4)
    conn = RawConnection(bs)
    try:
        for round_ in range(5):
            txn_id = f"settling-{round_}"
            pid, epoch = raw_init(conn, txn_id)
            for partition in range(4):
                assert raw_add_partition(conn, txn_id, pid, epoch, "settling", partition) == 0
                assert raw_txn_produce(conn, txn_id, pid, epoch, "settling", partition) == 0
            assert raw_end_txn(conn, txn_id, pid, epoch, commit=True) == 0
            r = conn.call(ApiKey.INIT_PRODUCER_ID, 4, request(ApiKey.INIT_PRODUCER_ID).cls(
                transactional_id=txn_id, transaction_timeout_ms=60000))
            assert (r.error_code, r.producer_id, r.producer_epoch) == (0, pid, epoch + 1)
    finally:
        conn.close()
    assert len(read_all(bs, "settling", "read_committed", 60, partitions=4)) == 60


def test_an_idle_transactional_id_expires_and_stays_gone_after_a_restart(make_broker):
    """transactional.id.expiration.ms: an id with no open transaction is forgotten (a
    tombstone), one with an open transaction is kept; a new init starts the id afresh."""
    from minilog.connector.client import AdminClient
    from minilog.connector.client import KafkaError as MinilogError
    b = make_broker(extra=SMALL + [
        "-o", "transactional.id.expiration.ms=1000",
        "-o", "transaction.abort.timed.out.transaction.cleanup.interval.ms=300"])
    _create(b.bootstrap, "expiring", 1)
    idle, busy = txn_producer(b.bootstrap, "idle-1"), txn_producer(b.bootstrap, "busy-1")
    idle.begin_transaction()
    produce_in_txn(idle, "expiring", [b"done"])
    idle.commit_transaction(60)
    busy.begin_transaction()
    produce_in_txn(busy, "expiring", [b"open"])

    def known(txn_id):
        with AdminClient({"bootstrap.servers": b.bootstrap}) as admin:
            try:
                admin.describe_transactions(txn_id)
                return True
            except MinilogError as e:
                if e.code != ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
                    raise
                return False
    wait_until(lambda: not known("idle-1"), timeout=60, what="the idle id to expire")
    assert known("busy-1")
    b.kill()
    b.start()
    assert not known("idle-1") and known("busy-1")
    again = txn_producer(b.bootstrap, "idle-1")
    again.begin_transaction()
    produce_in_txn(again, "expiring", [b"again"])
    again.commit_transaction(60)
    assert known("idle-1")


def test_a_write_outside_the_transaction_is_refused_and_holds_nothing(txn_broker):
    """KIP-890 part 1 (the leader is the coordinator here): a transactional write to a
    partition the producer's ongoing transaction has not added is refused, so no hanging
    transaction holds the last stable offset; once added, the same write is appended."""
    bs = txn_broker.bootstrap
    _create(bs, "verified", 1)
    conn = RawConnection(bs)
    try:
        pid, epoch = raw_init(conn, "verified-1")
        assert raw_txn_produce(conn, "verified-1", pid, epoch, "verified") == \
            ErrorCode.INVALID_TXN_STATE
        assert list_offset(bs, "verified", 0, 1) == list_offset(bs, "verified", 0, 0) == 0
        assert raw_add_partition(conn, "verified-1", pid, epoch, "verified") == 0
        assert raw_txn_produce(conn, "verified-1", pid, epoch, "verified") == 0
        assert raw_txn_produce(conn, "verified-1", pid, epoch, "verified", seq=3) == 0
        assert list_offset(bs, "verified", 0, 0) == 6  # open: the LSO stays at its start
        assert list_offset(bs, "verified", 0, 1) == 0
    finally:
        conn.close()


def test_a_fenced_epoch_is_refused_before_the_append(txn_broker):
    bs = txn_broker.bootstrap
    _create(bs, "fenced-write", 1)
    conn = RawConnection(bs)
    try:
        pid, epoch = raw_init(conn, "fenced-write-1")
        raw_init(conn, "fenced-write-1")  # a newer instance: the old epoch is fenced
        assert raw_txn_produce(conn, "fenced-write-1", pid, epoch, "fenced-write") == \
            ErrorCode.INVALID_PRODUCER_EPOCH
        assert list_offset(bs, "fenced-write", 0, 0) == 0
    finally:
        conn.close()


def test_a_read_committed_fetch_lists_the_aborted_transactions_of_what_it_returns(txn_broker):
    """Kafka bounds Fetch's aborted_transactions by the batches the response carries, not by
    the last stable offset: a fetch of the first transaction alone lists it and not a later
    one; a fetch of everything lists both. A transaction whose records begin in the fetched
    range is listed even when its marker lies beyond it."""
    bs = txn_broker.bootstrap
    _create(bs, "bounded", 1)
    p = txn_producer(bs, "bounded-1", **{"linger.ms": 0, "batch.num.messages": 1})
    for prefix, commit in ((b"a", False), (b"c", True), (b"b", False)):
        p.begin_transaction()
        produce_in_txn(p, "bounded", [prefix + b"%d" % i for i in range(3)])
        p.commit_transaction(60) if commit else p.abort_transaction(60)
    req = request(ApiKey.FETCH)

    def aborted_in(max_bytes):
        conn = RawConnection(bs)
        try:
            resp = conn.call(ApiKey.FETCH, 11, req.cls(
                replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=max_bytes,
                isolation_level=1, session_id=0, session_epoch=-1, rack_id="",
                topics=[req.make("topics", topic="bounded", partitions=[req.make(
                    "topics", "partitions", partition=0, current_leader_epoch=-1,
                    fetch_offset=0, log_start_offset=-1, partition_max_bytes=max_bytes)])],
                forgotten_topics_data=[]))
        finally:
            conn.close()
        part = resp.responses[0].partitions[0]
        return [a.first_offset for a in part.aborted_transactions], len(part.records)

    every, _ = aborted_in(1 << 20)
    assert every == [0, 8]  # 3 records + marker, 3 + marker, then the second aborted one
    first, size = aborted_in(1)  # the first batch alone (a fetch returns at least one)
    assert size > 0 and first == [0]
