"""Helpers of the consumer-group tests (`test_client_groups.py`,
`test_client_group_consumers.py`): a `GroupMembership` driven directly with a stand-in owner
(the seam the consumer implements), and third-party consumers polled in a thread."""
import asyncio
import contextlib
import threading
import time

import confluent_kafka
import kafka
from minilog.connector.client.cluster import Cluster
from minilog.connector.client.config import Config
from minilog.connector.client.group import GroupMembership
from minilog.connector.client.types import TopicPartition as TP

FAST = ["-o", "group.initial.rebalance.delay.ms=0", "-o", "group.min.session.timeout.ms=1000"]
SESSION_MS = 6000
LONG_SESSION_MS = 120_000  # longer than the waits of a test that must not see it expire


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
