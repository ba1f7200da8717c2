"""Metadata and membership churn on a three-broker cluster, seeded like the nemesis
(tests/nemesis.py) but with no crash: graceful (SIGTERM) restarts of partition leaders, the group
coordinator and the active controller, rolling restarts of all three, side topics created,
grown (CreatePartitions) and deleted, and consumer group members joining and leaving, classic
and KIP-848 (`group.protocol=consumer`) in one group (KIP-848's online migration upgrades and
downgrades it as they come and go), while idempotent acks=all producers write unique values
and every member reads and commits what it is assigned. Once the schedule has run and the
cluster settled:
- every acknowledged value is stored exactly once, at the offset it was acknowledged at, each
  producer's values in a partition in the order it sent them, and the replicas agree;
- the group read every acknowledged value at least once, no commit the coordinator
  acknowledged was lower than one acknowledged before it, nor any offset read back
  (OffsetFetch);
- every broker answers the same topics and the same leaders, replicas and ISR for each.

ElectLeaders and AlterPartitionReassignments are not in the schedule: the broker does not
implement them (ApiVersions does not list them).

Rerun a failure with the seed it prints: `CHURN_SEED=<seed> python -m pytest -n 0
tests/cluster/test_churn.py`.
"""
from __future__ import annotations

import random
import re
import threading
import time
from dataclasses import dataclass

import pytest
from confluent_kafka import Consumer, KafkaException
from confluent_kafka import TopicPartition as CTP
from confluent_kafka.admin import NewPartitions
from minilog.broker.coordinator.coordinator_topic import partition_for
from minilog.connector.protocol import ApiKey, request
from nemesis import (
    GroupLedger,
    Writer,
    assert_held,
    check,
    read_cluster,
    seeds,
    stored_history,
)
from wire import RawConnection

from clustertools import FAST, active_controller, wait_for

TOPIC, GROUP, PARTITIONS, WRITERS = "churn", "churn-group", 3, 2
OFFSETS = "__consumer_offsets"
SHORT_SECONDS = 18.0  # of nominal churn per seed; two seeds make about 35 s in the suite
RESTART, ROLLING, CREATE, GROW, DELETE, JOIN, LEAVE = (
    "restart", "rolling-restart", "create-topic", "add-partitions", "delete-topic", "join",
    "leave")
COST = {RESTART: 4.0, ROLLING: 12.0}  # nominal seconds a restart takes, for the schedule


# -- the schedule ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Change:
    """One change: `kind` aimed at `target` (a role for a restart, a side topic's number, a
    member's protocol), then `gap` seconds before the next."""

    kind: str
    target: str
    gap: float

    def __str__(self) -> str:
        return f"{self.kind} {self.target}, then {self.gap:.1f}s"


def churn_schedule(seed: int, seconds: float) -> list[Change]:
    """The changes for `seconds` of churn (by nominal lengths), drawn from `seed` alone; each
    drawn among those that change something then (a side topic is grown or deleted once it
    exists, a member leaves once one has joined)."""
    rng = random.Random(seed)
    changes: list[Change] = []
    sides: list[str] = []
    members, created, total = 0, 0, 0.0
    while total < seconds:
        weights = {RESTART: 3, ROLLING: 1, CREATE: 3 if len(sides) < 3 else 0,
                   GROW: 2 if sides else 0, DELETE: 2 if sides else 0,
                   JOIN: 3 if members < 3 else 0, LEAVE: 3 if members else 0}
        kind = rng.choices(list(weights), weights=list(weights.values()))[0]
        if kind == RESTART:
            target = rng.choice(("controller", "coordinator", "leader"))
        elif kind == ROLLING:
            target = "of all three"
        elif kind == CREATE:
            created += 1
            target = f"side-{created}"
            sides.append(target)
        elif kind in (GROW, DELETE):
            target = rng.choice(sides)
            if kind == DELETE:
                sides.remove(target)
        elif kind == JOIN:
            members += 1
            target = rng.choice(("classic", "consumer"))
        else:
            members -= 1
            target = "a member"
        changes.append(Change(kind, target, round(rng.uniform(0.3, 2.0), 1)))
        total += COST.get(kind, 0.5) + changes[-1].gap
    return changes


# -- the group ------------------------------------------------------------------------------

class Member:
    """A group member (confluent-kafka, `protocol` "classic" or "consumer") reading from a
    thread and committing synchronously what it holds: every 0.5 s, and its revoked partitions
    as they are revoked (a member commits only partitions it is assigned, as Kafka's consumer
    does; a position kept past a revocation would overwrite its successor's commits)."""

    def __init__(self, bootstrap: str, name: str, protocol: str, ledger: GroupLedger):
        conf = {"bootstrap.servers": bootstrap, "group.id": GROUP, "group.protocol": protocol,
                "enable.auto.commit": False, "auto.offset.reset": "earliest"}
        if protocol == "classic":
            conf |= {"session.timeout.ms": 10000, "heartbeat.interval.ms": 1000}
        self.name, self.ledger = f"{name} ({protocol})", ledger
        self._positions: dict[int, int] = {}
        self._consumer = Consumer(conf)
        self._consumer.subscribe([TOPIC], on_revoke=self._revoked, on_lost=self._lost)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        last_commit = time.monotonic()
        while not self._stop.is_set():
            for m in self._consumer.consume(100, 0.2):
                if not m.error():
                    self.ledger.read(m.partition(), m.offset(), m.value())
                    self._positions[m.partition()] = m.offset() + 1
            if time.monotonic() - last_commit > 0.5:
                last_commit = time.monotonic()
                self._commit(self._positions)
        self._consumer.close()  # revokes what it holds: _revoked commits it

    def _commit(self, positions: dict[int, int]) -> None:
        if not positions:
            return
        try:
            answered = self._consumer.commit(
                offsets=[CTP(TOPIC, p, o) for p, o in sorted(positions.items())],
                asynchronous=False)
        except KafkaException:
            return  # not acknowledged: nothing promised
        self.ledger.committed(self.name, answered or [])

    def _revoked(self, consumer, partitions) -> None:
        self._commit({tp.partition: self._positions[tp.partition] for tp in partitions
                      if tp.partition in self._positions})
        self._lost(consumer, partitions)

    def _lost(self, consumer, partitions) -> None:
        for tp in partitions:
            self._positions.pop(tp.partition, None)

    def leave(self) -> None:
        self._stop.set()
        self._thread.join(60)


# -- applying the schedule ------------------------------------------------------------------

def topics_at(cluster, node_id: int) -> dict[str, object]:
    """{topic: {partition: (leader, replicas, isr)}} as broker `node_id` itself answers."""
    req = request(ApiKey.METADATA)
    conn = RawConnection(cluster.broker(node_id).bootstrap)
    try:
        answer = conn.call(ApiKey.METADATA, 9, req.cls(topics=None,
                                                        allow_auto_topic_creation=False))
    finally:
        conn.close()
    return {t.name: {p.partition_index: (p.leader_id, list(p.replica_nodes), sorted(p.isr_nodes))
                     for p in t.partitions} for t in answer.topics if not t.error_code}


def settled(c) -> bool:
    """Every broker live and unfenced, every partition of ours and the group's led with a
    full ISR."""
    if len(c.metadata().brokers) != len(c.brokers):
        return False
    for topic in (TOPIC, OFFSETS):
        placement = c.partitions(topic)
        if not placement or any(sorted(r) != isr for _, r, isr in placement.values()):
            return False
    return True


class Churn:
    """Applies a schedule to a TestCluster, from the test's thread; `events` says what was
    done when, `members` are the members it added (beside the first, which stays)."""

    def __init__(self, cluster, ledger: GroupLedger, seed: int, t0: float):
        self.c, self.ledger, self.t0 = cluster, ledger, t0
        self._rng = random.Random(seed ^ 0xC4A2)  # which member leaves, apart from the schedule
        self.events: list[str] = []
        self.members: list[Member] = []
        self.sides: dict[str, int] = {}  # side topic -> its partition count
        self._joined = 0

    def _log(self, what: str) -> None:
        self.events.append(f"{time.monotonic() - self.t0:7.2f}s  {what}")

    def join(self, protocol: str) -> Member:
        self._joined += 1
        member = Member(self.c.bootstrap, f"member-{self._joined}", protocol, self.ledger)
        self._log(f"{member.name} joins")
        return member

    def apply(self, change: Change) -> None:
        c = self.c
        if change.kind == RESTART:
            self._restart(self._holder(change.target), change.target)
        elif change.kind == ROLLING:
            controller = active_controller(c.bootstrap)
            for node in sorted(c.alive(), key=lambda n: n == controller):  # controller last
                self._restart(node, "rolling")
        elif change.kind == CREATE:
            name, count = change.target, 1 + len(self.sides) % 2
            self._log(f"create {name} ({count} partitions)")
            c.create_topic(name, partitions=count, rf=2 + len(self.sides) % 2)
            self.sides[name] = count
        elif change.kind == GROW:
            name = change.target
            self.sides[name] += 1
            self._log(f"grow {name} to {self.sides[name]} partitions")
            admin = c.admin()  # kept alive until the answer arrives
            admin.create_partitions([NewPartitions(name, self.sides[name])])[name].result(30)
            wait_for(lambda: len(c._agreed(name) or {}) == self.sides[name],
                     f"every broker to know {self.sides[name]} partitions of {name}")
        elif change.kind == DELETE:
            name = change.target
            del self.sides[name]
            self._log(f"delete {name}")
            admin = c.admin()
            admin.delete_topics([name])[name].result(30)
            wait_for(lambda: all(name not in topics_at(c, n) for n in c.alive()),
                     f"every broker to forget {name}")
        elif change.kind == JOIN:
            self.members.append(self.join(change.target))
        elif change.kind == LEAVE:
            member = self.members.pop(self._rng.randrange(len(self.members)))
            self._log(f"{member.name} leaves")
            member.leave()

    def _holder(self, role: str) -> int:
        c = self.c
        if role == "controller":
            return active_controller(c.bootstrap)
        if role == "coordinator":
            index = partition_for(GROUP, FAST["offsets.topic.num.partitions"])
            return c.partition_of(OFFSETS, index)[0]
        return c.partition_of(TOPIC, self._rng.randrange(PARTITIONS))[0]

    def _restart(self, node: int, why: str) -> None:
        """SIGTERM, start again, and wait as a rolling restart does: until every ISR is full."""
        self._log(f"SIGTERM broker {node} ({why}), start it again")
        code = self.c.broker(node).stop()
        self.c.broker(node).start()
        wait_for(lambda: settled(self.c), f"broker {node} back in every ISR", timeout=180)
        self._log(f"broker {node} back (it exited with {code})")

    def stop(self) -> None:
        for member in self.members:
            member.leave()


# -- the checks beyond the nemesis's ------------------------------------------------------------

def out_of_order(served: dict[tuple[int, int], bytes]) -> list[str]:
    """Each producer's values ("w<n>-<seq>") out of its sending order within a partition."""
    last: dict[tuple[int, bytes], tuple[int, int]] = {}
    problems = []
    for (p, o), v in sorted(served.items()):
        m = re.fullmatch(rb"(w\d+)-(\d+)", v)
        if not m:
            continue
        seq = int(m.group(2))
        before = last.get((p, m.group(1)))
        if before and before[1] >= seq:
            problems.append(f"partition {p}: {v!r} at offset {o} after {m.group(1)!r}-"
                            f"{before[1]} at offset {before[0]}")
        last[p, m.group(1)] = (o, seq)
    return problems


def disagreements(c, topics: set[str]) -> list[str]:
    """How the brokers' answers about `topics` (and which topics there are) differ."""
    views = {n: topics_at(c, n) for n in c.alive()}
    first, *rest = sorted(views)
    problems = [f"broker {n} knows topics {sorted(views[n])}, broker {first} "
                f"{sorted(views[first])}" for n in rest if set(views[n]) != set(views[first])]
    for t in sorted(topics):
        problems += [f"{t}: broker {n} answers {views[n].get(t)}, broker {first} "
                     f"{views[first].get(t)}"
                     for n in rest if views[n].get(t) != views[first].get(t)]
    return problems + [f"topic {t} missing at broker {first}" for t in topics
                       if t not in views[first]]


def run_churn(make_cluster, seed: int, seconds: float) -> None:
    changes = churn_schedule(seed, seconds)
    c = make_cluster(3)
    c.create_topic(TOPIC, partitions=PARTITIONS, rf=3, config={"min.insync.replicas": "2"})
    t0 = time.monotonic()
    writers = [Writer(c.bootstrap, TOPIC, n) for n in range(WRITERS)]
    ledger = GroupLedger(c.bootstrap, TOPIC, GROUP, PARTITIONS, t0)
    churn = Churn(c, ledger, seed, t0)
    first = churn.join("classic")  # never leaves: the group always has a member
    rerun = f"seed {seed}; rerun with CHURN_SEED={seed} python -m pytest -n 0 " \
            f"tests/cluster/test_churn.py"
    try:
        for change in changes:
            churn.apply(change)
            time.sleep(change.gap)  # the schedule's pace, not a wait for a condition
        wait_for(lambda: settled(c), "every broker back and every ISR full", timeout=180)
        undelivered = sum(w.stop(time.monotonic() + 120) for w in writers)
        served = read_cluster(c.bootstrap, TOPIC, PARTITIONS)
        wanted = set(served.values())
        wait_for(lambda: wanted <= ledger.values_read, "the group to read every record")
        expected = {TOPIC, OFFSETS, *churn.sides}
        wait_for(lambda: not disagreements(c, expected), "every broker to agree on metadata",
                 timeout=60)
    except BaseException as e:
        e.add_note(f"{rerun}\napplied:\n  " + "\n  ".join(churn.events))
        raise
    finally:
        for w in writers:
            w.stop(time.monotonic() + 5)
        churn.stop()
        first.leave()
        ledger.stop()
    history = stored_history(c, TOPIC, PARTITIONS, writers, undelivered, served, ledger.reads,
                             ledger.values_read, ledger.problems + out_of_order(served))
    problems = check(history, PARTITIONS)
    report = (f"{rerun}\n{len(history.acked)} acknowledged, {len(ledger.reads)} offsets read, "
              f"{ledger.commits} commits acknowledged\nschedule:\n  "
              + "\n  ".join(map(str, changes)) + "\napplied:\n  " + "\n  ".join(churn.events))
    assert_held(problems, report, bool(history.acked and ledger.commits))


@pytest.mark.timeout(600)
@pytest.mark.parametrize("seed", seeds([22, 27], "CHURN_SEED"))
def test_acknowledged_writes_and_commits_survive_churn(make_cluster, seed):
    run_churn(make_cluster, seed, SHORT_SECONDS)
