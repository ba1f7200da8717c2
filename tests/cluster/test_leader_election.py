"""ElectLeaders, the request `kafka-leader-election.sh` sends, from clients we did not write
(confluent-kafka's `elect_leaders`, kafka-python's) and from `minilog leader-election`. A failover leaves a partition led by a
replica other than its preferred one (automatic rebalancing off): a preferred election moves
leadership back; asked again it is not needed; asked for every partition, the answer names only
those that needed one; an unknown partition is named so. An unclean election gives a partition
whose only in-sync replica is gone a leader from the replicas left, as Kafka's does."""
import pytest
from confluent_kafka import ElectionType, KafkaError
from confluent_kafka import TopicPartition as CTP
from kafka.admin import KafkaAdminClient

from clitools import FAILED, ok, one_line_error, run
from clustertools import wait_for

pytestmark = pytest.mark.timeout(300)


def elect(c, election_type, partitions):
    """{(topic, partition): error code (0: elected)} as confluent-kafka reports it."""
    admin = c.admin()  # kept until the answer arrives
    answer = admin.elect_leaders(election_type, partitions).result(60)
    return {(tp.topic, tp.partition): e.code() if e is not None else 0
            for tp, e in answer.items()}


def test_preferred_and_unclean_elections(make_cluster):
    c = make_cluster(3, **{"auto.leader.rebalance.enable": "false"})
    placed = c.create_topic("ledger", assignment=[[1, 2, 3], [2, 3, 1]])
    assert {p: leader for p, (leader, _, _) in placed.items()} == {0: 1, 1: 2}
    c.broker(1).kill()
    wait_for(lambda: c.partitions("ledger")[0][0] not in (-1, 1), "a failover of ledger-0")
    c.broker(1).start()
    c.wait_isr("ledger", 0, [1, 2, 3])
    assert c.partitions("ledger")[0][0] != 1  # nothing moves it back by itself

    # minilog's own tool, with kafka-leader-election.sh's options and lines
    said = ok("-b", c.bootstrap, "leader-election", "--election-type", "preferred", "--topic",
              "ledger", "--partition", "0", "--partition", "1")
    assert said.splitlines() == [
        "Successfully completed leader election (PREFERRED) for partitions ledger-0",
        "Valid replica already elected for partitions ledger-1"]
    wait_for(lambda: c.partitions("ledger")[0][0] == 1, "broker 1 to lead ledger-0 again")
    assert elect(c, ElectionType.PREFERRED, [CTP("ledger", 0), CTP("ledger", 1)]) == {
        ("ledger", 0): KafkaError.ELECTION_NOT_NEEDED, ("ledger", 1): KafkaError.ELECTION_NOT_NEEDED}
    # Every partition: the others broker 1 led (the offsets topic's) move back, then none
    # needs one, and the answer names none.
    moved = elect(c, ElectionType.PREFERRED, None)
    assert set(moved.values()) <= {0} and not any(t == "ledger" for t, _ in moved), moved
    assert elect(c, ElectionType.PREFERRED, None) == {}
    assert elect(c, ElectionType.PREFERRED, [CTP("ledger", 7)]) == {
        ("ledger", 7): KafkaError.UNKNOWN_TOPIC_OR_PART}
    refused = run("-b", c.bootstrap, "leader-election", "--election-type", "preferred",
                  "--topic", "ledger", "--partition", "7")
    assert "Error completing leader election (PREFERRED) for partition: ledger-7: " \
        "UNKNOWN_TOPIC_OR_PARTITION" in refused.stdout.decode()
    assert one_line_error(refused, FAILED) == \
        "minilog leader-election: 1 replica(s) could not be elected\n"
    assert elect(c, ElectionType.UNCLEAN, [CTP("ledger", 0)]) == {
        ("ledger", 0): KafkaError.ELECTION_NOT_NEEDED}  # it has a leader

    # kafka-python, another client: the same request, answered the same way.
    admin = KafkaAdminClient(bootstrap_servers=c.bootstrap, request_timeout_ms=60000)
    try:
        answer = admin.elect_leaders(0, {"ledger": [0]}, raise_errors=False)
        assert [(t.topic, [(p.partition_id, p.error_code) for p in t.partition_result])
                for t in answer.replica_election_results] == [
            ("ledger", [(0, KafkaError.ELECTION_NOT_NEEDED)])]
    finally:
        admin.close()

    # ledger-1 on brokers 2 and 3 only: 3 goes, 2 (the leader, last in sync) goes, 3 returns.
    c.create_topic("lonely", assignment=[[2, 3]])
    c.broker(3).kill()
    c.wait_isr("lonely", 0, [2])
    c.broker(2).kill()
    c.broker(3).start()
    wait_for(lambda: c.partitions_at("lonely", 3) is None, "lonely-0 without a leader at 3")
    assert elect(c, ElectionType.PREFERRED, [CTP("lonely", 0)]) == {
        ("lonely", 0): KafkaError.PREFERRED_LEADER_NOT_AVAILABLE}
    assert elect(c, ElectionType.UNCLEAN, [CTP("lonely", 0)]) == {("lonely", 0): 0}
    assert wait_for(lambda: c.partitions("lonely"), "an unclean leader")[0] == (3, [2, 3], [3])
