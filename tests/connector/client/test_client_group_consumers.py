"""Our Consumer in groups on real minilog brokers: with each other and with confluent-kafka
consumers, through rebalances, kills and restarts (the membership itself and interop at the
protocol level are in `test_client_groups.py`, the shared helpers in `grouptools.py`).
"""
import asyncio
import json
import signal
import subprocess
import sys
import threading
import time

import confluent_kafka
import pytest
from clienttools import make_topic, unique
from grouptools import LONG_SESSION_MS, SESSION_MS, Member, members, run, until
from grouptools import _confluent, _Polling, _split
from minilog.connector.client import AdminClient, AsyncConsumer, Consumer, KafkaError
from minilog.connector.client.group_api import OffsetAndMetadata
from minilog.connector.client.types import TopicPartition as TP

pytestmark = pytest.mark.timeout(180)


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
