"""OffsetForLeaderEpoch on a single broker: its one epoch ends at the log end."""
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from minilog.connector.protocol import ApiKey, ErrorCode, request
from wire import RawConnection


def _ask(conn, topic, epoch, current=-1):
    req = request(ApiKey.OFFSET_FOR_LEADER_EPOCH)
    body = req.cls(replica_id=-1, topics=[req.make("topics", topic=topic, partitions=[
        req.make("topics", "partitions", partition=0, current_leader_epoch=current,
                 leader_epoch=epoch)])])
    p = conn.call(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, body).topics[0].partitions[0]
    return p.error_code, p.leader_epoch, p.end_offset


def test_the_single_epoch_ends_at_the_log_end(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("epochs", 1, 1)])["epochs"].result(10)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(7):
        p.produce("epochs", b"%d" % i, partition=0)
    assert p.flush(10) == 0
    conn = RawConnection(broker.bootstrap)
    try:
        assert _ask(conn, "epochs", 0) == (0, 0, 7)
        assert _ask(conn, "epochs", 0, current=0) == (0, 0, 7)
        assert _ask(conn, "epochs", 3) == (0, -1, -1)  # an epoch this log never had
        assert _ask(conn, "epochs", 0, current=2)[0] == ErrorCode.UNKNOWN_LEADER_EPOCH
        assert _ask(conn, "nowhere", 0)[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    finally:
        conn.close()
