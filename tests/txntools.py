"""Helpers for transaction tests: confluent-kafka producers and consumers, raw ListOffsets."""
import time

from confluent_kafka import Consumer, Producer
from minilog.connector.protocol import ApiKey, request
from wire import RawConnection

DEADLINE = 60.0
# a broker's internal topics small enough to create in a moment on a loaded machine
SMALL = ["-o", "transaction.state.log.num.partitions=4", "-o", "offsets.topic.num.partitions=4",
         "-o", "group.initial.rebalance.delay.ms=0"]


def txn_producer(bootstrap, txn_id, **extra):
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                  "linger.ms": 5, **extra})
    p.init_transactions(DEADLINE)
    return p


def produce_in_txn(p, topic, values, partition=0):
    """Write `values` in the producer's open transaction and wait until the broker has them."""
    for v in values:
        p.produce(topic, v, partition=partition)
    assert p.flush(DEADLINE) == 0


def read_all(bootstrap, topic, isolation, expected_count, partitions=1, quiet_s=2.0):
    """Every value in `topic` as a consumer with `isolation` reads it: once `expected_count`
    have come, keep polling `quiet_s` more so that any extra record would show."""
    from confluent_kafka import TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.monotonic_ns()}",
                  "isolation.level": isolation, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition(topic, i, 0) for i in range(partitions)])
        got, deadline, quiet_until = [], time.monotonic() + DEADLINE, None
        while time.monotonic() < deadline:
            if len(got) >= expected_count:
                quiet_until = quiet_until or time.monotonic() + quiet_s
                if time.monotonic() > quiet_until:
                    break
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.append(m.value())
        return got
    finally:
        c.close()


def list_offset(bootstrap, topic, partition, isolation_level, timestamp=-1):
    """The offset ListOffsets v7 answers for `timestamp` (-1: latest) at `isolation_level`."""
    req = request(ApiKey.LIST_OFFSETS)
    conn = RawConnection(bootstrap)
    try:
        answer = conn.call(ApiKey.LIST_OFFSETS, 7, req.cls(
            replica_id=-1, isolation_level=isolation_level, topics=[req.make(
                "topics", name=topic, partitions=[req.make(
                    "topics", "partitions", partition_index=partition, timestamp=timestamp)])]))
    finally:
        conn.close()
    p = answer.topics[0].partitions[0]
    assert p.error_code == 0, p.error_code
    return p.offset


def log_end(bootstrap, topic, partitions=1, consumer=None, isolation="read_uncommitted"):
    """The sum of the topic's high watermarks: records and markers written, committed or not
    (with isolation read_committed: of its last stable offsets). Asked through `consumer`, a
    minilog Consumer, if given: polling it is cheaper."""
    from minilog.connector.client import Consumer, TopicPartition
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    if consumer is not None:
        return sum(consumer.end_offsets(tps).values())
    with Consumer({"bootstrap.servers": bootstrap, "isolation.level": isolation}) as c:
        return sum(c.end_offsets(tps).values())


def raw_init(conn, txn_id):
    """(producer id, epoch) of `txn_id` from InitProducerId over `conn` (a RawConnection to
    its coordinator), once the coordinator is ready."""
    from waiting import wait_until
    find = request(ApiKey.FIND_COORDINATOR)
    wait_until(lambda: conn.call(ApiKey.FIND_COORDINATOR, 3, find.cls(
        key=txn_id, key_type=1)).error_code == 0, what="a transaction coordinator")
    r = wait_until(lambda: (lambda r: r if r.error_code == 0 else None)(conn.call(
        ApiKey.INIT_PRODUCER_ID, 4, request(ApiKey.INIT_PRODUCER_ID).cls(
            transactional_id=txn_id, transaction_timeout_ms=60000))), what="InitProducerId")
    return r.producer_id, r.producer_epoch


def raw_add_partition(conn, txn_id, pid, epoch, topic, partition=0):
    """AddPartitionsToTxn v3 over `conn` (to the coordinator): the partition's error code."""
    req = request(ApiKey.ADD_PARTITIONS_TO_TXN)
    r = conn.call(ApiKey.ADD_PARTITIONS_TO_TXN, 3, req.cls(
        v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch, v3_and_below_topics=[req.make(
            "v3_and_below_topics", name=topic, partitions=[partition])]))
    return r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code


def raw_txn_produce(conn, txn_id, pid, epoch, topic, partition=0, seq=0):
    """A transactional batch of 3 records (sequence `seq`) produced over `conn` (to the
    partition's leader) with acks=-1: its error code."""
    from minilog.connector.records import encode_batch
    records = encode_batch([(1000 + i, None, b"v%d" % (seq + i), []) for i in range(3)],
                           producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                           transactional=True)
    req = request(ApiKey.PRODUCE)
    body = req.cls(transactional_id=txn_id, acks=-1, timeout_ms=5000, topic_data=[req.make(
        "topic_data", name=topic, partition_data=[req.make(
            "topic_data", "partition_data", index=partition, records=records)])])
    return conn.call(ApiKey.PRODUCE, 9, body).responses[0].partition_responses[0].error_code


def raw_end_txn(conn, txn_id, pid, epoch, commit):
    """EndTxn v3 over `conn` (to the coordinator): its error code."""
    return conn.call(ApiKey.END_TXN, 3, request(ApiKey.END_TXN).cls(
        transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
        committed=commit)).error_code


def raw_add_offsets(conn, txn_id, pid, epoch, group):
    """AddOffsetsToTxn v3 over `conn` (to the transaction coordinator): its error code."""
    return conn.call(ApiKey.ADD_OFFSETS_TO_TXN, 3, request(ApiKey.ADD_OFFSETS_TO_TXN).cls(
        transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
        group_id=group)).error_code


def raw_txn_offset_commit(conn, txn_id, pid, epoch, group, topic, partition, offset):
    """TxnOffsetCommit v3 of one offset over `conn` (to the group coordinator): its error."""
    req = request(ApiKey.TXN_OFFSET_COMMIT)
    r = conn.call(ApiKey.TXN_OFFSET_COMMIT, 3, req.cls(
        transactional_id=txn_id, group_id=group, producer_id=pid, producer_epoch=epoch,
        generation_id=-1, member_id="", group_instance_id=None, topics=[req.make(
            "topics", name=topic, partitions=[req.make(
                "topics", "partitions", partition_index=partition, committed_offset=offset,
                committed_leader_epoch=-1, committed_metadata="")])]))
    return r.topics[0].partitions[0].error_code


def raw_committed(conn, group, topic, partition):
    """The group's committed offset of one partition (OffsetFetch v7, offsets of open
    transactions left out), over `conn` (to the group coordinator); -1 if none."""
    req = request(ApiKey.OFFSET_FETCH)
    r = conn.call(ApiKey.OFFSET_FETCH, 7, req.cls(group_id=group, require_stable=False, topics=[
        req.make("topics", name=topic, partition_indexes=[partition])]))
    p = r.topics[0].partitions[0]
    assert p.error_code == 0, p.error_code
    return p.committed_offset


def raw_write_marker(conn, pid, epoch, coordinator_epoch, commit, topic, partitions):
    """WriteTxnMarkers v1 over `conn` (to the partitions' leader), as a transaction
    coordinator sends it: {partition: error code}."""
    req = request(ApiKey.WRITE_TXN_MARKERS)
    r = conn.call(ApiKey.WRITE_TXN_MARKERS, 1, req.cls(markers=[req.make(
        "markers", producer_id=pid, producer_epoch=epoch, transaction_result=commit,
        coordinator_epoch=coordinator_epoch, topics=[req.make(
            "markers", "topics", name=topic, partition_indexes=list(partitions))])]))
    return {p.partition_index: p.error_code for t in r.markers[0].topics for p in t.partitions}


def partition_leader_epoch(bootstrap, topic, partition=0):
    """(leader, leader epoch) of a partition as Metadata v9 answers it."""
    req = request(ApiKey.METADATA)
    conn = RawConnection(bootstrap)
    try:
        answer = conn.call(ApiKey.METADATA, 9, req.cls(
            topics=[req.make("topics", name=topic)], allow_auto_topic_creation=False))
    finally:
        conn.close()
    p = next(p for p in answer.topics[0].partitions if p.partition_index == partition)
    return p.leader_id, p.leader_epoch
