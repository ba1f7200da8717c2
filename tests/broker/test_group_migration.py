"""KIP-848's online migration against a real broker: classic and consumer-protocol members in
one live group (`group.consumer.migration.policy`), with confluent-kafka's and minilog's
consumers of both protocols. A rolling upgrade of a live classic group (eager and cooperative
classic members) with no partition owned twice (sampled with ConsumerGroupDescribe) and no
record lost, the downgrade when the last consumer-protocol member leaves, a classic member
joining a live consumer group, a classic member's commits at its generation and its sync
timeout, `disabled` keeping today's refusals, and a mixed group surviving kill -9 of its
broker."""
import pytest
from brokers import MinilogBroker
from clitools import ok, one_line_error, run
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from consumer_protocol import OwnershipSampler, PollingMember, owned
from minilog.connector.client.assignors import Subscription, encode_subscription
from minilog.connector.protocol import ApiKey, ErrorCode, request
from waiting import wait_until
from wire import RawConnection

pytestmark = pytest.mark.timeout(300)

PARTITIONS = 6
SETTINGS = {"group.consumer.heartbeat.interval.ms": 250,
            "group.consumer.session.timeout.ms": 20000,
            "group.initial.rebalance.delay.ms": 0}
CLASSIC, CONSUMER = 0, 1   # ConsumerGroupDescribe v1's MemberType
_DESCRIBE = request(ApiKey.CONSUMER_GROUP_DESCRIBE)


def _extra(**more):
    return [a for k, v in {**SETTINGS, **more}.items() for a in ("-o", f"{k}={v}")]


def _connect(bootstrap):
    c = RawConnection(bootstrap)
    c.sock.settimeout(60)
    return c


@pytest.fixture(scope="module")
def broker():
    b = MinilogBroker(extra=_extra()).start()
    yield b
    b.cleanup()


@pytest.fixture
def conn(broker):
    c = _connect(broker.bootstrap)
    yield c
    c.sock.close()


class Topic:
    """A topic of PARTITIONS partitions with records produced in numbered rounds."""

    def __init__(self, broker, name):
        self.name, self.bootstrap = name, broker.bootstrap
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(60)
        self.producer = Producer({"bootstrap.servers": broker.bootstrap})
        self.values: set[bytes] = set()
        self.ends = [0] * PARTITIONS

    def produce(self, round_name, count=60):
        for i in range(count):
            value = f"{round_name}-{i}".encode()
            self.producer.produce(self.name, value, partition=i % PARTITIONS)
            self.values.add(value)
            self.ends[i % PARTITIONS] += 1
        self.producer.flush(60)


def _member(broker, group, topic, protocol, client="confluent", strategy="range,roundrobin"):
    conf = {"bootstrap.servers": broker.bootstrap, "group.id": group,
            "group.protocol": protocol, "auto.offset.reset": "earliest",
            "auto.commit.interval.ms": 200}
    if protocol == "classic":
        conf.update({"session.timeout.ms": 20000, "heartbeat.interval.ms": 300,
                     "partition.assignment.strategy": strategy})
    return PollingMember(conf, [topic.name], client)


def _describe(conn, group):
    """ConsumerGroupDescribe v1 (with each member's type) of one group."""
    return conn.call(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, _DESCRIBE.cls(
        group_ids=[group], include_authorized_operations=False)).groups[0]


def _settled(conn, group, types):
    """The description once the consumer group is Stable with members of exactly `types`
    (sorted MemberTypes) owning every partition between them, else None."""
    d = _describe(conn, group)
    if d.error_code or d.group_state != "Stable" or \
            sorted(m.member_type for m in d.members) != sorted(types):
        return None
    return d if sum(len(ps) for ps in owned(d).values()) == PARTITIONS else None


def _all_read(topic, members):
    return topic.values <= set().union(*(m.values for m in members))


def _group_type(conn, group):
    req = request(ApiKey.LIST_GROUPS)
    resp = conn.call(ApiKey.LIST_GROUPS, 5, req.cls(states_filter=[], types_filter=[]))
    return next(((g.group_type, g.group_state) for g in resp.groups if g.group_id == group), None)


def _committed(broker, group, topic):
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    tps = [TopicPartition(topic.name, p) for p in range(PARTITIONS)]
    got = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, tps)])
    return [tp.offset for tp in sorted(got[group].result(60).topic_partitions,
                                       key=lambda tp: tp.partition)]


def _close(members):
    for m in members:
        m.close()


@pytest.mark.parametrize("client,strategy", [("confluent", "range,roundrobin"),
                                             ("confluent", "cooperative-sticky"),
                                             ("minilog", "cooperative-sticky")])
def test_a_rolling_upgrade_keeps_classic_members_and_loses_no_record(broker, conn, client,
                                                                     strategy):
    """Eager classic members give up everything when they rejoin; cooperative ones report
    what they own in their subscription and keep it."""
    name = f"rolling-{client}-{strategy[:4]}"
    topic, group = Topic(broker, name), name
    topic.produce("classic")
    members = [_member(broker, group, topic, "classic", client, strategy) for _ in range(2)]
    try:
        wait_until(lambda: _all_read(topic, members), 60, "two classic members reading")
        with OwnershipSampler(broker.bootstrap, group) as sampler:
            members.append(_member(broker, group, topic, "consumer", client))
            d = wait_until(lambda: _settled(conn, group, [CLASSIC, CLASSIC, CONSUMER]), 90,
                           "the group converted with its two classic members kept")
            assert all(owned(d).values())  # all three hold partitions
            topic.produce("mixed")
            wait_until(lambda: _all_read(topic, members), 60, "the mixed group reading")
            wait_until(lambda: _committed(broker, group, topic) == topic.ends, 60,
                       "the mixed group's commits")
            closed = []
            for kind in range(2):  # replace the classic members one by one
                closed.append(members.pop(0))
                closed[-1].close()
                members.append(_member(broker, group, topic, "consumer", client))
                wait_until(lambda: _settled(conn, group, [CLASSIC] * (1 - kind) +
                                            [CONSUMER] * (2 + kind)), 90, f"replacement {kind}")
                topic.produce(f"rolled-{kind}")
                wait_until(lambda: _all_read(topic, members + closed), 60, "records after it")
        assert sampler.samples > 10 and sampler.overlaps == []
        assert _group_type(conn, group) == ("consumer", "Stable")
    finally:
        _close(members)
    assert _committed(broker, group, topic) == topic.ends  # commits went on to the end


def test_the_last_consumer_protocol_member_leaving_makes_the_group_classic(broker, conn):
    topic, group = Topic(broker, "downgrade"), "downgrade"
    topic.produce("before")
    classic = _member(broker, group, topic, "classic")
    wait_until(lambda: _all_read(topic, [classic]), 60, "the classic member reading")
    modern = _member(broker, group, topic, "consumer")
    try:
        wait_until(lambda: _settled(conn, group, [CLASSIC, CONSUMER]), 90, "the upgrade")
        modern.close()
        wait_until(lambda: _group_type(conn, group) == ("classic", "Stable"), 60,
                   "the group classic and stable again")
        assert _describe(conn, group).error_code == ErrorCode.GROUP_ID_NOT_FOUND
        classic.values.clear()
        topic.produce("after")
        wait_until(lambda: {v for v in topic.values if v.startswith(b"after")} <= classic.values,
                   60, "the classic member reading every partition")
    finally:
        _close([classic, modern])
    assert _committed(broker, group, topic) == topic.ends


@pytest.mark.parametrize("client", ["confluent", "minilog"])
def test_a_classic_member_joins_a_live_consumer_group(broker, conn, client):
    topic, group = Topic(broker, f"joined-{client}"), f"classic-joins-{client}"
    topic.produce("first")
    members = [_member(broker, group, topic, "consumer", client)]
    try:
        wait_until(lambda: _settled(conn, group, [CONSUMER]), 60, "the consumer group")
        with OwnershipSampler(broker.bootstrap, group) as sampler:
            members.append(_member(broker, group, topic, "classic", client))
            d = wait_until(lambda: _settled(conn, group, [CLASSIC, CONSUMER]), 90,
                           "the classic member in the consumer group")
        assert sorted(len(ps) for ps in owned(d).values()) == [3, 3]
        assert sampler.overlaps == []
        out = ok("groups", "describe", group, "-b", broker.bootstrap).splitlines()
        header = next(i for i, line in enumerate(out) if line.startswith("MEMBER-ID"))
        shown = dict(line.split()[:2] for line in out[header + 1:header + 3])
        assert shown == {m.member_id: ("classic", "consumer")[m.member_type] for m in d.members}
        topic.produce("second")
        wait_until(lambda: _all_read(topic, members), 60, "both members reading")
        wait_until(lambda: _committed(broker, group, topic) == topic.ends, 60, "their commits")
    finally:
        _close(members)


def test_a_classic_member_of_a_consumer_group_commits_at_its_generation(broker, conn):
    """OffsetCommit v8 (before member epochs) from a classic member: its generation is its
    member epoch, as Kafka checks it."""
    topic, group = Topic(broker, "commits"), "classic-commits"
    assert _consumer_join(conn, group, topic.name).error_code == 0
    joined = _classic_join(conn, group, topic.name)
    assert joined.error_code == 0 and joined.leader == ""
    commit = request(ApiKey.OFFSET_COMMIT)

    def commit_at(generation):
        answer = conn.call(ApiKey.OFFSET_COMMIT, 8, commit.cls(
            group_id=group, generation_id_or_member_epoch=generation,
            member_id=joined.member_id, group_instance_id=None, topics=[commit.make(
                "topics", name=topic.name, partitions=[commit.make(
                    "topics", "partitions", partition_index=0, committed_offset=5,
                    committed_leader_epoch=-1, committed_metadata="")])]))
        return answer.topics[0].partitions[0].error_code
    assert commit_at(joined.generation_id) == 0
    assert commit_at(joined.generation_id + 1) == ErrorCode.ILLEGAL_GENERATION


def test_a_classic_member_that_never_syncs_is_removed_though_it_heartbeats(broker, conn):
    """Kafka's sync timeout: heartbeats alone do not keep a classic member that never took
    its assignment (it may hold partitions others wait for)."""
    topic, group = Topic(broker, "unsynced"), "unsynced"
    assert _consumer_join(conn, group, topic.name).error_code == 0
    joined = _classic_join(conn, group, topic.name, rebalance_timeout_ms=1000)
    assert joined.error_code == 0
    hb = request(ApiKey.HEARTBEAT)

    def removed():
        answer = conn.call(ApiKey.HEARTBEAT, 3, hb.cls(
            group_id=group, generation_id=joined.generation_id, member_id=joined.member_id,
            group_instance_id=None))
        return answer.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    wait_until(removed, 60, "the unsynced member removed", interval=0.2)
    assert [m.member_type for m in _describe(conn, group).members] == [CONSUMER]


def _classic_join(conn, group, topic="orders", rebalance_timeout_ms=10000):
    """A JoinGroup v5 (again with the member id it hands out, MEMBER_ID_REQUIRED)."""
    join = request(ApiKey.JOIN_GROUP)
    metadata = encode_subscription(Subscription((topic,)), 0)
    member_id = ""
    for _ in range(2):
        answer = conn.call(ApiKey.JOIN_GROUP, 5, join.cls(
            group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=rebalance_timeout_ms,
            member_id=member_id, group_instance_id=None, protocol_type="consumer",
            protocols=[join.make("protocols", name="range", metadata=metadata)]))
        if answer.error_code != ErrorCode.MEMBER_ID_REQUIRED:
            break
        member_id = answer.member_id
    return answer


def _consumer_join(conn, group, topic="orders"):
    hb = request(ApiKey.CONSUMER_GROUP_HEARTBEAT)
    return conn.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, hb.cls(
        group_id=group, member_id="", member_epoch=0, rebalance_timeout_ms=10000,
        subscribed_topic_names=[topic], topic_partitions=[]))


def test_the_disabled_policy_keeps_live_groups_to_one_protocol(make_broker):
    b = make_broker(extra=_extra(**{"group.consumer.migration.policy": "disabled"}))
    conn = _connect(b.bootstrap)
    try:
        assert _classic_join(conn, "classic").error_code == 0  # a live classic group
        assert _consumer_join(conn, "classic").error_code == ErrorCode.GROUP_ID_NOT_FOUND
        assert _consumer_join(conn, "modern").error_code == 0  # a live consumer group
        assert _classic_join(conn, "modern").error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    finally:
        conn.sock.close()


def test_an_unknown_migration_policy_stops_the_broker_with_one_line(tmp_path):
    r = run("broker", "start", "--data-dir", tmp_path, "--listen", "127.0.0.1:0",
            "-o", "group.consumer.migration.policy=sideways")
    assert "must be one of bidirectional, upgrade, downgrade, disabled" in one_line_error(r, 2)


def test_a_mixed_group_survives_kill_9_of_its_broker(make_broker):
    b = make_broker(extra=_extra())
    topic, group = Topic(b, "restart"), "restarted"
    topic.produce("before")
    members = [_member(b, group, topic, "classic")]
    conn = _connect(b.bootstrap)
    try:
        wait_until(lambda: _all_read(topic, members), 60, "the classic member reading")
        members.append(_member(b, group, topic, "consumer"))
        before = wait_until(lambda: _settled(conn, group, [CLASSIC, CONSUMER]), 90, "mixed")
        wait_until(lambda: _committed(b, group, topic) == topic.ends, 60, "offsets committed")
        conn.sock.close()
        b.kill()
        b.start()
        conn = _connect(b.bootstrap)
        after = _describe(conn, group)  # as loaded, before any member heartbeats again
        assert {(m.member_id, m.member_type) for m in after.members} == \
            {(m.member_id, m.member_type) for m in before.members}
        assert owned(after) == owned(before)
        assert _committed(b, group, topic) == topic.ends
        topic.producer = Producer({"bootstrap.servers": b.bootstrap})
        topic.produce("after")
        wait_until(lambda: _all_read(topic, members), 90, "both members reading after restart")
        settled = wait_until(lambda: _settled(conn, group, [CLASSIC, CONSUMER]), 60, "settled")
        assert {m.member_id for m in settled.members} == {m.member_id for m in before.members}
    finally:
        conn.sock.close()
        _close(members)
