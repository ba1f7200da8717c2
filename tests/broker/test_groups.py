"""Consumer groups on a real broker: membership, rebalances, commits, restarts, admin tools,
with unmodified confluent-kafka and kafka-python consumers (and raw requests where a client
hides the protocol detail under test)."""
import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from brokers import MinilogBroker
from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from minilog.broker.coordinator.coordinator_topic import partition_for
from minilog.broker.coordinator.group.group import Group
from minilog.broker.coordinator.group.group_records import OffsetAndMetadata
from minilog.connector.protocol import ApiKey, ErrorCode, request
from wire import RawConnection

SESSION_MS = 6000
FAST = ["-o", "group.min.session.timeout.ms=1000", "-o", "group.initial.rebalance.delay.ms=0"]
FENCED_INSTANCE_ID, GROUP_SUBSCRIBED_TO_TOPIC = 82, 86


@pytest.fixture(scope="module")
def gbroker():
    b = MinilogBroker(extra=FAST).start()
    yield b
    b.cleanup()


def _create(bootstrap, name, partitions=4):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)


def _produce(bootstrap, topic, n, partitions=4):
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % partitions)
    assert p.flush(15) == 0


def _consumer(bootstrap, group, **extra):
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "session.timeout.ms": SESSION_MS,
            "heartbeat.interval.ms": 500, "partition.assignment.strategy": "range"}
    conf.update(extra)
    return Consumer(conf)


@contextlib.contextmanager
def _closing(*clients):
    try:
        yield clients
    finally:
        for c in clients:
            c.close()


def _poll(consumers, got, until, timeout=30, hold=0.0):
    """Poll every consumer in turn, collecting (partition, offset) per consumer, until
    `until()` has held for `hold` seconds; fail after `timeout`."""
    deadline, since = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        for i, c in enumerate(consumers):
            m = c.poll(0.02)
            if m is not None:
                assert m.error() is None, m.error()
                got.setdefault(i, []).append((m.partition(), m.offset()))
        if until():
            since = since or time.monotonic()
            if time.monotonic() - since >= hold:
                return
        else:
            since = None
    raise AssertionError(f"condition not met in {timeout}s; got {dict(got)}")


def _sizes(consumers):
    return sorted(len(c.assignment()) for c in consumers)


def _covered(consumers, partitions=4):
    return sorted(tp.partition for c in consumers for tp in c.assignment()) == list(range(partitions))


class _KafkaPythonMember:
    """A kafka-python consumer polling in its own thread (its JoinGroup blocks the caller)."""

    def __init__(self, bootstrap, group, topic, **extra):
        from kafka import KafkaConsumer
        from kafka.coordinator.assignors.range import RangePartitionAssignor
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
            enable_auto_commit=False, session_timeout_ms=SESSION_MS, heartbeat_interval_ms=500,
            partition_assignment_strategy=[RangePartitionAssignor], fetch_max_wait_ms=100,
            **extra)
        # The topic's metadata before joining: a kafka-python leader that has not seen the
        # topic's partitions yet assigns none of them, and nothing makes it look again.
        assert self.consumer.partitions_for_topic(topic)
        self.consumer.subscribe([topic])
        self.records, self.stop = [], threading.Event()
        self.assignment = set()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            while not self.stop.is_set():
                for tp, msgs in self.consumer.poll(100).items():
                    self.records += [(tp.partition, m.offset) for m in msgs]
                self.assignment = {tp.partition for tp in self.consumer.assignment()}
            self.consumer.commit()
        finally:
            self.consumer.close()

    def close(self):
        self.stop.set()
        self.thread.join(20)


def _wait(predicate, timeout=20, what="condition", hold=0.0):
    """Return once `predicate()` has held for `hold` seconds; fail after `timeout`."""
    deadline, since = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        if predicate():
            since = since or time.monotonic()
            if time.monotonic() - since >= hold:
                return
        else:
            since = None
        time.sleep(0.1)
    raise AssertionError(f"{what} not met within {timeout}s")


# -- the seeds' picture ---------------------------------------------------------------------------
def test_each_record_reaches_exactly_one_member_of_each_group(gbroker):
    bs = gbroker.bootstrap
    _create(bs, "seeds")
    a = [_consumer(bs, "seeds-A") for _ in range(2)]
    b = [_consumer(bs, "seeds-B") for _ in range(5)]
    with _closing(*a, *b):
        for c in a + b:
            c.subscribe(["seeds"])
        got = {}
        _poll(a + b, got, hold=1.5, until=lambda: (
            _sizes(a) == [2, 2] and _covered(a) and _sizes(b) == [0, 1, 1, 1, 1] and _covered(b)))
        _produce(bs, "seeds", 200)
        received = {}
        _poll(a + b, received, until=lambda: sum(map(len, received.values())) >= 400)
        time.sleep(0.5)
        _poll(a + b, received, until=lambda: True)
        idle = [i for i, c in enumerate(b, start=len(a)) if not c.assignment()]
    for first, members in ((0, a), (len(a), b)):
        records = [r for i in range(first, first + len(members)) for r in received.get(i, [])]
        assert len(records) == 200 and len(set(records)) == 200  # each once, none twice
    assert len(idle) == 1 and idle[0] not in received  # the fifth member of B got nothing


# -- a consumer killed without leaving ------------------------------------------------------------
_CHILD = textwrap.dedent("""
    import sys, time
    from confluent_kafka import Consumer, KafkaException
    c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "session.timeout.ms": int(sys.argv[4]), "heartbeat.interval.ms": 500})
    c.subscribe([sys.argv[3]])
    while True:
        m = c.poll(0.2)
        if m is None or m.error():
            continue
        print("P", m.partition(), m.offset(), flush=True)
        time.sleep(0.02)
        try:
            c.commit(message=m, asynchronous=False)
        except KafkaException:  # a rebalance under way: the next owner reprocesses it
            continue
        print("C", m.partition(), m.offset() + 1, flush=True)
""")


def test_killed_member_partitions_move_to_survivor_with_nothing_lost(gbroker, tmp_path):
    bs, topic, n = gbroker.bootstrap, "crashy", 120
    _create(bs, topic, partitions=2)
    _produce(bs, topic, 2 * n, partitions=2)
    script = tmp_path / "child.py"
    script.write_text(_CHILD)
    lines = []
    survivor = _consumer(bs, "crashy-group")
    survivor.subscribe([topic])
    child = subprocess.Popen([sys.executable, str(script), bs, "crashy-group", topic, str(SESSION_MS)],
                             stdout=subprocess.PIPE, text=True, start_new_session=True)
    reader = threading.Thread(target=lambda: lines.extend(iter(child.stdout.readline, "")),
                              daemon=True)
    reader.start()
    mine, killed_at, moved_at = [], None, None
    try:
        deadline = time.monotonic() + SESSION_MS / 1000 + 90
        while time.monotonic() < deadline:
            m = survivor.poll(0.05)
            if m is not None and m.error() is None:
                mine.append((m.partition(), m.offset(), killed_at is not None))
                time.sleep(0.02)
                with contextlib.suppress(KafkaException):  # fails during a rebalance
                    survivor.commit(message=m, asynchronous=False)
            if killed_at is None and sum(1 for line in lines if line[0] == "C") >= 15:
                os.killpg(child.pid, signal.SIGKILL)  # no LeaveGroup: only the session ends it
                child.wait(10)
                killed_at = time.monotonic()
            if killed_at and moved_at is None and len(survivor.assignment()) == 2:
                moved_at = time.monotonic()
            if moved_at and len({(p, o) for p, o, _ in mine} |
                                {(int(x[1]), int(x[2])) for x in map(str.split, lines)
                                 if x[0] == "P" and len(x) == 3}) == 2 * n:
                break
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(10)
        survivor.close()
    assert killed_at is not None, "the child never committed"
    assert moved_at is not None, "the dead member's partitions never moved"
    # the child's whole lines only: one cut short by the kill (stdout unbuffered) says nothing
    whole = [line.split() for line in lines if line.endswith("\n")]
    child_done = [tuple(map(int, x[1:])) for x in whole if x[0] == "P"]
    child_commits = [tuple(map(int, x[1:])) for x in whole if x[0] == "C"]
    everything = {(p, o) for p, o, _ in mine} | set(child_done)
    assert everything == {(p, o) for p in range(2) for o in range(n)}  # nothing lost
    for p in {p for p, _ in child_done}:
        last_commit = max((o for q, o in child_commits if q == p), default=0)
        resumed = min((o for q, o, after in mine if q == p and after), default=None)
        assert resumed is not None and resumed >= last_commit
        reprocessed = {o for q, o, after in mine if q == p and after} & \
            {o for q, o in child_done if q == p}
        assert reprocessed == {o for q, o in child_done if q == p and o >= resumed}
        assert len(reprocessed) <= 1  # at most the record in flight when the child died


# -- persistence ----------------------------------------------------------------------------------
def test_commits_survive_restarts_and_compaction_keeps_the_latest(make_broker):
    b = make_broker(extra=FAST + ["-o", "log.cleaner.backoff.ms=200"])
    _create(b.bootstrap, "kept", partitions=2)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    small = ConfigResource("topic", "__consumer_offsets", incremental_configs=[
        ConfigEntry("segment.bytes", "4096", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([small])[small].result(10)
    group_dir = Path(b.data_dir) / "data" / f"__consumer_offsets-{partition_for('keeper', 50)}"

    def log_bytes():
        """The partition's segment bytes; infinite while the cleaner swaps segments (a file
        listed may be gone by the time it is measured)."""
        try:
            return sum(f.stat().st_size for f in group_dir.glob("*.log"))
        except FileNotFoundError:
            return float("inf")

    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "keeper"})
    with _closing(c):
        for i in range(400):
            c.commit(offsets=[TopicPartition("kept", 0, i), TopicPartition("kept", 1, 10 * i)],
                     asynchronous=False)
        # 400 commit batches take ~70 kB; compacted, one latest record per key remains, plus the
        # active segment (at most segment.bytes) that the cleaner never touches.
        _wait(lambda: log_bytes() < 4096 + 2000, what="__consumer_offsets compaction")
    wanted = [TopicPartition("kept", 0), TopicPartition("kept", 1)]
    for restart in (b.restart, lambda: (b.kill(), b.start())):
        restart()
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "keeper"})
        with _closing(c):
            assert [tp.offset for tp in c.committed(wanted, timeout=10)] == [399, 3990]


# -- clients ----------------------------------------------------------------------------------------
def test_kafka_python_rebalances_on_join_and_leave_and_resumes(gbroker):
    bs = gbroker.bootstrap
    _create(bs, "kp-topic")
    _produce(bs, "kp-topic", 80)
    first = _KafkaPythonMember(bs, "kp-group", "kp-topic")
    try:
        # Held a while: a kafka-python leader that assigned before its metadata named the
        # topic rejoins once it does, and kafka-python 3.0 can lose a join that completes
        # after a poll's timer ran out (it then never heartbeats again): let that rejoin
        # happen alone, before the second member's.
        _wait(lambda: first.assignment == {0, 1, 2, 3}, what="first member owns all", hold=1.5)
        second = _KafkaPythonMember(bs, "kp-group", "kp-topic")
        try:
            _wait(lambda: len(first.assignment) == len(second.assignment) == 2 and
                  first.assignment | second.assignment == {0, 1, 2, 3}, what="2+2 split")
        finally:
            second.close()
        _wait(lambda: first.assignment == {0, 1, 2, 3}, what="back to one member")
        _wait(lambda: len(set(first.records) | set(second.records)) == 80, what="all consumed")
    finally:
        first.close()
    c = _consumer(bs, "kp-group")
    with _closing(c):
        committed = c.committed([TopicPartition("kp-topic", p) for p in range(4)], timeout=10)
        assert [tp.offset for tp in committed] == [20, 20, 20, 20]  # resumes at the end


def test_confluent_and_kafka_python_members_share_a_group(gbroker):
    bs = gbroker.bootstrap
    _create(bs, "mixed")
    other = _KafkaPythonMember(bs, "mixed-group", "mixed")
    c = _consumer(bs, "mixed-group")
    got = {}
    try:
        with _closing(c):
            c.subscribe(["mixed"])
            _poll([c], got, hold=1.0, until=lambda: (
                len(c.assignment()) == 2 and len(other.assignment) == 2 and
                {tp.partition for tp in c.assignment()} | other.assignment == {0, 1, 2, 3}))
            _produce(bs, "mixed", 100)
            _poll([c], got, until=lambda: len(got.get(0, [])) + len(other.records) >= 100)
    finally:
        other.close()
    records = got.get(0, []) + other.records
    assert len(records) == 100 and len(set(records)) == 100


def test_static_member_rejoins_with_its_assignment_and_no_rebalance(gbroker):
    bs = gbroker.bootstrap
    _create(bs, "static")
    revoked = []
    stay = _consumer(bs, "static-group", **{"group.instance.id": "stay"})
    back = _consumer(bs, "static-group", **{"group.instance.id": "back"})
    with _closing(stay):
        stay.subscribe(["static"], on_revoke=lambda c, parts: revoked.append(len(parts)))
        back.subscribe(["static"])
        with _closing(back):
            _poll([stay, back], {}, hold=1.0, until=lambda: _sizes([stay, back]) == [2, 2])
            before = {tp.partition for tp in back.assignment()}
            revoked.clear()
        again = _consumer(bs, "static-group", **{"group.instance.id": "back"})
        with _closing(again):  # back within the session timeout: its partitions waited for it
            again.subscribe(["static"])
            _poll([stay, again], {}, hold=1.0, until=lambda: len(again.assignment()) == 2)
            assert {tp.partition for tp in again.assignment()} == before
            assert revoked == []  # the member that stayed never saw a rebalance


# -- admin ------------------------------------------------------------------------------------------
def test_admin_client_lists_describes_alters_and_deletes_groups(gbroker):
    bs = gbroker.bootstrap
    _create(bs, "admin-topic")
    admin = AdminClient({"bootstrap.servers": bs})
    c = _consumer(bs, "admin-group")
    with _closing(c):
        c.subscribe(["admin-topic"])
        _poll([c], {}, hold=0.5, until=lambda: len(c.assignment()) == 4)
        listed = admin.list_consumer_groups(states={ConsumerGroupState.STABLE}).result(10)
        assert "admin-group" in {g.group_id for g in listed.valid}
        desc = admin.describe_consumer_groups(["admin-group"])["admin-group"].result(10)
        assert desc.state == ConsumerGroupState.STABLE and desc.partition_assignor == "range"
        (member,) = desc.members
        assert member.host.lstrip("/") == "127.0.0.1"
        assert sorted(tp.partition for tp in member.assignment.topic_partitions) == [0, 1, 2, 3]
        with pytest.raises(Exception, match="NON_EMPTY_GROUP"):
            admin.delete_consumer_groups(["admin-group"])["admin-group"].result(10)
    wanted = [TopicPartition("admin-topic", p, 7 + p) for p in range(4)]
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions("admin-group", wanted)])[
        "admin-group"].result(10)
    listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("admin-group")])[
        "admin-group"].result(10)
    assert sorted((tp.partition, tp.offset) for tp in listed.topic_partitions) == \
        [(p, 7 + p) for p in range(4)]
    admin.delete_consumer_groups(["admin-group"])["admin-group"].result(10)
    assert "admin-group" not in {g.group_id for g in admin.list_consumer_groups().result(10).valid}


# -- the protocol details clients do not show -----------------------------------------------------
def _subscription(*topics):
    out = b"\x00\x00" + len(topics).to_bytes(4, "big")
    for t in topics:
        out += len(t).to_bytes(2, "big") + t.encode()
    return out + b"\xff\xff\xff\xff"


def _join(conn, group, member_id="", instance_id=None, version=7, topics=("proto",)):
    req = request(ApiKey.JOIN_GROUP)
    return conn.call(ApiKey.JOIN_GROUP, version, req.cls(
        group_id=group, session_timeout_ms=SESSION_MS, rebalance_timeout_ms=10000,
        member_id=member_id, group_instance_id=instance_id, protocol_type="consumer",
        protocols=[req.make("protocols", name="range", metadata=_subscription(*topics))]))


def _sync(conn, group, generation, member_id, assignments=(), instance_id=None):
    req = request(ApiKey.SYNC_GROUP)
    return conn.call(ApiKey.SYNC_GROUP, 5, req.cls(
        group_id=group, generation_id=generation, member_id=member_id,
        group_instance_id=instance_id, protocol_type="consumer", protocol_name="range",
        assignments=[req.make("assignments", member_id=m, assignment=a) for m, a in assignments]))


def _heartbeat(conn, group, generation, member_id, instance_id=None):
    return conn.call(ApiKey.HEARTBEAT, 4, request(ApiKey.HEARTBEAT).cls(
        group_id=group, generation_id=generation, member_id=member_id,
        group_instance_id=instance_id)).error_code


def _raw(broker):
    conn = RawConnection(broker.bootstrap)
    conn.sock.settimeout(30)
    return conn


def test_join_sync_heartbeat_errors_follow_kafka(gbroker):
    _create(gbroker.bootstrap, "proto")
    conn = _raw(gbroker)
    first = _join(conn, "proto-group")
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED and first.member_id.startswith("raw-")
    joined = _join(conn, "proto-group", first.member_id)
    assert (joined.error_code, joined.generation_id, joined.leader) == (0, 1, first.member_id)
    assert [m.member_id for m in joined.members] == [first.member_id]  # the leader sees members
    me = first.member_id
    assert _sync(conn, "proto-group", 0, me).error_code == ErrorCode.ILLEGAL_GENERATION
    synced = _sync(conn, "proto-group", 1, me, [(me, b"my-assignment")])
    assert (synced.error_code, synced.assignment) == (0, b"my-assignment")
    assert _heartbeat(conn, "proto-group", 1, me) == 0
    assert _heartbeat(conn, "proto-group", 0, me) == ErrorCode.ILLEGAL_GENERATION
    assert _heartbeat(conn, "proto-group", 1, "nobody") == ErrorCode.UNKNOWN_MEMBER_ID
    delete = request(ApiKey.DELETE_GROUPS)
    resp = conn.call(ApiKey.DELETE_GROUPS, 2, delete.cls(groups_names=["proto-group", "nope"]))
    assert [r.error_code for r in resp.results] == [ErrorCode.NON_EMPTY_GROUP,
                                                      ErrorCode.GROUP_ID_NOT_FOUND]
    listing = conn.call(ApiKey.LIST_GROUPS, 4, request(ApiKey.LIST_GROUPS).cls(
        states_filter=["stable"]))
    assert ("proto-group", "Stable") in {(gr.group_id, gr.group_state) for gr in listing.groups}
    commit = request(ApiKey.OFFSET_COMMIT)
    body = commit.cls(group_id="proto-group", generation_id_or_member_epoch=-1, member_id="",
                      topics=[commit.make("topics", name="proto", partitions=[commit.make(
                          "topics", "partitions", partition_index=0, committed_offset=5)])])
    resp = conn.call(ApiKey.OFFSET_COMMIT, 8, body)  # not a member, and the group is active
    assert resp.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_MEMBER_ID
    leave = request(ApiKey.LEAVE_GROUP)
    resp = conn.call(ApiKey.LEAVE_GROUP, 5, leave.cls(group_id="proto-group", members=[
        leave.make("members", member_id=me), leave.make("members", member_id="ghost")]))
    assert [m.error_code for m in resp.members] == [0, ErrorCode.UNKNOWN_MEMBER_ID]
    conn.close()


def test_static_member_replaced_by_a_new_instance_is_fenced(gbroker):
    conn = _raw(gbroker)
    old = _join(conn, "fence-group", instance_id="i-1")
    assert old.error_code == 0  # static members get their id without MEMBER_ID_REQUIRED
    _sync(conn, "fence-group", old.generation_id, old.member_id, [(old.member_id, b"a")],
          instance_id="i-1")
    new = _join(conn, "fence-group", instance_id="i-1")
    assert new.error_code == 0 and new.member_id != old.member_id
    assert new.generation_id == old.generation_id  # stable group, same protocol: no rebalance
    assert _heartbeat(conn, "fence-group", old.generation_id, old.member_id, "i-1") == \
        FENCED_INSTANCE_ID
    assert _heartbeat(conn, "fence-group", new.generation_id, new.member_id, "i-1") == 0
    synced = _sync(conn, "fence-group", new.generation_id, new.member_id, instance_id="i-1")
    assert synced.assignment == b"a"  # its assignment survived the restart
    conn.close()


def test_offset_apis_for_groups_in_bulk_and_subscribed_topics(gbroker):
    _create(gbroker.bootstrap, "bulk", partitions=2)
    conn = _raw(gbroker)
    commit = request(ApiKey.OFFSET_COMMIT)
    for group, offset in (("bulk-1", 11), ("bulk-2", 22)):
        resp = conn.call(ApiKey.OFFSET_COMMIT, 9, commit.cls(
            group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[commit.make(
                "topics", name="bulk", partitions=[commit.make(
                    "topics", "partitions", partition_index=p, committed_offset=offset + p,
                    committed_metadata="m") for p in range(2)])]))
        assert [p.error_code for p in resp.topics[0].partitions] == [0, 0]
    fetch = request(ApiKey.OFFSET_FETCH)
    resp = conn.call(ApiKey.OFFSET_FETCH, 8, fetch.cls(groups=[
        fetch.make("groups", group_id="bulk-1", topics=None),
        fetch.make("groups", group_id="bulk-2", topics=[fetch.make(
            "groups", "topics", name="bulk", partition_indexes=[1, 5])]),
        fetch.make("groups", group_id="no-such-group", topics=None)]))
    got = {gr.group_id: [(p.partition_index, p.committed_offset, p.metadata)
                         for t in gr.topics for p in t.partitions] for gr in resp.groups}
    assert got == {"bulk-1": [(0, 11, "m"), (1, 12, "m")], "bulk-2": [(1, 23, "m"), (5, -1, "")],
                   "no-such-group": []}
    find = request(ApiKey.FIND_COORDINATOR)
    resp = conn.call(ApiKey.FIND_COORDINATOR, 4, find.cls(key_type=0,
                                                           coordinator_keys=["bulk-1", "bulk-2"]))
    assert [(c.key, c.error_code, c.port) for c in resp.coordinators] == \
        [("bulk-1", 0, gbroker.port), ("bulk-2", 0, gbroker.port)]
    # A stable consumer group subscribed to "bulk": its offsets there cannot be deleted.
    joined = _join(conn, "bulk-1", "", version=4)
    joined = _join(conn, "bulk-1", joined.member_id, version=4, topics=("bulk",))
    _sync(conn, "bulk-1", joined.generation_id, joined.member_id, [(joined.member_id, b"")])
    delete = request(ApiKey.OFFSET_DELETE)
    body = delete.cls(group_id="bulk-1", topics=[delete.make("topics", name="bulk", partitions=[
        delete.make("topics", "partitions", partition_index=0)])])
    resp = conn.call(ApiKey.OFFSET_DELETE, 0, body)
    assert resp.topics[0].partitions[0].error_code == GROUP_SUBSCRIBED_TO_TOPIC
    body.group_id = "bulk-2"
    resp = conn.call(ApiKey.OFFSET_DELETE, 0, body)
    assert (resp.error_code, resp.topics[0].partitions[0].error_code) == (0, 0)
    conn.close()


def test_commit_with_retention_time_expires(make_broker):
    b = make_broker(extra=FAST + ["-o", "offsets.retention.check.interval.ms=200"])
    _create(b.bootstrap, "fleeting", partitions=1)
    conn = _raw(b)
    commit = request(ApiKey.OFFSET_COMMIT)
    body = commit.cls(group_id="fleeting-group", generation_id_or_member_epoch=-1, member_id="",
                      retention_time_ms=300, topics=[commit.make("topics", name="fleeting",
                                                                 partitions=[commit.make(
                                                                     "topics", "partitions",
                                                                     partition_index=0,
                                                                     committed_offset=9)])])
    assert conn.call(ApiKey.OFFSET_COMMIT, 2, body).topics[0].partitions[0].error_code == 0
    fetch = request(ApiKey.OFFSET_FETCH)

    def committed():
        resp = conn.call(ApiKey.OFFSET_FETCH, 5, fetch.cls(group_id="fleeting-group", topics=[
            fetch.make("topics", name="fleeting", partition_indexes=[0])]))
        return resp.topics[0].partitions[0].committed_offset
    assert committed() == 9
    _wait(lambda: committed() == -1, timeout=10, what="offset expiry")
    conn.close()
    b.restart()  # the expiry was written: a tombstone, not just forgotten in memory
    conn = _raw(b)
    assert committed() == -1
    body.retention_time_ms = -1
    assert conn.call(ApiKey.OFFSET_COMMIT, 2, body).topics[0].partitions[0].error_code == 0
    assert committed() == 9
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.delete_topics(["fleeting"])["fleeting"].result(10)
    _wait(lambda: committed() == -1, timeout=10, what="offsets of a deleted topic removed")
    conn.close()


def test_offsets_of_an_empty_group_expire_after_retention_counted_from_empty():
    om = OffsetAndMetadata(5, commit_timestamp=1_000)
    group = Group("g", now_ms=50_000)
    group.protocol_type = "consumer"
    group.offsets = {("t", 0): om}
    assert group.expired_offsets(now_ms=50_000 + 59_999, retention_ms=60_000) == []
    assert group.expired_offsets(now_ms=50_000 + 60_000, retention_ms=60_000) == [("t", 0)]
    simple = Group("s", now_ms=50_000)  # offsets only: counted from each commit
    simple.offsets = {("t", 0): om}
    assert simple.expired_offsets(now_ms=61_000, retention_ms=60_000) == [("t", 0)]


def test_group_partition_is_kafkas_abs_java_hashcode_modulo():
    assert partition_for("ab", 50) == (97 * 31 + 98) % 50
    assert partition_for("polygenelubricants", 50) == 0  # hashCode is Integer.MIN_VALUE
    assert partition_for("\U0001F600", 1 << 30) == (0xD83D * 31 + 0xDE00)  # UTF-16 units
