"""The worker's state topics (connect/topic_log.py, Connect's KafkaBasedLog) against a real
broker: a write is read back at once, however long the log's consumer parks its fetches.

Every REST write and every status change of a worker goes through `TopicLog.send`, which reads
the topic to its end: asked on the consumer's own connection, behind its parked long poll, each
one waited the fetch out (`fetch.max.wait.ms`, 500 ms by default: a second or more per REST
call)."""
from minilog.connect.topic_log import TopicLog, ensure_compacted_topic
from sparktools import unique

PARKED_MS = 600_000  # the log's consumer parks each fetch for as long as the client lets it
READ_S = 20.0  # far beyond a read of a few records on loopback, short of a parked fetch


def test_a_log_read_to_its_end_is_read_to_it_again_without_waiting_out_a_parked_fetch(broker):
    """What every REST call and status change does: write, then read to the end; the log's
    consumer has then parked its next fetch, and nothing new arrives to wake it."""
    client = {"bootstrap.servers": broker.bootstrap, "fetch.max.wait.ms": PARKED_MS}
    topic = unique("connect-state")
    ensure_compacted_topic(client, topic, 1, 1)
    seen = []
    log = TopicLog(client, topic, lambda key, value: seen.append((key, value)))
    try:
        for i in range(3):
            log.send(b"key-%d" % i, b"value-%d" % i)
            log.read_to_end(timeout=READ_S)
        assert seen == [(b"key-%d" % i, b"value-%d" % i) for i in range(3)]
    finally:
        log.close()
