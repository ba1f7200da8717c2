"""The failover users run MirrorMaker 2 for: a consumer group reads `orders` on A and commits;
A goes down; the same group starts on B, reading `A.orders`, and reads every record after its
last commit on A exactly once: no gap, no duplicate. The offsets come from the mirror's
checkpoints (`A.checkpoints.internal`, read here as Kafka's RemoteClusterUtils reads them) and
are committed to the group on B by the mirror (`sync.group.offsets.enabled`). From a minilog
source, and from Tansu (a Kafka-compatible broker that is not ours); and with MM2's offset syncs
on B (`offset-syncs.topic.location = target`, KIP-716), where they outlive A."""
import uuid

import pytest
from brokers import MinilogBroker, TansuBroker
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import KafkaError as CKError
from confluent_kafka import Producer as CKProducer
from confluent_kafka import TopicPartition as CKTopicPartition
from confluent_kafka.admin import AdminClient as CKAdmin
from confluent_kafka.admin import NewTopic
from minilog.mirror.formats import Checkpoint, OffsetSync
from minilog.mirror.translate import OffsetSyncStore
from mirrortools import (MirrorProcess, partitions_of, read_all, read_internal,
                         topic_exists)
from waiting import wait_until

DEADLINE = 180.0
PARTITIONS = 3


def produce(bootstrap, start, count, one_per_batch):
    p = CKProducer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                    **({"batch.num.messages": 1} if one_per_batch else {})})
    for i in range(start, start + count):
        p.produce("orders", value=f"order-{i}".encode(), key=f"k{i}".encode(),
                  partition=i % PARTITIONS)
        if one_per_batch:
            p.flush(30)
    assert p.flush(60) == 0


def read_some(bootstrap, group, topic, count):
    """Join `group` on `topic`, read at least `count` records and some of every partition,
    commit them, leave."""
    c = CKConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                    "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got = []
    try:
        wait_until(lambda: got.extend(m for m in c.consume(10, 0.5) if m.error() is None)
                   or (len(got) >= count and len({m.partition() for m in got}) == PARTITIONS),
                   DEADLINE, f"{count} records of {topic}, from every partition")
        c.commit(asynchronous=False)
        done = c.committed([CKTopicPartition(topic, p) for p in range(PARTITIONS)], 30)
    finally:
        c.close()
    return {tp.partition: tp.offset for tp in done}


def latest_checkpoints(b, group):
    out = {}
    if not partitions_of(b, "A.checkpoints.internal"):
        return out
    for c in read_internal(b, "A.checkpoints.internal", Checkpoint.parse):
        if c.group == group:
            out[c.partition] = c
    return out


def committed_on(bootstrap, group, topic):
    c = CKConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        got = c.committed([CKTopicPartition(topic, p) for p in range(PARTITIONS)], 30)
    finally:
        c.close()
    return {tp.partition: tp.offset for tp in got}


def translated_by_syncs(bootstrap, topic, on_a):
    """The group's offsets on B as a reader of MM2's offset-syncs topic finds them."""
    store = OffsetSyncStore()
    for sync in read_internal(bootstrap, topic, OffsetSync.parse):
        store.add(sync)
    return {p: store.translate("orders", p, o) for p, o in on_a.items()}


@pytest.mark.parametrize("source_kind,syncs_on", [("minilog", "source"), ("tansu", "source"),
                                                  ("minilog", "target")])
def test_a_group_moves_to_the_copy_and_reads_every_record_after_its_last_commit_once(
        source_kind, syncs_on, tmp_path):
    tansu = source_kind == "tansu"
    a = (TansuBroker() if tansu else MinilogBroker()).start()
    b = MinilogBroker().start()
    mirror = None
    try:
        admin = CKAdmin({"bootstrap.servers": a.bootstrap})
        for f in admin.create_topics([NewTopic("orders", PARTITIONS, 1)]).values():
            f.result(60)
        produce(a.bootstrap, 0, 300, tansu)
        group = f"billing-{uuid.uuid4().hex[:6]}"
        on_a = read_some(a.bootstrap, group, "orders", 120)
        mirror = MirrorProcess(tmp_path, a.bootstrap, b.bootstrap,
                               **{"offset-syncs.topic.location": syncs_on}).start()
        produce(a.bootstrap, 300, 150, tansu)
        before = read_all(a.bootstrap, "orders", PARTITIONS)
        wait_until(lambda: read_all(b.bootstrap, "A.orders", PARTITIONS) == before, DEADLINE,
                   "A.orders on B to equal orders on A")
        checkpoints = wait_until(
            lambda: (lambda c: c if {p: x.upstream_offset for p, x in c.items()} == on_a
                     else None)(latest_checkpoints(b.bootstrap, group)),
            DEADLINE, f"checkpoints of {group} at its commits on A {on_a}")
        translated = {p: c.downstream_offset for p, c in checkpoints.items()}
        wait_until(lambda: committed_on(b.bootstrap, group, "A.orders") == translated, DEADLINE,
                   f"the group's offsets on B to be the checkpoints' {translated}")
        syncs = {"source": (a, "mm2-offset-syncs.B.internal"),
                 "target": (b, "mm2-offset-syncs.A.internal")}
        holder, topic = syncs[syncs_on]
        wait_until(lambda: partitions_of(holder.bootstrap, topic) and translated_by_syncs(
            holder.bootstrap, topic, on_a) == translated, DEADLINE,
            f"{topic} on {'A' if holder is a else 'B'} to translate {on_a} to {translated}")
        for other, name in syncs.values():
            if name != topic:
                assert not topic_exists(other.bootstrap, name), f"{name} written too"
        a.cleanup()  # A is gone
        if syncs_on == "target":  # MM2's offset syncs outlive A
            assert translated_by_syncs(b.bootstrap, topic, on_a) == translated
        # What the group has not read: every record after its commit on A, by key
        on_a_offsets = {p: [f"k{i}".encode() for i in range(450) if i % PARTITIONS == p]
                        for p in range(PARTITIONS)}
        expected = {p: keys[on_a[p]:] for p, keys in on_a_offsets.items()}
        c = CKConsumer({"bootstrap.servers": b.bootstrap, "group.id": group,
                        "enable.auto.commit": False, "auto.offset.reset": "latest",
                        "enable.partition.eof": True})
        c.subscribe(["A.orders"])
        got, at_end = {p: [] for p in range(PARTITIONS)}, set()

        def read_to_end():
            for m in c.consume(500, 0.5):
                if m.error() is None:
                    got[m.partition()].append(m.key())
                    at_end.discard(m.partition())
                elif m.error().code() == CKError._PARTITION_EOF:
                    at_end.add(m.partition())
            return len(at_end) == PARTITIONS
        try:
            wait_until(read_to_end, DEADLINE, "the group to reach the end of A.orders on B",
                       interval=0)
        finally:
            c.close()
        assert got == expected
    finally:
        if mirror is not None:
            mirror.stop()
        a.cleanup()
        b.cleanup()
