"""Partition reassignments (KIP-455), as `kafka-reassign-partitions.sh` runs them, from a client
we did not write (kafka-python's admin client) and from `minilog reassign-partitions`: a partition moves to other brokers with its
records, its old leader among those removed; the replication factor goes up and down; a
reassignment that cannot finish (its new replica's broker is down) is listed with what it adds
and removes, and cancelled back to the replicas before it; requests Kafka refuses are refused
with Kafka's errors."""
import json

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTP
from kafka import TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import (
    InvalidReplicationAssignmentError,
    NoReassignmentInProgressError,
    UnknownTopicOrPartitionError,
)

from clitools import FAILED, USAGE, ok, one_line_error, run
from clustertools import wait_for

pytestmark = pytest.mark.timeout(300)
RECORDS = 500


def produce(c, topic, start, count):
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(start, start + count):
        p.produce(topic, str(i).encode(), partition=0)
    assert p.flush(60) == 0


def read_all(c, topic, expected):
    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": f"read-{topic}",
                         "enable.auto.commit": False})
    consumer.assign([CTP(topic, 0, 0)])
    got = []
    try:
        def more():
            got.extend(m.value().decode() for m in consumer.consume(1000, 0.5) if not m.error())
            return len(got) >= expected
        wait_for(more, f"{expected} records of {topic}")
    finally:
        consumer.close()
    return got


def test_reassignments_move_grow_shrink_and_cancel(make_cluster, tmp_path):
    c = make_cluster(3, **{"auto.leader.rebalance.enable": "false"})

    def cli(*args):
        return ok("-b", c.bootstrap, "reassign-partitions", *args)

    c.create_topic("moved", assignment=[[1, 2]])
    c.create_topic("grown", assignment=[[1]])
    produce(c, "moved", 0, RECORDS)
    produce(c, "grown", 0, RECORDS)
    admin = KafkaAdminClient(bootstrap_servers=c.bootstrap, request_timeout_ms=60000)
    try:
        # A move that removes the leader, and a growth: both accepted, both completed once
        # the new replicas have caught up, nothing listed as ongoing after.
        assert admin.alter_partition_reassignments({TopicPartition("moved", 0): [3, 2],
                                                    TopicPartition("grown", 0): [1, 2, 3]}) == {
            TopicPartition("moved", 0): None, TopicPartition("grown", 0): None}
        wait_for(lambda: (c.partitions("moved") or {}).get(0, (0, 0, 0))[1:] == ([3, 2], [2, 3])
                 and (c.partitions("grown") or {}).get(0, (0, 0, 0))[1:] == ([1, 2, 3], [1, 2, 3]),
                 "both reassignments to complete")
        wait_for(lambda: admin.list_partition_reassignments() == {}, "nothing listed as ongoing")
        assert c.partitions("moved")[0][0] in (2, 3)
        moved_dir = c.brokers[0].data_dir / "moved-0"
        wait_for(lambda: not moved_dir.exists(), "broker 1 to delete its removed replica")
        # Every record acknowledged before is there, and the partition takes more.
        produce(c, "moved", RECORDS, 10)
        assert read_all(c, "moved", RECORDS + 10) == [str(i) for i in range(RECORDS + 10)]

        # Lower the replication factor: nothing to add, so it completes at once.
        assert admin.alter_partition_reassignments({TopicPartition("grown", 0): [2, 3]}) == {
            TopicPartition("grown", 0): None}
        wait_for(lambda: c.partitions("grown")[0][1:] == ([2, 3], [2, 3]), "grown on [2, 3]")
        assert read_all(c, "grown", RECORDS) == [str(i) for i in range(RECORDS)]

        # A replica whose broker is down cannot catch up: listed as ongoing until cancelled,
        # then the partition is back on the replicas it had. Through `minilog
        # reassign-partitions`, with kafka-reassign-partitions.sh's options, files and lines.
        c.broker(1).kill()
        # kafka-python sends to the broker Metadata named as controller until it refreshes
        # its metadata (minutes): a client of the brokers left, as a user would start one.
        admin.close()
        admin = KafkaAdminClient(bootstrap_servers=c.bootstrap_of(2, 3), request_timeout_ms=60000)
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "moved", "partition": 0, "replicas": [3, 2, 1]}]}))
        said = cli("--execute", "--reassignment-json-file", plan)
        assert said.splitlines()[0] == "Current partition replica assignment"
        assert json.loads(said.splitlines()[2])["partitions"] == [
            {"topic": "moved", "partition": 0, "replicas": [3, 2], "log_dirs": ["any", "any"]}]
        assert said.splitlines()[-1] == "Successfully started partition reassignments for moved-0"
        ongoing = {TopicPartition("moved", 0): {"replicas": [3, 2, 1], "adding_replicas": [1],
                                                "removing_replicas": []}}
        wait_for(lambda: admin.list_partition_reassignments() == ongoing,
                 "the reassignment to be listed as ongoing")
        assert admin.list_partition_reassignments({"moved": [0], "grown": [0]}) == ongoing
        assert cli("--list") == "Current partition reassignments:\n" \
            "moved-0: replicas: 3,2,1. adding: 1. removing: .\n"
        assert cli("--verify", "--reassignment-json-file", plan) == \
            "Status of partition reassignment:\n" \
            "Reassignment of partition moved-0 is still in progress.\n"
        assert cli("--cancel", "--reassignment-json-file", plan) == \
            "Successfully cancelled partition reassignments for: moved-0\n"
        wait_for(lambda: admin.list_partition_reassignments() == {}, "the cancel to commit")
        assert c.partitions("moved")[0][1:] == ([3, 2], [2, 3])
        assert cli("--list") == "No partition reassignments found.\n"
        unlike = run("-b", c.bootstrap, "reassign-partitions", "--verify",
                     "--reassignment-json-file", plan)
        assert unlike.stdout.decode().splitlines()[-1] == "There is no active reassignment " \
            "of partition moved-0, but replica set is 3,2 rather than 3,2,1."
        assert one_line_error(unlike, FAILED) == \
            "minilog reassign-partitions: 1 partition(s) not as the file asks\n"
        topics = tmp_path / "topics.json"
        topics.write_text('{"version": 1, "topics": [{"topic": "moved"}]}')
        proposal = cli("--generate", "--topics-to-move-json-file", topics, "--broker-list", "2,3")
        assert json.loads(proposal.splitlines()[-1])["partitions"] == [
            {"topic": "moved", "partition": 0, "replicas": [2, 3], "log_dirs": ["any", "any"]}]
        plan.write_text('{"version": 1, "partitions": [{"topic": "moved"}]}')
        bad = run("-b", c.bootstrap, "reassign-partitions", "--execute",
                  "--reassignment-json-file", plan)
        assert "each partition needs" in one_line_error(bad, USAGE)

        # What Kafka refuses, per partition.
        refused = admin.alter_partition_reassignments({
            TopicPartition("moved", 0): None, TopicPartition("moved", 5): [2, 3],
            TopicPartition("grown", 0): [2, 9], TopicPartition("nosuch", 0): [2]})
        assert refused == {TopicPartition("moved", 0): NoReassignmentInProgressError,
                           TopicPartition("moved", 5): UnknownTopicOrPartitionError,
                           TopicPartition("grown", 0): InvalidReplicationAssignmentError,
                           TopicPartition("nosuch", 0): UnknownTopicOrPartitionError}
        assert admin.alter_partition_reassignments({TopicPartition("grown", 0): [2, 2]}) == {
            TopicPartition("grown", 0): InvalidReplicationAssignmentError}
    finally:
        admin.close()
