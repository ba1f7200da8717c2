"""KIP-848's consumer group protocol against a real broker, with consumers configured
`group.protocol=consumer`, each test once with confluent-kafka's and once with minilog's:
joining, incremental moves with no partition owned by two members at any moment (sampled with
ConsumerGroupDescribe), commits with member epochs, a member killed with kill -9 fenced after
the session timeout, static members, regex subscriptions, and a classic group beside."""
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from brokers import MinilogBroker
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from consumer_protocol import OwnershipSampler, PollingMember, describe, owned, settled
from minilog.connector.protocol import ApiKey, ErrorCode, request
from waiting import wait_until
from wire import RawConnection

pytestmark = pytest.mark.timeout(300)

SESSION_MS = 4000
PARTITIONS = 12
SETTINGS = {"group.consumer.heartbeat.interval.ms": 250,
            "group.consumer.session.timeout.ms": SESSION_MS,
            "group.initial.rebalance.delay.ms": 0}


@pytest.fixture(scope="module")
def kip848_broker():
    extra = [a for k, v in SETTINGS.items() for a in ("-o", f"{k}={v}")]
    b = MinilogBroker(extra=extra).start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for topic in ("orders", "audit"):
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(60)
    producer = Producer({"bootstrap.servers": b.bootstrap})
    for i in range(PARTITIONS * 10):
        producer.produce("orders", str(i).encode(), partition=i % PARTITIONS)
    producer.flush(60)
    yield b
    b.cleanup()


@pytest.fixture(scope="module", params=["confluent", "minilog"])
def client(request):
    """Which client's consumers the test runs: each test runs with both."""
    return request.param


@pytest.fixture
def conn(kip848_broker):
    c = RawConnection(kip848_broker.bootstrap)
    c.sock.settimeout(60)
    yield c
    c.sock.close()


def _conf(broker, group, **more):
    return {"bootstrap.servers": broker.bootstrap, "group.id": group,
            "group.protocol": "consumer", "auto.offset.reset": "earliest", **more}


def _members(broker, client, group, n, topics=("orders",)):
    return [PollingMember(_conf(broker, group), list(topics), client) for _ in range(n)]


def _close(members):
    for m in members:
        m.close()


def test_a_group_of_three_joins_in_seconds_with_disjoint_even_assignments(kip848_broker, client,
                                                                          conn):
    started = time.monotonic()
    group = f"three-{client}"
    members = _members(kip848_broker, client, group, 3)
    try:
        d = wait_until(lambda: settled(conn, group, 3, PARTITIONS), 60, "three members")
        took = time.monotonic() - started
        parts = list(owned(d).values())
        assert sorted(len(p) for p in parts) == [4, 4, 4]
        assert len(set().union(*parts)) == PARTITIONS
        assert took < 10, f"joining took {took:.1f}s"
        wait_until(lambda: len(set().union(*(m.values for m in members))) == PARTITIONS * 10,
                   60, "every record read")
    finally:
        _close(members)


def test_a_fourth_member_takes_only_its_share_and_no_partition_has_two_owners(kip848_broker, client,
                                                                              conn):
    group = f"grow-{client}"
    members = _members(kip848_broker, client, group, 3)
    try:
        before = owned(wait_until(lambda: settled(conn, group, 3, PARTITIONS), 60, "three"))
        with OwnershipSampler(kip848_broker.bootstrap, group) as sampler:
            members += _members(kip848_broker, client, group, 1)
            after = owned(wait_until(lambda: settled(conn, group, 4, PARTITIONS), 60, "four"))
        moved = sum(len(before[m] - after[m]) for m in before)
        assert moved == PARTITIONS // 4  # the newcomer's share, and nothing else
        assert sorted(len(p) for p in after.values()) == [3, 3, 3, 3]
        assert sampler.samples > 5 and sampler.overlaps == []
    finally:
        _close(members)


def test_a_leaving_member_moves_only_its_partitions_and_none_has_two_owners(kip848_broker, client,
                                                                            conn):
    group = f"shrink-{client}"
    members = _members(kip848_broker, client, group, 4)
    try:
        before = owned(wait_until(lambda: settled(conn, group, 4, PARTITIONS), 60, "four"))
        leaving = members.pop()
        with OwnershipSampler(kip848_broker.bootstrap, group) as sampler:
            leaving.close()
            after = owned(wait_until(lambda: settled(conn, group, 3, PARTITIONS), 60, "three"))
        for member, parts in after.items():
            assert before[member] <= parts  # the stayers keep all they had
        assert sampler.samples > 5 and sampler.overlaps == []
    finally:
        _close(members)


def test_commits_carry_the_member_epoch_and_are_read_back(kip848_broker, client, conn):
    group = f"commits-{client}"
    member = PollingMember(_conf(kip848_broker, group, **{"enable.auto.commit": False}),
                           ["orders"], client)
    try:
        wait_until(lambda: member.records == PARTITIONS * 10, 60, "every record read")
        member.stop_polling()
        member.commit_read()
        committed = member.committed([("orders", p) for p in range(PARTITIONS)])
        assert sorted(committed.values()) == [10] * PARTITIONS
        d = describe(conn, group)
        epoch, member_id = d.members[0].member_epoch, d.members[0].member_id
        assert _raw_commit(conn, group, member_id, epoch, 4) == 0
        assert _raw_commit(conn, group, member_id, epoch - 1, 4) == ErrorCode.STALE_MEMBER_EPOCH
        assert _raw_commit(conn, group, "nobody", epoch, 4) == ErrorCode.UNKNOWN_MEMBER_ID
        assert _raw_fetch(conn, group, member_id, epoch - 1) == ErrorCode.STALE_MEMBER_EPOCH
    finally:
        member.close()


def _raw_commit(conn, group, member_id, epoch, offset):
    req = request(ApiKey.OFFSET_COMMIT)
    body = req.cls(group_id=group, generation_id_or_member_epoch=epoch, member_id=member_id,
                   group_instance_id=None, topics=[req.make("topics", name="orders", partitions=[
                       req.make("topics", "partitions", partition_index=0, committed_offset=offset,
                                committed_leader_epoch=-1, committed_metadata="")])])
    return conn.call(ApiKey.OFFSET_COMMIT, 9, body).topics[0].partitions[0].error_code


def _raw_fetch(conn, group, member_id, epoch):
    req = request(ApiKey.OFFSET_FETCH)
    body = req.cls(groups=[req.make("groups", group_id=group, member_id=member_id,
                                    member_epoch=epoch, topics=None)], require_stable=False)
    return conn.call(ApiKey.OFFSET_FETCH, 9, body).groups[0].error_code


_MEMBER_PROCESS = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[4])
    from consumer_protocol import make_consumer
    c = make_consumer(sys.argv[3], {"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                                    "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    c.subscribe(["orders"])
    while True:
        c.poll(0.05)
""")


def test_a_member_killed_with_kill_9_is_fenced_after_the_session_timeout(kip848_broker, client,
                                                                         conn):
    group = f"fenced-{client}"
    members = _members(kip848_broker, client, group, 2)
    proc = subprocess.Popen([sys.executable, "-c", _MEMBER_PROCESS, kip848_broker.bootstrap,
                             group, client, str(Path(__file__).parent.parent)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        before = owned(wait_until(lambda: settled(conn, group, 3, PARTITIONS), 60, "three"))
        with OwnershipSampler(kip848_broker.bootstrap, group) as sampler:
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
            killed_at = time.monotonic()
            after = owned(wait_until(lambda: settled(conn, group, 2, PARTITIONS), 60, "two"))
            fenced_after = time.monotonic() - killed_at
        victim, = set(before) - set(after)
        for member, parts in after.items():
            assert before[member] <= parts
        assert before[victim] <= set().union(*after.values())
        assert fenced_after >= SESSION_MS / 1000 * 0.8, f"fenced after {fenced_after:.1f}s"
        assert sampler.overlaps == []
    finally:
        if proc.poll() is None:
            proc.kill()
        _close(members)


def test_a_classic_group_and_a_consumer_group_live_side_by_side(kip848_broker, client, conn):
    classic = PollingMember({**_conf(kip848_broker, f"side-classic-{client}"),
                             "group.protocol": "classic"}, ["orders"], client)
    modern = _members(kip848_broker, client, f"side-consumer-{client}", 1)
    try:
        wait_until(lambda: settled(conn, f"side-consumer-{client}", 1, PARTITIONS), 60,
                   "the consumer group")
        wait_until(lambda: classic.records == PARTITIONS * 10, 60, "the classic group reading")
        wait_until(lambda: modern[0].records == PARTITIONS * 10, 60, "the consumer group reading")
        listed = _list_groups(conn)
        assert listed[f"side-classic-{client}"] == ("classic", "consumer", "Stable")
        assert listed[f"side-consumer-{client}"] == ("consumer", "consumer", "Stable")
        assert _list_groups(conn, types=["consumer"]).keys() >= {f"side-consumer-{client}"}
        assert f"side-classic-{client}" not in _list_groups(conn, types=["consumer"])
        assert describe(conn, f"side-classic-{client}").error_code == ErrorCode.GROUP_ID_NOT_FOUND
    finally:
        classic.close()
        _close(modern)


def test_a_classic_join_without_a_consumer_subscription_is_refused_by_a_consumer_group(
        kip848_broker, client, conn):
    """Classic members may join a live consumer group (tests/broker/test_group_migration.py),
    but only with Kafka's embedded consumer protocol, as Kafka 4 answers."""
    modern = _members(kip848_broker, client, f"mixed-{client}", 1)
    try:
        wait_until(lambda: settled(conn, f"mixed-{client}", 1, PARTITIONS), 60,
                   "the consumer group")
        join = request(ApiKey.JOIN_GROUP)
        answer = conn.call(ApiKey.JOIN_GROUP, 5, join.cls(
            group_id=f"mixed-{client}", session_timeout_ms=10000, rebalance_timeout_ms=10000,
            member_id="", group_instance_id=None, protocol_type="consumer",
            protocols=[join.make("protocols", name="range", metadata=b"")]))
        assert answer.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        assert len(describe(conn, f"mixed-{client}").members) == 1
    finally:
        _close(modern)


def _list_groups(conn, types=()):
    req = request(ApiKey.LIST_GROUPS)
    resp = conn.call(ApiKey.LIST_GROUPS, 5, req.cls(states_filter=[], types_filter=list(types)))
    return {g.group_id: (g.group_type, g.protocol_type, g.group_state) for g in resp.groups}


def test_a_static_member_back_under_its_instance_id_gets_its_partitions_again(kip848_broker, client,
                                                                              conn):
    group = f"static-{client}"
    conf = _conf(kip848_broker, group, **{"group.instance.id": "s1"})
    static = PollingMember(conf, ["orders"], client)
    other = _members(kip848_broker, client, group, 1)
    try:
        before = owned(wait_until(lambda: settled(conn, group, 2, PARTITIONS), 60, "two"))
        static.close()  # a static member leaves with epoch -2 and keeps its place
        d = wait_until(lambda: (lambda d: d if any(m.member_epoch == -2 for m in d.members)
                                else None)(describe(conn, group)), 60, "the static leave")
        assert owned(d) == before  # nobody took its partitions
        static = PollingMember(conf, ["orders"], client)
        after = owned(wait_until(lambda: settled(conn, group, 2, PARTITIONS), 60, "back"))
        assert set(map(frozenset, after.values())) == set(map(frozenset, before.values()))
    finally:
        static.close()
        _close(other)


def test_a_regex_subscription_takes_new_matching_topics_and_new_partitions(kip848_broker, client,
                                                                           conn):
    group, one, two = f"regex-{client}", f"rx{client}-one", f"rx{client}-two"
    admin = AdminClient({"bootstrap.servers": kip848_broker.bootstrap})
    admin.create_topics([NewTopic(one, 2, 1)])[one].result(60)
    member = PollingMember(_conf(kip848_broker, group), [f"^rx{client}-.*"], client)
    try:
        d = wait_until(lambda: settled(conn, group, 1, 2), 60, f"{one} assigned")
        # each client sends its patterns as librdkafka joins them: (p1)|(p2)...
        assert d.members[0].subscribed_topic_regex == f"(^rx{client}-.*)"
        admin.create_topics([NewTopic(two, 3, 1), NewTopic(f"other-rx{client}", 1, 1)])
        d = wait_until(lambda: settled(conn, group, 1, 5), 60, f"{two} assigned too")
        assert {t for t, _ in owned(d)[d.members[0].member_id]} == {one, two}
        admin.create_partitions([NewPartitions(one, 4)])[one].result(60)
        wait_until(lambda: settled(conn, group, 1, 7), 60, f"{one}'s new partitions")
    finally:
        member.close()


def _heartbeat(conn, group, member_id, epoch, owned=None, join=False, rebalance_ms=1000,
               topics=None):
    """One raw ConsumerGroupHeartbeat v1 (a member that does as the test says); a join
    subscribes to `topics` (default orders), any other heartbeat only if `topics` is given."""
    hb = request(ApiKey.CONSUMER_GROUP_HEARTBEAT)
    tps = None if owned is None else [hb.make("topic_partitions", topic_id=t, partitions=sorted(ps))
                                      for t, ps in owned.items()]
    if topics is None and join:
        topics = ["orders"]
    return conn.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, hb.cls(
        group_id=group, member_id=member_id, member_epoch=epoch,
        rebalance_timeout_ms=rebalance_ms if join else -1,
        subscribed_topic_names=topics, topic_partitions=tps))


def _parts(answer):
    return {tp.topic_id: set(tp.partitions) for tp in answer.assignment.topic_partitions}


def test_a_member_that_does_not_revoke_within_its_rebalance_timeout_is_fenced(kip848_broker,
                                                                             conn):
    group = "stubborn"  # raw heartbeats: the broker's side, no client
    first = _heartbeat(conn, group, "stubborn-a", 0, owned={}, join=True)
    owned = _parts(first)
    assert first.error_code == 0 and sum(map(len, owned.values())) == PARTITIONS
    a_epoch = first.member_epoch
    second = _heartbeat(conn, group, "stubborn-b", 0, owned={}, join=True, rebalance_ms=60000)
    asked = _heartbeat(conn, group, "stubborn-a", a_epoch, owned=owned)  # told to give half up
    assert sum(map(len, _parts(asked).values())) == PARTITIONS // 2
    started = time.monotonic()
    b_epoch, got = second.member_epoch, {}
    while not got:  # "a" keeps reporting everything: "b" waits, until "a" is fenced
        a = _heartbeat(conn, group, "stubborn-a", a_epoch, owned=owned)
        b = _heartbeat(conn, group, "stubborn-b", b_epoch, owned={})
        b_epoch = b.member_epoch
        got = _parts(b) if b.assignment is not None else {}
        assert time.monotonic() - started < 30, "never fenced"
        time.sleep(0.1)
    assert time.monotonic() - started >= 0.8  # its rebalance timeout: 1 s
    assert sum(map(len, got.values())) == PARTITIONS  # "a" is gone: all of them
    assert a.error_code in (0, ErrorCode.UNKNOWN_MEMBER_ID)
    assert _heartbeat(conn, group, "stubborn-a", a_epoch, owned=owned).error_code == \
        ErrorCode.UNKNOWN_MEMBER_ID


def test_subscribe_unsubscribe_subscribe_at_once_is_answered_as_by_kafka_4(kip848_broker, conn):
    """librdkafka's order when an application calls subscribe(), unsubscribe() and subscribe()
    in a row (its test 0045 subscribe_many_updates): the new subscription while owning the old
    one's partitions, the leave before having revoked them, then a join under the same member
    id. Kafka 4's answers: revoke first at the same epoch (UNREVOKED_PARTITIONS), a leave
    answered with the member id and epoch -1 only (consumerGroupLeave), a fresh join."""
    group, member = "resubscriber", "resubscriber-a"  # raw heartbeats: the broker's side
    joined = _heartbeat(conn, group, member, 0, owned={}, join=True)
    orders = _parts(joined)
    assert joined.error_code == 0 and sum(map(len, orders.values())) == PARTITIONS
    moved = _heartbeat(conn, group, member, joined.member_epoch, owned=orders, topics=["audit"])
    assert (moved.error_code, moved.member_epoch) == (0, joined.member_epoch)
    assert _parts(moved) == {}  # orders is to be revoked first; audit comes after
    left = _heartbeat(conn, group, member, -1)
    assert (left.error_code, left.member_id, left.member_epoch, left.heartbeat_interval_ms,
            left.assignment) == (0, member, -1, 0, None)
    back = _heartbeat(conn, group, member, 0, owned={}, join=True, topics=["audit"])
    assert back.error_code == 0 and back.member_epoch > joined.member_epoch
    assert sum(map(len, _parts(back).values())) == PARTITIONS
    assert not set(_parts(back)) & set(orders)  # audit's partitions, none of orders'


def test_a_broker_with_only_the_classic_protocol_does_not_offer_kip848(make_broker):
    b = make_broker(extra=["-o", "group.coordinator.rebalance.protocols=classic"])
    conn = RawConnection(b.bootstrap)
    try:
        resp = conn.call(ApiKey.API_VERSIONS, 3, request(ApiKey.API_VERSIONS).cls(
            client_software_name="t", client_software_version="1"))
    finally:
        conn.sock.close()
    offered = {k.api_key for k in resp.api_keys}
    assert ApiKey.JOIN_GROUP in offered
    assert not offered & {ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE}
