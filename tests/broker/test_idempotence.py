"""Idempotent producers: retried batches are deduplicated, gaps rejected, state kept over restarts."""
import pytest
from minilog.connector.protocol import ApiKey, ErrorCode, request
from minilog.connector.records import encode_batch
from wire import RawConnection


def _produce(conn, topic, records, version=9):
    req = request(ApiKey.PRODUCE)
    body = req.cls(acks=-1, timeout_ms=5000, topic_data=[req.make(
        "topic_data", name=topic, partition_data=[req.make("topic_data", "partition_data",
                                                           index=0, records=records)])])
    p = conn.call(ApiKey.PRODUCE, version, body).responses[0].partition_responses[0]
    return p.error_code, p.base_offset


def _init_pid(conn):
    resp = conn.call(ApiKey.INIT_PRODUCER_ID, 4, request(ApiKey.INIT_PRODUCER_ID).cls(
        transactional_id=None, transaction_timeout_ms=60000))
    assert resp.error_code == 0
    return resp.producer_id, resp.producer_epoch


def _batch(pid, epoch, seq, n=3, tag=b"x"):
    return encode_batch([(1000 + i, None, tag + b"%d" % (seq + i), []) for i in range(n)],
                        producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def _create(conn, name):
    req = request(ApiKey.CREATE_TOPICS)
    resp = conn.call(ApiKey.CREATE_TOPICS, 5, req.cls(
        topics=[req.make("topics", name=name, num_partitions=1, replication_factor=1)], timeout_ms=5000))
    assert resp.topics[0].error_code == 0


@pytest.fixture
def session(make_broker):
    b = make_broker()
    conn = RawConnection(b.bootstrap)
    _create(conn, "idem")
    yield b, conn
    conn.close()


def test_retried_batch_is_answered_with_its_original_offset(session):
    _, conn = session
    pid, epoch = _init_pid(conn)
    assert _produce(conn, "idem", _batch(pid, epoch, 0)) == (0, 0)
    assert _produce(conn, "idem", _batch(pid, epoch, 3)) == (0, 3)
    assert _produce(conn, "idem", _batch(pid, epoch, 3)) == (0, 3)  # a retry: not written twice
    assert _produce(conn, "idem", _batch(pid, epoch, 6)) == (0, 6)


def test_sequence_gap_is_out_of_order_and_writes_nothing(session):
    _, conn = session
    pid, epoch = _init_pid(conn)
    assert _produce(conn, "idem", _batch(pid, epoch, 0))[0] == 0
    code, _ = _produce(conn, "idem", _batch(pid, epoch, 10))
    assert code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert _produce(conn, "idem", _batch(pid, epoch, 3)) == (0, 3)


def test_producer_ids_are_unique_and_state_survives_restart(session):
    b, conn = session
    pid, epoch = _init_pid(conn)
    assert _produce(conn, "idem", _batch(pid, epoch, 0)) == (0, 0)
    conn.close()
    b.restart()
    conn = RawConnection(b.bootstrap)
    assert _produce(conn, "idem", _batch(pid, epoch, 0)) == (0, 0)  # still known as a duplicate
    assert _produce(conn, "idem", _batch(pid, epoch, 3)) == (0, 3)
    assert _init_pid(conn)[0] != pid
    b.kill()  # unclean: the state is rebuilt from the log itself
    b.start()
    conn2 = RawConnection(b.bootstrap)
    assert _produce(conn2, "idem", _batch(pid, epoch, 3)) == (0, 3)
    code, _ = _produce(conn2, "idem", _batch(pid, epoch, 9))
    assert code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    conn2.close()
