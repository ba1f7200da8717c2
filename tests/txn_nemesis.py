"""A transactional workload for the nemesis (tests/nemesis.py), and its checker.

Transactional writers commit and abort over 2-4 partitions; a read-process-write loop copies a
source topic with `send_offsets_to_transaction`; a zombie producer (its own process) is
SIGSTOPped while a new instance takes its transactional id, then resumed. What each one was
told is recorded; a read_committed reader records what it saw while the faults ran. The checker
rebuilds the read_committed view of every partition from each broker's log on disk (a record
counts once its producer's COMMIT marker follows it) and holds the records to Kafka's
promises: the cluster serves that view, every committed transaction is in it whole and once,
no aborted record is in it or was ever read, and the copy is exactly once.
"""
from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as CTP
from minilog.connector.batch import iter_batches
from minilog.connector.records import CONTROL_COMMIT, control_batch_type, decode_batches

from nemesis import KILL, PAUSE, Fault, Nemesis, read_log_chunks

TXN_STATE = "__transaction_state"
TXN_ROLES = ("leader", "txn-coordinator", "coordinator")
COMMITTED, ABORTED, UNKNOWN = "committed", "aborted", "unknown"


def txn_schedule(seed: int, seconds: float, partitions: int) -> list[Fault]:
    """kill -9 (restarted at once) and SIGSTOP of a partition leader, the transaction
    coordinator or the group coordinator, drawn from `seed` for `seconds` of nemesis."""
    rng = random.Random(seed)
    faults, total = [], 0.0
    while total < seconds:
        kind = rng.choice((KILL, PAUSE))
        role = rng.choices(TXN_ROLES, weights=(2, 2, 1))[0]
        hold = round(rng.uniform(0.5, 5.0), 1) if kind == PAUSE else 0.0
        fault = Fault(kind, role, rng.randrange(partitions), hold, round(rng.uniform(1.0, 3.0), 1))
        faults.append(fault)
        total += fault.hold + fault.gap + (2.0 if kind == KILL else 0.0)
    return faults


class TxnNemesis(Nemesis):
    """The replication nemesis, with the transaction coordinator (the leader of the one
    `__transaction_state` partition) as a role too."""

    def _resolve(self, fault: Fault) -> int:
        if fault.role != "txn-coordinator":
            return super()._resolve(fault)
        try:
            node = (self.cluster.partitions(TXN_STATE) or {}).get(0, (-1,))[0]
        except Exception:  # noqa: BLE001 - a cluster in failover answers with errors
            node = -1
        return node if node in self.cluster.alive() else \
            super()._resolve(replace(fault, role="leader"))


# -- the workload ---------------------------------------------------------------------------

@dataclass
class Txn:
    """One transaction and what its producer was told: its records are (partition, value)."""
    who: str
    records: list[tuple[int, bytes]]
    outcome: str
    note: str = ""


def _txn_producer(bootstrap: str, txn_id: str, stop: threading.Event) -> Producer | None:
    """A transactional producer once init_transactions succeeded (None if stopped first)."""
    while not stop.is_set():
        p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                      "linger.ms": 5, "transaction.timeout.ms": 10000, "log_level": 0})
        try:
            p.init_transactions(30)
            return p
        except KafkaException:
            stop.wait(0.5)
    return None


def _end(p: Producer, commit: bool, tries: int = 3) -> tuple[str, str, bool]:
    """Commit or abort the open transaction: (outcome, note, whether the producer is fatal).
    A retriable error (a timeout) is retried, as the client's documentation says."""
    try:
        (p.commit_transaction if commit else p.abort_transaction)(30)
        return (COMMITTED if commit else ABORTED), "", False
    except KafkaException as e:
        err = e.args[0]
        if err.retriable() and tries > 1:
            return _end(p, commit, tries - 1)
        if err.fatal():
            return UNKNOWN, f"fatal {err.name()}", True
        if err.txn_requires_abort():
            try:
                p.abort_transaction(30)
                return ABORTED, f"{err.name()}, aborted", False
            except KafkaException as e2:
                return UNKNOWN, f"{err.name()}, abort: {e2.args[0].name()}", e2.args[0].fatal()
        return UNKNOWN, err.name(), False


class TxnWriter:
    """Transactions of 2-4 partitions, one record each, committed or (one in three) aborted."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, n: int, seed: int):
        self.bootstrap, self.topic, self.partitions, self.n = bootstrap, topic, partitions, n
        self.rng = random.Random(seed * 31 + n)
        self.txns: list[Txn] = []
        self.fatal: list[str] = []
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"txn-writer-{n}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        p = _txn_producer(self.bootstrap, f"tw-{self.n}", self.stop_event)
        k = 0
        while p is not None and not self.stop_event.is_set():
            k += 1
            parts = self.rng.sample(range(self.partitions),
                                    self.rng.randint(2, min(4, self.partitions)))
            records = [(q, b"t%d-%05d-%d" % (self.n, k, q)) for q in parts]
            commit = self.rng.random() > 0.33
            try:
                p.begin_transaction()
                for q, v in records:
                    p.produce(self.topic, v, partition=q)
                if not commit:  # in the log, then aborted (an abort drops what is unsent)
                    p.flush(30)
                outcome, note, fatal = _end(p, commit)
            except KafkaException as e:
                err = e.args[0]
                outcome, note, fatal = _end(p, False) if not err.fatal() else \
                    (UNKNOWN, f"fatal {err.name()}", True)
            self.txns.append(Txn(f"tw-{self.n}", records, outcome, note))
            if fatal:
                self.fatal.append(note)
                p = _txn_producer(self.bootstrap, f"tw-{self.n}", self.stop_event)

    def stop(self, timeout: float = 90.0) -> None:
        self.stop_event.set()
        self.thread.join(timeout)


class ReadProcessWrite:
    """Copies `source` (one partition) to `target` in transactions of up to 20 records, the
    consumed offsets committed in each (`send_offsets_to_transaction`); after a failed
    transaction it rewinds to the group's committed offset. librdkafka may block in
    send_offsets_to_transaction when the group coordinator dies (a known client issue): a
    thread left blocked at the end is abandoned, which the checker does not mind."""

    def __init__(self, bootstrap: str, source: str, target: str, group: str):
        self.bootstrap, self.source, self.target = bootstrap, source, target
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                  "enable.auto.commit": False, "isolation.level":
                                  "read_committed", "auto.offset.reset": "earliest",
                                  "log_level": 0})
        self.copied = 0  # committed transactions
        self.fatal: list[str] = []
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, name="read-process-write", daemon=True)
        self.thread.start()

    def _rewind(self) -> None:
        """Read on from the group's committed offset (assigning there resets the position)."""
        while not self.stop_event.is_set():
            try:
                at = self.consumer.committed([CTP(self.source, 0)], timeout=10)[0].offset
                self.consumer.assign([CTP(self.source, 0, max(at, 0))])
                return
            except KafkaException:
                self.stop_event.wait(0.5)

    def _run(self) -> None:
        self._rewind()
        p = _txn_producer(self.bootstrap, "rpw", self.stop_event)
        while p is not None and not self.stop_event.is_set():
            msgs = [m for m in self.consumer.consume(20, 0.5) if not m.error()]
            if not msgs:
                continue
            try:
                p.begin_transaction()
                for m in msgs:
                    p.produce(self.target, m.value(), partition=0)
                p.send_offsets_to_transaction([CTP(self.source, 0, msgs[-1].offset() + 1)],
                                              self.consumer.consumer_group_metadata(), 30)
                outcome, note, fatal = _end(p, True)
            except KafkaException as e:
                outcome, note, fatal = _end(p, False) if not e.args[0].fatal() else \
                    (UNKNOWN, f"fatal {e.args[0].name()}", True)
            if outcome == COMMITTED:
                self.copied += 1
                continue
            self._rewind()
            if fatal:
                self.fatal.append(note)
                p = _txn_producer(self.bootstrap, "rpw", self.stop_event)

    def stop(self, timeout: float = 90.0) -> bool:
        """Whether the loop ended (False: blocked in the client, abandoned)."""
        self.stop_event.set()
        self.thread.join(timeout)
        return not self.thread.is_alive()


class Zombie:
    """A producer process SIGSTOPped inside its transaction; a new instance of its
    transactional id commits one; the zombie, resumed, must be fenced."""

    def __init__(self, cluster, topic: str, partitions: int, start_in: float):
        self.cluster, self.topic, self.partitions = cluster, topic, partitions
        self.result: dict | None = None
        self.successor: Txn | None = None
        self.error: str | None = None
        self.events: list[str] = []
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(start_in,), name="zombie",
                                       daemon=True)
        self.thread.start()

    def _run(self, start_in: float) -> None:
        if self.stop_event.wait(start_in):
            return
        script = Path(__file__).with_name("txn_zombie.py")
        proc = subprocess.Popen([sys.executable, str(script), self.cluster.bootstrap,
                                 self.topic, "zombie", str(self.partitions)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
        try:
            if proc.stdout.readline().strip() != "ready":
                self.error = "the zombie never got its transaction going"
                return
            proc.send_signal(signal.SIGSTOP)
            self.events.append("zombie SIGSTOPped inside its transaction")
            p = _txn_producer(self.cluster.bootstrap, "zombie", self.stop_event)
            if p is None:
                return
            records = [(q, b"z-new-%d" % q) for q in range(self.partitions)]
            p.begin_transaction()
            for q, v in records:
                p.produce(self.topic, v, partition=q)
            outcome, note, _ = _end(p, True)
            self.successor = Txn("zombie's successor", records, outcome, note)
            proc.send_signal(signal.SIGCONT)
            self.events.append(f"successor {outcome}; zombie resumed")
            proc.stdin.write("go\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
            self.result = json.loads(line) if line.strip() else {"commit": "no answer"}
        except Exception as e:  # noqa: BLE001 - reported by the checker
            self.error = f"zombie episode failed: {e!r}"
        finally:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
            proc.wait(30)

    def stop(self, timeout: float = 180.0) -> None:
        self.thread.join(timeout)
        self.stop_event.set()


class CommittedReader:
    """A read_committed consumer (confluent-kafka) of every partition of `topic`, recording
    each record it was handed while the faults ran: {(partition, offset): value}."""

    def __init__(self, bootstrap: str, topic: str, partitions: int):
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "txn-watcher",
                                  "isolation.level": "read_committed",
                                  "enable.auto.commit": False, "log_level": 0})
        self.consumer.assign([CTP(topic, q, 0) for q in range(partitions)])
        self.seen: dict[tuple[int, int], bytes] = {}
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, name="committed-reader", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop_event.is_set():
            for m in self.consumer.consume(500, 0.2):
                if not m.error():
                    self.seen[(m.partition(), m.offset())] = m.value()

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(30)
        self.consumer.close()


# -- reading what is stored -----------------------------------------------------------------

def committed_view_from_disk(log_dir: Path) -> dict[int, bytes]:
    """{offset: value} a read_committed reader gets from one partition directory: plain
    records, and transactional ones whose producer's next marker there is a COMMIT."""
    view: dict[int, bytes] = {}
    open_txns: dict[int, list] = {}
    for _, data in read_log_chunks(log_dir):
        for pos, h in iter_batches(data):
            batch = bytes(data[pos:pos + h.size])
            if h.is_control:
                records = open_txns.pop(h.producer_id, [])
                if control_batch_type(batch) == CONTROL_COMMIT:
                    view.update(records)
            elif h.is_transactional:
                open_txns.setdefault(h.producer_id, []).extend(
                    (r.offset, r.value) for r in decode_batches(batch))
            else:
                view.update((r.offset, r.value) for r in decode_batches(batch))
    return view


def committed_view_served(bootstrap: str, topic: str, partitions: int,
                          ends: dict[int, int]) -> dict[tuple[int, int], bytes]:
    """What a read_committed confluent-kafka consumer reads of `topic` up to `ends`
    ({partition: last stable offset}), once nothing more comes for 3 s."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "txn-final",
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  "log_level": 0})
    got: dict[tuple[int, int], bytes] = {}
    try:
        c.assign([CTP(topic, q, 0) for q in range(partitions) if ends.get(q, 0) > 0])
        quiet_since, deadline = time.monotonic(), time.monotonic() + 120
        while time.monotonic() - quiet_since < 3 and time.monotonic() < deadline:
            msgs = [m for m in c.consume(500, 0.3) if not m.error()]
            if msgs:
                quiet_since = time.monotonic()
            got.update(((m.partition(), m.offset()), m.value()) for m in msgs)
    finally:
        c.close()
    return got


# -- the checker ----------------------------------------------------------------------------

@dataclass
class TxnHistory:
    txns: list[Txn]                                    # writers' and the zombie's successor's
    views: dict[int, dict[int, dict[int, bytes]]]      # broker -> partition -> {offset: value}
    served: dict[tuple[int, int], bytes]               # read_committed at the end
    seen: dict[tuple[int, int], bytes]                 # read_committed while the faults ran
    source: list[bytes] = field(default_factory=list)  # read-process-write's input, in order
    copy: list[bytes] = field(default_factory=list)    # its output (read_committed), in order
    copied_to: int = 0                                 # the group's committed source offset
    zombie: dict | None = None                         # the resumed zombie's commit
    problems: list[str] = field(default_factory=list)


def check_txns(h: TxnHistory) -> list[str]:
    """Every broken promise, one line each (empty when the history holds)."""
    problems = list(h.problems)
    brokers = sorted(h.views)
    ref = h.views[brokers[0]]
    for b in brokers[1:]:
        for q in sorted(set(ref) | set(h.views[b])):
            if ref.get(q, {}) != h.views[b].get(q, {}):
                problems.append(f"partition {q}: the read_committed view rebuilt from broker "
                                f"{b}'s log differs from broker {brokers[0]}'s")
    view = {(q, o): v for q, records in ref.items() for o, v in records.items()}
    if h.served != view:
        extra = sorted(set(h.served.items()) - set(view.items()))[:5]
        missing = sorted(set(view.items()) - set(h.served.items()))[:5]
        problems.append(f"read_committed serves {len(h.served)} records, the logs' view holds "
                        f"{len(view)}: served only {extra}, not served {missing}")
    where: dict[bytes, list] = {}
    for key, v in view.items():
        where.setdefault(v, []).append(key)
    for key, v in sorted(h.seen.items()):
        if view.get(key) != v:
            problems.append(f"{v!r} was read (read_committed) at partition {key[0]} offset "
                            f"{key[1]}, but the logs' view holds {view.get(key)!r} there")
    for t in h.txns:
        stored = [len(where.get(v, [])) for _, v in t.records]
        if any(n > 1 for n in stored):
            problems.append(f"{t.who}'s transaction {t.records} is duplicated: {stored}")
        present = sum(1 for n in stored if n)
        if t.outcome == COMMITTED and present != len(t.records):
            problems.append(f"{t.who}'s committed transaction {t.records} is "
                            f"{'lost' if not present else 'partial'} ({present} visible)")
        elif t.outcome == ABORTED and present:
            problems.append(f"{t.who}'s aborted transaction {t.records} is visible "
                            f"({present} records, {t.note or 'aborted cleanly'})")
        elif t.outcome == UNKNOWN and 0 < present < len(t.records):
            problems.append(f"{t.who}'s transaction {t.records} ({t.note}) is partial")
    zombie_values = [v for v in where if v.startswith((b"z-old", b"z-late"))]
    if zombie_values:
        problems.append(f"the zombie's records are visible: {sorted(zombie_values)}")
    if h.zombie is not None and h.zombie.get("commit") == "ok":
        problems.append("the resumed zombie's commit succeeded: it was not fenced")
    if h.copy != h.source[:h.copied_to]:
        first = next((i for i, (a, b) in enumerate(zip(h.copy, h.source)) if a != b),
                     min(len(h.copy), len(h.source)))
        problems.append(f"read-process-write is not exactly once: {len(h.copy)} records "
                        f"copied, the group committed source offset {h.copied_to}; they "
                        f"differ from index {first}")
    return problems
