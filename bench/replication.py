"""replication: acks=all throughput at RF=3 against RF=1, and the time a leader's failure costs.

One three-broker cluster on this machine (`minilog cluster`'s layout: every broker a voter of
the controller quorum). Two one-partition topics on it, RF=1 and RF=3 with
min.insync.replicas=2; confluent-kafka's producer (acks=all, idempotent, linger.ms=5) sends the
same 1 KB records to each, timed from the first send to the last acknowledgement; the median of
the repeats is kept. Issue 16's target: RF=3 at least 0.5 of RF=1.

Failover: the same producer writes a record every millisecond to one partition of a
three-partition RF=3 topic; the partition's leader is `kill -9`ed; measured is the time from the
kill to the first acknowledgement of a record sent after it. It includes the controller noticing
the broker is gone (`broker.session.timeout.ms`), electing a leader from the ISR, the metadata
reaching the brokers, and the client finding the new leader. Target: under the session timeout
plus 1 s. Two cases: the leader is an ordinary broker, and the leader is also the active
controller (the quorum first elects a new controller, after `controller.quorum.fetch.timeout.ms`,
whose session timers start when it takes over, as in Kafka).
"""
import tempfile
import threading
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from minilog.broker.local_cluster import LocalCluster

from .report import MB, Report, bars, main_args, median

SESSION_MS = 3000
SETTINGS = {"broker.session.timeout.ms": SESSION_MS, "broker.heartbeat.interval.ms": 300,
            "offsets.topic.num.partitions": 3}
SIZE = 1000
RECORDS, QUICK_RECORDS = 100_000, 5_000


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


def _failover_seconds(cluster, admin, topic, controller):
    """Seconds from a partition leader's kill -9 to the first acknowledgement of a later record;
    the partition is one led by the active controller or by another broker."""
    md = admin.list_topics(topic, timeout=5)
    partition = next(p.id for p in md.topics[topic].partitions.values()
                     if (p.leader == md.controller_id) == controller)
    acked_after, stop, killed_at = [], threading.Event(), []
    p = _producer(cluster.bootstrap, **{"message.timeout.ms": 120000})

    def on_delivery(err, msg, sent=None):
        if err is None and killed_at and sent is not None and sent > killed_at[0]:
            acked_after.append(time.monotonic())

    def write():
        while not stop.is_set():
            sent = time.monotonic()
            try:
                p.produce(topic, b"f" * SIZE, partition=partition,
                          on_delivery=lambda e, m, s=sent: on_delivery(e, m, s))
            except BufferError:
                pass
            p.poll(0.001)
    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    time.sleep(1.0)  # steady writing before the kill
    victim = _leader(admin, topic, partition)
    killed_at.append(time.monotonic())
    cluster.broker(victim).kill()
    _wait(lambda: acked_after, "an acknowledgement after the kill")
    stop.set()
    writer.join(10)
    p.flush(60)
    cluster.broker(victim).start()
    _wait(lambda: all(len(p.isrs) == 3 for p in
                      admin.list_topics(topic, timeout=5).topics[topic].partitions.values()),
          "the killed broker back in the ISRs")
    return acked_after[0] - killed_at[0]


def run(args):
    quick = args.quick
    repeats = args.repeats or (1 if quick else 3)
    n = QUICK_RECORDS if quick else RECORDS
    rep = Report("replication", quick, args.out, {"value_bytes": SIZE, "records": n,
                                                  "repeats": repeats, "brokers": 3,
                                                  "broker.session.timeout.ms": SESSION_MS})
    extra = [x for k, v in SETTINGS.items() for x in ("-o", f"{k}={v}")]
    with tempfile.TemporaryDirectory(prefix="minilog-bench-replication-") as tmp, \
            LocalCluster(3, data_dir=tmp, extra=extra) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        _wait(lambda: len(admin.list_topics(timeout=5).brokers) == 3, "three live brokers")
        for topic, rf in (("rf1", 1), ("rf3", 3)):
            admin.create_topics([NewTopic(topic, 1, rf, config={"min.insync.replicas": str(
                min(rf, 2))})])[topic].result(60)
            _wait(lambda t=topic: _leader(admin, t) >= 0, f"a leader for {topic}")
        rows = []
        for topic in ("rf1", "rf3"):
            mbs = median([_throughput(cluster.bootstrap, topic, n) for _ in range(repeats)])
            rows.append({"topic": topic, "mbs": mbs, "rps": mbs * MB / SIZE})
            rep.log(f"{topic}: {mbs:.1f} MB/s acks=all")
        admin.create_topics([NewTopic("failover", 3, 3, config={"min.insync.replicas": "2"})])[
            "failover"].result(60)
        _wait(lambda: all(_leader(admin, "failover", i) >= 0 for i in range(3)), "leaders")
        failover = {case: median([_failover_seconds(cluster, admin, "failover", controller)
                                  for _ in range(repeats)])
                    for case, controller in (("an ordinary broker", False),
                                             ("the active controller", True))}
        rep.section("acks=all produce into a three-broker cluster, confluent-kafka, 1 KB records",
                    rows, [("topic", "topic"), ("mbs", "MB/s"), ("rps", "records/s")])
        rep.section(f"kill -9 of the partition leader (broker.session.timeout.ms={SESSION_MS}): "
                    "seconds to the first acknowledged write sent after the kill",
                    [{"case": k, "seconds": v} for k, v in failover.items()],
                    [("case", "the killed leader was"), ("seconds", "seconds")])
        rep.ratio("acks=all throughput RF=3/RF=1", rows[1]["mbs"], rows[0]["mbs"],
                  "issue 16 target >= 0.5")
        for case, seconds in failover.items():
            rep.ratio(f"failover time / (session timeout + 1 s), leader was {case}", seconds,
                      SESSION_MS / 1000 + 1, "issue 16 target < 1")
    rep.plot("throughput", lambda plt: bars(
        plt, ["RF=1", "RF=3"], {"acks=all": [r["mbs"] for r in rows]}, "MB/s",
        "acks=all produce, three-broker cluster, 1 KB records"))
    rep.finish()


def main(argv=None):
    run(main_args(argv))


if __name__ == "__main__":
    main()
