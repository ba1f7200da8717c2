"""A Jepsen-style nemesis for a replicated minilog cluster: a fault schedule drawn from a seed,
the thread that applies it, a workload that records what the cluster acknowledged and what it
served, and a checker that compares those records with the logs left on disk.

The schedule is a pure function of (seed, seconds), so a failure is rerun exactly by its seed;
the faults target roles (a partition's leader, the group's coordinator, the active controller)
that are resolved to a broker when the fault is applied, and what was applied is recorded.
The checker is a pure function of the records: what Kafka promises an acks=all idempotent
producer and a committing consumer group, whatever the faults were.
"""
from __future__ import annotations

import os
import random
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import KafkaException, Producer
from confluent_kafka import TopicPartition as CTP
from minilog.broker.coordinator.coordinator_topic import partition_for
from minilog.broker.storage.log import Log
from minilog.connector.client import Consumer, TopicPartition
from minilog.connector.records import decode_batches, next_offset_after

from clustertools import FAST, active_controller

OFFSETS = "__consumer_offsets"
KILL, PAUSE, ISOLATE = "kill", "pause", "isolate-controller"
ROLES = ("leader", "coordinator", "controller")


# -- the schedule ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Fault:
    """One fault: `kind` on the broker holding `role` (for "leader", of `partition`), held
    `hold` seconds (a pause, an isolation; a kill restarts at once), then `gap` seconds of
    peace before the next."""

    kind: str
    role: str
    partition: int
    hold: float
    gap: float

    def __str__(self) -> str:
        target = f"leader of partition {self.partition}" if self.role == "leader" else self.role
        held = f" for {self.hold:.1f}s" if self.kind != KILL else ""
        return f"{self.kind} {target}{held}, then {self.gap:.1f}s of peace"


def schedule(seed: int, seconds: float, partitions: int) -> list[Fault]:
    """The faults for `seconds` of nemesis (by their nominal lengths), drawn from `seed`.
    Pauses straddle the session timeout (3 s under the fast timings); an isolation of the
    controller (the fault that found lost writes) lasts from under the session timeout to
    seconds past the Raft resignation (4.5 s)."""
    rng = random.Random(seed)
    faults, total = [], 0.0
    while total < seconds:
        kind = rng.choices((KILL, PAUSE, ISOLATE), weights=(3, 3, 4))[0]
        role = "controller" if kind == ISOLATE else rng.choice(ROLES)
        hold = {KILL: 0.0, PAUSE: rng.uniform(0.5, 6.0), ISOLATE: rng.uniform(2.0, 8.0)}[kind]
        fault = Fault(kind, role, rng.randrange(partitions), round(hold, 1),
                      round(rng.uniform(1.0, 4.0), 1))
        faults.append(fault)
        total += fault.hold + fault.gap + (2.0 if kind != PAUSE else 0.0)  # restarts take ~2 s
    return faults


def fresh_seed() -> int:
    """A new seed each run, the same in every pytest-xdist worker of one run (each collects)."""
    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    return int(run_id[:4], 16) if run_id else int.from_bytes(os.urandom(2), "big")


def seeds(default: list[int], variable: str = "NEMESIS_SEED") -> list[int]:
    """The seeds to run: those in the environment `variable` (comma-separated) if set, else
    `default`."""
    return [int(s) for s in os.environ[variable].split(",")] \
        if os.environ.get(variable) else default


LONG_SECONDS = float(os.environ.get("NEMESIS_SECONDS", 600))


def long_nemesis(test):
    """Marks a test(make_cluster, seed) as the long run: only with `-m nemesis_long`, for
    NEMESIS_SECONDS per seed, on NEMESIS_SEED's seeds or a fresh one."""
    import pytest
    marks = [pytest.mark.nemesis_long, pytest.mark.timeout(int(LONG_SECONDS * 4 + 900)),
             pytest.mark.parametrize("seed", seeds([fresh_seed()]))]
    for mark in reversed(marks):
        test = mark(test)
    return test


# -- applying it ----------------------------------------------------------------------------

class Nemesis:
    """Applies a schedule to a TestCluster in a thread; `events` says what happened when.
    `heal()` (also run when the schedule ends or fails) resumes and restarts every broker."""

    def __init__(self, cluster, topic: str, group: str, faults: list[Fault], seed: int,
                 t0: float):
        self.cluster, self.topic, self.group, self.faults = cluster, topic, group, faults
        self._rng = random.Random(seed ^ 0x5EED)  # fallback targets, apart from the schedule
        self.events: list[str] = []
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._paused: set[int] = set()
        self._lock = threading.Lock()
        self._heal_lock = threading.Lock()
        self._t0 = t0  # events are stamped in seconds since then, as the workload's are
        self._thread = threading.Thread(target=self._run, name="nemesis", daemon=True)

    def start(self) -> Nemesis:
        self._thread.start()
        return self

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(120)
        self.heal()

    def _log(self, what: str) -> None:
        self.events.append(f"{time.monotonic() - self._t0:7.2f}s  {what}")

    def _run(self) -> None:
        try:
            for fault in self.faults:
                if self._stop.is_set():
                    return
                node = self._resolve(fault)
                self._apply(fault, node)
                self._stop.wait(fault.gap)
        except BaseException as e:  # noqa: BLE001 - reported by the test, with the schedule
            self.error = e
            self._log(f"nemesis failed: {e!r}")
        finally:
            self.heal()

    def _resolve(self, fault: Fault) -> int:
        """The broker holding the fault's role now, or a random live one if none answers."""
        c = self.cluster
        try:
            if fault.role == "controller":
                node = active_controller(c.bootstrap_of(*c.alive()))
            elif fault.role == "coordinator":
                index = partition_for(self.group, FAST["offsets.topic.num.partitions"])
                node = (c.partitions(OFFSETS) or {}).get(index, (-1,))[0]
            else:
                node = (c.partitions(self.topic) or {}).get(fault.partition, (-1,))[0]
        except Exception:  # noqa: BLE001 - a cluster in failover answers with errors
            node = -1
        if node not in c.alive():
            node = self._rng.choice(sorted(c.alive()))
            self._log(f"no {fault.role} known: broker {node} instead")
        return node

    def _apply(self, fault: Fault, node: int) -> None:
        c = self.cluster
        if fault.kind == KILL:
            self._log(f"kill -9 broker {node} ({fault.role}), restart")
            c.broker(node).kill()
            c.broker(node).start()
        elif fault.kind == PAUSE:
            self._log(f"SIGSTOP broker {node} ({fault.role}) for {fault.hold}s")
            self._pause(node)
            self._stop.wait(fault.hold)
            self._resume(node)
            self._log(f"SIGCONT broker {node}")
        else:
            others = [n for n in sorted(c.alive()) if n != node]
            self._log(f"isolate controller {node}: SIGSTOP brokers {others} for {fault.hold}s")
            for n in others:
                self._pause(n)
            self._stop.wait(fault.hold)
            self._log(f"kill -9 broker {node}, SIGCONT brokers {others}, restart {node}")
            c.broker(node).kill()
            for n in others:
                self._resume(n)
            c.broker(node).start()

    def _pause(self, node: int) -> None:
        with self._lock:
            self.cluster.pause(node)
            self._paused.add(node)

    def _resume(self, node: int) -> None:
        with self._lock:
            self.cluster.resume(node)
            self._paused.discard(node)

    def heal(self) -> None:
        """Every broker running and resumed (idempotent; safe from any thread)."""
        with self._lock:
            for node in sorted(self._paused):
                self.cluster.resume(node)
            self._paused.clear()
        with self._heal_lock:
            for b in self.cluster.brokers:
                for attempt in range(3):
                    if b.proc is not None and b.proc.poll() is None:
                        break
                    self._log(f"heal: restart broker {b.node_id} (exit code "
                              f"{b.proc.returncode if b.proc else None})")
                    try:
                        b.start()
                    except RuntimeError as e:
                        self._log(f"heal: {e}: {b.log()[-300:]!r}")
                        if attempt == 2:
                            raise


# -- the workload ---------------------------------------------------------------------------

class Writer:
    """An idempotent acks=all confluent-kafka producer writing unique values ("w<n>-<i>")
    at a steady pace from a thread; records each acknowledgement and each failure."""

    def __init__(self, bootstrap: str, topic: str, n: int, per_second: float = 100.0):
        self.topic, self.n, self.interval = topic, n, 1.0 / per_second
        self.acked: list[tuple[bytes, int, int]] = []  # (value, partition, offset)
        self.failed: list[tuple[bytes, str]] = []
        self.fatal: list[str] = []  # librdkafka's fatal errors: the producer is unusable
        self.sent = 0
        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                   "enable.idempotence": True, "linger.ms": 5,
                                   "message.timeout.ms": 300000, "error_cb": self._error})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"writer-{n}", daemon=True)
        self._thread.start()

    def _error(self, err) -> None:
        if err.fatal():
            self.fatal.append(f"writer {self.n}: fatal producer error: {err.str()}")

    def _done(self, err, msg) -> None:
        if err:
            self.failed.append((msg.value(), str(err)))
        else:
            self.acked.append((msg.value(), msg.partition(), msg.offset()))

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            if len(self._producer) < 2000:  # a cluster without a leader: do not pile up
                try:
                    self._producer.produce(self.topic, b"w%d-%07d" % (self.n, self.sent),
                                           on_delivery=self._done)
                    self.sent += 1
                except BufferError:
                    pass
                except KafkaException as e:  # fatal: this producer can write no more
                    self.fatal.append(f"writer {self.n}: produce refused: {e}")
                    return
            self._producer.poll(0)
            next_at += self.interval
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def stop(self, deadline: float) -> int:
        """Stop writing and deliver what is pending until `deadline` (time.monotonic()); the
        count never delivered nor failed. A producer in a fatal state delivers nothing more:
        its pending records are counted at once."""
        self._stop.set()
        self._thread.join(30)
        if not self.fatal:
            try:
                return self._producer.flush(max(0.0, deadline - time.monotonic()))
            except (KafkaException, SystemError) as e:  # a fatal error meanwhile
                self.fatal.append(f"writer {self.n}: flush failed: {e}")
        pending = len(self._producer)
        try:
            self._producer.purge()
            self._producer.poll(0)
        except KafkaException:  # a fatal producer refuses even that; it is dropped anyway
            pass
        return pending


class GroupLedger:
    """What a consumer group read and had acknowledged as committed, checked as it happens: an
    offset read twice with different values, a commit acknowledged lower than one acknowledged
    before it, and (a consumer of the group that is not a member, reading the committed offsets
    back with OffsetFetch all along) an offset read back lower than one acknowledged before it
    was asked. Shared by the nemesis's reader and the churn test's members."""

    def __init__(self, bootstrap: str, topic: str, group: str, partitions: int, t0: float):
        self.topic, self.partitions, self._t0 = topic, partitions, t0
        self.reads: dict[tuple[int, int], bytes] = {}  # the first value read at each offset
        self.values_read: set[bytes] = set()
        self.commits = 0  # acknowledged
        self.problems: list[str] = []
        self._acked_max: dict[int, int] = defaultdict(lambda: -1)
        self._lock = threading.Lock()
        self._checker = ConfluentConsumer({"bootstrap.servers": bootstrap, "group.id": group})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._fetch_committed, name="offset-fetcher",
                                        daemon=True)
        self._thread.start()

    def _at(self) -> str:
        return f"{time.monotonic() - self._t0:7.2f}s"

    def read(self, partition: int, offset: int, value: bytes) -> None:
        with self._lock:
            self.values_read.add(value)
            if self.reads.setdefault((partition, offset), value) != value:
                self.problems.append(f"{self._at()}  partition {partition} offset {offset} "
                                     f"read as {self.reads[partition, offset]!r}, then {value!r}")

    def committed(self, member: str, answered: list[CTP]) -> None:
        """The partitions of a commit the coordinator answered (`answered`, errors included)."""
        with self._lock:
            for tp in answered:
                if tp.error is not None:
                    continue
                if tp.offset < self._acked_max[tp.partition]:
                    self.problems.append(
                        f"{self._at()}  partition {tp.partition}: {member}'s commit of "
                        f"{tp.offset} acknowledged after one of {self._acked_max[tp.partition]}")
                self._acked_max[tp.partition] = max(self._acked_max[tp.partition], tp.offset)
                self.commits += 1

    def _fetch_committed(self) -> None:
        while not self._stop.wait(0.3):
            self.check_committed()

    def check_committed(self) -> None:
        """Read the committed offsets back once; record any lower than acknowledged before."""
        with self._lock:
            before = dict(self._acked_max)
        found = fetched_regressions(self._checker, self.topic, before, self.partitions, self._t0)
        with self._lock:
            self.problems += found

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        self.check_committed()
        self._checker.close()


class GroupReader:
    """One member of a consumer group (confluent-kafka) reading and committing synchronously
    from a thread, every record and every acknowledged commit kept in its `ledger`."""

    def __init__(self, bootstrap: str, topic: str, group: str, partitions: int, t0: float):
        conf = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                "auto.offset.reset": "earliest", "session.timeout.ms": 10000,
                "heartbeat.interval.ms": 1000}
        self.topic = topic
        self.ledger = GroupLedger(bootstrap, topic, group, partitions, t0)
        self._positions: dict[int, int] = {}
        self._consumer = ConfluentConsumer(conf)
        self._consumer.subscribe([topic])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, name="group-reader", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        last_commit = time.monotonic()
        while not self._stop.is_set():
            for m in self._consumer.consume(100, 0.2):
                if m.error():
                    continue
                self.ledger.read(m.partition(), m.offset(), m.value())
                self._positions[m.partition()] = m.offset() + 1
            if time.monotonic() - last_commit > 0.5 and self._positions:
                last_commit = time.monotonic()
                self._commit()
        self._commit()

    def _commit(self) -> None:
        offsets = [CTP(self.topic, p, o) for p, o in sorted(self._positions.items())]
        try:
            answered = self._consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException:
            return  # not acknowledged: nothing promised
        self.ledger.committed("the reader", answered or [])

    def read_up_to(self, ends: dict[int, int]) -> bool:
        """Whether the member has read every partition up to `ends` ({partition: offset})."""
        return all(self._positions.get(p, 0) >= end for p, end in ends.items() if end > 0)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        self._consumer.close()
        self.ledger.stop()


def fetched_regressions(checker: ConfluentConsumer, topic: str, before: dict[int, int],
                        partitions: int, t0: float) -> list[str]:
    """Reads the committed offsets back once through `checker` (OffsetFetch): one line for
    each lower than `before` ({partition: highest commit acknowledged before asking})."""
    try:
        got = checker.committed([CTP(topic, p) for p in range(partitions)], timeout=5)
    except KafkaException:
        return []
    return [f"{time.monotonic() - t0:7.2f}s  partition {tp.partition}: OffsetFetch answered "
            f"{tp.offset} after a commit of {before[tp.partition]} was acknowledged"
            for tp in got if tp.error is None and before.get(tp.partition, -1) >= 0
            and tp.offset < before[tp.partition]]


# -- reading what is stored -----------------------------------------------------------------

def read_cluster(bootstrap: str, topic: str, partitions: int,
                 timeout: float = 120.0) -> dict[tuple[int, int], bytes]:
    """Every record the cluster serves, read with minilog's consumer up to the end offsets."""
    with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}) as c:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        ends = {tp.partition: o for tp, o in c.end_offsets(tps).items()}
        got: dict[tuple[int, int], bytes] = {}
        deadline = time.monotonic() + timeout
        while len(got) < sum(ends.values()) and time.monotonic() < deadline:
            got.update({(r.partition, r.offset): r.value for r in c.poll(0.5)})
    return got


def read_log_chunks(log_dir: Path):
    """Yield (offset, stored batches from it) through one partition directory, opened without
    a server."""
    with Log(log_dir) as log:
        offset = log.log_start_offset
        while offset < log.log_end_offset:
            data = log.read(offset, 1 << 24)
            if not data:
                break
            yield offset, data
            offset = next_offset_after(data)


def read_log_from_disk(log_dir: Path) -> dict[int, bytes]:
    """{offset: value} of one partition directory, opened without a server."""
    out: dict[int, bytes] = {}
    for offset, data in read_log_chunks(log_dir):
        out.update((r.offset, r.value) for r in decode_batches(data, start_offset=offset))
    return out


def stored_history(cluster, topic: str, partitions: int, writers: list[Writer],
                   undelivered: int, served: dict[tuple[int, int], bytes],
                   reads: dict[tuple[int, int], bytes], values_read: set[bytes],
                   problems: list[str]) -> History:
    """Stops every broker (SIGTERM) and gathers the History: what the writers recorded, what
    was served and read, and each broker's log of `topic` read from disk."""
    for b in cluster.brokers:
        b.stop()
    replicas = {b.node_id: {p: read_log_from_disk(b.log_dir / f"{topic}-{p}")
                            for p in range(partitions)} for b in cluster.brokers}
    return History(
        acked=[a for w in writers for a in w.acked], failed=[f for w in writers for f in w.failed],
        undelivered=undelivered, reads=reads, values_read=values_read, served=served,
        replicas=replicas, problems=[f for w in writers for f in dict.fromkeys(w.fatal)]
        + problems)


# -- the checker ----------------------------------------------------------------------------

@dataclass
class History:
    """What the workload recorded and what was stored at the end."""

    acked: list[tuple[bytes, int, int]]                 # (value, partition, offset)
    failed: list[tuple[bytes, str]]                     # (value, error) delivery failures
    undelivered: int                                    # still pending after the final flush
    reads: dict[tuple[int, int], bytes]                 # what the group read where (first)
    served: dict[tuple[int, int], bytes]                # what the cluster serves at the end
    replicas: dict[int, dict[int, dict[int, bytes]]]    # broker -> partition -> {offset: value}
    problems: list[str] = field(default_factory=list)   # found while running
    values_read: set[bytes] | None = None               # every value read (default: reads')


def check(h: History, partitions: int) -> list[str]:
    """Every way the history breaks Kafka's promises, one line each (empty when it holds)."""
    problems = list(h.problems)
    brokers = sorted(h.replicas)
    for p in range(partitions):
        copies = {b: h.replicas[b].get(p, {}) for b in brokers}
        ref = copies[brokers[0]]
        for b in brokers[1:]:
            if copies[b] != ref:
                diff = min(o for o in set(ref) | set(copies[b]) if ref.get(o) != copies[b].get(o))
                problems.append(f"replicas disagree on partition {p} from offset {diff}: "
                                f"broker {brokers[0]} has {ref.get(diff)!r} "
                                f"({len(ref)} records), broker {b} has "
                                f"{copies[b].get(diff)!r} ({len(copies[b])} records)")
        served = {o: v for (q, o), v in h.served.items() if q == p}
        if served != {o: v for o, v in ref.items() if o in served} or len(served) != len(ref):
            problems.append(f"partition {p}: the cluster served {len(served)} records, broker "
                            f"{brokers[0]}'s log holds {len(ref)} (or they differ)")
    final = h.served
    values_read = set(h.reads.values()) if h.values_read is None else h.values_read
    where = defaultdict(list)
    for key, v in final.items():
        where[v].append(key)
    for v, keys in where.items():
        if len(keys) > 1:
            problems.append(f"value {v!r} stored {len(keys)} times, at {sorted(keys)}")
    for v, p, o in h.acked:
        if o is None:
            # librdkafka acknowledges without an offset the records of a failed request still
            # waiting for their retry (a timeout, NOT_LEADER, a dropped connection) once a
            # later request of the same producer succeeds: that success, in sequence, proves
            # them written ("implicitly acked", rd_kafka_dr_implicit_ack); it does so against
            # Kafka too. Such a value must be stored exactly once, in its partition.
            o = next((q for q_p, q in where.get(v, ()) if q_p == p), None)
            if o is None:
                problems.append(f"acknowledged {v!r} at partition {p} (offset unknown) is "
                                f"lost: the value is at {where.get(v) or 'no offset'}")
                continue
        if final.get((p, o)) != v:
            problems.append(f"acknowledged {v!r} at partition {p} offset {o} is lost: that "
                            f"offset holds {final.get((p, o))!r}, the value is at "
                            f"{where.get(v) or 'no offset'}")
        elif v not in values_read:
            problems.append(f"acknowledged {v!r} at partition {p} offset {o} was never read "
                            f"by the group")
    for (p, o), v in sorted(h.reads.items()):
        if final.get((p, o)) != v:
            problems.append(f"the group read {v!r} at partition {p} offset {o}, which did "
                            f"not last: the offset holds {final.get((p, o))!r}")
    kinds = Counter(err for _, err in h.failed)
    for err, n in kinds.most_common():
        problems.append(f"{n} delivery failure(s): {err}")
    if h.undelivered:
        problems.append(f"{h.undelivered} record(s) neither delivered nor failed at the end")
    return problems


def assert_held(problems: list[str], report: str, progressed: bool) -> None:
    """Print what the run went through (shown with -s), then fail on any problem, or on a
    workload that made no progress (a run that wrote nothing proves nothing)."""
    print(report)
    assert not problems, f"{len(problems)} problem(s):\n{summary(problems)}\n{report}"
    assert progressed, f"the workload made no progress\n{report}"


def summary(problems: list[str], limit: int = 40) -> str:
    """The first `limit` problems, and how many more there were."""
    more = len(problems) - limit
    return "\n".join(problems[:limit] + ([f"... and {more} more"] if more > 0 else []))
