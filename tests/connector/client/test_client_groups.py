"""Consumer groups on real minilog brokers: our membership alone, with each other, and with
confluent-kafka and kafka-python members in the same group.

The first part drives `GroupMembership` directly with a stand-in owner (the seam the consumer
implements), so the protocol is tested apart from fetching; the consumer-level tests follow.
"""
import asyncio
import contextlib
import json
import signal
import subprocess
import sys
import threading
import time

import confluent_kafka
import kafka
import pytest
from clienttools import make_topic, unique
from minilog.connector.client import AdminClient, AsyncConsumer, Consumer, KafkaError
from minilog.connector.client.cluster import Cluster
from minilog.connector.client.config import Config
from minilog.connector.client.group import GroupMembership
from minilog.connector.client.group_api import OffsetAndMetadata
from minilog.connector.client.types import TopicPartition as TP

pytestmark = pytest.mark.timeout(180)
FAST = ["-o", "group.initial.rebalance.delay.ms=0", "-o", "group.min.session.timeout.ms=1000"]
SESSION_MS = 6000
LONG_SESSION_MS = 120_000  # longer than the waits of a test that must not see it expire


@pytest.fixture(scope="module")
def gbroker():
    from brokers import MinilogBroker
    b = MinilogBroker(extra=FAST).start()
    yield b
    b.cleanup()


class Owner:
    """The consumer's side of the seam, recording what the membership asks of it."""
    group_defer_callbacks = False

    def __init__(self):
        self.assigned, self.positions, self.events = set(), {}, []
        self.group_face = self

    def group_assign(self, tps):
        self.assigned |= set(tps)

    def group_unassign(self, tps):
        self.assigned -= set(tps)

    def group_positions(self, tps):
        return {tp: self.positions.get(tp) for tp in tps}

    def group_notify(self):
        pass


def _config(bootstrap, group, **extra):
    conf = {"bootstrap.servers": bootstrap, "group.id": group,
            "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 500,
            "enable.auto.commit": False, "partition.assignment.strategy": "range"}
    conf.update({k.replace("_", "."): v for k, v in extra.items()})
    return Config("consumer", conf)


class Member:
    """A GroupMembership with its own cluster and a recording owner."""

    def __init__(self, bootstrap, group, topics=None, **extra):
        self.owner = Owner()
        self.cluster = Cluster(_config(bootstrap, group, **extra))
        self.group = GroupMembership(self.owner, self.cluster, self.cluster.config)
        self.topics = topics

    async def start(self):
        await self.cluster.refresh()
        ev = self.owner.events
        if self.topics is not None:
            self.group.subscribe(self.topics,
                                 on_assign=lambda c, tps: ev.append(("assign", tps)),
                                 on_revoke=lambda c, tps: ev.append(("revoke", tps)),
                                 on_lost=lambda c, tps: ev.append(("lost", tps)))
        return self

    async def close(self):
        try:
            await asyncio.wait_for(self.group.close(), 15)
        finally:
            self.cluster.close()


def run(coro, timeout=90):
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def until(predicate, timeout=20.0, what="condition", poll=()):
    """Wait for `predicate`, polling the members in `poll` meanwhile (rebalances need it)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        for m in poll:
            await m.group.serve()
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def members(*ms):
    started = []
    try:
        for m in ms:
            started.append(await m.start())
        yield ms
    finally:
        await asyncio.gather(*(m.close() for m in started), return_exceptions=True)


def _split(ms, n):
    return all(len(m.owner.assigned) == n for m in ms) and \
        len(set().union(*(m.owner.assigned for m in ms))) == n * len(ms)


# ---- the membership on its own ------------------------------------------------------------------
def test_two_members_split_a_topic_and_the_survivor_takes_all_when_one_closes(gbroker):
    topic, group = make_topic(gbroker.bootstrap, 4), unique("g")

    async def scenario():
        # Sessions longer than any wait here: only b's LeaveGroup can hand its partitions on.
        a, b = (Member(gbroker.bootstrap, group, [topic], session_timeout_ms=LONG_SESSION_MS)
                for _ in range(2))
        async with members(a, b):
            await until(lambda: _split([a, b], 2), what="2 + 2", poll=[a, b])
            assert a.group.generation == b.group.generation >= 1
            await b.close()
            await until(lambda: len(a.owner.assigned) == 4, what="survivor owns 4", poll=[a],
                        timeout=LONG_SESSION_MS / 2000)
            assert b.owner.assigned == set()
            # revoked if on_assign told it of them; close may come before b polled for that
            assert [k for k, _ in b.owner.events] in ([], ["assign", "revoke"])
    run(scenario())


def test_commit_and_committed_round_trip_metadata_and_leader_epoch(gbroker):
    topic, group = make_topic(gbroker.bootstrap, 2), unique("g")

    async def scenario():
        m = Member(gbroker.bootstrap, group, [topic])
        async with members(m):
            await until(lambda: len(m.owner.assigned) == 2, poll=[m])
            m.owner.positions = {TP(topic, 0): 5, TP(topic, 1): 9}
            assert await m.group.commit() == {TP(topic, 0): OffsetAndMetadata(5),
                                              TP(topic, 1): OffsetAndMetadata(9)}
            await m.group.commit({TP(topic, 1): OffsetAndMetadata(11, "note", 3)})
            got = await m.group.committed([TP(topic, 0), TP(topic, 1), TP(topic, 7)])
            assert got == {TP(topic, 0): OffsetAndMetadata(5, "", -1),
                           TP(topic, 1): OffsetAndMetadata(11, "note", 3), TP(topic, 7): None}
    run(scenario())


def test_manual_commits_without_membership_need_an_empty_group(gbroker):
    topic, group = make_topic(gbroker.bootstrap, 1), unique("g")

    async def scenario():
        m = Member(gbroker.bootstrap, group)  # not subscribed: commits as generation -1
        async with members(m):
            await m.group.commit({(topic, 0): 42})
            assert (await m.group.committed([(topic, 0)]))[TP(topic, 0)].offset == 42
    run(scenario())


def test_cooperative_member_joining_revokes_only_what_moves(gbroker):
    topic, group = make_topic(gbroker.bootstrap, 4), unique("g")
    coop = {"partition_assignment_strategy": "cooperative-sticky"}

    async def scenario():
        a = Member(gbroker.bootstrap, group, [topic], **coop)
        async with members(a):
            await until(lambda: len(a.owner.assigned) == 4, poll=[a])
            before = set(a.owner.assigned)
            b = Member(gbroker.bootstrap, group, [topic], **coop)
            async with members(b):
                await until(lambda: _split([a, b], 2), what="2 + 2", poll=[a, b])
                revoked = [set(tps) for kind, tps in a.owner.events if kind == "revoke"]
                assert revoked == [before - a.owner.assigned]  # exactly what moved, once
                assert ("lost", ) not in [e[:1] for e in a.owner.events]
    run(scenario())


def test_eager_member_joining_revokes_everything_first(gbroker):
    topic, group = make_topic(gbroker.bootstrap, 4), unique("g")

    async def scenario():
        a = Member(gbroker.bootstrap, group, [topic], partition_assignment_strategy="roundrobin")
        async with members(a):
            await until(lambda: len(a.owner.assigned) == 4, poll=[a])
            b = Member(gbroker.bootstrap, group, [topic],
                       partition_assignment_strategy="roundrobin")
            async with members(b):
                await until(lambda: _split([a, b], 2) and len(a.owner.events) == 3, poll=[a, b])
                kinds = [(k, len(tps)) for k, tps in a.owner.events]
                assert kinds == [("assign", 4), ("revoke", 4), ("assign", 2)]
    run(scenario())


def test_poll_timeout_leaves_the_group_and_next_poll_rejoins_with_partitions_lost(gbroker):
    topic, group = make_topic(gbroker.bootstrap, 2), unique("g")

    async def scenario():
        a = Member(gbroker.bootstrap, group, [topic], max_poll_interval_ms=1500)
        b = Member(gbroker.bootstrap, group, [topic], max_poll_interval_ms=60000)
        async with members(a, b):
            await until(lambda: _split([a, b], 1) and a.owner.events[-1:] and
                        a.owner.events[-1][0] == "assign", poll=[a, b])
            had = sorted(a.owner.assigned)
            await until(lambda: len(b.owner.assigned) == 2, what="b takes over", poll=[b])
            assert a.group._poll_expired and a.owner.events[-1][0] == "assign"  # until a polls
            await until(lambda: _split([a, b], 1), what="a back", poll=[a, b])
            assert ("lost", had) in a.owner.events
    run(scenario())


def test_regex_subscription_picks_up_new_topics(gbroker):
    prefix = unique("rx")
    first = make_topic(gbroker.bootstrap, 1, name=f"{prefix}-a")

    async def scenario():
        m = Member(gbroker.bootstrap, unique("g"), [f"^{prefix}-.*"], metadata_max_age_ms=300)
        async with members(m):
            await until(lambda: m.owner.assigned == {TP(first, 0)}, poll=[m])
            second = make_topic(gbroker.bootstrap, 2, name=f"{prefix}-b")
            await until(lambda: m.owner.assigned == {TP(first, 0), TP(second, 0), TP(second, 1)},
                        what="new topic assigned", poll=[m])
    run(scenario())


def test_partitions_added_trigger_a_rebalance(gbroker):
    topic, group = make_topic(gbroker.bootstrap, 2), unique("g")

    async def scenario():
        m = Member(gbroker.bootstrap, group, [topic], metadata_max_age_ms=300)
        async with members(m):
            await until(lambda: len(m.owner.assigned) == 2, poll=[m])
            from minilog.connector.client import AdminClient
            with AdminClient({"bootstrap.servers": gbroker.bootstrap}) as admin:
                await asyncio.to_thread(admin.create_partitions, topic, 3)
            await until(lambda: len(m.owner.assigned) == 3, what="3 partitions", poll=[m])
    run(scenario())


def test_fenced_static_member_fails_loudly(gbroker):
    topic, group = make_topic(gbroker.bootstrap, 2), unique("g")

    async def scenario():
        a = Member(gbroker.bootstrap, group, [topic], group_instance_id="same")
        async with members(a):
            await until(lambda: len(a.owner.assigned) == 2, poll=[a])
            b = Member(gbroker.bootstrap, group, [topic], group_instance_id="same")
            async with members(b):
                await until(lambda: a.group._fatal is not None, what="a fenced", poll=[b])
                with pytest.raises(KafkaError, match="FENCED_INSTANCE_ID"):
                    await until(lambda: False, timeout=5, poll=[a])
                assert a.owner.events[-1] == ("lost", sorted(a.owner.events[0][1]))
                assert a.owner.assigned == set()
    run(scenario())


# ---- with other clients in the same group ---------------------------------------------------------
def _confluent(bootstrap, group, topic, strategy="range"):
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                  "partition.assignment.strategy": strategy,
                                  "session.timeout.ms": SESSION_MS, "enable.auto.commit": False,
                                  "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    return c


class _Polling:
    """Polls third-party consumers in a thread (their rebalances need poll) and records their
    assignments there: librdkafka's assignment() called from another thread while one polls
    can deadlock on the GIL."""

    def __init__(self, *consumers):
        self.consumers, self.stop = list(consumers), threading.Event()
        self.assigned = {}
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self.stop.is_set():
            for i, c in enumerate(list(self.consumers)):
                if isinstance(c, kafka.KafkaConsumer):
                    c.poll(timeout_ms=100)
                    got = c.assignment()
                else:
                    c.poll(0.1)
                    got = c.assignment()
                self.assigned[i] = {TP(tp.topic, tp.partition) for tp in got}

    def add(self, c):
        self.consumers.append(c)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(10)
        for c in self.consumers:
            c.close()


@pytest.mark.parametrize("we_lead", [True, False])
def test_confluent_members_accept_our_range_assignment_and_we_accept_theirs(gbroker, we_lead):
    topic, group = make_topic(gbroker.bootstrap, 4), unique("g")

    async def scenario():
        ours = Member(gbroker.bootstrap, group, [topic])
        with _Polling() as poller:
            if not we_lead:  # the first member to join leads the group
                poller.add(_confluent(gbroker.bootstrap, group, topic))
                await until(lambda: len(poller.assigned.get(0, ())) == 4, what="confluent alone")
            async with members(ours):
                if we_lead:
                    await until(lambda: len(ours.owner.assigned) == 4, poll=[ours])
                    poller.add(_confluent(gbroker.bootstrap, group, topic))
                await until(lambda: len(ours.owner.assigned) == 2 and
                            len(poller.assigned.get(0, ())) == 2,
                            what="2 + 2", timeout=30, poll=[ours])
                assert ours.owner.assigned.isdisjoint(poller.assigned[0])
                assert (ours.group.leader_id == ours.group.member_id) == we_lead
    run(scenario())


def test_kafka_python_member_shares_a_roundrobin_group_with_ours(gbroker):
    topic, group = make_topic(gbroker.bootstrap, 4), unique("g")

    async def scenario():
        ours = Member(gbroker.bootstrap, group, [topic],
                      partition_assignment_strategy="roundrobin")
        async with members(ours):
            await until(lambda: len(ours.owner.assigned) == 4, poll=[ours])
            kp = kafka.KafkaConsumer(
                topic, bootstrap_servers=gbroker.bootstrap, group_id=group,
                partition_assignment_strategy=[kafka.coordinator.assignors.roundrobin
                                               .RoundRobinPartitionAssignor],
                session_timeout_ms=SESSION_MS, heartbeat_interval_ms=500,
                enable_auto_commit=False)
            with _Polling(kp) as poller:
                await until(lambda: len(ours.owner.assigned) == 2 and
                            len(poller.assigned.get(0, ())) == 2, what="2 + 2", timeout=30,
                            poll=[ours])
                assert ours.owner.assigned.isdisjoint(poller.assigned[0])
    run(scenario())


# ---- the Consumer in groups ------------------------------------------------------------------------
def _produce(bootstrap, topic, n, partitions):
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % partitions)
    assert p.flush(15) == 0


def _consumer(bootstrap, group, **extra):
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 500}
    conf.update({k.replace("_", "."): v for k, v in extra.items()})
    return Consumer(conf)


class Worker:
    """Polls one of our consumers in its own thread, keeping what it got (and commits after
    each batch when `commit`), until stopped."""

    def __init__(self, consumer, topics=None, commit=False, pause=0.0):
        self.c, self.commit, self.pause = consumer, commit, pause
        if topics:
            consumer.subscribe(topics)
        self.records, self.assigned, self.errors = [], set(), []
        self.threads = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            while not self.stop.is_set():
                got = self.c.poll(0.2, max_records=5)
                self.records += [(r.partition, r.offset) for r in got]
                if got and self.commit:
                    self.c.commit()
                self.assigned = set(self.c.assignment())
                time.sleep(self.pause)
        except Exception as e:  # noqa: BLE001 - reported by the test
            self.errors.append(e)

    def close(self):
        self.stop.set()
        self.thread.join(20)
        self.c.close()
        assert not self.errors, self.errors


def _wait(predicate, timeout=30, what="condition"):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_seeds_picture_two_groups_share_nothing_and_each_record_reaches_one_member(gbroker):
    topic, n = make_topic(gbroker.bootstrap, 4), 400
    _produce(gbroker.bootstrap, topic, n, 4)
    ga, gb = unique("A"), unique("B")
    a = [Worker(_consumer(gbroker.bootstrap, ga), [topic]) for _ in range(2)]
    b = [Worker(_consumer(gbroker.bootstrap, gb), [topic]) for _ in range(5)]
    try:
        everything = {(p, o) for p in range(4) for o in range(n // 4)}
        for workers in (a, b):
            _wait(lambda ws=workers: sum(len(w.records) for w in ws) >= n, what="all consumed")
        _wait(lambda: sorted(len(w.assigned) for w in a) == [2, 2] and
              sorted(len(w.assigned) for w in b) == [0, 1, 1, 1, 1], what="2+2 and 1+1+1+1+0")
        time.sleep(1)  # nothing more arrives: exactly once per group
        for workers in (a, b):
            got = [r for w in workers for r in w.records]
            assert sorted(got) == sorted(everything)
            assert set().union(*(w.assigned for w in workers)) == {TP(topic, p) for p in range(4)}
    finally:
        for w in a + b:
            w.close()


VICTIM = """
import json, sys, time
from minilog.connector.client import Consumer
bootstrap, group, topic = sys.argv[1:4]
c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
              "auto.offset.reset": "earliest", "session.timeout.ms": SESSION_MS,
              "heartbeat.interval.ms": 500, "partition.assignment.strategy": "range"})
c.subscribe([topic])
while True:
    recs = c.poll(0.5, max_records=5)
    for r in recs:
        print(json.dumps([r.partition, r.offset]), flush=True)
    if recs:
        c.commit()
    time.sleep(0.2)
""".replace("SESSION_MS", str(SESSION_MS))


def test_killed_member_partitions_move_within_session_timeout_and_only_uncommitted_repeat(
        gbroker, tmp_path):
    topic, n = make_topic(gbroker.bootstrap, 4), 240
    _produce(gbroker.bootstrap, topic, n, 4)
    group = unique("g")
    script = tmp_path / "victim.py"
    script.write_text(VICTIM)
    victim = subprocess.Popen([sys.executable, str(script), gbroker.bootstrap, group, topic],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    victim_records = []
    reader = threading.Thread(target=lambda: victim_records.extend(
        tuple(json.loads(line)) for line in victim.stdout), daemon=True)
    reader.start()
    survivor = None
    try:
        _wait(lambda: len(victim_records) >= 10, what="victim consuming")
        survivor = Worker(_consumer(gbroker.bootstrap, group, enable_auto_commit=False,
                                    partition_assignment_strategy="range"),
                          [topic], commit=True, pause=0.2)
        _wait(lambda: len(survivor.assigned) == 2, what="2 + 2")
        mine = {tp.partition for tp in survivor.assigned}
        count = len(victim_records)
        _wait(lambda: len(victim_records) >= count + 10, what="victim consuming its 2")
        victim.send_signal(signal.SIGKILL)
        victim.wait(10)
        reader.join(10)
        theirs = sorted(set(range(4)) - mine)
        committed = {p: o for p, (o, _) in _committed_and_high(gbroker.bootstrap, group, topic,
                                                              theirs).items()}
        _wait(lambda: len(survivor.assigned) == 4, what="survivor takes over",
              timeout=SESSION_MS / 1000 + 60)
        _wait(lambda: len(set(survivor.records) | set(victim_records)) >= n, what="all processed")
    finally:
        if victim.poll() is None:
            victim.kill()
        if survivor is not None:
            survivor.close()
    assert set(survivor.records) | set(victim_records) == {(p, o) for p in range(4)
                                                           for o in range(n // 4)}  # no loss
    assert len(survivor.records) == len(set(survivor.records))
    repeated = set(survivor.records) & set(victim_records)
    assert repeated == {(p, o) for p, o in victim_records if p in theirs and o >= committed[p]}
    for p in theirs:  # the survivor resumed exactly at the victim's last commit
        assert min(o for q, o in survivor.records if q == p and o >= committed[p]) == committed[p]


def _committed_and_high(bootstrap, group, topic, partitions):
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = [confluent_kafka.TopicPartition(topic, p) for p in partitions]
        return {tp.partition: (tp.offset, c.get_watermark_offsets(
            confluent_kafka.TopicPartition(topic, tp.partition), timeout=10)[1])
            for tp in c.committed(tps, timeout=10)}
    finally:
        c.close()


def test_cooperative_rebalance_keeps_unaffected_partitions_and_calls_back_on_the_poll_thread(
        gbroker):
    topic = make_topic(gbroker.bootstrap, 4)
    _produce(gbroker.bootstrap, topic, 40, 4)
    group, events = unique("g"), []

    def listener(kind):
        return lambda consumer, tps: events.append(
            (kind, sorted(tps), threading.current_thread().name))
    first = _consumer(gbroker.bootstrap, group, partition_assignment_strategy="cooperative-sticky")
    first.subscribe([topic], on_assign=listener("assign"), on_revoke=listener("revoke"))
    w1 = Worker(first)
    w2 = None
    try:
        _wait(lambda: len(w1.assigned) == 4, what="first owns 4")
        w2 = Worker(_consumer(gbroker.bootstrap, group,
                              partition_assignment_strategy="cooperative-sticky"), [topic])
        _wait(lambda: len(w1.assigned) == 2 and len(w2.assigned) == 2, what="2 + 2")
        kept = sorted(w1.assigned)
        revokes = [tps for kind, tps, _ in events if kind == "revoke"]
        assert revokes == [sorted({TP(topic, p) for p in range(4)} - set(kept))]
        assert {name for *_, name in events} == {w1.thread.name}
    finally:
        w1.close()
        if w2 is not None:
            w2.close()


def test_our_consumer_and_confluent_consumers_balance_one_group(gbroker):
    topic, n = make_topic(gbroker.bootstrap, 6), 300
    _produce(gbroker.bootstrap, topic, n, 6)
    group = unique("g")
    ours = Worker(_consumer(gbroker.bootstrap, group, partition_assignment_strategy="range"),
                  [topic])
    theirs = [_confluent(gbroker.bootstrap, group, topic) for _ in range(2)]
    try:
        with _Polling(*theirs) as poller:
            _wait(lambda: len(ours.assigned) == 2 and
                  sorted(len(poller.assigned.get(i, ())) for i in range(2)) == [2, 2],
                  what="2 + 2 + 2")
            owned = [ours.assigned, poller.assigned[0], poller.assigned[1]]
            assert set().union(*owned) == {TP(topic, p) for p in range(6)}
    finally:
        ours.close()


def test_lag_and_committed_follow_consumption(gbroker):
    topic = make_topic(gbroker.bootstrap, 1)
    _produce(gbroker.bootstrap, topic, 50, 1)
    tp = TP(topic, 0)
    with _consumer(gbroker.bootstrap, unique("g"), enable_auto_commit=False) as c:
        c.subscribe([topic])
        got = []
        _wait(lambda: got.extend(c.poll(0.2, max_records=20)) or len(got) >= 20, what="20")
        assert c.lag(tp) == 50 - c.position(tp) and c.watermarks(tp)[1] == 50
        assert c.committed([tp])[tp] is None
        c.commit()
        assert c.committed([tp])[tp].offset == c.position(tp)


def test_close_commits_and_leaves_so_the_next_member_resumes_at_once(gbroker):
    topic = make_topic(gbroker.bootstrap, 2)
    _produce(gbroker.bootstrap, topic, 20, 2)
    group = unique("g")
    with _consumer(gbroker.bootstrap, group, session_timeout_ms=LONG_SESSION_MS) as c:
        c.subscribe([topic])
        got = []
        _wait(lambda: got.extend(c.poll(0.2)) or len(got) >= 20, what="all 20")
    with _consumer(gbroker.bootstrap, group) as c:
        c.subscribe([topic])
        _wait(lambda: len(c.poll(0.2)) == 0 and len(c.assignment()) == 2, what="assigned",
              timeout=LONG_SESSION_MS / 2000)  # the first member's session has not run out
        assert {tp: c.position(tp) for tp in c.assignment()} == {TP(topic, 0): 10,
                                                                  TP(topic, 1): 10}


def test_async_consumer_runs_coroutine_callbacks_in_its_poll_and_reports_async_commits(gbroker):
    topic = make_topic(gbroker.bootstrap, 2)
    _produce(gbroker.bootstrap, topic, 10, 2)
    events, commits = [], []

    async def on_assign(consumer, tps):
        events.append(("assign", tps, await consumer.position(tps[0])))

    async def scenario():
        async with AsyncConsumer({"bootstrap.servers": gbroker.bootstrap, "group.id": unique("g"),
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                  "on_commit": lambda err, offsets: commits.append((err, offsets))
                                  }) as c:
            c.subscribe([topic], on_assign=on_assign)
            got, deadline = [], time.monotonic() + 20
            while len(got) < 10 and time.monotonic() < deadline:
                got += await c.poll(0.2)
            assert len(got) == 10 and events == [("assign", [TP(topic, 0), TP(topic, 1)], 0)]
            assert await c.commit(asynchronous=True) is None
            while not commits and time.monotonic() < deadline:
                await c.poll(0.1)
            # positions carry the leader epoch of the last record read (0 on one broker)
            assert commits == [(None, {TP(topic, 0): OffsetAndMetadata(5, "", 0),
                                       TP(topic, 1): OffsetAndMetadata(5, "", 0)})]
            assert c.lag(TP(topic, 0)) == 0
    run(scenario())


def test_admin_lists_describes_alters_and_deletes_group_offsets(gbroker):
    topic, group = make_topic(gbroker.bootstrap, 2), unique("g")
    with AdminClient({"bootstrap.servers": gbroker.bootstrap}) as admin, \
            _consumer(gbroker.bootstrap, group, client_id="app-1") as c:
        c.subscribe([topic])
        _wait(lambda: c.poll(0.1) is not None and len(c.assignment()) == 2, what="assigned")
        c.commit({TP(topic, 0): OffsetAndMetadata(3, "m")})
        assert any(g.group_id == group and g.state == "Stable" for g in admin.list_groups())
        d = admin.describe_groups([group])[group]
        assert (d.state, d.protocol_type, d.protocol) == ("Stable", "consumer", "range")
        [m] = d.members
        assert (m.member_id, m.client_id, m.topics) == (c.memberid(), "app-1", (topic,))
        assert sorted(m.assignment) == [TP(topic, 0), TP(topic, 1)]
        assert admin.list_group_offsets(group) == {TP(topic, 0): OffsetAndMetadata(3, "m", -1)}
        with pytest.raises(KafkaError, match="active members"):
            admin.alter_group_offsets(group, {TP(topic, 1): 1})
        with pytest.raises(KafkaError, match="NON_EMPTY_GROUP"):
            admin.delete_groups([group])
        c.close()
        admin.alter_group_offsets(group, {TP(topic, 1): 1})
        assert admin.list_group_offsets(group, [TP(topic, 1)]) == {TP(topic, 1): OffsetAndMetadata(1)}
        admin.delete_group_offsets(group, [TP(topic, 0)])
        assert list(admin.list_group_offsets(group)) == [TP(topic, 1)]
        admin.delete_groups([group])
        assert admin.describe_groups([group])[group].state == "Dead"


def test_static_member_coming_back_within_the_session_keeps_its_partitions(gbroker):
    topic, group = make_topic(gbroker.bootstrap, 4), unique("g")

    async def scenario():
        a = Member(gbroker.bootstrap, group, [topic], group_instance_id="a")
        b = Member(gbroker.bootstrap, group, [topic], group_instance_id="b")
        async with members(a, b):
            await until(lambda: _split([a, b], 2), poll=[a, b])
            had, generation = set(b.owner.assigned), b.group.generation
            await b.close()  # static: no LeaveGroup, the group waits for it
            await asyncio.sleep(1)
            assert len(a.owner.assigned) == 2 and a.group.generation == generation
            back = Member(gbroker.bootstrap, group, [topic], group_instance_id="b")
            async with members(back):
                await until(lambda: back.owner.assigned == had, poll=[a, back])
                assert a.group.generation == generation
    run(scenario())


def test_unsubscribe_revokes_in_the_callers_thread_and_leaves(gbroker):
    topic, group = make_topic(gbroker.bootstrap, 2), unique("g")
    revoked = []
    with _consumer(gbroker.bootstrap, group) as c, \
            AdminClient({"bootstrap.servers": gbroker.bootstrap}) as admin:
        c.subscribe([topic], on_revoke=lambda consumer, tps: revoked.append(
            (consumer is c, tps, threading.current_thread() is threading.main_thread())))
        _wait(lambda: c.poll(0.1) is not None and len(c.assignment()) == 2, what="assigned")
        with pytest.raises(ValueError, match="exclusive"):
            c.assign([TP(topic, 0)])
        c.unsubscribe()
        assert revoked == [(True, [TP(topic, 0), TP(topic, 1)], True)] and c.assignment() == []
        assert admin.describe_groups([group])[group].state == "Empty"
        c.assign([TP(topic, 0)])  # a plain consumer again
        assert c.assignment() == [TP(topic, 0)]
