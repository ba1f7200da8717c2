"""Replication safety (issue 25): brokers act only on committed metadata, as KRaft's do.

Each test is one reproduction, numbered as in the issue where it has a number: a controller
cut off from its quorum while it still believes it leads (1, 2, 3), a restarted broker before
it re-registered (5), a restarted replica's high watermark, a manual replica assignment. (4 is
tests/cluster/test_nemesis.py.) They run against real broker processes with the cluster's fast
timings and wait on conditions; each checks what Kafka guarantees (nothing acknowledged is
lost, ids handed out once, offsets never read back older than acknowledged, only what every
in-sync replica has is served).
"""
import threading
import time

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import NewPartitions, NewTopic
from minilog.broker.coordinator.coordinator_topic import partition_for
from minilog.connector.protocol import ApiKey, ErrorCode, request
from test_failover import read_everything
from wire import RawConnection
from clustertools import active_controller, wait_for

pytestmark = pytest.mark.timeout(300)

OFFSETS = "__consumer_offsets"
OFFSETS_PARTITIONS = 3  # offsets.topic.num.partitions in clustertools.FAST


def controller_seen_by(c, node):
    """The active controller as broker `node` itself names it (DescribeCluster asked of it)."""
    req = request(ApiKey.DESCRIBE_CLUSTER)
    conn = RawConnection(c.broker(node).bootstrap)
    try:
        return conn.call(ApiKey.DESCRIBE_CLUSTER, 0, req.cls(
            include_cluster_authorized_operations=False)).controller_id
    finally:
        conn.close()


def produce_to(bootstrap, topic, partition, values, **conf):
    """acks=all idempotent writes of `values` to one partition; {value: offset} acknowledged."""
    acked, errors = {}, []

    def done(err, msg):
        (errors.append(err) if err else acked.__setitem__(msg.value(), msg.offset()))
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, **conf})
    for v in values:
        while True:
            try:
                p.produce(topic, v, partition=partition, on_delivery=done)
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
    assert p.flush(120) == 0 and not errors, errors[:3]
    return acked


def isolate(c, controller):
    """SIGSTOP every broker but the controller, until the controller no longer names itself
    (it has lost the quorum and knows it); returns the paused ones."""
    others = [n for n in c.alive() if n != controller]
    for n in others:
        c.pause(n)
    wait_for(lambda: controller_seen_by(c, controller) != controller,
             f"controller {controller}, cut off from the quorum, to step down")
    return others


def test_1_a_replica_whose_stale_leadership_never_committed_keeps_its_records(make_cluster):
    """Kafka: a leadership the quorum never committed is never acted on, and an unknown last
    fetched epoch makes a follower truncate at most to the leader's log end."""
    # One batch per replica fetch: a replica that lost its copy takes a while to fetch it again.
    c = make_cluster(3, **{"replica.fetch.max.bytes": 1})
    placement = c.create_topic("cut", partitions=3, rf=3, config={"min.insync.replicas": "2"})
    controller = active_controller(c.bootstrap)
    # the partition led by another broker with the controller next in line: the one it takes
    # over when it fences the others, and the one it is elected for when that leader dies
    p, (leader, replicas, _) = next((p, s) for p, s in placement.items()
                                    if s[0] != controller and s[1][1] == controller)
    acked = {}
    for q in placement:  # in every partition: whichever the controller's broker cuts loses
        acked.update({(q, o): v for v, o in produce_to(
            c.bootstrap, "cut", q, [b"cut-%d-%05d" % (q, i) for i in range(2000)],
            **{"batch.num.messages": 1}).items()})
    assert len(acked) == 6000
    paused = isolate(c, controller)
    for n in paused:
        c.resume(n)
    # The leader answers again (what reached it while paused is answered first); a moment
    # later the controller's broker is paused, before it could fetch its partitions again, and
    # the leader dies: the controller's broker is next in line for partition p.
    wait_for(lambda: controller_seen_by(c, leader) is not None, f"broker {leader} to answer")
    time.sleep(0.5)
    c.pause(controller)
    c.broker(leader).kill()
    c.resume(controller)
    rest = [n for n in (1, 2, 3) if n != leader]
    wait_for(lambda: (c.partitions("cut", *rest) or {p: (leader,)})[p][0] not in (leader, -1),
             f"a new leader for cut-{p}")
    stored, ends = read_everything(c.bootstrap_of(*c.alive()), "cut", 3)
    lost = [v for k, v in acked.items() if stored.get(k) != v]
    assert not lost, f"{len(lost)} of {len(acked)} acknowledged records lost (end offsets {ends})"


class BackgroundProducer:
    """An acks=all idempotent confluent-kafka producer whose deliveries are served by a thread,
    so a test can act (pause, kill) while its writes wait for acknowledgement."""

    def __init__(self, bootstrap, **conf):
        self.acked, self.errors = {}, []
        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                   "enable.idempotence": True, "linger.ms": 0,
                                   "message.timeout.ms": 120000, **conf})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _done(self, err, msg):
        if err:
            self.errors.append(err)
        else:
            self.acked[msg.value()] = (msg.partition(), msg.offset())

    def _serve(self):
        while not self._stop.is_set():
            self._producer.poll(0.05)

    def produce(self, topic, partition, values):
        for v in values:
            self._producer.produce(topic, v, partition=partition, on_delivery=self._done)

    def close(self, timeout=120):
        """Deliver or fail everything still pending; the number never delivered."""
        self._stop.set()
        self._thread.join(30)
        return self._producer.flush(timeout)


def test_2_a_stale_isr_shrink_never_acknowledges_writes_only_the_leader_has(make_cluster):
    """Kafka: the high watermark never passes the smallest log end of the committed ISR, and
    an ISR change counts only once the controller committed it."""
    c = make_cluster(3, **{"replica.lag.time.max.ms": 1000})
    placement = c.create_topic("shrink", partitions=3, rf=3, config={"min.insync.replicas": "2"})
    controller = active_controller(c.bootstrap)
    p = next(p for p, (leader, _, _) in placement.items() if leader == controller)
    producer = BackgroundProducer(c.broker(controller).bootstrap)
    try:
        producer.produce("shrink", p, [b"before-%d" % i for i in range(10)])
        wait_for(lambda: len(producer.acked) == 10, "the first writes, with every broker up")
        before = dict(producer.acked)
        others = [n for n in (1, 2, 3) if n != controller]
        for n in others:
            c.pause(n)
        time.sleep(1.0)  # no fetch parked before the pause is left to carry what comes next
        # written on the controller's broker alone: neither follower fetches them
        producer.produce("shrink", p, [b"paused-%d" % i for i in range(5)])
        wait_for(lambda: controller_seen_by(c, controller) != controller,
                 f"controller {controller}, cut off from the quorum, to step down")
        # Its producer's retries come back acknowledged within seconds if the high watermark
        # passed records the followers never had; a correct leader leaves them waiting.
        try:
            wait_for(lambda: len(producer.acked) == 15, "acknowledgements", timeout=5)
        except AssertionError:
            pass
        acked_while_alone = dict(producer.acked)
        c.broker(controller).kill()
        for n in others:
            c.resume(n)
        wait_for(lambda: (c.partitions("shrink", *others) or {p: (-1,)})[p][0] in others,
                 f"a new leader for shrink-{p} among {others}")
        undelivered = producer.close()
    finally:
        producer.close(1)
    stored, _ = read_everything(c.bootstrap_of(*others), "shrink", 3)
    lost = sorted(v for v, at in producer.acked.items() if stored.get(at) != v)
    alone = sorted(set(acked_while_alone) - set(before))
    assert not lost, (f"acknowledged but lost: {lost} (acknowledged while the followers were "
                      f"paused: {alone}; producer errors {producer.errors[:3]})")
    assert not producer.errors and undelivered == 0, producer.errors[:3]


def init_producer_id(bootstrap, producer_id=-1, epoch=-1, timeout=30.0):
    """(error, producer id, epoch) InitProducerId answers for an idempotent producer (v4:
    `producer_id`/`epoch` >= 0 is librdkafka's KIP-360 epoch bump)."""
    req = request(ApiKey.INIT_PRODUCER_ID)
    conn = RawConnection(bootstrap)
    conn.sock.settimeout(timeout)
    try:
        r = conn.call(ApiKey.INIT_PRODUCER_ID, 4, req.cls(
            transactional_id=None, transaction_timeout_ms=-1, producer_id=producer_id,
            producer_epoch=epoch))
    finally:
        conn.close()
    return r.error_code, r.producer_id, r.producer_epoch


def test_3_a_producer_id_is_handed_out_once_even_by_a_controller_without_its_quorum(
        make_cluster):
    """Kafka: producer ids come only from blocks the controller has committed."""
    c = make_cluster(3)
    controller = active_controller(c.bootstrap)
    others = [n for n in (1, 2, 3) if n != controller]
    code, first, _ = init_producer_id(c.broker(controller).bootstrap)
    assert code == 0
    given = {first}
    for n in others:
        c.pause(n)
    # A metadata fetch the controller parked before the pause would still carry what it
    # appends next into a paused voter's socket; parked fetches are answered within 500 ms.
    time.sleep(1.0)
    try:  # whatever the cut-off controller answers, an id it gives must never be given again
        code, cut_off, _ = init_producer_id(c.broker(controller).bootstrap)
    except OSError:  # no answer at all gives nothing out
        code = cut_off = None
    finally:
        c.broker(controller).kill()
        for n in others:
            c.resume(n)
    if code == 0:
        given.add(cut_off)
    wait_for(lambda: active_controller(c.bootstrap_of(*others)) in others, "a new controller")
    for n in others:
        code, again, _ = wait_for(lambda: (lambda r: r if r[0] == 0 else None)(
            init_producer_id(c.broker(n).bootstrap)), f"an id from broker {n}")
        assert again not in given, (f"producer id {again} handed out twice (ids given before: "
                                    f"{sorted(given)}, the cut-off controller answered {cut_off})")
        given.add(again)


def test_3_a_kip_360_epoch_bump_is_answered_by_any_broker(make_cluster):
    """Kafka: InitProducerId carrying an id and epoch, without a transactional id, is answered
    by any broker with a fresh id from committed blocks (librdkafka sends it to bump its
    epoch after an unknown producer id or a timed-out batch)."""
    c = make_cluster(3)
    controller = active_controller(c.bootstrap)
    code, pid, epoch = init_producer_id(c.broker(controller).bootstrap)
    assert code == 0
    for n in (1, 2, 3):
        code, bumped, _ = init_producer_id(c.broker(n).bootstrap, pid, epoch)
        assert code == 0, f"broker {n} answered the epoch bump with error {code}"
        assert bumped not in (pid, -1)
        pid = bumped


def offset_fetch(bootstrap, group, topic):
    """(error, committed offset of `topic`-0) as broker `bootstrap` answers OffsetFetch."""
    req = request(ApiKey.OFFSET_FETCH)
    conn = RawConnection(bootstrap)
    try:
        resp = conn.call(ApiKey.OFFSET_FETCH, 7, req.cls(
            group_id=group, require_stable=False,
            topics=[req.make("topics", name=topic, partition_indexes=[0])]))
    finally:
        conn.close()
    if resp.error_code:
        return resp.error_code, None
    p = resp.topics[0].partitions[0]
    return p.error_code, p.committed_offset


def offset_commit(bootstrap, group, topic, offset):
    """The error OffsetCommit of `offset` for `topic`-0 (a simple commit, no generation) gets."""
    req = request(ApiKey.OFFSET_COMMIT)
    conn = RawConnection(bootstrap)
    try:
        return conn.call(ApiKey.OFFSET_COMMIT, 8, req.cls(
            group_id=group, generation_id_or_member_epoch=-1, member_id="",
            group_instance_id=None, topics=[req.make("topics", name=topic, partitions=[
                req.make("topics", "partitions", partition_index=0, committed_offset=offset,
                         committed_leader_epoch=-1, committed_metadata="")])])
        ).topics[0].partitions[0].error_code
    finally:
        conn.close()


def _stale_answers_after_a_restart(c, index, old, new):
    """kill -9 and restart at once the coordinator of the group `stale`, whose last
    acknowledged commit is `old`; commit `new` through its successor as soon as there is one,
    asking the restarted broker all along. Its answers of `old` after `new` was acknowledged."""
    c.wait_isr(OFFSETS, index, [1, 2, 3])
    coordinator = c.partition_of(OFFSETS, index)[0]
    rest = [n for n in (1, 2, 3) if n != coordinator]
    restarted = c.broker(coordinator)
    restarted.kill()
    restarted.start()
    committed, stale, asked = False, 0, 0

    def settled():
        nonlocal committed, stale, asked
        try:
            answer = offset_fetch(restarted.bootstrap, "stale", "work")
            asked += 1
            stale += committed and answer == (0, old)
        except (OSError, ConnectionError):
            pass
        leader, _, isr = (c.partitions(OFFSETS, *rest) or {}).get(index, (-1, [], []))
        if not committed and leader in rest:
            committed = offset_commit(c.broker(leader).bootstrap, "stale", "work", new) == 0
        return committed and coordinator in isr and asked > 20
    wait_for(settled, f"a commit of {new} and broker {coordinator} back in sync", interval=0)
    return stale, asked


def test_5_a_restarted_coordinator_serves_no_offsets_older_than_acknowledged(make_cluster):
    """Kafka: a restarted broker takes no leadership and serves no partition until it has
    registered, caught up with the metadata and been unfenced. (The window is a fraction of
    a second: three restarts make it show.)"""
    c = make_cluster(3)
    c.create_topic("work", partitions=1, rf=3)
    index = partition_for("stale", OFFSETS_PARTITIONS)
    leader = c.partition_of(OFFSETS, index)[0]
    wait_for(lambda: offset_commit(c.broker(leader).bootstrap, "stale", "work", 100) == 0,
             "a first commit")
    for old, new in ((100, 200), (200, 300), (300, 400)):
        stale, asked = _stale_answers_after_a_restart(c, index, old, new)
        assert not stale, (f"after {new} was committed, the restarted coordinator answered "
                           f"{old} to {stale} of {asked} OffsetFetch requests")


def test_a_coordinator_deposed_while_paused_serves_no_offsets_older_than_acknowledged(
        make_cluster):
    """The controller fences a broker silent for broker.session.timeout.ms and moves what it
    led; the broker, resumed, believes it still coordinates until it has caught up with the
    metadata. Meanwhile it must not answer OffsetFetch with the offsets it had (the nemesis
    found it, seed 202: -1001 answered after commits its successor had acknowledged)."""
    c = make_cluster(3)
    c.create_topic("work", partitions=1, rf=3)
    index = partition_for("stale", OFFSETS_PARTITIONS)
    for old, new in ((100, 200), (200, 300)):
        c.wait_isr(OFFSETS, index, [1, 2, 3])
        # asked again: the broker that answered wait_isr may not be the one asked next
        deposed = wait_for(lambda: (c.partitions(OFFSETS) or {}).get(index, (None,))[0],
                           f"a coordinator for {OFFSETS}-{index}")
        wait_for(lambda: offset_commit(c.broker(deposed).bootstrap, "stale", "work", old) == 0,
                 f"a commit of {old}")
        rest = [n for n in (1, 2, 3) if n != deposed]
        c.pause(deposed)
        try:
            def successor():
                leader = (c.partitions(OFFSETS, *rest) or {}).get(index, (-1,))[0]
                return leader if leader in rest else None
            leader = wait_for(successor, f"a coordinator other than broker {deposed}")
            wait_for(lambda: offset_commit(c.broker(leader).bootstrap, "stale", "work", new) == 0,
                     f"a commit of {new} on broker {leader}")
        finally:
            c.resume(deposed)
        answers = []

        def caught_up():
            try:
                answers.append(offset_fetch(c.broker(deposed).bootstrap, "stale", "work"))
                own_view = c.partitions_at(OFFSETS, deposed) or {}
            except (OSError, ConnectionError):
                return False
            return own_view.get(index, (deposed,))[0] != deposed and len(answers) > 20
        wait_for(caught_up, f"broker {deposed} to learn it no longer coordinates", interval=0)
        stale = answers.count((0, old))
        assert not stale, (f"after {new} was committed, the deposed coordinator answered {old} "
                           f"to {stale} of {len(answers)} OffsetFetch requests")


def test_a_coordinator_awaiting_its_lease_tells_clients_to_retry_it_not_to_leave_it(
        make_cluster):
    """A broker serves offsets only while the controller has answered a heartbeat within the
    session timeout (it may have been deposed unawares otherwise). A paused controller makes
    every broker's lease lapse until its successor answers. Meanwhile the coordinator must
    answer COORDINATOR_LOAD_IN_PROGRESS, which clients retry in place: NOT_COORDINATOR makes
    librdkafka drop its coordinator and the heartbeats with it, and under repeated controller
    failovers (the long nemesis, seed 101) the member's session lapsed again and again and the
    group rebalanced without end: 7 commits in 240 s."""
    c = make_cluster(3)
    c.create_topic("work", partitions=1, rf=3)
    # every broker's view: a later metadata call may reach one that has not learnt the leaders
    placement = c.wait_agreed(OFFSETS)
    controller = active_controller(c.bootstrap)
    group = next(g for g in (f"kept-{i}" for i in range(1000))
                 if placement[partition_for(g, OFFSETS_PARTITIONS)][0] != controller)
    index = partition_for(group, OFFSETS_PARTITIONS)
    coordinator = placement[index][0]
    bootstrap = c.broker(coordinator).bootstrap
    wait_for(lambda: offset_commit(bootstrap, group, "work", 100) == 0, "a first commit")
    rest = [n for n in (1, 2, 3) if n != controller]
    answers = []

    def lapsed_and_back():
        answers.append(offset_fetch(bootstrap, group, "work")[0])
        if answers[-1] != 0:
            return False
        return len(set(answers)) > 1 or (
            len(answers) % 10 == 0 and active_controller(c.bootstrap_of(*rest)) in rest)
    c.pause(controller)
    try:
        wait_for(lapsed_and_back, "a new controller and the coordinator's lease back",
                 interval=0.05)
    finally:
        c.resume(controller)
    still = (c.partitions(OFFSETS, *rest) or {}).get(index, (-1,))[0]
    assert still == coordinator, f"broker {coordinator} lost the group to broker {still}"
    assert ErrorCode.NOT_COORDINATOR not in answers, (
        f"broker {coordinator}, coordinator all along, answered NOT_COORDINATOR "
        f"{answers.count(ErrorCode.NOT_COORDINATOR)} times of {len(answers)}")


def _registered_epoch(c, node_id):
    """The broker epoch `node_id` last registered with, as its own log says."""
    lines = c.broker(node_id).log_path.read_text().splitlines()
    return int(next(line for line in reversed(lines) if "registered (epoch" in line)
               .rsplit("epoch ", 1)[1].rstrip(")"))


def _replica_fetch(bootstrap, topic, replica, broker_epoch, offset):
    """A Fetch v15 as replica `replica` of incarnation `broker_epoch` would send it to the
    leader at `bootstrap`, from `offset` of `topic`-0; the partition's error code."""
    md, fetch = request(ApiKey.METADATA), request(ApiKey.FETCH)
    conn = RawConnection(bootstrap)
    try:
        t = conn.call(ApiKey.METADATA, 12, md.cls(
            topics=[md.make("topics", topic_id=None, name=topic)],
            allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        ).topics[0]
        topic_id, leader_epoch = t.topic_id, t.partitions[0].leader_epoch
        resp = conn.call(ApiKey.FETCH, 15, fetch.cls(
            replica_state=fetch.make("replica_state", replica_id=replica,
                                     replica_epoch=broker_epoch),
            max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
            session_epoch=-1, forgotten_topics_data=[], rack_id="",
            topics=[fetch.make("topics", topic_id=topic_id, partitions=[fetch.make(
                "topics", "partitions", partition=0, current_leader_epoch=leader_epoch,
                fetch_offset=offset, last_fetched_epoch=leader_epoch, log_start_offset=0,
                partition_max_bytes=1 << 20)])]))
    finally:
        conn.close()
    return resp.responses[0].partitions[0].error_code


def test_kip_903_a_fetch_of_an_old_incarnation_does_not_bring_a_replica_back_into_the_isr(
        make_cluster):
    """KIP-903: a broker restarted quickly may have lost what its previous incarnation had
    fetched, so a fetch sent before the restart (its broker epoch replaced since) must not
    readmit it to the ISR, however far it claims to have read; a fetch of its current
    registration does. Here the replica is paused out of the ISR (lagging, not fenced) and a
    Fetch v15 in its name reaches the leader's log end with an older broker epoch."""
    c = make_cluster(3, **{"replica.lag.time.max.ms": 1000, "broker.session.timeout.ms": 30000})
    c.create_topic("kip903", partitions=1, rf=3, config={"min.insync.replicas": "1"})
    c.wait_isr("kip903", 0, [1, 2, 3])
    leader = c.partitions("kip903")[0][0]
    replica = next(n for n in (1, 2, 3) if n != leader)
    others = [n for n in (1, 2, 3) if n != replica]
    epoch = _registered_epoch(c, replica)
    c.pause(replica)
    try:
        acked = produce_to(c.bootstrap_of(*others), "kip903", 0, [b"x%d" % i for i in range(10)])
        end = max(acked.values()) + 1
        c.wait_isr("kip903", 0, others, f"broker {replica} to leave the ISR")
        bootstrap = c.broker(leader).bootstrap
        stale = []

        def readmitted(broker_epoch, record):
            code = _replica_fetch(bootstrap, "kip903", replica, broker_epoch, end)
            assert code == 0, f"the leader answered error {code}"
            isr = (c.partitions("kip903", *others) or {}).get(0, (0, 0, []))[2]
            record.append(isr)
            return replica in isr
        old = epoch - 1 if epoch > 0 else epoch + 1  # any but its own (-1: sent none)
        for _ in range(15):  # the leader looks at its ISR at least every 0.5 s
            assert not readmitted(old, stale), (
                f"a fetch with broker {replica}'s old epoch {old} (registered: {epoch}) "
                f"brought it back into the ISR")
            time.sleep(0.2)
        wait_for(lambda: readmitted(epoch, []),
                 f"a fetch of broker {replica}'s current epoch to readmit it")
    finally:
        c.resume(replica)


def test_createtopics_honours_a_manual_replica_assignment(make_cluster):
    """Kafka: CreateTopics with replica assignments places each partition's replicas exactly
    as asked, in the order asked (the first is the preferred leader)."""
    c = make_cluster(3)
    asked = {0: [3, 2, 1], 1: [3, 1, 2], 2: [2, 1, 3]}
    admin = c.admin()
    topic = NewTopic("placed", num_partitions=3,
                     replica_assignment=[asked[p] for p in sorted(asked)])
    admin.create_topics([topic])["placed"].result(30)
    placement = wait_for(lambda: c.partitions("placed"), "leaders for the topic")
    assert {p: replicas for p, (_, replicas, _) in placement.items()} == asked
    assert {p: leader for p, (leader, _, _) in placement.items()} == {0: 3, 1: 3, 2: 2}
    # CreatePartitions too (librdkafka's 0081 checks it): new partitions where asked
    added = {3: [1, 2, 3], 4: [2, 3, 1]}
    wrong = NewPartitions("placed", 6, replica_assignment=[added[3]])
    with pytest.raises(KafkaException) as e:
        admin.create_partitions([wrong])["placed"].result(30)
    assert e.value.args[0].name() == "INVALID_REPLICA_ASSIGNMENT"
    more = NewPartitions("placed", 5, replica_assignment=[added[3], added[4]])
    admin.create_partitions([more])["placed"].result(30)
    def all_five():
        # one metadata snapshot per try: two calls may reach brokers that disagree
        seen = c.partitions("placed")
        return seen if seen and len(seen) == 5 else None
    placement = wait_for(all_five, "leaders for the new partitions")
    assert {p: replicas for p, (_, replicas, _) in placement.items()} == {**asked, **added}


def high_watermark(bootstrap, topic, partition):
    """(error, offset) ListOffsets "latest" from a consumer: the high watermark."""
    req = request(ApiKey.LIST_OFFSETS)
    conn = RawConnection(bootstrap)
    try:
        p = conn.call(ApiKey.LIST_OFFSETS, 7, req.cls(
            replica_id=-1, isolation_level=0, topics=[req.make(
                "topics", name=topic, partitions=[req.make(
                    "topics", "partitions", partition_index=partition, timestamp=-1)])])
        ).topics[0].partitions[0]
    finally:
        conn.close()
    return p.error_code, p.offset


def _log_bytes(c, node, topic, partition):
    """The size of a replica's partition log on disk (a follower stores the leader's bytes)."""
    directory = c.broker(node).log_dir / f"{topic}-{partition}"
    return sum(f.stat().st_size for f in directory.glob("*.log"))


def test_a_restarted_replica_keeps_its_high_watermark_not_its_log_end(make_cluster):
    """Kafka: a broker reloads each partition's high watermark from its checkpoint on restart,
    so records it holds beyond it stay uncommitted, even once it leads: a consumer reads only
    what every in-sync replica has."""
    # Five voters: the quorum outlives a paused follower and a killed leader. Nobody leaves
    # an ISR for lagging or silence: only a clean stop or a closed connection fences.
    c = make_cluster(5, **{"replica.lag.time.max.ms": 600000,
                           "broker.session.timeout.ms": 600000})
    placement = c.create_topic("hw", partitions=5, rf=3)
    controller = active_controller(c.bootstrap)
    p, (leader, replicas, _) = next((p, s) for p, s in placement.items()
                                    if controller not in s[1] and s[0] == s[1][0])
    _, restarted, paused = replicas
    assert len(produce_to(c.bootstrap, "hw", p, [b"committed-%d" % i for i in range(10)])) == 10
    c.pause(paused)
    time.sleep(1.0)  # no fetch parked before the pause is left to carry what comes next
    # acks=1: on the leader and the other follower, uncommitted while the paused one lacks them
    produce_to(c.broker(leader).bootstrap, "hw", p, [b"beyond-%d" % i for i in range(10)],
               acks=1, **{"enable.idempotence": False})
    assert high_watermark(c.broker(leader).bootstrap, "hw", p) == (0, 10)
    wait_for(lambda: _log_bytes(c, restarted, "hw", p) == _log_bytes(c, leader, "hw", p),
             f"broker {restarted} to fetch them")
    awake = [n for n in c.alive() if n != paused]
    c.broker(restarted).restart()
    wait_for(lambda: c.partitions("hw", *awake)[p][2] == sorted(replicas),
             f"broker {restarted} back in the ISR of hw-{p}")
    c.broker(leader).kill()
    awake.remove(leader)
    wait_for(lambda: c.partitions("hw", *awake)[p][0] == restarted,
             f"broker {restarted} to lead hw-{p}")
    assert high_watermark(c.broker(restarted).bootstrap, "hw", p) == (0, 10), \
        "records the paused in-sync replica never had are served as committed"
