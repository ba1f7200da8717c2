"""Transactions on three brokers with RF=3 topics: the coordinator's state replicated in
`__transaction_state`, markers written by other brokers' partitions, and coordinator failover."""
import pytest
from txntools import produce_in_txn, read_all, txn_producer
from clustertools import coordinator_of, wait_for

pytestmark = pytest.mark.timeout(300)

TXN = {"transaction.state.log.num.partitions": 3}


def test_commit_and_abort_across_three_brokers(make_cluster):
    c = make_cluster(3, **TXN)
    c.create_topic("spread", partitions=3, rf=3)
    p = txn_producer(c.bootstrap, "spread-1")
    for prefix, commit in ((b"c", True), (b"a", False), (b"d", True)):
        p.begin_transaction()
        for part in range(3):
            produce_in_txn(p, "spread", [prefix + b"%d-%d" % (part, i) for i in range(4)], part)
        p.commit_transaction(60) if commit else p.abort_transaction(60)
    got = read_all(c.bootstrap, "spread", "read_committed", 24, partitions=3)
    assert sorted(got) == sorted(b"%s%d-%d" % (x, part, i) for x in (b"c", b"d")
                                 for part in range(3) for i in range(4))


def test_an_open_transaction_commits_after_its_coordinator_is_killed(make_cluster):
    c = make_cluster(3, **TXN)
    c.create_topic("failover", partitions=1, rf=3)
    p = txn_producer(c.bootstrap, "failover-1")
    p.begin_transaction()
    produce_in_txn(p, "failover", [b"before-%d" % i for i in range(5)])
    coordinator = coordinator_of(c, "failover-1")
    c.broker(coordinator).kill()
    # the new coordinator loads the open transaction from the replicated log
    wait_for(lambda: coordinator_of(c, "failover-1") != coordinator, "a new coordinator")
    produce_in_txn(p, "failover", [b"after-%d" % i for i in range(5)])
    p.commit_transaction(120)
    rest = [n for n in (1, 2, 3) if n != coordinator]
    got = read_all(c.bootstrap_of(*rest), "failover", "read_committed", 10)
    assert got == [b"before-%d" % i for i in range(5)] + [b"after-%d" % i for i in range(5)]


def test_a_new_coordinator_finishes_a_prepared_commit_and_the_producer_carries_on(make_cluster):
    # a dedicated controller keeps the quorum while two brokers are down
    c = make_cluster(3, controllers=1, **TXN)
    c.create_topic("prepared", partitions=1, rf=1)
    (holder, _, _), = c.partitions("prepared").values()
    txn_id = next(t for t in (f"prepared-{i}" for i in range(50))
                  if coordinator_of(c, t) != holder)
    coordinator = coordinator_of(c, txn_id)
    p = txn_producer(c.bootstrap, txn_id)
    p.begin_transaction()
    produce_in_txn(p, "prepared", [b"v%d" % i for i in range(5)])
    c.pause(holder)  # the marker cannot be written while the partition's only replica is out
    try:
        p.commit_transaction(120)  # answered once PREPARE_COMMIT is stored
        c.broker(coordinator).kill()
    finally:
        c.resume(holder)
    # the same producer finds the new coordinator, which must end the prepared commit first
    p.begin_transaction()
    produce_in_txn(p, "prepared", [b"w%d" % i for i in range(5)])
    p.commit_transaction(120)
    survivor = next(n for n in (1, 2, 3) if n not in (holder, coordinator))
    expected = [b"v%d" % i for i in range(5)] + [b"w%d" % i for i in range(5)]
    for reader in (survivor, holder):  # each read_committed consumer sees every record once
        assert read_all(c.bootstrap_of(reader), "prepared", "read_committed", 10) == expected


def test_offsets_sent_to_a_transaction_reach_a_coordinator_on_another_broker(make_cluster):
    from confluent_kafka import Consumer, TopicPartition
    c = make_cluster(3, **TXN)
    c.create_topic("copied", partitions=1, rf=3)
    # a group whose offsets partition another broker leads than the transaction's coordinator
    p = txn_producer(c.bootstrap, "copier-1")
    txn_node = coordinator_of(c, "copier-1")
    group = next(g for g in (f"copiers-{i}" for i in range(60))
                 if coordinator_of(c, g, key_type=0) != txn_node)
    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": group})
    try:
        p.begin_transaction()
        produce_in_txn(p, "copied", [b"row"])
        p.send_offsets_to_transaction([TopicPartition("copied", 0, 17)],
                                      consumer.consumer_group_metadata(), 60)
        p.commit_transaction(60)
        committed = wait_for(lambda: consumer.committed([TopicPartition("copied", 0)],
                                                        timeout=10)[0].offset == 17 or None,
                             "the offset committed with the transaction")
        assert committed
    finally:
        consumer.close()



def test_a_leader_verifies_a_transactional_write_with_a_coordinator_on_another_broker(
        make_cluster):
    """KIP-890 part 1 across brokers: AddPartitionsToTxn v4 verify_only from the leader."""
    from minilog.connector.protocol import ErrorCode
    from txntools import raw_add_partition, raw_init, raw_txn_produce
    from wire import RawConnection
    c = make_cluster(3, **TXN)
    c.create_topic("verified", partitions=1, rf=3)
    leader = c.partitions("verified")[0][0]
    txn_id = next(t for t in (f"verified-{i}" for i in range(50))
                  if coordinator_of(c, t) != leader)
    at_coordinator = RawConnection(c.bootstrap_of(coordinator_of(c, txn_id)))
    at_leader = RawConnection(c.bootstrap_of(leader))
    try:
        pid, epoch = raw_init(at_coordinator, txn_id)
        assert raw_txn_produce(at_leader, txn_id, pid, epoch, "verified") == \
            ErrorCode.INVALID_TXN_STATE
        assert raw_add_partition(at_coordinator, txn_id, pid, epoch, "verified") == 0
        assert raw_txn_produce(at_leader, txn_id, pid, epoch, "verified") == 0
    finally:
        at_coordinator.close()
        at_leader.close()


def test_the_next_transaction_waits_for_the_previous_commit_instead_of_failing(make_cluster):
    """While a commit's markers cannot be written (the partition's only replica is paused),
    the producer's next AddPartitionsToTxn waits for the commit to complete instead of being
    answered CONCURRENT_TRANSACTIONS, so an EndTxn(abort) pipelined behind it (librdkafka sends
    one then) finds the transaction ongoing: 0, not INVALID_TXN_STATE."""
    from minilog.connector.protocol import ApiKey, RequestHeader, encode_request, request
    from txntools import raw_add_partition, raw_init, raw_txn_produce, read_all
    from wire import RawConnection
    c = make_cluster(3, **{**TXN, "transaction.state.log.num.partitions": 1,
                           "transaction.state.log.replication.factor": 1})
    txn_id = "waits-1"
    coordinator = coordinator_of(c, txn_id)
    holder = next(n for n in (1, 2, 3) if n != coordinator)
    c.create_topic("held", assignment=[[holder]])
    c.create_topic("free", assignment=[[coordinator]])
    at_coordinator = RawConnection(c.bootstrap_of(coordinator))
    at_holder = RawConnection(c.bootstrap_of(holder))
    try:
        pid, epoch = raw_init(at_coordinator, txn_id)
        assert raw_add_partition(at_coordinator, txn_id, pid, epoch, "held") == 0
        assert raw_txn_produce(at_holder, txn_id, pid, epoch, "held") == 0
        c.pause(holder)
        try:
            end = request(ApiKey.END_TXN)
            assert at_coordinator.call(ApiKey.END_TXN, 3, end.cls(
                transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
                committed=True)).error_code == 0  # PrepareCommit stored, markers stuck
            add = request(ApiKey.ADD_PARTITIONS_TO_TXN)
            frames = [(ApiKey.ADD_PARTITIONS_TO_TXN, add.cls(
                v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid,
                v3_and_below_producer_epoch=epoch, v3_and_below_topics=[add.make(
                    "v3_and_below_topics", name="free", partitions=[0])])),
                (ApiKey.END_TXN, end.cls(transactional_id=txn_id, producer_id=pid,
                                         producer_epoch=epoch, committed=False))]
            at_coordinator.send_raw(b"".join(
                b"".join(encode_request(RequestHeader(key, 3, 100 + i, "raw"), body))
                for i, (key, body) in enumerate(frames)))
        finally:
            c.resume(holder)
        from minilog.connector.protocol import decode_response
        added = decode_response(ApiKey.ADD_PARTITIONS_TO_TXN, 3, at_coordinator.recv_frame())
        aborted = decode_response(ApiKey.END_TXN, 3, at_coordinator.recv_frame())
        assert added.results_by_topic_v3_and_below[0].results_by_partition[0] \
            .partition_error_code == 0
        assert aborted.error_code == 0
    finally:
        at_coordinator.close()
        at_holder.close()
    assert read_all(c.bootstrap, "held", "read_committed", 3) == [b"v0", b"v1", b"v2"]
