"""Failures of a replicated cluster: killed leaders, paused followers, a deposed leader's tail,
too few replicas for min.insync.replicas, a lost controller, a lost group coordinator."""
import threading
import time

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import Producer
from confluent_kafka import TopicPartition as CTP
from minilog.broker.coordinator.coordinator_topic import partition_for
from minilog.broker.storage.log import Log
from minilog.connector.client import AdminClient, Consumer, TopicPartition
from minilog.connector.protocol import (
    ApiKey,
    ErrorCode,
    RequestHeader,
    decode_response,
    encode_request,
    request,
)
from minilog.connector.records import decode_batches, encode_batch
from test_cluster_basics import _fetch, produce_all
from wire import RawConnection
from clustertools import active_controller, wait_for

pytestmark = pytest.mark.timeout(300)


class ContinuousProducer:
    """An acks=all idempotent confluent-kafka producer writing 0, 1, 2, ... until stopped."""

    def __init__(self, bootstrap, topic):
        self.acked, self.errors = [], []
        self._stop = threading.Event()
        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                   "enable.idempotence": True, "linger.ms": 2,
                                   "message.timeout.ms": 120000})
        self._topic = topic
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def progressed_to(self, count):
        """Whether `count` records are acknowledged; a delivery error fails at once."""
        assert not self.errors, self.errors[:3]
        return len(self.acked) >= count

    def _done(self, err, msg):
        if err:
            self.errors.append(err)
        else:
            self.acked.append((msg.partition(), msg.offset(), msg.value()))

    def _run(self):
        i = 0
        while not self._stop.is_set():
            try:
                self._producer.produce(self._topic, b"%08d" % i, on_delivery=self._done)
                i += 1
            except BufferError:
                pass
            self._producer.poll(0.001 if i % 20 == 0 else 0)

    def stop(self):
        self._stop.set()
        self._thread.join(30)
        assert self._producer.flush(120) == 0


class WatchingConsumer:
    """A confluent-kafka consumer reading the topic from the start while failovers happen."""

    def __init__(self, bootstrap, topic, partitions):
        self.seen = {}
        self._stop = threading.Event()
        self._c = ConfluentConsumer({"bootstrap.servers": bootstrap, "group.id": "watchers",
                                     "enable.auto.commit": False})
        self._c.assign([CTP(topic, p, 0) for p in range(partitions)])
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            m = self._c.poll(0.2)
            if m is not None and not m.error():
                key = (m.partition(), m.offset())
                assert self.seen.setdefault(key, m.value()) == m.value()

    def stop(self):
        self._stop.set()
        self._thread.join(30)
        self._c.close()


def read_everything(bootstrap, topic, partitions):
    """Every record of every partition, read with minilog's consumer up to the end offsets."""
    with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}) as c:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        ends = {tp.partition: o for tp, o in c.end_offsets(tps).items()}
        got = []
        deadline = time.monotonic() + 60
        while sum(1 for _ in got) < sum(ends.values()) and time.monotonic() < deadline:
            got += c.poll(0.5)
    return {(r.partition, r.offset): r.value for r in got}, ends


def test_leader_killed_repeatedly_loses_and_duplicates_no_acknowledged_record(make_cluster):
    c = make_cluster(3)
    c.create_topic("ha", partitions=2, rf=3, config={"min.insync.replicas": "2"})
    producer = ContinuousProducer(c.bootstrap, "ha")
    watcher = WatchingConsumer(c.bootstrap, "ha", 2)
    try:
        for _ in range(3):
            before = len(producer.acked)
            wait_for(lambda: producer.progressed_to(before + 300), "writes before the kill")
            victim = c.partition_of("ha")[0]
            c.broker(victim).kill()
            after_kill = len(producer.acked)
            wait_for(lambda: producer.progressed_to(after_kill + 300),
                     "acknowledged writes after the leader's kill -9")
            c.broker(victim).start()
            for p in (0, 1):
                c.wait_isr("ha", p, [1, 2, 3], f"broker {victim} back in the ISR of ha-{p}")
    finally:
        producer.stop()
    assert not producer.errors, producer.errors[:3]
    stored, ends = read_everything(c.bootstrap, "ha", 2)
    for p in (0, 1):  # offsets dense, each value once, in the order produced
        values = [stored[(p, o)] for o in range(ends[p])]
        assert values == sorted(values) and len(set(values)) == len(values)
    assert len(set(stored.values())) == len(stored)
    for partition, offset, value in producer.acked:
        assert stored[(partition, offset)] == value
    wait_for(lambda: len(watcher.seen) >= len(stored), "the watching consumer to read it all")
    watcher.stop()
    assert all(stored[k] == v for k, v in watcher.seen.items())  # no offset names two records


def test_paused_follower_leaves_the_isr_and_returns(make_cluster):
    c = make_cluster(3, **{"replica.lag.time.max.ms": 1000, "broker.session.timeout.ms": 600000})
    (leader, replicas, _), = c.create_topic("lag", partitions=1, rf=3).values()
    paused = next(r for r in replicas if r != leader)
    c.pause(paused)
    try:
        rest = sorted(set(replicas) - {paused})
        acked = produce_all(c.bootstrap_of(*rest), "lag", [b"while-paused-%d" % i for i in range(50)],
                            **{"message.timeout.ms": 60000})
        assert len(acked) == 50  # committed once the paused follower left the ISR
        c.wait_isr("lag", 0, rest)
    finally:
        c.resume(paused)
    c.wait_isr("lag", 0, replicas, f"broker {paused} back in the ISR after SIGCONT")


def _raw_produce(conn, topic, values, acks, timeout_ms=10000):
    req = request(ApiKey.PRODUCE)
    body = req.cls(acks=acks, timeout_ms=timeout_ms, topic_data=[req.make(
        "topic_data", name=topic, partition_data=[req.make(
            "topic_data", "partition_data", index=0,
            records=encode_batch([(None, None, v, ()) for v in values]))])])
    p = conn.call(ApiKey.PRODUCE, 9, body).responses[0].partition_responses[0]
    return p.error_code, p.base_offset


def _end_of_epoch(conn, topic, epoch):
    """(error, epoch, end offset) OffsetForLeaderEpoch answers for partition 0."""
    req = request(ApiKey.OFFSET_FOR_LEADER_EPOCH)
    body = req.cls(replica_id=-1, topics=[req.make("topics", topic=topic, partitions=[
        req.make("topics", "partitions", partition=0, current_leader_epoch=-1,
                 leader_epoch=epoch)])])
    p = conn.call(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, body).topics[0].partitions[0]
    return p.error_code, p.leader_epoch, p.end_offset


def _replica_records(broker, topic):
    with Log(broker.log_dir / f"{topic}-0") as log:
        return [(r.offset, r.value) for r in decode_batches(log.read(0, 1 << 30))]


def test_deposed_leaders_uncommitted_tail_is_truncated(make_cluster):
    c = make_cluster(3, **{"broker.session.timeout.ms": 4000, "replica.fetch.wait.max.ms": 100})
    (leader, replicas, _), = c.create_topic("div", partitions=1, rf=3).values()
    assert len(produce_all(c.bootstrap, "div", [b"first-%d" % i for i in range(10)])) == 10
    followers = [r for r in replicas if r != leader]
    for f in followers:
        c.pause(f)
    # A fetch the leader parked for a follower before the pause would still carry what is
    # written next into the follower's socket; the leader answers parked fetches after
    # replica.fetch.wait.max.ms (100 ms here), so after this pause none is left.
    time.sleep(1.0)
    conn = RawConnection(c.broker(leader).bootstrap)
    try:  # written only on the leader: never committed
        assert _raw_produce(conn, "div", [b"doomed-%d" % i for i in range(3)], acks=1) == (0, 10)
    finally:
        conn.close()
        c.broker(leader).kill()
        for f in followers:
            c.resume(f)
    wait_for(lambda: (c.partitions("div") or {0: (leader,)})[0][0] in followers,
             "a new leader among the followers")
    acked = produce_all(c.bootstrap_of(*followers), "div", [b"kept-%d" % i for i in range(3)])
    assert sorted(offset for _, offset in acked.values()) == [10, 11, 12]
    new_leader = c.partition_of("div")[0]
    conn = RawConnection(c.broker(new_leader).bootstrap)
    try:  # epoch 0 ended where the new leader's epoch began: what the deposed leader cuts to
        assert _end_of_epoch(conn, "div", 0) == (0, 0, 10)
        assert _end_of_epoch(conn, "div", 1) == (0, 1, 13)
    finally:
        conn.close()
    c.broker(leader).start()
    c.wait_isr("div", 0, replicas, "the deposed leader back in the ISR")
    c.stop()
    copies = [_replica_records(b, "div") for b in c.brokers]
    assert copies[0] == copies[1] == copies[2]
    assert [v for _, v in copies[0]] == [b"first-%d" % i for i in range(10)] + \
        [b"kept-%d" % i for i in range(3)]


def test_min_insync_replicas_refuses_writes_with_two_of_three_replicas_down(make_cluster):
    c = make_cluster(5)
    (leader, replicas, _), = c.create_topic("durable", partitions=1, rf=3,
                                            config={"min.insync.replicas": "2"}).values()
    acked = produce_all(c.bootstrap, "durable", [b"before-%d" % i for i in range(100)])
    down = [r for r in replicas if r != leader]
    for node in down:
        c.broker(node).kill()
    c.wait_isr("durable", 0, [leader])
    conn = RawConnection(c.broker(leader).bootstrap)
    try:
        assert _raw_produce(conn, "durable", [b"refused"], acks=-1)[0] == \
            ErrorCode.NOT_ENOUGH_REPLICAS
    finally:
        conn.close()
    for node in down:
        c.broker(node).start()
    c.wait_isr("durable", 0, replicas)
    acked.update(produce_all(c.bootstrap, "durable", [b"after-%d" % i for i in range(100)]))
    stored, _ = read_everything(c.bootstrap, "durable", 1)
    assert {v: (p, o) for (p, o), v in stored.items()} == acked and b"refused" not in stored.values()


def test_controller_failover_and_metadata_surviving_a_full_restart(make_cluster):
    c = make_cluster(3)
    c.create_topic("before", partitions=2, rf=3)
    old = active_controller(c.bootstrap)
    c.broker(old).kill()
    rest = [n for n in (1, 2, 3) if n != old]
    new = wait_for(lambda: (lambda cid: cid if cid not in (-1, old) else None)(
        active_controller(c.bootstrap_of(*rest))), "a new controller")
    assert new in rest
    created = c.create_topic("after", partitions=3, rf=2)  # metadata changes work again
    c.broker(old).start()
    c.wait_for_brokers(3)
    # the old controller came back without knowing the leader: it must learn it from the
    # answers to its campaign, not campaign again in a newer epoch and depose a working one
    assert active_controller(c.bootstrap) == new
    assert "no longer leader" not in c.broker(new).log()
    ids = _topic_ids(c.bootstrap)
    assert {"before", "after"} <= set(ids)
    c.stop()
    c.start()
    # the partitions as first seen with leaders: a leader may still move (-1 for a moment)
    # while the restarted brokers register, so a second look can find none
    after = wait_for(lambda: c.partitions("before") and c.partitions("after"),
                     "leaders after restarting every node")
    assert _topic_ids(c.bootstrap) == ids
    assert len(after) == len(created) == 3


def _topic_ids(bootstrap):
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        return {name: t.topic_id for name, t in admin.describe_topics().items()}


def _high_and_end(conn, topic, partition):
    """(high watermark, log end) of a partition, asked of its leader."""
    req = request(ApiKey.LIST_OFFSETS)
    answers = []
    for replica_id in (-1, 0):  # a replica id is answered with the log end, not the HW
        body = req.cls(replica_id=replica_id, isolation_level=0, topics=[req.make(
            "topics", name=topic, partitions=[req.make("topics", "partitions",
                                                       partition_index=partition, timestamp=-1)])])
        answers.append(conn.call(ApiKey.LIST_OFFSETS, 7, body).topics[0].partitions[0].offset)
    return tuple(answers)


def test_group_offsets_survive_the_loss_of_their_coordinator(make_cluster):
    c = make_cluster(3)
    c.create_topic("grp", partitions=1, rf=3)
    produce_all(c.bootstrap, "grp", [b"m%d" % i for i in range(50)])
    conf = {"bootstrap.servers": c.bootstrap, "group.id": "keeper", "enable.auto.commit": False,
            "auto.offset.reset": "earliest"}
    first = ConfluentConsumer(conf)
    first.subscribe(["grp"])
    got = []
    wait_for(lambda: got.append(first.poll(1.0)) or sum(
        m is not None and not m.error() for m in got) >= 20, "the group to consume")
    first.commit(offsets=[CTP("grp", 0, 20)], asynchronous=False)
    first.close()
    index = partition_for("keeper", 3)
    coordinator = c.partition_of("__consumer_offsets", index)[0]
    conn = RawConnection(c.broker(coordinator).bootstrap)
    try:  # the commit is on every in-sync replica once the high watermark reaches the log end
        wait_for(lambda: (lambda hw, end: hw == end)(*_high_and_end(conn, "__consumer_offsets", index)),
                 "the offset commit to be replicated")
    finally:
        conn.close()
    c.broker(coordinator).kill()
    rest = [n for n in (1, 2, 3) if n != coordinator]
    wait_for(lambda: c.partitions("__consumer_offsets", *rest)[index][0] in rest,
             "a new coordinator")
    second = ConfluentConsumer({**conf, "bootstrap.servers": c.bootstrap_of(*rest)})
    try:
        committed = wait_for(lambda: (lambda tp: tp.offset if tp.offset >= 0 else None)(
            second.committed([CTP("grp", 0)], timeout=5)[0]), "the committed offset")
        assert committed == 20
        second.subscribe(["grp"])
        m = wait_for(lambda: (lambda m: m if m is not None and not m.error() else None)(
            second.poll(1.0)), "a record after the coordinator moved")
        assert m.offset() == 20
    finally:
        second.close()


def test_acks_all_waits_for_the_isr_and_consumers_see_only_committed_records(make_cluster):
    c = make_cluster(3, **{"replica.lag.time.max.ms": 600000, "broker.session.timeout.ms": 600000})
    (leader, replicas, _), = c.create_topic("committed", partitions=1, rf=3).values()
    conn = RawConnection(c.broker(leader).bootstrap)
    followers = [r for r in replicas if r != leader]
    try:
        assert _raw_produce(conn, "committed", [b"early"], acks=-1) == (0, 0)
        for f in followers:
            c.pause(f)
        try:  # the followers are in the ISR but do not fetch: nothing more can commit
            assert _raw_produce(conn, "committed", [b"waiting"], acks=-1, timeout_ms=1000) == \
                (ErrorCode.REQUEST_TIMED_OUT, 1)  # appended, not acknowledged (as Kafka answers)
            assert _raw_produce(conn, "committed", [b"written"], acks=1) == (0, 2)
            seen = _fetch(conn, "committed", 0)
            assert seen.high_watermark == 1
            assert [r.value for r in decode_batches(seen.records)] == [b"early"]
        finally:
            for f in followers:
                c.resume(f)
        committed = wait_for(lambda: (lambda a: a if a.high_watermark == 3 else None)(
            _fetch(conn, "committed", 0)), "the records to commit once the followers fetch")
        assert [r.value for r in decode_batches(committed.records)] == \
            [b"early", b"waiting", b"written"]
    finally:
        conn.close()


def _send_produce(conn, topic, values, acks, timeout_ms):
    """Send a Produce request without reading its answer; its correlation id."""
    req = request(ApiKey.PRODUCE)
    body = req.cls(acks=acks, timeout_ms=timeout_ms, topic_data=[req.make(
        "topic_data", name=topic, partition_data=[req.make(
            "topic_data", "partition_data", index=0,
            records=encode_batch([(None, None, v, ()) for v in values]))])])
    conn.corr += 1
    conn.send_raw(b"".join(encode_request(RequestHeader(ApiKey.PRODUCE, 9, conn.corr, "raw"),
                                          body)))
    return conn.corr


def _produce_answers(conn, count):
    """The next `count` Produce v9 answers, in arrival order: (correlation id, error, offset)."""
    frames = []
    while len(frames) < count:
        data = conn.sock.recv(65536)
        if not data:
            raise ConnectionError("closed by broker")
        frames += conn.frames.feed(data)
    out = []
    for frame in frames:
        p = decode_response(ApiKey.PRODUCE, 9, frame).responses[0].partition_responses[0]
        out.append((int.from_bytes(bytes(frame[:4]), "big"), p.error_code, p.base_offset))
    return out


def test_requests_behind_a_waiting_acks_all_produce_go_on_and_are_answered_in_order(make_cluster):
    """An acks=all request waiting for the followers does not hold up the next request on its
    connection (a producer pipelines up to 5), yet the answers keep the requests' order."""
    c = make_cluster(3, **{"replica.lag.time.max.ms": 600000, "broker.session.timeout.ms": 600000})
    (leader, replicas, _), = c.create_topic("piped", partitions=1, rf=3).values()
    followers = [r for r in replicas if r != leader]
    conn, other = RawConnection(c.broker(leader).bootstrap), RawConnection(c.broker(leader).bootstrap)
    conn.sock.settimeout(60)
    try:
        for f in followers:
            c.pause(f)
        try:
            first = _send_produce(conn, "piped", [b"waits"], acks=-1, timeout_ms=600000)
            second = _send_produce(conn, "piped", [b"next"], acks=1, timeout_ms=600000)
            # The leader's log end (OffsetForLeaderEpoch of its only epoch) shows both appended.
            wait_for(lambda: _end_of_epoch(other, "piped", 0) == (0, 0, 2),
                     "the second request appended while the first waits")
        finally:
            for f in followers:
                c.resume(f)
        assert _produce_answers(conn, 2) == [(first, 0, 0), (second, 0, 1)]
    finally:
        conn.close()
        other.close()


def test_leadership_returns_to_the_preferred_replica(make_cluster):
    c = make_cluster(3, **{"leader.imbalance.check.interval.seconds": 1})
    (leader, replicas, _), = c.create_topic("home", partitions=1, rf=3).values()
    assert leader == replicas[0]
    c.broker(leader).kill()
    wait_for(lambda: c.partitions("home")[0][0] != leader, "a failover")
    c.broker(leader).start()
    wait_for(lambda: c.partitions("home")[0][0] == leader,
             f"broker {leader} to lead again once back in the ISR")
    wait_for(lambda: c.partitions("home")[0][2] == sorted(replicas), "the whole ISR back")
