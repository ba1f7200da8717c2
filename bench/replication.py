"""replication: acks=all throughput at RF=3 against RF=1, and the time a leader's failure costs.

One three-broker cluster on this machine (`minilog cluster`'s layout: every broker a voter of
the controller quorum). Two one-partition topics on it, RF=1 and RF=3 with
min.insync.replicas=2; confluent-kafka's producer (acks=all, idempotent, linger.ms=5) sends the
same 1 KB records to each, timed from the first send to the last acknowledgement. The two are
measured in alternation, one pair per repeat, and each pair gives a ratio (the machine is
shared: what else runs changes between pairs more than within one). Before each timed run the
page cache is recycled for what the run writes (once per replica, see `recycle_page_cache`):
fresh memory costs on first touch here, and RF=3 writes three times as much of it.
Issue 16's target: RF=3 at least 0.5 of RF=1.

Failover: the same producer writes a record every millisecond to one partition of a
three-partition RF=3 topic; the partition's leader is `kill -9`ed; measured is the time from the
kill to the first acknowledgement of a record sent after it, and the time until the metadata
names another leader. It includes the controller noticing the broker is gone
(`broker.session.timeout.ms`, counted from the broker's last heartbeat), electing a leader
from the ISR, the metadata reaching the brokers, and the client finding the new leader:
librdkafka asks again for a partition whose leader is down on a fixed one-second timer, so that
last part is anything from 0 to 1 s. The kill comes at a random moment of that second (a fixed
delay after the producer starts would always land in the same place of it). Target: under the
session timeout plus 1 s. Two cases: the leader is an ordinary broker, and the leader is also
the active controller (the quorum first elects a new controller, after
`controller.quorum.fetch.timeout.ms`, whose session timers start when it takes over, as in
Kafka).
"""
import random
import tempfile
import threading
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from minilog.connector.local_cluster import LocalCluster
from minilog.connector.client import Producer as MinilogProducer

from .produce import recycle_page_cache
from .report import MB, Report, bars, main_args, median

SESSION_MS = 3000
SETTINGS = {"broker.session.timeout.ms": SESSION_MS, "broker.heartbeat.interval.ms": 300,
            "offsets.topic.num.partitions": 3}
SIZE = 1000
RECORDS, QUICK_RECORDS = 100_000, 5_000
FAILOVERS, QUICK_FAILOVERS = 5, 1  # kills per case
STEADY_S, QUICK_STEADY_S = 1.0, 0.2  # steady writing before the kill's random phase


def _producer(bootstrap, **conf):
    return Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                     "linger.ms": 5, "log_level": 3, **conf})


def _wait(condition, what, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except Exception:  # noqa: BLE001 - a cluster still forming answers with errors
            pass
        time.sleep(0.1)
    raise RuntimeError(f"timed out waiting for {what}")


def _leader(admin, topic, partition=0):
    md = admin.list_topics(topic, timeout=5).topics[topic]
    return md.partitions[partition].leader if md.error is None and md.partitions else -1


def _throughput(bootstrap, topic, n):
    """MB/s of record values, first send to last acknowledgement."""
    p, value, errors = _producer(bootstrap), b"x" * SIZE, []
    p.produce(topic, value, on_delivery=lambda e, _: errors.append(e) if e else None)
    p.flush(30)  # connected, leader known, producer id allocated
    start = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value)
                break
            except BufferError:
                p.poll(0.005)
    p.flush(300)
    seconds = time.perf_counter() - start
    if errors:
        raise RuntimeError(f"produce failed: {errors[0]}")
    return n * SIZE / seconds / MB


class _ConfluentWriter:
    """confluent-kafka's producer, writing one record at a time; `acked()` on each success."""

    def __init__(self, bootstrap):
        self.p = _producer(bootstrap, **{"message.timeout.ms": 120000})

    def send(self, topic, partition, acked):
        try:
            self.p.produce(topic, b"f" * SIZE, partition=partition,
                           on_delivery=lambda e, _: acked() if e is None else None)
        except BufferError:
            pass
        self.p.poll(0.001)

    def close(self):
        self.p.flush(60)


class _MinilogWriter:
    """minilog's producer with the same settings: it asks for metadata again after
    `retry.backoff.ms` when its leader's connection fails."""

    def __init__(self, bootstrap):
        self.p = MinilogProducer({"bootstrap.servers": bootstrap, "acks": "all",
                                  "enable.idempotence": True, "linger.ms": 5})

    def send(self, topic, partition, acked):
        self.p.send(topic, b"f" * SIZE, partition=partition,
                    on_delivery=lambda e, _: acked() if e is None else None)
        time.sleep(0.001)

    def close(self):
        self.p.flush(60)
        self.p.close()


def _failover_seconds(cluster, admin, topic, controller, writer=_ConfluentWriter,
                      steady=STEADY_S):
    """(seconds to the first acknowledgement of a record sent after a partition leader's
    kill -9, seconds until the metadata names another leader); the partition is one led by the
    active controller or by another broker."""
    md = admin.list_topics(topic, timeout=5)
    # Preferably a partition led by its preferred replica: a new controller moves leadership
    # back to preferred replicas when it takes over, which would end the outage early.
    led = sorted((p.replicas[0] != p.leader, p.id) for p in md.topics[topic].partitions.values()
                 if (p.leader == md.controller_id) == controller)
    partition = led[0][1]
    acked_after, stop, killed_at, moved_at = [], threading.Event(), [], []
    w = writer(cluster.bootstrap)

    def acked(sent):
        if killed_at and sent > killed_at[0]:
            acked_after.append(time.monotonic())

    def write():
        while not stop.is_set():
            sent = time.monotonic()
            w.send(topic, partition, lambda s=sent: acked(s))

    def watch(victim):
        while not stop.is_set() and not moved_at:
            try:
                if _leader(admin, topic, partition) not in (victim, -1):
                    moved_at.append(time.monotonic())
            except Exception:  # noqa: BLE001 - a broker just died: ask again
                pass
            time.sleep(0.02)
    writer_thread = threading.Thread(target=write, daemon=True)
    writer_thread.start()
    time.sleep(steady + random.random())  # steady writing, a random phase of the client's timer
    victim = _leader(admin, topic, partition)
    watcher = threading.Thread(target=watch, args=(victim,), daemon=True)
    killed_at.append(time.monotonic())
    cluster.broker(victim).kill()
    watcher.start()
    _wait(lambda: acked_after and moved_at, "an acknowledgement after the kill")
    stop.set()
    writer_thread.join(10)
    watcher.join(10)
    w.close()
    cluster.broker(victim).start()
    _wait(lambda: all(len(p.isrs) == 3 for p in
                      admin.list_topics(topic, timeout=5).topics[topic].partitions.values()),
          "the killed broker back in the ISRs")
    if controller:
        _settle(admin)
    return acked_after[0] - killed_at[0], moved_at[0] - killed_at[0]


def _settle(admin, quiet=6.0):
    """Wait until the active controller has stayed the same for `quiet` seconds: a restarted
    former controller may start an election a few seconds after it rejoins, and the next kill
    must not land in it."""
    seen, since = None, time.monotonic()

    def quiet_long_enough():
        nonlocal seen, since
        now = admin.list_topics(timeout=5).controller_id
        if now != seen:
            seen, since = now, time.monotonic()
        return time.monotonic() - since >= quiet
    _wait(quiet_long_enough, "a settled controller quorum")


def _pairs(cluster, tmp, n, repeats, log):
    """RF=1 and RF=3 throughput measured in alternation: [(rf1 MB/s, rf3 MB/s)]."""
    pairs = []
    for _ in range(repeats):
        pair = []
        for topic, rf in (("rf1", 1), ("rf3", 3)):
            recycle_page_cache(tmp, rf * n * SIZE + (64 << 20))
            pair.append(_throughput(cluster.bootstrap, topic, n))
        log(f"rf1 {pair[0]:.1f} MB/s, rf3 {pair[1]:.1f} MB/s: {pair[1] / pair[0]:.2f}")
        pairs.append(pair)
    return pairs


CASES = [("an ordinary broker", False, _ConfluentWriter),
         ("the active controller", True, _ConfluentWriter),
         ("an ordinary broker (minilog's producer)", False, _MinilogWriter)]


def run(args):
    quick = args.quick
    repeats = args.repeats or (1 if quick else 5)
    n = QUICK_RECORDS if quick else RECORDS
    rep = Report("replication", quick, args.out, {"value_bytes": SIZE, "records": n,
                                                  "repeats": repeats, "brokers": 3,
                                                  "broker.session.timeout.ms": SESSION_MS,
                                                  "failovers": QUICK_FAILOVERS if quick else FAILOVERS})
    extra = [x for k, v in SETTINGS.items() for x in ("-o", f"{k}={v}")]
    with tempfile.TemporaryDirectory(prefix="minilog-bench-replication-") as tmp, \
            LocalCluster(3, data_dir=tmp, extra=extra) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        _wait(lambda: len(admin.list_topics(timeout=5).brokers) == 3, "three live brokers")
        for topic, rf in (("rf1", 1), ("rf3", 3)):
            admin.create_topics([NewTopic(topic, 1, rf, config={"min.insync.replicas": str(
                min(rf, 2))})])[topic].result(60)
            _wait(lambda t=topic: _leader(admin, t) >= 0, f"a leader for {topic}")
        pairs = _pairs(cluster, tmp, n, repeats, rep.log)
        ratios = [rf3 / rf1 for rf1, rf3 in pairs]
        rows = [{"topic": topic, "mbs": median(col), "min": min(col), "max": max(col),
                 "rps": median(col) * MB / SIZE} for topic, col in zip(("rf1", "rf3"), zip(*pairs))]
        admin.create_topics([NewTopic("failover", 3, 3, config={"min.insync.replicas": "2"})])[
            "failover"].result(60)
        _wait(lambda: all(_leader(admin, "failover", i) >= 0 for i in range(3)), "leaders")
        kills = QUICK_FAILOVERS if quick else FAILOVERS
        steady = QUICK_STEADY_S if quick else STEADY_S
        failover = {}
        for case, controller, writer in CASES:
            runs = [_failover_seconds(cluster, admin, "failover", controller, writer, steady)
                    for _ in range(kills)]
            for acked, moved in runs:
                rep.log(f"leader was {case}: new leader named after {moved:.2f} s, "
                        f"first acknowledgement after {acked:.2f} s")
            acked, moved = zip(*runs)
            failover[case] = {"case": case, "seconds": median(acked), "min": min(acked),
                              "max": max(acked), "leader_named": median(moved), "runs": runs}
        rep.section("acks=all produce into a three-broker cluster, confluent-kafka, 1 KB records "
                    f"(median of {repeats}, RF=1 and RF=3 alternating)",
                    rows, [("topic", "topic"), ("mbs", "MB/s"), ("min", "min"), ("max", "max"),
                           ("rps", "records/s")])
        rep.section(f"kill -9 of the partition leader (broker.session.timeout.ms={SESSION_MS}): "
                    f"seconds to the first acknowledged write sent after the kill (median of "
                    f"{kills})", list(failover.values()),
                    [("case", "the killed leader was"), ("seconds", "seconds"), ("min", "min"),
                     ("max", "max"), ("leader_named", "new leader in metadata")])
        rep.ratio("acks=all throughput RF=3/RF=1", median(ratios), 1,
                  f"median of the pairs, {min(ratios):.2f}-{max(ratios):.2f}; "
                  "issue 16 target >= 0.5")
        for case, row in failover.items():
            rep.ratio(f"failover time / (session timeout + 1 s), leader was {case}",
                      row["seconds"], SESSION_MS / 1000 + 1,
                      f"median, {row['min']:.2f}-{row['max']:.2f} s; issue 16 target < 1")
    rep.plot("throughput", lambda plt: bars(
        plt, ["RF=1", "RF=3"], {"acks=all": [r["mbs"] for r in rows]}, "MB/s",
        "acks=all produce, three-broker cluster, 1 KB records"))
    rep.finish()


def main(argv=None):
    run(main_args(argv))


if __name__ == "__main__":
    main()
